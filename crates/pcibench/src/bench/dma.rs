//! The DMA runner: per direction × size, timed engine transfers between a host buffer and card
//! memory, statistics, the link model's limit, and a pattern sent to the card and brought back
//! into a second buffer, verified. A stop request (the sampler's flag) stops the engine and keeps
//! the samples gathered so far.

use super::pattern::{verify, Pattern};
use super::result::{Kind, Note, Report, Row, Verify};
use super::sampler::Sampling;
use crate::access::{BusMaster, DeviceAccess};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::pci::link::Link;
use crate::{Error, Result};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DmaPlan {
    pub dirs: Vec<Direction>,
    /// Transfer sizes; empty means the engine's whole card memory (as time_dma_blkram).
    pub sizes: Vec<u64>,
    pub total: u64,
    pub card_addr: u64,
    pub timeout: Duration,
}

pub struct DmaSetup<'a> {
    pub dev: &'a dyn DeviceAccess,
    pub device: &'a str,
    pub simulated: bool,
    pub link: Option<Link>,
    pub engine: &'a mut dyn Engine,
    pub alloc: &'a dyn DmaAllocator,
}

/// Every size must fit the engine's card window from `card_addr` and one transfer.
fn sizes(engine: &dyn Engine, plan: &DmaPlan) -> Result<Vec<u64>> {
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
    Ok(sizes)
}

pub fn run(s: DmaSetup, plan: &DmaPlan, sampling: &mut Sampling) -> Result<Report> {
    let engine = s.engine;
    let sizes = sizes(engine, plan)?;
    super::sampler::check_total(plan.total, &sizes)?;
    let max = *sizes.iter().max().unwrap_or(&0) as usize;
    let src = s.alloc.alloc(max)?;
    let dst = s.alloc.alloc(max)?;
    let _bm = BusMaster::enable(s.dev)?;
    let mut report = Report::new(Kind::Dma, s.device, s.simulated, s.dev.via(), sampling.overhead.median_s * 1e9);
    report.engine = Some(engine.name().into());
    report.addressing = Some(src.addressing());
    report.buffer = Some(src.describe());
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
            let sampled = sampling.run(size, plan.total, |k| {
                for _ in 0..k {
                    timed_run(engine, plan.timeout)?;
                }
                Ok(())
            })?;
            let mut row = Row::new(dir, size);
            // The card reads host memory for h2c (requests and completions) and writes it for c2h.
            let limit = s.link.map(|l| match dir {
                Direction::H2c => l.read_bps(size) / 1e6,
                Direction::C2h => l.write_bps(size) / 1e6,
            });
            row.measured(&sampled, limit, sampling.overhead.median_s * 1e9);
            if sampled.interrupted {
                report.interrupted = true;
                let status = engine.stop()?;
                row.notes.push(Note::Interrupted { engine: Some(status) });
                report.results.push(row);
                break 'sizes;
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
            row.verify = Some(match verify(&expected, &got, 0) {
                Ok(()) => Verify::Ok,
                Err(m) => {
                    report.warnings.push(format!("{dir} size {size}: {m}"));
                    Verify::Mismatch { mismatch: m }
                }
            });
            report.results.push(row);
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

#[cfg(test)]
#[path = "dma_tests.rs"]
mod tests;
