//! What the latency runners share: the clock they time with, the default warm-up, and a row's
//! latency figures from its samples (histogram, timer cost, link health, interruption).

use super::super::result::{LatencyFigures, Note, Row, Traced};
use super::super::sample::clock::{Clock, MonotonicClock};
use super::super::sample::histogram::LatencyHistogram;
use super::super::sample::single::Single;

/// The clock for single-access latency: the invariant TSC on x86-64 where /proc/cpuinfo says it
/// is invariant (`tsc_invariant`: constant_tsc and nonstop_tsc), its frequency measured against
/// CLOCK_MONOTONIC; else CLOCK_MONOTONIC through the vDSO (on aarch64 the vDSO reads the virtual
/// counter CNTVCT_EL0 itself, so a clock of our own would gain little).
pub fn latency_clock(tsc_invariant: Option<bool>) -> Box<dyn Clock> {
    #[cfg(target_arch = "x86_64")]
    if tsc_invariant == Some(true) {
        if let Some(c) = super::super::sample::tsc::TscClock::calibrate() {
            return Box::new(c);
        }
    }
    let _ = tsc_invariant;
    Box::new(MonotonicClock)
}

/// 1% of the samples, at least one access and at most 1000.
pub fn default_warmup(samples: u64) -> u64 {
    (samples / 100).clamp(1, 1000)
}

/// A row's latency figures from its samples, with `clock` named.
pub fn figures(single: &Single, clock: &str) -> LatencyFigures {
    let base = LatencyFigures {
        warmup: single.warmup,
        overhead_ns: single.overhead_ns as f64,
        clock: clock.to_string(),
        ..Default::default()
    };
    histogram_figures(&single.hist, base)
}

/// `base` with the histogram's count, mean, percentiles, outliers and CDF filled in (`base`
/// unchanged when the histogram is empty): the one conversion every latency row makes, for the
/// closed-loop runners here and the open loop of `bench::rate`.
pub fn histogram_figures(hist: &LatencyHistogram, base: LatencyFigures) -> LatencyFigures {
    let Some(h) = hist.summary() else { return base };
    LatencyFigures {
        samples: h.samples,
        min_ns: h.min as f64,
        mean_ns: h.mean,
        p50_ns: h.p50 as f64,
        p90_ns: h.p90 as f64,
        p99_ns: h.p99 as f64,
        p999_ns: h.p999 as f64,
        p9999_ns: h.p9999 as f64,
        max_ns: h.max as f64,
        outliers: h.outliers,
        cdf: hist.cdf(),
        ..base
    }
}

/// Latency figures, link health, few samples and interruption into a row.
pub fn finish(row: &mut Row, single: &Single, clock: &dyn Clock) {
    row.latency = Some(figures(single, &clock.name()));
    row.traced = Some(Traced { events: single.traced, secs: single.elapsed_ns as f64 * 1e-9 });
    if !single.health.is_empty() {
        row.notes.push(Note::LinkHealth { changes: single.health.clone() });
    }
    let n = single.hist.len();
    if n > 0 && n < super::super::sample::stats::MIN_SAMPLES as u64 {
        row.notes.push(Note::FewSamples { samples: n as usize });
    }
    if single.interrupted {
        row.notes.push(Note::Interrupted { engine: None });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direction::Direction;

    #[test]
    fn figures_carry_the_histogram_the_cost_and_the_warm_up() {
        let mut hist = LatencyHistogram::new();
        for v in [10, 20, 30, 40, 400] {
            hist.record(v);
        }
        let single =
            Single { hist, warmup: 3, overhead_ns: 17, interrupted: true, health: vec![], elapsed_ns: 0, traced: 0 };
        let f = figures(&single, "fake");
        assert_eq!((f.samples, f.warmup, f.overhead_ns, f.clock.as_str()), (5, 3, 17.0, "fake"));
        assert_eq!((f.min_ns, f.p50_ns, f.p90_ns, f.max_ns, f.mean_ns), (10.0, 30.0, 400.0, 400.0, 100.0));
        // p95 is 400: nothing above 1200.
        assert_eq!((f.outliers, f.cdf.last()), (0, Some(&[400.0, 1.0])));
        let mut row = Row::new(Direction::C2h, 4);
        finish(&mut row, &single, &crate::bench::sample::clock::FakeClock::new(1, 0, 1));
        assert_eq!(row.latency.as_ref().unwrap().clock, "fake clock");
        assert_eq!(row.notes, vec![Note::FewSamples { samples: 5 }, Note::Interrupted { engine: None }]);
        assert_eq!(default_warmup(5), 1);
        assert_eq!(default_warmup(100_000), 1000);
        assert_eq!(default_warmup(10_000_000), 1000);
    }
}
