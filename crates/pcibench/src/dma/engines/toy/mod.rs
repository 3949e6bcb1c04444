//! A toy fifth engine, compiled for tests only: what adding an engine takes. This folder and its
//! line in `DRIVERS` are the whole change; `dma`, `latency`, `info` and `run` drive it through
//! the registry and the engine's own facts (its window, largest transfer, batches), as the test
//! below shows on a card built for it.
//!
//! The card: BAR0 holds the engine's identifier (`MAGIC` at offset 0), BAR2 is plain memory. The
//! engine is its own hardware: a transfer is a copy between the host buffer (through its CPU
//! pointer) and a card memory the engine keeps, done when `run` is called.

use super::{Detected, EngineDriver, EngineOptions, Opened};
use crate::access::{DeviceAccess, IoMode, Mapping};
use crate::dma::{DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::mmio::Width;
use crate::pci::DeviceInfo;
use crate::{Error, Result};
use std::time::Duration;

/// The toy card's ids (a vendor id no real device uses here: 0xffff is "no device").
pub const VENDOR: u16 = 0xffff;
pub const DEVICE: u16 = 0x70e0;
/// What BAR0 reads at offset 0 on the toy card.
pub const MAGIC: u32 = 0x7047_dead;
/// Bytes of card memory behind the engine.
pub const CARD_SIZE: u64 = 64 << 10;
/// The longest transfer it takes.
pub const MAX_TRANSFER: u64 = 16 << 10;

pub struct ToyDriver;

impl EngineDriver for ToyDriver {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn about(&self) -> &'static str {
        "a test-only engine that copies with the CPU"
    }

    /// The ids first, then the identifier register (read only).
    fn detect(&self, info: &DeviceInfo, dev: &dyn DeviceAccess) -> Result<Option<Detected>> {
        if (info.vendor_id, info.device_id) != (VENDOR, DEVICE) {
            return Ok(None);
        }
        let bar = dev.open_bar_read_only(0, Mapping::Uc, IoMode::Mmap)?;
        if bar.read(0, Width::B32)? != MAGIC as u64 {
            return Ok(None);
        }
        Ok(Some(Detected {
            engine: self.name(),
            register_bars: vec![0],
            summary: format!("toy engine in BAR0: {} KiB of card memory", CARD_SIZE >> 10),
            details: serde_json::json!({ "bar": 0, "card_size": CARD_SIZE }),
        }))
    }

    fn open(
        &self,
        _found: &Detected,
        _info: &DeviceInfo,
        _dev: &dyn DeviceAccess,
        _alloc: &dyn DmaAllocator,
        opts: &EngineOptions,
    ) -> Result<Opened> {
        if opts.card_size.is_some() || opts.card_addr.is_some() || opts.channel.is_some() {
            return Err(Error::usage("the toy engine has one fixed window: drop --card-size, --card-addr, --channel"));
        }
        Ok(Opened { engine: Box::new(ToyEngine { card: vec![0; CARD_SIZE as usize], next: None }), card_offset: 0 })
    }
}

/// The prepared copy: between `ptr` (the host buffer at the transfer's offset) and the card.
struct Prepared {
    t: Transfer,
    ptr: *mut u8,
}

// SAFETY: `ptr` points into a DmaBuffer (Send + Sync) that outlives the prepared transfer.
unsafe impl Send for Prepared {}

pub struct ToyEngine {
    card: Vec<u8>,
    next: Option<Prepared>,
}

impl Engine for ToyEngine {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn card_size(&self) -> u64 {
        CARD_SIZE
    }

    fn max_transfer(&self) -> u64 {
        MAX_TRANSFER
    }

    /// A small total: the toy is a demonstration, not a measurement.
    fn default_total(&self, size: u64) -> u64 {
        size.saturating_mul(16)
    }

    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        let fits_host = t.buf_offset.checked_add(t.len).is_some_and(|end| end <= buf.len() as u64);
        let fits_card = t.card_addr.checked_add(t.len).is_some_and(|end| end <= CARD_SIZE);
        if !fits_host || !fits_card || t.len > MAX_TRANSFER {
            return Err(Error::usage(format!("toy transfer {t:?} does not fit the buffer or the card")));
        }
        // SAFETY: buf_offset + len is inside the buffer (checked above).
        let ptr = unsafe { buf.as_ptr().add(t.buf_offset as usize) };
        self.next = Some(Prepared { t: *t, ptr });
        Ok(())
    }

    fn run(&mut self, _timeout: Duration) -> Result<()> {
        let p = self.next.as_ref().ok_or_else(|| Error::Device("toy engine: nothing prepared".into()))?;
        let (at, n) = (p.t.card_addr as usize, p.t.len as usize);
        // SAFETY: `prepare` checked that `n` bytes at `ptr` lie in the buffer, which the runner
        // leaves alone while the engine runs (the DmaBuffer contract); `card` is ours.
        unsafe {
            match p.t.dir {
                crate::direction::Direction::H2c => {
                    std::ptr::copy_nonoverlapping(p.ptr, self.card[at..at + n].as_mut_ptr(), n)
                }
                crate::direction::Direction::C2h => std::ptr::copy_nonoverlapping(self.card[at..].as_ptr(), p.ptr, n),
            }
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<String> {
        self.next = None;
        Ok("idle".into())
    }
}

#[cfg(test)]
mod tests;
