//! The clock's own cost. Samples shorter than ~100x the timer's overhead are batched so the
//! overhead stays under 1% of what is measured (docs/measurement.md).

use super::clock::Clock;

/// How many back-to-back clock reads to take when measuring the overhead.
const OVERHEAD_PROBES: usize = 2000;
/// A sample must last at least this many timer overheads.
pub const MIN_SAMPLE_OVERHEADS: f64 = 100.0;

/// The cost of one clock reading pair: the median of back-to-back differences, or the clock's
/// resolution when that is coarser (a coarse clock reads 0 most of the time), in seconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TimerOverhead {
    pub median_s: f64,
}

impl TimerOverhead {
    pub fn measure(clock: &dyn Clock) -> Self {
        let mut d: Vec<u64> = Vec::with_capacity(OVERHEAD_PROBES);
        for _ in 0..OVERHEAD_PROBES {
            let a = clock.now_ns();
            let b = clock.now_ns();
            d.push(b.saturating_sub(a));
        }
        d.sort_unstable();
        let median = d[d.len() / 2];
        let floor = d.iter().copied().find(|x| *x > 0).unwrap_or(1);
        TimerOverhead { median_s: (median.max(floor).max(1)) as f64 * 1e-9 }
    }

    /// The shortest sample that keeps the timer's cost under 1% of it, in nanoseconds.
    pub fn min_sample_ns(&self) -> u64 {
        (self.median_s * MIN_SAMPLE_OVERHEADS * 1e9).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::clock::{FakeClock, MonotonicClock};

    #[test]
    fn overhead_is_the_cost_of_a_reading() {
        let o = TimerOverhead::measure(&FakeClock::new(25, 0, 1));
        assert!((o.median_s - 25e-9).abs() < 1e-15);
        assert_eq!(o.min_sample_ns(), 2500);
        let m = TimerOverhead::measure(&MonotonicClock);
        assert!(m.median_s > 0.0 && m.median_s < 1e-3);
    }
}
