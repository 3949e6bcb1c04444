//! `--trace`: every DMA buffer made for a traced device is a line (how it was made, its bus
//! segments), so the addresses in the descriptors that follow can be told apart: descriptor
//! memory, writeback words, data.

use crate::dma::{DmaAllocator, DmaBuffer};
use crate::trace::Tracer;
use crate::Result;

/// Segments listed per buffer: a scattered 1 GiB buffer has 262,144 (one per page), and its
/// first ones are enough to place it.
const SEGMENTS_LISTED: usize = 64;

pub struct TracedAllocator {
    inner: Box<dyn DmaAllocator>,
    trace: Tracer,
}

impl TracedAllocator {
    pub fn new(inner: Box<dyn DmaAllocator>, trace: Tracer) -> TracedAllocator {
        TracedAllocator { inner, trace }
    }
}

impl DmaAllocator for TracedAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let buf = self.inner.alloc(len)?;
        let all = buf.segments();
        let listed: Vec<(u64, u64, u64)> = all.iter().take(SEGMENTS_LISTED).map(|s| (s.offset, s.bus, s.len)).collect();
        self.trace.buffer(&buf.describe(), buf.len() as u64, &listed, all.len());
        Ok(buf)
    }

    fn dma_bits(&self) -> u32 {
        self.inner.dma_bits()
    }
}
