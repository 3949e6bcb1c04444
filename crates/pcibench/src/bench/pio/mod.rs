//! The PIO runner: per BAR × mapping × width × size × direction, timed copies through a BAR
//! mapping (or one syscall per access), statistics, the link model's limit, and verification
//! of a pattern that changes from run to run.

use super::pattern::{verify, Mismatch, Pattern};
use super::result::{Kind, Note, Report, Row, Verify};
use super::sample::sampler::{check_total, Sampling};
use crate::access::{BarRegion, DeviceAccess, IoMode};
use crate::device::Device;
use crate::direction::Direction;
use crate::dma::engines::RegisterBar;
use crate::mmio::{self, HostBuf, MemType, Width};
use crate::pci::link::Link;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

pub use super::result::MapMode;

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
    /// The total was not given: each row also stops once its samples took this many ns
    /// (`sampler::ROW_BUDGET_NS`).
    pub budget_ns: Option<u64>,
    pub offset: u64,
    pub io: IoMode,
    pub allow_write: bool,
    /// When the user named the mapping(s), a mapping the path cannot provide is an error;
    /// with `all`, it becomes a skipped row with the reason.
    pub strict_map: bool,
    /// The same for copy widths this CPU lacks.
    pub strict_width: bool,
    /// BARs among `bars` that hold an engine's registers: read only, at the widths they decode
    /// (`check_registers`), and not compared with a pattern (registers hold none).
    pub registers: Vec<RegisterBar>,
}

impl PioPlan {
    /// Bytes this plan will move (for a progress bar's length).
    pub fn planned_bytes(&self) -> u64 {
        let sizes = self.sizes.len().max(1) as u64;
        let configs = self.bars.len() * self.maps.len() * self.widths.len() * self.dirs.len();
        (configs as u64).saturating_mul(sizes).saturating_mul(self.total)
    }
}

impl PioPlan {
    /// More than one configuration: a combination that cannot run (a size past a small BAR, a
    /// width a size is not a multiple of) is skipped with a note instead of ending the run.
    pub fn is_sweep(&self) -> bool {
        self.sizes.len() > 1 || self.widths.len() > 1 || self.bars.len() > 1
    }

    /// The transfer sizes each BAR will see.
    fn sizes_for(&self, bar_len: u64) -> Vec<u64> {
        if self.sizes.is_empty() {
            vec![bar_len.saturating_sub(self.offset)]
        } else {
            self.sizes.clone()
        }
    }
}

/// The copy routines a plan may use with `io`: one pread/pwrite per access moves 8/16/32/64-bit
/// words, so a wider routine named on its own is refused (it would be mislabelled) and `all`
/// keeps the scalar widths.
pub fn widths_for_io(widths: Vec<Width>, strict: bool, io: IoMode) -> Result<Vec<Width>> {
    if io == IoMode::Mmap {
        return Ok(widths);
    }
    if strict {
        if let Some(w) = widths.iter().find(|w| !w.is_scalar()) {
            return Err(Error::usage(format!(
                "--io syscall moves one 8, 16, 32 or 64-bit word per pread/pwrite: --width {w} does not apply (use --width 64)"
            )));
        }
        return Ok(widths);
    }
    Ok(widths.into_iter().filter(|w| w.is_scalar()).collect())
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

/// Measure `plan` on `device`, opened as `dev`.
pub fn run(dev: &dyn DeviceAccess, device: &Device, plan: &PioPlan, s: &mut Sampling) -> Result<Report> {
    // --total against every size that will run, before anything does.
    let mut all_sizes: Vec<u64> = Vec::new();
    for &bar in &plan.bars {
        let len = device.info.bar(bar).map_or(0, |b| b.size);
        all_sizes.extend(plan.sizes_for(len).into_iter().filter(|sz| plan.offset.saturating_add(*sz) <= len));
    }
    check_total(plan.total, &all_sizes)?;
    check_registers(plan, device)?;
    let simulated = device.simulated();
    let mut report = Report::new(Kind::Pio, device.name(), simulated, dev.via(), s.overhead.median_s * 1e9);
    if !simulated {
        // uc/wc are named after x86's PAT types: say what they are here (mmio::mapping_note).
        report.warnings.extend(mmio::mapping_note().map(String::from));
    }
    let mut pattern = Pattern::fresh();
    'all: for &bar in &plan.bars {
        for &map in &plan.maps {
            // Without consent to write, the BAR is opened read-only: read permission is enough.
            let opened = if plan.allow_write {
                dev.open_bar(bar, map.mapping(), plan.io)
            } else {
                dev.open_bar_read_only(bar, map.mapping(), plan.io)
            };
            let region = match opened {
                Ok(r) => r,
                Err(e) if !plan.strict_map => {
                    report.results.push(skipped(bar, map, plan, None, e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let registers = plan.registers.iter().find(|r| r.bar == bar);
            for &w in &plan.widths {
                if let Some(why) = registers.and_then(|r| refused_width(r, w, device)) {
                    // Named widths were refused up front (`check_registers`): this is `--width all`.
                    report.results.push(skipped(bar, map, plan, Some(w), why));
                    continue;
                }
                if let Err(e) = mmio::available(w) {
                    if plan.strict_width {
                        return Err(e);
                    }
                    report.results.push(skipped(bar, map, plan, Some(w), e.to_string()));
                    continue;
                }
                for size in plan.sizes_for(region.len()) {
                    if let Err(e) = check_range(region.as_ref(), plan.offset, size, w) {
                        if !plan.is_sweep() {
                            return Err(e);
                        }
                        let mut r = skipped(bar, map, plan, Some(w), e.to_string());
                        r.size = size;
                        report.results.push(r);
                        continue;
                    }
                    pattern = pattern.successor();
                    let (region, link) = (region.as_ref(), device.bounding_link());
                    let one = One { region, map, w, size, plan, pattern, link, registers };
                    let rows = match one.run(s) {
                        Err(Error::Gone(what)) => {
                            report.gone = Some(super::gone::line(device.name(), &what, s));
                            break 'all;
                        }
                        r => r?,
                    };
                    // A row that read all-ones or did not verify: is the card still there?
                    let suspicious = rows.iter().any(|r| r.mismatch().is_some() || r.notes.contains(&Note::AllOnes));
                    if let Some(what) = suspicious.then(|| super::gone::check(dev, s)).flatten() {
                        report.gone = Some(super::gone::line(
                            device.name(),
                            &format!("a row read all-ones or did not verify, and {what}"),
                            s,
                        ));
                        report.results.extend(rows);
                        break 'all;
                    }
                    for r in &rows {
                        if r.mismatch().is_some() {
                            report.warnings.push(format!(
                                "BAR{bar} {} {} width {w} size {size}: data did not verify",
                                map.name(),
                                r.dir
                            ));
                        }
                        if r.notes.iter().any(|n| matches!(n, Note::Interrupted { .. })) {
                            report.interrupted = true;
                        }
                    }
                    report.results.extend(rows);
                    if report.interrupted {
                        break 'all;
                    }
                }
            }
        }
    }
    Ok(report)
}

/// An engine's register BAR named with `--bar` is read only, at the widths it decodes: a width
/// it does not (or directions without a read) refused here, once, before anything runs, with the
/// options that work (`--width all` skips the widths instead).
fn check_registers(plan: &PioPlan, device: &Device) -> Result<()> {
    for r in plan.registers.iter().filter(|r| plan.bars.contains(&r.bar)) {
        let held = format!("BAR{} of {} holds the {} engine's registers", r.bar, device.name(), r.engine);
        if !plan.dirs.contains(&Direction::C2h) {
            return Err(Error::usage(format!(
                "{held}: pio reads them only (test patterns written there would program the engine): use --dir c2h"
            )));
        }
        if let Some(w) = plan.widths.iter().find(|w| !r.widths.contains(w)).filter(|_| plan.strict_width) {
            let widest = r.widths.last().map_or(32, |w| w.bytes() * 8);
            return Err(Error::usage(format!(
                "{held}, which take {} accesses: --width {w} does not apply; use --width {widest}",
                r.widths_words()
            )));
        }
    }
    Ok(())
}

/// Why register BAR `r` is not read at `w` (None: it is).
fn refused_width(r: &RegisterBar, w: Width, device: &Device) -> Option<String> {
    (!r.widths.contains(&w)).then(|| {
        format!(
            "BAR{} of {} holds the {} engine's registers, which take {} accesses",
            r.bar,
            device.name(),
            r.engine,
            r.widths_words()
        )
    })
}

fn skipped(bar: u8, map: MapMode, plan: &PioPlan, w: Option<Width>, why: String) -> Row {
    let mut r = Row::new(plan.dirs.first().copied().unwrap_or(Direction::H2c), 0);
    r.bar = Some(bar);
    r.map = Some(map);
    r.io = Some(plan.io);
    r.width = Some(w.or(plan.widths.first().copied()).unwrap_or(Width::B32));
    r.offset = Some(plan.offset);
    r.notes.push(Note::Skipped { reason: why });
    r
}

/// Offsets and sizes respect the width's alignment and stay inside the BAR.
pub fn check_range(region: &dyn BarRegion, offset: u64, size: u64, w: Width) -> Result<()> {
    let len = region.len();
    let g = w.bytes() as u64;
    // The offset first: with no --size the size is what is left of the BAR past it, so an
    // offset at the end would otherwise be blamed on the size.
    if offset >= len {
        return Err(Error::usage(format!(
            "--offset {offset:#x} is past the end of BAR{} ({len:#x} bytes): give an offset below {len:#x}",
            region.index()
        )));
    }
    if size == 0 {
        return Err(Error::usage("transfer size is 0: give --size of at least one access"));
    }
    match offset.checked_add(size) {
        Some(end) if end <= len => {}
        _ => {
            return Err(Error::usage(format!(
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

/// Accesses a transfer without a mapping makes between looks at the stop flag: each is a syscall
/// or a vfio-user message there, and a 1 MiB transfer of messages takes seconds.
const ACCESSES_BETWEEN_STOPS: usize = 64;

/// One transfer in the chosen direction: through the mapping, or per-access syscalls (or
/// messages), in runs of `ACCESSES_BETWEEN_STOPS` with the stop flag looked at between them. `mem`
/// is the region's memory type, read once per configuration (it picks the routine's loads). True
/// when the stop cut the transfer short.
fn transfer(
    region: &dyn BarRegion,
    mem: MemType,
    dir: Direction,
    w: Width,
    off: u64,
    host: &mut [u8],
    stop: &AtomicBool,
) -> Result<bool> {
    let Some(base) = region.ptr() else {
        let w = scalar_for_syscall(w);
        let run = ACCESSES_BETWEEN_STOPS * w.bytes();
        for (i, part) in host.chunks_mut(run).enumerate() {
            if stop.load(Ordering::Relaxed) {
                return Ok(true);
            }
            let at = off + (i * run) as u64;
            match dir {
                Direction::H2c => region.write_bulk(at, part, w)?,
                Direction::C2h => region.read_bulk(at, part, w)?,
            }
        }
        return Ok(false);
    };
    // SAFETY: check_range kept [off, off+len) inside the mapping and aligned to the width;
    // mmio::available(w) was checked; `host` is a distinct live buffer.
    unsafe {
        let bar = base.add(off as usize);
        match dir {
            Direction::H2c => mmio::copy_to_io(w, mem, bar, host.as_ptr(), host.len()),
            Direction::C2h => mmio::copy_from_io(w, mem, host.as_mut_ptr(), bar, host.len()),
        }
    }
    Ok(false)
}

/// `k` transfers of `host` through the mapping at `bar`, back to back.
///
/// # Safety
/// As `transfer`'s mapped case: `bar..bar+host.len()` inside the mapping and aligned to `w`,
/// `mmio::available(w)` checked.
#[inline(never)]
unsafe fn copies(k: u64, w: Width, mem: MemType, dir: Direction, bar: *mut u8, host: &mut [u8]) {
    let (h, len) = (host.as_mut_ptr(), host.len());
    // SAFETY: the caller's contract, each time.
    unsafe {
        match dir {
            Direction::H2c => (0..k).for_each(|_| mmio::copy_to_io(w, mem, bar, h, len)),
            Direction::C2h => (0..k).for_each(|_| mmio::copy_from_io(w, mem, h, bar, len)),
        }
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

/// Read the BAR back for verification with the fastest safe routine (never timed); true when the
/// stop cut it short.
fn read_back(region: &dyn BarRegion, off: u64, buf: &mut [u8], stop: &AtomicBool) -> Result<bool> {
    let at = region.ptr().map_or(off, |p| p as u64 + off);
    let w = [Width::V512, Width::V256, Width::V128, Width::B64]
        .into_iter()
        .find(|w| mmio::available(*w).is_ok() && at % w.bytes() as u64 == 0 && buf.len() % w.bytes() == 0)
        .unwrap_or(Width::B8);
    transfer(region, region.mem_type(), Direction::C2h, w, off, buf, stop)
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

fn to_verify(r: std::result::Result<(), Mismatch>) -> Verify {
    match r {
        Ok(()) => Verify::Ok,
        Err(mismatch) => Verify::Mismatch { mismatch },
    }
}

/// One BAR × mapping × width × size, both directions.
struct One<'a> {
    region: &'a dyn BarRegion,
    map: MapMode,
    w: Width,
    size: u64,
    plan: &'a PioPlan,
    pattern: Pattern,
    link: Option<Link>,
    /// The BAR holds an engine's registers: read only, never compared with a pattern.
    registers: Option<&'a RegisterBar>,
}

impl One<'_> {
    fn row(&self, dir: Direction) -> Row {
        let mut r = Row::new(dir, self.size);
        r.bar = Some(self.region.index());
        r.bar_size = Some(self.region.len());
        r.map = Some(self.map);
        r.mem = Some(self.region.mem_type());
        r.io = Some(self.region.io_mode().unwrap_or(self.plan.io));
        r.width = Some(self.w);
        r.offset = Some(self.plan.offset);
        r
    }

    fn limit(&self, dir: Direction) -> Option<f64> {
        self.link.map(|l| {
            let p = tlp_payload(self.map, self.w, l.mps);
            match dir {
                Direction::H2c => l.write_bps(p) / 1e6,
                Direction::C2h => l.read_bps(p) / 1e6,
            }
        })
    }

    /// Why the row in `dir` is not measured (None: it is).
    fn skip(&self, dir: Direction) -> Option<String> {
        match (dir, self.registers) {
            (Direction::H2c, Some(r)) => Some(format!(
                "BAR{} holds the {} engine's registers: pio reads them only (test patterns written there would program the engine)",
                r.bar, r.engine
            )),
            (Direction::H2c, None) if !self.plan.allow_write => Some("host-to-card writes need --allow-write".into()),
            (Direction::C2h, _) if !self.w.reads() => Some(format!("width {} has no load form (stores only)", self.w)),
            _ => None,
        }
    }

    fn run(&self, s: &mut Sampling) -> Result<Vec<Row>> {
        let (region, map, w, off) = (self.region, self.map, self.w, self.plan.offset);
        let mem = region.mem_type();
        let stop = s.stop;
        // The probe pass (`bench::sample::estimate`) wants each row's time, nothing else: no data
        // is placed or checked, and a transfer of syscalls or messages is timed by its first
        // accesses (whole, one would take seconds there).
        let probing = s.progress.probing();
        let expected = self.pattern.try_generate(self.size as usize)?;
        // Page-aligned, so a vector routine's host-side accesses never straddle two lines.
        let mut host = HostBuf::zeroed(self.size as usize)?;
        let mut wrote = false;
        let mut rows = Vec::new();
        for &dir in &self.plan.dirs {
            let mut row = self.row(dir);
            if let Some(reason) = self.skip(dir) {
                row.notes.push(Note::Skipped { reason });
                rows.push(row);
                continue;
            }
            if dir == Direction::C2h && !wrote && self.plan.allow_write && self.registers.is_none() && !probing {
                // Give the reads something known to verify against (untimed).
                if transfer(region, mem, Direction::H2c, w, off, &mut HostBuf::copy_of(&expected)?, stop)? {
                    row.notes.push(Note::Interrupted { engine: None });
                    rows.push(row);
                    break;
                }
                flush(region, map, off)?;
                wrote = true;
            }
            if dir == Direction::H2c {
                host.copy_from_slice(&expected);
            } else {
                host.fill(0);
            }
            // Through a mapping (wc-flush aside), the timed loop is the copy routine alone: the
            // BAR pointer, direction, width and memory type are fixed for the row, so a 4 KiB row
            // measures the routine, not the runner (a call through the region per transfer cost
            // 20% of memcpy's rate there).
            let mapped = region.ptr().filter(|_| map != MapMode::WcFlush);
            let (size, total, budget) = (self.size, self.plan.total, self.plan.budget_ns);
            let sampled = if probing && region.ptr().is_none() {
                let grain = scalar_for_syscall(w).bytes() as u64;
                s.probe_part(size, total, budget, grain * ACCESSES_BETWEEN_STOPS as u64, |n| {
                    transfer(region, mem, dir, w, off, &mut host[..n as usize], stop)
                })?
            } else {
                s.run_within(size, total, budget, |k| {
                    if let Some(base) = mapped {
                        // SAFETY: check_range kept [off, off+len) inside the mapping and aligned
                        // to the width; mmio::available(w) was checked; `host` is a distinct live
                        // buffer.
                        unsafe { copies(k, w, mem, dir, base.add(off as usize), &mut host) };
                        return Ok(());
                    }
                    for _ in 0..k {
                        // Cut short by a stop: the sampler keeps no sample it was raised during.
                        if transfer(region, mem, dir, w, off, &mut host, stop)? {
                            return Ok(());
                        }
                        if map == MapMode::WcFlush {
                            flush(region, map, off)?;
                        }
                    }
                    Ok(())
                })?
            };
            row.measured(&sampled, self.limit(dir), s.overhead.median_s * 1e9);
            if sampled.interrupted {
                row.notes.push(Note::Interrupted { engine: None });
            }
            if !probing {
                // A stop between the accesses of a transfer of syscalls or messages left it part
                // moved: nothing to compare.
                row.verify = Some(match sampled.interrupted && region.ptr().is_none() {
                    true => {
                        Verify::Unverified { reason: "the stop came mid-transfer: its data was not all moved".into() }
                    }
                    false => self.check(dir, &expected, &host, &mut wrote, stop)?,
                });
                if dir == Direction::C2h && host.iter().all(|b| *b == 0xff) {
                    row.notes.push(Note::AllOnes);
                }
            }
            row.pattern_sha256 = wrote.then(|| sha256_hex(&expected));
            let stop = sampled.interrupted;
            rows.push(row);
            if stop {
                break;
            }
        }
        Ok(rows)
    }

    /// The row's data after its samples: what H2C wrote read back, what C2H read against the
    /// pattern written first (or, reads only, against a second read).
    fn check(
        &self,
        dir: Direction,
        expected: &[u8],
        host: &[u8],
        wrote: &mut bool,
        stop: &AtomicBool,
    ) -> Result<Verify> {
        let (region, off) = (self.region, self.plan.offset);
        let cut = || Verify::Unverified { reason: "the stop came while it was read back".into() };
        Ok(match dir {
            Direction::H2c => {
                *wrote = true;
                let mut back = HostBuf::zeroed(self.size as usize)?;
                if read_back(region, off, &mut back, stop)? {
                    return Ok(cut());
                }
                to_verify(verify(expected, &back, off))
            }
            Direction::C2h if *wrote => to_verify(verify(expected, host, off)),
            // Status bits and counters change between reads: a second read proves nothing.
            Direction::C2h if self.registers.is_some() => Verify::Unverified {
                reason: "an engine's registers: they hold no test pattern, and reads of them need not agree".into(),
            },
            Direction::C2h => {
                let mut again = HostBuf::zeroed(self.size as usize)?;
                if read_back(region, off, &mut again, stop)? {
                    return Ok(cut());
                }
                match verify(host, &again, off) {
                    Ok(()) => Verify::Unverified {
                        reason: "read-only run: two reads agree; --allow-write writes a pattern to verify against"
                            .into(),
                    },
                    Err(m) => Verify::Mismatch { mismatch: m },
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
