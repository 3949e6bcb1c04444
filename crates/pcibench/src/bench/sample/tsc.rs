//! The x86-64 time-stamp counter as a `Clock`, for single-access latency. Only used where the
//! TSC is invariant (/proc/cpuinfo: constant_tsc and nonstop_tsc, Intel SDM Vol. 3B §18.17.1):
//! it then ticks at one rate through frequency changes and idle states, and that rate is measured
//! here against CLOCK_MONOTONIC over 20 ms (a few parts per million; a latency needs far less).
//!
//! Each reading is LFENCE; RDTSC; LFENCE. The first fence makes the read wait until every earlier
//! instruction has completed, an uncached MMIO load included; the second keeps later ones (the
//! next access) from starting before it (Intel SDM Vol. 2B, RDTSC). RDTSCP would order only the
//! earlier side. The cost of a reading is measured and subtracted like any clock's (`timer`).

use super::clock::{Clock, MONOTONIC};
use std::arch::x86_64::{_mm_lfence, _rdtsc};
use std::time::Duration;

/// How long calibration watches both clocks.
const CALIBRATION: Duration = Duration::from_millis(20);

/// Fenced RDTSC (see the module comment).
#[inline(always)]
fn ticks() -> u64 {
    // SAFETY: LFENCE (SSE2) and RDTSC exist on every x86-64 CPU; neither touches memory.
    // (`allow`: these intrinsics are safe functions in later Rust versions.)
    #[allow(unused_unsafe)]
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

/// Invariant TSC ticks converted to nanoseconds with the measured frequency.
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    origin: u64,
    /// Nanoseconds per tick, as a 32.32 fixed-point number.
    ns_per_tick_q32: u64,
    mhz: f64,
}

/// A TSC reading and a CLOCK_MONOTONIC reading taken together: the tightest of a few brackets
/// (TSC, monotonic, TSC), at the bracket's middle.
fn paired() -> (f64, u64) {
    let mut best = (u64::MAX, 0.0, 0);
    for _ in 0..8 {
        let a = ticks();
        let m = MONOTONIC.now_ns();
        let b = ticks();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), (a as f64 + b as f64) / 2.0, m);
        }
    }
    (best.1, best.2)
}

impl TscClock {
    /// Measure the TSC's frequency against CLOCK_MONOTONIC (20 ms). None when the figure is
    /// not a plausible TSC rate (100 MHz to 100 GHz), e.g. a hypervisor that traps RDTSC badly.
    pub fn calibrate() -> Option<TscClock> {
        let (t0, m0) = paired();
        std::thread::sleep(CALIBRATION);
        let (t1, m1) = paired();
        let hz = (t1 - t0) / (m1.saturating_sub(m0) as f64) * 1e9;
        if !(hz.is_finite() && (1e8..1e11).contains(&hz)) {
            return None;
        }
        Some(TscClock::with_hz(hz))
    }

    /// A clock for a TSC of `hz`, counting from now.
    pub fn with_hz(hz: f64) -> TscClock {
        TscClock { origin: ticks(), ns_per_tick_q32: (1e9 / hz * 4_294_967_296.0).round() as u64, mhz: hz / 1e6 }
    }

    pub fn mhz(&self) -> f64 {
        self.mhz
    }
}

impl Clock for TscClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        ((ticks().wrapping_sub(self.origin) as u128 * self.ns_per_tick_q32 as u128) >> 32) as u64
    }

    fn name(&self) -> String {
        format!("rdtsc (invariant TSC, {:.1} MHz measured against CLOCK_MONOTONIC)", self.mhz)
    }

    fn sample_floor_ns(&self) -> u64 {
        super::clock::SAMPLE_FLOOR_NS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_at_the_given_rate() {
        let c = TscClock::with_hz(2e9);
        assert_eq!(c.ns_per_tick_q32, 1 << 31, "0.5 ns per tick");
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        assert!(c.name().contains("2000.0 MHz"), "{}", c.name());
    }

    #[test]
    fn calibration_agrees_with_the_monotonic_clock() {
        // Only meaningful where the TSC is invariant; elsewhere calibration may still succeed.
        let Some(c) = TscClock::calibrate() else { return };
        // Both ends read as bracketed pairs (the tightest of several): a loaded host that preempts
        // between two plain reads would otherwise show up as a frequency error.
        let (t0, m0) = paired();
        std::thread::sleep(Duration::from_millis(30));
        let (t1, m1) = paired();
        let mhz = (t1 - t0) / (m1.saturating_sub(m0) as f64) * 1e3;
        // 1% is loose; a wrong frequency would be off by far more.
        assert!((mhz / c.mhz() - 1.0).abs() < 0.01, "TSC {mhz:.1} MHz now vs {:.1} MHz calibrated", c.mhz());
    }
}
