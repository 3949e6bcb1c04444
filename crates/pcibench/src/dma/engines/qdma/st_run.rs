//! The stream hot path: transfers into packets and descriptors (`describe_stream`), posting them
//! (`post_stream`), the example design's generator started one queue at a time (it has one queue
//! register), and polling: H2C rings by their status writeback, C2H queues by their completion
//! rings, each entry's colour, error bit and length checked, its buffers given back as credits.

use super::regs::*;
use super::ring::Desc;
use super::st::{self, Cmpt, ExampleDesign, Packets, BUF_BYTES};
use super::{doorbell, Prepared, QdmaEngine};
use crate::access::Interrupts;
use crate::dma::watchdog::no_progress;
use crate::dma::{Direction, Work};
use crate::{Error, Result};
use std::time::Duration;

/// What stream mode adds to the engine.
pub(super) struct Stream {
    pub ex: ExampleDesign,
    /// The completion ring of each C2H ring in `QdmaEngine::rings` (None for H2C rings).
    pub cmpt: Vec<Option<Cmpt>>,
    /// Packets the prepared batch asks of each ring, and their length.
    pub want: Vec<u32>,
    pub len: Option<u64>,
}

impl QdmaEngine {
    /// Check one stream transfer and append its descriptors to its ring's list.
    pub(super) fn describe_stream(&mut self, w: &Work, per_ring: &mut [Vec<Desc>]) -> Result<()> {
        let t = &w.t;
        let r = self.ring_of(w.queue, t.dir).ok_or_else(|| {
            Error::usage(format!("queue {} is not one of the {} queues opened", w.queue, self.opts.queues))
        })?;
        if t.len == 0 {
            return Err(Error::usage("a DMA transfer needs at least 1 byte"));
        }
        let p = Packets::of(t.len);
        let s = self.stream.as_mut().expect("stream mode");
        if s.len.is_some_and(|l| l != p.len) {
            return Err(Error::usage(
                "a stream batch's transfers must all be one size: the example design's generator has one length register",
            ));
        }
        s.len = Some(p.len);
        if t.dir == Direction::C2h {
            s.want[r] += p.count as u32;
        }
        let host = if t.dir == Direction::C2h { p.stride() } else { t.len };
        if t.buf_offset.checked_add(host).is_none_or(|e| e > w.buf.len() as u64) {
            return Err(Error::usage(format!(
                "a stream transfer of {} bytes at buffer offset {:#x} needs {host} bytes of the {}-byte buffer",
                t.len,
                t.buf_offset,
                w.buf.len()
            )));
        }
        let out = &mut per_ring[r];
        let unmapped = |at: u64| {
            Error::Device(format!(
                "buffer bytes at {at:#x} are in no bus segment: the buffer's segment list is incomplete"
            ))
        };
        for j in 0..p.count {
            match t.dir {
                Direction::C2h => {
                    for b in 0..p.buffers {
                        let at = t.buf_offset + (j * p.buffers + b) * BUF_BYTES;
                        let bus = w.buf.bus_range(at, BUF_BYTES).ok_or_else(|| unmapped(at))?;
                        out.push(st::c2h_desc(bus));
                    }
                }
                Direction::H2c => {
                    // One descriptor per packet, the packet bus-contiguous (PG302: in internal
                    // mode a packet cannot span descriptors).
                    let at = t.buf_offset + j * p.len;
                    let bus = w.buf.bus_range(at, p.len.max(1)).ok_or_else(|| {
                        Error::Unsupported(format!(
                            "a {}-byte H2C stream packet at buffer offset {at:#x} is not bus-contiguous: an \
                             internal-mode H2C descriptor carries one whole packet (PG302 \"H2C Stream Descriptor\"); \
                             use a buffer with contiguous pages (--buffer hugepage)",
                            p.len
                        ))
                    })?;
                    out.push(st::h2c_desc(bus, p.len));
                }
            }
        }
        Ok(())
    }

    /// Post what fits of the prepared stream descriptors, a doorbell every `doorbell_batch`.
    pub(super) fn post_stream(&mut self, prep: &mut Prepared) -> Result<usize> {
        let batch = self.opts.doorbell_batch.max(1);
        // In interrupt mode an H2C PIDX update arms the queue as on MM queues; a C2H queue is
        // armed through its completion ring's CIDX (`reap_cmpt`).
        let arm = self.irq_vectors.is_some();
        let mut posted = 0;
        for (i, ring) in self.rings.iter_mut().enumerate() {
            let descs = &prep.per_ring[i];
            let next = &mut prep.next[i];
            let n = (ring.space() as usize).min(descs.len() - *next);
            for (k, d) in descs[*next..*next + n].iter().enumerate() {
                if let Some(t) = &self.trace {
                    let w0 = u64::from_le(d[0]);
                    let fields =
                        [("queue", ring.queue.into()), ("c2h", (ring.dir == Direction::C2h).into()), ("word0", w0)];
                    let bytes: Vec<u8> =
                        d.iter().flat_map(|w| u64::from_le(*w).to_le_bytes()).take(ring.desc as usize).collect();
                    t.descriptor("qdma-st", ring.pidx.into(), ring.bus + ring.pidx as u64 * ring.desc, &bytes, &fields);
                }
                // SAFETY: a `Desc` is 32 bytes, at least one descriptor of any size.
                ring.put_bytes(unsafe { std::slice::from_raw_parts(d.as_ptr().cast::<u8>(), 32) });
                if (k as u32 + 1) % batch == 0 {
                    doorbell(&*self.bar, ring.queue, ring.dir, ring.pidx, arm && ring.dir == Direction::H2c)?;
                }
            }
            if n as u32 % batch != 0 {
                doorbell(&*self.bar, ring.queue, ring.dir, ring.pidx, arm && ring.dir == Direction::H2c)?;
            }
            *next += n;
            posted += n;
        }
        Ok(posted)
    }

    /// Reap the completion entries the C2H ring `i` has reported (up to its status
    /// descriptor's producer index, which the trigger moves), checking each; returns packets
    /// reaped.
    fn reap_cmpt(&mut self, i: usize, len: u64, left: &mut u32) -> Result<u32> {
        let (irq, trigger) = (self.irq_vectors.is_some(), self.opts.trigger);
        let s = self.stream.as_mut().expect("stream mode");
        let Some(c) = s.cmpt[i].as_mut() else { return Ok(0) };
        let ring = &mut self.rings[i];
        let reported = c.reported();
        let mut n = 0;
        // An entry reported and not yet seen with its colour is still on its way: next look.
        while let Some(e) = (c.ring.cidx != reported).then(|| c.peek()).flatten() {
            let at = c.ring.cidx;
            let q = ring.queue;
            if e.err {
                return Err(Error::Device(format!(
                    "QDMA c2h queue {q}: completion entry {at} has its error bit set (the packet's data is not valid)"
                )));
            }
            if *left == 0 {
                return Err(Error::Device(format!(
                    "QDMA c2h queue {q}: completion entry {at} is a packet more than the generator was asked for"
                )));
            }
            if e.len != len {
                return Err(Error::Device(format!(
                    "QDMA c2h queue {q}: completion entry {at} reports a packet of {} bytes; the generator was asked for {len}",
                    e.len
                )));
            }
            let used = if e.desc_used { e.len.div_ceil(BUF_BYTES).max(1) as u32 } else { 0 };
            if used > ring.outstanding {
                return Err(Error::Device(format!(
                    "QDMA c2h queue {q}: completion entry {at} used {used} buffers, more than the {} posted",
                    ring.outstanding
                )));
            }
            // The ring's own cidx stays as the (disabled) status writeback leaves it: a C2H ST
            // queue's buffers come back through its completions, counted here.
            ring.outstanding -= used;
            c.advance();
            *left -= 1;
            n += 1;
        }
        if n > 0 {
            let reg = R_PF_DOORBELLS + ring.queue as u64 * DB_STEP + DB_CMPT_CIDX;
            wr(&*self.bar, reg, st::cmpt_doorbell(c.ring.cidx, irq, &trigger))?;
        }
        Ok(n)
    }

    /// Post the rest, run the generator queue by queue and poll every ring until the batch is
    /// done, an error is logged or a completion entry is wrong, or `timeout` passes without
    /// progress (then the queues are stopped and cleared). With `irq` the thread sleeps on the
    /// queues' vectors between looks instead of spinning (`irq.rs`).
    pub(super) fn wait_stream(
        &mut self,
        prep: &mut Prepared,
        timeout: Duration,
        irq: Option<&dyn Interrupts>,
    ) -> Result<()> {
        let (want, len) = {
            let s = self.stream.as_ref().expect("stream mode");
            (s.want.clone(), s.len.unwrap_or(0))
        };
        let mut todo = want.clone();
        let mut left = want;
        let mut generating: Option<usize> = None;
        let mut pace = super::run::Pace::new(timeout);
        let mut reaped = 0u64;
        loop {
            // The host looks at host memory: a simulated engine brings itself to now.
            self.bar().observe();
            let mut busy = false;
            let mut lost = None;
            let mut completed = reaped;
            for (i, left) in left.iter_mut().enumerate() {
                if self.rings[i].dir == Direction::H2c {
                    if let Err(e) = self.rings[i].reap(self.trace.as_ref()) {
                        lost = Some(e);
                        break;
                    }
                    busy |= self.rings[i].outstanding > 0 || prep.next[i] < prep.per_ring[i].len();
                    completed += (prep.next[i] - self.rings[i].outstanding as usize) as u64;
                } else {
                    match self.reap_cmpt(i, len, left) {
                        Ok(n) => reaped += n as u64,
                        Err(e) => {
                            lost = Some(e);
                            break;
                        }
                    }
                    busy |= *left > 0;
                }
            }
            if let Some(e) = lost {
                let _ = self.stream.as_ref().map(|s| s.ex.stop());
                return Err(self.fail(prep, e.to_string()));
            }
            if generating.is_some_and(|i| left[i] == 0) {
                generating = None;
            }
            if generating.is_none() {
                if let Some(i) = (0..todo.len()).find(|i| todo[*i] > 0) {
                    let qid = self.qbase + self.rings[i].queue as u32;
                    let s = self.stream.as_ref().expect("stream mode");
                    s.ex.generate(qid, len, todo[i])?;
                    todo[i] = 0;
                    generating = Some(i);
                    busy = true;
                }
            }
            if !busy {
                if let Some(irq) = irq {
                    // The handler for what fired meanwhile (the ring walked, armed again).
                    let fired = irq.wait(Duration::ZERO)?;
                    if let Some(why) = self.service(&fired, true)? {
                        return Err(self.fail(prep, why));
                    }
                }
                // Once at completion, whatever the polls saw (issue 50 item 8).
                if self.error_stops_run()? {
                    let c2h = take_c2h_errors(&*self.bar)?.map_or(String::new(), |w| format!(": {w}"));
                    return Err(self.fail(prep, format!("logged an error during the run{c2h}")));
                }
                return Ok(());
            }
            self.post_stream(prep)?;
            if let Some(irq) = irq {
                // Re-arm every H2C queue with work left (its PIDX again, with the arm bit); C2H
                // queues were re-armed by their last CIDX update.
                for r in self.rings.iter().filter(|r| r.dir == Direction::H2c && r.outstanding > 0) {
                    doorbell(&*self.bar, r.queue, r.dir, r.pidx, true)?;
                }
                let fired = irq.wait(super::irq::SLICE.min(timeout))?;
                if let Some(why) = self.service(&fired, false)? {
                    let _ = self.stream.as_ref().map(|s| s.ex.stop());
                    return Err(self.fail(prep, why));
                }
                if fired.is_empty() && pace.dog.stalled(completed) {
                    let _ = self.stream.as_ref().map(|s| s.ex.stop());
                    let why = format!("no interrupt came ({}) and {}", irq.describe(), no_progress(timeout));
                    return Err(self.fail(prep, why));
                }
                if !fired.is_empty() {
                    continue;
                }
            }
            let Some(due) = pace.tick() else { continue };
            if due && self.error_stops_run()? {
                let _ = self.stream.as_ref().map(|s| s.ex.stop());
                let c2h = take_c2h_errors(&*self.bar)?.map_or(String::new(), |w| format!(": {w}"));
                return Err(self.fail(prep, format!("stopped on an error{c2h}")));
            }
            if pace.stalled(completed) {
                let _ = self.stream.as_ref().map(|s| s.ex.stop());
                return Err(self.fail(prep, no_progress(timeout)));
            }
        }
    }
}

impl crate::dma::StreamEnd for QdmaEngine {
    fn packets(&self, size: u64) -> u64 {
        Packets::of(size).count
    }

    fn c2h_stride(&self, size: u64) -> u64 {
        Packets::of(size).stride()
    }

    /// Each packet starts in a fresh receive buffer (the engine takes whole buffers per packet).
    fn c2h_pieces(&self, size: u64) -> Vec<(u64, u64)> {
        let p = Packets::of(size);
        (0..p.count).map(|j| (j * p.buffers * BUF_BYTES, p.len)).collect()
    }

    fn transfer_bytes(&self, size: u64) -> Vec<u8> {
        st::transfer_bytes(size)
    }

    fn clear_checker(&mut self) -> Result<()> {
        self.start()?;
        self.stream.as_ref().map_or(Ok(()), |s| s.ex.clear_checker())
    }

    fn checker(&mut self) -> Result<std::result::Result<(), String>> {
        self.stream.as_ref().map_or(Ok(Ok(())), |s| s.ex.checker())
    }
}

/// C2H_ERR_STAT bits in words, cleared (write 1 to clear) with their GLBL_ERR_STAT leaf.
pub(super) fn take_c2h_errors(bar: &dyn crate::access::BarRegion) -> Result<Option<String>> {
    let v = rd(bar, R_C2H_ERR_STAT)?;
    if v == 0 {
        return Ok(None);
    }
    let names = [
        (C2H_ERR_CMPT_INV_Q, "completion for an invalid queue"),
        (C2H_ERR_CMPT_QFULL, "completion ring full"),
        (C2H_ERR_CMPT_CIDX, "completion CIDX past the producer index"),
    ];
    let words: Vec<&str> = names.iter().filter(|(b, _)| v & b != 0).map(|(_, n)| *n).collect();
    wr(bar, R_C2H_ERR_STAT, v)?;
    wr(bar, R_GLBL_ERR_STAT, GLBL_C2H_ST)?;
    let words = if words.is_empty() { "other C2H ST errors".to_string() } else { words.join(", ") };
    Ok(Some(format!("C2H_ERR_STAT {v:#x} ({words})")))
}
