//! Taking the device (ring-size table, error logging, FMAP, MM engines), starting and stopping
//! the queues (the contexts each gets, and clearing them after waiting for what is in flight, as
//! the vendor's `qdma_queue_stop` does), and putting the device back as it was found when the
//! engine goes.

use super::ctx::{Fmap, HwCtx, Sel, SwCtx};
use super::regs::*;
use super::ring::Ring;
use super::{doorbell, perf, ErrorRegs, QdmaEngine, DRAIN_POLL};
use crate::dma::Direction;
use crate::{Error, Result};
use std::time::Instant;

impl QdmaEngine {
    /// Ring-size table, error logging, FMAP and MM engine run bits, saving what was there.
    pub(super) fn take_device(&mut self, fmap: Fmap) -> Result<()> {
        let (bar, ip) = (&*self.bar, self.info.ip);
        let found = std::mem::replace(&mut self.info.ring_entries, VENDOR_RING_SIZES.to_vec());
        self.saved.ring_table = Some(found.clone());
        for (i, v) in VENDOR_RING_SIZES.iter().enumerate() {
            wr(bar, R_RNG_SZ + 4 * i as u64, *v)?;
        }
        if found.iter().all(|e| *e == 0) {
            self.notes.push("the global ring-size table was empty: loaded the vendor driver's default table".into());
        } else if found[..] != VENDOR_RING_SIZES[..] {
            self.notes
                .push("the global ring-size table held other sizes: loaded the vendor driver's default table".into());
        }
        // The vendor's performance settings (EQDMA 5.0, CPM5), written at its every init.
        self.saved.perf = perf::program(bar, ip, self.info.misc_cap)?;
        let masks = [rd(bar, R_GLBL_ERR_MASK)?, rd(bar, R_DSC_ERR_MSK)?, rd(bar, R_TRQ_ERR_MSK)?];
        self.saved.masks = Some(masks);
        // Log what the vendor's `*_hw_error_enable` logs, so a failure can be named: every
        // descriptor-engine and register-access error, and the MM engines where the IP's header
        // defines their bits. Nothing the header leaves undefined is set.
        let (dsc_all, trq_all) = ip.dsc_trq_enables();
        wr(bar, R_GLBL_ERR_MASK, masks[0] | ip.glbl_enables())?;
        wr(bar, R_DSC_ERR_MSK, masks[1] | dsc_all)?;
        wr(bar, R_TRQ_ERR_MSK, masks[2] | trq_all)?;
        for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
            if let (true, Some(enable)) = (self.info.has(dir), ip.mm_enables(dir)) {
                let old = rd(bar, mm(dir, MM_ERR_ENABLE))?;
                self.saved.mm_err_enable[i] = Some(old);
                wr(bar, mm(dir, MM_ERR_ENABLE), old | enable)?;
            }
        }
        let stale = ErrorRegs::read(bar, ip, self.info.mm_present())?;
        if stale.any() {
            self.notes.push(format!("cleared errors left from before: {}", stale.describe()));
            stale.clear(bar, self.info.mm_present())?;
        }
        self.saved.fmap = Some(fmap);
        let want = Fmap { qbase: self.qbase, qmax: self.opts.queues as u32 };
        let func = self.info.func as u32;
        self.ctx().write(Sel::Fmap, func, &want.words(ip))?;
        let back = Fmap::from_words(&self.ctx().read(Sel::Fmap, func)?, ip);
        if back != want {
            return Err(Error::Device(format!(
                "QDMA FMAP of function {func} reads back as queues {}+{} after writing {}+{}: the context RAM did not take it",
                back.qbase, back.qmax, want.qbase, want.qmax
            )));
        }
        for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
            if self.info.has(dir) && self.stream.is_none() {
                let bar = &*self.bar;
                self.saved.mm_control[i] = Some(rd(bar, mm(dir, MM_CONTROL))?);
                wr(bar, mm(dir, MM_CONTROL), MM_RUN)?;
            }
        }
        self.take_stream_device()
    }

    /// The software context every queue gets.
    fn sw_context(&self, ring: &Ring) -> SwCtx {
        if self.stream.is_some() {
            return self.st_sw_context(ring);
        }
        SwCtx {
            func: self.info.func as u16,
            enabled: true,
            wbi_chk: true,
            wbi_intvl: true,
            fetch_max: FETCH_MAX_NUM,
            ring_idx: self.ring_idx,
            desc_size: DESC_SZ_32B,
            writeback: true,
            marker_disable: true,
            is_mm: true,
            ring_base: ring.bus,
            irq: self.irq_vectors.is_some(),
            irq_arm: self.irq_vectors.is_some(),
            // Aggregated: the function's interrupt ring index in the vector field (`aggr.rs`).
            vec: self.irq_target(ring).map_or(0, |t| t.0),
            intr_aggr: self.irq_target(ring).is_some_and(|t| t.1),
            ..SwCtx::default()
        }
    }

    /// Start every queue: clear its contexts, write the software context, read it back.
    pub(super) fn start_queues(&mut self) -> Result<()> {
        self.started = true;
        if self.irq_vectors.is_some() {
            self.arm_interrupts()?;
        }
        for i in 0..self.rings.len() {
            self.rings[i].reset();
            let (q, dir) = (self.rings[i].queue, self.rings[i].dir);
            let qid = self.qbase + q as u32;
            let ctx = self.ctx();
            for sel in [Sel::Sw(dir), Sel::Hw(dir), Sel::Credit(dir)].iter().chain(self.stream_sels(dir)) {
                ctx.clear(*sel, qid)?;
            }
            let sw = self.sw_context(&self.rings[i]);
            ctx.write(Sel::Sw(dir), qid, &sw.words())?;
            let back = SwCtx::from_words(&ctx.read(Sel::Sw(dir), qid)?);
            if !back.same_settings(&sw) {
                return Err(Error::Device(format!(
                    "QDMA {dir} queue {q}: the software context reads back as [{back}] after writing [{sw}]"
                )));
            }
            self.start_stream_queue(i, qid)?;
            // A C2H stream queue is armed through its completion ring's CIDX, not its PIDX.
            let c2h_st = self.stream.is_some() && dir == Direction::C2h;
            doorbell(self.bar(), q, dir, 0, self.irq_vectors.is_some() && !c2h_st)?;
        }
        Ok(())
    }

    /// Stop and clear every queue: wait for what is in flight (`drain`), then invalidate and
    /// clear each context, going on past errors. Returns the descriptors still pending when the
    /// wait gave up (0: nothing was left in flight).
    pub(super) fn stop_queues(&mut self) -> Result<u32> {
        if !self.started {
            return Ok(0);
        }
        self.started = false;
        let mut first = self.stream.as_ref().and_then(|s| s.ex.stop().err());
        let pending = self.drain();
        for r in &self.rings {
            let qid = self.qbase + r.queue as u32;
            for sel in [Sel::Sw(r.dir), Sel::Hw(r.dir), Sel::Credit(r.dir)].iter().chain(self.stream_sels(r.dir)) {
                let sel = *sel;
                if let Err(e) = self.ctx().invalidate(sel, qid).and_then(|_| self.ctx().clear(sel, qid)) {
                    first.get_or_insert(e);
                }
            }
        }
        if self.irq_vectors.is_some() {
            if let Err(e) = self.disarm_interrupts() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(pending), Err)
    }

    /// Wait, as the vendor's `qdma_queue_stop` does before it invalidates the contexts
    /// (`q_stop_wait`: up to `drain_timeout` for the pending list to empty), until nothing posted
    /// can still be moving data, so no DMA lands in a buffer after the queues are given up. A
    /// ring is drained when its status writeback shows every posted descriptor done, or when its
    /// hardware context says the queue is invalid with no descriptor pending (an error stopped
    /// it). Returns the descriptors still outstanding when the wait gave up.
    fn drain(&mut self) -> u32 {
        let start = Instant::now();
        let mut drained = vec![false; self.rings.len()];
        loop {
            let mut left = 0;
            for (i, done) in drained.iter_mut().enumerate() {
                if *done {
                    continue;
                }
                // A writeback that makes no sense leaves the count as it was: the context decides.
                let _ = self.rings[i].reap(self.trace.as_ref());
                let (q, dir, outstanding) = (self.rings[i].queue, self.rings[i].dir, self.rings[i].outstanding);
                // A C2H ST queue's posted buffers are credits, not transfers: with the generator
                // stopped nothing comes for them.
                if outstanding == 0 || (self.stream.is_some() && dir == Direction::C2h) {
                    *done = true;
                    continue;
                }
                match self.ctx().read(Sel::Hw(dir), self.qbase + q as u32) {
                    Ok(w) if !HwCtx::from_words(&w).idle_stopped => left += outstanding,
                    // Stopped with nothing pending, or a context RAM that does not answer.
                    _ => *done = true,
                }
            }
            if left == 0 || start.elapsed() >= self.opts.drain_timeout {
                return left;
            }
            std::thread::sleep(DRAIN_POLL);
        }
    }

    /// What a drain that gave up leaves behind, in words.
    pub(super) fn undrained(&self, left: u32) -> String {
        format!(
            "{left} descriptors still pending after waiting {:?} for them to finish (their DMA may still land in \
             the buffers)",
            self.opts.drain_timeout
        )
    }

    /// Stop the queues and put back what `take_device` changed (best effort: on drop there is no
    /// one left to report to).
    pub(super) fn give_back(&mut self) {
        let _ = self.stop_queues();
        let bar = &*self.bar;
        for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
            if let Some(v) = self.saved.mm_control[i] {
                let _ = wr(bar, mm(dir, MM_CONTROL), v);
            }
            if let Some(v) = self.saved.mm_err_enable[i] {
                let _ = wr(bar, mm(dir, MM_ERR_ENABLE), v);
            }
        }
        if let Some(f) = self.saved.fmap {
            let func = self.info.func as u32;
            let _ = if f.qmax == 0 {
                self.ctx().clear(Sel::Fmap, func)
            } else {
                self.ctx().write(Sel::Fmap, func, &f.words(self.info.ip))
            };
        }
        if let Some([g, d, t]) = self.saved.masks {
            let _ = wr(bar, R_GLBL_ERR_MASK, g).and(wr(bar, R_DSC_ERR_MSK, d)).and(wr(bar, R_TRQ_ERR_MSK, t));
        }
        if let Some(table) = &self.saved.ring_table {
            for (i, v) in table.iter().enumerate() {
                let _ = wr(bar, R_RNG_SZ + 4 * i as u64, *v);
            }
        }
        for (at, v) in &self.saved.perf {
            let _ = wr(bar, *at, *v);
        }
        self.restore_stream();
    }
}
