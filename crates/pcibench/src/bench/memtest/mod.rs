//! `pcibench memtest`: the card memory a DMA engine reaches, all of it, verified, as fpga_sio's
//! memory tests do it. The region is filled through the engine a host-sized chunk at a time with
//! a pattern that encodes each address (8-byte word at A holds A ^ key, the key new each run),
//! then read back and checked a chunk at a time; then again with every bit inverted, so a bit
//! stuck either way shows. A word holding another address's data says whose (an address line
//! that does not decode: the memory aliases). Then the aliasing pass: a marker at offset 0 and at
//! each power of two inside the region, written in ascending order and read back, so a memory that
//! wraps at a power of two shows where. The report names the bad ranges and the size that really
//! answers. A stop (Ctrl-C) ends it between chunks with what was tested.

pub mod figures;
#[cfg(test)]
mod tests;

use self::figures::{Aliasing, Memtest, Ranges};
use super::dma::{bytes, bytes_mut, card_copy};
use super::pattern::{Mismatch, Pattern};
use super::result::{Kind, Report, Row, Verify};
use super::sample::sampler::Sampling;
use super::sample::stats::Samples;
use crate::access::{BusMaster, DeviceAccess};
use crate::device::Device;
use crate::direction::Direction;
use crate::dma::{DmaAllocator, DmaBuffer, Engine};
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The largest chunk when none is asked for: enough to reach an engine's speed, little enough for
/// any host to hold twice.
pub const DEFAULT_CHUNK: u64 = 64 << 20;

/// What to test.
#[derive(Debug, Clone)]
pub struct MemtestPlan {
    /// Where the region starts in the engine's window (`Transfer::card_addr`), and its bytes.
    pub offset: u64,
    pub size: u64,
    /// Bytes moved per transfer (host buffer size).
    pub chunk: u64,
    pub timeout: Duration,
    /// The card address of the window's start, for words (the engine's `--card-addr`).
    pub card_base: u64,
}

/// The card, its engine and where buffers come from.
pub struct MemtestSetup<'a> {
    pub dev: &'a dyn DeviceAccess,
    pub device: &'a Device,
    pub engine: &'a mut dyn Engine,
    pub alloc: &'a dyn DmaAllocator,
}

/// The word written at region offset `off` (a multiple of 8) in a pass.
fn word(key: u64, off: u64, invert: bool) -> u64 {
    let w = off ^ key;
    if invert {
        !w
    } else {
        w
    }
}

/// The region offset a word found holds data for, if it decodes to one inside the region.
fn decode(key: u64, found: u64, invert: bool, size: u64) -> Option<u64> {
    let off = if invert { !found } else { found } ^ key;
    (off % 8 == 0 && off < size).then_some(off)
}

/// Fill `buf` with the pass's words for region offsets `[from, from + buf.len())`.
fn fill(buf: &mut [u8], key: u64, from: u64, invert: bool) {
    let mut chunks = buf.chunks_exact_mut(8);
    let mut off = from;
    for c in &mut chunks {
        c.copy_from_slice(&word(key, off, invert).to_le_bytes());
        off += 8;
    }
    let rest = chunks.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&word(key, off, invert).to_le_bytes()[..n]);
}

pub fn run(s: MemtestSetup, plan: &MemtestPlan, sampling: &mut Sampling) -> Result<Report> {
    let engine = s.engine;
    let chunk = plan.chunk.min(plan.size).max(1);
    let mut src = s.alloc.alloc(chunk as usize)?;
    let mut dst = s.alloc.alloc(chunk as usize)?;
    s.dev.populate_card_memory(plan.offset, plan.size);
    let _bm = BusMaster::enable(s.dev)?;
    let mut report =
        Report::new(Kind::Dma, s.device.name(), s.device.simulated(), s.dev.via(), sampling.overhead.median_s * 1e9);
    report.engine = Some(engine.name().into());
    report.addressing = Some(src.addressing());
    report.buffer = Some(src.describe());
    let key = Pattern::fresh().seed & !7;
    let mut t = Memtest {
        card_addr: plan.card_base + plan.offset,
        size: plan.size,
        chunk,
        passes: Vec::new(),
        aliasing: None,
        answers: plan.size,
        tested: 0,
    };
    let (mut wrote, mut read) = (Vec::new(), Vec::new());
    let mut first_bad: Option<Mismatch> = None;
    let mut stopped = false;
    for invert in [false, true] {
        let ctx = Pass { key, invert, chunk, plan };
        let (pass, tested) = ctx.run(engine, &mut src, &mut dst, sampling, &mut wrote, &mut read, &mut first_bad)?;
        t.tested = if t.passes.is_empty() { tested } else { t.tested.min(tested) };
        t.passes.push(pass);
        if tested < plan.size {
            stopped = true;
            break;
        }
    }
    if !stopped {
        t.aliasing = Some(aliasing(engine, &mut src, &mut dst, key, plan)?);
    }
    t.answers = answers(&t);
    let row = |dir: Direction, secs: Vec<f64>| {
        let mut row = Row::new(dir, chunk);
        row.stats = Samples { size: chunk, batch: 1, secs, extra: 0 }.stats();
        row.limit_mbps = s.device.bounding_link().map(|k| match dir {
            Direction::H2c => k.read_bps(chunk) / 1e6,
            Direction::C2h => k.write_bps(chunk) / 1e6,
        });
        row
    };
    let mut w = row(Direction::H2c, wrote);
    let mut r = row(Direction::C2h, read);
    let verdict = match (&first_bad, t.passed() || stopped && t.passes.iter().all(|p| p.bad_bytes == 0)) {
        (Some(m), _) => Verify::Mismatch { mismatch: m.clone() },
        (None, true) => Verify::Ok,
        // Every word held its own data, yet a marker read back elsewhere (a pass cannot miss
        // that, so only a memory that changed between the passes gets here): the first such.
        (None, false) => {
            let (at, from) = t.aliasing.iter().flat_map(|a| &a.found_elsewhere).next().copied().unwrap_or((0, 0));
            Verify::Mismatch {
                mismatch: Mismatch {
                    offset: t.card_addr + at,
                    expected: 0,
                    found: 0,
                    count: 8,
                    outside: Some(format!("the marker written at +{from:#x} read back at +{at:#x}")),
                },
            }
        }
    };
    w.verify = Some(verdict.clone());
    r.verify = Some(verdict);
    report.results = vec![w, r];
    report.interrupted = stopped;
    report.memtest = Some(t);
    Ok(report)
}

/// One pass's words and its checks.
struct Pass<'p> {
    key: u64,
    invert: bool,
    chunk: u64,
    plan: &'p MemtestPlan,
}

impl Pass<'_> {
    /// Fill the region, then read it back and check it; the bytes tested (less than the region
    /// when a stop came). Each chunk's transfer time is a sample, scaled to a whole chunk.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        engine: &mut dyn Engine,
        src: &mut Box<dyn DmaBuffer>,
        dst: &mut Box<dyn DmaBuffer>,
        s: &mut Sampling,
        wrote: &mut Vec<f64>,
        read: &mut Vec<f64>,
        first_bad: &mut Option<Mismatch>,
    ) -> Result<(figures::Pass, u64)> {
        let (size, chunk, timeout) = (self.plan.size, self.chunk, self.plan.timeout);
        let mut filled = 0u64;
        while filled < size {
            if s.stop.load(Ordering::Relaxed) {
                break;
            }
            let n = chunk.min(size - filled);
            fill(&mut bytes_mut(&mut **src)[..n as usize], self.key, filled, self.invert);
            let t0 = s.clock.now_ns();
            card_copy(engine, Direction::H2c, &**src, self.plan.offset + filled, n, timeout)?;
            let ns = s.clock.now_ns().saturating_sub(t0);
            wrote.push(ns as f64 * 1e-9 * chunk as f64 / n as f64);
            s.progress.add(n);
            filled += n;
        }
        let mut ranges = Ranges::default();
        let mut checked = 0u64;
        // A stop during the fill still has what was written read back and checked (bounded by
        // it); a stop during the read-back ends it there.
        let whole = filled == size;
        while checked < filled {
            if whole && s.stop.load(Ordering::Relaxed) {
                break;
            }
            let n = chunk.min(filled - checked);
            // The destination holds every expected byte's complement first: a read-back that
            // writes nothing fails every byte.
            fill(&mut bytes_mut(&mut **dst)[..n as usize], self.key, checked, !self.invert);
            let t0 = s.clock.now_ns();
            card_copy(engine, Direction::C2h, &**dst, self.plan.offset + checked, n, timeout)?;
            let ns = s.clock.now_ns().saturating_sub(t0);
            read.push(ns as f64 * 1e-9 * chunk as f64 / n as f64);
            s.progress.add(n);
            self.check(&bytes(&**dst)[..n as usize], checked, &mut ranges, first_bad);
            checked += n;
        }
        Ok((ranges.finish(if self.invert { "inverse address" } else { "address" }), checked))
    }

    /// Each word of `got` (region offsets from `from`) against the pass's word there.
    fn check(&self, got: &[u8], from: u64, ranges: &mut Ranges, first_bad: &mut Option<Mismatch>) {
        let base = self.plan.card_base + self.plan.offset;
        for (i, c) in got.chunks(8).enumerate() {
            let off = from + 8 * i as u64;
            let want = word(self.key, off, self.invert).to_le_bytes();
            if c == &want[..c.len()] {
                continue;
            }
            let found = (c.len() == 8).then(|| u64::from_le_bytes(c.try_into().unwrap_or_default()));
            let holds = found
                .and_then(|f| decode(self.key, f, self.invert, self.plan.size))
                .filter(|o| *o > off)
                .map(|o| o - off);
            ranges.bad(base + off, c.len() as u64, holds);
            if first_bad.is_none() {
                // Offsets are card addresses; whose data a range holds, the pass's ranges say.
                let k = c.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                *first_bad = Some(Mismatch {
                    offset: base + off + k as u64,
                    expected: want[k],
                    found: c[k],
                    count: 0,
                    outside: None,
                });
            }
        }
        if let Some(m) = first_bad {
            m.count = ranges.bytes;
        }
    }
}

/// The aliasing pass: markers at offset 0 and each power of two inside the region (one 8-byte
/// transfer each, ascending), then each read back.
fn aliasing(
    engine: &mut dyn Engine,
    src: &mut Box<dyn DmaBuffer>,
    dst: &mut Box<dyn DmaBuffer>,
    key: u64,
    plan: &MemtestPlan,
) -> Result<Aliasing> {
    let mut a = Aliasing::default();
    if plan.size < 8 {
        return Ok(a);
    }
    a.offsets.push(0);
    let mut p = 8u64;
    while p + 8 <= plan.size {
        a.offsets.push(p);
        p = match p.checked_mul(2) {
            Some(q) => q,
            None => break,
        };
    }
    let marker = |off: u64| (off ^ key).rotate_left(17) ^ 0xa11a_5a11_a5a1_1a55;
    for &off in &a.offsets {
        bytes_mut(&mut **src)[..8].copy_from_slice(&marker(off).to_le_bytes());
        card_copy(engine, Direction::H2c, &**src, plan.offset + off, 8, plan.timeout)?;
    }
    for &off in &a.offsets {
        bytes_mut(&mut **dst)[..8].copy_from_slice(&(!marker(off)).to_le_bytes());
        card_copy(engine, Direction::C2h, &**dst, plan.offset + off, 8, plan.timeout)?;
        let got = u64::from_le_bytes(bytes(&**dst)[..8].try_into().unwrap_or_default());
        if got == marker(off) {
            continue;
        }
        match a.offsets.iter().find(|o| marker(**o) == got) {
            Some(&from) => a.found_elsewhere.push((off, from)),
            None => a.lost.push(off),
        }
    }
    Ok(a)
}

/// The bytes that answer: the region, or the smallest distance at which something aliases (the
/// aliasing pass's marker found below its offset, or a pass's word holding data from above).
fn answers(t: &Memtest) -> u64 {
    let from_markers =
        t.aliasing.iter().flat_map(|a| &a.found_elsewhere).filter(|(at, from)| from > at).map(|(at, from)| from - at);
    let from_words = t.passes.iter().flat_map(|p| &p.bad_ranges).filter_map(|r| r.holds_from);
    from_markers.chain(from_words).min().unwrap_or(t.size).min(t.size)
}

/// The region and chunk a memtest moves, checked against the engine's window (offset and size
/// within it) and what one transfer takes.
pub fn check(engine: &dyn Engine, offset: u64, size: u64) -> Result<()> {
    let window = engine.card_size();
    if size == 0 {
        return Err(Error::usage("--size 0: give the bytes of card memory to test, e.g. --size 64M"));
    }
    if offset.checked_add(size).is_none_or(|e| e > window) {
        let more = if engine.card_size_settable() { " (or set --card-size to the design's memory)" } else { "" };
        return Err(Error::usage(format!(
            "{size:#x} bytes from offset {offset:#x} do not fit the {} engine's {window:#x} bytes of card memory: \
             test less{more}",
            engine.name()
        )));
    }
    Ok(())
}
