//! Latency samples in a log-linear histogram (HdrHistogram, as fio keeps its completion latencies):
//! buckets of unit width up to 255 ns, then 128 buckets per power of two, so a bucket is under 1%
//! of its value wide (2 significant digits) and a row costs ~40 KiB whatever the sample count.
//! Min, max and mean are kept exactly beside it; percentiles are nearest-rank (as `stats`) and
//! reported as the top of their bucket (HdrHistogram's convention: never below the true value,
//! at most 1% above it), clamped to the exact max.

use hdrhistogram::Histogram;

/// Significant decimal digits the buckets keep: 2 gives buckets under 1% of their value wide.
const SIGFIG: u8 = 2;
/// The longest latency the histogram tells apart (one hour); longer ones count as this.
const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Outliers are samples above this many times the 95th percentile (pcie-bench's "#outliers").
pub const OUTLIER_FACTOR: u64 = 3;
/// CDF points a figure carries at most per 1/512 of the samples or 5% of latency, whichever
/// comes first (so plots of tails keep their shape without a point per bucket).
const CDF_STEP_FRACTION: f64 = 1.0 / 512.0;
const CDF_STEP_RATIO: f64 = 1.05;

/// The percentiles every latency row reports, in `LatencyFigures` order (p50, p90, p99, p99.9,
/// p99.99), and p95 for the outlier threshold.
const QUANTILES: [f64; 6] = [0.50, 0.90, 0.95, 0.99, 0.999, 0.9999];

/// Latency samples (nanoseconds) of one configuration.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        // The bounds are constants that satisfy HdrHistogram's rules (low >= 1, high >= 2 low,
        // sigfig <= 5), so construction cannot fail.
        let h = Histogram::new_with_max(HIGHEST_NS, SIGFIG).expect("valid histogram bounds");
        LatencyHistogram { h, min: u64::MAX, max: 0, sum: 0 }
    }

    /// Count one sample of `ns` nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.sum += ns as u128;
    }

    /// Samples recorded.
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bucket `ns` falls in: its lowest and highest value.
    pub fn bucket(&self, ns: u64) -> (u64, u64) {
        (self.h.lowest_equivalent(ns), self.h.highest_equivalent(ns))
    }

    /// Nearest-rank values at `quantiles` (ascending): the top of the bucket holding the sample
    /// of rank ceil(q x n), clamped to the exact max.
    fn at_quantiles(&self, quantiles: &[f64]) -> Vec<u64> {
        let n = self.len();
        // The epsilon keeps 99.9% of 1000 at rank 999 despite binary rounding (as `stats`).
        let ranks: Vec<u64> = quantiles.iter().map(|q| ((q * n as f64 - 1e-9).ceil() as u64).clamp(1, n)).collect();
        let mut out = Vec::with_capacity(ranks.len());
        let mut seen = 0u64;
        for v in self.h.iter_recorded() {
            seen += v.count_since_last_iteration();
            while out.len() < ranks.len() && seen >= ranks[out.len()] {
                out.push(self.h.highest_equivalent(v.value_iterated_to()).min(self.max));
            }
        }
        out.resize(ranks.len(), self.max);
        out
    }

    /// Samples in buckets wholly above `ns`.
    pub fn count_above(&self, ns: u64) -> u64 {
        self.h
            .iter_recorded()
            .filter(|v| self.h.lowest_equivalent(v.value_iterated_to()) > ns)
            .map(|v| v.count_at_value())
            .sum()
    }

    /// (latency ns, fraction of samples at or below it), increasing: one point per bucket,
    /// thinned to a step of 1/512 of the samples or 5% of latency, always ending at the max.
    pub fn cdf(&self) -> Vec<[f64; 2]> {
        let n = self.len() as f64;
        let mut out: Vec<[f64; 2]> = Vec::new();
        let mut seen = 0u64;
        let mut iter = self.h.iter_recorded().peekable();
        while let Some(v) = iter.next() {
            seen += v.count_since_last_iteration();
            let x = (self.h.highest_equivalent(v.value_iterated_to()).min(self.max)) as f64;
            let y = seen as f64 / n;
            let last = iter.peek().is_none();
            let keep = match out.last() {
                None => true,
                Some([px, py]) => last || y - py >= CDF_STEP_FRACTION || x >= px * CDF_STEP_RATIO,
            };
            if keep {
                out.push([x, y]);
            }
        }
        out
    }

    /// Exact min, max and mean; nearest-rank percentiles; outliers above 3x p95. None when empty.
    pub fn summary(&self) -> Option<Summary> {
        if self.is_empty() {
            return None;
        }
        let q = self.at_quantiles(&QUANTILES);
        Some(Summary {
            samples: self.len(),
            min: self.min,
            mean: self.sum as f64 / self.len() as f64,
            p50: q[0],
            p90: q[1],
            p95: q[2],
            p99: q[3],
            p999: q[4],
            p9999: q[5],
            max: self.max,
            outliers: self.count_above(q[2].saturating_mul(OUTLIER_FACTOR)),
        })
    }
}

/// What a histogram says, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub samples: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
    /// Samples above 3x p95.
    pub outliers: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_percentiles_below_256_ns() {
        // 1..=100 ns: every value has its own bucket, so nearest-rank percentiles are exact.
        let mut h = LatencyHistogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        let f = h.summary().unwrap();
        assert_eq!(f.samples, 100);
        assert_eq!((f.min, f.p50, f.p90, f.p95, f.p99, f.p999, f.p9999, f.max), (1, 50, 90, 95, 99, 100, 100, 100));
        assert!((f.mean - 50.5).abs() < 1e-12);
        // p95 = 95: nothing is above 285.
        assert_eq!(f.outliers, 0);
        let cdf = h.cdf();
        assert_eq!(cdf.first(), Some(&[1.0, 0.01]));
        assert_eq!(cdf.last(), Some(&[100.0, 1.0]));
        assert!(cdf.windows(2).all(|w| w[0][0] < w[1][0] && w[0][1] < w[1][1]), "{cdf:?}");
    }

    #[test]
    fn nearest_rank_on_1000_samples_as_stats_does() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            // 1..=200 are exact; larger values land in buckets at most 1% wide.
            h.record(v.min(200));
        }
        let f = h.summary().unwrap();
        // 801 samples of 200: every percentile from p20 up is 200.
        assert_eq!((f.p50, f.p999, f.max), (200, 200, 200));
        let mut h = LatencyHistogram::new();
        for v in 0..1000u64 {
            h.record(v % 250);
        }
        // Sorted: 4 copies of each of 0..250. Rank 999 of 1000 (p99.9) is 249; rank 500 is 124.
        let f = h.summary().unwrap();
        assert_eq!((f.min, f.p50, f.p999, f.max), (0, 124, 249, 249));
    }

    #[test]
    fn buckets_are_under_one_percent_wide() {
        let h = LatencyHistogram::new();
        assert_eq!(h.bucket(255), (255, 255));
        // 256..511 in steps of 2, 512..1023 in steps of 4.
        assert_eq!(h.bucket(257), (256, 257));
        assert_eq!(h.bucket(1001), (1000, 1003));
        let mut v = 1u64;
        while v < HIGHEST_NS {
            let (lo, hi) = h.bucket(v);
            assert!(lo <= v && v <= hi, "{v} in [{lo}, {hi}]");
            assert!(((hi - lo + 1) as f64) < 0.01 * lo.max(1) as f64 || hi == lo, "{v}: bucket [{lo}, {hi}]");
            v = v * 3 / 2 + 1;
        }
    }

    #[test]
    fn large_values_report_the_top_of_their_bucket_within_one_percent() {
        let mut h = LatencyHistogram::new();
        for _ in 0..99 {
            h.record(1_000_000);
        }
        h.record(5_000_000);
        let f = h.summary().unwrap();
        let (lo, hi) = h.bucket(1_000_000);
        assert!(lo <= 1_000_000 && f.p50 == hi && f.p50 < 1_010_000, "{f:?}");
        // Exact min/max/mean beside the buckets.
        assert_eq!((f.min, f.max), (1_000_000, 5_000_000));
        assert!((f.mean - 1_040_000.0).abs() < 1e-6);
        // p99.9 and p99.99 are the max (rank 100), clamped to its exact value.
        assert_eq!((f.p999, f.p9999), (5_000_000, 5_000_000));
        // p95 is ~1 ms: the 5 ms sample is the one outlier (above 3x p95).
        assert_eq!(f.outliers, 1);
    }

    #[test]
    fn outliers_are_samples_above_three_times_p95() {
        let mut h = LatencyHistogram::new();
        for _ in 0..95 {
            h.record(10);
        }
        for v in [20, 30, 31, 100, 200] {
            h.record(v);
        }
        // p95 = 10 (rank 95): 31, 100 and 200 are above 30; 30 is not.
        assert_eq!(h.summary().unwrap().outliers, 3);
        assert_eq!(h.count_above(30), 3);
    }

    #[test]
    fn an_empty_histogram_has_no_figures_and_memory_is_bounded() {
        let h = LatencyHistogram::new();
        assert_eq!((h.summary(), h.cdf().len()), (None, 0));
        // A million distinct values cost no more memory than one: the counts array is fixed.
        let mut big = LatencyHistogram::new();
        for v in 0..1_000_000u64 {
            big.record(v * 977);
        }
        assert_eq!(big.len(), 1_000_000);
        assert!(big.cdf().len() < 2000, "{}", big.cdf().len());
    }
}
