//! The open loop: transfers submitted on a fixed schedule whatever became of the ones before,
//! completions reaped as they come, and each transfer's latency counted from when it was *due*,
//! not from when it was posted. A stall (the card's or the host's) then counts against every
//! transfer it delayed, where a closed loop would simply not have sent them (coordinated
//! omission, as Gil Tene named it; wrk2 and HdrHistogram's `recordValueWithExpectedInterval`
//! correct for it the same way).
//!
//! The loop only needs a `Submit`: an engine that posts without waiting (`EngineSubmit` over
//! `Engine::post`/`reap`), an engine that runs one transfer at a time (each post then returns
//! when its transfer completed, and the rate kept is bounded by that closed loop), or the
//! `NullSubmit` the loop's own cost is measured with.

use super::super::sample::clock::Clock;
use super::super::sample::histogram::LatencyHistogram;
use crate::dma::Engine;
use crate::{Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A transfer posted more than this after it was due, while the card had room, was late: the
/// host did not keep the schedule. 1 µs is under the smallest DMA latency seed 004 reports
/// (1.5 µs for 64 B at 5 M ops/s) and some 20 turns of this loop on an idle host.
pub const LATE_NS: u64 = 1_000;

/// What the loop submits to.
pub trait Submit {
    /// Queues transfers are spread over, round robin.
    fn queues(&self) -> u16;
    /// Each `post` returns only once its transfer completed (an engine that runs one at a
    /// time): nothing is ever in flight between posts.
    fn blocking(&self) -> bool;
    /// Post one transfer on `queue`; false when there is no room until completions are reaped.
    fn post(&mut self, queue: u16) -> Result<bool>;
    /// Add the transfers completed since the last call to `done[queue]`; never waits.
    fn reap(&mut self, done: &mut [u32]) -> Result<()>;
}

/// When each transfer is due.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Transfers to submit.
    pub count: u64,
    /// Nanoseconds between one due time and the next (1e9 / the offered rate).
    pub interval_ns: f64,
    /// The row stops scheduling after this long; what was not posted by then is dropped.
    pub budget_ns: u64,
    /// Transfers in flight and none completing for this long: the engine is stuck.
    pub timeout: Duration,
}

impl Schedule {
    fn due(&self, start: u64, k: u64) -> u64 {
        start + (k as f64 * self.interval_ns) as u64
    }
}

/// What one open-loop run saw.
#[derive(Debug, Clone)]
pub struct OpenLoop {
    /// Latency of every completed transfer from its due time, ns.
    pub hist: LatencyHistogram,
    pub scheduled: u64,
    pub posted: u64,
    pub completed: u64,
    /// Posted more than `LATE_NS` behind their time while the card had room.
    pub late: u64,
    /// The worst of those lags, ns.
    pub worst_lag_ns: u64,
    /// Never posted (time ran out, or stopped).
    pub dropped: u64,
    /// From the first due time to the last completion, ns.
    pub elapsed_ns: u64,
    /// The stop flag ended it early.
    pub interrupted: bool,
}

impl OpenLoop {
    /// Transfers completed a second.
    pub fn achieved_ops(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.completed as f64 * 1e9 / self.elapsed_ns as f64
    }
}

/// Run the schedule on `sub`, timing with `clock`, until every transfer completed, the budget
/// ran out (the rest dropped, what is in flight drained) or `stop` is set.
pub fn run(sub: &mut dyn Submit, clock: &dyn Clock, s: &Schedule, stop: &AtomicBool) -> Result<OpenLoop> {
    let queues = sub.queues().max(1) as usize;
    let blocking = sub.blocking();
    let mut waiting: Vec<VecDeque<u64>> = vec![VecDeque::new(); queues];
    let mut done = vec![0u32; queues];
    let mut out = OpenLoop {
        hist: LatencyHistogram::new(),
        scheduled: s.count,
        posted: 0,
        completed: 0,
        late: 0,
        worst_lag_ns: 0,
        dropped: 0,
        elapsed_ns: 0,
        interrupted: false,
    };
    let timeout = s.timeout.as_nanos() as u64;
    let start = clock.now_ns();
    let (mut next, mut in_flight) = (0u64, 0u64);
    // Until when the card had no room (a refused post, or a blocking post's return): a transfer
    // due before then and posted late waited for the card, not for the host.
    let mut card_busy_until = 0u64;
    let (mut last_progress, mut last_done) = (start, start);
    loop {
        let mut now = clock.now_ns();
        if in_flight > 0 {
            sub.reap(&mut done)?;
            let reaped: u32 = done.iter().sum();
            if reaped > 0 {
                // The completions were seen now, after the reap: the latency ends here.
                now = clock.now_ns();
                for (q, d) in done.iter_mut().enumerate() {
                    for _ in 0..*d {
                        let due = waiting[q].pop_front().ok_or_else(|| {
                            Error::Device(format!("queue {q} reported a completion with nothing posted on it"))
                        })?;
                        out.hist.record(now.saturating_sub(due));
                    }
                    *d = 0;
                }
                in_flight -= u64::from(reaped);
                out.completed += u64::from(reaped);
                (last_progress, last_done) = (now, now);
            } else if now.saturating_sub(last_progress) > timeout {
                return Err(Error::Device(format!(
                    "{in_flight} posted transfers did not complete within {} ms of the last completion",
                    s.timeout.as_millis()
                )));
            }
        }
        if next < s.count && (stop.load(Ordering::Relaxed) || now.saturating_sub(start) > s.budget_ns) {
            out.interrupted = stop.load(Ordering::Relaxed);
            out.dropped = s.count - next;
            next = s.count;
        }
        while next < s.count {
            let due = s.due(start, next);
            if due > now {
                break;
            }
            let q = (next % queues as u64) as usize;
            if !sub.post(q as u16)? {
                card_busy_until = now;
                break;
            }
            let lag = now - due;
            if lag > LATE_NS && due >= card_busy_until {
                out.late += 1;
                out.worst_lag_ns = out.worst_lag_ns.max(lag);
            }
            out.posted += 1;
            next += 1;
            if blocking {
                // It completed inside the post: seen now.
                let t = clock.now_ns();
                out.hist.record(t.saturating_sub(due));
                out.completed += 1;
                (card_busy_until, last_progress, last_done) = (t, t, t);
                break;
            }
            waiting[q].push_back(due);
            in_flight += 1;
        }
        if next >= s.count && in_flight == 0 {
            break;
        }
        // Waiting is a spin on the clock (a sleep would wake tens of microseconds late), on the
        // card too: a simulated card needs no CPU of its own (issue 52), and a yield on a busy
        // host would cost a time slice, a late post that is the scheduler's, not the host path's.
        std::hint::spin_loop();
    }
    out.elapsed_ns = last_done.saturating_sub(start);
    Ok(out)
}

/// An engine as the loop's `Submit`: posted ahead where it can (`Engine::posts`), else one
/// transfer per `run`, the loop waiting for each.
pub struct EngineSubmit<'a> {
    pub engine: &'a mut dyn Engine,
    pub queues: u16,
    pub timeout: Duration,
}

impl Submit for EngineSubmit<'_> {
    fn queues(&self) -> u16 {
        self.queues
    }
    fn blocking(&self) -> bool {
        !self.engine.posts()
    }
    fn post(&mut self, queue: u16) -> Result<bool> {
        if self.engine.posts() {
            return self.engine.post(queue);
        }
        super::super::dma::timed_run(self.engine, self.timeout)?;
        Ok(true)
    }
    fn reap(&mut self, done: &mut [u32]) -> Result<()> {
        self.engine.reap(done)
    }
}

/// A card that completes every transfer the moment it is posted (seen at the next reap), `depth`
/// in flight at most (`Default`: one): what is left of a transfer's time is the loop's own.
#[derive(Debug)]
pub struct NullSubmit {
    pending: u32,
    depth: u32,
}

impl Default for NullSubmit {
    fn default() -> NullSubmit {
        NullSubmit::deep(1)
    }
}

impl NullSubmit {
    /// Up to `depth` in flight: a schedule faster than one transfer a turn can be kept.
    pub fn deep(depth: u32) -> NullSubmit {
        NullSubmit { pending: 0, depth: depth.max(1) }
    }
}

impl Submit for NullSubmit {
    fn queues(&self) -> u16 {
        1
    }
    fn blocking(&self) -> bool {
        false
    }
    fn post(&mut self, _queue: u16) -> Result<bool> {
        if self.pending >= self.depth {
            return Ok(false);
        }
        self.pending += 1;
        Ok(true)
    }
    fn reap(&mut self, done: &mut [u32]) -> Result<()> {
        done[0] += std::mem::take(&mut self.pending);
        Ok(())
    }
}

/// The loop's own cost per transfer on this host, ns: `count` transfers on a `NullSubmit`, all
/// due at once, so each turn posts, reaps, reads the clock and records.
pub fn loop_cost_ns(clock: &dyn Clock, count: u64) -> Result<f64> {
    let s = Schedule { count, interval_ns: 0.0, budget_ns: u64::MAX, timeout: Duration::from_secs(1) };
    let stop = AtomicBool::new(false);
    let r = run(&mut NullSubmit::default(), clock, &s, &stop)?;
    Ok(r.elapsed_ns as f64 / r.completed.max(1) as f64)
}
