//! The one sampling loop every throughput runner uses (PIO copies, DMA engine runs, buffer
//! access): one untimed warm-up, a batch size calibrated on growing runs until a sample lasts
//! at least 100 timer overheads and the clock's floor (100 µs of real time, `SAMPLE_FLOOR_NS`:
//! long enough that a timer interrupt cannot double a sample), then timed samples until
//! `total` bytes have moved. Beside it, `single` (in `super::single`) for latency: the same
//! clock, stop flag, progress and link-health watch, but every sample one access. The clock is a
//! trait so runners can be tested with exact figures.

use super::clock::Clock;
use super::stats::Samples;
use super::timer::TimerOverhead;
use crate::pci::health::{self, HealthProbe};
use crate::units::human_size;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

/// At most this many samples are kept per configuration (8 MiB of times): past it, samples
/// batch more transfers, so memory stays bounded whatever `--total` asks.
pub const MAX_SAMPLES: u64 = 1 << 20;
/// Calibration stops growing a batch here (a transfer that cannot reach 100 timer overheads in
/// 16 M repetitions is measured as it is).
const MAX_BATCH: u64 = 1 << 24;
/// The most transfers one configuration may plan: what the bounded samples can count.
pub const MAX_TRANSFERS: u64 = MAX_SAMPLES * MAX_BATCH;
/// The most bytes one configuration may move (1 PiB: hours even at memory speed).
pub const MAX_TOTAL: u64 = 1 << 50;
/// Link health is also checked between samples this often on long runs (outside the timed part).
pub(super) const HEALTH_EVERY_NS: u64 = 1_000_000_000;
/// How often, between samples, the device is asked whether it still answers (two config-space
/// words from sysfs): a card that goes away stops the run within a sample or a millisecond.
const ANSWERING_EVERY_NS: u64 = 1_000_000;
/// `--total` against the transfer sizes, before anything runs: it must hold at least one
/// transfer of the largest size, and no more transfers of the smallest than pcibench counts.
pub fn check_total(total: u64, sizes: &[u64]) -> Result<()> {
    if total == 0 {
        return Err(Error::usage("--total is 0: give the bytes to move per configuration, e.g. --total 64M"));
    }
    if total > MAX_TOTAL {
        return Err(Error::usage(format!(
            "--total {} is more than pcibench moves per configuration (1 PiB): use a smaller --total",
            human_size(total)
        )));
    }
    if let Some(&big) = sizes.iter().max() {
        if total < big {
            return Err(Error::usage(format!(
                "--total {} is less than one {} transfer: raise --total to at least {} or use a smaller --size",
                human_size(total),
                human_size(big),
                human_size(big)
            )));
        }
    }
    if let Some(&small) = sizes.iter().filter(|s| **s > 0).min() {
        if total / small > MAX_TRANSFERS {
            return Err(Error::usage(format!(
                "--total {} is {} transfers of {}: more than pcibench counts per configuration (2^44): use a smaller --total",
                human_size(total),
                total / small,
                human_size(small)
            )));
        }
    }
    Ok(())
}

/// How long a configuration runs when the user gave no `--total` (issue 43): its samples stop once
/// they took this long (at least `stats::MIN_SAMPLES` of them), or at the byte total if sooner. Half a second a row keeps a default run in seconds whatever the
/// transfer size (64 MiB in 1-byte transfers was minutes) and gives fast rows all their bytes.
pub const ROW_BUDGET_NS: u64 = 500_000_000;

/// A configuration's samples are timed this long (or `stats::MIN_SAMPLES` of them) before the
/// rate they show is taken for the whole configuration's estimate.
const ESTIMATE_AFTER_NS: u64 = 100_000_000;

/// A configuration at the end of its calibration (`Sampling::run_within`), for a probe
/// (`estimate`).
pub(super) struct Calibrated {
    /// Bytes per run (one `op` of k = 1), transfers planned, the time budget (no --total given).
    pub size: u64,
    /// Bytes of one transfer, for the estimate's words (a run may hold several).
    pub transfer: u64,
    pub planned: u64,
    pub budget_ns: Option<u64>,
    /// The calibrated batch and the time its last run took (ns).
    pub batch: u64,
    pub took: u64,
    /// Transfers run so far (warm-up and calibration).
    pub transfers: u64,
}

/// Where a run reports its progress (a progress bar; nothing, with `()`).
pub trait Progress {
    /// A part of the run that will move about `bytes` bytes starts.
    fn begin(&mut self, what: &str, bytes: u64) {
        let _ = (what, bytes);
    }
    /// `bytes` more have moved.
    fn add(&mut self, bytes: u64) {
        let _ = bytes;
    }
    /// The part is over.
    fn end(&mut self) {}
    /// A configuration's calibration says it will take about `secs` seconds more for `work` (`1 GiB
    /// in 1 B transfers`); `flag` is the option that sets it. Called once per configuration, before
    /// its timed samples: the caller decides what is long enough to say (the library never prints).
    fn estimate(&mut self, secs: f64, work: &str, flag: &str) {
        let _ = (secs, work, flag);
    }
    /// A probe pass (`estimate::Probe`): each configuration stops after its calibration, its
    /// estimate made from it.
    fn probing(&self) -> bool {
        false
    }
    /// Whether estimates are wanted at all: a run whose whole estimate was said, or a suite's
    /// parts of its own default size (`estimate::Said`), want none, and get no probe pass.
    fn estimates(&self) -> bool {
        true
    }
    /// A line to say before the work begins (how the suite sized itself).
    fn announce(&mut self, line: &str) {
        let _ = line;
    }
    /// A soak's interval ended (`dma --duration`): a row per stream, to show as they come.
    fn interval(&mut self, rows: &[crate::bench::soak::figures::Interval]) {
        let _ = rows;
    }
}

impl Progress for () {}

/// A closure counting bytes is a progress report too.
impl<F: FnMut(u64)> Progress for F {
    fn add(&mut self, bytes: u64) {
        self(bytes)
    }
}

/// How a runner samples: the clock, its measured overhead, the stop flag (Ctrl-C, SIGTERM)
/// and where progress goes.
pub struct Sampling<'a> {
    pub clock: &'a dyn Clock,
    pub overhead: TimerOverhead,
    pub stop: &'a AtomicBool,
    pub progress: &'a mut dyn Progress,
    /// The device's link health, snapshotted before and after each configuration (and between
    /// samples on long ones); None where there is no link to watch (simulated cards).
    pub health: Option<&'a HealthProbe>,
    /// What the link's health did during each configuration's probe (`estimate`), in order.
    pub probed: ProbedHealth,
}

/// The link-health changes a probe pass (`estimate::Probe`) saw, one entry per configuration in
/// the order the runner ran them; the run after it takes them back in that same order, so a change
/// while a configuration was being probed marks that configuration's row, not none (the lab's
/// link_health: AER errors injected while the probe pass ran the h2c row went unreported).
#[derive(Debug, Default)]
pub struct ProbedHealth(std::collections::VecDeque<Vec<String>>);

/// How a change seen while a configuration was probed ends, in its row's link-health note.
pub const WHILE_PROBED: &str = " (while its time was estimated)";

impl ProbedHealth {
    pub(super) fn record(&mut self, changes: Vec<String>) {
        self.0.push_back(changes);
    }

    /// The next configuration's changes during its probe, each said as such, before `during` (the
    /// changes while it ran for real).
    fn with_probed(&mut self, during: Vec<String>) -> Vec<String> {
        let earlier = self.0.pop_front().unwrap_or_default();
        earlier.into_iter().map(|c| format!("{c}{WHILE_PROBED}")).chain(during).collect()
    }
}

/// What `Sampling::run_phased` asks of its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Run `k` transfers back to back (timed, or the warm-up and calibration).
    Run(u64),
    /// Untimed, just before a kept sample's timed run (an engine's counters start here).
    Before,
    /// Untimed, just after it: the sample moved `k` transfers in `ns` nanoseconds.
    After { k: u64, ns: u64 },
}

/// The timed samples of one configuration and how they came about.
#[derive(Debug, Clone)]
pub struct Sampled {
    pub samples: Samples,
    /// Transfers the plan asked for (`total / size`).
    pub planned: u64,
    /// Transfers run untimed before the samples (warm-up and batch calibration); they are not
    /// counted as measured.
    pub calibration_transfers: u64,
    /// The stop flag ended the sampling early.
    pub interrupted: bool,
    /// What changed in the link's health while this configuration ran (empty: nothing).
    pub health: Vec<String>,
    /// Events the timed samples reported to a `--trace` (`trace::events_here`).
    pub traced: u64,
}

impl Sampled {
    /// Transfers measured (samples × batch, and the extra the last sample moved).
    pub fn measured(&self) -> u64 {
        self.samples.secs.len() as u64 * self.samples.batch + self.samples.extra
    }
}

impl<'a> Sampling<'a> {
    /// Sampling with `clock`, its overhead measured now.
    pub fn new(
        clock: &'a dyn Clock,
        stop: &'a AtomicBool,
        progress: &'a mut dyn Progress,
        health: Option<&'a HealthProbe>,
    ) -> Sampling<'a> {
        Sampling {
            clock,
            overhead: TimerOverhead::measure(clock),
            stop,
            progress,
            health,
            probed: ProbedHealth::default(),
        }
    }

    /// Time `op(k)` (k transfers of `size` bytes back to back) until `total` bytes have moved.
    /// `total` must hold at least one transfer (callers check and explain).
    pub fn run(&mut self, size: u64, total: u64, op: impl FnMut(u64) -> Result<()>) -> Result<Sampled> {
        self.run_within(size, total, None, op)
    }

    /// `run`, and with `budget_ns` (the total was not given: `ROW_BUDGET_NS`) the samples stop once
    /// they took that long (at least `stats::MIN_SAMPLES` of them). What the whole configuration
    /// will take goes to `Progress::estimate` once its first samples show the rate.
    pub fn run_within(
        &mut self,
        size: u64,
        total: u64,
        budget_ns: Option<u64>,
        op: impl FnMut(u64) -> Result<()>,
    ) -> Result<Sampled> {
        self.runs_within(size, size, total, budget_ns, op)
    }

    /// `run_within` where one run (`op(1)`) moves `size` bytes in transfers of `transfer` bytes
    /// (an engine's batch of 1024 one-byte transfers): the estimate says the transfers' size, not
    /// the run's.
    pub fn runs_within(
        &mut self,
        size: u64,
        transfer: u64,
        total: u64,
        budget_ns: Option<u64>,
        mut op: impl FnMut(u64) -> Result<()>,
    ) -> Result<Sampled> {
        self.run_phased(size, transfer, total, budget_ns, |p| match p {
            Phase::Run(k) => op(k),
            Phase::Before | Phase::After { .. } => Ok(()),
        })
    }

    /// `run_within`, with `op` also told, untimed, when each kept sample begins and ends
    /// (`Phase`): what an engine counts per sample is then taken over exactly the samples the
    /// host's figures summarise.
    pub fn run_phased(
        &mut self,
        size: u64,
        transfer: u64,
        total: u64,
        budget_ns: Option<u64>,
        mut op: impl FnMut(Phase) -> Result<()>,
    ) -> Result<Sampled> {
        let planned = (total / size.max(1)).max(1);
        let before = self.health.map(|h| h.snapshot());
        let mut health_changes: Vec<String> = Vec::new();
        let mut last_check = self.clock.now_ns();
        let mut last_answer = last_check;
        let timed = |k: u64, op: &mut dyn FnMut(Phase) -> Result<()>| -> Result<u64> {
            let t0 = self.clock.now_ns();
            op(Phase::Run(k))?;
            self.clock.did(k, k * size);
            Ok(self.clock.now_ns().saturating_sub(t0))
        };
        // A stop during the warm-up or the calibration ends the configuration with no sample (an
        // op may end early once the stop is raised: a transfer of one message per access takes
        // seconds, and stops between its accesses).
        let stopped = |s: &Self, calibration: u64| {
            s.stop.load(Ordering::Relaxed).then(|| Sampled {
                samples: Samples::new(size, 1),
                planned: 1,
                calibration_transfers: calibration,
                interrupted: true,
                health: Vec::new(),
                traced: 0,
            })
        };
        // Warm up (caches, TLB, an engine's first descriptor fetch), then grow the batch.
        timed(1, &mut op)?;
        if let Some(s) = stopped(self, 1) {
            return Ok(s);
        }
        let want = self.overhead.min_sample_ns().max(self.clock.sample_floor_ns());
        let mut calibration = 1;
        let mut n = 1u64;
        let (batch, took) = loop {
            let took = timed(n, &mut op)?;
            calibration += n;
            if let Some(s) = stopped(self, calibration) {
                return Ok(s);
            }
            if took >= want || n >= MAX_BATCH {
                break (n, took);
            }
            // Aim past the target from this run's rate, at least doubling.
            let per = (took as f64 / n as f64).max(1e-3);
            n = ((want as f64 / per * 1.5).ceil() as u64).clamp(n * 2, MAX_BATCH);
        };
        if self.progress.probing() {
            let calibrated = Calibrated { size, transfer, planned, budget_ns, batch, took, transfers: calibration };
            let sampled = self.probe(calibrated, |k| timed(k, &mut op))?;
            if let Some(b) = &before {
                self.probed.record(self.health.map(|h| health::changes(b, &h.snapshot())).unwrap_or_default());
            }
            return Ok(sampled);
        }
        // Fewer planned transfers than one batch: one sample of them all (flagged as short by
        // the statistics). More samples than we keep: batch more per sample.
        let batch = batch.min(planned).max(planned.div_ceil(MAX_SAMPLES));
        // Samples are whole batches: a batch up to half again as large that divides the plan keeps
        // every sample alike (64 transfers of 1 MiB in batches of 4, not 63 in batches of 3, as
        // fpga_sio's "64 transfers" reads), unless that leaves too few samples to show the spread.
        // Where none does (the calibrated batch depends on the host's speed and load), the last
        // sample also moves the `rest`: the total given is moved and measured whole on any host.
        let enough = (planned / batch).min(super::stats::MIN_SAMPLES as u64);
        let batch = (batch..=batch + batch / 2).find(|b| planned % b == 0 && planned / b >= enough).unwrap_or(batch);
        let count = planned / batch;
        let rest = planned % batch;
        let mut samples = Samples::new(size, batch);
        // At most MAX_SAMPLES (8 MiB of times); fallible all the same, like every large buffer.
        samples.secs.try_reserve_exact(count as usize).map_err(|_| {
            Error::Unsupported(format!("cannot allocate room for {count} samples: raise the memory limit (ulimit -v)"))
        })?;
        let mut interrupted = false;
        // A default total (`budget_ns`) ends the row once its samples took the budget (with at
        // least MIN_SAMPLES of them). The rate the first samples show (the first 100 ms of them,
        // or MIN_SAMPLES, whichever comes first: a calibration batch alone can be one scheduler
        // wake-up) is what the whole row will take, said once (`Progress::estimate`).
        let min = super::stats::MIN_SAMPLES as u64;
        let mut spent_ns = 0u64;
        let mut planned = planned;
        let mut estimated = false;
        let traced = crate::trace::events_here();
        for i in 0..count {
            if self.stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            if budget_ns.is_some_and(|b| spent_ns >= b) && i >= min {
                planned = i * batch;
                break;
            }
            let k = if i + 1 == count { batch + rest } else { batch };
            op(Phase::Before)?;
            let ns = timed(k, &mut op)?;
            if self.stop.load(Ordering::Relaxed) {
                // Stopped during the sample, which may have ended early: not kept.
                interrupted = true;
                break;
            }
            op(Phase::After { k, ns })?;
            spent_ns += ns;
            // A sample of batch + rest transfers counts at its own rate, as a batch's time.
            samples.secs.push(ns as f64 * 1e-9 * batch as f64 / k as f64);
            samples.extra = k - batch;
            if !estimated && (i + 1 >= min.min(count) || spent_ns >= ESTIMATE_AFTER_NS) {
                estimated = true;
                let per = spent_ns as f64 / (i + 1) as f64;
                let mut secs = per * count as f64 * 1e-9;
                let mut moved = planned;
                if let Some(b) = budget_ns {
                    let fit = (b as f64 / per).ceil().max(min as f64);
                    if fit < count as f64 {
                        secs = fit * per * 1e-9;
                        moved = fit as u64 * batch;
                    }
                }
                let work = format!(
                    "{} in {} transfers",
                    crate::units::approx_size(moved.saturating_mul(size)),
                    human_size(transfer)
                );
                self.progress.estimate(secs, &work, "--total");
            }
            self.progress.add(size * batch);
            if let Some(h) = self.health {
                // Between samples, untimed: a card that vanished under a BAR mapping (the fault
                // guard turned its SIGBUS into all-ones reads) ends the run now; one atomic load.
                if let Some(why) = h.functions().next().and_then(crate::access::guard::gone) {
                    return Err(Error::Gone(why));
                }
                // A card that stopped answering ends the run now.
                let now = self.clock.now_ns();
                if now.saturating_sub(last_answer) >= ANSWERING_EVERY_NS {
                    last_answer = now;
                    if let Some(why) = h.not_answering() {
                        return Err(Error::Gone(why));
                    }
                }
            }
            if let (Some(h), Some(b)) = (self.health, &before) {
                // Between samples, untimed: a long run notices a change while it happens.
                let now = self.clock.now_ns();
                if now.saturating_sub(last_check) >= HEALTH_EVERY_NS {
                    last_check = now;
                    health_changes = health::changes(b, &h.snapshot());
                }
            }
        }
        if let (Some(h), Some(b)) = (self.health, &before) {
            health_changes = health::changes(b, &h.snapshot());
        }
        let health_changes = self.probed.with_probed(health_changes);
        let traced = crate::trace::events_here() - traced;
        Ok(Sampled {
            samples,
            planned,
            calibration_transfers: calibration,
            interrupted,
            health: health_changes,
            traced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::clock::{FakeClock, MonotonicClock};

    fn sampling<'a>(clock: &'a FakeClock, stop: &'a AtomicBool, moved: &'a mut dyn Progress) -> Sampling<'a> {
        Sampling::new(clock, stop, moved, None)
    }

    #[test]
    fn batches_to_a_hundred_overheads_and_counts_exactly() {
        // Reading the clock costs 20 ns, so a sample must last 2000 ns; a transfer costs 100 ns.
        let clock = FakeClock::new(20, 100, u64::MAX);
        let stop = AtomicBool::new(false);
        let mut bytes = 0;
        let mut moved = |n: u64| bytes += n;
        let mut ran = 0u64;
        let s = sampling(&clock, &stop, &mut moved)
            .run(64, 64 * 1000, |k| {
                ran += k;
                Ok(())
            })
            .unwrap();
        assert_eq!(s.planned, 1000);
        // Warm-up, then a run of 1 (120 ns with the reading), then ceil(2000 / 120 * 1.5) = 25:
        // 25 x 100 ns + 20 ns >= 2000 ns.
        assert_eq!(s.samples.batch, 25);
        assert_eq!(s.calibration_transfers, 1 + 1 + 25);
        assert_eq!(s.samples.secs.len(), 40, "1000 / 25 whole samples");
        assert_eq!(s.measured(), 1000);
        assert_eq!(ran, 27 + 1000);
        assert_eq!(bytes, 1000 * 64);
        // Each sample: 25 transfers (2500 ns) plus one clock reading (20 ns) between the reads.
        assert!(s.samples.secs.iter().all(|t| (t - 2520e-9).abs() < 1e-15), "{:?}", &s.samples.secs[..2]);
    }

    /// Records what a run said it would take, and raises `stop` when it was said.
    #[derive(Default)]
    struct Said<'a>(Vec<(f64, String, String)>, Option<&'a AtomicBool>);

    impl Progress for Said<'_> {
        fn estimate(&mut self, secs: f64, work: &str, flag: &str) {
            self.0.push((secs, work.into(), flag.into()));
            if let Some(stop) = self.1 {
                stop.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Issue 43: without --total a row moves what its calibrated rate moves in the budget, and
    /// every row says beforehand what it will take (the CLI prints it when long).
    #[test]
    fn a_budget_sizes_the_row_by_time_and_the_estimate_comes_first() {
        // As above: batches of 25 transfers take 2520 ns with the reading, 100.8 ns a transfer.
        let clock = FakeClock::new(20, 100, u64::MAX);
        let stop = AtomicBool::new(false);
        let mut said = Said::default();
        let s = sampling(&clock, &stop, &mut said).run_within(64, 64_000_000, Some(1_000_000), |_| Ok(())).unwrap();
        // Samples of 2520 ns until 1 ms is spent: 397 of the 40,000 the bytes allow.
        assert_eq!((s.planned, s.measured(), s.samples.batch), (397 * 25, 397 * 25, 25));
        assert_eq!(said.0.len(), 1);
        let (secs, work, flag) = &said.0[0];
        assert!((secs - 397.0 * 2520e-9).abs() < 1e-12, "{secs}");
        assert_eq!((work.as_str(), flag.as_str()), ("620.3 KiB in 64 B transfers", "--total"));

        // A given total is kept whatever it takes, and said after the first ten samples: 10^6
        // samples of 1000 transfers, 100,020 ns each, about 100 s. (The test stops it there.)
        let raised = AtomicBool::new(false);
        let mut said = Said(Vec::new(), Some(&raised));
        let s = sampling(&clock, &raised, &mut said).run_within(1, 1_000_000_000, None, |_| Ok(())).unwrap();
        assert_eq!((s.planned, s.samples.secs.len()), (1_000_000_000, 10));
        assert!((said.0[0].0 - 100.02).abs() < 1e-6, "{}", said.0[0].0);
        assert_eq!(said.0[0].1, "953.7 MiB in 1 B transfers");

        // A budget never leaves a row with fewer than MIN_SAMPLES samples.
        let mut said = Said::default();
        let s = sampling(&clock, &stop, &mut said).run_within(64, 64_000_000, Some(1), |_| Ok(())).unwrap();
        assert_eq!((s.samples.secs.len(), s.samples.batch), (10, 25));
    }

    #[test]
    fn a_real_clocks_floor_batches_past_a_hundred_overheads() {
        // A reading costs 20 ns (100 overheads: 2 µs) and a transfer 1 µs, but the clock's floor
        // is 100 µs: a timer interrupt must not be able to double a sample. Calibration aims past
        // the floor from one transfer's 1020 ns (with its reading): ceil(1.5 x 100000 / 1020) =
        // 148; 10,000 planned transfers in batches of 148 would leave 84 out, so the batch is the
        // first divisor of 10,000 up to half again as large: 200.
        let clock = FakeClock::new(20, 1000, u64::MAX).with_floor(100_000);
        let stop = AtomicBool::new(false);
        let mut moved = |_| {};
        let s = sampling(&clock, &stop, &mut moved).run(64, 64 * 10_000, |_| Ok(())).unwrap();
        assert_eq!(s.samples.batch, 200);
        assert!(s.samples.secs.iter().all(|t| *t >= 100e-6), "every sample lasts the floor");
        assert_eq!((s.samples.secs.len(), s.measured()), (50, 10_000), "every planned transfer measured");
        // 10,007 is prime: no divisor near 148, so the last sample also moves the 91 left over,
        // its time counted at its own rate; every planned transfer is moved and measured.
        let clock = FakeClock::new(20, 1000, u64::MAX).with_floor(100_000);
        let mut ks = Vec::new();
        let s = sampling(&clock, &stop, &mut moved)
            .run(64, 64 * 10_007, |k| {
                ks.push(k);
                Ok(())
            })
            .unwrap();
        assert_eq!((s.samples.batch, s.samples.secs.len(), s.measured()), (148, 67, 10_007));
        assert_eq!(ks.last(), Some(&(148 + 91)), "the last sample carries the rest");
        let st = s.samples.stats().unwrap();
        assert_eq!((st.transfers, st.bytes), (10_007, 64 * 10_007));
        // Each transfer costs the same 1 µs: the scaled last sample is as fast as the others.
        assert!(st.max_mbps / st.min_mbps < 1.01, "{st:?}");
        assert_eq!(MonotonicClock.sample_floor_ns(), crate::bench::sample::clock::SAMPLE_FLOOR_NS);
    }

    #[test]
    fn fewer_transfers_than_a_batch_make_one_short_sample() {
        let clock = FakeClock::new(20, 100, u64::MAX);
        let stop = AtomicBool::new(false);
        let mut moved = |_| {};
        let s = sampling(&clock, &stop, &mut moved).run(4096, 16 * 4096, |_| Ok(())).unwrap();
        assert_eq!((s.samples.batch, s.samples.secs.len(), s.measured()), (16, 1, 16));
    }

    #[test]
    fn single_samples_are_one_access_each_less_the_shell() {
        // A reading costs 7 ns; each access costs what the script says (the op advances the
        // fake clock), plus the cost model's 3 ns per transfer and 64 B at 64 B/us (1000 ns).
        let clock = FakeClock::new(7, 3, 64);
        let stop = AtomicBool::new(false);
        let mut moved = 0u64;
        let mut count = |n: u64| moved += n;
        let mut s = sampling(&clock, &stop, &mut count);
        assert_eq!(s.shell_overhead_ns(), 7, "an empty sample: one reading's cost");
        let script = [10u64, 20, 30, 40, 1000];
        let mut i = 0;
        let calls = std::cell::Cell::new(0);
        let r = s
            .single(3, 10, 64, || {
                calls.set(calls.get() + 1);
                if calls.get() > 3 {
                    clock.advance(script[i % script.len()]);
                    i += 1;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!((r.warmup, r.overhead_ns, r.interrupted, calls.get()), (3, 7, false, 13));
        let f = r.hist.summary().unwrap();
        // Each sample: the scripted cost + 3 + 1000 (the model), never batched.
        assert_eq!(f.samples, 10);
        assert_eq!((f.min, f.max), (1013, 2003));
        assert_eq!(f.p50, r.hist.bucket(1033).1, "rank 5 of 10: the third-cheapest twice over");
        assert_eq!(moved, 640, "progress counted every access");
        // The samples' time: the accesses and the one reading that ends each.
        assert_eq!(r.elapsed_ns, 2 * (1013 + 1023 + 1033 + 1043 + 2003) + 10 * 7);
    }

    #[test]
    fn single_honours_the_stop_flag_and_errors() {
        let clock = FakeClock::new(1, 0, u64::MAX);
        let stop = AtomicBool::new(false);
        let mut moved = |_| {};
        let mut s = sampling(&clock, &stop, &mut moved);
        let mut n = 0;
        let r = s
            .single(2, 100, 4, || {
                n += 1;
                if n == 6 {
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
        assert!(r.interrupted);
        assert_eq!((r.warmup, r.hist.len()), (2, 4), "two warm-up calls, then samples until the flag");
        let stop = AtomicBool::new(false);
        let mut s = sampling(&clock, &stop, &mut moved);
        let e = s.single(0, 5, 4, || Err(Error::Device("gone".into()))).unwrap_err();
        assert_eq!(e.to_string(), "gone");
    }

    #[test]
    fn totals_are_checked_before_anything_runs() {
        assert!(check_total(64 << 20, &[4096, 1 << 20]).is_ok());
        let e = check_total(0, &[4096]).unwrap_err().to_string();
        assert!(e.contains("--total is 0"), "{e}");
        let e = check_total(64 << 10, &[8, 1 << 20]).unwrap_err().to_string();
        assert!(e.contains("less than one 1 MiB transfer") && e.contains("at least 1 MiB"), "{e}");
        let e = check_total(0x0100_0000_0000_0000, &[1 << 20]).unwrap_err().to_string();
        assert!(e.contains("more than pcibench moves"), "{e}");
        let e = check_total(1 << 48, &[1]).unwrap_err().to_string();
        assert!(e.contains("more than pcibench counts"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn samples_are_bounded_and_stop_is_honoured() {
        let clock = FakeClock::new(1, 1000, u64::MAX);
        let stop = AtomicBool::new(false);
        let mut moved = |_| {};
        let s = sampling(&clock, &stop, &mut moved).run(1, 3 * MAX_SAMPLES, |_| Ok(())).unwrap();
        assert_eq!(s.samples.batch, 3);
        assert_eq!(s.samples.secs.len() as u64, MAX_SAMPLES);
        let stop = AtomicBool::new(false);
        let mut calls = 0;
        let mut moved = |_| {};
        let s = sampling(&clock, &stop, &mut moved)
            .run(8, 8 * 100, |_| {
                calls += 1;
                if calls == 5 {
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
        assert!(s.interrupted);
        // The third raised the flag during itself: an op may end early once it is raised (a
        // transfer of messages stops between its accesses), so that sample is not kept.
        assert_eq!(s.samples.secs.len(), 2, "warm-up, calibration, two samples (the third raised the flag)");
    }
}
