//! A physically contiguous range handed out in page-aligned pieces, each mapped from a file at
//! its offset: the bookkeeping u-dma-buf (`/dev/NAME`) and reserved memory (`/dev/mem`) share.
//! A piece goes back to the range when its buffer is dropped.

use super::mapped::MappedBuffer;
use crate::dma::{Addressing, Segment};
use crate::os::mmap::{page_size, Mmap};
use crate::os::space::Space;
use crate::{Error, Result};
use std::sync::{Arc, Mutex};

pub struct Region {
    phys: u64,
    size: u64,
    space: Arc<Mutex<Space>>,
}

/// One reserved piece: `len` bytes at offset `off` in the range, bus address `bus`.
#[derive(Debug, Clone, Copy)]
pub struct Piece {
    pub off: u64,
    pub bus: u64,
    pub len: u64,
}

impl Region {
    pub fn new(phys: u64, size: u64) -> Region {
        Region { phys, size, space: Arc::new(Mutex::new(Space::new())) }
    }

    /// A free page-aligned piece of at least `len` bytes; when none is left, `full(wanted, in
    /// use)` says why.
    pub fn reserve(&self, len: usize, full: impl FnOnce(u64, u64) -> Error) -> Result<Piece> {
        if len == 0 {
            return Err(Error::usage("a DMA buffer needs a size above 0"));
        }
        let page = page_size() as u64;
        let want = (len as u64).div_ceil(page) * page;
        let mut s = self.space.lock().map_err(|_| Error::Device("DMA buffer bookkeeping poisoned".into()))?;
        let used = s.reserved();
        let off = s.reserve(&[(0, self.size - 1)], want, page, 0, self.size - 1).ok_or_else(|| full(want, used))?;
        Ok(Piece { off, bus: self.phys + off, len: want })
    }

    /// Give a piece back (when mapping it failed).
    pub fn release(&self, p: &Piece) {
        if let Ok(mut s) = self.space.lock() {
            s.release(p.off);
        }
    }

    /// The mapped piece as a physically addressed buffer that returns to the range on drop.
    pub fn buffer(&self, p: Piece, mem: Mmap, describe: String) -> MappedBuffer {
        let space = self.space.clone();
        MappedBuffer::new(mem, vec![Segment { offset: 0, bus: p.bus, len: p.len }], Addressing::Physical, describe)
            .on_release(move || {
                if let Ok(mut s) = space.lock() {
                    s.release(p.off);
                }
            })
    }
}
