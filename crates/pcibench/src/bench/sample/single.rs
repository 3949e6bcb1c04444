//! `Sampling::single`: the sampling loop for latency. The same clock, stop flag, progress and
//! link-health watch as `Sampling::run`, but every sample one access, never batched, with the
//! timing shell's own cost subtracted, kept in a log-linear histogram.

use super::histogram::LatencyHistogram;
use super::sampler::{Sampling, HEALTH_EVERY_NS};
use crate::pci::health::{self, HealthProbe};
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// Single-access samples are taken in runs of this many, then put in the histogram (a progress
/// or health update per sample would cost more than a fast access).
const CHAIN: usize = 256;
/// Empty timing shells measured to find the cost subtracted from each single-access sample.
const SHELL_PROBES: usize = 2001;

/// The samples of one single-access (latency) configuration.
#[derive(Debug, Clone)]
pub struct Single {
    pub hist: LatencyHistogram,
    /// Accesses run first, untimed, and discarded.
    pub warmup: u64,
    /// The cost of the timing shell (two clock readings around nothing), subtracted from every
    /// sample, in nanoseconds.
    pub overhead_ns: u64,
    /// The stop flag ended the sampling early.
    pub interrupted: bool,
    /// What changed in the link's health while this configuration ran (empty: nothing).
    pub health: Vec<String>,
    /// The samples' time, shells included (ns).
    pub elapsed_ns: u64,
    /// Events the timed samples reported to a `--trace` (`trace::events_here`).
    pub traced: u64,
}

impl Sampling<'_> {
    /// Up to `diffs.len()` samples back to back: each the clock's difference between the reading
    /// that ended the previous sample (or the first reading) and the one that ends this one, so
    /// one reading delimits two samples (a fenced reading waits for the access before it and
    /// holds back the one after it). Stops early at the stop flag; returns the samples taken.
    #[inline(always)]
    fn chain(
        &self,
        diffs: &mut [u64],
        transfers: u64,
        bytes: u64,
        op: &mut impl FnMut() -> Result<()>,
    ) -> Result<(usize, bool)> {
        let mut t0 = self.clock.now_ns();
        for (n, d) in diffs.iter_mut().enumerate() {
            if self.stop.load(Ordering::Relaxed) {
                return Ok((n, true));
            }
            op()?;
            self.clock.did(transfers, bytes);
            let t1 = self.clock.now_ns();
            *d = t1.saturating_sub(t0);
            t0 = t1;
        }
        Ok((diffs.len(), false))
    }

    /// The cost of one empty sample as `single` times it (the loop, the cost-model hook and one
    /// clock reading around nothing): the median of many, in nanoseconds. Subtracting it from a
    /// sample leaves the access.
    pub fn shell_overhead_ns(&self) -> u64 {
        let mut d = vec![0u64; SHELL_PROBES];
        // No transfer: a fake clock charges the shell nothing but its reading.
        let (n, _) = self.chain(&mut d, 0, 0, &mut || Ok(())).unwrap_or((0, true));
        let d = &mut d[..n];
        d.sort_unstable();
        d.get(n / 2).copied().unwrap_or(0)
    }

    /// Time `op` once per sample, never batched: `warmup` untimed calls, then up to `samples`
    /// timed ones (fewer when the stop flag is raised), each one access of `bytes` bytes. A
    /// sample is the clock's difference around the call less the timing shell's own cost, kept
    /// in a log-linear histogram, so millions of samples cost no memory. Samples are taken in
    /// runs of `CHAIN`; the histogram, progress and link health are updated between runs.
    pub fn single(&mut self, warmup: u64, samples: u64, bytes: u64, op: impl FnMut() -> Result<()>) -> Result<Single> {
        self.single_within(warmup, samples, None, bytes, op)
    }

    /// `single`, and with `budget_ns` (no `--samples` given: `ROW_BUDGET_NS`) sized by time as
    /// `run_within` is (issue 43): `samples` is then the cap, the samples stop once they took the
    /// budget (at least `stats::MIN_SAMPLES` of them), and the warm-up stops after a tenth of it.
    /// The first `MIN_SAMPLES` samples are the calibration: runs after them are sized from their
    /// rate, so a slow access overshoots the budget by one sample's time, not a whole run's.
    pub fn single_within(
        &mut self,
        warmup: u64,
        samples: u64,
        budget_ns: Option<u64>,
        bytes: u64,
        op: impl FnMut() -> Result<()>,
    ) -> Result<Single> {
        self.single_counted(warmup, samples, budget_ns, bytes, "--samples", op)
    }

    /// `single_within` whose sample count is set by `flag` (`--dma-samples` for DMA latency),
    /// which a long row's estimate names.
    pub fn single_counted(
        &mut self,
        warmup: u64,
        samples: u64,
        budget_ns: Option<u64>,
        bytes: u64,
        flag: &str,
        mut op: impl FnMut() -> Result<()>,
    ) -> Result<Single> {
        let before = self.health.map(|h| h.snapshot());
        let mut health = Vec::new();
        let mut interrupted = false;
        let mut warmed = 0;
        let warm_start = self.clock.now_ns();
        while warmed < warmup && !interrupted {
            interrupted = self.stop.load(Ordering::Relaxed);
            if budget_ns.is_some_and(|b| warmed > 0 && self.clock.now_ns().saturating_sub(warm_start) >= b / 10) {
                break;
            }
            if !interrupted {
                op()?;
                warmed += 1;
            }
        }
        let min = super::stats::MIN_SAMPLES as u64;
        let overhead_ns = self.shell_overhead_ns();
        let mut hist = LatencyHistogram::new();
        let mut diffs = [0u64; CHAIN];
        let (mut done, mut elapsed_ns) = (0u64, 0u64);
        let mut last_check = self.clock.now_ns();
        let mut planned = samples;
        let traced = crate::trace::events_here();
        while done < planned && !interrupted {
            let mut want = (planned - done).min(CHAIN as u64);
            if let Some(b) = budget_ns {
                if done >= min && elapsed_ns >= b {
                    break;
                }
                // The calibration run, then runs that end about when the budget does.
                want = match done {
                    0 => want.min(min),
                    _ => want.min(
                        (b.saturating_sub(elapsed_ns) / (elapsed_ns / done).max(1))
                            .max(min.saturating_sub(done))
                            .max(1),
                    ),
                };
            }
            let (n, stopped) = self.chain(&mut diffs[..want as usize], 1, bytes, &mut op)?;
            interrupted = stopped;
            for d in &diffs[..n] {
                hist.record(d.saturating_sub(overhead_ns));
                elapsed_ns += d;
            }
            if done == 0 && n > 0 {
                // The first run of samples is the calibration: what all of them will take.
                let per = elapsed_ns as f64 / n as f64;
                if let Some(b) = budget_ns {
                    planned = samples.min(((b as f64 / per).ceil() as u64).max(min));
                }
                self.progress.estimate(
                    planned.saturating_sub(n as u64) as f64 * per * 1e-9,
                    &format!("{planned} samples"),
                    flag,
                );
            }
            done += n as u64;
            self.progress.add(n as u64 * bytes);
            // Between chains, untimed, as in `run`: a card that stopped answering ends the run.
            let guard = |h: &HealthProbe| h.functions().next().and_then(crate::access::guard::gone);
            if let Some(why) = self.health.and_then(|h| guard(h).or_else(|| h.not_answering())) {
                return Err(Error::Gone(why));
            }
            if let (Some(h), Some(b)) = (self.health, &before) {
                let now = self.clock.now_ns();
                if now.saturating_sub(last_check) >= HEALTH_EVERY_NS {
                    // Between runs, untimed, as in `run`.
                    health = health::changes(b, &h.snapshot());
                    last_check = now;
                }
            }
        }
        if let (Some(h), Some(b)) = (self.health, &before) {
            health = health::changes(b, &h.snapshot());
        }
        let traced = crate::trace::events_here() - traced;
        Ok(Single { hist, warmup: warmed, overhead_ns, interrupted, health, elapsed_ns, traced })
    }
}
