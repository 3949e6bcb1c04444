//! The soak (`dma --duration`): every stream asked for (each XDMA channel's H2C and C2H half, each
//! QDMA queue, on one card or several) kept moving at once for as long as asked, from one thread
//! that polls each stream's completion and starts it again at once, as fpga_sio's
//! parallel-streams test does. Every `every` the streams are drained (the transfers in flight
//! complete), a row per stream says what it moved in the interval, and each stream's data is
//! checked while all are idle (`data`: outside the interval's time). The report keeps every
//! interval, a row per stream over the whole run (one sample per interval: its slowest, median
//! and fastest interval), each direction's aggregate against the link (a simulated card: its
//! model), the fairness between streams, and every error with its time. A stop (Ctrl-C) or a
//! card that stops answering ends the run with what was measured: the interval in progress is
//! drained, checked where it still can be, and kept.

pub mod data;
pub mod figures;
pub mod lane;
mod summary;
#[cfg(test)]
mod tests;

use self::data::Data;
use self::figures::{Interval, Lane, Soak, SoakError, Stream};
use self::lane::Unit;
use super::pattern::Pattern;
use super::result::{Kind, Report};
use super::sample::sampler::Sampling;
use crate::access::{BusMaster, DeviceAccess};
use crate::device::Device;
use crate::direction::Direction;
use crate::dma::{DmaAllocator, Engine};
use crate::units::human_size;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The largest transfer a stream makes when none is asked for: long enough for any link to reach
/// its speed, short enough that many streams share a card's window.
pub const DEFAULT_MAX: u64 = 1 << 20;

/// How long, how often, and how patient.
#[derive(Debug, Clone)]
pub struct SoakPlan {
    pub duration: Duration,
    pub every: Duration,
    /// A transfer that makes no progress for this long fails (`--timeout-ms`).
    pub timeout: Duration,
    /// Bytes each transfer moves (None: each card's window shared out, at most `DEFAULT_MAX`).
    pub size: Option<u64>,
}

/// One card of the run.
pub struct SoakDevice<'a> {
    pub device: &'a Device,
    pub dev: &'a dyn DeviceAccess,
}

/// One engine of the run, opened: the card it is on (an index into the devices), where its
/// transfers' card offset 0 lies, and the streams it carries (lane, direction, queue).
pub struct SoakEngine {
    pub device: usize,
    pub engine: Box<dyn Engine>,
    pub alloc: Box<dyn DmaAllocator>,
    pub card_offset: u64,
    pub lanes: Vec<(Lane, Direction, u16)>,
}

/// Run the soak and report it.
pub fn run(devices: &[SoakDevice], engines: Vec<SoakEngine>, plan: &SoakPlan, s: &mut Sampling) -> Result<Report> {
    let first = devices.first().ok_or_else(|| Error::usage("name a device to soak"))?;
    let mut report = Report::new(Kind::Dma, &names(devices), first.device.simulated(), first.dev.via(), 0.0);
    report.timer_overhead_ns = s.overhead.median_s * 1e9;
    let (streams, mut datas, allocs, mut units) = layout(devices, engines, plan)?;
    report.engine = Some(engine_names(&streams));
    report.addressing = datas.first().map(|d| d.addressing());
    report.buffer = datas.first().map(|d| d.describe());
    // A simulated card's model bounds its streams, as a link bounds a real card's.
    if let Some(p) = first.device.info.datapath.as_ref() {
        report.limit_note = Some(format!(
            "{}: the limit is the model's datapath ({}), which a direction's channels or queues share, not a PCIe link",
            p.header(),
            p.basis
        ));
    }
    for d in devices {
        let mine = datas.iter().zip(&streams).filter(|(_, st)| st.device == d.device.name());
        if let Some(end) = mine.map(|(x, _)| x.card_at + x.slot).max() {
            d.dev.populate_card_memory(0, end);
        }
    }
    let _bus: Vec<BusMaster> = devices.iter().map(|d| BusMaster::enable(d.dev)).collect::<Result<_>>()?;
    for u in &mut units {
        for k in 0..u.queues.len() {
            datas[u.first + k].seed(&mut *u.engine, plan.timeout)?;
        }
        let work: Vec<_> = datas[u.first..u.first + u.queues.len()].iter().map(Data::work).collect();
        u.prepare(&work)?;
    }
    let mut soak = Soak {
        duration_s: plan.duration.as_secs_f64(),
        every_s: plan.every.as_secs_f64(),
        streams,
        serial: serial_words(&units),
        ..Soak::default()
    };
    // A panic must not leave an engine moving data into buffers about to be freed.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_loop(devices, &mut units, &mut datas, plan, s, &mut soak, &mut report)
    }));
    if !matches!(ran, Ok(Ok(()))) {
        for u in &mut units {
            let _ = u.engine.stop();
        }
    }
    match ran {
        Ok(r) => r?,
        Err(panic) => std::panic::resume_unwind(panic),
    }
    summary::finish(devices, &mut soak, &mut report);
    report.soak = Some(soak);
    drop(datas);
    drop(units);
    drop(allocs);
    Ok(report)
}

/// The loop: intervals until the duration is spent, a stop, every stream retired, or a card gone.
fn run_loop(
    devices: &[SoakDevice],
    units: &mut [Unit],
    datas: &mut [Data],
    plan: &SoakPlan,
    s: &mut Sampling,
    soak: &mut Soak,
    report: &mut Report,
) -> Result<()> {
    let clock = s.clock;
    let t0 = clock.now_ns();
    let secs = |ns: u64| ns.saturating_sub(t0) as f64 * 1e-9;
    let end = t0.saturating_add(plan.duration.as_nanos() as u64);
    let every = plan.every.as_nanos() as u64;
    let mut from = t0;
    loop {
        let due = from.saturating_add(every).min(end);
        let mut gone: Option<Error> = None;
        'moving: loop {
            let now = clock.now_ns();
            if now >= due || s.stop.load(Ordering::Relaxed) || all_retired(units) {
                break;
            }
            for u in units.iter_mut() {
                if let Err(e) = u.pump(true, secs(now), &mut soak.errors) {
                    gone = Some(e);
                    break 'moving;
                }
            }
        }
        if gone.is_none() {
            gone = drain(units, secs, clock, &mut soak.errors).err();
        }
        let to = clock.now_ns();
        let last = gone.is_some() || s.stop.load(Ordering::Relaxed) || to >= end || all_retired(units);
        let mut rows = intervals(units, datas, soak, secs(from), secs(to), last && to < end);
        if gone.is_none() {
            check(units, datas, plan.timeout, secs(to), &mut rows, &mut soak.errors)?;
        }
        s.progress.interval(&rows);
        soak.intervals.extend(rows);
        soak.ran_s = secs(to);
        if let Some(e) = gone {
            return match e {
                Error::Gone(what) => {
                    let device = devices.iter().map(|d| d.device.name()).find(|n| what.contains(n));
                    report.gone = Some(super::gone::line(device.unwrap_or(&names(devices)), &what, s));
                    Ok(())
                }
                e => Err(e),
            };
        }
        // A stop that came while the interval was checked or shown ends the run here too.
        if last || s.stop.load(Ordering::Relaxed) {
            report.interrupted = s.stop.load(Ordering::Relaxed);
            return Ok(());
        }
        from = clock.now_ns();
    }
}

/// Every transfer in flight brought to its end (none started): the interval's last completions.
/// Each engine's own no-progress watch bounds it.
fn drain(
    units: &mut [Unit],
    secs: impl Fn(u64) -> f64,
    clock: &dyn crate::bench::sample::clock::Clock,
    errors: &mut Vec<SoakError>,
) -> Result<()> {
    while units.iter().any(|u| u.in_flight() > 0) {
        for u in units.iter_mut().filter(|u| u.in_flight() > 0) {
            u.pump(false, secs(clock.now_ns()), errors)?;
        }
    }
    Ok(())
}

fn all_retired(units: &[Unit]) -> bool {
    units.iter().all(|u| u.tallies.iter().all(|t| t.retired))
}

/// Each stream's row of the interval from `from_s` to `to_s` (seconds), its counts then reset.
fn intervals(units: &mut [Unit], datas: &[Data], soak: &Soak, from_s: f64, to_s: f64, partial: bool) -> Vec<Interval> {
    let mut rows = Vec::new();
    for u in units.iter_mut() {
        for (k, t) in u.tallies.iter_mut().enumerate() {
            let i = u.first + k;
            let bytes = t.done * datas[i].size;
            let span = (to_s - from_s).max(1e-9);
            rows.push(Interval {
                stream: i,
                label: soak.streams[i].label(),
                from_s,
                to_s,
                transfers: t.done,
                bytes,
                mbps: bytes as f64 / span / 1e6,
                verified: None,
                mismatch: None,
                errors: t.errors,
                partial,
            });
            t.done = 0;
            t.errors = 0;
        }
    }
    rows
}

/// Each stream's data checked (untimed, all idle) and its transfer prepared again.
fn check(
    units: &mut [Unit],
    datas: &mut [Data],
    timeout: Duration,
    at_s: f64,
    rows: &mut [Interval],
    errors: &mut Vec<SoakError>,
) -> Result<()> {
    for u in units.iter_mut() {
        for k in 0..u.queues.len() {
            let i = u.first + k;
            let row = rows.iter_mut().find(|r| r.stream == i).expect("a row per stream");
            // Nothing moved since the last check: nothing new to check (its H2C slot still holds the
            // pattern of the last interval that moved, its C2H buffer only its guard), and its pattern
            // stays for the next interval. A loaded host can let an interval pass before a stream
            // starts a transfer (qemu-aarch64 with two CPU hogs did); a stalled engine's own watch
            // reports the stall, and the row says 0 transfers.
            if row.transfers == 0 {
                continue;
            }
            match datas[i].check(&mut *u.engine, timeout) {
                Ok(Ok(())) => row.verified = Some(true),
                Ok(Err(m)) => {
                    errors.push(SoakError { at_s, stream: Some(i), what: format!("data check: {m}") });
                    row.verified = Some(false);
                    row.mismatch = Some(m);
                }
                Err(e @ Error::Gone(_)) => return Err(e),
                Err(e) => {
                    let _ = u.engine.stop();
                    errors.push(SoakError { at_s, stream: Some(i), what: format!("data check could not run: {e}") });
                }
            }
        }
        let work: Vec<_> = datas[u.first..u.first + u.queues.len()].iter().map(Data::work).collect();
        if let Err(e) = u.prepare(&work) {
            errors.push(SoakError { at_s, stream: None, what: format!("{}: preparing again: {e}", u.engine.name()) });
            u.tallies.iter_mut().for_each(|t| t.retired = true);
        }
    }
    Ok(())
}

type Laid = (Vec<Stream>, Vec<Data>, Vec<Box<dyn DmaAllocator>>, Vec<Unit>);

/// The streams, each one's slot of its card's window and its buffers, and the units that drive
/// them, in order (a unit's streams are consecutive).
fn layout(devices: &[SoakDevice], engines: Vec<SoakEngine>, plan: &SoakPlan) -> Result<Laid> {
    let sizes: Vec<(u64, u64)> =
        (0..devices.len()).map(|di| sized(devices, di, &engines, plan)).collect::<Result<_>>()?;
    let (mut streams, mut datas, mut allocs, mut units) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut pattern = Pattern::fresh();
    let mut used: Vec<u64> = vec![0; devices.len()];
    for e in engines {
        let (size, slot) = sizes[e.device];
        let first = streams.len();
        let mut queues = Vec::new();
        for (lane, dir, queue) in &e.lanes {
            let card_at = e.card_offset + used[e.device];
            used[e.device] += slot;
            pattern = pattern.successor();
            datas.push(Data::new(e.alloc.as_ref(), *dir, size, card_at, slot, *queue, pattern)?);
            streams.push(Stream {
                device: devices[e.device].device.name().to_string(),
                engine: e.engine.name().to_string(),
                lane: *lane,
                dir: *dir,
                size,
            });
            queues.push(*queue);
        }
        units.push(Unit::new(e.engine, queues, first, plan.timeout)?);
        allocs.push(e.alloc);
    }
    Ok((streams, datas, allocs, units))
}

/// The transfer size and slot of every stream on card `di`: its window (the smallest any of its
/// engines has) shared out between them.
fn sized(devices: &[SoakDevice], di: usize, engines: &[SoakEngine], plan: &SoakPlan) -> Result<(u64, u64)> {
    let mine: Vec<&SoakEngine> = engines.iter().filter(|e| e.device == di).collect();
    let lanes: u64 = mine.iter().map(|e| e.lanes.len() as u64).sum();
    let Some(e0) = mine.first() else { return Ok((0, 0)) };
    let room = mine.iter().map(|e| e.engine.card_size().saturating_sub(e.card_offset)).min().unwrap_or(0);
    let largest = mine.iter().map(|e| e.engine.max_transfer()).min().unwrap_or(0);
    let size = plan.size.unwrap_or_else(|| data::default_size(lanes, room, largest.min(DEFAULT_MAX)));
    if size > largest {
        return Err(Error::usage(format!(
            "--size {}: the {} engine takes at most {} in one transfer",
            human_size(size),
            e0.engine.name(),
            human_size(largest)
        )));
    }
    let slot = data::slots(size, lanes, room).ok_or_else(|| {
        Error::usage(format!(
            "{lanes} stream{} of {} transfers do not fit the {} of card memory in {}'s window{}: use --size {} or less{}",
            if lanes == 1 { "" } else { "s" },
            human_size(size),
            human_size(room),
            devices[di].device.name(),
            if lanes > 1 { " (each stream has its own part of it)" } else { "" },
            human_size(data::default_size(lanes, room, largest).max(1)),
            if e0.engine.card_size_settable() { ", or give --card-size" } else { "" }
        ))
    })?;
    Ok((size, slot))
}

fn names(devices: &[SoakDevice]) -> String {
    devices.iter().map(|d| d.device.name()).collect::<Vec<_>>().join(",")
}

fn engine_names(streams: &[Stream]) -> String {
    let mut v: Vec<&str> = streams.iter().map(|s| s.engine.as_str()).collect();
    v.dedup();
    v.join(",")
}

/// Why some streams ran one transfer at a time, for the report.
fn serial_words(units: &[Unit]) -> Vec<String> {
    let mut v: Vec<String> = units
        .iter()
        .filter(|u| u.drive == lane::Drive::Serial)
        .map(|u| {
            format!(
                "the {} engine runs one transfer to its end before pcibench can start another (it has no way to start one \
                 and look later): its stream ran between the others' looks, not beside them",
                u.engine.name()
            )
        })
        .collect();
    v.dedup();
    v
}
