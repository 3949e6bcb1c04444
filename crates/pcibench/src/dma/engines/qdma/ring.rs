//! QDMA descriptor rings in host memory, as the engine reads them: `slots` 32-byte MM
//! descriptors (vendor `struct qdma_mm_desc`: source address, length [27:0] with DV 28, SOP 29,
//! EOP 30, destination address, reserved), then the status the engine writes back
//! (`struct qdma_desc_cmpl_status`: producer index [15:0], consumer index [31:16]) in the slot
//! after the last descriptor. The global ring-size table counts that slot: an entry of 2049 is a
//! ring of 2048 descriptors, of which at most 2047 are outstanding (a full ring would look empty).

use super::regs::{DESC_BYTES, DESC_DV, DESC_EOP, DESC_LEN, DESC_SOP, STATUS_CIDX_SHIFT};
use crate::dma::{Direction, DmaAllocator, DmaBuffer};
use crate::mmio::Width;
use crate::trace::Tracer;
use crate::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};

/// Ring bases are page aligned, as the vendor's dma_alloc_coherent rings are.
const RING_ALIGN: u64 = 4096;

/// One MM descriptor as four little-endian 64-bit words.
pub(crate) type Desc = [u64; 4];

/// An MM descriptor moving `len` bytes (at most 28 bits) from `src` to `dst`; `sop`/`eop` mark
/// the first and last descriptor of a transfer.
pub(crate) fn mm_desc(src: u64, dst: u64, len: u64, sop: bool, eop: bool) -> Desc {
    let flags = DESC_DV | if sop { DESC_SOP } else { 0 } | if eop { DESC_EOP } else { 0 };
    [src.to_le(), (len & DESC_LEN | flags).to_le(), dst.to_le(), 0]
}

/// Bytes of memory for a ring of `slots` descriptors plus its status slot.
pub(crate) fn ring_bytes(slots: u32) -> u64 {
    (slots as u64 + 1) * DESC_BYTES
}

/// One ring: where it lives and the driver's indexes into it.
pub(crate) struct Ring {
    pub queue: u16,
    pub dir: Direction,
    /// Descriptors in the ring.
    pub slots: u32,
    ptr: *mut u8,
    pub bus: u64,
    /// Next slot the driver fills.
    pub pidx: u32,
    /// The engine's consumer index as last written back.
    pub cidx: u32,
    /// Descriptors posted and not yet completed.
    pub outstanding: u32,
    /// Bytes per descriptor: 32 for MM, 16 for H2C ST, 8 for C2H ST and completion entries
    /// (the memory is sized for 32 either way); the status slot follows the last one.
    pub desc: u64,
}

// SAFETY: `ptr` points into a DMA buffer owned by the same engine as the ring (QdmaEngine holds
// both and drops the buffers after the rings); only the engine's thread touches it.
unsafe impl Send for Ring {}

impl Ring {
    fn status(&self) -> &AtomicU32 {
        // SAFETY: the status slot is inside the ring's memory (ring_bytes), 4-byte aligned (the
        // ring base is page aligned), alive as long as the ring; the card writes it as a whole
        // word and the CPU reads it atomically.
        unsafe { AtomicU32::from_ptr(self.ptr.add((self.slots as u64 * self.desc) as usize).cast::<u32>()) }
    }

    /// Zero every descriptor and the status slot, and the indexes (a freshly started queue).
    pub fn reset(&mut self) {
        // SAFETY: ring_bytes(slots) bytes at `ptr` belong to this ring; no queue uses it now.
        unsafe { std::ptr::write_bytes(self.ptr, 0, ring_bytes(self.slots) as usize) };
        (self.pidx, self.cidx, self.outstanding) = (0, 0, 0);
    }

    /// Free slots for new descriptors.
    pub fn space(&self) -> u32 {
        self.slots - 1 - self.outstanding
    }

    /// Write `d` at the producer index and advance it (the caller checked `space`); `trace`
    /// gets it as written.
    #[inline]
    pub fn put(&mut self, d: &Desc, trace: Option<&Tracer>) {
        if let Some(t) = trace {
            self.trace_desc(t, d);
        }
        // SAFETY: a `Desc` is 32 bytes, the size of an MM descriptor slot.
        self.put_bytes(unsafe { std::slice::from_raw_parts(d.as_ptr().cast::<u8>(), DESC_BYTES as usize) });
    }

    /// Write one descriptor of `self.desc` bytes (`d` is at least that long) at the producer
    /// index and advance it (the caller checked `space`).
    #[inline]
    pub fn put_bytes(&mut self, d: &[u8]) {
        debug_assert!(self.space() > 0 && d.len() as u64 >= self.desc);
        // SAFETY: slot pidx < slots lies inside the ring (sized for 32-byte slots, the widest);
        // the engine reads it only after the doorbell that follows (store_fence orders the
        // stores before the doorbell write).
        unsafe {
            let at = self.ptr.add((self.pidx as u64 * self.desc) as usize);
            std::ptr::copy_nonoverlapping(d.as_ptr(), at, self.desc as usize);
        }
        self.pidx = if self.pidx + 1 == self.slots { 0 } else { self.pidx + 1 };
        self.outstanding += 1;
    }

    /// The ring's memory as the engine sees it (the completion ring's entries are read here).
    pub(crate) fn base_ptr(&self) -> *mut u8 {
        self.ptr
    }

    fn trace_desc(&self, t: &Tracer, d: &Desc) {
        let mut bytes = [0u8; DESC_BYTES as usize];
        for (i, w) in d.iter().enumerate() {
            bytes[8 * i..8 * i + 8].copy_from_slice(&u64::from_le(*w).to_le_bytes());
        }
        let w1 = u64::from_le(d[1]);
        let fields = [
            ("queue", self.queue.into()),
            ("c2h", (self.dir == Direction::C2h).into()),
            ("src", u64::from_le(d[0])),
            ("len", w1 & DESC_LEN),
            ("flags", w1 & !DESC_LEN),
            ("dst", u64::from_le(d[2])),
        ];
        t.descriptor("qdma", self.pidx.into(), self.bus + self.pidx as u64 * DESC_BYTES, &bytes, &fields);
    }

    /// Take the written-back consumer index: descriptors completed since the last call. A new
    /// one goes to `trace`.
    pub fn reap(&mut self, trace: Option<&Tracer>) -> Result<u32> {
        let status = self.status().load(Ordering::Acquire);
        let cidx = status >> STATUS_CIDX_SHIFT;
        if cidx == self.cidx {
            return Ok(0);
        }
        if let Some(t) = trace {
            t.writeback("qdma", "status", self.bus + self.slots as u64 * self.desc, Width::B32, status.into());
        }
        let done = (cidx + self.slots - self.cidx) % self.slots;
        if cidx >= self.slots || done > self.outstanding {
            return Err(Error::Device(format!(
                "QDMA {} queue {}: the status writeback says consumer index {cidx}, past the {} descriptors posted \
                 from {} in a ring of {}: the engine and the driver disagree about the ring",
                self.dir, self.queue, self.outstanding, self.cidx, self.slots
            )));
        }
        self.cidx = cidx;
        self.outstanding -= done;
        Ok(done)
    }
}

/// The buffers rings live in (which must outlive the rings), and the rings.
pub(crate) type Rings = (Vec<Box<dyn DmaBuffer>>, Vec<Ring>);

/// Allocate memory for `rings` rings of `slots` descriptors, each page aligned inside one
/// bus-contiguous segment.
pub(crate) fn allocate(alloc: &dyn DmaAllocator, rings: &[(u16, Direction)], slots: u32) -> Result<Rings> {
    let bytes = ring_bytes(slots);
    let stride = bytes.div_ceil(RING_ALIGN) * RING_ALIGN;
    let mut bufs: Vec<Box<dyn DmaBuffer>> = Vec::new();
    let mut out: Vec<Ring> = Vec::with_capacity(rings.len());
    while out.len() < rings.len() {
        let want = (rings.len() - out.len()) as u64 * stride + stride;
        let buf = alloc.alloc(want as usize)?;
        let before = out.len();
        for s in buf.segments() {
            let mut off = s.offset + (s.bus.next_multiple_of(RING_ALIGN) - s.bus);
            while off + bytes <= s.offset + s.len && out.len() < rings.len() {
                let (queue, dir) = rings[out.len()];
                // SAFETY: off + bytes <= the segment's end <= buf.len(): inside the buffer.
                let ptr = unsafe { buf.as_ptr().add(off as usize) };
                let bus = s.bus + (off - s.offset);
                out.push(Ring { queue, dir, slots, ptr, bus, pidx: 0, cidx: 0, outstanding: 0, desc: DESC_BYTES });
                off += stride;
            }
        }
        if out.len() == before {
            let piece = buf.segments().iter().map(|s| s.len).max().unwrap_or(0);
            return Err(Error::Unsupported(format!(
                "a ring of {slots} descriptors needs {bytes} bytes of bus-contiguous memory, and this buffer's \
                 contiguous pieces are at most {piece} bytes: use hugepages (--buffer hugepage) or a smaller --ring-size"
            )));
        }
        bufs.push(buf);
    }
    Ok((bufs, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_words_follow_the_vendor_layout() {
        let d = mm_desc(0x1000, 0x2000, 64, true, false);
        assert_eq!(d, [0x1000, 64 | 1 << 28 | 1 << 29, 0x2000, 0]);
        assert_eq!(mm_desc(1, 2, 3, false, true)[1], 3 | 1 << 28 | 1 << 30);
        assert_eq!(ring_bytes(2048), 2049 * 32);
    }
}
