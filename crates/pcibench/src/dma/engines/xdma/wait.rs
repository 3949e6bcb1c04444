//! Poll-mode completion of a memory-mapped channel: the writeback word polled until the chain
//! completes, the status register looked at every millisecond for an engine that stopped without
//! writing back, the progress watchdog for one that hangs (libxdma.c poll mode:
//! `engine_service_poll`, `engine_service_wb_monitor`).

use super::regs::*;
use super::{decode_status, desc, XdmaEngine, FLOOR_MBPS, IDLE_WAIT, STATUS_EVERY};
use crate::dma::engines::freshest::freshest;
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::dma::Direction;
use crate::mmio::Width;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

enum Outcome {
    Done,
    Error(u32),
    Stopped(u32),
    Timeout(u32),
}

/// One wait in progress: what the poll loop knows between looks (`XdmaEngine::poll_step`), so a
/// run can be waited for in one loop (`wait`) or a look at a time beside other channels
/// (`overlap.rs`).
pub(super) struct Poller {
    dir: Direction,
    n: u32,
    timeout: Duration,
    dog: Watchdog,
    progress: u32,
    next_status: Duration,
    spins: u32,
    /// The writeback as last traced: `submit` zeroed it.
    seen: u32,
}

impl XdmaEngine {
    /// A wait for the submitted chain, from now.
    pub(super) fn poller(&self, timeout: Duration) -> Result<Poller> {
        let chain = self.prepared()?;
        let (dir, n) = (chain.dir, chain.descriptors.len() as u32);
        let largest = chain.descriptors.iter().map(|d| u64::from(d.len)).max().unwrap_or(0);
        // The writeback holds the count only when the last descriptor completes; the channel's
        // completed-descriptor register (PG195 +0x48, reset when run rises) moves with each one, so
        // that is the progress the watchdog watches, read with the status. A descriptor moves up
        // to 256 MiB: the wait for the next is at least that one's time at FLOOR_MBPS.
        let timeout = timeout.max(Duration::from_micros(largest / FLOOR_MBPS));
        Ok(Poller {
            dir,
            n,
            timeout,
            dog: Watchdog::new(timeout),
            progress: 0,
            next_status: STATUS_EVERY,
            spins: 0,
            seen: 0,
        })
    }

    /// Submit the prepared chain and return: `finished_overlapped` then looks at it a time at a time, so one
    /// thread keeps several channels moving (libxdma runs its channels independently: each has its
    /// own descriptor engine, registers and writeback, PG195 "Channels").
    pub(super) fn start_overlapped(&mut self, timeout: Duration) -> Result<()> {
        self.pending = None;
        self.irq.disarm(&*self.bar)?;
        self.submit()?;
        self.pending = Some(self.poller(timeout)?);
        Ok(())
    }

    /// One look at the started chain: Ok(true) once it completed (run cleared), Ok(false) while
    /// it moves; a failure as `wait` gives it.
    pub(super) fn finished_overlapped(&mut self) -> Result<bool> {
        let Some(mut p) = self.pending.take() else { return Ok(true) };
        match self.poll_step(&mut p)? {
            Some(o) => self.conclude(&p, o).map(|()| true),
            None => {
                self.pending = Some(p);
                Ok(false)
            }
        }
    }

    /// Poll the writeback word until the submitted chain completes, fails or times out; then
    /// clear run.
    pub fn wait(&mut self, timeout: Duration) -> Result<()> {
        let mut p = self.poller(timeout)?;
        loop {
            if let Some(o) = self.poll_step(&mut p)? {
                return self.conclude(&p, o);
            }
            std::hint::spin_loop();
        }
    }

    /// One look at the run: its outcome once it has one.
    fn poll_step(&mut self, p: &mut Poller) -> Result<Option<Outcome>> {
        let (dir, n) = (p.dir, p.n);
        // The host looks at host memory: a simulated engine brings itself to now.
        self.bar.observe();
        let w = desc::writeback_word(&*self.wb_mem).load(Ordering::Acquire);
        if let Some(t) = self.trace.as_ref().filter(|_| w != p.seen) {
            p.seen = w;
            t.writeback("xdma", "writeback", self.wb_bus, Width::B32, w.into());
        }
        if w & WB_ERROR != 0 {
            return Ok(Some(Outcome::Error(w & WB_COUNT)));
        }
        if w & WB_COUNT >= n {
            return Ok(Some(Outcome::Done));
        }
        p.spins = p.spins.wrapping_add(1);
        if p.spins % 16 == 0 {
            let elapsed = p.dog.elapsed();
            if elapsed >= p.next_status {
                p.next_status = elapsed + STATUS_EVERY;
                if let Some(o) = self.check_stopped(dir, n)? {
                    return Ok(Some(o));
                }
                p.progress = self.rd(self.ch_reg(dir, CH_COMPLETED))? & WB_COUNT;
            }
            // No yield: the poll is all this thread has to do, and a simulated engine needs no
            // CPU of its own (issue 52); a yield on a busy host would cost a time slice.
            if p.dog.stalled(u64::from(p.progress.max(w & WB_COUNT))) {
                return Ok(Some(Outcome::Timeout(p.progress.max(w & WB_COUNT).min(n))));
            }
        }
        Ok(None)
    }

    /// The run's end: run cleared, and a failure in words.
    fn conclude(&mut self, p: &Poller, outcome: Outcome) -> Result<()> {
        let (dir, n, timeout) = (p.dir, p.n, p.timeout);
        let ch = self.opts.channel;
        match outcome {
            Outcome::Done => self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN),
            Outcome::Error(done) | Outcome::Stopped(done) => {
                // PG195 does not order the error writeback against the status register: wait
                // (bounded) for the channel to go idle, so the status read holds the reason.
                let t = Instant::now();
                while self.rd(self.ch_reg(dir, CH_STATUS))? & ST_BUSY != 0 && t.elapsed() < IDLE_WAIT {
                    std::thread::yield_now();
                }
                let status = self.rd(self.ch_reg(dir, CH_STATUS_RC))?;
                self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
                let (done, note) = self.freshest(dir, n, done)?;
                Err(Error::Device(format!(
                    "XDMA {dir} channel {ch} stopped after {done} of {n} descriptors{note}: status {}",
                    decode_status(dir, status)
                )))
            }
            Outcome::Timeout(done) => {
                self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
                let (status, idle) = self.settle(dir)?;
                // After the settle: the descriptor in flight has landed in the counts too.
                let (done, note) = self.freshest(dir, n, done)?;
                let stopped = if idle {
                    "cleared run and waited for the channel to go idle".to_string()
                } else {
                    format!("cleared run; {}", self.still_busy(dir))
                };
                Err(Error::Device(format!(
                    "XDMA {dir} channel {ch}: {} ({done} of {n} descriptors completed{note}); {stopped}; status {}. \
                     Is the engine clocked and out of reset, and does --card-addr point at card memory?",
                    no_progress(timeout),
                    decode_status(dir, status)
                )))
            }
        }
    }

    /// Descriptors done when a run failed, from the freshest source (`freshest`): the writeback
    /// word and the completed-descriptor register read once more now (the wait loop read the
    /// register once per `STATUS_EVERY`, and `seen` is what it last used).
    fn freshest(&self, dir: Direction, n: u32, seen: u32) -> Result<(u32, String)> {
        let w = desc::writeback_word(&*self.wb_mem).load(Ordering::Acquire) & WB_COUNT;
        let count = self.rd(self.ch_reg(dir, CH_COMPLETED))? & WB_COUNT;
        let counter = Some((u64::from(count), "the completed-descriptor count (+0x48)"));
        let (done, note) = freshest(u64::from(n), u64::from(w), "writeback", counter);
        // What the wait loop saw stands when neither word says more now.
        Ok(if u64::from(seen) > done { (seen, String::new()) } else { (done as u32, note) })
    }

    /// The engine went idle without a complete writeback: done after all (no writeback), or
    /// stopped short (an error, or run cleared by someone else).
    fn check_stopped(&self, dir: Direction, n: u32) -> Result<Option<Outcome>> {
        let status = self.rd(self.ch_reg(dir, CH_STATUS))?;
        if status == u32::MAX {
            self.check_answering(dir)?;
        }
        if status & ST_BUSY != 0 {
            return Ok(None);
        }
        let w = desc::writeback_word(&*self.wb_mem).load(Ordering::Acquire);
        if w & WB_ERROR == 0 && w & WB_COUNT >= n {
            return Ok(Some(Outcome::Done));
        }
        let done = self.rd(self.ch_reg(dir, CH_COMPLETED))?;
        if done >= n && status & ST_ERRORS == 0 {
            return Ok(Some(Outcome::Done));
        }
        Ok(Some(Outcome::Stopped(done)))
    }

    /// A status of all-ones may be the card gone: its identifier register cannot read all-ones
    /// (its top 12 bits are the subsystem id 0x1fc), so if it does, the card no longer answers.
    pub(super) fn check_answering(&self, dir: Direction) -> Result<()> {
        let id = self.rd(self.ch_reg(dir, CH_ID))?;
        if id == u32::MAX {
            return Err(Error::Gone(format!(
                "XDMA {dir} channel {}'s status and identifier registers read 0xffffffff (the identifier holds 0x1fc in its top bits)",
                self.opts.channel
            )));
        }
        Ok(())
    }
}
