//! `dma`'s plan, from the engine's own facts once it is open (its card window and offset, largest
//! transfer, batches, queues): the directions, sizes, total and access pattern. One rule gives the
//! transfer size when none is asked for (`default_size`, in the runner), whichever command asks.

use super::{CompletionMode, DefaultSize, DmaDirs, DmaPattern, DmaRequest, Hooks, Measuring};
use crate::bench::dma::layout::Access;
use crate::bench::dma::{self, default_size, DmaPlan, DmaSetup};
use crate::bench::latency::dma::DEFAULT_SIZES;
use crate::bench::latency::row::latency_clock;
use crate::bench::rate::{self, RatePlan, RateRequest};
use crate::bench::result::Report;
use crate::bench::sample::clock::MONOTONIC;
use crate::direction::Direction;
use crate::dma::Engine;
use crate::session::{DmaRig, Session};
use crate::{Error, Result};
use std::time::Duration;

/// The quick look's largest transfer on engines that keep many in flight (`DefaultSize::Quick`).
const QUICK_BATCHED: u64 = 1 << 20;

/// The transfer sizes and total `r` asks for, on `engine` with its window from `card_offset`.
fn sizes_and_total(r: &DmaRequest, engine: &dyn Engine, card_offset: u64) -> (Vec<u64>, u64) {
    if let Some(&first) = r.sizes.first() {
        return (r.sizes.clone(), r.total.unwrap_or_else(|| engine.default_total(first)));
    }
    let window = default_size(engine, card_offset);
    match r.default_size {
        DefaultSize::Window => (vec![window], r.total.unwrap_or_else(|| engine.default_total(window))),
        DefaultSize::Quick => {
            let total = r.total.unwrap_or_else(|| engine.default_total(window));
            let mut size = if engine.max_batch() > 1 { window.min(QUICK_BATCHED) } else { window };
            // A power of two, the size a reader compares with other cards and runs, where the
            // window is the design's (--card-size: the sim card's XDMA window is 0x128000, 1184
            // KiB, so its row is 1 MiB). Not where the device fixes it: edu moves at most 4095
            // bytes a transfer, the size its row shows.
            if size > 0 && engine.card_size_settable() {
                size = 1 << size.ilog2();
            }
            if total < size {
                // A total below one transfer measures transfers of the total, in whole pages.
                size = (total & !0xfff).max(total.min(4096));
            }
            (vec![size], total)
        }
    }
}

/// The plan `r` asks for on the opened engine.
pub fn plan(r: &DmaRequest, rig: &DmaRig, access: Access) -> DmaPlan {
    let (sizes, total) = sizes_and_total(r, rig.engine.as_ref(), rig.card_offset);
    DmaPlan {
        dirs: match r.dirs {
            DmaDirs::H2c => vec![Direction::H2c],
            DmaDirs::C2h => vec![Direction::C2h],
            DmaDirs::Both | DmaDirs::All => vec![Direction::H2c, Direction::C2h],
            DmaDirs::Bidir => vec![],
        },
        bidir: matches!(r.dirs, DmaDirs::Bidir | DmaDirs::All),
        sizes,
        total,
        budget_ns: r
            .row_budget_ms
            .map(|ms| ms * 1_000_000)
            .or(r.total.is_none().then_some(crate::bench::sample::sampler::ROW_BUDGET_NS)),
        card_addr: rig.card_offset,
        timeout: Duration::from_millis(r.timeout_ms),
        queues: r.queues.clone(),
        access,
        completions: r.completion.map(|c| c.completions()).unwrap_or_default(),
    }
}

/// The most rows one DMA request plans (directions × sizes × queue counts), as for PIO.
pub const MAX_ROWS: usize = super::pio::MAX_ROWS;

pub fn measure(session: &Session, r: &DmaRequest, hooks: &mut Hooks) -> Result<Report> {
    if let Some(k) = &r.soak {
        return super::soak::measure(session, r, k, hooks);
    }
    if let Some(rate) = &r.rate {
        return measure_rate(session, r, rate, hooks);
    }
    let dirs = match r.dirs {
        DmaDirs::H2c | DmaDirs::C2h | DmaDirs::Bidir => 1,
        DmaDirs::Both => 2,
        DmaDirs::All => 4,
    };
    let ways = r.completion.map_or(1, |c| c.completions().len());
    let rows = dirs * r.sizes.len().max(1) * r.queues.len().max(1) * ways;
    if rows > MAX_ROWS {
        return Err(Error::usage(format!(
            "that is {rows} configurations (directions × sizes × queue counts): pcibench measures at most {MAX_ROWS} at once; name fewer"
        )));
    }
    session.check_dma_consent(r.allow_dma)?;
    // Everything the engine does not decide is checked before it is opened.
    if r.window.is_some() && r.pattern != DmaPattern::Random {
        return Err(Error::usage("--window applies to --pattern random"));
    }
    let (access, window_note) = match r.pattern {
        DmaPattern::Seq => (Access::Sequential, None),
        DmaPattern::Random => {
            let (window, note) = dma::random_window(&session.host, r.window)?;
            (Access::Random { window }, note)
        }
    };
    let mut rig = session.open_dma(&r.engine, r.queues.iter().copied().max())?;
    let plan = plan(r, &rig, access);
    dma::check(rig.engine.as_ref(), &plan)?;
    // The vectors the engine signals on, of the kind asked for (`--irq-kind`) or the best the
    // function offers (`--completion`).
    let irq = match r.completion {
        Some(c) if c != CompletionMode::Poll => {
            Some(super::completion::route(session, rig.engine.as_ref(), r.irq_kind)?)
        }
        _ => None,
    };
    let out = run(session, r, hooks, &mut rig, irq.as_deref(), &plan, window_note);
    // The engine first (it puts its interrupt enables back as found), then the routing.
    drop(rig);
    drop(irq);
    out
}

fn run(
    session: &Session,
    r: &DmaRequest,
    hooks: &mut Hooks,
    rig: &mut DmaRig,
    irq: Option<&dyn crate::access::Interrupts>,
    plan: &DmaPlan,
    window_note: Option<String>,
) -> Result<Report> {
    let m = Measuring::start(session, &r.common)?;
    // Each configuration once per way of seeing completion (`--completion both`: two rows).
    let ways = plan.completions.len().max(1);
    let rows = (plan.dirs.len() + 2 * plan.bidir as usize) * plan.sizes.len().max(1) * plan.queues.len().max(1) * ways;
    // A total given over several configurations: the whole run is estimated first (not traced).
    let probe = plan.budget_ns.is_none() && rows > 1 && session.tracer().is_none();
    let mut report = m.run_summed(&MONOTONIC, "dma", plan.total.saturating_mul(rows as u64), hooks, probe, |s| {
        let setup = DmaSetup {
            dev: session.dev.as_ref(),
            device: &session.device,
            engine: rig.engine.as_mut(),
            alloc: rig.alloc.as_ref(),
            irq,
        };
        dma::run(setup, plan, s)
    })?;
    report.warnings.extend(window_note);
    report.interrupts = irq.map(|i| super::completion::describe(i, &r.engine));
    Ok(report)
}

/// `dma --rate`: open loop at offered rates (`bench::rate`), small transfers by default (64 B to
/// 4 KiB, as latency), timed with the latency clock (the invariant TSC where there is one).
fn measure_rate(session: &Session, r: &DmaRequest, rate: &RateRequest, hooks: &mut Hooks) -> Result<Report> {
    let dirs = match r.dirs {
        DmaDirs::H2c => vec![Direction::H2c],
        DmaDirs::C2h => vec![Direction::C2h],
        DmaDirs::Both => vec![Direction::H2c, Direction::C2h],
        DmaDirs::Bidir | DmaDirs::All => {
            return Err(Error::usage("--rate offers one direction at a time: use --dir h2c, c2h or both"))
        }
    };
    if r.pattern != DmaPattern::Seq || r.window.is_some() {
        return Err(Error::usage(
            "--rate posts each queue's one transfer again and again: drop --pattern random and --window",
        ));
    }
    // The open loop reaps completions by polling: asked for interrupts, it would measure
    // something else than asked (issue 50 item 10), so it says so, as `latency --dma --rate` does.
    if r.completion.is_some_and(|c| c != CompletionMode::Poll) {
        return Err(Error::usage(
            "--rate reaps completions by polling: drop --completion irq|both (or drop --rate to time completion by \
             interrupt one run at a time)",
        ));
    }
    let curves = dirs.len() * r.sizes.len().max(DEFAULT_SIZES.len()) * r.queues.len().max(1);
    if curves > MAX_ROWS {
        return Err(Error::usage(format!(
            "that is {curves} curves (directions × sizes × queue counts): pcibench measures at most {MAX_ROWS} at once; name fewer"
        )));
    }
    session.check_dma_consent(r.allow_dma)?;
    let mut rig = session.open_dma(&r.engine, r.queues.iter().copied().max())?;
    let sizes = if r.sizes.is_empty() {
        let most = default_size(rig.engine.as_ref(), rig.card_offset);
        let mut v: Vec<u64> = DEFAULT_SIZES.iter().map(|s| (*s).min(most)).collect();
        v.dedup();
        v
    } else {
        r.sizes.clone()
    };
    let plan = RatePlan {
        dirs,
        sizes,
        queues: if r.queues.is_empty() { vec![1] } else { r.queues.clone() },
        rate: rate.clone(),
        transfers: None,
        total: r.total,
        card_addr: rig.card_offset,
        timeout: Duration::from_millis(r.timeout_ms),
    };
    let mut m = Measuring::start(session, &r.common)?;
    let clock = latency_clock(m.context.tsc_invariant);
    m.context.clock = clock.name();
    let setup = DmaSetup {
        dev: session.dev.as_ref(),
        device: &session.device,
        engine: rig.engine.as_mut(),
        alloc: rig.alloc.as_ref(),
        irq: None,
    };
    m.run(clock.as_ref(), "dma", 0, hooks, |s| rate::run(setup, &plan, s))
}
