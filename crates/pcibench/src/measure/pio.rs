//! `pio`'s plan: the BARs (by default every memory BAR that holds no DMA engine's registers),
//! mappings, copy routines the access path can do, and consent to write, resolved against the
//! session's device.

use super::{Hooks, Measuring, PioRequest, Widths};
use crate::bench::pio::{self, PioPlan};
use crate::bench::result::Report;
use crate::bench::sample::clock::MONOTONIC;
use crate::mmio::Width;
use crate::session::Session;
use crate::Result;

/// The plan `r` asks for on `session`'s device, checked before anything runs.
pub fn plan(session: &Session, r: &PioRequest) -> Result<PioPlan> {
    let (widths, strict_width) = match &r.widths {
        Widths::All => (Width::ALL.to_vec(), false),
        Widths::These(w) => (w.clone(), true),
    };
    if r.sizes.contains(&0) {
        return Err(crate::Error::usage("--size 0: a transfer moves at least one byte; give a size such as 4K"));
    }
    session.check_io(r.io)?;
    let widths = pio::widths_for_io(widths, strict_width, r.io)?;
    let bars = match &r.bars {
        None => session.pio_bars(&[])?,
        // The suite found none to measure and says why in its notes.
        Some(b) if b.is_empty() => Vec::new(),
        Some(b) => session.pio_bars(b)?,
    };
    // A BAR named that holds an engine's registers is read only, at the widths it decodes.
    let registers = match &r.bars {
        Some(b) if !b.is_empty() => crate::dma::engines::register_blocks(&session.device.info, session.dev.as_ref())
            .into_iter()
            .filter(|x| bars.contains(&x.bar))
            .collect(),
        _ => Vec::new(),
    };
    let all_maps = r.maps.is_empty();
    Ok(PioPlan {
        bars,
        maps: if all_maps { crate::bench::result::MapMode::ALL.to_vec() } else { r.maps.clone() },
        dirs: r.dirs.clone(),
        widths,
        sizes: r.sizes.clone(),
        total: r.total,
        budget_ns: r
            .row_budget_ms
            .map(|ms| ms * 1_000_000)
            .or(r.total_by_time.then_some(crate::bench::sample::sampler::ROW_BUDGET_NS)),
        offset: r.offset,
        io: r.io,
        allow_write: session.may_write(r.allow_write),
        strict_map: !all_maps,
        strict_width,
        registers,
    })
}

/// The most configurations (rows) one PIO request plans: BARs × mappings × directions × widths ×
/// sizes. Repeating `--bar`, `--map` or `--width` cannot make it more.
pub const MAX_ROWS: usize = 65_536;

pub fn measure(session: &Session, r: &PioRequest, hooks: &mut Hooks) -> Result<Report> {
    let plan = plan(session, r)?;
    let rows = plan.bars.len() * plan.maps.len() * plan.dirs.len() * plan.widths.len() * plan.sizes.len().max(1);
    if rows > MAX_ROWS {
        return Err(crate::Error::usage(format!(
            "that is {rows} configurations (BARs × mappings × directions × widths × sizes): pcibench measures at most {MAX_ROWS} at once; name fewer"
        )));
    }
    let m = Measuring::start(session, &r.common)?;
    // A total given over several configurations: the whole run is estimated first (not traced:
    // the trace holds what the user asked for).
    let probe = plan.budget_ns.is_none() && rows > 1 && session.tracer().is_none();
    m.run_summed(&MONOTONIC, "pio", plan.planned_bytes(), hooks, probe, |s| {
        pio::run(session.dev.as_ref(), &session.device, &plan, s)
    })
}
