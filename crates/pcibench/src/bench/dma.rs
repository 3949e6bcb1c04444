//! The DMA runner: per direction × size, timed engine transfers between a host buffer and card
//! memory, statistics, the link model's limit, and a pattern sent to the card and brought back
//! into a second buffer, verified. Ctrl-C (the `stop` flag) stops the engine and keeps the
//! samples gathered so far.

use super::pattern::{verify, Mismatch, Pattern};
use super::stats::{Samples, Stats};
use super::timer::{calibrate, TimerOverhead};
use crate::access::{BusMaster, DeviceAccess, Via};
use crate::dma::{Addressing, Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::pci::link::Link;
use crate::{Error, Result};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct DmaPlan {
    pub dirs: Vec<Direction>,
    /// Transfer sizes; empty means the engine's whole card memory (as time_dma_blkram).
    pub sizes: Vec<u64>,
    pub total: u64,
    pub card_addr: u64,
    pub timeout: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct DmaResult {
    pub dir: Direction,
    pub size: u64,
    pub stats: Option<Stats>,
    pub limit_mbps: Option<f64>,
    pub efficiency_pct: Option<f64>,
    pub verified: Option<bool>,
    pub mismatch: Option<Mismatch>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DmaReport {
    pub device: String,
    pub simulated: bool,
    pub engine: String,
    pub via: Via,
    pub addressing: Addressing,
    pub buffer: String,
    pub timer_overhead_ns: f64,
    pub results: Vec<DmaResult>,
    /// True when Ctrl-C ended the run early (the samples so far are reported).
    pub interrupted: bool,
    pub warnings: Vec<String>,
}

pub struct DmaSetup<'a> {
    pub dev: &'a dyn DeviceAccess,
    pub device: &'a str,
    pub simulated: bool,
    pub link: Option<Link>,
    pub engine: &'a mut dyn Engine,
    pub alloc: &'a dyn DmaAllocator,
}

pub fn run(s: DmaSetup, plan: &DmaPlan, stop: &AtomicBool, progress: &mut dyn FnMut(u64)) -> Result<DmaReport> {
    let engine = s.engine;
    let card_room = engine.card_size().checked_sub(plan.card_addr).filter(|r| *r > 0).ok_or_else(|| {
        Error::usage(format!(
            "--card-addr {:#x} is outside the engine's {:#x} bytes of card memory",
            plan.card_addr,
            engine.card_size()
        ))
    })?;
    let sizes = if plan.sizes.is_empty() { vec![card_room.min(engine.max_transfer())] } else { plan.sizes.clone() };
    for &size in &sizes {
        if size == 0 || size > card_room {
            let more = if engine.name() == "xdma" { " or set --card-size" } else { "" };
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
    let max = *sizes.iter().max().unwrap_or(&0) as usize;
    let src = s.alloc.alloc(max)?;
    let dst = s.alloc.alloc(max)?;
    let _bm = BusMaster::enable(s.dev)?;
    let timer = TimerOverhead::measure();
    let mut report = DmaReport {
        device: s.device.into(),
        simulated: s.simulated,
        engine: engine.name().into(),
        via: s.dev.via(),
        addressing: src.addressing(),
        buffer: src.describe(),
        timer_overhead_ns: timer.median_s * 1e9,
        results: Vec::new(),
        interrupted: false,
        warnings: Vec::new(),
    };
    let mut pattern = Pattern::fresh();
    'sizes: for &size in &sizes {
        pattern = pattern.successor();
        let expected = pattern.generate(size as usize);
        // SAFETY: `src` is a live buffer of at least `max` bytes that no engine is using now.
        unsafe { std::ptr::copy_nonoverlapping(expected.as_ptr(), src.as_ptr(), size as usize) };
        let mut on_card = false;
        for &dir in &plan.dirs {
            if dir == Direction::C2h && !on_card {
                // Put the pattern on the card first (untimed) so the reads have something to verify.
                one(engine, src.as_ref(), Direction::H2c, plan, size)?;
                on_card = true;
            }
            if dir == Direction::C2h {
                // SAFETY: as above, for `dst`.
                unsafe { std::ptr::write_bytes(dst.as_ptr(), 0, size as usize) };
            }
            let buf: &dyn DmaBuffer = if dir == Direction::H2c { src.as_ref() } else { dst.as_ref() };
            let t = Transfer { dir, buf_offset: 0, card_addr: plan.card_addr, len: size };
            engine.prepare(buf, &t)?;
            timed_run(engine, plan.timeout)?;
            let batch = calibrate(&timer, |k| {
                for _ in 0..k {
                    timed_run(engine, plan.timeout)?;
                }
                Ok::<(), Error>(())
            })?;
            let mut notes = Vec::new();
            if batch > 1 {
                notes.push(format!(
                    "batched {batch} transfers per sample (timer overhead {:.0} ns)",
                    timer.median_s * 1e9
                ));
            }
            let samples = (plan.total / size).max(1).div_ceil(batch);
            let mut smp = Samples::new(size, batch);
            for _ in 0..samples {
                if stop.load(Ordering::Relaxed) {
                    report.interrupted = true;
                    let status = engine.stop()?;
                    notes.push(format!("interrupted by Ctrl-C: engine stopped ({status})"));
                    push(&mut report, dir, size, &smp, s.link, None, notes);
                    break 'sizes;
                }
                let t = Instant::now();
                for _ in 0..batch {
                    timed_run(engine, plan.timeout)?;
                }
                smp.secs.push(t.elapsed().as_secs_f64());
                progress(size * batch);
            }
            let got = if dir == Direction::H2c {
                on_card = true;
                // Bring the data back into the second buffer (untimed) to verify what the card holds.
                // SAFETY: as above, for `dst`.
                unsafe { std::ptr::write_bytes(dst.as_ptr(), 0, size as usize) };
                one(engine, dst.as_ref(), Direction::C2h, plan, size)?;
                read(dst.as_ref(), size)
            } else {
                read(dst.as_ref(), size)
            };
            let v = verify(&expected, &got, 0);
            if let Err(m) = &v {
                report.warnings.push(format!("{dir} size {size}: {m}"));
            }
            push(&mut report, dir, size, &smp, s.link, Some(v), notes);
        }
    }
    Ok(report)
}

/// One untimed transfer (seeding the card, or reading it back for verification).
fn one(engine: &mut dyn Engine, buf: &dyn DmaBuffer, dir: Direction, plan: &DmaPlan, size: u64) -> Result<()> {
    engine.prepare(buf, &Transfer { dir, buf_offset: 0, card_addr: plan.card_addr, len: size })?;
    timed_run(engine, plan.timeout)
}

/// Run the prepared transfer; on failure stop the engine and add its status to the error.
fn timed_run(engine: &mut dyn Engine, timeout: Duration) -> Result<()> {
    match engine.run(timeout) {
        Ok(()) => Ok(()),
        Err(e) => {
            let status = engine.stop().unwrap_or_else(|s| format!("stop failed too: {s}"));
            Err(Error::Device(format!("{e} (engine stopped; status: {status})")))
        }
    }
}

fn read(buf: &dyn DmaBuffer, size: u64) -> Vec<u8> {
    let mut v = vec![0u8; size as usize];
    // SAFETY: `buf` is live and at least `size` bytes; the engine is idle after `run` returned.
    unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), v.as_mut_ptr(), size as usize) };
    v
}

fn push(
    r: &mut DmaReport,
    dir: Direction,
    size: u64,
    s: &Samples,
    link: Option<Link>,
    v: Option<std::result::Result<(), Mismatch>>,
    notes: Vec<String>,
) {
    let stats = s.stats();
    // The card reads host memory for h2c (requests and completions) and writes it for c2h.
    let limit = link.map(|l| match dir {
        Direction::H2c => l.read_bps(size) / 1e6,
        Direction::C2h => l.write_bps(size) / 1e6,
    });
    let eff = match (&stats, limit) {
        (Some(st), Some(l)) if l > 0.0 => Some(st.mean_mbps / l * 100.0),
        _ => None,
    };
    r.results.push(DmaResult {
        dir,
        size,
        stats,
        limit_mbps: limit,
        efficiency_pct: eff,
        verified: v.as_ref().map(|x| x.is_ok()),
        mismatch: v.and_then(|x| x.err()),
        notes,
    });
}

#[cfg(test)]
#[path = "dma_tests.rs"]
mod tests;
