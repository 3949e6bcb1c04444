//! The sim QDMA's stream (ST) queues and the vendor's example design behind them. An H2C doorbell
//! gives the rung packets to the example design's checker, and the C2H traffic generator writes
//! packets whenever it is started or a C2H PIDX or CMPT CIDX doorbell gives it room, each packet
//! at the engine's datapath (`DATAPATH`): it is done its fetch and bytes after the one before, and
//! moves when the host next looks after that (`datapath.rs`), in the looking thread. Stepped,
//! every packet is due at once, inside the register write that caused it.
//!
//! Written from the vendor's layouts, independently of the driver's constants: H2C ST
//! descriptors of 16 bytes (PG302 "H2C Stream Descriptor (16B)": metadata [31:0], the packet's
//! length [47:32], reserved [63:48], source address; in internal mode each is one whole packet,
//! a packet never spans descriptors) with the status writeback after the last slot; C2H ST
//! descriptors of 8 bytes (a buffer address), whose buffers have the size GLBL_C2H_BUF_SZ
//! (0xab0) holds at the prefetch context's index; the completion context (select 6) names the
//! ring, its size index, entry size, colour and status-descriptor enable, laid out per IP (soft
//! 3.x keeps address bits 37:12 in word 1 [31:6], EQDMA and CPM5 bits 37:6 in word 1 and 5:2 in
//! word 5 [17:14]); entries carry colour bit 1, error 2, descriptors used 3, length [19:4]. When
//! the ring reports them (its status descriptor and interrupt) is its trigger's (`trigger.rs`).
//!
//! The example design (`ExampleBar`, the user BAR): C2H generator queue 0x0, length 0x4,
//! control 0x8 (bit 1 starts), packet count 0x20; H2C checker control 0xc (bit 0 clears) and
//! status 0x10 (bit 0: every packet since the clear matched). Its data is a 16-bit little-endian
//! count from 0 restarting each packet. A packet takes at most 7 buffers (the DPDK testapp:
//! "a single completion will point to at most 7 descriptors"); a zero-length packet still uses
//! one. With no buffer posted the generator stalls (the stream backpressures) until the C2H PIDX
//! doorbell gives credits; a completion ring with no free entry is the IP's overflow error
//! (C2H_ERR_STAT WRB_QFULL, bit 13), which stops the generator; a packet for a queue that is not
//! a valid ST C2H queue is dropped (counted) and flagged.

use super::engine::{raise, DB_IRQ_ARM, SW0_IRQ_ARM, SW1_IRQ_EN};
use super::st_state::{Cmpt, StState, GE_C2H_ST};
use super::state::*;
use super::trigger::R_C2H_INT_TIMER_TICK;
use crate::direction::Direction;
use std::sync::atomic::Ordering;

/// Model time an ST packet of `len` bytes takes on the datapath (none for `stream_no_data`,
/// whose far end costs nothing by design).
pub(super) fn cost(s: &Shared, len: u64) -> u64 {
    if s.cfg.stream_no_data {
        0
    } else {
        DATAPATH.desc_ns(len)
    }
}

/// Leave `due` in `dir`'s engine if it is sooner than what is there.
fn due_at(s: &Shared, dir: Direction, due: u64) {
    let d = &s.mm(dir).due;
    d.set(d.get().min(due));
}

pub(crate) const R_C2H_REGS: u32 = 0xa00;
const R_C2H_REGS_END: u32 = 0xafc;
const R_C2H_BUF_SZ: u32 = 0xab0;
const R_C2H_ERR_STAT: u32 = 0xaf0;
const R_C2H_ERR_MASK: u32 = 0xaf4;
const C2H_ERR_INV_Q: u32 = 1 << 12;
const C2H_ERR_QFULL: u32 = 1 << 13;
const C2H_ERR_CIDX: u32 = 1 << 14;
const SEL_CMPT: u32 = 6;
const SEL_PFTCH: u32 = 7;
const MAX_BUFFERS: u64 = 7;
pub(super) const H2C_DESC: u64 = 16;
pub(super) const C2H_DESC: u64 = 8;

/// One period of the example design's data: its 16-bit little-endian count from 0 wraps after
/// 65,536 counts, so every packet's bytes are this period's, repeated from the start.
fn period() -> &'static [u8] {
    static PERIOD: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PERIOD.get_or_init(|| (0..1usize << 17).map(|i| ((i / 2) >> (8 * (i % 2))) as u8).collect())
}

/// The example design's data for one packet.
pub(crate) fn pattern(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let n = (len - v.len()).min(period().len());
        v.extend_from_slice(&period()[..n]);
    }
    v
}

/// Whether `packet` is the example design's data (`pattern`), compared a period at a time (a
/// memcmp): the checker runs in the host's thread when it looks, so its cost is the host path's.
pub(crate) fn is_pattern(packet: &[u8]) -> bool {
    packet.chunks(period().len()).all(|c| c == &period()[..c.len()])
}

pub(super) fn le16(b: &[u8], o: usize) -> u64 {
    u16::from_le_bytes([b[o], b[o + 1]]) as u64
}

pub(super) fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
}

impl Shared {
    pub(super) fn st(&self) -> std::sync::MutexGuard<'_, StState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ctx_words(&self, sel: u32, qid: u32) -> [u32; 8] {
        self.other_ctx.lock().unwrap_or_else(|e| e.into_inner()).get(&(sel, qid)).copied().unwrap_or([0; 8])
    }

    /// A C2H register (0xa00-0xafc) read.
    pub(crate) fn st_read(&self, off: u32) -> Option<u32> {
        if !(R_C2H_REGS..=R_C2H_REGS_END).contains(&off) && off != R_C2H_INT_TIMER_TICK {
            return None;
        }
        let st = self.st();
        Some(if off == R_C2H_ERR_STAT { st.c2h_err } else { st.regs.get(&off).copied().unwrap_or(0) })
    }

    /// A C2H register write; true if `off` is one.
    pub(crate) fn st_write(&self, off: u32, value: u32) -> bool {
        if !(R_C2H_REGS..=R_C2H_REGS_END).contains(&off) && off != R_C2H_INT_TIMER_TICK {
            return false;
        }
        let mut st = self.st();
        if off == R_C2H_ERR_STAT {
            st.c2h_err &= !value;
        } else {
            st.regs.insert(off, value);
        }
        true
    }

    fn c2h_error(&self, st: &mut StState, bit: u32) {
        let enabled = bit & st.regs.get(&R_C2H_ERR_MASK).copied().unwrap_or(0);
        st.c2h_err |= enabled;
        if enabled != 0 {
            self.global_error(GE_C2H_ST);
        }
    }

    /// Bring the stream engine of `dir` to model time `now`: the H2C packets and generator
    /// packets due by then move, and the completion timers due fire. On serve's clock thread the
    /// pass is staged (`sim::stage`): what it reads is fetched first and what it writes and
    /// signals is sent after, so no lock a register access takes is held across a DMA message.
    pub(crate) fn st_advance(&self, dir: Direction, now: u64) {
        if !crate::sim::stage::clock_thread() {
            return self.st_move(dir, now);
        }
        crate::sim::stage::begin(self.st_fetch(dir, now));
        self.st_move(dir, now);
        self.send_staged(crate::sim::stage::end());
    }

    fn st_move(&self, dir: Direction, now: u64) {
        let mut st = self.st();
        self.mm(dir).due.clear();
        match dir {
            Direction::H2c => {
                let work: Vec<(u32, u32)> = st.h2c_work.iter().map(|(q, p)| (*q, *p)).collect();
                for (qid, pidx) in work {
                    self.h2c(&mut st, qid, pidx, now);
                }
            }
            Direction::C2h => {
                // CIDX updates a hands-off access took (`st_doorbell`): their reports first.
                for (qid, value) in std::mem::take(&mut st.cmpt_later) {
                    self.cmpt_updated(&mut st, qid, value);
                }
                self.pump(&mut st);
                self.timers(&mut st, now, None);
            }
        }
    }

    /// A hands-off access (`datapath::set_hands_off`: the client's memory is reached by message)
    /// moves nothing: what it starts is due now, for the server's clock thread to move.
    fn later(&self, dir: Direction) -> bool {
        if !crate::sim::datapath::hands_off() {
            return false;
        }
        self.mm(dir).due.set(0);
        true
    }

    /// Not fetched before a staged pass: the rest waits for the next, due at once.
    /// (Memory the host does not have is no wait: the read fails and the pass flags it.)
    fn not_at_hand(&self, dir: Direction, bus: u64, len: u64) -> bool {
        if crate::sim::stage::at_hand(bus, len as usize) || !self.host.contains(bus, len) {
            return false;
        }
        due_at(self, dir, 0);
        true
    }

    /// An ST doorbell: `reg` 4 (H2C PIDX), 8 (C2H PIDX) or 0xc (CMPT CIDX) of hardware queue
    /// `qid` (inside the FMAP: the caller checked).
    pub(crate) fn st_doorbell(&self, reg: u32, qid: u32, value: u32) {
        let mut st = self.st();
        let t = self.clock.now();
        match reg {
            4 => {
                // QDMA_DMA_SEL_IRQ_EN_MASK: the update arms the queue's interrupt, as on MM.
                if let Some(q) = self.queue(Direction::H2c, qid as usize).filter(|_| value & DB_IRQ_ARM != 0) {
                    let mut c = q.lock();
                    c.sw[0] |= SW0_IRQ_ARM;
                    if c.irq_pending == Some(c.gen) {
                        raise(self, Direction::H2c, qid as usize, &mut c);
                    }
                }
                if st.h2c_work.is_empty() {
                    // An idle engine starts on the packets now.
                    st.h2c_free_at = st.h2c_free_at.max(t);
                }
                if self.later(Direction::H2c) {
                    st.h2c_work.insert(qid, value & 0xffff);
                    return;
                }
                self.h2c(&mut st, qid, value & 0xffff, self.now())
            }
            8 => {
                if let Some(q) = self.queue(Direction::C2h, qid as usize) {
                    let mut c = q.lock();
                    c.sw[0] = (c.sw[0] & !0xffff) | (value & 0xffff);
                }
                if std::mem::take(&mut st.c2h_waiting) {
                    // The generator waited for these credits: it goes on from now.
                    st.c2h_free_at = st.c2h_free_at.max(t);
                }
                if !self.later(Direction::C2h) {
                    self.pump(&mut st);
                }
            }
            0xc => {
                if self.cmpt_cidx(&mut st, qid, value & 0xffff) {
                    // The trigger re-evaluated, the interrupt armed (`trigger.rs`); a report
                    // writes host memory, so a hands-off access leaves it to the clock thread.
                    if self.later(Direction::C2h) {
                        st.cmpt_later.push((qid, value));
                        return;
                    }
                    self.cmpt_updated(&mut st, qid, value);
                }
                if !self.later(Direction::C2h) {
                    self.pump(&mut st);
                }
            }
            _ => {}
        }
    }

    /// Serve H2C ST queue `qid` up to producer index `pidx`, the packets due by model time `now`:
    /// each goes to the checker. The queue stays in `h2c_work` until it is served whole.
    fn h2c(&self, st: &mut StState, qid: u32, pidx: u32, now: u64) {
        st.h2c_work.remove(&qid);
        let Some(q) = self.queue(Direction::H2c, qid as usize) else { return };
        let mut c = q.lock();
        c.sw[0] = (c.sw[0] & !0xffff) | pidx;
        if !c.enabled() {
            self.mm(Direction::H2c)
                .set_fault(format!("h2c queue {qid}: doorbell for a queue that is not enabled: ignored"));
            return;
        }
        let w1 = c.sw[1];
        if w1 & SW1_IS_MM != 0 || (w1 >> 16) & 3 != 1 {
            self.violation(format!(
                "h2c queue {qid}: a doorbell on the stream card for a queue whose software context is not H2C ST with \
                 16-byte descriptors (is_mm {}, descriptor size code {})",
                w1 >> 31,
                (w1 >> 16) & 3
            ));
            c.sw[1] |= 1 << SW1_ERR_SHIFT;
            return;
        }
        let ring = self.ring_entries(c.ring_idx()).saturating_sub(1);
        if ring < 2 || pidx >= ring {
            self.violation(format!("h2c queue {qid}: producer index {pidx} outside a ring of {ring} descriptors"));
            return;
        }
        let base = c.ring_base();
        let mut cidx = c.cidx();
        let first = cidx;
        if self.cfg.stream_no_data {
            cidx = pidx;
        }
        let mut waits = false;
        while cidx != pidx {
            let mut d = [0u8; H2C_DESC as usize];
            let at = base + cidx as u64 * H2C_DESC;
            if self.not_at_hand(Direction::H2c, at, H2C_DESC) {
                st.h2c_work.insert(qid, pidx);
                waits = true;
                break;
            }
            let ok = self.host.read(at, &mut d).is_ok();
            let (len, flags, src) = (le16(&d, 4), le16(&d, 6), le64(&d, 8));
            let due = st.h2c_free_at + cost(self, len);
            let data_later = ok && len > 0 && due <= now && self.not_at_hand(Direction::H2c, src, len);
            if due > now || data_later {
                // Not moved yet: the rest when the host next looks after `due`.
                st.h2c_work.insert(qid, pidx);
                due_at(self, Direction::H2c, due);
                waits = true;
                break;
            }
            st.h2c_free_at = due;
            let mut data = vec![0u8; len as usize];
            if !ok || !self.bus_master.load(Ordering::Acquire) || self.host.read(src, &mut data).is_err() {
                self.violation(format!(
                    "h2c queue {qid} slot {cidx}: descriptor or data read failed (address {src:#x})"
                ));
                c.sw[1] |= 1 << SW1_ERR_SHIFT;
                // Stopped with nothing in flight, as an MM queue stopped on an error shows.
                c.hw[1] = HW1_IDL_STP_B;
                // Logged as an MM queue's failed host read is (on soft 3.x the descriptor
                // engine's "DMA engine error"), so the error interrupt fires for it too.
                self.mm_error(Direction::H2c, false, MM_RD_UR_CA, qid, cidx);
                break;
            }
            super::rules::h2c_st_descriptor(self, qid, cidx, flags);
            if st.corrupt && !data.is_empty() {
                data[0] ^= 1;
            }
            // One descriptor, one packet (internal mode): the checker sees it whole.
            self.check(st, qid, true, true, &data);
            cidx = (cidx + 1) % ring;
        }
        c.hw[0] = (c.hw[0] & !0xffff) | cidx;
        if waits && cidx == first {
            return; // nothing moved: nothing to write back
        }
        if w1 & SW1_WBK_EN != 0 {
            let _ = self.host.store_u32_release(base + ring as u64 * H2C_DESC, pidx | cidx << 16);
            // Interrupt mode: the writeback raises the queue's interrupt if armed, as on MM.
            if c.sw[1] & SW1_IRQ_EN != 0 {
                if c.sw[0] & SW0_IRQ_ARM != 0 {
                    raise(self, Direction::H2c, qid as usize, &mut c);
                } else {
                    c.irq_pending = Some(c.gen);
                }
            }
        }
    }

    /// The example design's H2C checker: each packet per queue against the pattern.
    fn check(&self, st: &mut StState, qid: u32, sop: bool, eop: bool, data: &[u8]) {
        let part = st.partial.entry(qid).or_default();
        if sop && !part.is_empty() {
            self.violation(format!(
                "h2c queue {qid}: SOP before the previous packet's EOP ({} bytes pending)",
                part.len()
            ));
            part.clear();
        }
        if !sop && part.is_empty() && !data.is_empty() {
            self.violation(format!("h2c queue {qid}: data without SOP"));
        }
        part.extend_from_slice(data);
        if eop {
            let packet = std::mem::take(part);
            let good = is_pattern(&packet);
            st.checked += 1;
            st.matched &= good;
        }
    }

    /// The CMPT CIDX doorbell: completion entries given back (never past those written); false
    /// when refused.
    fn cmpt_cidx(&self, st: &mut StState, qid: u32, cidx: u32) -> bool {
        let ctx = self.ctx_words(SEL_CMPT, qid);
        let size = self.ring_entries((ctx[0] >> 28) as usize).saturating_sub(1);
        let gen = self.queue(Direction::C2h, qid as usize).map_or(0, |q| q.lock().gen);
        let cm = st.cmpt.entry(qid).or_default();
        if cm.gen != gen {
            *cm = Cmpt { gen, color: ctx[0] & 1 << 27 != 0, ..Cmpt::default() };
        }
        let written = (cm.pidx + size - cm.cidx) % size.max(1);
        let given = (cidx + size - cm.cidx) % size.max(1);
        if size == 0 || cidx >= size || given > written {
            self.violation(format!(
                "c2h queue {qid}: completion CIDX {cidx} is past the entries written (pidx {}, cidx {}, ring {size})",
                cm.pidx, cm.cidx
            ));
            self.c2h_error(st, C2H_ERR_CIDX);
            return false;
        }
        cm.cidx = cidx;
        true
    }

    /// The generator writes what it can: stops at credit exhaustion (stall), a full completion
    /// ring (error) or the end of its count.
    fn pump(&self, st: &mut StState) {
        // A stalled C2H engine (test hook) holds the generator: nothing is written, nothing raised.
        if self.mm(Direction::C2h).stalled.load(Ordering::Acquire) {
            return;
        }
        while st.remaining > 0 && st.gen_control & 2 != 0 {
            if !self.packet(st) {
                return;
            }
        }
    }

    /// Packets of the generator to one queue while they can go; false when none can now.
    fn packet(&self, st: &mut StState) -> bool {
        let (qid, len) = (st.gen_qid, st.gen_len as u64);
        let discard = |st: &mut StState, why: String| {
            st.dropped += 1;
            st.remaining -= 1;
            self.violation(format!("c2h queue {qid}: generator packet dropped: {why}"));
            true
        };
        let Some(q) = self.queue(Direction::C2h, qid as usize) else {
            return discard(st, "no such queue".into());
        };
        let mut c = q.lock();
        if !c.enabled() || c.sw[1] & SW1_IS_MM != 0 || (c.sw[1] >> 16) & 3 != 0 {
            discard(st, "the queue is not an enabled C2H ST queue with 8-byte descriptors".into());
            drop(c);
            self.c2h_error(st, C2H_ERR_INV_Q);
            return true;
        }
        let cm_ctx = self.ctx_words(SEL_CMPT, qid);
        let pf = self.ctx_words(SEL_PFTCH, qid);
        if cm_ctx[3] & 1 << 28 == 0 || pf[1] & 1 << 13 == 0 {
            discard(st, "its completion or prefetch context is not valid".into());
            drop(c);
            self.c2h_error(st, C2H_ERR_INV_Q);
            return true;
        }
        let buf = st.regs.get(&(R_C2H_BUF_SZ + 4 * ((pf[0] >> 1) & 0xf))).copied().unwrap_or(0) as u64;
        if buf == 0 {
            self.violation(format!("c2h queue {qid}: its buffer-size table entry is 0 (GLBL_C2H_BUF_SZ not written)"));
            st.gen_control = 0;
            return false;
        }
        let need = len.div_ceil(buf).max(1);
        if need > MAX_BUFFERS {
            self.violation(format!(
                "c2h queue {qid}: a {len}-byte packet needs {need} buffers of {buf}; the example design writes at most \
                 {MAX_BUFFERS} per completion"
            ));
            st.gen_control = 0;
            return false;
        }
        let ring = self.ring_entries(c.ring_idx()).saturating_sub(1);
        let (pidx, cidx) = (c.pidx(), c.cidx());
        if ring < 2 || (pidx + ring - cidx) % ring < need as u32 {
            st.c2h_waiting = true;
            return false; // no credits: the stream waits for the C2H PIDX doorbell
        }
        let size = self.ring_entries((cm_ctx[0] >> 28) as usize).saturating_sub(1);
        let gen = c.gen;
        let cm = *st
            .cmpt
            .entry(qid)
            .and_modify(|m| {
                if m.gen != gen {
                    *m = Cmpt { gen, color: cm_ctx[0] & 1 << 27 != 0, ..Cmpt::default() };
                }
            })
            .or_insert(Cmpt { gen, color: cm_ctx[0] & 1 << 27 != 0, ..Cmpt::default() });
        if size < 2 || (cm.pidx + 1) % size == cm.cidx {
            self.violation(format!("c2h queue {qid}: completion ring full ({size} entries, none given back)"));
            st.gen_control = 0;
            drop(c);
            self.c2h_error(st, C2H_ERR_QFULL);
            return false;
        }
        // Packets while credits, completion-ring room and the count last: the contexts were read
        // once above (nothing can change them meanwhile: this runs inside one register write).
        let mut data = if self.cfg.stream_no_data { Vec::new() } else { pattern(len as usize) };
        if st.corrupt && !data.is_empty() {
            data[0] ^= 1;
        }
        let base = c.ring_base();
        let esz = 8u64 << ((cm_ctx[2] >> 26) & 3);
        let cbase = self.cmpt_base(&cm_ctx);
        let mut m = cm;
        let mut cidx = cidx;
        let mut entry = [0u8; 64];
        let (now, mut written, mut later) = (self.now(), 0u32, false);
        let mut burst = self.burst(st, qid, &mut m, &cm_ctx);
        loop {
            // Each packet is done its time after the one before; the rest when the host next looks.
            let due = st.c2h_free_at + cost(self, len);
            let slot = |k: u64| base + ((cidx + k as u32) % ring) as u64 * C2H_DESC;
            let unfetched =
                !self.cfg.stream_no_data && (0..need).any(|k| self.not_at_hand(Direction::C2h, slot(k), C2H_DESC));
            if due > now || unfetched {
                due_at(self, Direction::C2h, due);
                later = true;
                if written == 0 {
                    return false;
                }
                break;
            }
            self.before_entry(&mut m, &mut burst, due);
            st.c2h_free_at = due;
            written += 1;
            for k in (0..need).filter(|_| !self.cfg.stream_no_data) {
                let slot = (cidx + k as u32) % ring;
                let mut d = [0u8; C2H_DESC as usize];
                let chunk = &data[(k * buf).min(len) as usize..((k + 1) * buf).min(len) as usize];
                let at = base + slot as u64 * C2H_DESC;
                let failed = if !self.bus_master.load(Ordering::Acquire) {
                    Some("Bus Master is off".to_string())
                } else if self.host.read(at, &mut d).is_err() {
                    Some(format!("its descriptor at {at:#x} could not be read"))
                } else if self.host.write(le64(&d, 0), chunk).is_err() {
                    Some(format!("its {} bytes could not be written at {:#x}", chunk.len(), le64(&d, 0)))
                } else {
                    None
                };
                if failed.is_none() && k + 1 == need {
                    self.overrun.host(&self.host, le64(&d, 0) + chunk.len() as u64);
                }
                if let Some(why) = failed {
                    self.violation(format!("c2h queue {qid} slot {slot}: {why}"));
                    c.sw[1] |= 2 << SW1_ERR_SHIFT;
                    st.gen_control = 0;
                    break;
                }
            }
            if st.gen_control & 2 == 0 {
                break;
            }
            cidx = (cidx + need as u32) % ring;
            // The completion entry, whole (its colour with it: nothing reads the ring while
            // this register write runs).
            let err = std::mem::take(&mut st.error_next);
            let w0 = (m.color as u32) << 1 | (err as u32) << 2 | 1 << 3 | ((len as u32) & 0xffff) << 4;
            entry[..4].copy_from_slice(&w0.to_le_bytes());
            let _ = self.host.write(cbase + m.pidx as u64 * esz, &entry[..esz as usize]);
            m.pidx = (m.pidx + 1) % size;
            if m.pidx == 0 {
                m.color = !m.color;
            }
            self.after_entry(&mut m, &mut burst, due);
            st.entries += 1;
            st.remaining -= 1;
            let credits = (pidx + ring - cidx) % ring;
            if st.remaining == 0 || credits < need as u32 || (m.pidx + 1) % size == m.cidx {
                break;
            }
        }
        c.hw[0] = (c.hw[0] & !0xffff) | cidx;
        drop(c);
        st.cmpt.insert(qid, m);
        // The status descriptor and interrupt the burst's triggers owe, after everything they
        // report is in memory: once per burst, as only the last report can be seen.
        self.after_burst(st, qid, burst);
        !later
    }

    /// The example design's user BAR read.
    pub(crate) fn example_read(&self, off: u32) -> u32 {
        let st = self.st();
        match off {
            0x00 => st.gen_qid,
            0x04 => st.gen_len,
            0x08 => st.gen_control,
            0x10 => (st.matched && st.checked > 0) as u32,
            0x20 => st.gen_count,
            0x50 => st.cmpt_size,
            _ => 0,
        }
    }

    /// The example design's user BAR write.
    pub(crate) fn example_write(&self, off: u32, value: u32) {
        let mut st = self.st();
        match off {
            0x00 => st.gen_qid = value & 0xfff,
            0x04 => st.gen_len = value & 0xffff,
            0x08 => {
                // Each write with bit 1 set starts a run of the count (the scripts write 2 per
                // transfer); clearing it stops the generator.
                st.gen_control = value & 0xf;
                st.remaining = if value & 2 != 0 { st.gen_count } else { 0 };
                // The generator starts now (not before its last packet's time).
                st.c2h_free_at = st.c2h_free_at.max(self.clock.now());
                if !self.later(Direction::C2h) {
                    self.pump(&mut st);
                }
            }
            0x0c if value & 1 != 0 => {
                st.checked = 0;
                st.matched = true;
                st.partial.clear();
            }
            0x20 => st.gen_count = value,
            // C2H_COMPLETION_SIZE: bit 3 the user trigger of every completion (`trigger.rs`).
            0x50 => st.cmpt_size = value & 0x170f,
            _ => {}
        }
    }

    /// For tests: (packets the checker saw, all matched), entries written, packets dropped,
    /// packets the generator still owes.
    pub(crate) fn st_counts(&self) -> (u64, bool, u64, u64, u32) {
        let st = self.st();
        (st.checked, st.matched, st.entries, st.dropped, st.remaining)
    }

    pub(crate) fn st_error_next(&self) {
        self.st().error_next = true;
    }

    pub(crate) fn st_corrupt(&self, on: bool) {
        self.st().corrupt = on;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pattern_check_agrees_with_the_pattern() {
        for len in [0, 1, 2, 7, 8, 9, 4095, 65536, 131_075] {
            let p = super::pattern(len);
            assert!(super::is_pattern(&p), "{len}");
            for at in [0, len / 2, len.saturating_sub(1)].into_iter().filter(|_| len > 0) {
                let mut q = p.clone();
                q[at] ^= 0x10;
                assert!(!super::is_pattern(&q), "{len}: byte {at} flipped");
            }
        }
    }
}
