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
        let work = format!("{} in {} transfers", approx_size(moved.saturating_mul(c.size)), human_size(c.transfer));
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

/// A part of a transfer is timed until it takes this long (or is the whole transfer).
const PART_NS: u64 = 5_000_000;
/// And then timed this many times more.
const PART_RUNS: usize = 3;
/// Transfers a configuration moves besides its samples: its warm-up, its calibration and the
/// check of its data.
const UNTIMED_TRANSFERS: u64 = 3;

impl Sampling<'_> {
    /// The probe of a configuration whose transfer is many accesses, each a syscall or a message
    /// (a BAR reached without a mapping: over vfio-user messages a 1 MiB transfer is 131072 round
    /// trips, seconds): its first accesses are timed instead of whole transfers, `part(n)` moving a
    /// transfer's first `n` bytes (a multiple of `grain`) and saying whether the stop cut it. The
    /// part grows fourfold until it takes `PART_NS` (or is the whole transfer), and is timed
    /// `PART_RUNS` times more, their median the estimate's; the transfer's time is that part's scaled to its size (each access
    /// costs the same there). The planned transfers (or what the budget holds) at that time are the
    /// configuration's, said to `Progress::estimate`; one sample of it is returned.
    pub fn probe_part(
        &mut self,
        size: u64,
        total: u64,
        budget_ns: Option<u64>,
        grain: u64,
        mut part: impl FnMut(u64) -> Result<bool>,
    ) -> Result<Sampled> {
        let grain = grain.clamp(1, size.max(1));
        let before = self.health.map(|h| h.snapshot());
        let mut timed = |n: u64| -> Result<Option<u64>> {
            let t0 = self.clock.now_ns();
            let cut = part(n)?;
            self.clock.did(0, n);
            Ok((!cut).then(|| self.clock.now_ns().saturating_sub(t0)))
        };
        let mut n = grain;
        let mut per_byte = None;
        while let Some(t) = timed(n)? {
            if t >= PART_NS || n >= size {
                // Again, PART_RUNS times: the first run of a part pays for wake-ups and cold
                // caches, and one run of a few ms can lose a time slice to another thread (the
                // median of them is the part's time).
                let mut runs = Vec::new();
                while runs.len() < PART_RUNS {
                    match timed(n)? {
                        Some(t) => runs.push(t),
                        None => break,
                    }
                }
                runs.sort_unstable();
                per_byte = (runs.len() == PART_RUNS).then(|| runs[PART_RUNS / 2] as f64 / n as f64);
                break;
            }
            n = (n.saturating_mul(4) / grain * grain).clamp(grain, size.max(grain));
        }
        let interrupted = self.stop.load(Ordering::Relaxed) || per_byte.is_none();
        let per = per_byte.unwrap_or(0.0) * size as f64;
        let planned = (total / size.max(1)).max(1);
        if !interrupted {
            let moved = budget_ns.map_or(planned, |b| planned.min(((b as f64 / per.max(1.0)).ceil() as u64).max(1)));
            let work = format!("{} in {} transfers", approx_size(moved.saturating_mul(size)), human_size(size));
            // Where one transfer takes this long, the untimed ones count too: the warm-up, the
            // calibration's (one transfer outlasts the sample floor) and the runner's check of
            // the data (a read back).
            self.progress.estimate((moved + UNTIMED_TRANSFERS) as f64 * per * 1e-9, &work, "--total");
        }
        if let (Some(h), Some(b)) = (self.health, &before) {
            self.probed.record(crate::pci::health::changes(b, &h.snapshot()));
        }
        let mut samples = Samples::new(size, 1);
        if !interrupted {
            samples.secs.push(per * 1e-9);
        }
        Ok(Sampled { samples, planned: 1, calibration_transfers: 0, interrupted, health: Vec::new(), traced: 0 })
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
    fn announce(&mut self, line: &str) {
        self.0.announce(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::clock::FakeClock;
    use crate::pci::fixture::{health_errors, health_tree};
    use crate::pci::health::HealthProbe;
    use std::sync::atomic::AtomicBool;

    /// AER errors that arrive while the probe pass runs the first configuration mark that
    /// configuration's row in the run after it, said as during its estimate; the second row, during
    /// which nothing happened, stays clean (the lab's link_health held its run inside the probe).
    #[test]
    fn a_change_during_a_configurations_probe_marks_its_row() {
        let t = tempfile::tempdir().unwrap();
        let fx = health_tree(t.path());
        let host = crate::host::Host::with_root(t.path());
        let probe = HealthProbe::new(&host, &"0000:03:00.0".parse().unwrap());
        let clock = FakeClock::new(20, 100, u64::MAX);
        let stop = AtomicBool::new(false);
        let mut pass = Probe::default();
        let mut s = Sampling::new(&clock, &stop, &mut pass, Some(&probe));
        let mut first = true;
        for _ in 0..2 {
            let mut errors_once = |_: u64| {
                if std::mem::take(&mut first) {
                    health_errors(&fx, false);
                }
                Ok(())
            };
            let probed = s.run(64, 64 * 1000, &mut errors_once).unwrap();
            assert!(probed.health.is_empty(), "a probe's own sample says nothing: its row will");
            first = false;
        }
        let probed = std::mem::take(&mut s.probed);
        assert_eq!(pass.rows.len(), 2, "both configurations estimated");
        let mut quiet = ();
        let mut s = Sampling::new(&clock, &stop, &mut quiet, Some(&probe));
        s.probed = probed;
        let rows: Vec<Vec<String>> = (0..2).map(|_| s.run(64, 64 * 1000, |_| Ok(())).unwrap().health).collect();
        assert!(
            rows[0].iter().any(|c| c.contains("2 non-fatal errors (2 CmpltAbrt) on 0000:00:1c.0")
                && c.ends_with("(while its time was estimated)")),
            "{:?}",
            rows[0]
        );
        assert!(rows[1].is_empty(), "nothing happened during the second: {:?}", rows[1]);
    }
}
