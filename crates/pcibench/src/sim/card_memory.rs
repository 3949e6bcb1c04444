//! Card memory behind a simulated DMA engine (the AXI side of XDMA/QDMA, a card's NVRAM): host
//! pages with bounds checks and one lock serializing the engines' copies. With the aliasing fault
//! (`PCIBENCH_SIM_FAULT=alias`) only its lower half holds data: an address in the upper half
//! reaches the byte half the size below it, as DDR with an address line unconnected answers at
//! half its size (fpga_sio's aliasing test found U200 DDR4 channels doing so); `pcibench memtest`
//! must catch it.

use super::mem::Pages;
use crate::{Error, Result};
use std::sync::Mutex;

/// `PCIBENCH_SIM_FAULT=alias`: every card's memory answers at half its size (the variable
/// `sim::overrun` also reads: one fault per process).
pub const ALIAS: &str = "alias";
const FAULT_ENV: &str = "PCIBENCH_SIM_FAULT";

/// Card (AXI) memory: the engine's other side.
pub struct CardMemory {
    pages: Pages,
    pub size: u64,
    /// The aliasing fault: bytes from here on are the bytes this far below.
    alias: Option<u64>,
    /// Serializes the channels' copies (two engines writing the same card bytes at once is a
    /// race on hardware too, but must not be one in Rust).
    lock: Mutex<()>,
}

impl CardMemory {
    pub fn new(pages: Pages, size: u64) -> CardMemory {
        let alias = (std::env::var(FAULT_ENV).is_ok_and(|v| v == ALIAS) && size >= 2).then_some(size / 2);
        CardMemory { pages, size, alias, lock: Mutex::new(()) }
    }

    /// Turn the aliasing fault on (at half the size) or off, for one card.
    pub fn set_alias(&mut self, on: bool) {
        self.alias = (on && self.size >= 2).then_some(self.size / 2);
    }

    /// Where `[off, off+len)` lies in the pages: one piece, or two where it crosses into the
    /// aliased half (offset in the pages, length, offset in the caller's bytes).
    fn pieces(&self, off: u64, len: u64) -> Vec<(u64, u64, u64)> {
        let Some(half) = self.alias else { return vec![(off, len, 0)] };
        let end = off + len;
        let mut v = Vec::with_capacity(2);
        if off < half {
            v.push((off, end.min(half) - off, 0));
        }
        if end > half {
            let from = off.max(half);
            v.push((from - half, end - from, from - off));
        }
        v
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
        for (at, len, from) in self.pieces(addr, out.len() as u64) {
            self.pages.read(at, &mut out[from as usize..(from + len) as usize])?;
        }
        Ok(())
    }

    pub fn write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.range(addr, data.len() as u64).ok_or_else(|| self.refuse(addr, data.len()))?;
        let _g = self.guard();
        for (at, len, from) in self.pieces(addr, data.len() as u64) {
            self.pages.write(at, &data[from as usize..(from + len) as usize])?;
        }
        Ok(())
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
        for (at, n, from) in self.pieces(off as u64, len as u64) {
            // SAFETY: per the function contract (each piece lies inside the source and, aliased
            // or not, inside card memory); card memory and host buffers never overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(src.add(from as usize), self.pages.as_ptr().add(at as usize), n as usize)
            }
        }
    }

    /// Card → host.
    ///
    /// # Safety
    /// As `copy_in`, with `dst` valid for writes of `len` bytes.
    pub unsafe fn copy_out(&self, off: usize, dst: *mut u8, len: usize) {
        let _g = self.guard();
        for (at, n, from) in self.pieces(off as u64, len as u64) {
            // SAFETY: per the function contract, piece by piece as in `copy_in`.
            unsafe {
                std::ptr::copy_nonoverlapping(self.pages.as_ptr().add(at as usize), dst.add(from as usize), n as usize)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_the_fault_the_upper_half_is_the_lower_half() {
        let mut m = CardMemory::new(Pages::new("card memory", 64).unwrap(), 64);
        m.set_alias(true);
        m.write(0, &[1u8; 64]).unwrap();
        m.write(40, &[7u8; 16]).unwrap();
        let mut got = [0u8; 64];
        m.read(0, &mut got).unwrap();
        assert_eq!(&got[8..24], &[7u8; 16], "written at 40, found at 8");
        assert_eq!(got[..32], got[32..], "each half reads the same bytes");
        // A copy crossing the middle is split there.
        let src = [9u8; 8];
        // SAFETY: 8 bytes from a live array, at card offsets 28..36, inside the 64 bytes.
        unsafe { m.copy_in(28, src.as_ptr(), 8) };
        m.read(0, &mut got).unwrap();
        assert_eq!(&got[0..4], &[9u8; 4], "bytes 32..36 landed at 0..4");
        assert_eq!(&got[28..32], &[9u8; 4]);
        m.set_alias(false);
        m.write(40, &[5u8; 8]).unwrap();
        m.read(0, &mut got).unwrap();
        assert_eq!(&got[8..16], &[7u8; 8], "without the fault each address is its own");
    }
}
