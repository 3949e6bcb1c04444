//! When the sim QDMA's C2H completion rings tell the host (issue 50 item 13): the completion
//! context's trigger mode (W0 [4:2]) with its counter ([20:17]) and timer ([24:21]) indexes
//! moderates the ring's status descriptor writes and its interrupt, not its entries, which are
//! written as packets complete (PG302 "Completion Status/Interrupt Moderation", "Completion
//! Timer"; the modes of `QDMA_DMAP_SEL_CMPT_CIDX` [26:24]: 0 Disabled, 1 Every, 2 User_Count,
//! 3 User, 4 User_Timer, 5 Timer_Count). A trigger writes the status descriptor (after the last
//! entry: the producer index of its moment, the consumer index, the colour) and then the
//! interrupt. What triggers:
//! - Every: each entry.
//! - the user trigger (User, User_Count, User_Timer): an entry whose completion carried the
//!   design's `s_axis_c2h_cmpt_ctrl_user_trig`, which the example design drives from
//!   C2H_COMPLETION_SIZE (user BAR 0x50) bit 3 for every completion while set.
//! - the count (User_Count, Timer_Count): an entry that leaves at least QDMA_C2H_CNT_TH[counter]
//!   entries unread (written past the consumer index of the last CIDX update).
//! - the timer (User_Timer, Timer_Count): QDMA_C2H_TIMER_CNT[timer] ticks of C2H_INT_TIMER_TICK
//!   (0xb0c) cycles of the 250 MHz DMA clock after the entry that started it, if entries are
//!   unread then. An entry written with no timer running starts it, as does a CIDX update that
//!   leaves entries unread; a report stops it. It is a due time in model time, like a packet's:
//!   it fires when the host next looks after it, however late, with the producer index of its
//!   moment (entries due after it are not in that report).
//!
//! The interrupt: one outstanding per queue. A CIDX update with its interrupt enable arms it; a
//! trigger while it is not armed is remembered; a CIDX update re-evaluates, and what is still met
//! reports again (Every: entries unread; a count: at least the threshold unread; a remembered
//! trigger: entries unread). With the context's `full_upd` (W4 bit 1) a CIDX update's mode and
//! indexes replace the context's; without it, as libqdma leaves it, only its index counts.
//! Programming the model flags: a reserved mode (6, 7), and a timer or count whose table entry
//! or tick is 0 (the vendor writes them at init, `*_set_default_global_csr`).

use super::layout::Ip;
use super::st_state::{Cmpt, StState};
use super::state::{Shared, AXI_CLOCK_HZ};
use crate::direction::Direction;

const SEL_CMPT: u32 = 6;
const R_TIMER_CNT: u32 = 0xa00;
const R_CNT_TH: u32 = 0xa40;
pub(crate) const R_C2H_INT_TIMER_TICK: u32 = 0xb0c;
/// The example design's C2H_COMPLETION_SIZE bit 3: the user trigger.
pub(crate) const USER_TRIG: u32 = 1 << 3;
const CM0_EN_STAT_DESC: u32 = 1 << 0;
const CM0_EN_INT: u32 = 1 << 1;
const CM4_FULL_UPD: u32 = 1 << 1;
const CM4_INT_AGGR: u32 = 1 << 15;
const DB_CMPT_IRQ_EN: u32 = 1 << 28;
const EVERY: u32 = 1;
const USER_COUNT: u32 = 2;
const USER: u32 = 3;
const USER_TIMER: u32 = 4;
const TIMER_COUNT: u32 = 5;

/// A queue's live moderation: its mode, count threshold and timer length.
#[derive(Debug, Clone, Copy)]
struct Moderation {
    mode: u32,
    count: u32,
    timer_ns: u64,
}

impl Moderation {
    fn user(&self) -> bool {
        matches!(self.mode, USER_COUNT | USER | USER_TIMER)
    }
    fn counts(&self) -> bool {
        matches!(self.mode, USER_COUNT | TIMER_COUNT)
    }
    fn timed(&self) -> bool {
        matches!(self.mode, USER_TIMER | TIMER_COUNT)
    }
}

/// Entries written and not yet given back by a CIDX update, on a ring of `size` entries.
fn unread(cm: &Cmpt, size: u32) -> u32 {
    (cm.pidx + size - cm.cidx) % size.max(1)
}

/// One burst of entries to a queue (`Shared::packet`, inside one register write, so nothing
/// changes the moderation meanwhile): its moderation and ring size, read once, and what it owes
/// the host: the last report's producer index and colour.
pub(crate) struct Burst {
    m: Moderation,
    user: bool,
    size: u32,
    report: Option<(u32, bool)>,
}

impl Shared {
    fn ctx(&self, qid: u32) -> [u32; 8] {
        self.other_ctx.lock().unwrap_or_else(|e| e.into_inner()).get(&(SEL_CMPT, qid)).copied().unwrap_or([0; 8])
    }

    fn ring_size(&self, ctx: &[u32; 8]) -> u32 {
        self.ring_entries((ctx[0] >> 28) as usize).saturating_sub(1)
    }

    /// `qid`'s moderation from its context (or its last CIDX update, with `full_upd`) and the
    /// C2H tables as written.
    fn moderation(&self, st: &StState, qid: u32, cm: &mut Cmpt, ctx: &[u32; 8]) -> Moderation {
        let (mode, tmr, cnt) = cm.upd.unwrap_or(((ctx[0] >> 2) & 7, (ctx[0] >> 21) & 0xf, (ctx[0] >> 17) & 0xf));
        let reg = |off: u32| st.regs.get(&off).copied().unwrap_or(0);
        let m = Moderation {
            mode,
            count: reg(R_CNT_TH + 4 * cnt),
            timer_ns: reg(R_TIMER_CNT + 4 * tmr) as u64 * reg(R_C2H_INT_TIMER_TICK) as u64 * 1_000_000_000
                / AXI_CLOCK_HZ,
        };
        let why = match m.mode {
            6 | 7 => Some(format!("trigger mode {} is reserved (0-5 are defined)", m.mode)),
            _ if m.counts() && m.count == 0 => Some(format!("its count trigger's C2H_CNT_TH[{cnt}] is 0 (not written)")),
            _ if m.timed() && m.timer_ns == 0 => Some(format!(
                "its timer trigger counts no time: C2H_TIMER_CNT[{tmr}] {} ticks of C2H_INT_TIMER_TICK (0xb0c) {} cycles \
                 (the vendor writes both at init)",
                reg(R_TIMER_CNT + 4 * tmr),
                reg(R_C2H_INT_TIMER_TICK)
            )),
            _ => None,
        };
        if let Some(why) = why.filter(|_| !std::mem::replace(&mut cm.flagged, true)) {
            self.violation(format!("c2h queue {qid}'s completion ring: {why}"));
        }
        m
    }

    /// A burst of entries to `qid` begins.
    pub(crate) fn burst(&self, st: &StState, qid: u32, cm: &mut Cmpt, ctx: &[u32; 8]) -> Burst {
        let m = self.moderation(st, qid, cm, ctx);
        // The design's user trigger: the same on every completion of the burst.
        let user = m.user() && st.cmpt_size & USER_TRIG != 0;
        Burst { m, user, size: self.ring_size(ctx), report: None }
    }

    /// Before an entry done at model time `at`: the timer, if due by then, fires.
    pub(crate) fn before_entry(&self, cm: &mut Cmpt, b: &mut Burst, at: u64) {
        if cm.timer_at.is_some_and(|t| t <= at) {
            cm.timer_at = None;
            if unread(cm, b.size) > 0 {
                b.report = Some((cm.pidx, cm.color));
            }
        }
    }

    /// The entry done at model time `at` is written (`cm.pidx` past it): whether it triggers,
    /// else whether it starts the timer.
    pub(crate) fn after_entry(&self, cm: &mut Cmpt, b: &mut Burst, at: u64) {
        let m = b.m;
        let count = m.counts() && unread(cm, b.size) >= m.count;
        if m.mode == EVERY || b.user || count {
            b.report = Some((cm.pidx, cm.color));
            cm.timer_at = None;
        } else if m.timed() && cm.timer_at.is_none() {
            cm.timer_at = Some(at.saturating_add(m.timer_ns));
        }
    }

    /// After a burst of entries to `qid` (its state stored back): the report it owes, and its
    /// timer left due.
    pub(crate) fn after_burst(&self, st: &mut StState, qid: u32, b: Burst) {
        if let Some((pidx, color)) = b.report {
            self.report(st, qid, pidx, color);
        }
        // A timer started after that report (a report stops it), so it fires after it.
        self.timers(st, self.now(), Some(qid));
    }

    /// Timers due by `now` fire (of `only`, or of every queue), and the next one is left due.
    pub(crate) fn timers(&self, st: &mut StState, now: u64, only: Option<u32>) {
        let due: Vec<u32> = st
            .cmpt
            .iter()
            .filter(|(q, c)| only.is_none_or(|o| o == **q) && c.timer_at.is_some_and(|t| t <= now))
            .map(|(q, _)| *q)
            .collect();
        for qid in due {
            let ctx = self.ctx(qid);
            let gen = self.queue(Direction::C2h, qid as usize).map_or(0, |q| q.lock().gen);
            let Some(cm) = st.cmpt.get_mut(&qid) else { continue };
            cm.timer_at = None;
            // A queue stopped or restarted since has no timer running.
            if cm.gen == gen && ctx[3] & 1 << 28 != 0 && unread(cm, self.ring_size(&ctx)) > 0 {
                let (pidx, color) = (cm.pidx, cm.color);
                self.report(st, qid, pidx, color);
            }
        }
        if let Some(next) = st.cmpt.values().filter_map(|c| c.timer_at).min() {
            let d = &self.mm(Direction::C2h).due;
            d.set(d.get().min(next));
        }
    }

    /// A CIDX update (`value`, its index already taken): `full_upd`'s mode and indexes, the
    /// interrupt armed, the conditions re-evaluated, the timer started for entries left unread.
    pub(crate) fn cmpt_updated(&self, st: &mut StState, qid: u32, value: u32) {
        let ctx = self.ctx(qid);
        let size = self.ring_size(&ctx);
        let Some(mut cm) = st.cmpt.get(&qid).copied() else { return };
        if ctx[4] & CM4_FULL_UPD != 0 {
            cm.upd = Some(((value >> 24) & 7, (value >> 20) & 0xf, (value >> 16) & 0xf));
        }
        cm.armed |= value & DB_CMPT_IRQ_EN != 0;
        let m = self.moderation(st, qid, &mut cm, &ctx);
        let left = unread(&cm, size);
        let met = left > 0 && (m.mode == EVERY || (m.counts() && left >= m.count) || cm.pending);
        if !met {
            cm.pending = false;
            if m.timed() && left > 0 && cm.timer_at.is_none() {
                cm.timer_at = Some(self.clock.now().saturating_add(m.timer_ns));
            }
        }
        let (pidx, color) = (cm.pidx, cm.color);
        st.cmpt.insert(qid, cm);
        if met {
            st.cmpt.entry(qid).and_modify(|c| c.timer_at = None);
            self.report(st, qid, pidx, color);
        }
        self.timers(st, self.now(), Some(qid));
    }

    /// A trigger: the status descriptor (with its context's `en_stat_desc`) with producer index
    /// `pidx` and colour `color`, then the interrupt.
    fn report(&self, st: &mut StState, qid: u32, pidx: u32, color: bool) {
        let ctx = self.ctx(qid);
        if ctx[0] & CM0_EN_STAT_DESC != 0 {
            // `struct qdma_c2h_cmpt_cmpl_status` after the last entry: pidx [15:0], cidx
            // [31:16], colour [32]; the index word last, so a driver reading it sees the rest.
            let esz = 8u64 << ((ctx[2] >> 26) & 3);
            let status = self.cmpt_base(&ctx) + self.ring_size(&ctx) as u64 * esz;
            let cidx = st.cmpt.get(&qid).map_or(0, |c| c.cidx);
            let _ = self.host.write(status + 4, &(color as u32).to_le_bytes());
            let _ = self.host.store_u32_release(status, pidx | cidx << 16);
        }
        self.cmpt_interrupt(st, qid, &ctx);
    }

    /// With the context's interrupt enable: if armed, raise its vector, or write an entry into
    /// the interrupt ring its context names, and disarm; else remember it.
    fn cmpt_interrupt(&self, st: &mut StState, qid: u32, ctx: &[u32; 8]) {
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
            return self.aggregate(Direction::C2h, qid as usize, vec, (cm.pidx, cm.cidx));
        }
        self.irq_out.message(vec, || format!("c2h queue {qid}'s completion ring raised its interrupt (vector {vec})"));
    }

    /// The completion ring's base from its context, per the IP's layout.
    pub(crate) fn cmpt_base(&self, w: &[u32; 8]) -> u64 {
        let high = ((w[2] & 0x03ff_ffff) as u64) << 38;
        match self.ip {
            Ip::Eqdma | Ip::Cpm5 => high | (w[1] as u64) << 6 | (((w[5] >> 14) & 0xf) as u64) << 2,
            _ => high | ((w[1] >> 6) as u64) << 12,
        }
    }
}
