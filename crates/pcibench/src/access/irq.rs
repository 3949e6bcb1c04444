//! Interrupts delivered to this process: what an access path hands out (`DeviceAccess::interrupts`)
//! and what an engine that completes by interrupt waits on (`Engine::run_interrupt`).
//!
//! A PCI function signals in one of three ways (PCI Local Bus 3.0 §6.8 for MSI and MSI-X, §2.2.6
//! for INTx). VFIO routes each to an eventfd per vector (`VFIO_DEVICE_SET_IRQS` with
//! `VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER`); an INTx line is level-triggered, so
//! vfio-pci masks it when it fires (`vfio_intx_handler`) and it stays masked until user space,
//! having cleared the device's cause, unmasks it (`Interrupts::unmask`). vfio-user carries the
//! same through DEVICE_SET_IRQS, and a simulated card raises the same shape from its model.

use crate::Result;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// How a function signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IrqKind {
    /// The legacy level-triggered line (one per function): masked by VFIO when it fires.
    Intx,
    /// Message Signalled Interrupts: up to 32 vectors, a power of two, contiguous data.
    Msi,
    /// MSI-X: up to 2048 vectors, each with its own table entry and mask bit.
    MsiX,
}

impl fmt::Display for IrqKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IrqKind::Intx => "INTx",
            IrqKind::Msi => "MSI",
            IrqKind::MsiX => "MSI-X",
        })
    }
}

/// What an engine asks an access path for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqRequest {
    /// `None`: the best the function offers, MSI-X, else MSI, else INTx (the order libxdma's
    /// `xdma_irq_setup` and libqdma try them in). `Some`: that kind or a one-line refusal.
    pub kind: Option<IrqKind>,
    /// Vectors wanted (MSI and MSI-X; INTx has one). A path may grant fewer where the function
    /// has fewer: `Interrupts::vectors` says how many were routed, and the engine shares them.
    pub vectors: u32,
}

impl IrqRequest {
    /// The best kind the function offers, with up to `vectors` vectors.
    pub const fn any(vectors: u32) -> Self {
        IrqRequest { kind: None, vectors }
    }
    /// Exactly `kind`, with up to `vectors` vectors.
    pub const fn only(kind: IrqKind, vectors: u32) -> Self {
        IrqRequest { kind: Some(kind), vectors }
    }
}

/// What fired during one wait: a count per routed vector (index = vector number).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fired {
    counts: Vec<u64>,
}

impl Fired {
    /// Nothing fired on any of `vectors` vectors.
    pub fn none(vectors: u32) -> Self {
        Fired { counts: vec![0; vectors as usize] }
    }
    /// From a count per vector.
    pub fn from_counts(counts: Vec<u64>) -> Self {
        Fired { counts }
    }
    /// How often `vector` fired (0 for a vector that is not routed).
    pub fn vector(&self, vector: u32) -> u64 {
        self.counts.get(vector as usize).copied().unwrap_or(0)
    }
    /// Interrupts on every vector together.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// Whether nothing fired (a wait that timed out).
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
    /// The vectors that fired, in order.
    pub fn vectors(&self) -> impl Iterator<Item = u32> + '_ {
        self.counts.iter().enumerate().filter(|(_, &n)| n > 0).map(|(v, _)| v as u32)
    }
    /// Count per vector, for reports.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
}

/// A device's interrupts routed to this process; routed for as long as the value lives, and torn
/// down (the function's interrupt enables left as found) when it is dropped.
pub trait Interrupts: Send + Sync {
    /// The kind that was routed.
    fn kind(&self) -> IrqKind;
    /// Vectors routed (INTx: 1).
    fn vectors(&self) -> u32;
    /// Wait up to `timeout` for an interrupt on any vector; what fired since the last wait
    /// (`Fired::is_empty`: timed out). `Duration::ZERO` only collects what is pending.
    fn wait(&self, timeout: Duration) -> Result<Fired>;
    /// INTx only: unmask the line once the handler has cleared the device's cause (the line is
    /// masked when it fires, so a level that is still asserted cannot storm). MSI and MSI-X are
    /// edge messages with nothing to unmask: the default does nothing.
    fn unmask(&self) -> Result<()> {
        Ok(())
    }
    /// What it is, for reports: "MSI vector 0 (VFIO eventfd)".
    fn describe(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fired_counts_per_vector() {
        let f = Fired::from_counts(vec![0, 2, 0, 1]);
        assert_eq!((f.vector(1), f.vector(3), f.vector(9), f.total()), (2, 1, 0, 3));
        assert_eq!(f.vectors().collect::<Vec<_>>(), vec![1, 3]);
        assert!(!f.is_empty());
        assert!(Fired::none(4).is_empty());
        assert_eq!(IrqKind::MsiX.to_string(), "MSI-X");
        assert_eq!(IrqRequest::any(4), IrqRequest { kind: None, vectors: 4 });
    }
}
