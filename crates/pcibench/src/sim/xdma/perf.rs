//! One channel's performance monitor (PG195 "H2C/C2H Channel Performance Monitor Control
//! (0xC0)", cycle count 0xC4/0xC8, data count 0xCC/0xD0): control bits 0 auto, 1 clear (write
//! only), 2 run; each count is 42 bits (the high word's [9:0]) with a "maxed" bit (16) set when
//! it saturates. With run set alone the monitor counts throughout; with auto as well it counts
//! from the channel's run bit rising (which clears it) to the completion of the descriptor with
//! the stop bit, as PG195 describes auto.
//!
//! The monitor counts on the model's time (`datapath.rs`) at the user clock (`CLOCK_HZ`, 250 MHz)
//! and in beats of the datapath width the config block reports (`DATA_WIDTH_BYTES`). The engine
//! moves at most a beat a cycle (`DATAPATH`: each descriptor completes its fetch and its beats
//! after it starts), and auto mode counts from the run bit rising to the modeled completion of the
//! stop descriptor, so an auto-mode run's cycles are at least its beats and its cycles over the
//! clock are the run's modeled time, never longer than the host's wall time around it (a busy share
//! of at most 100%). Without pacing, a host copying at memory speed once counted 8192 beats in 599
//! cycles (27 GB/s through a 2 GB/s datapath).

use std::sync::Mutex;

/// The user clock the datapath and the performance monitor run at: 250 MHz, the axi_aclk PG195
/// gives a Gen2 x4 (and Gen3 x8) configuration.
pub const USER_CLOCK_HZ: u64 = 250_000_000;
/// Bytes per data beat: the 64-bit AXI datapath of a Gen2 x4 configuration (PG195 "AXI data
/// width"), which the config block reports (code 0 at 0x3018).
pub const DATA_WIDTH_BYTES: u64 = 8;

/// The model's user clock, as the driver's figures take it.
pub const CLOCK_HZ: f64 = USER_CLOCK_HZ as f64;

pub(crate) const PERF_AUTO: u32 = 1 << 0;
pub(crate) const PERF_CLEAR: u32 = 1 << 1;
pub(crate) const PERF_RUN: u32 = 1 << 2;
/// The counts' width: 32 low bits and 10 high ones.
const MAX_COUNT: u64 = (1 << 42) - 1;
const HI_MAXED: u32 = 1 << 16;

/// Whole cycles of the user clock in `ns` nanoseconds.
fn cycles_in(ns: u64) -> u64 {
    (ns as u128 * USER_CLOCK_HZ as u128 / 1_000_000_000) as u64
}

#[derive(Default)]
struct State {
    ctrl: u32,
    /// Cycles counted up to `since` (or in all, when stopped).
    cycles: u64,
    beats: u64,
    /// Counting since then, model ns (None: stopped).
    since: Option<u64>,
}

impl State {
    fn cycles_at(&self, now: u64) -> u64 {
        self.cycles.saturating_add(self.since.map_or(0, |t| cycles_in(now.saturating_sub(t))))
    }

    /// Stop counting at `at`: what was counted so far stays.
    fn halt(&mut self, at: u64) {
        self.cycles = self.cycles_at(at);
        self.since = None;
    }
}

/// The monitor's registers and counts.
#[derive(Default)]
pub(crate) struct Perf(Mutex<State>);

impl Perf {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A write to +0xC0 at model time `now`.
    pub fn control(&self, value: u32, now: u64) {
        let mut s = self.lock();
        if value & PERF_CLEAR != 0 {
            (s.cycles, s.beats) = (0, 0);
            s.since = s.since.map(|_| now);
        }
        let run = value & PERF_RUN != 0;
        s.ctrl = value & (PERF_AUTO | PERF_RUN);
        if !run {
            s.halt(now);
        } else if value & PERF_AUTO == 0 && s.since.is_none() {
            s.since = Some(now);
        }
    }

    /// The channel's run bit rose at `now`: an armed monitor in auto mode clears and starts
    /// counting at that instant.
    pub fn engine_started(&self, now: u64) {
        let mut s = self.lock();
        if s.ctrl == PERF_AUTO | PERF_RUN {
            (s.cycles, s.beats, s.since) = (0, 0, Some(now));
        }
    }

    /// The run ended at model time `at` (its stop descriptor's completion, or where it stopped):
    /// auto mode stops counting there.
    pub fn engine_stopped(&self, at: u64) {
        let mut s = self.lock();
        if s.ctrl & PERF_AUTO != 0 && s.since.is_some() {
            let at = at.max(s.since.unwrap_or(at));
            s.halt(at);
        }
    }

    /// `bytes` moved: beats of the datapath width, counted where the monitor counts (the time
    /// they took is the model's: `engine.rs`).
    pub fn moved(&self, bytes: u64) {
        let mut s = self.lock();
        if s.since.is_some() {
            s.beats = s.beats.saturating_add(bytes.div_ceil(DATA_WIDTH_BYTES));
        }
    }

    /// A read of +0xC0..+0xD0 (`reg` the offset) at model time `now`.
    pub fn read(&self, reg: u32, now: u64) -> u32 {
        let s = self.lock();
        let cycles = s.cycles_at(now);
        let hi = |v: u64| if v > MAX_COUNT { HI_MAXED | (MAX_COUNT >> 32) as u32 } else { (v >> 32) as u32 };
        let lo = |v: u64| v.min(MAX_COUNT) as u32;
        match reg {
            0xc0 => s.ctrl,
            0xc4 => lo(cycles),
            0xc8 => hi(cycles),
            0xcc => lo(s.beats),
            0xd0 => hi(s.beats),
            _ => 0,
        }
    }

    /// Test hook: preset the counts (a monitor about to saturate).
    pub fn preset(&self, cycles: u64, beats: u64, now: u64) {
        let mut s = self.lock();
        (s.cycles, s.beats) = (cycles, beats);
        s.since = s.since.map(|_| now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::datapath::Datapath;

    fn count(p: &Perf, lo: u32, hi: u32, now: u64) -> u64 {
        ((p.read(hi, now) as u64 & 0x3ff) << 32) | p.read(lo, now) as u64
    }

    /// Issue 37: an auto-mode run's counts are consistent: at least one cycle per beat, and its
    /// cycles the run's modeled time at the clock. The model that counted wall time alone gave
    /// 131072 beats in the few hundred cycles these calls take.
    #[test]
    fn a_run_is_counted_at_one_beat_a_cycle_over_its_modeled_time() {
        let d: Datapath = super::super::state::DATAPATH;
        let p = Perf::default();
        p.control(PERF_AUTO | PERF_RUN, 0);
        p.engine_started(1000);
        p.moved(1 << 20);
        p.moved(8);
        let end = 1000 + d.desc_ns(1 << 20) + d.desc_ns(8);
        p.engine_stopped(end);
        let (cycles, beats) = (count(&p, 0xc4, 0xc8, end + 5000), count(&p, 0xcc, 0xd0, end + 5000));
        assert_eq!(beats, (1 << 17) + 1);
        assert!(cycles >= beats, "{beats} beats in {cycles} cycles");
        assert_eq!(cycles, cycles_in(end - 1000), "the run's modeled time, held after it stopped");
    }

    #[test]
    fn cycles_convert_at_the_user_clock() {
        assert_eq!(cycles_in(4000), 1000);
        assert_eq!(cycles_in(3), 0);
    }
}
