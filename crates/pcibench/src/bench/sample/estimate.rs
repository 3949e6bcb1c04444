//! The whole run's estimate before it starts (issue 43): a run of several configurations that
//! differ (sizes, directions, mappings) is said by what each costs, summed, not by its first
//! configuration alone. A probe pass runs each configuration only as far as its calibration (the
//! warm-up and the batch that lasts the sample floor, `Sampling::run_within`), which gives its
//! cost per transfer; the planned transfers at that cost are its time. The run itself then says
//! no configuration's estimate again.

use super::sampler::Progress;

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
