//! One channel's performance monitor (PG195 "H2C/C2H Channel Performance Monitor Control
//! (0xC0)", cycle count 0xC4/0xC8, data count 0xCC/0xD0): control bits 0 auto, 1 clear (write
//! only), 2 run; each count is 42 bits (the high word's [9:0]) with a "maxed" bit (16) set when
//! it saturates. With run set alone the monitor counts throughout; with auto as well it counts
//! from the channel's run bit rising (which clears it) to the completion of the descriptor with
//! the stop bit, as PG195 describes auto.
//!
//! The model's user clock is `CLOCK_HZ` (250 MHz, an UltraScale+ Gen3 XDMA's axi_aclk), fixed,
//! and the engine moves at most one data beat of the datapath width the config block reports
//! (`DATA_WIDTH_BYTES`) per cycle of it, as the IP does: each descriptor completes no sooner than
//! its run's beats so far take at that clock (`moved`). Cycles are the counting time's nanoseconds
//! scaled to the clock, so the counts stay consistent with each other and with the host's clock:
//! an auto-mode run's cycles are at least its beats (no more than one beat a cycle), and its
//! cycles over the clock are no longer than the run's wall time (a busy share of at most 100%).
//! Without the pacing, a host copying at memory speed counted 8192 beats in 599 cycles (27 GB/s
//! through a 2 GB/s datapath).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The model's user clock.
pub const CLOCK_HZ: f64 = 250e6;
/// Bytes per data beat: the 64-bit datapath the config block reports (code 0 at 0x3018).
pub const DATA_WIDTH_BYTES: u64 = 8;

pub(crate) const PERF_AUTO: u32 = 1 << 0;
pub(crate) const PERF_CLEAR: u32 = 1 << 1;
pub(crate) const PERF_RUN: u32 = 1 << 2;
/// The counts' width: 32 low bits and 10 high ones.
const MAX_COUNT: u64 = (1 << 42) - 1;
const HI_MAXED: u32 = 1 << 16;

/// Whole cycles of the user clock in `d`.
fn cycles_in(d: Duration) -> u64 {
    (d.as_nanos() * CLOCK_HZ as u128 / 1_000_000_000) as u64
}

/// The time `beats` take at one a cycle, rounded up to whole nanoseconds.
fn time_of(beats: u64) -> Duration {
    Duration::from_nanos((beats as u128 * 1_000_000_000).div_ceil(CLOCK_HZ as u128) as u64)
}

#[derive(Default)]
struct State {
    ctrl: u32,
    /// Cycles counted up to `since` (or in all, when stopped).
    cycles: u64,
    beats: u64,
    /// Counting since then (None: stopped).
    since: Option<Instant>,
    /// The engine's current run: when it started and the beats it has moved since (the pace).
    run: Option<(Instant, u64)>,
}

impl State {
    fn cycles_at(&self, now: Instant) -> u64 {
        self.cycles.saturating_add(self.since.map_or(0, |t| cycles_in(now.saturating_duration_since(t))))
    }

    /// Stop counting: what was counted so far stays.
    fn halt(&mut self) {
        self.cycles = self.cycles_at(Instant::now());
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

    /// A write to +0xC0.
    pub fn control(&self, value: u32) {
        let mut s = self.lock();
        let now = Instant::now();
        if value & PERF_CLEAR != 0 {
            (s.cycles, s.beats) = (0, 0);
            s.since = s.since.map(|_| now);
        }
        let run = value & PERF_RUN != 0;
        s.ctrl = value & (PERF_AUTO | PERF_RUN);
        if !run {
            s.halt();
        } else if value & PERF_AUTO == 0 && s.since.is_none() {
            s.since = Some(now);
        }
    }

    /// The channel's run bit rose: the pace starts over, and an armed monitor in auto mode
    /// clears and starts counting at the same instant.
    pub fn engine_started(&self) {
        let mut s = self.lock();
        let now = Instant::now();
        s.run = Some((now, 0));
        if s.ctrl == PERF_AUTO | PERF_RUN {
            (s.cycles, s.beats, s.since) = (0, 0, Some(now));
        }
    }

    /// The run ended (its stop descriptor completed, or it stopped): auto mode stops counting.
    pub fn engine_stopped(&self) {
        let mut s = self.lock();
        s.run = None;
        if s.ctrl & PERF_AUTO != 0 {
            s.halt();
        }
    }

    /// `bytes` moved: beats of the datapath width, counted where the monitor counts; returns
    /// no sooner than the run's beats so far fit in the time since it started at one beat a
    /// cycle, so the descriptor that moved them completes no sooner than the datapath could have
    /// moved them. Bounded by that time; spins, yielding, as the copy it stands for would.
    pub fn moved(&self, bytes: u64) {
        let due = {
            let mut s = self.lock();
            let beats = bytes.div_ceil(DATA_WIDTH_BYTES);
            if s.since.is_some() {
                s.beats = s.beats.saturating_add(beats);
            }
            if let Some((_, b)) = &mut s.run {
                *b = b.saturating_add(beats);
            }
            s.run.map(|(t, b)| t + time_of(b))
        };
        while due.is_some_and(|due| Instant::now() < due) {
            std::thread::yield_now();
        }
    }

    /// A read of +0xC0..+0xD0 (`reg` the offset).
    pub fn read(&self, reg: u32) -> u32 {
        let s = self.lock();
        let cycles = s.cycles_at(Instant::now());
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
    pub fn preset(&self, cycles: u64, beats: u64) {
        let mut s = self.lock();
        (s.cycles, s.beats) = (cycles, beats);
        s.since = s.since.map(|_| Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(p: &Perf, lo: u32, hi: u32) -> u64 {
        ((p.read(hi) as u64 & 0x3ff) << 32) | p.read(lo) as u64
    }

    /// Issue 37: an auto-mode run's counts are consistent: at least one cycle per beat, and no
    /// more cycles than the run's wall time holds at the fixed clock. The model that counted
    /// wall time alone gave 131072 beats in the few hundred cycles these calls take.
    #[test]
    fn a_run_is_counted_at_one_beat_a_cycle_and_within_its_wall_time() {
        let p = Perf::default();
        p.control(PERF_AUTO | PERF_RUN);
        let t = Instant::now();
        p.engine_started();
        p.moved(1 << 20);
        p.moved(8);
        p.engine_stopped();
        let wall = t.elapsed();
        let (cycles, beats) = (count(&p, 0xc4, 0xc8), count(&p, 0xcc, 0xd0));
        assert_eq!(beats, (1 << 17) + 1);
        assert!(cycles >= beats, "{beats} beats in {cycles} cycles");
        let wall_cycles = (wall.as_nanos() as f64 * CLOCK_HZ / 1e9) as u64;
        assert!(cycles <= wall_cycles, "{cycles} cycles in a run of {wall:?}");
        // Stopped: the counts hold.
        assert_eq!(count(&p, 0xc4, 0xc8), cycles);
    }

    #[test]
    fn cycles_and_time_convert_at_the_user_clock() {
        assert_eq!(cycles_in(Duration::from_micros(4)), 1000);
        assert_eq!(time_of(1000), Duration::from_micros(4));
        assert_eq!(time_of(1), Duration::from_nanos(4));
        assert_eq!(cycles_in(time_of(12_345)), 12_345);
    }
}
