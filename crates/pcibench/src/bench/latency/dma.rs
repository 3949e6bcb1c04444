//! DMA latency: one small transfer per sample, from the first register write of its submission to
//! the CPU knowing it completed, either by the engine's own polling loop (`Engine::run`) or by
//! sleeping until the device's MSI arrives (`Engine::run_interrupt`, where the engine has a
//! completion interrupt and the access path delivers it). Each row's data is verified after its
//! samples: what the card received read back, what the host received compared in place (on a
//! stream engine: what its far end generates, and its checker's verdict on what it was sent).

use super::super::dma::verify::{self, TAIL};
use super::super::dma::{default_size, interrupt_run, put, timed_run};
use super::super::pattern::Pattern;
use super::super::rate::{self, RatePlan, RateRequest};
use super::super::result::{Completion, Probe, Report, Row, Verify};
use super::super::sample::sampler::{Sampling, ROW_BUDGET_NS};
use super::row::{default_warmup, finish};
use crate::access::Interrupts;
use crate::direction::Direction;
use crate::dma::{DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::units::human_size;
use crate::{Error, Result};
use std::time::Duration;

/// Transfer sizes when none is named: small transfers, 64 B to 4 KiB (an engine that takes less
/// than 4 KiB, as edu, gets its largest instead).
pub const DEFAULT_SIZES: [u64; 4] = [64, 256, 1024, 4096];
/// At most this many samples per row by default (an engine's default total may ask for more).
const MAX_DEFAULT_SAMPLES: u64 = 10_000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct DmaLatency {
    pub dirs: Vec<Direction>,
    /// Sizes named by the user; empty: `DEFAULT_SIZES` within what the engine takes.
    pub sizes: Vec<u64>,
    pub completions: Vec<Completion>,
    /// Samples per row; None: as many as `ROW_BUDGET_NS` takes, at most the engine's default
    /// total over the size and 10000 (edu: 4).
    pub samples: Option<u64>,
    /// Card address of the transfers, as an offset in the engine's window.
    pub card_addr: u64,
    pub timeout: Duration,
    /// Submit open loop at offered rates instead (`--rate`: `bench::rate`).
    pub rate: Option<RateRequest>,
}

/// The samples a row takes by default: as many transfers as the engine's default total holds
/// (slow engines ask for few), at most 10000.
pub fn default_samples(engine: &dyn Engine, size: u64) -> u64 {
    (engine.default_total(size) / size.max(1)).clamp(1, MAX_DEFAULT_SAMPLES)
}

/// The sizes to measure, checked against the engine before anything runs.
fn sizes(engine: &dyn Engine, plan: &DmaLatency) -> Result<Vec<u64>> {
    // The largest transfer here is the default DMA size (the window from the card offset).
    let most = default_size(engine, plan.card_addr);
    if most == 0 {
        return Err(Error::usage(format!(
            "--card-addr {:#x} is outside the {} engine's {:#x} bytes of card memory",
            plan.card_addr,
            engine.name(),
            engine.card_size()
        )));
    }
    if plan.sizes.is_empty() {
        let mut v: Vec<u64> = DEFAULT_SIZES.iter().map(|s| (*s).min(most)).collect();
        v.dedup();
        return Ok(v);
    }
    match plan.sizes.iter().find(|s| **s == 0 || **s > most) {
        Some(s) => Err(Error::usage(format!(
            "--size {s:#x}: the {} engine takes 1 to {most:#x} bytes per transfer from card offset {:#x}",
            engine.name(),
            plan.card_addr
        ))),
        None => Ok(plan.sizes.clone()),
    }
}

/// Check the plan against the engine and the interrupt before anything runs.
fn check(engine: &dyn Engine, irq: Option<&dyn Interrupts>, plan: &DmaLatency) -> Result<()> {
    if plan.completions.contains(&Completion::Irq) {
        if !engine.completes_by_interrupt() {
            return Err(Error::usage(format!(
                "--completion irq: the {} engine completes by polling only (xdma, qdma, umem and edu complete by interrupt): use --completion poll",
                engine.name()
            )));
        }
        if irq.is_none() {
            return Err(Error::usage("--completion irq needs the device's interrupt: none was given to the runner"));
        }
    }
    if plan.samples == Some(0) {
        return Err(Error::usage("--dma-samples 0: give at least one sample"));
    }
    Ok(())
}

/// Every row of the plan, in order: direction, size, completion.
pub(in crate::bench) fn rows(
    engine: &mut dyn Engine,
    alloc: &dyn DmaAllocator,
    irq: Option<&dyn Interrupts>,
    plan: &DmaLatency,
    s: &mut Sampling,
    report: &mut Report,
) -> Result<Vec<Row>> {
    check(engine, irq, plan)?;
    let sizes = sizes(engine, plan)?;
    let most = sizes.iter().copied().max().unwrap_or(4096).max(4096);
    // A stream engine's C2H transfer takes whole receive buffers of the host's memory.
    // Room for the card's guarded tail too: the read-back of an H2C row takes it.
    let len = engine.stream_end().map_or(most, |e| e.c2h_stride(most).max(most)) as usize + TAIL as usize;
    let mut bufs = [alloc.alloc(len)?, alloc.alloc(len)?];
    report.addressing = Some(bufs[0].addressing());
    report.buffer = Some(bufs[0].describe());
    let mut pattern = Pattern::fresh();
    let mut out = Vec::new();
    for &dir in &plan.dirs {
        for &size in &sizes {
            for &c in &plan.completions {
                pattern = pattern.successor();
                let one = One { dir, size, completion: c, pattern, card: plan.card_addr, timeout: plan.timeout };
                let row = match one.measure(engine, &mut bufs, irq, plan, s, &mut report.warnings) {
                    // The card stopped answering: the rows measured before stay in the report.
                    Err(e @ Error::Gone(_)) => {
                        report.results.append(&mut out);
                        return Err(e);
                    }
                    r => r?,
                };
                let stop = row.notes.iter().any(|n| matches!(n, super::super::result::Note::Interrupted { .. }));
                out.push(row);
                if stop {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

/// `--dma --rate`: the same sizes and directions, open loop on one queue at each offered rate,
/// completion seen by polling (an engine's completion interrupt is not armed here yet).
pub(super) fn rate_rows(
    engine: &mut dyn Engine,
    alloc: &dyn DmaAllocator,
    plan: &DmaLatency,
    rate: &RateRequest,
    s: &mut Sampling,
    report: &mut Report,
) -> Result<Vec<Row>> {
    if plan.completions.contains(&Completion::Irq) {
        return Err(Error::usage(
            "--rate reaps completions by polling: drop --completion irq (or drop --rate to time completion by interrupt one transfer at a time)",
        ));
    }
    if plan.samples == Some(0) {
        return Err(Error::usage("--dma-samples 0: give at least one sample"));
    }
    let p = RatePlan {
        dirs: plan.dirs.clone(),
        sizes: sizes(engine, plan)?,
        queues: vec![1],
        rate: rate.clone(),
        transfers: plan.samples,
        total: None,
        card_addr: plan.card_addr,
        timeout: plan.timeout,
    };
    rate::rows(engine, alloc, &p, s.clock, s.stop, &mut *s.progress, report)
}

/// One row: a direction, a size and a way to see completion.
struct One {
    dir: Direction,
    size: u64,
    completion: Completion,
    pattern: Pattern,
    card: u64,
    timeout: Duration,
}

impl One {
    fn measure(
        &self,
        engine: &mut dyn Engine,
        bufs: &mut [Box<dyn DmaBuffer>; 2],
        irq: Option<&dyn Interrupts>,
        plan: &DmaLatency,
        s: &mut Sampling,
        warnings: &mut Vec<String>,
    ) -> Result<Row> {
        let n = self.size as usize;
        // A stream engine has no card memory: its far end generates what C2H brings (every
        // transfer of a size the same bytes) and checks what H2C sends (bench/dma/stream.rs).
        let stream = engine.stream_end().map(|e| e.transfer_bytes(self.size));
        let expected = stream.clone().unwrap_or_else(|| self.pattern.generate(n));
        // The data in place first (untimed): the card holds the pattern before reads of it, the
        // guard around the transfer (H2C), the host destination its guard (C2H; dmatest's rule).
        let l = verify::packed(self.size, 1, self.card);
        let g = verify::Guards::new(self.pattern.seed);
        let (limit, streaming) = (engine.card_size(), stream.is_some());
        let [src, dst] = &mut *bufs;
        let part = [(self.dir, l.clone())];
        verify::prepare(engine, &mut **src, &mut **dst, &part, &[limit], &[&expected], &g, streaming, self.timeout)?;
        put(&mut **src, 0, &expected);
        if let (Direction::H2c, Some(end)) = (self.dir, engine.stream_end()) {
            end.clear_checker()?;
        }
        let (src, dst) = (&*bufs[0], &*bufs[1]);
        let buf = if self.dir == Direction::H2c { src } else { dst };
        engine.prepare(buf, &Transfer { dir: self.dir, buf_offset: 0, card_addr: self.card, len: self.size })?;
        let samples = plan.samples.unwrap_or_else(|| default_samples(engine, self.size));
        let warmup = default_warmup(samples);
        let (timeout, c) = (self.timeout, self.completion);
        let budget = plan.samples.is_none().then_some(ROW_BUDGET_NS);
        let single = s.single_counted(warmup, samples, budget, self.size, "--dma-samples", || match (c, irq) {
            (Completion::Irq, Some(irq)) => interrupt_run(engine, irq, timeout),
            _ => timed_run(engine, timeout),
        })?;
        let mut row = Row::new(self.dir, self.size);
        row.probe = Some(Probe::Dma);
        row.completion = Some(self.completion);
        row.engine_settings = engine.settings()?;
        finish(&mut row, &single, s.clock);
        if single.interrupted {
            return Ok(row);
        }
        if self.dir == Direction::H2c {
            // The far end's checker saw every sample's packets: its verdict is the row's.
            if let Some(v) = super::super::dma::stream::verdict(engine) {
                let v = v?;
                if let Verify::Rejected { reason } = &v {
                    let (size, how) = (human_size(self.size), self.completion.name());
                    warnings.push(format!("{} {size} {how}: {reason}", self.dir));
                }
                row.verify = Some(v);
                return Ok(row);
            }
        }
        let Some(found) = verify::check_part(engine, &mut *bufs[1], self.dir, &l, limit, &expected, &g, self.timeout)?
        else {
            return Ok(row);
        };
        row.verify = Some(match found {
            Ok(()) => Verify::Ok,
            Err(m) => {
                warnings.push(format!("{} {} {}: {m}", self.dir, human_size(self.size), self.completion.name()));
                Verify::Mismatch { mismatch: m }
            }
        });
        Ok(row)
    }
}
