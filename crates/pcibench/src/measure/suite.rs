//! `pcibench run`: the suite on one device, as a list of requests. Info, then PIO on every BAR
//! that holds no engine's registers (reads only without consent to write), then DMA with the
//! engine found on the card (with consent), each measured as `pio` and `dma` measure it. On a
//! simulated card everything runs; its figures are host-memory figures.

use super::{DefaultSize, DmaDirs, DmaPattern, DmaRequest, Hooks, Measured, PioRequest, Request};
use super::{EngineRequest, RunRequest, Widths};
use crate::access::IoMode;
use crate::bench::result::Report;
use crate::bench::sample::estimate::Said;
use crate::direction::Direction;
use crate::dma::engines::Detected;
use crate::mmio::{self, Width};
use crate::pci::DeviceInfo;
use crate::session::Session;
use crate::{Error, Result};
use serde::Serialize;

/// How long each row of the suite measures on a simulated card when no `--total` is given
/// (issue 52): long enough for hundreds of samples of even its slowest rows (a 1 MiB DMA
/// transfer is 0.5 ms of the model's time), so that no row is `!few` on an idle or a loaded
/// host, and a suite of 38 rows stays at a few seconds.
pub const SIM_ROW_MS: u64 = 80;
/// The most a row moves on a simulated card then (its time ends it long before).
const SIM_ROW_TOTAL: u64 = 4 << 30;

/// Everything the suite found and measured.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteReport {
    pub info: DeviceInfo,
    pub engines: Vec<Detected>,
    pub pio: Option<Report>,
    pub dma: Option<Report>,
    /// Why a part did not run, or ran only in part, in words.
    pub notes: Vec<String>,
}

impl SuiteReport {
    pub fn parts(&self) -> impl Iterator<Item = &Report> {
        self.pio.iter().chain(self.dma.iter())
    }

    pub fn interrupted(&self) -> bool {
        self.parts().any(|r| r.interrupted)
    }
}

/// One part of the suite: what it measures (None: nothing, its notes say why), and the notes
/// that go with it.
pub struct Part {
    pub request: Option<Request>,
    pub notes: Vec<String>,
}

/// The widest plain SIMD routine this CPU has, for the suite's PIO rows.
fn widest() -> Width {
    [Width::V512, Width::V256, Width::V128].into_iter().find(|w| mmio::available(*w).is_ok()).unwrap_or(Width::B64)
}

/// The suite on `session`'s device as requests: PIO, then DMA.
pub fn parts(session: &Session, r: &RunRequest, engines: &[Detected]) -> Result<Vec<Part>> {
    Ok(vec![pio_part(session, r)?, dma_part(session, r, engines)])
}

/// PIO on every BAR that holds no engine's registers, reads only without consent to write, the
/// scalar, widest SIMD and memcpy routines through every mapping.
fn pio_part(session: &Session, r: &RunRequest) -> Result<Part> {
    let mut notes = Vec::new();
    let bars = match session.pio_bars(&[]) {
        Ok(b) => b,
        Err(Error::NothingToMeasure(why)) => {
            notes.push(format!("PIO skipped: {why}"));
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let allow_write = session.may_write(r.allow_write);
    if !allow_write {
        notes.push("PIO reads only: add --allow-write to measure and verify host-to-card writes".into());
    }
    let simulated = session.device.simulated();
    let by_time = simulated && r.total.is_none();
    let request = PioRequest {
        device: session.device.target,
        via: None,
        bars: Some(bars),
        maps: Vec::new(),
        dirs: if allow_write { vec![Direction::H2c, Direction::C2h] } else { vec![Direction::C2h] },
        widths: Widths::These(vec![Width::B64, widest(), Width::Memcpy]),
        sizes: Vec::new(),
        total: r.total.unwrap_or(if simulated { SIM_ROW_TOTAL } else { 4 << 20 }),
        total_by_time: false,
        row_budget_ms: by_time.then_some(SIM_ROW_MS),
        offset: 0,
        io: IoMode::Mmap,
        allow_write: r.allow_write,
        common: r.common.clone(),
    };
    Ok(Part { request: Some(Request::Pio(request)), notes })
}

/// DMA both ways with the engine found on the card, one row per direction.
fn dma_part(session: &Session, r: &RunRequest, engines: &[Detected]) -> Part {
    let device = &session.device;
    let skipped = |why: String| Part { request: None, notes: vec![why] };
    let Some(found) = engines.first() else {
        return skipped(format!(
            "DMA skipped: no DMA engine pcibench drives was found on {} ({})",
            device.name(),
            device.info.ids()
        ));
    };
    if !r.allow_dma && !device.simulated() {
        return skipped("DMA skipped: add --allow-dma to let the card's engine read and write host memory".into());
    }
    let request = DmaRequest {
        device: device.target,
        via: None,
        engine: EngineRequest { engine: Some(found.engine.to_string()), ..EngineRequest::default() },
        dirs: DmaDirs::Both,
        queues: Vec::new(),
        pattern: DmaPattern::Seq,
        window: None,
        sizes: Vec::new(),
        default_size: DefaultSize::Quick,
        total: r.total.or(device.simulated().then_some(SIM_ROW_TOTAL)),
        row_budget_ms: (device.simulated() && r.total.is_none()).then_some(SIM_ROW_MS),
        timeout_ms: 2000,
        allow_dma: r.allow_dma,
        completion: None,
        irq_kind: None,
        rate: None,
        soak: None,
        common: r.common.clone(),
    };
    Part { request: Some(Request::Dma(request)), notes: Vec::new() }
}

/// The rows a part of the suite will measure (PIO: per BAR, mapping, direction and width; DMA:
/// a direction each), for the line said before it runs.
fn rows(session: &Session, q: &Request) -> usize {
    match q {
        Request::Pio(p) => {
            let bars = p.bars.as_ref().map_or_else(|| session.pio_bars(&[]).map_or(0, |b| b.len()), |b| b.len());
            let maps = if p.maps.is_empty() { crate::bench::result::MapMode::ALL.len() } else { p.maps.len() };
            let widths = match &p.widths {
                Widths::These(w) => w.len(),
                _ => 1,
            };
            bars * maps * p.dirs.len() * widths
        }
        Request::Dma(_) => 2,
        _ => 0,
    }
}

/// Run the suite; the stop flag ends it early (what was measured is kept).
pub fn measure(session: &Session, r: &RunRequest, hooks: &mut Hooks) -> Result<SuiteReport> {
    let engines = session.engines();
    let mut report =
        SuiteReport { info: session.device.info.clone(), engines, pio: None, dma: None, notes: Vec::new() };
    let parts = parts(session, r, &report.engines)?;
    if session.device.simulated() && r.total.is_none() {
        let rows: usize = parts.iter().filter_map(|p| p.request.as_ref()).map(|q| rows(session, q)).sum();
        let secs = (rows as u64 * SIM_ROW_MS) as f64 / 1e3;
        hooks.progress.announce(&format!(
            "{}: each of its {rows} rows measures for {SIM_ROW_MS} ms (at least 10 samples), about {secs:.0} s in all; \
             --total sets the bytes per row instead",
            session.device.name()
        ));
    }
    if parts.iter().any(|p| matches!(p.request, Some(Request::Dma(_)))) {
        // DMA comes after PIO: a no-IOMMU device keeps what opening its buffers needs until then.
        session.expect_dma();
    }
    let (mut stopped, mut gone) = (false, false);
    for part in parts {
        report.notes.extend(part.notes);
        let Some(request) = part.request else { continue };
        if stopped {
            // Said in the part's own section, so none is left empty.
            let part = if matches!(request, Request::Dma(_)) { "DMA" } else { "PIO" };
            let why = if gone { "the card stopped answering" } else { "the run was interrupted" };
            report.notes.push(format!("{part} not run: {why} before it"));
            continue;
        }
        // The suite's own totals are seconds a part: no estimate, and no probe pass to make one.
        let measured = if r.total.is_none() {
            let quiet = &mut Said(&mut *hooks.progress);
            session.measure(&request, &mut Hooks { stop: hooks.stop, progress: quiet, trace: hooks.trace })?
        } else {
            session.measure(&request, hooks)?
        };
        let Measured::Report(measured) = measured else { continue };
        // A card that stopped answering ends the suite too (its line is in the part's report).
        gone = measured.gone.is_some();
        stopped = measured.interrupted || gone;
        match request {
            Request::Pio(_) => report.pio = Some(measured),
            _ => report.dma = Some(measured),
        }
    }
    Ok(report)
}
