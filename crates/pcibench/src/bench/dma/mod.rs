//! The DMA runner: per direction (or both at once) × size × queue count, timed engine runs
//! between host buffers and card memory, statistics, the link model's limit, the engine's own
//! counters where it has them, and the data verified: what the card received read back, what
//! the host received compared in place. A stop request (the sampler's flag) stops the engine and
//! keeps the samples gathered so far.
//!
//! A run is a batch of transfers (`layout`): one transfer for engines that take one at a
//! time, many spread over queues for engines with queues, sequential or at random offsets.

mod data;
pub mod guard;
pub mod layout;
pub(in crate::bench) mod stream;
pub(in crate::bench) mod verify;

use self::data::scatter;
pub(super) use self::data::{bytes, bytes_mut, card_copy, interrupt_run, put, timed_run};
use self::layout::{Access, Layout};
use super::counters::EngineFigures;
use super::pattern::Pattern;
#[cfg(test)]
use super::result::Verify;
use super::result::{Completion, Kind, Note, Report, Row};
use super::sample::sampler::{Phase, Sampled, Sampling, WHILE_PROBED};
use crate::access::{BusMaster, DeviceAccess, Interrupts};
use crate::device::Device;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, EngineCounters, Work};
use crate::host::Host;
use crate::pci::health::{HealthProbe, Snapshot};
use crate::pci::link::Link;
use crate::units::human_size;
use crate::{Error, Result};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DmaPlan {
    /// Directions measured one at a time.
    pub dirs: Vec<Direction>,
    /// Also both directions at once (a row per direction, measured together).
    pub bidir: bool,
    /// Transfer sizes; empty means the engine's whole card memory (as time_dma_blkram).
    pub sizes: Vec<u64>,
    /// Bytes per row at most.
    pub total: u64,
    /// The total was not given: each row also stops once its samples took this many ns
    /// (`sampler::ROW_BUDGET_NS`).
    pub budget_ns: Option<u64>,
    pub card_addr: u64,
    pub timeout: Duration,
    /// Queue counts to measure (empty: one queue).
    pub queues: Vec<u16>,
    pub access: Access,
    /// How each configuration sees completion, a row each in this order (empty: polling, the
    /// rows unlabelled).
    pub completions: Vec<Completion>,
}

/// The device, opened, and the engine that moves the data, with the allocator its buffers come
/// from.
pub struct DmaSetup<'a> {
    pub dev: &'a dyn DeviceAccess,
    pub device: &'a Device,
    pub engine: &'a mut dyn Engine,
    pub alloc: &'a dyn DmaAllocator,
    /// The engine's interrupts, routed (`--completion irq|both`).
    pub irq: Option<&'a dyn Interrupts>,
}

/// The random window when none is given: 1 GiB.
pub const DEFAULT_WINDOW: u64 = 1 << 30;

/// The host window for `--pattern random`: the one asked for, refused if its two buffers
/// (source and destination) exceed the memory this host has available; by default 1 GiB, or the
/// largest power of two whose buffers take at most half of what is available (with why).
pub fn random_window(host: &Host, asked: Option<u64>) -> Result<(u64, Option<String>)> {
    let avail = crate::host::state::meminfo(host, "MemAvailable").map(|kb| kb * 1024);
    match (asked, avail) {
        (Some(0), _) => Err(Error::usage("--window 0: give the host window for random packets, e.g. --window 256M")),
        (Some(w), Some(a)) if w.saturating_mul(2) > a => {
            let fits = (a / 2).checked_ilog2().map_or(0, |b| 1u64 << b);
            Err(Error::usage(format!(
                "--window {} needs {} of host buffers (a source and a destination window), more than the {} this host has \
                 available (MemAvailable): use --window {} or less",
                human_size(w),
                human_size(w.saturating_mul(2)),
                gib(a),
                human_size(fits)
            )))
        }
        (Some(w), _) => Ok((w, None)),
        (None, Some(a)) if DEFAULT_WINDOW * 4 > a => {
            let w = (a / 4).checked_ilog2().map_or(1 << 20, |b| (1u64 << b).max(1 << 20));
            Ok((
                w,
                Some(format!(
                    "random window {} (1 GiB would take more than half of the {} available)",
                    human_size(w),
                    gib(a)
                )),
            ))
        }
        _ => Ok((DEFAULT_WINDOW, None)),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The largest transfer made when none is asked for. A card's whole memory (1 GiB of NVRAM, GiBs of
/// DDR behind an XDMA core) would need a host buffer as large and the pattern and its check beside
/// it (about 5 times the size in all: 5.2 GB for `dma sim-nvram`); 16 MiB keeps a default run near
/// 100 MB and is long enough for any link to reach its speed. `--size` asks for more.
pub const DEFAULT_MAX: u64 = 16 << 20;

/// The transfer size when none is asked for, the one rule every command uses: the engine's card
/// window from `card_offset`, up to the largest transfer it takes (fpga_sio's DMA test moves its
/// whole card memory) and at most `DEFAULT_MAX`.
pub fn default_size(engine: &dyn Engine, card_offset: u64) -> u64 {
    engine.card_size().saturating_sub(card_offset).min(engine.max_transfer()).min(DEFAULT_MAX)
}

/// Every size must fit the engine's card window from `card_addr` and one transfer.
fn sizes(engine: &dyn Engine, plan: &DmaPlan) -> Result<Vec<u64>> {
    let card_room = card_room(engine, plan)?;
    let sizes = if plan.sizes.is_empty() { vec![default_size(engine, plan.card_addr)] } else { plan.sizes.clone() };
    for &size in &sizes {
        if size == 0 {
            return Err(Error::usage("--size 0: a transfer moves at least one byte; give a size such as 4K"));
        }
        if size > card_room {
            let more = if engine.card_size_settable() { " or set --card-size" } else { "" };
            return Err(Error::usage(format!(
                "transfer size {size:#x} does not fit the {} engine's card memory from offset {:#x} ({card_room:#x} bytes): use a smaller --size{more}",
                engine.name(),
                plan.card_addr
            )));
        }
        if size > engine.max_transfer() {
            return Err(Error::usage(format!(
                "transfer size {size:#x} exceeds what the {} engine takes in one transfer ({:#x})",
                engine.name(),
                engine.max_transfer()
            )));
        }
    }
    Ok(sizes)
}

fn card_room(engine: &dyn Engine, plan: &DmaPlan) -> Result<u64> {
    engine.card_size().checked_sub(plan.card_addr).filter(|r| *r > 0).ok_or_else(|| {
        Error::usage(format!(
            "--card-addr {:#x} is outside the engine's {:#x} bytes of card memory",
            plan.card_addr,
            engine.card_size()
        ))
    })
}

/// What the plan asks of the engine beyond one sequential transfer at a time, checked up front.
fn check_batching(engine: &dyn Engine, plan: &DmaPlan) -> Result<Vec<u16>> {
    let single = engine.max_batch() <= 1;
    let name = engine.name();
    if single && matches!(plan.access, Access::Random { .. }) {
        return Err(Error::usage(format!(
            "--pattern random needs an engine that runs batches of transfers (qdma); {name} runs one transfer at a time"
        )));
    }
    if single && plan.bidir && engine.overlaps() && !engine.channels().is_empty() {
        // libxdma runs a channel's H2C and C2H halves as engines of their own: both at once is
        // two engines, which the soak opens (a row here is one engine's batch). Stream channels
        // are not soaked, so they keep the plain refusal below.
        return Err(Error::usage(format!(
            "--dir bidir runs both directions in one engine's batch (qdma); {name} runs each direction of a channel as an \
             engine of its own: run both at once with --duration (e.g. --duration 60s; docs/soak.md)"
        )));
    }
    if single && plan.bidir {
        return Err(Error::usage(format!(
            "--dir bidir needs an engine that runs both directions in one batch (qdma); {name} runs one transfer at a time"
        )));
    }
    let queues = if plan.queues.is_empty() { vec![1] } else { plan.queues.clone() };
    if let Some(q) = queues.iter().find(|q| **q == 0 || **q > engine.queues()) {
        return Err(Error::usage(format!(
            "--queues {q} is more than the {} queue{} the {name} engine was opened with",
            engine.queues(),
            if engine.queues() == 1 { "" } else { "s" }
        )));
    }
    if plan.dirs.is_empty() && !plan.bidir {
        return Err(Error::usage("no direction to measure: give --dir"));
    }
    Ok(queues)
}

/// One row's worth of configuration, and its layouts (None: it does not fit the card).
struct Config {
    size: u64,
    queues: u16,
    /// (direction, layout): one, or H2C and C2H run together.
    parts: Option<Vec<(Direction, Layout)>>,
}

fn configs(engine: &dyn Engine, plan: &DmaPlan, sizes: &[u64], queues: &[u16], seed: u64) -> Result<Vec<Config>> {
    let room = card_room(engine, plan)?;
    let (max, align) = (engine.max_batch(), engine.transfer_align());
    let lay = |size: u64, q: u16, room: u64, base: u64, salt: u64| match plan.access {
        Access::Sequential => layout::sequential(size, align, q, room, base, max),
        Access::Random { window } => layout::random(size, align, q, window, room, base, max, seed ^ salt),
    };
    let mut modes: Vec<Option<Direction>> = plan.dirs.iter().map(|d| Some(*d)).collect();
    if plan.bidir {
        modes.push(None);
    }
    let mut out = Vec::new();
    for mode in modes {
        for &size in sizes {
            for &q in queues {
                let parts = match mode {
                    Some(d) => lay(size, q, room, plan.card_addr, size ^ q as u64).map(|l| vec![(d, l)]),
                    None => lay(size, q, room / 2, plan.card_addr, size)
                        .zip(lay(size, q, room / 2, plan.card_addr + room / 2, !size))
                        .map(|(a, b)| vec![(Direction::H2c, a), (Direction::C2h, b)]),
                };
                out.push(Config { size, queues: q, parts });
            }
        }
    }
    Ok(out)
}

/// Every figure of `plan` the engine's facts bound (sizes, batching, queues, the total), checked
/// before the measurement starts: a refused request leaves no file and moves nothing.
pub fn check(engine: &dyn Engine, plan: &DmaPlan) -> Result<()> {
    if plan.completions.contains(&Completion::Irq) && !engine.completes_by_interrupt() {
        return Err(Error::usage(format!(
            "--completion irq: the {} engine completes by polling only: use --completion poll",
            engine.name()
        )));
    }
    let sizes = sizes(engine, plan)?;
    check_batching(engine, plan)?;
    super::sample::sampler::check_total(plan.total, &sizes)
}

pub fn run(s: DmaSetup, plan: &DmaPlan, sampling: &mut Sampling) -> Result<Report> {
    let engine = s.engine;
    let sizes = sizes(engine, plan)?;
    let queues = check_batching(engine, plan)?;
    super::sample::sampler::check_total(plan.total, &sizes)?;
    let mut pattern = Pattern::fresh();
    let mut configs = configs(engine, plan, &sizes, &queues, pattern.seed)?;
    let random = matches!(plan.access, Access::Random { .. });
    let streamed = stream::place(engine, random, &mut configs)?.unwrap_or(0);
    // The host buffers also carry each part's card image and read-back with its guarded tail.
    let extent = |c: &Config| {
        c.parts.iter().flatten().map(|(_, l)| l.host_extent().max(l.card_extent() + verify::TAIL)).max().unwrap_or(0)
    };
    let len = configs.iter().map(extent).max().unwrap_or(0).max(streamed).max(1) as usize;
    let mut bufs = Buffers { src: s.alloc.alloc(len)?, dst: s.alloc.alloc(len)? };
    let card_end = configs
        .iter()
        .flat_map(|c| c.parts.iter().flatten())
        .map(|(_, l)| (l.card_base + l.card_extent() + verify::TAIL).min(engine.card_size()))
        .max();
    if let Some(end) = card_end {
        s.dev.populate_card_memory(plan.card_addr, end - plan.card_addr);
    }
    let _bm = BusMaster::enable(s.dev)?;
    let mut report =
        Report::new(Kind::Dma, s.device.name(), s.device.simulated(), s.dev.via(), sampling.overhead.median_s * 1e9);
    report.engine = Some(engine.name().into());
    report.addressing = Some(bufs.src.addressing());
    report.buffer = Some(bufs.src.describe());
    report.engine_counters = (!engine.has_counters()).then_some(false);
    // A simulated card's model is what bounds its rows, as a link bounds a real card's.
    let datapath = s.device.info.datapath.as_ref();
    if let Some(p) = datapath {
        report.limit_note = Some(format!(
            "{}: the limit column is the model's datapath ({}), not a PCIe link; a row below it is bounded by the host path",
            p.header(),
            p.basis
        ));
    }
    let queued = engine.max_batch() > 1;
    // A panic mid-run must not leave the engine moving data into buffers about to be freed: stop
    // it first (then Bus Master is restored and the buffers released as the stack unwinds).
    let measured = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<()> {
        for c in &configs {
            let Some(parts) = &c.parts else {
                report.results.push(skipped(c, plan, engine, queued));
                continue;
            };
            // `--completion both`: a row per way, side by side; none asked: polling, unlabelled.
            let ways: Vec<Option<Completion>> = match plan.completions.as_slice() {
                [] => vec![None],
                w => w.iter().copied().map(Some).collect(),
            };
            for completion in ways {
                pattern = pattern.successor();
                let link = s.device.bounding_link();
                let by = match completion {
                    Some(Completion::Irq) => By::Irq(s.irq.ok_or_else(|| {
                        Error::usage("--completion irq needs the device's interrupts: none were routed to the runner")
                    })?),
                    _ => By::Poll,
                };
                let ctx = Ctx { engine: &mut *engine, bufs: &mut bufs, plan, link, datapath, queued, by };
                let (mut rows, stopped) = match measure(ctx, c, parts, pattern, sampling, &mut report.warnings) {
                    Err(Error::Gone(what)) => {
                        // Stop the engine where it still can be (its registers may not answer).
                        let _ = engine.stop();
                        report.gone = Some(super::gone::line(s.device.name(), &what, sampling));
                        return Ok(());
                    }
                    r => r?,
                };
                rows.iter_mut().for_each(|r| r.completion = completion);
                report.results.extend(rows);
                report.warnings.extend(engine.take_notes().into_iter().map(|n| format!("{}: {n}", engine.name())));
                if stopped {
                    report.interrupted = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }));
    match measured {
        Ok(r) => r.map(|()| report),
        Err(panic) => {
            let _ = engine.stop();
            std::panic::resume_unwind(panic)
        }
    }
}

fn skipped(c: &Config, plan: &DmaPlan, engine: &dyn Engine, queued: bool) -> Row {
    let mut row = Row::new(Direction::H2c, c.size);
    row.queues = queued.then_some(c.queues);
    let room = engine.card_size().saturating_sub(plan.card_addr);
    row.notes.push(Note::Skipped {
        reason: format!(
            "{} queue{} of {} transfers do not fit the {} of card memory in the window",
            c.queues,
            if c.queues == 1 { "" } else { "s" },
            human_size(c.size),
            human_size(room)
        ),
    });
    row
}

struct Buffers {
    src: Box<dyn DmaBuffer>,
    dst: Box<dyn DmaBuffer>,
}

impl Buffers {
    fn of(&self, dir: Direction) -> &dyn DmaBuffer {
        if dir == Direction::H2c {
            &*self.src
        } else {
            &*self.dst
        }
    }
}

struct Ctx<'a> {
    engine: &'a mut dyn Engine,
    bufs: &'a mut Buffers,
    plan: &'a DmaPlan,
    link: Option<Link>,
    /// A simulated card's model: its limit stands where a link's would.
    datapath: Option<&'a crate::pci::device::DatapathInfo>,
    queued: bool,
    by: By<'a>,
}

/// How a timed run learns its transfer completed.
#[derive(Clone, Copy)]
enum By<'a> {
    Poll,
    Irq(&'a dyn Interrupts),
}

/// Measure one configuration: set up the data, time the runs, make its rows, verify.
fn measure(
    cx: Ctx,
    c: &Config,
    parts: &[(Direction, Layout)],
    pattern: Pattern,
    sampling: &mut Sampling,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Row>, bool)> {
    let engine = cx.engine;
    let plan = cx.plan;
    // The rows' link-health window is the whole configuration, from before its data and guards are
    // placed (DMA writes to the card, untimed) to after its data is checked (reads back).
    let since = sampling.health.map(|h| h.snapshot());
    let far_end = stream::expected(engine, parts);
    let streaming = far_end.is_some();
    let expected: Vec<Vec<u8>> = match far_end {
        Some(e) => e,
        None => parts
            .iter()
            .enumerate()
            .map(|(i, (_, l))| Pattern::with_seed(pattern.seed ^ i as u64).try_generate(l.bytes() as usize))
            .collect::<Result<_>>()?,
    };
    // Untimed: the card holds the C2H data (so the reads have something to verify) and the
    // guard around the H2C transfers; the host destination its guard; the source the H2C data.
    let limits = verify::limits(parts, engine.card_size());
    let guards = verify::Guards::new(pattern.seed);
    let (src, dst) = (&mut *cx.bufs.src, &mut *cx.bufs.dst);
    verify::prepare(engine, src, dst, parts, &limits, &expected, &guards, streaming, plan.timeout)?;
    for ((dir, l), e) in parts.iter().zip(&expected) {
        if *dir == Direction::H2c {
            scatter(&mut *cx.bufs.src, l, e);
        }
    }
    let work: Vec<Work> = parts.iter().flat_map(|(d, l)| l.work(*d, cx.bufs.of(*d))).collect();
    engine.prepare_batch(&work)?;
    stream::clear(engine, parts)?;
    let settings = engine.settings()?;
    let run_bytes: u64 = parts.iter().map(|(_, l)| l.bytes()).sum();
    let by = cx.by;
    // The engine's counters are taken per kept sample (started before it, read after it, both
    // untimed), so its figures summarise the very samples the host's figures do.
    let counting = engine.has_counters();
    let mut counted: Vec<Counted> = Vec::new();
    let sampled = sampling.run_phased(run_bytes, c.size, plan.total, plan.budget_ns, |p| match p {
        Phase::Run(k) => {
            for _ in 0..k {
                match by {
                    By::Poll => timed_run(engine, plan.timeout)?,
                    By::Irq(irq) => interrupt_run(engine, irq, plan.timeout)?,
                }
            }
            Ok(())
        }
        Phase::Before if counting => engine.counters_start(),
        Phase::After { k, ns } if counting => {
            counted.push(Counted { counters: engine.counters_read()?, runs: k, ns });
            Ok(())
        }
        Phase::Before | Phase::After { .. } => Ok(()),
    })?;
    // Untimed: no-IOMMU heap pages re-read their frames (a page that moved fails the run).
    cx.bufs.src.still_in_place()?;
    cx.bufs.dst.still_in_place()?;
    let overhead_ns = sampling.overhead.median_s * 1e9;
    let mut rows = Vec::new();
    for (dir, l) in parts {
        let mut row = Row::new(*dir, c.size);
        row.queues = cx.queued.then_some(c.queues);
        row.engine_settings = settings.clone();
        row.window = match plan.access {
            Access::Random { window } => Some(window),
            Access::Sequential => None,
        };
        row.concurrent = parts.len() > 1;
        // The card reads host memory for h2c (requests and completions) and writes it for c2h.
        let limit = cx
            .link
            .map(|k| match dir {
                Direction::H2c => k.read_bps(c.size) / 1e6,
                Direction::C2h => k.write_bps(c.size) / 1e6,
            })
            .or(cx.datapath.map(|p| p.limit_mbps(c.size)));
        row.measured(&per_transfer(&sampled, l), limit, overhead_ns);
        if engine.packets() {
            // One transfer is one packet on an XDMA stream (the loopback has no far end to ask).
            row.packets_per_s = row.mops().map(|m| m * 1e6);
        }
        stream::packets(engine, &mut row);
        if l.count() > 1 {
            row.notes.push(Note::InFlight { transfers: l.count(), queues: l.queues });
        }
        row.engine = median_sample(&counted, *dir, l.bytes());
        rows.push(row);
    }
    if sampled.interrupted {
        let status = engine.stop()?;
        rows.iter_mut().for_each(|r| r.notes.push(Note::Interrupted { engine: Some(status.clone()) }));
        health_over_config(&mut rows, sampling.health, since.as_ref());
        return Ok((rows, true));
    }
    let dst = &mut *cx.bufs.dst;
    verify::parts(engine, dst, parts, &limits, &expected, &guards, plan.timeout, &mut rows, warnings)?;
    health_over_config(&mut rows, sampling.health, since.as_ref());
    Ok((rows, false))
}

/// Each row's link-health note covers its whole configuration, from `since` (before its data was
/// placed) to now: errors while the card was written untimed or read back to verify make the row
/// suspect as errors during its samples do (the lab's link_health held its run in the untimed
/// write of the card's guards, and the row said nothing). What its probe saw (`WHILE_PROBED`) stays.
fn health_over_config(rows: &mut [Row], health: Option<&HealthProbe>, since: Option<&Snapshot>) {
    let (Some(h), Some(b)) = (health, since) else { return };
    let whole = crate::pci::health::changes(b, &h.snapshot());
    for row in rows {
        let note = row.notes.iter_mut().find_map(|n| match n {
            Note::LinkHealth { changes } => Some(changes),
            _ => None,
        });
        match note {
            // A change during the samples that the whole window no longer shows (a link that came
            // back at its speed by the end) is kept as it was seen.
            Some(changes) if !whole.is_empty() => {
                changes.retain(|c| c.ends_with(WHILE_PROBED));
                changes.extend(whole.iter().cloned());
            }
            None if !whole.is_empty() => row.notes.push(Note::LinkHealth { changes: whole.clone() }),
            _ => {}
        }
    }
}

/// What an engine's counters said over one kept sample of `runs` runs that took `ns`.
struct Counted {
    counters: Vec<EngineCounters>,
    runs: u64,
    ns: u64,
}

/// The engine's figures for direction `dir` over the row's median sample: the sample the host's
/// median comes from (of two middle ones, the faster), each run moving `run_bytes` that way.
/// Counters of the last run alone (XDMA's auto mode) stand beside that run's share of the
/// sample's wall time; counters counting throughout beside the whole sample.
fn median_sample(counted: &[Counted], dir: Direction, run_bytes: u64) -> Option<EngineFigures> {
    let mut per: Vec<(f64, EngineFigures)> = counted
        .iter()
        .filter(|c| c.runs > 0)
        .filter_map(|c| {
            let k = c.counters.iter().find(|k| k.dir == dir)?;
            let per_run_s = c.ns as f64 * 1e-9 / c.runs as f64;
            let f = if k.last_run {
                EngineFigures::new(k, run_bytes, per_run_s)
            } else {
                EngineFigures::new(k, run_bytes * c.runs, c.ns as f64 * 1e-9)
            };
            Some((per_run_s, f))
        })
        .collect();
    per.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = per.len();
    (n > 0).then(|| per.swap_remove((n - 1) / 2).1)
}

/// Samples of whole runs as samples of their transfers (a run moves `l.count()` of them).
fn per_transfer(s: &Sampled, l: &Layout) -> Sampled {
    let mut t = s.clone();
    let n = l.count().max(1);
    t.samples.size = l.size;
    t.samples.batch *= n;
    t.planned *= n;
    t.calibration_transfers *= n;
    t
}

#[cfg(test)]
mod gone_tests;
#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
