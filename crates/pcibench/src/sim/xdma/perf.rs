//! One channel's performance monitor (PG195 "H2C/C2H Channel Performance Monitor Control
//! (0xC0)", cycle count 0xC4/0xC8, data count 0xCC/0xD0): control bits 0 auto, 1 clear (write
//! only), 2 run; each count is 42 bits (the high word's [9:0]) with a "maxed" bit (16) set when
//! it saturates. With run set alone the monitor counts throughout; with auto as well it counts
//! from the channel's run bit rising (which clears it) to the completion of the descriptor with
//! the stop bit, as PG195 describes auto.
//!
//! The model's user clock is `CLOCK_HZ` (250 MHz, an UltraScale+ Gen3 XDMA's axi_aclk): cycles
//! are the counting time's nanoseconds scaled to it. A data beat carries the datapath width the
//! config block reports (`DATA_WIDTH_BYTES`).

use std::sync::Mutex;
use std::time::Instant;

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

#[derive(Default)]
struct State {
    ctrl: u32,
    cycles: u64,
    beats: u64,
    /// Counting since then (None: stopped).
    since: Option<Instant>,
}

impl State {
    fn fold(&mut self) {
        if let Some(t) = self.since.take() {
            let ns = t.elapsed().as_nanos() as f64;
            self.cycles = self.cycles.saturating_add((ns * CLOCK_HZ / 1e9) as u64);
            self.since = Some(Instant::now());
        }
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
        s.fold();
        if value & PERF_CLEAR != 0 {
            (s.cycles, s.beats) = (0, 0);
        }
        let run = value & PERF_RUN != 0;
        s.ctrl = value & (PERF_AUTO | PERF_RUN);
        if !run {
            s.since = None;
        } else if value & PERF_AUTO == 0 && s.since.is_none() {
            s.since = Some(Instant::now());
        }
    }

    /// The channel's run bit rose: an armed monitor in auto mode clears and starts counting.
    pub fn engine_started(&self) {
        let mut s = self.lock();
        if s.ctrl == PERF_AUTO | PERF_RUN {
            *s = State { ctrl: s.ctrl, since: Some(Instant::now()), ..Default::default() };
        }
    }

    /// The run ended (its stop descriptor completed, or it stopped): auto mode stops counting.
    pub fn engine_stopped(&self) {
        let mut s = self.lock();
        if s.ctrl & PERF_AUTO != 0 {
            s.fold();
            s.since = None;
        }
    }

    /// `bytes` moved: beats of the datapath width, where the monitor counts.
    pub fn moved(&self, bytes: u64) {
        let mut s = self.lock();
        if s.since.is_some() {
            s.beats = s.beats.saturating_add(bytes.div_ceil(DATA_WIDTH_BYTES));
        }
    }

    /// A read of +0xC0..+0xD0 (`reg` the offset).
    pub fn read(&self, reg: u32) -> u32 {
        let mut s = self.lock();
        s.fold();
        let hi = |v: u64| if v > MAX_COUNT { HI_MAXED | (MAX_COUNT >> 32) as u32 } else { (v >> 32) as u32 };
        let lo = |v: u64| v.min(MAX_COUNT) as u32;
        match reg {
            0xc0 => s.ctrl,
            0xc4 => lo(s.cycles),
            0xc8 => hi(s.cycles),
            0xcc => lo(s.beats),
            0xd0 => hi(s.beats),
            _ => 0,
        }
    }

    /// Test hook: preset the counts (a monitor about to saturate).
    pub fn preset(&self, cycles: u64, beats: u64) {
        let mut s = self.lock();
        s.fold();
        (s.cycles, s.beats) = (cycles, beats);
    }
}
