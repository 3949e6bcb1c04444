//! The sim QDMA's MM engines: one per direction serving every queue with pending doorbells in
//! turn, a burst of up to 64 descriptors each, as the IP's single MM channel per direction does.
//! For each queue it fetches the descriptors between its consumer index (hardware context) and
//! the producer index the doorbell wrote, checks them, moves the bytes between host memory and
//! card memory, advances the consumer index and writes the status back after the ring's last
//! descriptor slot. It progresses with time (`datapath.rs`): a descriptor started at t (no
//! sooner than its doorbell) completes at t + its fetch and bytes on `DATAPATH`, its data moved
//! when the host next looks after that (`serve`, in the looking thread).
//!
//! MM descriptor (32 bytes, PG302 "AXI Memory Mapped Descriptor for H2C and C2H"): +0x00 source
//! address, +0x08 length [27:0], +0x10 destination address; bits [127:92] and +0x18 are reserved and
//! ignored. libqdma puts DV (28), SOP (29) and EOP (30) there (`struct qdma_mm_desc`); Linux's own
//! driver (`drivers/dma/amd/qdma` `qdma_hw_enqueue`) writes the length alone, and the IP takes both.
//! Status writeback (`struct qdma_desc_cmpl_status`): producer index [15:0], consumer index
//! [31:16], at ring base + ring size × 32.
//!
//! Errors stop the queue (its software context's error field is set, so doorbells are ignored
//! until the context is cleared): descriptor fetch failures and malformed descriptors are logged
//! in GLBL_DSC_ERR_STS, data-movement failures in the MM engine's error code register. The model
//! uses error field 1 for descriptor errors and 2 for data errors.

use super::burst::{Burst, EngState, Plan};
use super::state::*;
use crate::direction::Direction;
use std::sync::atomic::Ordering;

const DESC_BYTES: u64 = 32;
const LEN_MASK: u32 = 0x0fff_ffff;
/// Descriptors served per queue per turn (round robin between queues with work).
const BURST: u32 = 64;

/// Why a queue stopped: the model's error field, the GLBL_DSC_ERR_STS bit to log (0 when the
/// MM engine's error code register has it instead), and words.
struct Stop {
    field: u32,
    log: u32,
    /// An MM engine data error to log: (a write, its ERR_CODE_ENABLE bit). Logged when the queue
    /// stops, after the descriptors before it are accounted for (consumer index, writeback), as
    /// the engine completes in order: whoever sees the error sees their progress too.
    mm: Option<(bool, u32)>,
    why: String,
}

impl Stop {
    fn dsc(log: u32, why: String) -> Stop {
        Stop { field: 1, log, mm: None, why }
    }
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn le64(b: &[u8], o: usize) -> u64 {
    le32(b, o) as u64 | (le32(b, o + 4) as u64) << 32
}

/// Stepped mode: serve what is pending (the caller's thread: the driver's doorbell or run-bit
/// write). Returns whether any descriptor moved.
pub(crate) fn advance(shared: &Shared, dir: Direction) -> bool {
    serve(shared, dir, shared.now(), false)
}

/// The next queue with a pending doorbell after `after` (round robin), its bit cleared: a word of
/// 64 queues at a time, so an idle engine of 2048 queues costs 32 loads.
fn next_pending(mm: &Mm, after: usize) -> Option<usize> {
    let words = mm.pending.len();
    let start = (after + 1) % (words * 64);
    let (first, shift) = (start / 64, start % 64);
    for i in 0..=words {
        let w = (first + i) % words;
        let word = &mm.pending[w];
        let mut bits = word.load(Ordering::Acquire);
        if i == 0 {
            bits &= !0u64 << shift; // from `start` on
        } else if i == words {
            bits &= !(!0u64 << shift); // around again: the ones before it
        }
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if word.fetch_and(!(1u64 << b), Ordering::AcqRel) & (1u64 << b) != 0 {
                return Some(w * 64 + b);
            }
        }
    }
    None
}

/// Bring `dir`'s engine to model time `now`: each descriptor due by then moves its data and
/// completes, in this thread; bursts end with their status writeback; the next due time is left
/// in `Mm::due`. `force` serves a stalled engine (a stepped test's `step`). Whether any
/// descriptor moved.
pub(crate) fn serve(shared: &Shared, dir: Direction, now: u64, force: bool) -> bool {
    let mm = shared.mm(dir);
    if crate::sim::datapath::hands_off() {
        // A thread that answers a client's accesses moves nothing: the server's clock thread
        // serves the engine now (datapath::set_hands_off).
        mm.poked.store(true, Ordering::Release);
        mm.due.set(0);
        return false;
    }
    let mut guard = mm.eng.lock().unwrap_or_else(|e| e.into_inner());
    let eng = &mut *guard;
    mm.poked.store(false, Ordering::Release);
    let started = mm.started_at.swap(0, Ordering::AcqRel);
    if started != 0 && eng.burst.is_none() {
        eng.free_at = eng.free_at.max(started);
    }
    let mut moved = false;
    loop {
        if mm.stalled.load(Ordering::Acquire) && !force {
            break;
        }
        let Some(mut b) = eng.burst.take() else {
            // A burst in flight finishes; a new one starts only while the engine runs.
            if !mm.running() {
                break;
            }
            let Some(qid) = next_pending(mm, eng.rr) else { break };
            eng.rr = qid;
            begin(shared, dir, qid, eng);
            continue;
        };
        if mm.held.get(b.qid).is_some_and(|h| h.load(Ordering::Acquire)) {
            // Test hook: fetched, in flight, not moving until released.
            eng.burst = Some(b);
            break;
        }
        if b.done == b.plan.n {
            if complete(shared, dir, b.qid, &b.plan, b.done) {
                mm.kick(b.qid);
            }
            continue;
        }
        let slot = (b.plan.cidx + b.done) % b.plan.ring;
        if b.desc.is_none() {
            let desc = match &b.plan.fetched {
                Some(f) => f.get(b.done as usize).copied().flatten().ok_or_else(|| {
                    Stop::dsc(
                        shared.ip.dsc_ur_ca(),
                        format!(
                            "descriptor fetch at slot {slot} failed when the doorbell rang (ring base {:#x})",
                            b.plan.base
                        ),
                    )
                }),
                None => fetch(shared, b.plan.base + slot as u64 * DESC_BYTES),
            };
            match desc {
                Ok(d) => {
                    let len = (le32(&d, 8) & LEN_MASK) as u64;
                    let mut due = eng.free_at + DATAPATH.desc_ns(len) + mm.shaker.point();
                    if b.done + 1 == b.plan.n {
                        due += mm.shaker.before_report();
                    }
                    b.desc = Some((d, due));
                }
                Err(stop) => {
                    end(shared, dir, &b, stop);
                    continue;
                }
            }
        }
        let due = b.desc.as_ref().map_or(0, |(_, t)| *t);
        if due > now {
            mm.due.set(due);
            eng.burst = Some(b);
            return moved;
        }
        let Some((d, due)) = b.desc.take() else { continue };
        eng.free_at = due;
        if let Err(stop) = execute(shared, dir, b.qid as u32, slot, &d) {
            end(shared, dir, &b, stop);
            continue;
        }
        b.done += 1;
        // The engine's completed count moves with each descriptor (the status writeback comes
        // only at the end of a burst).
        mm.completed.fetch_add(1, Ordering::AcqRel);
        moved = true;
        eng.burst = Some(b);
    }
    mm.due.clear();
    // A hands-off thread's access meanwhile (its due time set before this clear): due now.
    if mm.poked.load(Ordering::Acquire) {
        mm.due.set(0);
    }
    moved
}

/// The engine's run bit rose at model time `now`: queues rung while it was off start no sooner.
pub(crate) fn started(shared: &Shared, dir: Direction, now: u64) {
    let mm = shared.mm(dir);
    let mut eng = if crate::sim::datapath::hands_off() {
        // The engine's lock may be held across a DMA message by the thread moving data: the
        // start time is left for its next serve.
        match mm.eng.try_lock() {
            Ok(g) => g,
            Err(_) => {
                mm.started_at.store(now.max(1), Ordering::Release);
                return;
            }
        }
    } else {
        mm.eng.lock().unwrap_or_else(|e| e.into_inner())
    };
    if eng.burst.is_none() {
        eng.free_at = eng.free_at.max(now);
    }
}

/// Plan a burst of queue `qid`, starting no sooner than its doorbell.
fn begin(shared: &Shared, dir: Direction, qid: usize, eng: &mut EngState) {
    let Some(q) = shared.queue(dir, qid) else { return };
    let mut c = q.lock();
    match plan(shared, dir, qid, &mut c) {
        Ok(Some(plan)) => {
            eng.free_at = eng.free_at.max(c.rung_at);
            eng.burst = Some(Burst { qid, plan, done: 0, desc: None });
        }
        Ok(None) => {}
        Err(stop) => {
            let (gen, cidx) = (c.gen, c.cidx());
            drop(c);
            fail(shared, dir, qid, gen, cidx, stop);
        }
    }
}

/// A burst stopped on an error: the descriptors before it are accounted for, then the queue stops.
fn end(shared: &Shared, dir: Direction, b: &Burst, stop: Stop) {
    complete(shared, dir, b.qid, &b.plan, b.done);
    fail(shared, dir, b.qid, b.plan.gen, (b.plan.cidx + b.done) % b.plan.ring, stop);
}

/// Check the queue's software context and work out the next burst.
fn plan(shared: &Shared, dir: Direction, qid: usize, c: &mut QCtx) -> Result<Option<Plan>, Stop> {
    if !c.enabled() {
        if c.sw[1] & SW1_QEN == 0 {
            shared.mm(dir).set_fault(format!(
                "{dir} queue {qid}: doorbell for a queue whose software context is not enabled (qen 0): ignored"
            ));
        }
        return Ok(None);
    }
    let param = |why: String| Err(Stop::dsc(shared.ip.dsc_param(), why));
    let w1 = c.sw[1];
    if w1 & SW1_IS_MM == 0 || w1 & SW1_BYPASS != 0 {
        return param(format!("{dir} queue {qid}: a stream or bypass queue (the sim card models MM queues only)"));
    }
    if (w1 >> 16) & 3 != 2 || w1 & SW1_MM_CHN != 0 {
        return param(format!(
            "{dir} queue {qid}: descriptor size code {} and MM channel {} (MM queues need code 2, 32-byte descriptors, on channel 0)",
            (w1 >> 16) & 3,
            (w1 >> 19) & 1
        ));
    }
    let entries = shared.ring_entries(c.ring_idx());
    if entries < 3 {
        return param(format!(
            "{dir} queue {qid}: ring-size index {} selects {entries} entries in the global table (0x{:x}): not a usable ring",
            c.ring_idx(),
            R_RNG_SZ + 4 * c.ring_idx() as u32
        ));
    }
    let ring = entries - 1;
    let (pidx, cidx) = (c.pidx(), c.cidx());
    if pidx >= ring {
        return param(format!("{dir} queue {qid}: producer index {pidx} is past the ring's {ring} descriptors"));
    }
    let avail = (pidx + ring - cidx) % ring;
    if avail == 0 {
        return Ok(None);
    }
    let n = avail.min(BURST);
    let fetched = shared.cfg.fetch_on_doorbell.then(|| (0..n).map(|_| c.fetched.pop_front().flatten()).collect());
    let wb = if w1 & SW1_WBK_EN == 0 {
        0
    } else if w1 & SW1_WBI_INTVL != 0 || w1 & SW1_WBI_CHK == 0 {
        2 // after every burst
    } else {
        1 // when the queue goes idle
    };
    // From here until `complete` these descriptors are in flight: fetched, their data moving.
    c.in_flight = n;
    Ok(Some(Plan { gen: c.gen, base: c.ring_base(), ring, cidx, n, wb, fetched }))
}

fn fetch(shared: &Shared, addr: u64) -> Result<[u8; 32], Stop> {
    let mut b = [0u8; 32];
    if !shared.bus_master.load(Ordering::Acquire) {
        return Err(Stop::dsc(
            shared.ip.dsc_ur_ca(),
            "descriptor fetch with Bus Master Enable off (command register bit 2)".into(),
        ));
    }
    let ur_ca = shared.ip.dsc_ur_ca();
    shared.host.read(addr, &mut b).map_err(|f| Stop::dsc(ur_ca, format!("descriptor fetch failed: {f}")))?;
    Ok(b)
}

/// Descriptors between the old and new producer index, read when the doorbell is written.
pub(crate) fn fetch_at_doorbell(shared: &Shared, c: &mut QCtx, old: u32) {
    let entries = shared.ring_entries(c.ring_idx());
    if entries < 3 {
        return;
    }
    let ring = entries - 1;
    let (base, new) = (c.ring_base(), c.pidx());
    if new >= ring || old >= ring {
        return;
    }
    let mut at = old;
    while at != new {
        c.fetched.push_back(fetch(shared, base + at as u64 * DESC_BYTES).ok());
        at = (at + 1) % ring;
    }
}

/// Check one descriptor and move its bytes.
fn execute(shared: &Shared, dir: Direction, qid: u32, slot: u32, d: &[u8; 32]) -> Result<(), Stop> {
    let (src, flags, dst) = (le64(d, 0), le32(d, 8), le64(d, 16));
    let len = (flags & LEN_MASK) as u64;
    let dsc = Stop::dsc;
    if len == 0 {
        return Err(dsc(shared.ip.dsc_param(), format!("{dir} queue {qid} slot {slot}: descriptor length is 0")));
    }
    if len >= super::layout::desc_len_limit(shared.cfg.misc_cap) {
        shared.violation(format!(
            "{dir} queue {qid} slot {slot}: a descriptor of {len:#x} bytes, which EQDMA 5.0 does not take (under 64 KiB)"
        ));
    }
    let card = &shared.card;
    let master = shared.bus_master.load(Ordering::Acquire);
    let data = |write: bool, code: u32, why: String| Stop {
        field: 2,
        log: 0,
        mm: Some((write, code)),
        why: format!("{dir} queue {qid} slot {slot}: {why}"),
    };
    let past = |a: u64| format!("card address {a:#x} + {len:#x} is past card memory ({:#x} bytes)", card.size);
    match dir {
        Direction::H2c => {
            let off = card.range(dst, len).ok_or_else(|| data(true, MM_H2C_WR_DEC, past(dst)))?;
            if !master {
                return Err(data(false, MM_RD_UR_CA, "host read with Bus Master Enable off".into()));
            }
            shared
                .host
                // SAFETY: the host map holds `p` valid for `len` bytes during the closure and
                // `off + len` is inside card memory (checked above).
                .with_range(src, len, |p| unsafe { card.copy_in(off, p, len as usize) })
                .map_err(|f| data(false, MM_RD_UR_CA, format!("host read failed: {f}")))?;
            shared.overrun.card(card, dst + len);
        }
        Direction::C2h => {
            let off = card.range(src, len).ok_or_else(|| data(false, MM_C2H_RD_SLV, past(src)))?;
            if !master {
                return Err(data(true, MM_C2H_WR_UR, "host write with Bus Master Enable off".into()));
            }
            shared
                .host
                // SAFETY: as above, for writes.
                .with_range(dst, len, |p| unsafe { card.copy_out(off, p, len as usize) })
                .map_err(|f| data(true, MM_C2H_WR_UR, format!("host write failed: {f}")))?;
            shared.overrun.host(&shared.host, dst + len);
        }
    }
    let mm = shared.mm(dir);
    if mm.counting() {
        mm.perf_beats.fetch_add(len.div_ceil(PERF_BEAT_BYTES as u64), Ordering::AcqRel);
    }
    Ok(())
}

/// Account for `done` descriptors: consumer index, status writeback. Returns
/// whether more descriptors wait. Nothing is written if the contexts changed meanwhile.
fn complete(shared: &Shared, dir: Direction, qid: usize, p: &Plan, done: u32) -> bool {
    // Test hook: an error the queue survives, logged with this writeback.
    let late = shared.error_at_writeback.swap(0, Ordering::AcqRel);
    if late != 0 && done > 0 {
        shared.dsc_error(dir, qid as u32, (p.cidx + done) % p.ring, late);
    }
    let Some(q) = shared.queue(dir, qid) else { return false };
    let mut c = q.lock();
    c.in_flight = 0;
    if c.gen != p.gen {
        return false; // cleared or reprogrammed: this ring is no longer the driver's
    }
    let cidx = (p.cidx + done) % p.ring;
    c.hw[0] = (c.hw[0] & !0xffff) | cidx;
    let pidx = c.pidx();
    let idle = pidx == cidx;
    // Hardware context word 1: descriptors pending [8] while the ring has work; a valid queue
    // never shows "invalid, nothing pending" [9] (`QDMA_HW_CTXT_W1_*`).
    c.hw[1] = if idle { 0 } else { HW1_DSC_PND };
    let withheld = shared.mm(dir).withhold.load(Ordering::Acquire);
    if done > 0 && (p.wb == 2 || (p.wb == 1 && idle)) && !withheld {
        let at = p.base + p.ring as u64 * DESC_BYTES;
        // Written without the queue's lock: a doorbell write takes it, and with client memory
        // reached by message this write waits on the client, which answers only once the
        // doorbell's access is done (access/vfio_user/clock.rs).
        drop(c);
        let written = shared.host.store_u32_release(at, pidx | cidx << 16);
        c = q.lock();
        if c.gen != p.gen {
            return false;
        }
        if written.is_err() {
            let s = Stop::dsc(shared.ip.dsc_ur_ca(), format!("{dir} queue {qid}: status writeback to {at:#x} failed"));
            drop(c);
            fail(shared, dir, qid, p.gen, cidx, s);
            return false;
        }
        // Direct interrupt mode: the writeback raises the queue's vector if armed (and disarms
        // it); disarmed, it waits for the next PIDX update that arms it.
        if c.sw[1] & SW1_IRQ_EN != 0 {
            if c.sw[0] & SW0_IRQ_ARM != 0 {
                raise(shared, dir, qid, &mut c);
            } else {
                c.irq_pending = Some(c.gen);
            }
        }
    }
    !idle
}

/// Software context word 0's interrupt arm, word 1's interrupt enable, word 4's vector and
/// aggregation bit (`QDMA_SW_CTXT_W*`), and the PIDX update's arm (`QDMA_DMA_SEL_IRQ_EN_MASK`).
pub(crate) const SW0_IRQ_ARM: u32 = 1 << 16;
pub(crate) const SW1_IRQ_EN: u32 = 1 << 21;
const SW4_VEC: u32 = 0x7ff;
const SW4_INTR_AGGR: u32 = 1 << 11;
pub(crate) const DB_IRQ_ARM: u32 = 1 << 16;

/// Queue `qid` raises its interrupt: a message on its vector, the arm cleared.
pub(crate) fn raise(shared: &Shared, dir: Direction, qid: usize, c: &mut QCtx) {
    c.sw[0] &= !SW0_IRQ_ARM;
    c.irq_pending = None;
    if c.sw[4] & SW4_INTR_AGGR != 0 {
        // Indirect mode: an entry in the interrupt ring the vector field names (`intr.rs`).
        return shared.aggregate(dir, qid, c.sw[4] & SW4_VEC, (c.pidx(), c.cidx()));
    }
    let vector = c.sw[4] & SW4_VEC;
    shared.irq_out.message(vector, || format!("{dir} queue {qid} raised its interrupt (vector {vector})"));
}

/// Stop queue `qid` on an error: error field in its software context, the fault in words.
fn fail(shared: &Shared, dir: Direction, qid: usize, gen: u64, cidx: u32, s: Stop) {
    let Some(q) = shared.queue(dir, qid) else { return };
    let mut c = q.lock();
    if c.gen != gen {
        return;
    }
    if s.log != 0 {
        shared.dsc_error(dir, qid as u32, cidx, s.log);
    }
    if let Some((write, code)) = s.mm {
        shared.mm_error(dir, write, code, qid as u32, cidx);
    }

    c.sw[1] = (c.sw[1] & !(3 << SW1_ERR_SHIFT)) | s.field << SW1_ERR_SHIFT;
    let w1 = c.sw[1];
    if w1 & SW1_WBK_EN != 0 && !shared.mm(dir).withhold.load(Ordering::Acquire) {
        let entries = shared.ring_entries(c.ring_idx()).max(2);
        let at = c.ring_base() + (entries as u64 - 1) * DESC_BYTES;
        if shared.host.store_u32_release(at, c.pidx() | cidx << 16).is_ok() {
            c.sw[1] |= SW1_ERR_WB_SENT;
        }
    }
    c.hw[1] = HW1_IDL_STP_B;
    drop(c);
    shared.mm(dir).set_fault(s.why);
}
