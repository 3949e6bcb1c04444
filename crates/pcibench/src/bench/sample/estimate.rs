//! The whole run's estimate before it starts (issue 43): a run of several configurations that
//! differ (sizes, directions, mappings) is said by what each costs, summed, not by its first
//! configuration alone. A probe pass runs each configuration only as far as its calibration (the
//! warm-up and the batch that lasts the sample floor, `Sampling::run_within`), which gives its
//! cost per transfer; the planned transfers at that cost are its time. The run itself then says
//! no configuration's estimate again.

use super::sampler::{Calibrated, Progress, Sampled, Sampling};
use super::stats::Samples;
use crate::units::{approx_size, human_size};
use crate::Result;
use std::sync::atomic::Ordering;

/// A probe times a configuration's batches for at most this long past its calibration.
const PROBE_NS: u64 = 50_000_000;
/// And at most this many batches.
const PROBE_BATCHES: usize = 1000;

impl Sampling<'_> {
    /// The probe of one configuration: batches like the calibration's last for PROBE_NS (at most
    /// PROBE_BATCHES, and no more than the plan), `timed(k)` running k transfers and returning
    /// their ns. The later half of them gives the cost per transfer (the first ones still pay for
    /// wake-ups and cold caches: a sim engine's 1-byte transfers showed 8 times their steady cost
    /// in the first ten). The planned transfers (or what the budget holds of them) at that cost are
    /// the configuration's time, said to `Progress::estimate`; one sample of the mean batch is
    /// returned, so the runner makes its row (and checks its data) as it always does.
    pub(super) fn probe(&mut self, c: Calibrated, mut timed: impl FnMut(u64) -> Result<u64>) -> Result<Sampled> {
        let mut times = vec![c.took];
        let mut spent = c.took;
        let stopped = |s: &Self| s.stop.load(Ordering::Relaxed);
        while times.len() < PROBE_BATCHES
            && spent < PROBE_NS
            && (times.len() as u64 + 1) * c.batch <= c.planned
            && !stopped(self)
        {
            let t = timed(c.batch)?;
            times.push(t);
            spent += t;
        }
        let k = times.len() as u64;
        let later = &times[times.len() / 2..];
        let per = later.iter().sum::<u64>() as f64 / (later.len() as u64 * c.batch) as f64;
        let moved = c.budget_ns.map_or(c.planned, |b| c.planned.min(((b as f64 / per).ceil() as u64).max(1)));
        let work = format!("{} in {} transfers", approx_size(moved.saturating_mul(c.size)), human_size(c.size));
        self.progress.estimate(moved as f64 * per * 1e-9, &work, "--total");
        let mut samples = Samples::new(c.size, c.batch);
        samples.secs.push(spent as f64 * 1e-9 / k as f64);
        Ok(Sampled {
            samples,
            planned: c.batch,
            calibration_transfers: c.transfers + (k - 1) * c.batch - c.batch,
            // Ctrl-C during a probe ends it at once (the run after it stops at its first sample).
            interrupted: stopped(self),
            health: Vec::new(),
            traced: 0,
        })
    }
}

/// What a probe pass learned: each configuration's estimated seconds and work (`1 GiB in 1 B
/// transfers`). `Sampling::run_within` stops a configuration after its calibration when its
/// progress is probing.
#[derive(Debug, Default)]
pub struct Probe {
    pub rows: Vec<(f64, String)>,
}

impl Progress for Probe {
    fn estimate(&mut self, secs: f64, work: &str, _flag: &str) {
        self.rows.push((secs, work.to_string()));
    }
    fn probing(&self) -> bool {
        true
    }
}

impl Probe {
    /// The run's time (the sum of its configurations') and its work in words: one configuration's
    /// own, or `4 configurations, the longest 1 GiB in 1 B transfers`. None when nothing ran.
    pub fn total(&self) -> Option<(f64, String)> {
        let secs: f64 = self.rows.iter().map(|(s, _)| s).sum();
        let longest = self.rows.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
        Some(match self.rows.len() {
            1 => (secs, longest.1.clone()),
            n => (secs, format!("{n} configurations, the longest {}", longest.1)),
        })
    }
}

/// A progress that forwards everything but estimates: the run after its probe (the sum was said),
/// the suite's parts when they move its own default totals (seconds, never long).
pub struct Said<'a>(pub &'a mut dyn Progress);

impl Progress for Said<'_> {
    fn begin(&mut self, what: &str, bytes: u64) {
        self.0.begin(what, bytes)
    }
    fn add(&mut self, bytes: u64) {
        self.0.add(bytes)
    }
    fn end(&mut self) {
        self.0.end()
    }
    fn estimates(&self) -> bool {
        false
    }
}
