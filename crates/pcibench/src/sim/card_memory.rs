//! Card memory behind a simulated DMA engine (the AXI side of XDMA/QDMA, a card's NVRAM): host
//! pages with bounds checks and one lock serializing the engines' copies.

use super::mem::Pages;
use crate::{Error, Result};
use std::sync::Mutex;

/// Card (AXI) memory: the engine's other side.
pub struct CardMemory {
    pages: Pages,
    pub size: u64,
    /// Serializes the channels' copies (two engines writing the same card bytes at once is a
    /// race on hardware too, but must not be one in Rust).
    lock: Mutex<()>,
}

impl CardMemory {
    pub fn new(pages: Pages, size: u64) -> CardMemory {
        CardMemory { pages, size, lock: Mutex::new(()) }
    }

    /// `[addr, addr+len)` as an offset, if it lies inside card memory.
    pub fn range(&self, addr: u64, len: u64) -> Option<usize> {
        (addr.checked_add(len)? <= self.size).then_some(addr as usize)
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<()> {
        self.range(addr, out.len() as u64).ok_or_else(|| self.refuse(addr, out.len()))?;
        let _g = self.guard();
        self.pages.read(addr, out)
    }

    pub fn write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.range(addr, data.len() as u64).ok_or_else(|| self.refuse(addr, data.len()))?;
        let _g = self.guard();
        self.pages.write(addr, data)
    }

    /// Fault `[addr, addr+len)` in (clipped to card memory) before a run uses it.
    pub fn populate(&self, addr: u64, len: u64) {
        let end = addr.saturating_add(len).min(self.size);
        if addr < end {
            self.pages.populate(addr, end - addr);
        }
    }

    fn refuse(&self, addr: u64, len: usize) -> Error {
        Error::Refused(format!(
            "{len} bytes at card address {addr:#x} are outside the sim card's {:#x} bytes of card memory",
            self.size
        ))
    }

    /// Host → card.
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes for the whole call (a range held by the host
    /// map's read lock) and `off + len` must be inside card memory.
    pub unsafe fn copy_in(&self, off: usize, src: *const u8, len: usize) {
        let _g = self.guard();
        // SAFETY: per the function contract; card memory and host buffers never overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, self.pages.as_ptr().add(off), len) }
    }

    /// Card → host.
    ///
    /// # Safety
    /// As `copy_in`, with `dst` valid for writes of `len` bytes.
    pub unsafe fn copy_out(&self, off: usize, dst: *mut u8, len: usize) {
        let _g = self.guard();
        // SAFETY: per the function contract.
        unsafe { std::ptr::copy_nonoverlapping(self.pages.as_ptr().add(off), dst, len) }
    }
}
