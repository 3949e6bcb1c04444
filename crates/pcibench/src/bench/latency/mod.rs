//! The latency runner (`pcibench latency`): single accesses, each timed alone with the timing
//! shell's cost subtracted (`Sampling::single`), into log-linear histograms. Three parts:
//! - MMIO: one read of 8/16/32/64 bits (or 64 bytes with one AVX-512 load) at a BAR offset per
//!   sample, and with consent to write, a write of the value read first followed by a read of
//!   the same offset (the read cannot pass the posted write, so it times the write's delivery);
//! - DMA (`dma`): one small transfer per sample, submission to completion, seen by
//!   polling or by the device's MSI;
//! - load (`load`): the MMIO read again while the engine streams DMA on a pinned thread, per
//!   direction and both, with that load's throughput beside it (seed 004's AXI-Lite table).

pub mod dma;
pub mod load;
pub mod row;
pub mod wake;

use self::dma::DmaLatency;
use self::load::LoadPlan;
use self::row::{default_warmup, finish};
use super::result::{Kind, LoadFigures, Note, Probe, Report, Row, Verify};
use super::sample::sampler::Sampling;
use crate::access::{BarRegion, BusMaster, DeviceAccess, IoMode, Mapping};
use crate::device::Device;
use crate::direction::Direction;
use crate::dma::{DmaAllocator, Engine};
use crate::mmio::{self, Width};
use crate::{Error, Result};
use std::ptr;

/// `--width all`: every scalar width, and a 64-byte read. Not the default: a device need not
/// decode every width (QEMU's edu answers 32 and 64-bit accesses only), and on aarch64 an access
/// the device rejects is an external abort: the process dies of SIGBUS.
pub const ALL_WIDTHS: [Width; 5] = [Width::B8, Width::B16, Width::B32, Width::B64, Width::V512];
/// The width measured when none is named: 32 bits, what register blocks decode (seed 004's
/// AXI-Lite reads).
pub const DEFAULT_WIDTH: Width = Width::B32;
/// Samples per MMIO row when none is asked for.
pub const DEFAULT_SAMPLES: u64 = 100_000;

/// Why a simulated card's figures under load still mean something, and what.
const SIM_LOAD: &str = "simulated card: its engine model runs on a thread of its own and copies host memory, so the load's effect on the reads is real host-memory and CPU interference on this machine, not PCIe's; its BARs are cacheable host memory (or register models), so a read of one offset is served by this CPU's cache, which DMA on other cores barely disturbs: expect the median unchanged and the tail (max, p99.99) to show time lost to the engine's threads";

/// What to measure.
#[derive(Debug, Clone)]
pub struct LatencyPlan {
    pub bar: u8,
    pub offset: u64,
    pub widths: Vec<Width>,
    /// Widths named by the user: one that cannot run here is an error, not a skipped row.
    pub strict_width: bool,
    /// Also time write-then-read (the device's BAR is written: consent given, or a sim card).
    pub allow_write: bool,
    /// Samples per MMIO row (and per load row); with `budget_ns`, the most a row takes.
    pub samples: u64,
    /// No `--samples` given: each row stops once its samples took this long (`ROW_BUDGET_NS`).
    pub budget_ns: Option<u64>,
    /// Accesses discarded before each row; None: 1% of the samples (1 to 1000).
    pub warmup: Option<u64>,
    pub dma: Option<DmaLatency>,
    pub load: Option<LoadPlan>,
}

impl LatencyPlan {
    pub fn warmup_for(&self, samples: u64) -> u64 {
        self.warmup.unwrap_or_else(|| default_warmup(samples))
    }
}

/// The width read under load: 32 bits (an AXI-Lite register read, as seed 004's) when it is
/// measured, else the first width measured.
pub fn load_width(widths: &[Width]) -> Width {
    if widths.contains(&Width::B32) {
        Width::B32
    } else {
        widths.first().copied().unwrap_or(Width::B32)
    }
}

/// The device, and what it offers beyond its BARs.
pub struct LatencyTarget<'a> {
    pub dev: &'a dyn DeviceAccess,
    pub device: &'a Device,
    /// The DMA engine and the allocator its buffers come from (DMA latency, load).
    pub engine: Option<(&'a mut dyn Engine, &'a dyn DmaAllocator)>,
    /// The device's interrupt, for completion by MSI.
    pub irq: Option<&'a dyn crate::access::Interrupts>,
}

/// One access of `w` at a BAR offset: a volatile load or store through the mapping, one AVX-512
/// load or store for 64 bytes, or the region's own single access where it has no mapping (a
/// register model, a pread).
#[derive(Clone, Copy)]
struct Access<'a> {
    region: &'a dyn BarRegion,
    at: Option<*mut u8>,
    off: u64,
    w: Width,
    /// The region's memory type: a 64-byte read from WC is a streaming load.
    mem: mmio::MemType,
}

impl<'a> Access<'a> {
    /// Check `w` at `off` can be one access here (refused in one line otherwise).
    fn new(region: &'a dyn BarRegion, off: u64, w: Width) -> Result<Access<'a>> {
        if !(w.is_scalar() || w == Width::V512) {
            return Err(Error::usage(format!(
                "--width {w}: latency times one access of 8, 16, 32 or 64 bits, or 512 (one 64-byte load)"
            )));
        }
        mmio::available(w)?;
        super::pio::check_range(region, off, w.bytes() as u64, w)?;
        let at = region.ptr().map(|p| p.wrapping_add(off as usize));
        if w == Width::V512 && at.is_none() {
            return Err(Error::Unsupported(format!(
                "a 64-byte read needs a CPU mapping of BAR{}: this one is reached one register access at a time",
                region.index()
            )));
        }
        Ok(Access { region, at, off, w, mem: region.mem_type() })
    }

    /// One read; 64-byte reads return their first 8 bytes (and the whole line in `line`).
    #[inline(always)]
    fn read(&self, line: &mut [u64; 8]) -> Result<u64> {
        let Some(p) = self.at else { return self.region.read(self.off, self.w) };
        // SAFETY: `new` kept [off, off + width) inside the mapping and aligned to the width, and
        // checked that the CPU has the 512-bit routine; `line` is 64 bytes of host memory.
        unsafe {
            Ok(match self.w {
                Width::B8 => ptr::read_volatile(p) as u64,
                Width::B16 => ptr::read_volatile(p.cast::<u16>()) as u64,
                Width::B32 => ptr::read_volatile(p.cast::<u32>()) as u64,
                Width::B64 => ptr::read_volatile(p.cast::<u64>()),
                _ => {
                    mmio::copy_from_io(Width::V512, self.mem, line.as_mut_ptr().cast(), p, 64);
                    line[0]
                }
            })
        }
    }

    /// One write of `v` (64 bytes: of `line`).
    #[inline(always)]
    fn write(&self, v: u64, line: &[u64; 8]) -> Result<()> {
        let Some(p) = self.at else { return self.region.write(self.off, self.w, v) };
        // SAFETY: as in `read`; the region was opened writable (consent checked by the caller).
        unsafe {
            match self.w {
                Width::B8 => ptr::write_volatile(p, v as u8),
                Width::B16 => ptr::write_volatile(p.cast::<u16>(), v as u16),
                Width::B32 => ptr::write_volatile(p.cast::<u32>(), v as u32),
                Width::B64 => ptr::write_volatile(p.cast::<u64>(), v),
                _ => mmio::copy_to_io(Width::V512, self.mem, p, line.as_ptr().cast(), 64),
            }
        }
        Ok(())
    }

    fn all_ones(&self, v: u64) -> bool {
        match self.w.bytes() {
            n @ 1..=4 => v == (1u64 << (8 * n)) - 1,
            _ => v == u64::MAX,
        }
    }
}

pub fn run(mut t: LatencyTarget, plan: &LatencyPlan, s: &mut Sampling) -> Result<Report> {
    let region = if plan.allow_write {
        t.dev.open_bar(plan.bar, Mapping::Uc, IoMode::Mmap)?
    } else {
        t.dev.open_bar_read_only(plan.bar, Mapping::Uc, IoMode::Mmap)?
    };
    // Every width is checked before anything runs: named ones must work, the default list
    // keeps a skipped row for what this CPU or BAR cannot do.
    let mut accesses = Vec::new();
    for &w in &plan.widths {
        match Access::new(region.as_ref(), plan.offset, w) {
            Ok(a) => accesses.push(Ok(a)),
            Err(e) if plan.strict_width || matches!(e, Error::Usage(_)) => return Err(e),
            Err(e) => accesses.push(Err((w, e.to_string()))),
        }
    }
    let load_access = match &plan.load {
        Some(l) => Some(Access::new(region.as_ref(), plan.offset, l.width)?),
        None => None,
    };
    if (plan.dma.is_some() || plan.load.is_some()) && t.engine.is_none() {
        return Err(Error::usage("DMA latency and load need a DMA engine: none was opened"));
    }
    let simulated = t.device.simulated();
    let mut report = Report::new(Kind::Latency, t.device.name(), simulated, t.dev.via(), s.overhead.median_s * 1e9);
    if !simulated {
        report.warnings.extend(mmio::mapping_note().map(String::from));
    }
    let mut engine = t.engine.take();
    let borrowed = engine.as_mut().map(|(e, a)| (&mut **e, *a));
    match rows(t.dev, simulated, t.irq, region.as_ref(), &accesses, load_access, borrowed, plan, s, &mut report) {
        Ok(()) => Ok(report),
        // The card stopped answering: the rows before are kept, the one line says so, and the
        // engine is stopped where its registers still answer (as the DMA runner does).
        Err(Error::Gone(what)) => {
            if let Some((e, _)) = engine {
                let _ = e.stop();
            }
            report.gone = Some(super::gone::line(t.device.name(), &what, s));
            Ok(report)
        }
        Err(e) => Err(e),
    }
}

/// What `run` measures once the BAR is open and the widths are checked: the MMIO rows, then
/// DMA latency and the reads under load where an engine was opened.
#[allow(clippy::too_many_arguments)]
fn rows(
    dev: &dyn DeviceAccess,
    simulated: bool,
    irq: Option<&dyn crate::access::Interrupts>,
    region: &dyn BarRegion,
    accesses: &[std::result::Result<Access, (Width, String)>],
    load_access: Option<Access>,
    engine: Option<(&mut (dyn Engine + '_), &dyn DmaAllocator)>,
    plan: &LatencyPlan,
    s: &mut Sampling,
    report: &mut Report,
) -> Result<()> {
    for a in accesses {
        let a = match a {
            Ok(a) => *a,
            Err((w, why)) => {
                let mut r = mmio_row_shell(region, plan.offset, *w, Probe::MmioRead);
                r.notes.push(Note::Skipped { reason: why.clone() });
                report.results.push(r);
                continue;
            }
        };
        let mut probes = vec![Probe::MmioRead];
        if plan.allow_write {
            probes.push(Probe::WriteRead);
        }
        for probe in probes {
            let row = mmio_row(a, probe, plan, s)?;
            if push(report, row) {
                return Ok(());
            }
        }
    }
    let Some((engine, alloc)) = engine else { return Ok(()) };
    let _bus_master = BusMaster::enable(dev)?;
    report.engine = Some(engine.name().to_string());
    if let Some(d) = &plan.dma {
        let rows = match &d.rate {
            Some(rate) => dma::rate_rows(engine, alloc, d, rate, s, report)?,
            None => dma::rows(engine, alloc, irq, d, s, report)?,
        };
        for row in rows {
            if push(report, row) {
                return Ok(());
            }
        }
        if d.completions.contains(&super::result::Completion::Irq) {
            report.irq_wake = Some(wake::eventfd_wake(wake::WAKES)?);
        }
    }
    if let (Some(l), Some(a)) = (&plan.load, load_access) {
        let mut rig = load::Rig::new(engine, alloc, l)?;
        report.addressing.get_or_insert(rig.addressing());
        report.buffer.get_or_insert(rig.describe());
        report.warnings.extend(rig.warning());
        if simulated {
            report.warnings.push(SIM_LOAD.into());
        }
        under_load(&mut rig, l, a, plan, s, report)?;
    }
    Ok(())
}

/// The read again under each load mode, until done or interrupted.
fn under_load(
    rig: &mut load::Rig,
    l: &LoadPlan,
    a: Access,
    plan: &LatencyPlan,
    s: &mut Sampling,
    report: &mut Report,
) -> Result<()> {
    for &mode in &l.modes {
        let (row, load_figures, verify) = rig.under(mode, s.stop, || mmio_row(a, Probe::MmioRead, plan, s))?;
        let row = with_load(row, load_figures, verify, &mut report.warnings);
        if push(report, row) {
            break;
        }
    }
    Ok(())
}

/// Add a row; true when it was interrupted (the run stops there).
fn push(report: &mut Report, row: Row) -> bool {
    let stopped = row.notes.iter().any(|n| matches!(n, Note::Interrupted { .. }));
    report.interrupted |= stopped;
    report.results.push(row);
    stopped
}

/// A load row: the read's latency, the load's throughput, and the load's data verification as
/// the row's (it is the data that moved).
fn with_load(mut row: Row, load: LoadFigures, verify: Verify, warnings: &mut Vec<String>) -> Row {
    let why = match &verify {
        Verify::Mismatch { mismatch } => Some(mismatch.to_string()),
        // A stream engine's far end checked what H2C sent.
        Verify::Rejected { reason } => Some(reason.clone()),
        _ => None,
    };
    if let Some(why) = why {
        warnings.push(format!("{} load ({}): the streamed data did not verify: {why}", load.label(), load.engine));
    }
    row.load = Some(load);
    row.verify = Some(verify);
    row
}

fn mmio_row_shell(region: &dyn BarRegion, off: u64, w: Width, probe: Probe) -> Row {
    let mut r = Row::new(Direction::C2h, w.bytes() as u64);
    r.bar = Some(region.index());
    r.bar_size = Some(region.len());
    r.offset = Some(off);
    r.width = Some(w);
    r.probe = Some(probe);
    r
}

/// One MMIO row: the value at the offset read first (untimed), then the samples.
fn mmio_row(a: Access, probe: Probe, plan: &LatencyPlan, s: &mut Sampling) -> Result<Row> {
    let mut line = [0u64; 8];
    let first = a.read(&mut line)?;
    let keep = line;
    let mut differ = 0u64;
    let warmup = plan.warmup_for(plan.samples);
    let bytes = a.w.bytes() as u64;
    let single = match probe {
        Probe::WriteRead => s.single_within(warmup, plan.samples, plan.budget_ns, bytes, || {
            // The value read first goes back, so a register keeps its contents.
            a.write(first, &keep)?;
            differ += (a.read(&mut line)? != first) as u64;
            Ok(())
        })?,
        _ => s.single_within(warmup, plan.samples, plan.budget_ns, bytes, || {
            differ += (a.read(&mut line)? != first) as u64;
            Ok(())
        })?,
    };
    let mut row = mmio_row_shell(a.region, a.off, a.w, probe);
    let calls = single.warmup + single.hist.len();
    row.verify = Some(match probe {
        Probe::WriteRead if differ == 0 => Verify::Ok,
        Probe::WriteRead => Verify::Unverified {
            reason: format!(
                "wrote back {first:#x} (the value read first) before each read; {differ} of {calls} reads returned something else (a register, not memory)"
            ),
        },
        _ if a.all_ones(first) && differ == 0 => Verify::Unverified {
            reason: format!(
                "every read returned all-ones ({first:#x}): the device may not decode {}-bit accesses at this offset, or it is gone, or Memory Space is off (pcibench info)",
                a.w
            ),
        },
        _ => Verify::Unverified {
            reason: match differ {
                0 => format!("reads only: BAR{}+{:#x} read {first:#x} every time", a.region.index(), a.off),
                n => format!("reads only: BAR{}+{:#x} read {first:#x} first; {n} of {calls} reads differed", a.region.index(), a.off),
            },
        },
    });
    finish(&mut row, &single, s.clock);
    Ok(row)
}

#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
