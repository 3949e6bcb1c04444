//! `latency`'s plan: the BAR and widths of the MMIO reads, consent to write, and, with an engine,
//! DMA latency (polling, and MSI where the path delivers it) and the reads under DMA load; its
//! clock is the invariant TSC where the CPU has one.

use super::{Hooks, LatencyRequest, Measuring, Widths};
use crate::bench::latency::dma::DmaLatency;
use crate::bench::latency::load::LoadPlan;
use crate::bench::latency::row::latency_clock;
use crate::bench::latency::{self, LatencyPlan, LatencyTarget, ALL_WIDTHS, DEFAULT_WIDTH};
use crate::bench::result::Report;
use crate::dma::{DmaAllocator, Engine};
use crate::session::Session;
use crate::{Error, Result};

/// The access widths `latency --width all` measures (the CLI's help lists them from here).
pub const WIDTHS: [crate::mmio::Width; 5] = ALL_WIDTHS;
use std::time::Duration;

/// The plan `r` asks for; `card_addr` is where the engine's window starts (0 without one).
pub fn plan(session: &Session, r: &LatencyRequest, card_addr: u64) -> Result<LatencyPlan> {
    let (widths, strict_width) = match &r.widths {
        None => (vec![DEFAULT_WIDTH], true),
        Some(Widths::All) => (ALL_WIDTHS.to_vec(), false),
        Some(Widths::These(w)) => (w.clone(), true),
    };
    let timeout = Duration::from_millis(r.timeout_ms);
    Ok(LatencyPlan {
        bar: match r.bar {
            Some(b) => b,
            None => session.first_memory_bar()?,
        },
        offset: r.offset,
        allow_write: session.may_write(r.allow_write),
        samples: r.samples,
        budget_ns: r.samples_by_time.then_some(crate::bench::sample::sampler::ROW_BUDGET_NS),
        warmup: r.warmup,
        dma: r.dma.as_ref().map(|d| DmaLatency {
            dirs: d.dirs.clone(),
            sizes: d.sizes.clone(),
            completions: d.mode().completions(),
            samples: d.samples,
            card_addr,
            timeout,
            rate: d.rate.clone(),
        }),
        load: r.load.as_ref().map(|l| LoadPlan {
            modes: l.modes.clone(),
            width: latency::load_width(&widths),
            size: l.size,
            cpu: l.cpu,
            rate: l.rate,
            card_addr,
            timeout,
        }),
        widths,
        strict_width,
    })
}

/// The most samples of one MMIO row (and warm-up accesses): some 10 s at 10 ns an access, hours
/// on a slow device; beyond it a run would not end in any useful time.
pub const MAX_SAMPLES: u64 = 1_000_000_000;
/// The most samples of one DMA latency row (each a whole transfer, microseconds apiece).
pub const MAX_DMA_SAMPLES: u64 = 10_000_000;

/// Every count the request gives, against its cap, before anything is opened.
pub fn check_counts(r: &LatencyRequest) -> Result<()> {
    let over = |flag: &str, n: u64, max: u64| {
        Err(Error::usage(format!("{flag} {n} is more than pcibench takes ({max}): give at most {max}")))
    };
    if r.samples == 0 {
        return Err(Error::usage("--samples 0: give at least one sample"));
    }
    if r.samples > MAX_SAMPLES {
        return over("--samples", r.samples, MAX_SAMPLES);
    }
    if let Some(w) = r.warmup.filter(|w| *w > MAX_SAMPLES) {
        return over("--warmup", w, MAX_SAMPLES);
    }
    match r.dma.as_ref().and_then(|d| d.samples) {
        Some(0) => Err(Error::usage("--dma-samples 0: give at least one sample")),
        Some(n) if n > MAX_DMA_SAMPLES => over("--dma-samples", n, MAX_DMA_SAMPLES),
        _ => Ok(()),
    }
}

pub fn measure(session: &Session, r: &LatencyRequest, hooks: &mut Hooks) -> Result<Report> {
    check_counts(r)?;
    let dma = r.dma.is_some() || r.load.is_some();
    if dma {
        // Consent before anything touches the device: routing the interrupt enables MSI.
        session.check_dma_consent(r.allow_dma)?;
    }
    let mut rig = None;
    if dma {
        let option = if r.dma.is_some() { "--dma" } else { "--load" };
        rig = Some(session.open_dma_for(option, &r.engine)?);
    }
    // The vectors the engine signals on, of the kind asked for (`--irq-kind`) or the best the
    // function offers.
    let irq = match (&rig, &r.dma) {
        (Some(g), Some(d)) if d.mode() != super::CompletionMode::Poll => {
            Some(super::completion::route(session, g.engine.as_ref(), d.irq_kind)?)
        }
        _ => None,
    };
    let out = run(session, r, hooks, rig.as_mut(), irq.as_deref());
    // The engine first (it puts its interrupt enables back as found), then the routing.
    drop(rig);
    drop(irq);
    out
}

fn run(
    session: &Session,
    r: &LatencyRequest,
    hooks: &mut Hooks,
    rig: Option<&mut crate::session::DmaRig>,
    irq: Option<&dyn crate::access::Interrupts>,
) -> Result<Report> {
    let plan = plan(session, r, rig.as_ref().map_or(0, |g| g.card_offset))?;
    let mut m = Measuring::start(session, &r.common)?;
    let clock = latency_clock(m.context.tsc_invariant);
    m.context.clock = clock.name();
    // Bytes read per row, for the progress bar's length (DMA rows are not counted).
    let rows = plan.widths.len() as u64 * (1 + plan.allow_write as u64)
        + plan.load.as_ref().map_or(0, |l| l.modes.len() as u64);
    let engine: Option<(&mut dyn Engine, &dyn DmaAllocator)> = match rig {
        Some(g) => Some((g.engine.as_mut(), g.alloc.as_ref())),
        None => None,
    };
    let t = LatencyTarget { dev: session.dev.as_ref(), device: &session.device, engine, irq };
    let mut report =
        m.run(clock.as_ref(), "latency", r.samples.saturating_mul(4).saturating_mul(rows), hooks, |s| {
            latency::run(t, &plan, s)
        })?;
    report.interrupts = irq.map(|i| super::completion::describe(i, &r.engine));
    Ok(report)
}
