//! QDMA completion by interrupt: libqdma's direct interrupt mode for memory-mapped queues
//! (`qdma_drv_mode` DIRECT_INTR_MODE). Each queue's software context gets the interrupt enable
//! (`irq_en`, word 1 bit 21), armed (`irq_arm`, word 0 bit 16) and its vector (word 4 [10:0]:
//! an MSI-X vector of the function, `intr_aggr` clear; `qdma_context.c` `make_sw_context`); the
//! queues are spread over the vectors routed, as libqdma gives each new queue the least-loaded
//! data vector (`qdma_descq.c`). The queue raises its vector at a status writeback while armed,
//! and disarms; every PIDX update carries the arm bit again (`QDMA_DMA_SEL_IRQ_EN_MASK`), so the
//! handler re-arms a queue that still has work by writing its producer index unchanged.
//! Interrupt aggregation (libqdma's indirect mode, the interrupt ring) is not implemented.
//! Switching mode restarts the queues with the other context; stopping them (polling again,
//! a stop, the engine dropped) clears the contexts, interrupt fields included.

use super::{doorbell, Prepared, QdmaEngine};
use crate::access::{Interrupts, IrqKind};
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::{Error, Result};
use std::time::Duration;

/// How long one sleep on the eventfds lasts before the rings are looked at again: an interrupt
/// that never comes is ended by the progress watchdog, as a stalled poll is.
const SLICE: Duration = Duration::from_millis(20);

impl QdmaEngine {
    /// The vector ring `r` signals on: the rings in turn over the vectors routed.
    pub(super) fn vector_of(&self, ring: &super::ring::Ring) -> u16 {
        let n = self.irq_vectors.unwrap_or(1).max(1);
        let i = self.rings.iter().position(|r| r.queue == ring.queue && r.dir == ring.dir).unwrap_or(0);
        (i as u32 % n) as u16
    }

    /// Queues restarted for `vectors` (Some: direct interrupt mode) when that changes.
    pub(super) fn set_interrupt_mode(&mut self, vectors: Option<u32>) -> Result<()> {
        if self.irq_vectors == vectors {
            return Ok(());
        }
        self.stop_queues()?;
        self.irq_vectors = vectors;
        Ok(())
    }

    /// Run the prepared batch, sleeping on the queues' vectors between looks at the rings.
    pub(super) fn run_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        if irq.kind() != IrqKind::MsiX {
            return Err(Error::Unsupported(format!(
                "QDMA signals queues by MSI-X only (libqdma's direct mode), not {}: route MSI-X",
                irq.kind()
            )));
        }
        self.set_interrupt_mode(Some(irq.vectors()))?;
        // What fired before this run is not its completion.
        irq.wait(Duration::ZERO)?;
        self.submit()?;
        let mut prep = self.prepared.take().ok_or_else(|| Error::usage("QDMA wait before prepare"))?;
        let res = self.wait_irq(irq, &mut prep, timeout);
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
}
