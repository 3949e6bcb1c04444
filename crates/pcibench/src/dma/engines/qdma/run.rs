//! The QDMA driver's hot path: turning transfers into descriptors, posting them into the rings
//! with doorbells, polling the status writebacks, and naming what went wrong when a run fails.

use super::errors::{self, ErrorRegs};
use super::regs::*;
use super::ring::Desc;
use super::{doorbell, Prepared, QdmaEngine, ERRORS_EVERY};
use crate::dma::engines::freshest::completed;
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::dma::{Direction, Work};
use crate::{Error, Result};
use std::time::Duration;

impl QdmaEngine {
    /// Check one transfer and append its descriptors to its ring's list.
    pub(super) fn describe(&self, w: &Work, per_ring: &mut [Vec<Desc>]) -> Result<()> {
        let t = &w.t;
        let r = self.ring_of(w.queue, t.dir).ok_or_else(|| {
            if w.queue >= self.opts.queues {
                Error::usage(format!("queue {} is not one of the {} queues opened", w.queue, self.opts.queues))
            } else {
                Error::Unsupported(format!("this QDMA has no MM {} engine: it cannot DMA {}", t.dir, t.dir.long_name()))
            }
        })?;
        if t.len == 0 {
            return Err(Error::usage("a DMA transfer needs at least 1 byte"));
        }
        if t.buf_offset.checked_add(t.len).is_none_or(|e| e > w.buf.len() as u64) {
            return Err(Error::usage(format!(
                "transfer of {} bytes at buffer offset {:#x} does not fit the {}-byte buffer",
                t.len,
                t.buf_offset,
                w.buf.len()
            )));
        }
        if t.card_addr.checked_add(t.len).is_none_or(|e| e > self.opts.card_size) {
            return Err(Error::usage(format!(
                "transfer of {} bytes at card offset {:#x} does not fit the {:#x}-byte card window at {:#x} (--card-size)",
                t.len, t.card_addr, self.opts.card_size, self.opts.card_addr
            )));
        }
        let base = crate::dma::engines::card_address(self.opts.card_addr, t)?;
        let segs = w.buf.segments();
        // buf_offset + len was checked against the buffer above.
        let (mut at, end, max) = (t.buf_offset, t.buf_offset + t.len, self.max_desc());
        let mut i = segs.partition_point(|s| s.offset + s.len <= at);
        let out = &mut per_ring[r];
        while at < end {
            let s = segs.get(i).filter(|s| s.offset <= at).ok_or_else(|| {
                Error::Device(format!(
                    "buffer bytes {at:#x}..{end:#x} are in no bus segment: the buffer's segment list is incomplete"
                ))
            })?;
            let n = (s.offset + s.len).min(end).min(at + max) - at;
            let host = s.bus + (at - s.offset);
            let card = base + (at - t.buf_offset);
            let (src, dst) = if t.dir == Direction::H2c { (host, card) } else { (card, host) };
            out.push(super::ring::mm_desc(src, dst, n, at == t.buf_offset, at + n == end));
            at += n;
            if at == s.offset + s.len {
                i += 1;
            }
        }
        Ok(())
    }

    /// Post what fits of the prepared descriptors into every ring (the host-side cost of a run):
    /// (re)starts the queues if an earlier error or stop cleared them. Returns descriptors posted.
    pub fn submit(&mut self) -> Result<usize> {
        let mut prep =
            self.prepared.take().ok_or_else(|| Error::usage("QDMA run before prepare: prepare a transfer first"))?;
        let res = (|| {
            self.start()?;
            prep.next.iter_mut().for_each(|n| *n = 0);
            if self.stream.is_some() {
                self.post_stream(&mut prep)
            } else {
                self.post(&mut prep)
            }
        })();
        self.prepared = Some(prep);
        res
    }

    pub(super) fn post(&mut self, prep: &mut Prepared) -> Result<usize> {
        let batch = self.opts.doorbell_batch.max(1);
        let mut posted = 0;
        for (i, ring) in self.rings.iter_mut().enumerate() {
            let descs = &prep.per_ring[i];
            let next = &mut prep.next[i];
            let n = (ring.space() as usize).min(descs.len() - *next);
            for (k, d) in descs[*next..*next + n].iter().enumerate() {
                ring.put(d, self.trace.as_ref());
                if (k as u32 + 1) % batch == 0 {
                    doorbell(&*self.bar, ring.queue, ring.dir, ring.pidx, self.irq_vectors.is_some())?;
                }
            }
            if n as u32 % batch != 0 {
                doorbell(&*self.bar, ring.queue, ring.dir, ring.pidx, self.irq_vectors.is_some())?;
            }
            *next += n;
            posted += n;
        }
        Ok(posted)
    }

    /// Post the rest and poll the status writebacks until every prepared descriptor completed,
    /// an error is logged, or `timeout` passes (then the queues are stopped and cleared).
    pub fn wait(&mut self, timeout: Duration) -> Result<()> {
        let mut prep = self.prepared.take().ok_or_else(|| Error::usage("QDMA wait before prepare"))?;
        let res = if self.stream.is_some() {
            self.wait_stream(&mut prep, timeout, None)
        } else {
            self.wait_prepared(&mut prep, timeout)
        };
        self.prepared = Some(prep);
        res
    }

    fn wait_prepared(&mut self, prep: &mut Prepared, timeout: Duration) -> Result<()> {
        // Progress is every queue's completed descriptors together, as the status writebacks say,
        // plus the MM engines' completed-descriptor counts (which move with each descriptor, while
        // the writeback may come once per many): one moving queue keeps the run alive, none
        // moving for the timeout stops it.
        let mut pace = Pace::new(timeout);
        let mut engines = 0u64;
        loop {
            // The host looks at host memory: a simulated engine brings itself to now.
            self.bar().observe();
            let mut busy = false;
            let mut lost = None;
            let mut completed = 0u64;
            for (i, ring) in self.rings.iter_mut().enumerate() {
                if let Err(e) = ring.reap(self.trace.as_ref()) {
                    lost = Some(e);
                    break;
                }
                busy |= ring.outstanding > 0 || prep.next[i] < prep.per_ring[i].len();
                completed += (prep.next[i] - ring.outstanding as usize) as u64;
            }
            if let Some(e) = lost {
                return Err(self.fail(prep, e.to_string()));
            }
            if !busy {
                // One look at the error registers at completion, whatever the polls during the
                // run saw: a run shorter than the error poll had none (W3), and an error logged
                // after a longer run's last poll would otherwise fail the next row or nothing
                // (issue 50 item 8). One register read a run.
                if self.error_stops_run()? {
                    return Err(self.fail(prep, "logged an error during the run".into()));
                }
                return Ok(());
            }
            self.post(prep)?;
            let Some(due) = pace.tick() else { continue };
            if due {
                if self.error_stops_run()? {
                    return Err(self.fail(prep, "stopped on an error".into()));
                }
                engines = 0;
                for i in 0..self.dirs.len() {
                    engines += u64::from(rd(self.bar(), mm(self.dirs[i], MM_COMPLETED))?);
                }
            }
            if pace.stalled(completed.wrapping_add(engines)) {
                return Err(self.fail(prep, no_progress(timeout)));
            }
        }
    }

    /// Whether the error registers hold an error that fails the run: a GLBL_ERR_STAT leaf the
    /// driver enabled (`IpKind::glbl_enables`), unless the descriptor engine's leaf holds only
    /// a corrected single-bit ECC error (cleared, leaf first, and noted). Other bits set (a RAM
    /// ECC or stream leaf the vendor's driver enabled before, and pcibench left as found) fail
    /// nothing, as docs/engines/qdma.md says: they are noted once, and left for their owner.
    pub(super) fn error_stops_run(&mut self) -> Result<bool> {
        let glbl = rd(self.bar(), R_GLBL_ERR_STAT)?;
        if glbl == 0 {
            return Ok(false);
        }
        let st = if self.stream.is_some() { GLBL_C2H_ST } else { 0 };
        let (layout, watched) = (self.info.ip.err_layout(), self.info.ip.glbl_enables() | st);
        let mut fails = glbl & watched;
        if fails == GLBL_DSC {
            let dsc = rd(self.bar(), R_DSC_ERR_STS)?;
            if dsc != 0 && dsc & !DSC_SBE == 0 {
                wr(self.bar(), R_DSC_ERR_STS, dsc)?;
                wr(self.bar(), R_GLBL_ERR_STAT, GLBL_DSC)?;
                self.note_once(format!(
                    "GLBL_DSC_ERR_STS {dsc:#x}: descriptor RAM single-bit error, corrected by ECC: cleared, the run went on"
                ));
                fails = 0;
            }
        }
        let other = glbl & !watched;
        // Noted already: the hot path does not format it again every run.
        if other != 0 && other != self.unwatched_glbl {
            self.unwatched_glbl = other;
            self.note_once(format!(
                "GLBL_ERR_STAT {other:#x} ({}) is set: pcibench does not enable that leaf, so it fails no run; left \
                 as found",
                errors::glbl_words(layout, other)
            ));
        }
        Ok(fails != 0)
    }

    /// The card no longer answers when its identifier register (0x0: 0x1fd3 in its top bits on
    /// a live card, `qdma_is_config_bar`'s check) and its version register (GLBL2_MISC_CAP 0x134:
    /// device types 0-2 in its top nibble, so never 0xf) both read all-ones, as XDMA's identifier
    /// and edu's identification are checked.
    pub(super) fn gone(&self) -> Option<Error> {
        let id = rd(self.bar(), R_ID).ok()?;
        let version = rd(self.bar(), R_MISC_CAP).ok()?;
        (id == u32::MAX && version == u32::MAX).then(|| {
            Error::Gone(
                "QDMA's identifier (0x0, 0x1fd3 in its top bits) and version (GLBL2_MISC_CAP 0x134) registers read 0xffffffff".into(),
            )
        })
    }

    fn note_once(&mut self, what: String) {
        if !self.unwatched.contains(&what) {
            self.unwatched.push(what);
        }
    }

    /// Name what went wrong (error registers, progress and contexts of unfinished queues, the
    /// queues an error log names or whose software context holds an error first), stop the
    /// queues (waiting for what is in flight), then clear the error bits; the error to return.
    pub(super) fn fail(&mut self, prep: &Prepared, what: String) -> Error {
        // An error register of all-ones, or no progress, may be the card gone: then its
        // contexts, which cost a timeout per read, are not worth asking, and the run is stopped
        // with the card-gone line instead of a failure of the engine's.
        if let Some(gone) = self.gone() {
            return gone;
        }
        let mut parts = vec![];
        let (ip, present) = (self.info.ip, self.info.mm_present());
        // Reap every ring once more: a writeback may have landed since the wait loop last looked
        // (the model, like the IP, logs an error after writing back what completed before it).
        for r in self.rings.iter_mut() {
            if let Err(e) = r.reap(self.trace.as_ref()) {
                parts.push(e.to_string());
            }
        }
        let errors = ErrorRegs::read(self.bar(), ip, present);
        let failing = errors.as_ref().ok().and_then(|e| e.failing_queue());
        let mut queues: Vec<(bool, String)> = vec![];
        let mut readable = true;
        for (i, r) in self.rings.iter().enumerate() {
            let total = prep.per_ring[i].len();
            let done = prep.next[i] - r.outstanding as usize;
            let qid = self.qbase + r.queue as u32;
            let named = failing.is_some_and(|f| f.qid == qid && f.dir.is_none_or(|d| d == r.dir));
            if done >= total && !named {
                continue;
            }
            // A context RAM that does not answer costs its timeout per read: one try is enough.
            let ctx = if readable { Some(self.queue_contexts(r.queue, r.dir)) } else { None };
            let mut counter = None;
            let (first, ctx) = match ctx {
                Some(Ok((sw, hw))) => {
                    // The hardware context's consumer index moves with each descriptor; the
                    // status writeback only after a burst: descriptors it is past the last
                    // writeback completed too (at most those posted).
                    let ahead = (u32::from(hw.cidx) + r.slots - r.cidx) % r.slots;
                    if u32::from(hw.cidx) < r.slots && ahead <= r.outstanding {
                        counter = Some(((done + ahead as usize) as u64, "the hardware context"));
                    }
                    (named || sw.error != 0, format!("software context [{sw}], hardware context [{hw}]"))
                }
                Some(Err(e)) => {
                    readable = false;
                    (named, format!("contexts unreadable: {e}"))
                }
                None => (named, "contexts not read".into()),
            };
            let progress = completed(total as u64, done as u64, "status writeback", counter);
            let text = format!("{} queue {}: {progress}; {ctx}", r.dir, r.queue);
            queues.push((first, text));
        }
        // The queues an error names first (a stable sort keeps ring order otherwise).
        queues.sort_by_key(|(first, _)| !first);
        let listed = queues.len().min(4);
        parts.extend(queues.iter().take(listed).map(|(_, t)| t.clone()));
        if queues.len() > listed {
            parts.push("(further queues not listed)".into());
        }
        for dir in self.dirs.clone().into_iter().filter(|_| self.stream.is_none()) {
            let bar = self.bar();
            let run = rd(bar, mm(dir, MM_CONTROL)).map(|v| if v & MM_RUN != 0 { "running" } else { "NOT running" });
            let done = rd(bar, mm(dir, MM_COMPLETED));
            if let (Ok(run), Ok(done)) = (run, done) {
                parts.push(format!("MM {dir} engine {run}, {done} descriptors completed since reset"));
            }
        }
        match &errors {
            Ok(e) if e.any() => parts.push(e.describe()),
            Ok(_) => parts.push("no error bits set".into()),
            Err(e) => parts.push(format!("error registers unreadable: {e}")),
        }
        let stopped = match self.stop_queues() {
            Ok(0) => "queues stopped and cleared".to_string(),
            Ok(n) => format!("{}; queues stopped and cleared", self.undrained(n)),
            Err(e) => format!("stopping the queues failed too: {e}"),
        };
        // Cleared only now: descriptors still in flight while stopping may have logged more,
        // which the next run must not take for its own.
        if let Ok(after) = ErrorRegs::read(self.bar(), ip, present) {
            if after.any() {
                if errors.as_ref().ok() != Some(&after) {
                    parts.push(format!("while stopping: {}", after.describe()));
                }
                let _ = after.clear(self.bar(), present);
            }
        }
        Error::Device(format!("QDMA {what}: {}; {stopped}", parts.join("; ")))
    }
}

/// The polling waits' pacing, shared by the MM loop (`wait_prepared`) and the stream loop
/// (`wait_stream`): a spin hint every pass; every 16th pass the error registers when they are
/// due (at most every `ERRORS_EVERY`), the progress watchdog, and a yield once the wait has
/// lasted long. No yield: a simulated engine needs no CPU of its own (issue 52), and a yield on a
/// busy host would cost a time slice. The loops look once more at completion.
pub(super) struct Pace {
    pub dog: Watchdog,
    next_check: Duration,
    spins: u32,
}

impl Pace {
    pub fn new(timeout: Duration) -> Pace {
        Pace { dog: Watchdog::new(timeout), next_check: ERRORS_EVERY, spins: 0 }
    }

    /// One pass: None on most; Some(whether the error registers are due a look) every 16th.
    pub fn tick(&mut self) -> Option<bool> {
        std::hint::spin_loop();
        self.spins = self.spins.wrapping_add(1);
        if self.spins % 16 != 0 {
            return None;
        }
        let elapsed = self.dog.elapsed();
        let due = elapsed >= self.next_check;
        if due {
            self.next_check = elapsed + ERRORS_EVERY;
        }
        Some(due)
    }

    /// After a 16th pass: whether `progress` has not moved for the timeout; else yield if the
    /// wait is long.
    pub fn stalled(&mut self, progress: u64) -> bool {
        self.dog.stalled(progress)
    }
}
