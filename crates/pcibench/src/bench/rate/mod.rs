//! Latency under offered load (`--rate` on `dma` and `latency --dma`): per direction × size ×
//! queue count, transfers submitted open loop at each offered rate (`open_loop`), a row per
//! rate with what was achieved and the latency from each transfer's due time, its data verified.
//! `--rate sweep` first times the closed loop (one transfer per queue, each waited for), then
//! offers from 5% of that rate upwards until the p99 passes `--until-p99` or throughput stops
//! rising: the latency-throughput curve with its knee (seed 004's DMA-latency tables).

pub mod open_loop;
pub mod spec;

use self::open_loop::{EngineSubmit, OpenLoop, Schedule};
pub use self::spec::{parse_latency, Rate, Rates};
use super::dma::verify;
use super::dma::{put, timed_run, DmaSetup};
use super::latency::row::histogram_figures;
use super::pattern::Pattern;
use super::result::{Completion, Kind, LatencyFigures, Note, Probe, RateFigures, Report, Row, Verify};
use super::sample::clock::Clock;
use super::sample::sampler::{Progress, Sampling};
use crate::access::BusMaster;
use crate::direction::Direction;
use crate::dma::{DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::units::human_size;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// `--until-p99` when none is given: 100 µs, some 60 times seed 004's idle DMA latency.
pub const DEFAULT_UNTIL_P99_NS: u64 = 100_000;
/// Transfers per row at most when none is asked for.
pub const DEFAULT_TRANSFERS: u64 = 20_000;
/// A row's schedule lasts about this long when the transfers are not given (fewer transfers at
/// low rates), but holds at least `MIN_TRANSFERS` where that takes under 2 s.
const ROW_SCHEDULE_S: f64 = 0.2;
const MIN_TRANSFERS: f64 = 100.0;
/// The sweep's steps, as fractions of the closed loop's rate; past the last it goes on by
/// half again each step until it stops (at most `MAX_STEPS` rows).
const SWEEP: [f64; 8] = [0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25];
const MAX_STEPS: usize = 24;
/// Throughput "stops rising" when a step gains less than this over the one before.
const RISING: f64 = 1.02;
/// Transfers the loop's own cost is measured over.
const LOOP_COST_TRANSFERS: u64 = 20_000;

/// What the user asked of the open loop (plain data: part of a request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateRequest {
    pub rates: Rates,
    /// The sweep stops once a row's p99 passes this (None: 100 µs).
    pub until_p99_ns: Option<u64>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RatePlan {
    pub dirs: Vec<Direction>,
    /// Checked against the engine by the caller.
    pub sizes: Vec<u64>,
    /// Queue counts (each at most the engine's).
    pub queues: Vec<u16>,
    pub rate: RateRequest,
    /// Transfers per row (None: about 0.2 s of schedule, at most `DEFAULT_TRANSFERS`).
    pub transfers: Option<u64>,
    /// Or bytes per row (`dma --total`), turned into transfers per size.
    pub total: Option<u64>,
    pub card_addr: u64,
    pub timeout: Duration,
}

/// `dma --rate`: the report of every curve on the device `s` opened, Bus Master on meanwhile.
pub fn run(s: DmaSetup, plan: &RatePlan, sampling: &mut Sampling) -> Result<Report> {
    let most_q = plan.queues.iter().copied().max().unwrap_or(1) as u64;
    let extent = plan.sizes.iter().copied().max().unwrap_or(0).saturating_mul(most_q);
    s.dev.populate_card_memory(plan.card_addr, extent);
    let _bm = BusMaster::enable(s.dev)?;
    let simulated = s.device.simulated();
    let mut report = Report::new(Kind::Dma, s.device.name(), simulated, s.dev.via(), sampling.overhead.median_s * 1e9);
    report.engine = Some(s.engine.name().into());
    let engine = s.engine;
    // A panic mid-run must not leave the engine moving data into buffers about to be freed.
    let measured = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rows(&mut *engine, s.alloc, plan, sampling.clock, sampling.stop, &mut *sampling.progress, &mut report)
    }));
    match measured {
        Ok(Ok(rows)) => {
            report.interrupted |= rows.iter().any(|r| r.notes.iter().any(|n| matches!(n, Note::Interrupted { .. })));
            report.results = rows;
            Ok(report)
        }
        Ok(Err(e)) => Err(e),
        Err(panic) => {
            let _ = engine.stop();
            std::panic::resume_unwind(panic)
        }
    }
}

/// Every row of the plan, with `report` told the buffer, the engine's limits and the host's.
/// The run's time is known before it starts (each row's transfers over its rate; a sweep's
/// rates from each curve's closed loop, timed first): it goes to `progress` at once.
pub fn rows(
    engine: &mut dyn Engine,
    alloc: &dyn DmaAllocator,
    plan: &RatePlan,
    clock: &dyn Clock,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
    report: &mut Report,
) -> Result<Vec<Row>> {
    if engine.stream_end().is_some() {
        // The open loop posts a prepared transfer again and again into a memory-mapped ring and
        // verifies against card memory; stream queues post receive buffers and completion-ring
        // entries per packet, which it does not drive.
        return Err(Error::usage(format!(
            "--rate offers load on memory-mapped queues: the {} engine drives stream queues here (their far end makes \
             and checks the data); drop --rate to time them one transfer at a time",
            engine.name()
        )));
    }
    let most_q = plan.queues.iter().copied().max().unwrap_or(1);
    let largest = plan.sizes.iter().copied().max().unwrap_or(0);
    check(engine, plan, most_q, largest)?;
    // Room for the card's guarded tail too: the read-back of an H2C curve takes it.
    let len = (largest * most_q as u64).max(4096) as usize + super::dma::verify::TAIL as usize;
    let mut bufs = [alloc.alloc(len)?, alloc.alloc(len)?];
    report.addressing = Some(bufs[0].addressing());
    report.buffer = Some(bufs[0].describe());
    let loop_ns = open_loop::loop_cost_ns(clock, LOOP_COST_TRANSFERS)?;
    if !engine.posts() {
        report.warnings.push(format!(
            "the {} engine runs one transfer at a time (pcibench cannot post the next before the last completed): \
             the rate it keeps is bounded by its closed loop, and past it each transfer waits for the one before, \
             its latency counting the wait",
            engine.name()
        ));
    }
    let mut pattern = Pattern::fresh();
    let mut curves = Vec::new();
    for &dir in &plan.dirs {
        for &size in &plan.sizes {
            for &queues in &plan.queues {
                pattern = pattern.successor();
                curves.push(Curve { dir, size, queues, pattern, plan, loop_ns, closed: None });
            }
        }
    }
    if plan.rate.rates == Rates::Sweep {
        for c in &mut curves {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                report.interrupted = true;
                return Ok(Vec::new());
            }
            c.ready(engine, &mut bufs)?;
            c.closed = Some(c.closed_loop(engine, clock)?);
        }
    }
    if let Some((secs, work)) = estimate(&curves).filter(|_| progress.estimates()) {
        // The transfers a row counts come from latency's --dma-samples or dma's --total.
        let flag = match (plan.transfers, plan.total) {
            (Some(_), _) => "--dma-samples",
            (None, Some(_)) => "--total",
            (None, None) => "--rate",
        };
        progress.estimate(secs, &work, flag);
    }
    let mut out = Vec::new();
    for c in &curves {
        let stopped = c.measure(engine, &mut bufs, clock, stop, &mut out, &mut report.warnings)?;
        if stopped {
            return Ok(out);
        }
    }
    Ok(out)
}

/// The run's seconds and its work in words: every row's transfers over its offered rate, summed
/// (a sweep's through its step at the closed loop's rate: the steps past it are short, and the
/// lowest rates take most of the time). None when there is no row.
fn estimate(curves: &[Curve]) -> Option<(f64, String)> {
    let mut rows: Vec<(f64, u64, u64, f64)> = Vec::new();
    for c in curves {
        let offered: Vec<f64> = match (&c.plan.rate.rates, c.closed) {
            (Rates::These(v), _) => v.iter().map(|r| r.ops(c.size)).collect(),
            (Rates::Sweep, Some(closed)) => SWEEP.iter().filter(|f| **f <= 1.0).map(|f| f * closed).collect(),
            (Rates::Sweep, None) => Vec::new(),
        };
        for o in offered.into_iter().filter(|o| *o > 0.0) {
            let count = c.count(o);
            rows.push((count as f64 / o, count, c.size, o));
        }
    }
    let secs: f64 = rows.iter().map(|r| r.0).sum();
    let longest = rows.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
    let row = format!("{} transfers of {} at {}", longest.1, human_size(longest.2), ops_words(longest.3));
    let sweep = curves.iter().any(|c| c.closed.is_some());
    Some((
        secs,
        match (rows.len(), sweep) {
            (1, _) => row,
            (_, false) => format!("{} rows, the longest {row}", rows.len()),
            (_, true) => format!(
                "{} swept from 5% to 100% of the closed loop's rate (or past it), the longest row {row}",
                match curves.len() {
                    1 => "1 curve".to_string(),
                    n => format!("{n} curves"),
                }
            ),
        },
    ))
}

fn check(engine: &dyn Engine, plan: &RatePlan, most_q: u16, largest: u64) -> Result<()> {
    if let Some(q) = plan.queues.iter().find(|q| **q == 0 || **q > engine.queues()) {
        return Err(Error::usage(format!(
            "--queues {q} is more than the {} queue(s) the {} engine was opened with",
            engine.queues(),
            engine.name()
        )));
    }
    if plan.sizes.contains(&0) {
        return Err(Error::usage("--size 0: a transfer moves at least one byte; give a size such as 4K"));
    }
    if largest > engine.max_transfer() {
        return Err(Error::usage(format!(
            "transfer size {largest:#x} exceeds what the {} engine takes in one transfer ({:#x})",
            engine.name(),
            engine.max_transfer()
        )));
    }
    if most_q > 1 && !engine.posts() {
        return Err(Error::usage(format!(
            "--rate over several queues needs an engine that posts transfers without waiting (qdma); {} runs one at a time: drop --queues",
            engine.name()
        )));
    }
    if plan.transfers == Some(0) {
        return Err(Error::usage("0 transfers a row: give at least one"));
    }
    let room = engine.card_size().saturating_sub(plan.card_addr);
    if largest.saturating_mul(most_q as u64) > room {
        return Err(Error::usage(format!(
            "--rate gives each of {most_q} queues its own {} of card memory, more than the {room:#x} bytes from card offset {:#x}: use a smaller --size or fewer --queues",
            human_size(largest),
            plan.card_addr
        )));
    }
    Ok(())
}

/// One curve: a direction, a size and a queue count, at each offered rate.
struct Curve<'p> {
    dir: Direction,
    size: u64,
    queues: u16,
    pattern: Pattern,
    plan: &'p RatePlan,
    loop_ns: f64,
    /// Transfers a second its closed loop keeps (a sweep's, timed before any curve runs).
    closed: Option<f64>,
}

/// A curve's data in place: the pattern it moves, where its transfers lie and the guard bytes around them.
struct Ready {
    expected: Vec<u8>,
    layout: super::dma::layout::Layout,
    guards: verify::Guards,
    limit: u64,
}

impl Curve<'_> {
    /// Its rows into `out`; true when stopped.
    fn measure(
        &self,
        engine: &mut dyn Engine,
        bufs: &mut [Box<dyn DmaBuffer>; 2],
        clock: &dyn Clock,
        stop: &AtomicBool,
        out: &mut Vec<Row>,
        warnings: &mut Vec<String>,
    ) -> Result<bool> {
        let Ready { expected, layout: l, guards: g, limit } = self.ready(engine, bufs)?;
        let until = self.plan.rate.until_p99_ns.unwrap_or(DEFAULT_UNTIL_P99_NS);
        let (fixed, sweep) = match (&self.plan.rate.rates, self.closed) {
            (Rates::These(v), _) => (v.iter().map(|r| r.ops(self.size)).collect(), None),
            (Rates::Sweep, Some(closed)) => (Vec::new(), Some(closed)),
            (Rates::Sweep, None) => (Vec::new(), Some(self.closed_loop(engine, clock)?)),
        };
        let mut best = 0.0f64;
        for step in 0.. {
            let offered = match sweep {
                None => match fixed.get(step) {
                    Some(r) => *r,
                    None => break,
                },
                Some(closed) => closed * sweep_step(step),
            };
            let r = self.at(engine, clock, stop, offered)?;
            let mut row = self.row(offered, &r, clock, engine.posts());
            // Part of every open-loop latency on QDMA: the writeback interval (issue 50 item 9).
            row.engine_settings = engine.settings()?;
            let (achieved, p99) = (r.achieved_ops(), row.latency.as_ref().map_or(0.0, |l| l.p99_ns));
            let host = row.rate.as_ref().is_some_and(|f| f.host_limited());
            if host {
                warnings.push(self.host_words(offered, &r));
            }
            out.push(row);
            if r.interrupted {
                return Ok(true);
            }
            if sweep.is_some() && (p99 > until as f64 || achieved < best * RISING || host || step + 1 >= MAX_STEPS) {
                break;
            }
            best = best.max(achieved);
        }
        // The data, once, after the curve (untimed): every transfer moved the same bytes.
        let found = verify::check_part(engine, &mut *bufs[1], self.dir, &l, limit, &expected, &g, self.plan.timeout)?
            .unwrap_or(Ok(()));
        let v = match found {
            Ok(()) => Verify::Ok,
            Err(m) => {
                warnings.push(format!("{} {} at offered rates: {m}", self.dir, human_size(self.size)));
                Verify::Mismatch { mismatch: m }
            }
        };
        let first = out.len()
            - out
                .iter()
                .rev()
                .take_while(|r| r.dir == self.dir && r.size == self.size && r.queues == Some(self.queues))
                .count();
        for row in &mut out[first..] {
            row.verify = Some(v.clone());
        }
        Ok(false)
    }

    /// The curve's data in place (untimed: its pattern in the source, on the card for C2H, the
    /// destination cleared) and one transfer per queue prepared; the pattern and its length.
    fn ready(&self, engine: &mut dyn Engine, bufs: &mut [Box<dyn DmaBuffer>; 2]) -> Result<Ready> {
        let total = (self.size * self.queues as u64) as usize;
        let expected = self.pattern.generate(total);
        let card = self.plan.card_addr;
        // Untimed: the card holds the C2H data and the guard around the H2C transfers, the host
        // destination its guard (dmatest's rule: `bench::dma::verify`).
        let layout = verify::packed(self.size, self.queues, card);
        let guards = verify::Guards::new(self.pattern.seed);
        let limit = engine.card_size();
        let [src, dst] = &mut *bufs;
        let part = [(self.dir, layout.clone())];
        verify::prepare(
            engine,
            &mut **src,
            &mut **dst,
            &part,
            &[limit],
            &[&expected],
            &guards,
            false,
            self.plan.timeout,
        )?;
        put(&mut **src, 0, &expected);
        let buf = if self.dir == Direction::H2c { &*bufs[0] } else { &*bufs[1] };
        let work: Vec<Work> = (0..self.queues)
            .map(|q| {
                let at = q as u64 * self.size;
                Work {
                    buf,
                    t: Transfer { dir: self.dir, buf_offset: at, card_addr: card + at, len: self.size },
                    queue: q,
                }
            })
            .collect();
        engine.prepare_batch(&work)?;
        Ok(Ready { expected, layout, guards, limit })
    }

    /// Transfers a row at `offered` a second: those asked for (`--dma-samples`, or `--total` over
    /// the size), else about `ROW_SCHEDULE_S` of schedule within `MIN_TRANSFERS` and
    /// `DEFAULT_TRANSFERS`.
    fn count(&self, offered: f64) -> u64 {
        let asked = self.plan.transfers.or(self.plan.total.map(|t| (t / self.size).max(1)));
        asked.unwrap_or_else(|| {
            let floor = MIN_TRANSFERS.min(offered * 2.0);
            (offered * ROW_SCHEDULE_S).max(floor).min(DEFAULT_TRANSFERS as f64).max(1.0) as u64
        })
    }

    /// Transfers a second the closed loop keeps: one transfer per queue per run, each run waited
    /// for, for up to 1000 runs or 50 ms (at least one run).
    fn closed_loop(&self, engine: &mut dyn Engine, clock: &dyn Clock) -> Result<f64> {
        let t0 = clock.now_ns();
        let mut runs = 0u64;
        loop {
            timed_run(engine, self.plan.timeout)?;
            clock.did(self.queues as u64, self.size * self.queues as u64);
            runs += 1;
            let t = clock.now_ns() - t0;
            if runs >= 1000 || t >= 50_000_000 {
                return Ok(runs as f64 * self.queues as f64 * 1e9 / t.max(1) as f64);
            }
        }
    }

    /// One open-loop run at `offered` transfers a second.
    fn at(&self, engine: &mut dyn Engine, clock: &dyn Clock, stop: &AtomicBool, offered: f64) -> Result<OpenLoop> {
        let count = self.count(offered);
        let interval_ns = 1e9 / offered;
        let length = count as f64 * interval_ns;
        let s = Schedule {
            count,
            interval_ns,
            // Twice past saturation still posts every transfer; what lags more is dropped.
            // A float cast saturates; so does the sum (a sweep step of 10^10 transfers at 1 a second).
            budget_ns: ((4.0 * length) as u64).saturating_add(self.plan.timeout.as_nanos() as u64),
            timeout: self.plan.timeout,
        };
        let mut sub = EngineSubmit { engine, queues: self.queues, timeout: self.plan.timeout };
        match open_loop::run(&mut sub, clock, &s, stop) {
            Ok(r) => Ok(r),
            Err(e @ Error::Gone(_)) => Err(e),
            Err(e) if engine.posts() => {
                let status = engine.stop().unwrap_or_else(|s| format!("stop failed too: {s}"));
                Err(Error::Device(format!("{e} (engine stopped; status: {status})")))
            }
            Err(e) => Err(e),
        }
    }

    fn row(&self, offered: f64, r: &OpenLoop, clock: &dyn Clock, ahead: bool) -> Row {
        let mut row = Row::new(self.dir, self.size);
        row.probe = Some(Probe::Dma);
        row.completion = Some(Completion::Poll);
        row.queues = Some(self.queues);
        row.latency = Some(figures(r, clock));
        let achieved = r.achieved_ops();
        row.rate = Some(RateFigures {
            offered_ops: offered,
            achieved_ops: achieved,
            achieved_mbps: achieved * self.size as f64 / 1e6,
            scheduled: r.scheduled,
            posted: r.posted,
            completed: r.completed,
            late: r.late,
            worst_lag_ns: r.worst_lag_ns as f64,
            dropped: r.dropped,
            loop_ns: self.loop_ns,
            posted_ahead: ahead,
        });
        let n = r.hist.len();
        if n > 0 && n < super::sample::stats::MIN_SAMPLES as u64 {
            row.notes.push(Note::FewSamples { samples: n as usize });
        }
        if r.interrupted {
            row.notes.push(Note::Interrupted { engine: None });
        }
        row
    }

    /// The host, not the card, as the limit of a row, in words.
    fn host_words(&self, offered: f64, r: &OpenLoop) -> String {
        format!(
            "{} {} x{} at {}: this host did not keep the schedule: {} of {} transfers were posted more than 1 µs late \
             (worst {:.1} µs) while the card had room; their latency includes the host's delay, so the limit of this \
             row is the host (the loop itself costs {:.0} ns a transfer here), not the card",
            self.dir,
            human_size(self.size),
            self.queues,
            ops_words(offered),
            r.late,
            r.posted,
            r.worst_lag_ns as f64 / 1e3,
            self.loop_ns
        )
    }
}

/// The sweep's `step`-th rate as a fraction of the closed loop's.
fn sweep_step(step: usize) -> f64 {
    match SWEEP.get(step) {
        Some(f) => *f,
        None => SWEEP[SWEEP.len() - 1] * 1.5f64.powi((step + 1 - SWEEP.len()) as i32),
    }
}

/// "1.25 M/s", "5 /s".
pub fn ops_words(ops: f64) -> String {
    match ops {
        o if o >= 1e6 => format!("{:.3} M/s", o / 1e6),
        o if o >= 1e3 => format!("{:.3} K/s", o / 1e3),
        o => format!("{o:.2} /s"),
    }
}

/// The row's latency figures from the open loop's histogram (from each due time: nothing of
/// the clock's cost is subtracted, as a due time is not a clock reading).
fn figures(r: &OpenLoop, clock: &dyn Clock) -> LatencyFigures {
    histogram_figures(&r.hist, LatencyFigures { clock: clock.name(), ..Default::default() })
}

#[cfg(test)]
mod tests;
