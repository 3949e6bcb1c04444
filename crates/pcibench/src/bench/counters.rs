//! The card's own view of a DMA row, beside the host's: what the engine's performance counters
//! (cycles and data beats, `dma::EngineCounters`) say about the same transfers pcibench timed.
//! The figures are computed here once, as data (`Row::engine`); `report::counters` puts them in
//! words, and JSON, CSV, saved runs and `compare` carry them as they are.
//!
//! Two kinds of counters. XDMA's monitor in auto mode (PG195 "Performance Monitor Control
//! (0xC0)") counts only while the engine runs, from the channel's run bit rising to its last
//! descriptor, and clears itself at each run: its cycles over the engine's clock are the engine's
//! running time, so beside the run's wall time they give the share of time the engine worked and
//! its own rate. QDMA's MM monitor started immediately (`*_MM_PERF_MON_CTL` IMM_START) counts
//! throughout: its cycles over the span's wall time are the engine's clock, but not its idle time,
//! and it gives no rate of the engine's own (its bytes over its span are the host's figure again).
//!
//! The counters are taken per sample, over exactly the samples the host's figures summarise
//! (`bench::dma`), and a row carries those of its median sample: the engine's figures and the
//! host's then describe the same transfers, so they cannot disagree but by a bug
//! (`EngineFigures::contradiction`).

use crate::dma::EngineCounters;
use serde::{Deserialize, Serialize};

/// The engine's own figures for one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineFigures {
    /// Cycles and data beats as counted, over the span `last_run` says.
    pub cycles: u64,
    pub beats: u64,
    /// Bytes a data beat carries (the datapath width), where the engine says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat_bytes: Option<u32>,
    /// Bytes pcibench moved over the counters' span.
    pub host_bytes: u64,
    /// Wall time of the counters' span, seconds.
    pub wall_s: f64,
    /// The counters span the last engine run only and count while the engine runs (XDMA auto
    /// mode); false: every run of the row, counting throughout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_run: bool,
    /// Cycles over the span's wall time, MHz: the engine's clock when the counters count
    /// throughout; its clock times its busy share when they count only while it runs.
    pub implied_clock_mhz: f64,
    /// The engine's clock, MHz: its own where known (the simulated cards), else the implied one
    /// where the counters count throughout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    /// Data beats × datapath width over the engine's counted time (cycles over its clock), MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_mbps: Option<f64>,
    /// The share of the span's wall time the engine was running, percent (counters that count
    /// only while it runs, with its clock known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_pct: Option<f64>,
    /// A counter saturated (its "maxed" bit): every figure from it is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub maxed: bool,
}

impl EngineFigures {
    /// The figures of counters `c` over a span in which pcibench moved `host_bytes` in
    /// `wall_s` seconds.
    pub fn new(c: &EngineCounters, host_bytes: u64, wall_s: f64) -> EngineFigures {
        let implied_hz = if wall_s > 0.0 { c.cycles as f64 / wall_s } else { 0.0 };
        // Counting throughout, cycles over wall time is the clock itself.
        let clock_hz = c.clock_hz.or((!c.last_run && implied_hz > 0.0).then_some(implied_hz));
        let counted_s = clock_hz.filter(|_| c.cycles > 0).map(|f| c.cycles as f64 / f);
        let engine_mbps = match (c.beat_bytes, counted_s) {
            (Some(w), Some(t)) if t > 0.0 && c.last_run => Some(c.beats as f64 * w as f64 / t / 1e6),
            _ => None,
        };
        let busy_pct = match counted_s {
            Some(t) if c.last_run && wall_s > 0.0 => Some((t / wall_s * 100.0).min(100.0)),
            _ => None,
        };
        EngineFigures {
            cycles: c.cycles,
            beats: c.beats,
            beat_bytes: c.beat_bytes,
            host_bytes,
            wall_s,
            last_run: c.last_run,
            implied_clock_mhz: implied_hz / 1e6,
            clock_mhz: clock_hz.map(|f| f / 1e6),
            engine_mbps,
            busy_pct,
            maxed: c.maxed,
        }
    }

    /// Bytes the engine counted (beats × datapath width), where the width is known.
    pub fn engine_bytes(&self) -> Option<u64> {
        self.beat_bytes.map(|w| self.beats.saturating_mul(w as u64))
    }

    /// The host's rate over the same span, MB/s.
    pub fn host_mbps(&self) -> Option<f64> {
        (self.wall_s > 0.0).then(|| self.host_bytes as f64 / self.wall_s / 1e6)
    }

    /// Where the engine's figures contradict the host's over the same span, in words: the engine
    /// moving the data slower than the host saw it arrive, or a busy share that is not the host's
    /// rate over the engine's. Never the host's doing: a counting (or model) bug. Saturated
    /// counters are lower bounds and contradict nothing.
    pub fn contradiction(&self) -> Option<String> {
        let (Some(engine), Some(host)) = (self.engine_mbps, self.host_mbps()) else { return None };
        if self.maxed {
            return None;
        }
        // Cycles are whole: allow a cycle's rounding per run, and 1% of float and clock-read slack.
        if engine < host * 0.99 {
            return Some(format!(
                "the engine's {engine:.0} MB/s is below the host's {host:.0} MB/s over the same span"
            ));
        }
        let busy = self.busy_pct?;
        let implied = (host / engine * 100.0).min(100.0);
        if (busy - implied).abs() > 2.0 {
            return Some(format!(
                "busy {busy:.1}% of the span, where the host's {host:.0} MB/s over the engine's {engine:.0} MB/s makes \
                 it {implied:.1}%"
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direction::Direction;

    fn running_only(cycles: u64, beats: u64) -> EngineCounters {
        EngineCounters {
            beat_bytes: Some(8),
            clock_hz: Some(250e6),
            last_run: true,
            ..EngineCounters::counts(Direction::H2c, cycles, beats)
        }
    }

    /// 1 ms of wall time, 125 000 cycles of a 250 MHz clock: the engine ran half of it.
    #[test]
    fn an_engine_busy_half_the_wall_time_is_reported_so() {
        let f = EngineFigures::new(&running_only(125_000, 100_000), 800_000, 1e-3);
        assert_eq!(f.busy_pct, Some(50.0));
        assert_eq!(f.clock_mhz, Some(250.0));
        assert_eq!(f.implied_clock_mhz, 125.0);
        // 800 000 bytes in 0.5 ms of engine time.
        assert_eq!(f.engine_mbps, Some(1600.0));
        assert_eq!(f.engine_bytes(), Some(800_000));
        assert!(!f.maxed);
        assert_eq!(f.contradiction(), None, "800 MB/s of host, 1600 of engine, busy 50%: consistent");
    }

    /// Issue 52: the last run's counters set beside a median run's wall time said "engine 35 MB/s,
    /// host 260 MB/s, busy 100%". Over one span the figures are tied; a test catches a break.
    #[test]
    fn figures_that_contradict_the_hosts_are_caught() {
        // 800 kB in 1 ms of wall time (800 MB/s), the engine counting 4 ms of it: slower than the host.
        let f = EngineFigures::new(&running_only(1_000_000, 100_000), 800_000, 1e-3);
        assert!(f.contradiction().unwrap().contains("below the host's 800 MB/s"), "{:?}", f.contradiction());
        let f = EngineFigures {
            busy_pct: Some(100.0),
            ..EngineFigures::new(&running_only(125_000, 100_000), 800_000, 1e-3)
        };
        assert!(f.contradiction().unwrap().starts_with("busy 100.0%"), "{:?}", f.contradiction());
    }

    #[test]
    fn counters_that_count_throughout_give_the_clock_and_no_busy_share() {
        let c = EngineCounters { beat_bytes: Some(64), ..EngineCounters::counts(Direction::C2h, 250_000, 10_000) };
        let f = EngineFigures::new(&c, 640_000, 1e-3);
        assert_eq!(f.clock_mhz, Some(250.0));
        assert_eq!(f.busy_pct, None);
        assert_eq!(f.engine_mbps, None, "its bytes over its span are the host's rate again");
        assert_eq!(f.contradiction(), None);
    }

    #[test]
    fn an_unknown_clock_leaves_the_running_figures_out() {
        let c = EngineCounters { clock_hz: None, ..running_only(125_000, 100_000) };
        let f = EngineFigures::new(&c, 800_000, 1e-3);
        assert_eq!((f.clock_mhz, f.busy_pct, f.engine_mbps), (None, None, None));
        assert_eq!(f.implied_clock_mhz, 125.0);
    }

    #[test]
    fn a_saturated_counter_is_carried() {
        let c = EngineCounters { maxed: true, ..running_only(u64::MAX >> 22, 1) };
        assert!(EngineFigures::new(&c, 8, 1.0).maxed);
    }
}
