//! libqdma's indirect interrupt mode (`INDIRECT_INTR_MODE`): the interrupt aggregation ring.
//! One ring per function (`QDMA_NUM_DATA_VEC_FOR_INTR_CXT` is 1), ring index = function
//! number (`get_intr_ring_index`: data vector − first data vector + function ×
//! vectors-per-function), one 4 KiB page of 512 eight-byte entries (`QDMA_INTR_COAL_RING_SIZE`,
//! page-size code 0), starting colour 1 (`intr_ring_setup`). Its interrupt context (select 8)
//! is cleared, then written with valid, the ring's vector, the colour, the base and, on EQDMA and
//! CPM5, the function (`qdma_intr_context_setup`, `*_indirect_intr_context_write`); pcibench reads
//! it back. Each queue's software context then holds the ring index in its vector field with
//! `intr_aggr` set (`make_sw_context`).
//!
//! The handler is `data_intr_aggregate`'s: from the last consumed index, while an entry's colour
//! [63] matches the expected one, service the queue it names (queue [62:39], type [38]: 0 H2C,
//! 1 C2H), step on, flipping the expected colour at the wrap; then write the interrupt CIDX
//! (`QDMA_DMAP_SEL_INT_CIDX`, at +0x0 of the last serviced queue's doorbells: CIDX [15:0], ring
//! index [23:16]; `qdma_queue_intr_cidx_update`), which also re-arms the ring. A wake that finds
//! no entry writes the same CIDX again, as libqdma's "stale update" does.
//!
//! libqdma offers the mode on every IP it drives (the CPM4 entry differs, `qdma_intr_ring_cpm`:
//! CPM4 is refused before this); Linux's `drivers/dma/amd/qdma` uses aggregation rings only.

use super::regs::*;
use super::ring::Ring;
use crate::access::BarRegion;
use crate::direction::Direction;
use crate::dma::{DmaAllocator, DmaBuffer};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};

/// How queues signal completion by interrupt: libqdma's driver modes with interrupts
/// (`enum qdma_drv_mode`), selected with `--qdma-intr`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QdmaIntr {
    /// `DIRECT_INTR_MODE`: each queue raises an MSI-X vector of its own.
    #[default]
    Direct,
    /// `INDIRECT_INTR_MODE`: queues write entries into the function's interrupt ring, which
    /// raises one vector.
    Aggregated,
}

impl QdmaIntr {
    pub fn name(&self) -> &'static str {
        match self {
            QdmaIntr::Direct => "direct",
            QdmaIntr::Aggregated => "aggregated",
        }
    }
}

/// The function's interrupt ring as the driver keeps it.
pub(crate) struct IntrRing {
    /// Keeps the ring's memory alive.
    _mem: Box<dyn DmaBuffer>,
    ptr: *mut u8,
    pub bus: u64,
    pub entries: u32,
    /// The ring index (the function number): context id and the CIDX update's ring field.
    pub index: u32,
    /// Next entry to look at, and the colour it must have to be new.
    pub cidx: u32,
    pub color: bool,
    /// Function-relative queue whose doorbells the last CIDX update went to.
    last_queue: Option<u16>,
    /// The ring's context is programmed and valid: a CIDX update goes to the card only then (a
    /// vector that fires late, after the context was invalidated at a run's end, is a stale wake
    /// with no ring to answer; libqdma writes the CIDX only while the ring is set up).
    pub live: bool,
}

// SAFETY: `ptr` points into `_mem`, owned by the ring; only the engine's thread touches it.
unsafe impl Send for IntrRing {}

/// Where an interrupt ring entry says to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub qid: u32,
    pub dir: Direction,
}

impl IntrRing {
    /// One page of entries, 4 KiB aligned and bus-contiguous, for ring `index`.
    pub fn allocate(alloc: &dyn DmaAllocator, index: u32) -> Result<IntrRing> {
        let page = IE_PER_PAGE as u64 * IE_BYTES;
        let mem = alloc.alloc(2 * page as usize)?;
        let at = mem.segments().iter().find_map(|s| {
            let off = s.offset + (s.bus.next_multiple_of(page) - s.bus);
            (off + page <= s.offset + s.len).then_some((off, s.bus + (off - s.offset)))
        });
        let Some((off, bus)) = at else {
            return Err(Error::Unsupported(
                "the QDMA interrupt ring needs 4 KiB of bus-contiguous, 4 KiB-aligned memory and this buffer has none: \
                 use hugepages (--buffer hugepage)"
                    .into(),
            ));
        };
        // SAFETY: off + page <= the segment's end <= mem.len().
        let ptr = unsafe { mem.as_ptr().add(off as usize) };
        let mut ring = IntrRing {
            _mem: mem,
            ptr,
            bus,
            entries: IE_PER_PAGE,
            index,
            cidx: 0,
            color: true,
            last_queue: None,
            live: false,
        };
        // Fresh memory may hold anything, an old entry's colour included.
        ring.reset();
        Ok(ring)
    }

    /// Zero the entries and start over as `intr_ring_setup` does (consumed index 0, colour 1).
    pub fn reset(&mut self) {
        // SAFETY: `entries` entries at `ptr` belong to this ring; no context points at it now.
        unsafe { std::ptr::write_bytes(self.ptr, 0, (self.entries as u64 * IE_BYTES) as usize) };
        (self.cidx, self.color, self.last_queue) = (0, true, None);
    }

    fn half(&self, i: u32, high: bool) -> u32 {
        let at = i as u64 * IE_BYTES + if high { 4 } else { 0 };
        // SAFETY: inside the ring (i < entries), 4-byte aligned; the card writes each half whole,
        // the high half (with the colour) last.
        unsafe { AtomicU32::from_ptr(self.ptr.add(at as usize).cast::<u32>()) }.load(Ordering::Acquire)
    }

    /// The new entries, oldest first, consumed: the walk of `data_intr_aggregate`.
    pub fn take(&mut self) -> Vec<Entry> {
        let mut out = Vec::new();
        while out.len() < self.entries as usize {
            let high = self.half(self.cidx, true);
            let word = (high as u64) << 32 | self.half(self.cidx, false) as u64;
            if (word & IE_COLOR != 0) != self.color {
                break;
            }
            let dir = if word & IE_TYPE_C2H != 0 { Direction::C2h } else { Direction::H2c };
            out.push(Entry { qid: ((word >> IE_QID_SHIFT) & IE_QID) as u32, dir });
            self.cidx += 1;
            if self.cidx == self.entries {
                self.cidx = 0;
                self.color = !self.color;
            }
        }
        out
    }

    /// The interrupt CIDX update at `queue`'s doorbells (function-relative), or at the last
    /// queue it went to when no entry named one (libqdma's stale update); none before any.
    pub fn update_cidx(&mut self, bar: &dyn BarRegion, queue: Option<u16>) -> Result<()> {
        if !self.live {
            return Ok(());
        }
        let Some(q) = queue.or(self.last_queue) else { return Ok(()) };
        self.last_queue = Some(q);
        let v = self.cidx & INT_CIDX_SW | (self.index & INT_CIDX_RING) << INT_CIDX_RING_SHIFT;
        wr(bar, R_PF_DOORBELLS + q as u64 * DB_STEP + DB_INT_CIDX, v)
    }

    /// Which of `rings` an entry names, for a function whose queues start at `qbase`.
    pub fn ring_of(e: Entry, rings: &[Ring], qbase: u32) -> Option<usize> {
        let q = e.qid.checked_sub(qbase)?;
        rings.iter().position(|r| r.queue as u32 == q && r.dir == e.dir)
    }
}
