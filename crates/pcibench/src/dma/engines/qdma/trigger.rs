//! When a C2H stream queue's completion ring tells the host (issue 50 item 13): the completion
//! context's trigger mode, with the timer and counter-threshold indexes it names, moderates the
//! ring's status descriptor writes and its interrupt (PG302 "Completion Status/Interrupt
//! Moderation": the modes "moderate not only interrupts but also Completion Status writes").
//! Entries are written as packets arrive whatever the mode; the driver takes the entries up to
//! the producer index of the status descriptor, as libqdma (`descq_process_completion_st_c2h`:
//! `pend = cs->pidx - cidx_cmpt`) and DPDK (`qdma_recv_pkts_st`: `wb_status->pidx`) do, so the
//! mode decides when it sees them, polling or by interrupt.
//!
//! The modes (`QDMA_DMAP_SEL_CMPT_CIDX` [26:24]; libqdma_export.h `enum tigger_mode_t`,
//! dma-perf's names in brackets) and what pcibench offers (`--cmpt-trigger`):
//! - `every` (1, Every, [every]): each entry; libqdma's default.
//! - `user` (3, User, [usr]): an entry whose completion carries the design's user trigger
//!   (`s_axis_c2h_cmpt_ctrl_user_trig`). The example design drives it from C2H_COMPLETION_SIZE
//!   bit 3 for every completion while set (axi_st_module.sv), so pcibench sets it for the run.
//! - `timer[:T]` (4, User_Timer, [usr_tmr]): the timer, QDMA_C2H_TIMER_CNT[T] ticks of
//!   C2H_INT_TIMER_TICK cycles after an entry was written (the user trigger bit clear).
//! - `count[:C]` (5, Timer_Count, [cntr_tmr]): unread entries reaching QDMA_C2H_CNT_TH[C], the
//!   timer (index 0) reporting the rest. A count alone (User_Count, 2) would leave a batch's last
//!   entries, fewer than the threshold, unreported for good against the example design (its user
//!   trigger is one register bit for all completions), which is why the vendor's own tools run
//!   counts as `cntr_tmr` (dma-perf and dma-latency sample configs; libqdma's adaptive counter
//!   works in `TRIG_MODE_COMBO`).
//!
//! The indexes are table positions (0-15) into the tables `*_set_default_global_csr` writes, the
//! same on every IP; the tick is per IP (`take_stream_device`).

use super::regs::*;
use crate::access::BarRegion;
use crate::{Error, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The name a stream row records its trigger under (`Engine::settings`).
pub const CMPT_TRIGGER: &str = "C2H completion trigger (CMPT context trig_mode)";

/// Which trigger a run's completion rings use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TriggerKind {
    #[default]
    Every,
    User,
    Timer,
    Count,
}

/// The trigger and the table entries it indexes (`--cmpt-trigger every|user|timer[:T]|count[:C]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmptTrigger {
    pub kind: TriggerKind,
    /// QDMA_C2H_TIMER_CNT index (timer and count).
    pub timer_idx: u8,
    /// QDMA_C2H_CNT_TH index (count).
    pub count_idx: u8,
}

impl CmptTrigger {
    /// The completion context's and CIDX update's `trig_mode`.
    pub fn trig_mode(&self) -> u32 {
        match self.kind {
            TriggerKind::Every => TRIG_EVERY,
            TriggerKind::User => TRIG_USER,
            TriggerKind::Timer => TRIG_USER_TIMER,
            TriggerKind::Count => TRIG_TIMER_COUNT,
        }
    }

    /// Whether the example design asks for a trigger with each completion (C2H_COMPLETION_SIZE
    /// bit 3): for `user` only; for `timer` it must be clear, or User_Timer would fire on it.
    pub fn user_trig(&self) -> bool {
        self.kind == TriggerKind::User
    }

    /// The value `C2H_COMPLETION_SIZE` gets (8-byte entries).
    pub fn cmpt_size(&self) -> u32 {
        if self.user_trig() {
            EX_CMPT_USER_TRIG
        } else {
            0
        }
    }

    /// The settings a row records, from the tables as the card holds them.
    pub fn describe(&self, bar: &dyn BarRegion) -> Result<String> {
        let timer = |i: u8| -> Result<String> {
            let n = rd(bar, R_C2H_TIMER_CNT + 4 * i as u64)?;
            let tick = rd(bar, R_C2H_INT_TIMER_TICK)?;
            let ticks = if n == 1 { "tick" } else { "ticks" };
            Ok(format!("timer C2H_TIMER_CNT[{i}] {n} {ticks} of C2H_INT_TIMER_TICK {tick} cycles"))
        };
        Ok(match self.kind {
            TriggerKind::Every => "every (trig_mode 1: each entry)".into(),
            TriggerKind::User => "user (trig_mode 3: the design's user trigger, C2H_COMPLETION_SIZE bit 3 set)".into(),
            TriggerKind::Timer => format!("{self} (trig_mode 4, User_Timer: {})", timer(self.timer_idx)?),
            TriggerKind::Count => {
                let n = rd(bar, R_C2H_CNT_TH + 4 * self.count_idx as u64)?;
                format!(
                    "{self} (trig_mode 5, Timer_Count: C2H_CNT_TH[{}] {n} unread entries, or the {})",
                    self.count_idx,
                    timer(self.timer_idx)?
                )
            }
        })
    }
}

impl std::fmt::Display for CmptTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            TriggerKind::Every => f.write_str("every"),
            TriggerKind::User => f.write_str("user"),
            TriggerKind::Timer => write!(f, "timer:{}", self.timer_idx),
            TriggerKind::Count => write!(f, "count:{}", self.count_idx),
        }
    }
}

impl std::str::FromStr for CmptTrigger {
    type Err = Error;

    fn from_str(s: &str) -> Result<CmptTrigger> {
        let bad = || {
            Error::usage(format!(
                "--cmpt-trigger {s}: use every, user, timer[:T] or count[:C], T and C table indexes 0-15 \
                 (docs/engines/qdma-stream.md)"
            ))
        };
        let (name, idx) = match s.split_once(':') {
            Some((n, i)) => (n, Some(i.parse::<u8>().ok().filter(|i| (*i as usize) < C2H_TABLE_LEN).ok_or_else(bad)?)),
            None => (s, None),
        };
        let kind = match name {
            "every" => TriggerKind::Every,
            "user" => TriggerKind::User,
            "timer" => TriggerKind::Timer,
            "count" => TriggerKind::Count,
            _ => return Err(bad()),
        };
        match (kind, idx) {
            (TriggerKind::Every | TriggerKind::User, Some(_)) => Err(bad()),
            (TriggerKind::Timer, i) => Ok(CmptTrigger { kind, timer_idx: i.unwrap_or(0), count_idx: 0 }),
            (TriggerKind::Count, i) => Ok(CmptTrigger { kind, timer_idx: 0, count_idx: i.unwrap_or(0) }),
            _ => Ok(CmptTrigger { kind, ..Default::default() }),
        }
    }
}

impl Serialize for CmptTrigger {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CmptTrigger {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<CmptTrigger, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item13_trigger_specs_parse_to_the_vendors_modes() {
        let t = |s: &str| s.parse::<CmptTrigger>().unwrap();
        assert_eq!((t("every").trig_mode(), t("every").cmpt_size()), (1, 0));
        assert_eq!((t("user").trig_mode(), t("user").cmpt_size()), (3, 1 << 3));
        assert_eq!(t("timer:9"), CmptTrigger { kind: TriggerKind::Timer, timer_idx: 9, count_idx: 0 });
        assert_eq!((t("timer").trig_mode(), t("timer").cmpt_size()), (4, 0));
        assert_eq!(t("count:6"), CmptTrigger { kind: TriggerKind::Count, timer_idx: 0, count_idx: 6 });
        assert_eq!(t("count").trig_mode(), 5);
        for s in ["every", "user", "timer:0", "timer:15", "count:3"] {
            assert_eq!(t(s).to_string(), s);
            assert_eq!(serde_json::from_value::<CmptTrigger>(serde_json::to_value(t(s)).unwrap()).unwrap(), t(s));
        }
        for bad in ["", "any", "timer:16", "count:-1", "user:1", "every:0", "timer:x"] {
            let e = bad.parse::<CmptTrigger>().unwrap_err().to_string();
            assert!(e.contains("every, user, timer[:T] or count[:C]"), "{bad}: {e}");
        }
    }
}
