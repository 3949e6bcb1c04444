//! `pcibench run`: the suite on one device. Info, then PIO on every BAR that holds no engine's
//! registers (reads only without consent to write), then DMA with the engine found on the card
//! (with consent). On a simulated card everything runs; its figures are host-memory figures.

use crate::bench::context::Placement;
use crate::bench::dma::{self, DmaPlan, DmaSetup};
use crate::bench::pio::{self, MapMode, PioPlan, PioTarget};
use crate::bench::result::Report;
use crate::bench::sample::clock::Clock;
use crate::bench::sample::sampler::{Progress, Sampling};
use crate::bench::sample::timer::TimerOverhead;
use crate::direction::Direction;
use crate::dma::engines::Detected;
use crate::host::Host;
use crate::mmio::{self, Width};
use crate::pci::DeviceInfo;
use crate::session::{DmaRequest, Measuring, Session};
use crate::target::Target;
use crate::Result;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What the suite may do.
#[derive(Debug, Clone, Default)]
pub struct SuiteOptions {
    /// Host-to-card PIO writes on a real device.
    pub allow_write: bool,
    /// DMA on a real device.
    pub allow_dma: bool,
    /// Bytes per configuration (default: 64M on a simulated card, 4M on a real device for PIO,
    /// the engine's own default for DMA).
    pub total: Option<u64>,
    /// Where the measuring thread runs.
    pub placement: Placement,
    /// The command line, for the reports' context.
    pub args: Vec<String>,
}

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

/// The widest plain SIMD routine this CPU has, for the suite's PIO rows.
fn widest() -> Width {
    [Width::V512, Width::V256, Width::V128].into_iter().find(|w| mmio::available(*w).is_ok()).unwrap_or(Width::B64)
}

/// How the suite's parts are timed: the clock and its overhead, the stop flag, progress.
struct Timing<'a> {
    clock: &'a dyn Clock,
    overhead: TimerOverhead,
    stop: &'a AtomicBool,
}

/// Run the suite; `stop` ends it early (what was measured is kept).
pub fn run(
    host: &Host,
    target: &Target,
    opts: &SuiteOptions,
    clock: &dyn Clock,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<SuiteReport> {
    let session = Session::open(host, target, None)?;
    let info = session.info.clone();
    let engines: Vec<Detected> =
        crate::dma::engines::detect(&info, session.dev.as_ref()).into_iter().flatten().collect();
    let mut report = SuiteReport { info, engines, pio: None, dma: None, notes: Vec::new() };
    let timing = Timing { clock, overhead: TimerOverhead::measure(clock), stop };
    // DMA comes after PIO here: a no-IOMMU device keeps what opening its buffers needs until then.
    let dma_to_come = opts.allow_dma && !report.engines.is_empty();
    let m = if dma_to_come {
        session.measuring_before_dma(opts.placement, &opts.args)?
    } else {
        session.measuring(opts.placement, &opts.args)?
    };
    let pio_report = pio_part(&session, opts, &m, &timing, progress, &mut report.notes)?;
    let stopped = pio_report.interrupted;
    report.pio = Some(pio_report);
    if stopped {
        return Ok(report);
    }
    let simulated = session.info.simulated;
    match report.engines.first() {
        None => report.notes.push(format!(
            "DMA skipped: no DMA engine pcibench drives was found on {} ({})",
            session.info.address,
            session.info.ids()
        )),
        Some(_) if !opts.allow_dma && !simulated => {
            report.notes.push("DMA skipped: add --allow-dma to let the card's engine read and write host memory".into())
        }
        Some(found) => {
            let engine = found.engine.to_string();
            report.dma = Some(dma_part(&session, &engine, opts, &m, &timing, progress)?);
        }
    }
    Ok(report)
}

/// PIO on every BAR that holds no engine's registers, reads only without consent to write.
fn pio_part(
    session: &Session,
    opts: &SuiteOptions,
    m: &Measuring,
    timing: &Timing,
    progress: &mut dyn Progress,
    notes: &mut Vec<String>,
) -> Result<Report> {
    let simulated = session.info.simulated;
    let allow_write = session.may_write(opts.allow_write);
    let bars = match session.pio_bars(&[]) {
        Ok(b) => b,
        Err(crate::Error::NothingToMeasure(why)) => {
            notes.push(format!("PIO skipped: {why}"));
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let plan = PioPlan {
        bars,
        maps: MapMode::ALL.to_vec(),
        dirs: if allow_write { vec![Direction::H2c, Direction::C2h] } else { vec![Direction::C2h] },
        widths: vec![Width::B64, widest(), Width::Memcpy],
        sizes: Vec::new(),
        total: opts.total.unwrap_or(if simulated { 64 << 20 } else { 4 << 20 }),
        offset: 0,
        io: crate::access::IoMode::Mmap,
        allow_write,
        strict_map: false,
        strict_width: false,
    };
    if !allow_write {
        notes.push("PIO reads only: add --allow-write to measure and verify host-to-card writes".into());
    }
    progress.begin("pio", plan.planned_bytes());
    let t = PioTarget {
        dev: session.dev.as_ref(),
        device: &session.info.address,
        simulated,
        link: m.link,
        bar_sizes: session.bar_sizes(),
    };
    let (clock, overhead, stop) = (timing.clock, timing.overhead, timing.stop);
    let mut sampling = Sampling { clock, overhead, stop, progress: &mut *progress, health: m.health.as_ref() };
    let mut report = pio::run(&t, &plan, &mut sampling)?;
    progress.end();
    m.finish(&mut report);
    Ok(report)
}

/// DMA both ways with the engine found on the card.
fn dma_part(
    session: &Session,
    engine: &str,
    opts: &SuiteOptions,
    m: &Measuring,
    timing: &Timing,
    progress: &mut dyn Progress,
) -> Result<Report> {
    let simulated = session.info.simulated;
    let req = DmaRequest { engine: Some(engine.to_string()), ..DmaRequest::default() };
    let mut rig = session.open_dma(&req)?;
    let size = rig.engine.card_size().min(rig.engine.max_transfer());
    let total = match opts.total {
        Some(t) => t,
        None if simulated => 64 << 20,
        None => rig.engine.default_total(size),
    };
    // Engines that keep many transfers in flight are measured at 1 MiB transfers (their whole
    // window would be a handful of samples); the others over their whole window.
    let room = rig.engine.card_size().saturating_sub(rig.card_offset);
    let mut sizes = if rig.engine.max_batch() > 1 { vec![room.min(1 << 20)] } else { Vec::new() };
    // A --total below one such transfer measures transfers of --total (whole 4 KiB pages).
    let one = sizes.first().copied().unwrap_or(size);
    if total < one {
        sizes = vec![(total & !0xfff).max(total.min(4096))];
    }
    let plan = DmaPlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        bidir: false,
        sizes,
        total,
        card_addr: rig.card_offset,
        timeout: Duration::from_secs(2),
        queues: Vec::new(),
        access: crate::bench::dma::layout::Access::Sequential,
    };
    progress.begin("dma", total.saturating_mul(2));
    let setup = DmaSetup {
        dev: session.dev.as_ref(),
        device: &session.info.address,
        simulated,
        link: m.link,
        engine: rig.engine.as_mut(),
        alloc: rig.alloc.as_ref(),
    };
    let (clock, overhead, stop) = (timing.clock, timing.overhead, timing.stop);
    let mut sampling = Sampling { clock, overhead, stop, progress: &mut *progress, health: m.health.as_ref() };
    let mut report = dma::run(setup, &plan, &mut sampling)?;
    progress.end();
    m.finish(&mut report);
    Ok(report)
}
