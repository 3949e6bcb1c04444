//! QDMA completion by interrupt, in libqdma's two interrupt modes (`qdma_drv_mode`), chosen
//! with `--qdma-intr`:
//!
//! - direct (`DIRECT_INTR_MODE`, the default): each queue's software context gets the interrupt
//!   enable (`irq_en`, word 1 bit 21), armed (`irq_arm`, word 0 bit 16) and an MSI-X vector of
//!   its own (word 4 [10:0], `intr_aggr` clear; `qdma_context.c` `make_sw_context`); the queues
//!   are spread over the data vectors routed, as libqdma gives each new queue the least-loaded
//!   data vector (`qdma_descq.c`).
//! - aggregated (`INDIRECT_INTR_MODE`): every queue names the function's interrupt ring instead
//!   (`aggr.rs`), which raises one data vector; the handler walks the ring for the queues to
//!   service and writes the ring's CIDX.
//!
//! Either way a queue raises its interrupt at a status writeback while armed, and disarms; every
//! PIDX update carries the arm bit again (`QDMA_DMA_SEL_IRQ_EN_MASK`), so the handler re-arms a
//! queue that still has work by writing its producer index unchanged.
//!
//! The error interrupt: libqdma gives the master PF's error interrupt a vector before the data
//! vectors (`intr_setup`), points GLBL_ERR_INT at it (`qdma_err_intr_setup`: function and vector)
//! and arms it (`qdma_hw_error_intr_rearm`); its handler reads and clears the error status
//! (`qdma_hw_error_process`) and re-arms. Only the master PF takes it: found armed for another
//! function, it is left alone and errors are polled. pcibench routes vector 0 to errors and the data from
//! vector 1 (everything on vector 0 when only one is routed); an error that fires it fails the run
//! at once with the error named (`fail` reads and clears the global and leaf status), one the run
//! survives (a leaf pcibench did not enable) is noted and the interrupt re-armed.
//!
//! Switching mode restarts the queues with the other context; stopping them (polling again, a
//! stop, the engine dropped) clears the contexts, interrupt fields included, invalidates and
//! clears the interrupt ring's context and puts GLBL_ERR_INT back as found.

use super::ctx::{IntrCtx, Sel};
use super::regs::*;
use super::{aggr::IntrRing, doorbell, Prepared, QdmaEngine, QdmaIntr};
use crate::access::{Fired, Interrupts, IrqKind, IrqRequest};
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::{Error, Result};
use std::time::Duration;

/// How long one sleep on the eventfds lasts before the rings are looked at again: an interrupt
/// that never comes is ended by the progress watchdog, as a stalled poll is.
pub(super) const SLICE: Duration = Duration::from_millis(20);
/// The error interrupt's vector (libqdma's error vector precedes its data vectors).
pub(super) const ERR_VECTOR: u16 = 0;

/// The function GLBL_ERR_INT (as `found`) is armed for, when that is not `func`: the error
/// interrupt is another function's to keep. `mask`: the IP's function field.
pub(super) fn err_int_owner(found: u32, func: u32, mask: u32) -> Option<u32> {
    (found & ERR_INT_ARM != 0 && found & mask != func & mask).then_some(found & mask)
}

impl QdmaEngine {
    /// The mode `--qdma-intr` chose.
    pub fn intr_mode(&self) -> QdmaIntr {
        if self.aggr.is_some() {
            QdmaIntr::Aggregated
        } else {
            QdmaIntr::Direct
        }
    }

    /// What to route: the error vector and, in direct mode, a data vector per ring; in
    /// aggregated mode the interrupt ring's one.
    pub(super) fn irq_wanted(&self) -> IrqRequest {
        let data = if self.aggr.is_some() { 1 } else { self.rings.len().max(1) as u32 };
        IrqRequest::only(IrqKind::MsiX, 1 + data)
    }

    /// The first data vector: 1, or 0 when one vector is all there is.
    fn data_base(&self) -> u32 {
        u32::from(self.irq_vectors.unwrap_or(1) > 1)
    }

    /// The vector ring `r` signals on in direct mode: the rings in turn over the data vectors.
    pub(super) fn vector_of(&self, ring: &super::ring::Ring) -> u16 {
        let base = self.data_base();
        let n = (self.irq_vectors.unwrap_or(1) - base).max(1);
        let i = self.rings.iter().position(|r| r.queue == ring.queue && r.dir == ring.dir).unwrap_or(0);
        (base + i as u32 % n) as u16
    }

    /// In interrupt mode, what ring `r`'s context names: (vector, false) in direct mode, (the
    /// interrupt ring's index, true) aggregated; None when polling.
    pub(super) fn irq_target(&self, ring: &super::ring::Ring) -> Option<(u16, bool)> {
        self.irq_vectors?;
        Some(match &self.aggr {
            Some(a) => (a.index as u16, true),
            None => (self.vector_of(ring), false),
        })
    }

    /// Queues restarted for `vectors` (Some: interrupt mode) when that changes.
    pub(super) fn set_interrupt_mode(&mut self, vectors: Option<u32>) -> Result<()> {
        if self.irq_vectors == vectors {
            return Ok(());
        }
        self.stop_queues()?;
        self.irq_vectors = vectors;
        Ok(())
    }

    /// Before the queues start in interrupt mode: the error interrupt pointed at this function
    /// and armed, and in aggregated mode the interrupt ring's context written and read back.
    pub(super) fn arm_interrupts(&mut self) -> Result<()> {
        let (bar, ip, func) = (&*self.bar, self.info.ip, self.info.func as u32);
        let found = rd(bar, R_GLBL_ERR_INT)?;
        if let Some(owner) = err_int_owner(found, func, ip.err_int_func()) {
            // Armed for another function: the master PF's driver owns the device's one error
            // interrupt (libqdma sets it up only on the master PF, `qdma_err_intr_setup`);
            // taking it would leave that driver deaf to errors for the whole run. Errors are
            // polled instead (every run's checks, `error_stops_run`).
            let note = format!(
                "GLBL_ERR_INT is armed for function {owner} (the master PF's driver): pcibench leaves the error \
                 interrupt to it and polls the error status"
            );
            if !self.unwatched.contains(&note) {
                self.unwatched.push(note);
            }
        } else {
            self.saved.err_int.get_or_insert(found);
            let v = func & ip.err_int_func() | (ERR_VECTOR as u32 & ERR_INT_VEC) << ERR_INT_VEC_SHIFT;
            wr(bar, R_GLBL_ERR_INT, v)?;
            wr(bar, R_GLBL_ERR_INT, v | ERR_INT_ARM)?;
        }
        let vec = self.data_base() as u16;
        let Some(ring) = self.aggr.as_mut() else { return Ok(()) };
        ring.reset();
        let (index, base) = (ring.index, ring.bus);
        let want = IntrCtx { valid: true, vec, color: true, base, func: func as u16, ..IntrCtx::default() };
        let ctx = self.ctx();
        ctx.clear(Sel::IntCoal, index)?;
        ctx.write(Sel::IntCoal, index, &want.words(ip))?;
        let back = IntrCtx::from_words(&ctx.read(Sel::IntCoal, index)?, ip);
        if back != want {
            return Err(Error::Device(format!(
                "QDMA interrupt ring {index}: its context reads back as {back:?} after writing {want:?}: the context \
                 RAM did not take it"
            )));
        }
        if let Some(ring) = self.aggr.as_mut() {
            ring.live = true;
        }
        Ok(())
    }

    /// After the queues stopped: the interrupt ring's context invalidated and cleared
    /// (`intr_context_invalidate`), GLBL_ERR_INT put back as found.
    pub(super) fn disarm_interrupts(&mut self) -> Result<()> {
        let mut first = None;
        if let Some(ring) = self.aggr.as_mut() {
            ring.live = false;
        }
        if let Some(index) = self.aggr.as_ref().map(|r| r.index) {
            let ctx = self.ctx();
            first = ctx.invalidate(Sel::IntCoal, index).and_then(|_| ctx.clear(Sel::IntCoal, index)).err();
        }
        if let Some(v) = self.saved.err_int.take() {
            if let Err(e) = wr(self.bar(), R_GLBL_ERR_INT, v) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Run the prepared batch, sleeping on the queues' vectors between looks at the rings.
    pub(super) fn run_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        if irq.kind() != IrqKind::MsiX {
            return Err(Error::Unsupported(format!(
                "QDMA signals queues by MSI-X only (libqdma's direct and indirect modes), not {}: route MSI-X",
                irq.kind()
            )));
        }
        self.set_interrupt_mode(Some(irq.vectors()))?;
        // What fired before this run is not its completion (a ring entry left by the last run's
        // final writeback is consumed, so the ring interrupts again).
        let stale = irq.wait(Duration::ZERO)?;
        if let Some(why) = self.service(&stale, true)? {
            return Err(Error::Device(why));
        }
        self.submit()?;
        let mut prep = self.prepared.take().ok_or_else(|| Error::usage("QDMA wait before prepare"))?;
        let res = if self.stream.is_some() {
            self.wait_stream(&mut prep, timeout, Some(irq))
        } else {
            self.wait_irq(irq, &mut prep, timeout)
        };
        self.prepared = Some(prep);
        res
    }

    fn wait_irq(&mut self, irq: &dyn Interrupts, prep: &mut Prepared, timeout: Duration) -> Result<()> {
        let mut dog = Watchdog::new(timeout);
        loop {
            let mut busy = false;
            let mut completed = 0u64;
            for (i, ring) in self.rings.iter_mut().enumerate() {
                if let Err(e) = ring.reap(self.trace.as_ref()) {
                    return Err(self.fail(prep, e.to_string()));
                }
                busy |= ring.outstanding > 0 || prep.next[i] < prep.per_ring[i].len();
                completed += (prep.next[i] - ring.outstanding as usize) as u64;
            }
            if !busy {
                // The handler runs for what fired meanwhile: the ring's entries are consumed and
                // its CIDX written, so it is armed for the next run.
                let fired = irq.wait(Duration::ZERO)?;
                if let Some(why) = self.service(&fired, true)? {
                    return Err(self.fail(prep, why));
                }
                if self.error_stops_run()? {
                    return Err(self.fail(prep, "logged an error during the run".into()));
                }
                return Ok(());
            }
            self.post(prep)?;
            // Re-arm every queue with work left: its producer index again, with the arm bit.
            for r in self.rings.iter().filter(|r| r.outstanding > 0) {
                doorbell(&*self.bar, r.queue, r.dir, r.pidx, true)?;
            }
            let fired = irq.wait(SLICE.min(timeout))?;
            if let Some(why) = self.service(&fired, false)? {
                return Err(self.fail(prep, why));
            }
            if fired.is_empty() {
                if self.error_stops_run()? {
                    return Err(self.fail(prep, "stopped on an error".into()));
                }
                if dog.stalled(completed) {
                    let why = format!("no interrupt came ({}) and {}", irq.describe(), no_progress(timeout));
                    return Err(self.fail(prep, why));
                }
            }
        }
    }

    /// The handlers for what fired: the error interrupt (a reason to fail the run, or re-armed)
    /// and, in aggregated mode, the interrupt ring's walk and CIDX update (`walk`: whether or not
    /// its vector fired, at a run's start and end).
    pub(super) fn service(&mut self, fired: &Fired, walk: bool) -> Result<Option<String>> {
        let data = self.data_base();
        if fired.vectors().any(|v| v == ERR_VECTOR as u32) {
            if self.error_stops_run()? {
                return Ok(Some(format!("the error interrupt (GLBL_ERR_INT, MSI-X vector {ERR_VECTOR}) fired")));
            }
            // An error the run survives (noted): re-armed as `qdma_hw_error_intr_rearm` does,
            // where it is this function's (`arm_interrupts` took it).
            if self.saved.err_int.is_some() {
                let v = rd(self.bar(), R_GLBL_ERR_INT)?;
                wr(self.bar(), R_GLBL_ERR_INT, v | ERR_INT_ARM)?;
            }
        }
        let qbase = self.qbase;
        let Some(ring) = self.aggr.as_mut() else { return Ok(None) };
        let rang = fired.vectors().any(|v| v == data);
        if !rang && !walk {
            return Ok(None);
        }
        let mut last = None;
        for e in ring.take() {
            let Some(i) = IntrRing::ring_of(e, &self.rings, qbase) else {
                return Ok(Some(format!(
                    "interrupt ring {} named {} queue {} (hardware id), which this run did not start",
                    ring.index, e.dir, e.qid
                )));
            };
            // Servicing is the reap every loop does; the entry says which queue to re-arm.
            last = Some(self.rings[i].queue);
        }
        // A wake with nothing new writes the same CIDX again (libqdma's stale update); a walk
        // nobody asked for that found nothing writes nothing.
        if rang || last.is_some() {
            ring.update_cidx(&*self.bar, last)?;
        }
        Ok(None)
    }
}
