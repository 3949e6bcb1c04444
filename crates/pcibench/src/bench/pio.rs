//! The PIO runner: per BAR × mapping × width × size × direction, timed copies through a BAR
//! mapping (or one syscall per access), statistics, the link model's limit, and verification
//! of a pattern that changes from run to run.

use super::pattern::{verify, Mismatch, Pattern};
use super::stats::{Samples, Stats};
use super::timer::{calibrate, TimerOverhead};
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping, Via};
use crate::dma::Direction;
use crate::mmio::{self, Width};
use crate::pci::link::Link;
use crate::{Error, Result};
use serde::Serialize;
use std::time::Instant;

/// `--map`: the memory type, and whether the timed part ends by draining posted writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapMode {
    Uc,
    Wc,
    WcFlush,
}

impl MapMode {
    pub const ALL: [MapMode; 3] = [MapMode::Uc, MapMode::Wc, MapMode::WcFlush];

    pub fn mapping(&self) -> Mapping {
        match self {
            MapMode::Uc => Mapping::Uc,
            MapMode::Wc | MapMode::WcFlush => Mapping::Wc,
        }
    }

    /// fpga_sio's words for it.
    pub fn seed_name(&self) -> &'static str {
        match self {
            MapMode::Uc => "uncached-minus",
            MapMode::Wc => "write-combining",
            MapMode::WcFlush => "write-combining (flush posted writes)",
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            MapMode::Uc => "uc",
            MapMode::Wc => "wc",
            MapMode::WcFlush => "wc-flush",
        }
    }
}

/// What to measure. Sizes empty means the whole BAR (from `offset`), as fpga_sio.
#[derive(Debug, Clone)]
pub struct PioPlan {
    pub bars: Vec<u8>,
    pub maps: Vec<MapMode>,
    pub dirs: Vec<Direction>,
    pub widths: Vec<Width>,
    pub sizes: Vec<u64>,
    /// Bytes to move per configuration (samples repeat until this is reached).
    pub total: u64,
    pub offset: u64,
    pub io: IoMode,
    pub allow_write: bool,
    /// When the user named the mapping(s), a mapping the path cannot provide is an error;
    /// with `all`, it becomes a skipped row with the reason.
    pub strict_map: bool,
    /// The same for copy widths this CPU lacks.
    pub strict_width: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Mismatch {
        mismatch: Mismatch,
    },
    /// Nothing known to compare with (reads without permission to write a pattern first).
    Unverified {
        reason: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct PioResult {
    pub bar: u8,
    pub map: MapMode,
    pub io: IoMode,
    pub dir: Direction,
    pub width: Width,
    pub size: u64,
    pub offset: u64,
    pub stats: Option<Stats>,
    /// The link model's limit for this direction at the TLP payload this routine produces.
    pub limit_mbps: Option<f64>,
    pub efficiency_pct: Option<f64>,
    pub verify: Option<Verdict>,
    /// SHA-256 of this configuration's pattern: what the BAR holds at [offset, offset+size) after a
    /// run that wrote it, so an independent reader (the lab's host side) can check the card.
    pub pattern_sha256: Option<String>,
    /// Why a row was skipped, or notes such as batching.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PioReport {
    pub device: String,
    pub simulated: bool,
    pub via: Via,
    pub timer_overhead_ns: f64,
    pub results: Vec<PioResult>,
    pub warnings: Vec<String>,
}

/// Progress in bytes moved, for a progress bar.
pub type Progress<'a> = &'a mut dyn FnMut(u64);

impl PioPlan {
    /// Bytes this plan will move (for a progress bar's length).
    pub fn planned_bytes(&self) -> u64 {
        let sizes = self.sizes.len().max(1) as u64;
        let configs = self.bars.len() * self.maps.len() * self.widths.len() * self.dirs.len();
        configs as u64 * sizes * self.total
    }
}

/// The TLP payload a CPU copy produces: one access per TLP on UC; WC buffers combine up to a
/// 64-byte line (Intel SDM Vol. 3 §11.3.1); either way no more than MPS.
fn tlp_payload(map: MapMode, w: Width, mps: u32) -> u64 {
    let access = match w {
        Width::Memcpy => 8,
        _ => w.bytes() as u64,
    };
    let p = if map == MapMode::Uc { access } else { 64 };
    p.min(mps as u64)
}

pub fn run(
    dev: &dyn DeviceAccess,
    device: &str,
    simulated: bool,
    link: Option<Link>,
    plan: &PioPlan,
    progress: Progress,
) -> Result<PioReport> {
    let timer = TimerOverhead::measure();
    let mut report = PioReport {
        device: device.to_string(),
        simulated,
        via: dev.via(),
        timer_overhead_ns: timer.median_s * 1e9,
        results: Vec::new(),
        warnings: Vec::new(),
    };
    if !simulated {
        // uc/wc are named after x86's PAT types: say what they are here (mmio::mapping_note).
        report.warnings.extend(mmio::mapping_note().map(String::from));
    }
    let mut pattern = Pattern::fresh();
    for &bar in &plan.bars {
        for &map in &plan.maps {
            let region = match dev.open_bar(bar, map.mapping(), plan.io) {
                Ok(r) => r,
                Err(e) if !plan.strict_map => {
                    report.results.push(skipped(bar, map, plan, e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            for &w in &plan.widths {
                if let Err(e) = mmio::available(w) {
                    if plan.strict_width {
                        return Err(e);
                    }
                    report.results.push(PioResult { width: w, ..skipped(bar, map, plan, e.to_string()) });
                    continue;
                }
                let sizes = if plan.sizes.is_empty() {
                    vec![region.len().saturating_sub(plan.offset)]
                } else {
                    plan.sizes.clone()
                };
                for &size in &sizes {
                    check_range(region.as_ref(), plan.offset, size, w)?;
                    pattern = pattern.successor();
                    let rows = run_one(region.as_ref(), map, w, size, plan, pattern, &timer, link, progress)?;
                    for r in &rows {
                        if let Some(Verdict::Mismatch { .. }) = &r.verify {
                            report.warnings.push(format!(
                                "BAR{bar} {} {} width {w} size {size}: data did not verify",
                                map.name(),
                                r.dir
                            ));
                        }
                    }
                    report.results.extend(rows);
                }
            }
        }
    }
    Ok(report)
}

fn skipped(bar: u8, map: MapMode, plan: &PioPlan, why: String) -> PioResult {
    PioResult {
        bar,
        map,
        io: plan.io,
        dir: plan.dirs.first().copied().unwrap_or(Direction::H2c),
        width: plan.widths.first().copied().unwrap_or(Width::B32),
        size: 0,
        offset: plan.offset,
        stats: None,
        limit_mbps: None,
        efficiency_pct: None,
        verify: None,
        pattern_sha256: None,
        notes: vec![format!("skipped: {why}")],
    }
}

/// Offsets and sizes respect the width's alignment and stay inside the BAR.
pub fn check_range(region: &dyn BarRegion, offset: u64, size: u64, w: Width) -> Result<()> {
    let len = region.len();
    let g = w.bytes() as u64;
    if size == 0 {
        return Err(Error::usage("transfer size is 0: give --size of at least one access"));
    }
    match offset.checked_add(size) {
        Some(end) if end <= len => {}
        _ => {
            return Err(Error::Refused(format!(
                "offset {offset:#x} + size {size:#x} is past the end of BAR{} ({len:#x} bytes): choose a smaller --size or --offset",
                region.index()
            )))
        }
    }
    let base = region.ptr().map_or(0, |p| p as u64);
    if (base + offset) % g != 0 || size % g != 0 {
        return Err(Error::usage(format!(
            "width {w} moves {g}-byte accesses: offset {offset:#x} and size {size:#x} must be multiples of {g}"
        )));
    }
    Ok(())
}

/// One transfer in the chosen direction: through the mapping, or per-access syscalls.
fn transfer(region: &dyn BarRegion, dir: Direction, w: Width, off: u64, host: &mut [u8]) -> Result<()> {
    match region.ptr() {
        Some(base) => {
            // SAFETY: check_range kept [off, off+len) inside the mapping and aligned to the
            // width; mmio::available(w) was checked; `host` is a distinct live buffer.
            unsafe {
                let bar = base.add(off as usize);
                match dir {
                    Direction::H2c => mmio::copy_to_io(w, bar, host.as_ptr(), host.len()),
                    Direction::C2h => mmio::copy_from_io(w, host.as_mut_ptr(), bar, host.len()),
                }
            }
            Ok(())
        }
        None => match dir {
            Direction::H2c => region.write_bulk(off, host, scalar_for_syscall(w)),
            Direction::C2h => region.read_bulk(off, host, scalar_for_syscall(w)),
        },
    }
}

/// pread/pwrite take 1/2/4/8-byte accesses: wider routines map to 64-bit accesses there.
fn scalar_for_syscall(w: Width) -> Width {
    if w.is_scalar() {
        w
    } else {
        Width::B64
    }
}

/// Read the BAR back for verification with the fastest safe routine (never timed).
fn read_back(region: &dyn BarRegion, off: u64, buf: &mut [u8]) -> Result<()> {
    let at = region.ptr().map_or(off, |p| p as u64 + off);
    let w = [Width::V512, Width::V256, Width::V128, Width::B64]
        .into_iter()
        .find(|w| mmio::available(*w).is_ok() && at % w.bytes() as u64 == 0 && buf.len() % w.bytes() == 0)
        .unwrap_or(Width::B8);
    transfer(region, Direction::C2h, w, off, buf)
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    region: &dyn BarRegion,
    map: MapMode,
    w: Width,
    size: u64,
    plan: &PioPlan,
    pattern: Pattern,
    timer: &TimerOverhead,
    link: Option<Link>,
    progress: Progress,
) -> Result<Vec<PioResult>> {
    let off = plan.offset;
    let expected = pattern.generate(size as usize);
    let mut host = vec![0u8; size as usize];
    let mut wrote = false;
    let mut rows = Vec::new();
    for &dir in &plan.dirs {
        let mut notes = Vec::new();
        if dir == Direction::H2c && !plan.allow_write {
            notes.push("skipped: host-to-card writes need --allow-write".to_string());
            rows.push(row(region, map, w, size, plan, dir, None, link, None, None, notes));
            continue;
        }
        if dir == Direction::C2h && !w.reads() {
            notes.push(format!("skipped: width {w} has no load form (stores only)"));
            rows.push(row(region, map, w, size, plan, dir, None, link, None, None, notes));
            continue;
        }
        if dir == Direction::C2h && !wrote && plan.allow_write {
            // Give the reads something known to verify against (untimed).
            transfer(region, Direction::H2c, w, off, &mut expected.clone())?;
            flush(region, map, off)?;
            wrote = true;
        }
        let buf: &mut [u8] = if dir == Direction::H2c {
            host.copy_from_slice(&expected);
            &mut host
        } else {
            host.fill(0);
            &mut host
        };
        // Warm up untimed, then find how many transfers a sample needs to dwarf the timer.
        transfer(region, dir, w, off, buf)?;
        let batch = calibrate(timer, |k| {
            for _ in 0..k {
                transfer(region, dir, w, off, buf)?;
                if map == MapMode::WcFlush {
                    flush(region, map, off)?;
                }
            }
            Ok::<(), Error>(())
        })?;
        if batch > 1 {
            notes.push(format!(
                "batched {batch} transfers per sample: one transfer is too short to time alone (timer overhead {:.0} ns)",
                timer.median_s * 1e9
            ));
        }
        let transfers = (plan.total / size).max(1);
        let samples = transfers.div_ceil(batch);
        let mut s = Samples::new(size, batch);
        s.secs.reserve(samples as usize);
        for _ in 0..samples {
            let t = Instant::now();
            for _ in 0..batch {
                transfer(region, dir, w, off, buf)?;
                if map == MapMode::WcFlush {
                    flush(region, map, off)?;
                }
            }
            s.secs.push(t.elapsed().as_secs_f64());
            progress(size * batch);
        }
        let verdict = match dir {
            Direction::H2c => {
                wrote = true;
                let mut back = vec![0u8; size as usize];
                read_back(region, off, &mut back)?;
                Some(to_verdict(verify(&expected, &back, off)))
            }
            Direction::C2h if wrote => Some(to_verdict(verify(&expected, buf, off))),
            Direction::C2h => {
                let mut again = vec![0u8; size as usize];
                read_back(region, off, &mut again)?;
                Some(match verify(buf, &again, off) {
                    Ok(()) => Verdict::Unverified {
                        reason: "read-only run: two reads agree; --allow-write writes a pattern to verify against"
                            .into(),
                    },
                    Err(m) => Verdict::Mismatch { mismatch: m },
                })
            }
        };
        if dir == Direction::C2h && buf.iter().all(|b| *b == 0xff) {
            notes.push(
                "the BAR reads all-ones end to end: the device may be gone, or Memory Space is disabled \
                 (check `pcibench info`: Control Mem-)"
                    .into(),
            );
        }
        let stats = s.stats();
        let sha = wrote.then(|| sha256_hex(&expected));
        rows.push(row(region, map, w, size, plan, dir, stats, link, verdict, sha, notes));
    }
    Ok(rows)
}

/// Drain posted writes: SFENCE, then a read from the BAR (the read cannot pass the writes,
/// PCIe Base Spec ordering rules), so the timed part includes their delivery.
fn flush(region: &dyn BarRegion, map: MapMode, off: u64) -> Result<()> {
    if map == MapMode::Uc {
        return Ok(());
    }
    mmio::store_fence();
    region.read(off & !7, Width::B32)?;
    Ok(())
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

fn to_verdict(r: std::result::Result<(), Mismatch>) -> Verdict {
    match r {
        Ok(()) => Verdict::Ok,
        Err(mismatch) => Verdict::Mismatch { mismatch },
    }
}

#[allow(clippy::too_many_arguments)]
fn row(
    region: &dyn BarRegion,
    map: MapMode,
    w: Width,
    size: u64,
    plan: &PioPlan,
    dir: Direction,
    stats: Option<Stats>,
    link: Option<Link>,
    verify: Option<Verdict>,
    sha: Option<String>,
    notes: Vec<String>,
) -> PioResult {
    let limit = link.map(|l| {
        let p = tlp_payload(map, w, l.mps);
        let bps = match dir {
            Direction::H2c => l.write_bps(p),
            Direction::C2h => l.read_bps(p),
        };
        bps / 1e6
    });
    let eff = match (&stats, limit) {
        (Some(s), Some(l)) if l > 0.0 => Some(s.mean_mbps / l * 100.0),
        _ => None,
    };
    PioResult {
        bar: region.index(),
        map,
        io: plan.io,
        dir,
        width: w,
        size,
        offset: plan.offset,
        stats,
        limit_mbps: limit,
        efficiency_pct: eff,
        verify,
        pattern_sha256: sha,
        notes,
    }
}

#[cfg(test)]
#[path = "pio_tests.rs"]
mod tests;
