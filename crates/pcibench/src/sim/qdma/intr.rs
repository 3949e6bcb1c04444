//! The sim QDMA's interrupt aggregation rings and error interrupt, as PG302 and the vendor's
//! drivers describe them (libqdma `qdma_intr.c`, `qdma_context.c`; Linux `drivers/dma/amd/qdma`).
//!
//! An interrupt ring is an interrupt context (select 8, by ring index: valid, vector, interrupt
//! state, colour, 4 KiB-aligned base, page-size code, the hardware's producer index) over
//! (code + 1) × 512 entries of 8 bytes in host memory. A queue whose software context has its
//! interrupt enabled and armed with aggregation on (word 4 bit 11, its ring index in the vector
//! field) writes, at a status writeback, one entry naming itself (libqdma's `union qdma_intr_ring`,
//! Linux's `QDMA_INTR_MASK_*`: the queue's producer index [15:0] and consumer index [31:16], queue
//! [62:39], type [38] 0 H2C / 1 C2H, the ring's colour [63]; Linux's `qdma_queue_isr` completes
//! descriptors up to the entry's consumer index) at the ring's producer index;
//! the colour flips each time the producer index wraps. The ring raises its vector when it is
//! not already waiting for the driver (interrupt state set), and waits: the driver's interrupt
//! CIDX update (+0x0 of a queue's doorbells: software CIDX [15:0], ring index [23:16]) clears the
//! state, and raises again if entries came meanwhile. A ring that would overrun the driver's
//! consumer index, an entry for a ring with no valid context, and a CIDX update past what was
//! written are protocol violations.
//!
//! The error interrupt (GLBL_ERR_INT 0xB04: function, vector [22:12], arm [24]) is raised when a
//! leaf the driver enabled sets GLBL_ERR_STAT while armed, and disarms; the driver re-arms it
//! after handling the error (`qdma_hw_error_intr_rearm`).

use super::layout::Ip;
use super::state::Shared;
use crate::direction::Direction;
use std::sync::atomic::Ordering;

pub(crate) const R_GLBL_ERR_INT: u32 = 0xb04;
pub(crate) const SEL_INT_COAL: u32 = 8;
const ERR_INT_VEC_SHIFT: u32 = 12;
const ERR_INT_VEC: u32 = 0x7ff;
const ERR_INT_ARM: u32 = 1 << 24;
const EQ_ERR_INT_EN_COAL: u32 = 1 << 23;
const IC_VALID: u32 = 1 << 0;
const IC_INT_ST: u32 = 1 << 13;
const IC_COLOR: u32 = 1 << 14;
const IC_PIDX_SHIFT: u32 = 6;
const IC_PIDX: u32 = 0xfff;
const ENTRIES_PER_PAGE: u32 = 512;

/// An interrupt context's words, as the model reads them.
struct Ring {
    w: [u32; 8],
}

impl Ring {
    fn valid(&self) -> bool {
        self.w[0] & IC_VALID != 0
    }
    fn vector(&self) -> u32 {
        (self.w[0] >> 1) & 0x7ff
    }
    fn base(&self) -> u64 {
        ((self.w[0] >> 15) as u64) << 12 | (self.w[1] as u64) << 29 | ((self.w[2] & 7) as u64) << 61
    }
    fn entries(&self) -> u32 {
        (((self.w[2] >> 3) & 7) + 1) * ENTRIES_PER_PAGE
    }
    fn pidx(&self) -> u32 {
        (self.w[2] >> IC_PIDX_SHIFT) & IC_PIDX
    }
    fn set_pidx(&mut self, p: u32) {
        self.w[2] = (self.w[2] & !(IC_PIDX << IC_PIDX_SHIFT)) | (p & IC_PIDX) << IC_PIDX_SHIFT;
    }
}

impl Shared {
    fn intr_ctx(&self, ring: u32) -> Option<[u32; 8]> {
        self.other_ctx.lock().unwrap_or_else(|e| e.into_inner()).get(&(SEL_INT_COAL, ring)).copied()
    }

    fn set_intr_ctx(&self, ring: u32, w: [u32; 8]) {
        self.other_ctx.lock().unwrap_or_else(|e| e.into_inner()).insert((SEL_INT_COAL, ring), w);
    }

    /// The driver's interrupt CIDX per ring; held across an entry's write and the context's
    /// update, so a CIDX update never sees one without the other.
    fn cidx_lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u32, u32>> {
        self.int_cidx.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A context command on interrupt ring `ring` other than a read: the driver starts over.
    pub(crate) fn intr_ctx_changed(&self, ring: u32) {
        self.int_cidx.lock().unwrap_or_else(|e| e.into_inner()).remove(&ring);
    }

    /// Queue `qid` (aggregation on, naming interrupt ring `idx`: a software context's vector
    /// field, or a C2H stream queue's completion context's) signals through the ring; `pidx` and
    /// `cidx` are its ring's producer and consumer index now (the descriptor ring's, or the
    /// completion ring's).
    pub(crate) fn aggregate(&self, dir: Direction, qid: usize, idx: u32, pidx_cidx: (u32, u32)) {
        if crate::sim::datapath::hands_off() {
            // The entry is a host write: on a thread that answers accesses with the client's memory
            // reached by message, the clock thread writes it (`datapath::set_hands_off`).
            self.aggregate_later.lock().unwrap_or_else(|e| e.into_inner()).push((dir, qid, idx, pidx_cidx));
            self.mm(dir).due.set(0);
            return;
        }
        if crate::sim::stage::clock_thread() && !crate::sim::stage::staging() {
            // On serve's clock thread the entry is written once the clock's look is over
            // (`sim::stage`, `QdmaModel::advance`): an interrupt CIDX update, which a register
            // access makes, takes the ring's lock, and a doorbell the queue's, held by the caller.
            crate::sim::stage::begin(Vec::new());
            self.aggregate(dir, qid, idx, pidx_cidx);
            return crate::sim::stage::afterwards(crate::sim::stage::end());
        }
        let map = self.cidx_lock();
        let old = map.get(&idx).copied().unwrap_or(0);
        let Some(w) = self.intr_ctx(idx).filter(|w| Ring { w: *w }.valid()) else {
            return self.violation(format!(
                "{dir} queue {qid}: interrupt aggregation on, naming interrupt ring {idx}, whose interrupt context \
                 (select 8) is not valid: the interrupt goes nowhere"
            ));
        };
        let mut r = Ring { w };
        let (n, pidx) = (r.entries(), r.pidx());
        let next = (pidx + 1) % n;
        if next == old % n {
            return self.violation(format!(
                "interrupt ring {idx} overflowed: {} entries unread (the driver's CIDX is {old}), the entry for {dir} \
                 queue {qid} is lost",
                n - 1
            ));
        }
        let color = r.w[0] & IC_COLOR != 0;
        let entry = (qid as u64 & 0xff_ffff) << 39
            | if dir == Direction::C2h { 1 << 38 } else { 0 }
            | if color { 1 << 63 } else { 0 }
            | (pidx_cidx.1 as u64 & 0xffff) << 16
            | pidx_cidx.0 as u64 & 0xffff;
        let at = r.base() + pidx as u64 * 8;
        // Low word first, then the word holding the colour, released: a driver that sees the
        // colour sees the whole entry.
        let low = self.host.store_u32_release(at, entry as u32);
        if low.and_then(|_| self.host.store_u32_release(at + 4, (entry >> 32) as u32)).is_err() {
            return self.violation(format!("interrupt ring {idx}: entry write to {at:#x} failed (not host memory)"));
        }
        r.set_pidx(next);
        if next == 0 {
            r.w[0] ^= IC_COLOR;
        }
        let raise = r.w[0] & IC_INT_ST == 0;
        r.w[0] |= IC_INT_ST;
        let vector = r.vector();
        self.set_intr_ctx(idx, r.w);
        if raise {
            self.irq_out.message(vector, || format!("interrupt ring {idx} raised its vector {vector}"));
        }
    }

    /// The interrupt CIDX update at `qid`'s doorbells: ring index [23:16], software CIDX [15:0].
    pub(crate) fn int_cidx_update(&self, qid: u32, value: u32) {
        let (idx, cidx) = ((value >> 16) & 0xff, value & 0xffff);
        // Taken before the context is read: an entry being written completes first.
        let mut map = self.cidx_lock();
        let Some(w) = self.intr_ctx(idx).filter(|w| Ring { w: *w }.valid()) else {
            return self.violation(format!(
                "interrupt CIDX {cidx} written for interrupt ring {idx} (at queue {qid}'s doorbells), whose interrupt \
                 context is not valid"
            ));
        };
        let mut r = Ring { w };
        let (n, pidx, old) = (r.entries(), r.pidx(), map.get(&idx).copied().unwrap_or(0));
        // Entries the driver may consume: from its last CIDX up to the producer index.
        let written = (pidx + n - old % n) % n;
        let consumed = (cidx % n + n - old % n) % n;
        if cidx >= n || consumed > written {
            return self.violation(format!(
                "interrupt ring {idx}: CIDX {cidx} written past the entries the engine wrote (producer index {pidx}, \
                 last CIDX {old}, {n} entries)"
            ));
        }
        map.insert(idx, cidx);
        r.w[0] &= !IC_INT_ST;
        // Entries written since the driver last looked: the ring interrupts again.
        let again = cidx != pidx;
        if again {
            r.w[0] |= IC_INT_ST;
        }
        let vector = r.vector();
        self.set_intr_ctx(idx, r.w);
        if again {
            self.irq_out.message(vector, || format!("interrupt ring {idx} raised its vector {vector} again"));
        }
    }

    /// GLBL_ERR_INT written: EQDMA's en_coal (through an interrupt ring) is not modelled.
    pub(crate) fn err_int_write(&self, value: u32) {
        if value & EQ_ERR_INT_EN_COAL != 0 {
            let what = if self.ip == Ip::Eqdma || self.ip == Ip::Cpm5 {
                "the error interrupt through an interrupt ring (en_coal), which the model does not implement"
            } else {
                "bit 23, which this IP's GLBL_ERR_INT does not define"
            };
            self.violation(format!("GLBL_ERR_INT written {value:#x}: {what}"));
        }
        super::rules::err_int_taken(self, self.err_int.load(Ordering::Acquire), value);
        self.err_int.store(value, Ordering::Release);
    }

    /// An enabled error leaf was set: the error interrupt fires if armed, and disarms.
    pub(crate) fn error_interrupt(&self) {
        let v = self.err_int.fetch_and(!ERR_INT_ARM, Ordering::AcqRel);
        if v & ERR_INT_ARM != 0 {
            let vector = (v >> ERR_INT_VEC_SHIFT) & ERR_INT_VEC;
            self.irq_out.message(vector, || format!("the error interrupt (GLBL_ERR_INT) on vector {vector}"));
        }
    }

    /// The entries hands-off accesses left (`aggregate`), written now.
    pub(crate) fn aggregate_now(&self) {
        let later = std::mem::take(&mut *self.aggregate_later.lock().unwrap_or_else(|e| e.into_inner()));
        if later.is_empty() {
            return;
        }
        for (dir, qid, idx, pidx_cidx) in later {
            self.aggregate(dir, qid, idx, pidx_cidx);
        }
    }
}
