//! The sim QDMA's stream (ST) queues and the vendor's example design behind them, modelled in
//! the writer's thread: an H2C doorbell moves the rung packets to the example design's checker
//! before the write returns, and the C2H traffic generator writes packets whenever it is started
//! or a C2H PIDX or CMPT CIDX doorbell gives it room, so every event happens in the order the
//! driver caused it (as the stepped MM engine does; docs/determinism.md).
//!
//! Written from the vendor's layouts, independently of the driver's constants: H2C ST
//! descriptors of 16 bytes (`struct qdma_h2c_desc`: cdh_flags, pld_len, len, flags with SOP bit
//! 1 and EOP bit 2, source address) with the status writeback after the last slot; C2H ST
//! descriptors of 8 bytes (a buffer address), whose buffers have the size GLBL_C2H_BUF_SZ
//! (0xab0) holds at the prefetch context's index; the completion context (select 6) names the
//! ring, its size index, entry size, colour and status-descriptor enable, laid out per IP (soft
//! 3.x keeps address bits 37:12 in word 1 [31:6], EQDMA and CPM5 bits 37:6 in word 1 and 5:2 in
//! word 5 [17:14]); entries carry colour bit 1, error 2, descriptors used 3, length [19:4].
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
use super::layout::Ip;
use super::st_state::{Cmpt, StState, GE_C2H_ST};
use super::state::*;
use crate::direction::Direction;
use std::sync::atomic::Ordering;

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
const H2C_DESC: u64 = 16;
const C2H_DESC: u64 = 8;
/// Completion context word 0's interrupt enable, word 4's aggregation bit (vector [14:4]), and
/// the CMPT CIDX update's interrupt enable (`QDMA_COMPL_CTXT_W0_EN_INT_MASK`,
/// `QDMA_COMPL_CTXT_W4_INTR_AGGR_MASK`, `QDMA_DMAP_SEL_CMPT_IRQ_EN_MASK`).
const CM0_EN_INT: u32 = 1 << 1;
const CM4_INT_AGGR: u32 = 1 << 15;
const DB_CMPT_IRQ_EN: u32 = 1 << 28;

/// The example design's data for one packet.
pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i / 2) >> (8 * (i % 2))) as u8).collect()
}

fn le16(b: &[u8], o: usize) -> u64 {
    u16::from_le_bytes([b[o], b[o + 1]]) as u64
}

fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
}

impl Shared {
    fn st(&self) -> std::sync::MutexGuard<'_, StState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ctx_words(&self, sel: u32, qid: u32) -> [u32; 8] {
        self.other_ctx.lock().unwrap_or_else(|e| e.into_inner()).get(&(sel, qid)).copied().unwrap_or([0; 8])
    }

    /// A C2H register (0xa00-0xafc) read.
    pub(crate) fn st_read(&self, off: u32) -> Option<u32> {
        if !(R_C2H_REGS..=R_C2H_REGS_END).contains(&off) {
            return None;
        }
        let st = self.st();
        Some(if off == R_C2H_ERR_STAT { st.c2h_err } else { st.regs.get(&off).copied().unwrap_or(0) })
    }

    /// A C2H register write; true if `off` is one.
    pub(crate) fn st_write(&self, off: u32, value: u32) -> bool {
        if !(R_C2H_REGS..=R_C2H_REGS_END).contains(&off) {
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

    /// An ST doorbell: `reg` 4 (H2C PIDX), 8 (C2H PIDX) or 0xc (CMPT CIDX) of hardware queue
    /// `qid` (inside the FMAP: the caller checked).
    pub(crate) fn st_doorbell(&self, reg: u32, qid: u32, value: u32) {
        let mut st = self.st();
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
                self.h2c(&mut st, qid, value & 0xffff)
            }
            8 => {
                if let Some(q) = self.queue(Direction::C2h, qid as usize) {
                    let mut c = q.lock();
                    c.sw[0] = (c.sw[0] & !0xffff) | (value & 0xffff);
                }
                self.pump(&mut st);
            }
            0xc => {
                self.cmpt_cidx(&mut st, qid, value & 0xffff);
                if value & DB_CMPT_IRQ_EN != 0 {
                    self.cmpt_arm(&mut st, qid);
                }
                self.pump(&mut st);
            }
            _ => {}
        }
    }

    /// Serve H2C ST queue `qid` up to producer index `pidx`: each packet goes to the checker.
    fn h2c(&self, st: &mut StState, qid: u32, pidx: u32) {
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
        if self.cfg.stream_no_data {
            cidx = pidx;
        }
        while cidx != pidx {
            let mut d = [0u8; H2C_DESC as usize];
            let ok = self.host.read(base + cidx as u64 * H2C_DESC, &mut d).is_ok();
            let (len, flags, src) = (le16(&d, 4), le16(&d, 6), le64(&d, 8));
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
            if st.corrupt && flags & 2 != 0 && !data.is_empty() {
                data[0] ^= 1;
            }
            self.check(st, qid, flags & 2 != 0, flags & 4 != 0, &data);
            cidx = (cidx + 1) % ring;
        }
        c.hw[0] = (c.hw[0] & !0xffff) | cidx;
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

    /// A CMPT CIDX update with its interrupt enable: the completion ring is armed, and raises at
    /// once when entries came since the driver last looked (`QDMA_DMAP_SEL_CMPT_IRQ_EN_MASK`).
    fn cmpt_arm(&self, st: &mut StState, qid: u32) {
        let Some(cm) = st.cmpt.get_mut(&qid) else { return };
        cm.armed = true;
        if std::mem::take(&mut cm.pending) || cm.pidx != cm.cidx {
            self.cmpt_interrupt(st, qid);
        }
    }

    /// Entries were written to C2H queue `qid`'s completion ring: with its context's interrupt
    /// enabled (trigger mode "every entry", the only one the driver sets), it raises its vector,
    /// or writes an entry into the interrupt ring its context names, if armed, and disarms.
    fn cmpt_interrupt(&self, st: &mut StState, qid: u32) {
        let ctx = self.ctx_words(SEL_CMPT, qid);
        let Some(cm) = st.cmpt.get_mut(&qid) else { return };
        if ctx[0] & CM0_EN_INT == 0 {
            return;
        }
        if !std::mem::take(&mut cm.armed) {
            cm.pending = true;
            return;
        }
        cm.pending = false;
        let vec = (ctx[4] >> 4) & 0x7ff;
        if ctx[4] & CM4_INT_AGGR != 0 {
            return self.aggregate(Direction::C2h, qid as usize, vec);
        }
        self.irq_out.message(vec, || format!("c2h queue {qid}'s completion ring raised its interrupt (vector {vec})"));
    }

    /// The example design's H2C checker: packets from SOP to EOP per queue against the pattern.
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
            let good = packet == pattern(packet.len());
            st.checked += 1;
            st.matched &= good;
        }
    }

    /// The CMPT CIDX doorbell: completion entries given back (never past those written).
    fn cmpt_cidx(&self, st: &mut StState, qid: u32, cidx: u32) {
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
            return;
        }
        cm.cidx = cidx;
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
        loop {
            for k in (0..need).filter(|_| !self.cfg.stream_no_data) {
                let slot = (cidx + k as u32) % ring;
                let mut d = [0u8; C2H_DESC as usize];
                let chunk = &data[(k * buf).min(len) as usize..((k + 1) * buf).min(len) as usize];
                let fine = self.bus_master.load(Ordering::Acquire)
                    && self.host.read(base + slot as u64 * C2H_DESC, &mut d).is_ok()
                    && self.host.write(le64(&d, 0), chunk).is_ok();
                if !fine {
                    self.violation(format!("c2h queue {qid} slot {slot}: descriptor read or data write failed"));
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
        if cm_ctx[0] & 1 != 0 {
            // The status descriptor after the last entry (`struct qdma_c2h_cmpt_cmpl_status`),
            // once per burst: only its last value can be seen.
            let status = cbase + size as u64 * esz;
            let _ = self.host.write(status + 4, &(m.color as u32).to_le_bytes());
            let _ = self.host.store_u32_release(status, m.pidx | m.cidx << 16);
        }
        // The interrupt after everything it reports is in memory.
        self.cmpt_interrupt(st, qid);
        true
    }

    /// The completion ring's base from its context, per the IP's layout.
    fn cmpt_base(&self, w: &[u32; 8]) -> u64 {
        let high = ((w[2] & 0x03ff_ffff) as u64) << 38;
        match self.ip {
            Ip::Eqdma | Ip::Cpm5 => high | (w[1] as u64) << 6 | (((w[5] >> 14) & 0xf) as u64) << 2,
            _ => high | ((w[1] >> 6) as u64) << 12,
        }
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
                self.pump(&mut st);
            }
            0x0c if value & 1 != 0 => {
                st.checked = 0;
                st.matched = true;
                st.partial.clear();
            }
            0x20 => st.gen_count = value,
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
