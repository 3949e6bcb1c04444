//! What the engine models (XDMA, QDMA, the MM-5425 NVRAM card) answer the same way to whoever
//! drives them (`access::sim`, `pcibench serve`, tests): the violations they report and the
//! register widths they refuse.

use super::irq::SimIrq;
use crate::mmio::Width;
use crate::{Error, Result};
use std::sync::Mutex;

/// A model's own violations followed by its interrupts' (one nothing services, a storm), each
/// oldest first: what `RegisterModel::violations` reports.
pub(crate) fn violations(own: &Mutex<Vec<String>>, irq: &SimIrq) -> Vec<String> {
    let mut v = own.lock().unwrap_or_else(|e| e.into_inner()).clone();
    v.extend(irq.violations());
    v
}

/// Refuse all but 32-bit accesses to BAR `index`, which holds `ip`'s registers: the XDMA and QDMA
/// register spaces are 32-bit only (PG195, PG302).
pub(crate) fn only_32bit(ip: &str, index: u8, width: Width) -> Result<()> {
    if width == Width::B32 {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{ip} registers are 32-bit only: BAR{index} of the sim card refuses {width}-wide access (use --width 32)"
    )))
}
