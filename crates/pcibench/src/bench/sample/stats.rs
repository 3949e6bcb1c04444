//! Samples to statistics: throughput (min is the slowest sample; mean = bytes / mean time), its
//! spread across samples (p5/p95 and the coefficient of variation), and latency percentiles per
//! transfer. `quality` says when a figure is too thin or too noisy to trust.

use serde::{Deserialize, Serialize};

/// Timed samples of one configuration. Each sample moved `batch` transfers of `size` bytes (its
/// time in `secs` is that of `batch` transfers; see `extra`).
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub size: u64,
    pub batch: u64,
    pub secs: Vec<f64>,
    /// Transfers moved beyond the whole batches: the last sample also moved them, and its time is
    /// scaled to a batch's (its own rate), so a total no batch divides is moved and measured whole.
    pub extra: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub min_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    /// Transfers of `size` bytes (samples × batch, and the extra the last sample moved).
    pub transfers: u64,
    pub samples: usize,
    pub batch: u64,
    pub bytes: u64,
    pub min_mbps: f64,
    pub mean_mbps: f64,
    pub median_mbps: f64,
    pub max_mbps: f64,
    /// Throughput of the 5th and 95th percentile samples (slow end, fast end): the spread.
    pub p5_mbps: f64,
    pub p95_mbps: f64,
    /// Coefficient of variation of the sample times, in percent.
    pub cv_pct: f64,
    /// Per transfer (a batched sample's time divided by its batch).
    pub latency: Latency,
}

/// Fewer samples than this make a figure too thin to trust.
pub const MIN_SAMPLES: usize = 10;
/// A coefficient of variation above this makes a figure noisy.
pub const NOISY_CV_PCT: f64 = 10.0;
/// A slowest sample below this fraction of the median is an outlier worth a flag.
pub const OUTLIER_FRACTION: f64 = 0.25;

/// Why a figure should not be trusted as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "quality", rename_all = "snake_case")]
pub enum Quality {
    /// Too few samples to say anything about spread.
    FewSamples { samples: usize },
    /// The samples disagree: high coefficient of variation, or a slowest sample far below the median.
    Noisy { cv_pct: f64, min_vs_median: f64 },
}

impl Stats {
    /// What is wrong with this figure, if anything.
    pub fn quality(&self) -> Vec<Quality> {
        let mut q = Vec::new();
        if self.samples < MIN_SAMPLES {
            q.push(Quality::FewSamples { samples: self.samples });
        }
        let min_vs_median = if self.median_mbps > 0.0 { self.min_mbps / self.median_mbps } else { 1.0 };
        if self.samples >= 2 && (self.cv_pct > NOISY_CV_PCT || min_vs_median < OUTLIER_FRACTION) {
            q.push(Quality::Noisy { cv_pct: self.cv_pct, min_vs_median });
        }
        q
    }
}

/// Nearest-rank percentile of sorted data.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // The epsilon keeps 99.9% of 1000 at rank 999 despite binary rounding.
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Samples {
    pub fn new(size: u64, batch: u64) -> Self {
        Samples { size, batch: batch.max(1), secs: Vec::new(), extra: 0 }
    }

    /// The time the samples took, the last one's unscaled (it moved `extra` more transfers).
    pub fn timed_secs(&self) -> f64 {
        let last = self.secs.last().map_or(0.0, |l| l * self.extra as f64 / self.batch as f64);
        self.secs.iter().sum::<f64>() + last
    }

    pub fn stats(&self) -> Option<Stats> {
        if self.secs.is_empty() {
            return None;
        }
        let per_sample = (self.size * self.batch) as f64;
        let mut t = self.secs.clone();
        t.sort_by(f64::total_cmp);
        let total: f64 = t.iter().sum();
        let rate = |s: f64| if s > 0.0 { per_sample / s / 1e6 } else { f64::INFINITY };
        let n = t.len();
        let median_t = if n % 2 == 1 { t[n / 2] } else { (t[n / 2 - 1] + t[n / 2]) / 2.0 };
        let lat: Vec<f64> = t.iter().map(|s| s / self.batch as f64 * 1e6).collect();
        let mean_t = total / n as f64;
        let var = t.iter().map(|x| (x - mean_t).powi(2)).sum::<f64>() / n as f64;
        let cv_pct = if mean_t > 0.0 { var.sqrt() / mean_t * 100.0 } else { 0.0 };
        Some(Stats {
            transfers: n as u64 * self.batch + self.extra,
            samples: n,
            batch: self.batch,
            bytes: per_sample as u64 * n as u64 + self.extra * self.size,
            min_mbps: rate(t[n - 1]),
            mean_mbps: rate(total / n as f64),
            median_mbps: rate(median_t),
            max_mbps: rate(t[0]),
            // Times sorted fastest first: the 95th percentile time is the 5th percentile rate.
            p5_mbps: rate(percentile(&t, 95.0)),
            p95_mbps: rate(percentile(&t, 5.0)),
            cv_pct,
            latency: Latency {
                min_us: lat[0],
                p50_us: percentile(&lat, 50.0),
                p90_us: percentile(&lat, 90.0),
                p99_us: percentile(&lat, 99.0),
                p999_us: percentile(&lat, 99.9),
                max_us: lat[n - 1],
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_statistics_from_known_samples() {
        // 1 MB per sample at 1, 2 and 4 ms: 1000, 500 and 250 MB/s.
        let s = Samples { size: 500_000, batch: 2, secs: vec![0.002, 0.001, 0.004], extra: 0 };
        let st = s.stats().unwrap();
        assert_eq!(st.transfers, 6);
        assert_eq!(st.bytes, 3_000_000);
        assert!((st.min_mbps - 250.0).abs() < 1e-9);
        assert!((st.max_mbps - 1000.0).abs() < 1e-9);
        assert!((st.median_mbps - 500.0).abs() < 1e-9);
        // mean = bytes / mean time = 1 MB / (7/3 ms)
        assert!((st.mean_mbps - 1e6 / (0.007 / 3.0) / 1e6).abs() < 1e-9);
        assert!((st.latency.min_us - 500.0).abs() < 1e-9);
        assert!((st.latency.max_us - 2000.0).abs() < 1e-9);
        assert!((st.latency.p50_us - 1000.0).abs() < 1e-9);
        // Nearest rank over 3 samples: p5 is the slowest, p95 the fastest.
        assert!((st.p5_mbps - 250.0).abs() < 1e-9 && (st.p95_mbps - 1000.0).abs() < 1e-9);
        // Times 1, 2, 4 ms: mean 7/3, population sd sqrt(14/9), CV = sqrt(14)/7 = 53.45%.
        assert!((st.cv_pct - 14f64.sqrt() / 7.0 * 100.0).abs() < 1e-9, "{}", st.cv_pct);
        assert_eq!(
            st.quality(),
            vec![Quality::FewSamples { samples: 3 }, Quality::Noisy { cv_pct: st.cv_pct, min_vs_median: 0.5 },]
        );
        assert!(Samples::new(1, 1).stats().is_none());
    }

    #[test]
    fn steady_samples_are_not_flagged_and_one_slow_one_is() {
        let steady = Samples { size: 1000, batch: 1, secs: vec![1e-6; 20], extra: 0 };
        let st = steady.stats().unwrap();
        assert!(st.cv_pct.abs() < 1e-9 && st.quality().is_empty(), "{st:?}");
        // 19 samples at 1 µs and one at 85 µs: the median stands, the min is 85x below it.
        let mut secs = vec![1e-6; 19];
        secs.push(85e-6);
        let st = Samples { size: 1000, batch: 1, secs, extra: 0 }.stats().unwrap();
        assert!((st.median_mbps - 1000.0).abs() < 1e-6);
        match &st.quality()[..] {
            [Quality::Noisy { min_vs_median, .. }] => assert!((min_vs_median - 1.0 / 85.0).abs() < 1e-9),
            q => panic!("{q:?}"),
        }
    }

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 500.0);
        assert_eq!(percentile(&v, 99.0), 990.0);
        assert_eq!(percentile(&v, 99.9), 999.0);
        assert_eq!(percentile(&v, 100.0), 1000.0);
        assert_eq!(percentile(&[7.0], 99.9), 7.0);
    }
}
