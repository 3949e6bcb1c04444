//! A fault every simulated engine can be built with: each descriptor's data also lands one byte
//! past its end (that byte changed), as an engine moving 4-byte steps writes 4,100 bytes for a
//! 4,097-byte transfer (seen on a vendor model). Verification must catch it (`bench::dma::guard`,
//! exit status 3 with the offset named). `PCIBENCH_SIM_FAULT=overrun` turns it on for every card
//! a process builds (the CLI's tests); a model's `set_overrun` for one card.

use super::card_memory::CardMemory;
use super::host_map::HostMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The environment variable and the value that turn the fault on.
pub const ENV: &str = "PCIBENCH_SIM_FAULT";
pub const OVERRUN: &str = "overrun";

/// Whether a model writes one byte past each descriptor's end, and what it last wrote where.
#[derive(Debug)]
pub struct Overrun {
    on: AtomicBool,
    /// (host or card, address) → the byte last written there. A byte still holding it is left:
    /// flipping it again on every run would undo the fault after an even number of runs.
    written: Mutex<HashMap<(bool, u64), u8>>,
}

impl Default for Overrun {
    /// As the environment says.
    fn default() -> Self {
        Overrun {
            on: AtomicBool::new(std::env::var(ENV).is_ok_and(|v| v == OVERRUN)),
            written: Mutex::new(HashMap::new()),
        }
    }
}

impl Overrun {
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::Release);
    }

    /// The byte to leave at `at` where `now` is there: its complement, unless the fault put
    /// `now` there already.
    fn next(&self, card: bool, at: u64, now: u8) -> Option<u8> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if w.get(&(card, at)) == Some(&now) {
            return None;
        }
        w.insert((card, at), !now);
        Some(!now)
    }

    /// After a descriptor wrote host memory up to `end`: the byte there overwritten, if the card
    /// can reach it.
    pub fn host(&self, host: &HostMap, end: u64) {
        let mut b = [0u8];
        if self.on.load(Ordering::Acquire) && host.read(end, &mut b).is_ok() {
            if let Some(v) = self.next(false, end, b[0]) {
                let _ = host.write(end, &[v]);
            }
        }
    }

    /// After a descriptor wrote card memory up to `end`: the byte there overwritten, if in card
    /// memory.
    pub fn card(&self, card: &CardMemory, end: u64) {
        let mut b = [0u8];
        if self.on.load(Ordering::Acquire) && card.read(end, &mut b).is_ok() {
            if let Some(v) = self.next(true, end, b[0]) {
                let _ = card.write(end, &[v]);
            }
        }
    }
}
