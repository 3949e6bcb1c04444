//! The sim QDMA's MM engines: one worker thread per direction serving every queue with pending
//! doorbells in turn, as the IP's single MM channel per direction does. For each queue it fetches
//! the descriptors between its consumer index (hardware context) and the producer index the
//! doorbell wrote, checks them, moves the bytes between host memory and card memory, advances
//! the consumer index and writes the status back after the ring's last descriptor slot.
//!
//! MM descriptor (32 bytes, vendor `struct qdma_mm_desc`): +0x00 source address, +0x08 length
//! [27:0] with DV (valid) bit 28, SOP 29, EOP 30, +0x10 destination address, +0x18 reserved.
//! Status writeback (`struct qdma_desc_cmpl_status`): producer index [15:0], consumer index
//! [31:16], at ring base + ring size × 32.
//!
//! Errors stop the queue (its software context's error field is set, so doorbells are ignored
//! until the context is cleared): descriptor fetch failures and malformed descriptors are logged
//! in GLBL_DSC_ERR_STS, data-movement failures in the MM engine's error code register. The model
//! uses error field 1 for descriptor errors and 2 for data errors.

use super::state::*;
use crate::direction::Direction;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

const DESC_BYTES: u64 = 32;
const DV: u32 = 1 << 28;
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

pub(crate) fn worker(shared: Arc<Shared>, dir: Direction) {
    let mm = shared.mm(dir);
    loop {
        let seen = mm.kick.load(Ordering::Acquire);
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        if mm.stalled.load(Ordering::Acquire) {
            // A stalled engine (test hook) moves nothing: look again now and then, not at every
            // doorbell, so it does not compete with the driver's core for the doorbell's lines.
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let served = if mm.running() { serve(&shared, dir) } else { false };
        if !served && !wait_for_kick(&shared, mm, seen) {
            return;
        }
    }
}

/// Wait until the doorbell counter moves past `seen` (spin, then park); false on shutdown.
fn wait_for_kick(shared: &Shared, mm: &Mm, seen: u64) -> bool {
    super::super::spin::briefly(|| mm.kick.load(Ordering::Acquire) != seen || shared.shutdown.load(Ordering::Acquire));
    let mut parked = mm.parked.lock().unwrap_or_else(|e| e.into_inner());
    // Announce the sleep before the last look at the counter (see `Mm::wake_worker`).
    mm.sleeping.store(true, Ordering::SeqCst);
    let mut slept = false;
    let woken = loop {
        if mm.kick.load(Ordering::SeqCst) != seen {
            break true;
        }
        if shared.shutdown.load(Ordering::Acquire) {
            break false;
        }
        if mm.stalled.load(Ordering::Acquire) {
            // The stall hook is cleared without a doorbell: look again now and then.
            mm.sleeping.store(false, Ordering::SeqCst);
            drop(parked);
            std::thread::sleep(Duration::from_micros(200));
            return true;
        }
        *parked = true;
        parked = mm.wake.wait(parked).unwrap_or_else(|e| e.into_inner());
        *parked = false;
        slept = true;
    };
    mm.sleeping.store(false, Ordering::SeqCst);
    drop(parked);
    mm.waker.at_start(seen, mm.kick.load(Ordering::Acquire), slept);
    woken
}

/// Stepped mode: serve what is pending until nothing moves (the engine is idle, stalled,
/// stopped or waiting on a held queue). Runs on the caller's thread: the driver's doorbell or
/// run-bit write, or a test's step. Returns whether any descriptor moved.
pub(crate) fn advance(shared: &Shared, dir: Direction) -> bool {
    let mm = shared.mm(dir);
    let mut moved = false;
    while mm.running() && !mm.stalled.load(Ordering::Acquire) && serve(shared, dir) {
        moved = true;
    }
    moved
}

/// One pass over the queues with pending doorbells; true if any descriptor moved.
pub(crate) fn serve(shared: &Shared, dir: Direction) -> bool {
    let mm = shared.mm(dir);
    let mut moved = false;
    for (w, word) in mm.pending.iter().enumerate() {
        let mut bits = word.load(Ordering::Acquire);
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let qid = w * 64 + b;
            word.fetch_and(!(1u64 << b), Ordering::AcqRel);
            let (did, more) = burst(shared, dir, qid);
            moved |= did;
            if more {
                word.fetch_or(1u64 << b, Ordering::AcqRel);
            }
        }
    }
    moved
}

/// What a burst works on, read from the contexts under the queue's lock.
struct Plan {
    gen: u64,
    base: u64,
    ring: u32,
    cidx: u32,
    n: u32,
    wb: u32,
    fetched: Option<Vec<Option<[u8; 32]>>>,
}

/// Serve up to `BURST` descriptors of one queue: (moved any, more work waiting).
fn burst(shared: &Shared, dir: Direction, qid: usize) -> (bool, bool) {
    let Some(q) = shared.queue(dir, qid) else { return (false, false) };
    if shared.cfg.stepped && shared.mm(dir).held.get(qid).is_some_and(|h| h.load(Ordering::Acquire)) {
        // Stepped: the hold would wait on the thread that must release it; the queue keeps its
        // doorbell pending and is served once released and stepped.
        return (false, true);
    }
    let plan = {
        let mut c = q.lock();
        match plan(shared, dir, qid, &mut c) {
            Ok(Some(p)) => p,
            Ok(None) => return (false, false),
            Err(stop) => {
                let gen = c.gen;
                let cidx = c.cidx();
                drop(c);
                fail(shared, dir, qid, gen, cidx, stop);
                return (false, false);
            }
        }
    };
    hold(shared, dir, qid);
    let mut done = 0u32;
    let mut stop = None;
    for k in 0..plan.n {
        super::super::shake::point();
        let slot = (plan.cidx + k) % plan.ring;
        let desc = match &plan.fetched {
            Some(f) => f.get(k as usize).copied().flatten().ok_or_else(|| {
                Stop::dsc(
                    shared.ip.dsc_ur_ca(),
                    format!(
                        "descriptor fetch at slot {slot} failed when the doorbell rang (ring base {:#x})",
                        plan.base
                    ),
                )
            }),
            None => fetch(shared, plan.base + slot as u64 * DESC_BYTES),
        };
        match desc.and_then(|d| execute(shared, dir, qid as u32, slot, &d)) {
            Ok(()) => {
                done += 1;
                // The engine's completed count moves with each descriptor (the status writeback
                // comes only at the end of a burst).
                shared.mm(dir).completed.fetch_add(1, Ordering::AcqRel);
            }
            Err(s) => {
                stop = Some(s);
                break;
            }
        }
    }
    let more = complete(shared, dir, qid, &plan, done);
    if let Some(s) = stop {
        fail(shared, dir, qid, plan.gen, (plan.cidx + done) % plan.ring, s);
        return (done > 0, false);
    }
    (done > 0, more)
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

/// Test hook: keep the fetched descriptors of a held queue in flight until it is released.
fn hold(shared: &Shared, dir: Direction, qid: usize) {
    let Some(held) = shared.mm(dir).held.get(qid) else { return };
    while held.load(Ordering::Acquire) && !shared.shutdown.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_micros(100));
    }
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
    if flags & DV == 0 {
        return Err(dsc(
            shared.ip.dsc_dsc(),
            format!("{dir} queue {qid} slot {slot}: descriptor valid (DV, bit 28) is not set"),
        ));
    }
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
    // A shaken worker may hold back its writeback here, after the data moved.
    super::super::shake::before_report();
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
        if shared.host.store_u32_release(at, pidx | cidx << 16).is_err() {
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
        return shared.aggregate(dir, qid, c.sw[4] & SW4_VEC);
    }
    let vector = c.sw[4] & SW4_VEC;
    shared.irq_out.message(vector, || format!("{dir} queue {qid} raised its interrupt (vector {vector})"));
}

/// Stop queue `qid` on an error: error field in its software context, the fault in words.
fn fail(shared: &Shared, dir: Direction, qid: usize, gen: u64, cidx: u32, s: Stop) {
    super::super::shake::before_report();
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
