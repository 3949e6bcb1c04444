//! Keeping every stream of one engine moving from one thread, as fpga_sio's parallel-streams test
//! does (one loop polls each stream's completion and starts it again at once). How an engine is
//! kept moving follows what its driver allows:
//!
//! - `Overlapped`: an engine that starts a transfer and returns (`Engine::overlaps`: an XDMA
//!   channel, each with its own descriptor engine, registers and writeback; libxdma runs them
//!   independently). One stream per engine; several engines on one card run side by side.
//! - `Posted`: an engine with queues that posts transfers into rings and reaps completions
//!   (`Engine::posts`: QDMA, as libqdma's queues each run on their own). One stream per queue, up
//!   to `DEPTH` transfers in flight on each.
//! - `Serial`: an engine pcibench cannot start without waiting (edu's one transfer at a time, the
//!   NVRAM's chain as umem.c waits for it): its transfer runs to its end when its turn comes, so it
//!   runs between the others' looks, not beside them; the report says so.

use super::figures::SoakError;
use crate::dma::{Engine, Work};
use crate::{Error, Result};
use std::time::{Duration, Instant};

/// Most transfers in flight on one queue of a posted engine: enough to keep a ring busy across a
/// loop over every stream, few enough that draining at a report takes moments.
pub const DEPTH: u32 = 8;

/// A stream stops being restarted after this many failures in a row (its errors stay reported).
pub const MAX_FAILURES_IN_A_ROW: u32 = 3;

/// How an engine is kept moving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drive {
    Overlapped,
    Posted,
    Serial,
}

impl Drive {
    pub fn of(engine: &dyn Engine, lanes: usize) -> Result<Drive> {
        if engine.posts() {
            return Ok(Drive::Posted);
        }
        if lanes > 1 {
            return Err(Error::usage(format!(
                "the {} engine carries one stream at a time: one lane per engine instance",
                engine.name()
            )));
        }
        Ok(if engine.overlaps() { Drive::Overlapped } else { Drive::Serial })
    }
}

/// A stream's progress as the loop keeps it.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Transfers completed since the interval began.
    pub done: u64,
    /// Transfers in flight now.
    pub in_flight: u32,
    /// Failures in the interval, and in a row (reset by a completion).
    pub errors: u64,
    pub in_a_row: u32,
    /// No longer started: too many failures in a row.
    pub retired: bool,
}

/// One engine and the streams it carries, kept moving by `pump`.
pub struct Unit {
    pub engine: Box<dyn Engine>,
    pub drive: Drive,
    /// The queue each stream is on (index i: stream `first + i`).
    pub queues: Vec<u16>,
    /// The index of its first stream in the run.
    pub first: usize,
    pub tallies: Vec<Tally>,
    pub timeout: Duration,
    /// When a posted engine last completed anything (its no-progress watch).
    moved_at: Instant,
    reaped: Vec<u32>,
}

impl Unit {
    pub fn new(engine: Box<dyn Engine>, queues: Vec<u16>, first: usize, timeout: Duration) -> Result<Unit> {
        let drive = Drive::of(engine.as_ref(), queues.len())?;
        let most = queues.iter().copied().max().unwrap_or(0) as usize + 1;
        Ok(Unit {
            engine,
            drive,
            tallies: vec![Tally::default(); queues.len()],
            queues,
            first,
            timeout,
            moved_at: Instant::now(),
            reaped: vec![0; most],
        })
    }

    /// Transfers in flight on any of its streams.
    pub fn in_flight(&self) -> u32 {
        self.tallies.iter().map(|t| t.in_flight).sum()
    }

    /// Prepare each stream's one transfer (after the data was set up or checked).
    pub fn prepare(&mut self, work: &[Work]) -> Result<()> {
        match self.drive {
            Drive::Posted => self.engine.prepare_batch(work),
            Drive::Overlapped | Drive::Serial => self.engine.prepare_batch(&work[..1]),
        }
    }

    /// One look: completions counted, and (with `start`) every idle stream started again.
    /// Failures are noted in `errors` at `at_s` with the engine stopped; a card that stopped
    /// answering is the error returned.
    pub fn pump(&mut self, start: bool, at_s: f64, errors: &mut Vec<SoakError>) -> Result<()> {
        match self.drive {
            Drive::Overlapped | Drive::Serial => self.pump_one(start, at_s, errors),
            Drive::Posted => self.pump_posted(start, at_s, errors),
        }
    }

    fn pump_one(&mut self, start: bool, at_s: f64, errors: &mut Vec<SoakError>) -> Result<()> {
        let t = &mut self.tallies[0];
        if t.in_flight > 0 {
            match self.engine.run_done() {
                Ok(false) => return Ok(()),
                Ok(true) => {
                    t.in_flight = 0;
                    t.done += 1;
                    t.in_a_row = 0;
                }
                Err(e) => {
                    t.in_flight = 0;
                    return failed(&mut *self.engine, &mut self.tallies[..1], self.first, e, at_s, errors);
                }
            }
        }
        let t = &mut self.tallies[0];
        if !start || t.retired {
            return Ok(());
        }
        match self.engine.begin_run(self.timeout) {
            Ok(()) if self.drive == Drive::Serial => {
                t.done += 1;
                t.in_a_row = 0;
                Ok(())
            }
            Ok(()) => {
                t.in_flight = 1;
                Ok(())
            }
            Err(e) => failed(&mut *self.engine, &mut self.tallies[..1], self.first, e, at_s, errors),
        }
    }

    fn pump_posted(&mut self, start: bool, at_s: f64, errors: &mut Vec<SoakError>) -> Result<()> {
        self.reaped.iter_mut().for_each(|d| *d = 0);
        if let Err(e) = self.engine.reap(&mut self.reaped) {
            self.tallies.iter_mut().for_each(|t| t.in_flight = 0);
            return failed(&mut *self.engine, &mut self.tallies, self.first, e, at_s, errors);
        }
        let mut moved = false;
        for (t, q) in self.tallies.iter_mut().zip(&self.queues) {
            let n = self.reaped[*q as usize].min(t.in_flight);
            if n > 0 {
                t.done += u64::from(n);
                t.in_flight -= n;
                t.in_a_row = 0;
                moved = true;
            }
        }
        if moved || self.in_flight() == 0 {
            self.moved_at = Instant::now();
        } else if self.moved_at.elapsed() >= self.timeout {
            // The rings hold transfers and none completed for the timeout: a hung queue, as
            // the closed loop's wait would call it.
            self.tallies.iter_mut().for_each(|t| t.in_flight = 0);
            let e = Error::Device(format!(
                "{} completed none of the transfers in flight for {:?}",
                self.engine.name(),
                self.timeout
            ));
            self.moved_at = Instant::now();
            return failed(&mut *self.engine, &mut self.tallies, self.first, e, at_s, errors);
        }
        if !start {
            return Ok(());
        }
        for (t, q) in self.tallies.iter_mut().zip(&self.queues) {
            while !t.retired && t.in_flight < DEPTH {
                match self.engine.post(*q) {
                    Ok(true) => t.in_flight += 1,
                    Ok(false) => break,
                    Err(e) => {
                        let first = self.first;
                        self.tallies.iter_mut().for_each(|t| t.in_flight = 0);
                        return failed(&mut *self.engine, &mut self.tallies, first, e, at_s, errors);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A failure of the streams in `tallies` (the first is stream `first`): noted with its time and
/// the engine's status after stopping it, each stream's count of failures raised and those
/// failing too often retired. A card gone is returned instead: nothing more can run.
fn failed(
    engine: &mut dyn Engine,
    tallies: &mut [Tally],
    first: usize,
    e: Error,
    at_s: f64,
    errors: &mut Vec<SoakError>,
) -> Result<()> {
    if let Error::Gone(_) = e {
        let _ = engine.stop();
        return Err(e);
    }
    let status = engine.stop().unwrap_or_else(|s| format!("stop failed too: {s}"));
    let stream = (tallies.len() == 1).then_some(first);
    let mut what = format!("{e} (engine stopped; status: {status})");
    for t in tallies.iter_mut() {
        t.errors += 1;
        t.in_a_row += 1;
        if t.in_a_row >= MAX_FAILURES_IN_A_ROW && !t.retired {
            t.retired = true;
        }
    }
    if tallies.iter().all(|t| t.retired) {
        what.push_str(&format!("; {MAX_FAILURES_IN_A_ROW} failures in a row: no longer started"));
    }
    errors.push(SoakError { at_s, stream, what });
    Ok(())
}
