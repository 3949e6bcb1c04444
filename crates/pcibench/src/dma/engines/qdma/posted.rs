//! Open-loop submission (`--rate`): the transfer prepared for a queue is posted again and again
//! without waiting, and completions are reaped from the status writebacks as they come. A QDMA
//! queue completes its descriptors in order (PG302: the consumer index in the status writeback
//! only moves forward), so whole transfers are counted from the descriptors the ring completed.

use super::{doorbell, Prepared, QdmaEngine};
use crate::{Error, Result};

/// Reaps between looks at the global error status (the closed loop looks every millisecond;
/// a reap is a few tens of nanoseconds, so this is well under one).
const ERRORS_EVERY_REAPS: u32 = 4096;

impl QdmaEngine {
    /// The ring `queue`'s prepared transfer is on (the first with descriptors for it).
    fn posted_ring(&self, prep: &Prepared, queue: u16) -> Option<usize> {
        self.rings.iter().enumerate().find(|(i, r)| r.queue == queue && !prep.per_ring[*i].is_empty()).map(|(i, _)| i)
    }

    /// Post the prepared transfer of `queue` into its ring with one doorbell; false when the
    /// ring has no room for all its descriptors.
    pub(super) fn post_again(&mut self, queue: u16) -> Result<bool> {
        self.start()?;
        let prep =
            self.prepared.take().ok_or_else(|| Error::usage("QDMA post before prepare: prepare a transfer first"))?;
        let res = (|| {
            let r = self.posted_ring(&prep, queue).ok_or_else(|| {
                Error::usage(format!("queue {queue} has no prepared transfer to post (prepare one transfer per queue)"))
            })?;
            let descs = &prep.per_ring[r];
            let ring = &mut self.rings[r];
            if (ring.space() as usize) < descs.len() {
                return Ok(false);
            }
            for d in descs {
                ring.put(d, self.trace.as_ref());
            }
            doorbell(&*self.bar, ring.queue, ring.dir, ring.pidx, self.irq_vectors.is_some())?;
            Ok(true)
        })();
        self.prepared = Some(prep);
        res
    }

    /// Count whole transfers completed per queue since the last call into `done`.
    pub(super) fn reap_posted(&mut self, done: &mut [u32]) -> Result<()> {
        let mut prep = self.prepared.take().ok_or_else(|| Error::usage("QDMA reap before prepare"))?;
        // The host looks at host memory: a simulated engine brings itself to now.
        self.bar().observe();
        let res = (|| {
            prep.carry.resize(self.rings.len(), 0);
            let mut reaped = 0u64;
            for (i, ring) in self.rings.iter_mut().enumerate() {
                let per = prep.per_ring[i].len() as u64;
                if per == 0 {
                    continue;
                }
                let n = u64::from(ring.reap(self.trace.as_ref())?);
                reaped += n;
                prep.carry[i] += n;
                if let Some(d) = done.get_mut(ring.queue as usize) {
                    *d += (prep.carry[i] / per) as u32;
                }
                prep.carry[i] %= per;
            }
            self.reaps = self.reaps.wrapping_add(1);
            // Every so many reaps, and once whenever the rings drain (the end of a row's
            // transfers: an error logged after the last periodic look is seen; issue 50 item 8).
            let drained = reaped > 0 && self.rings.iter().all(|r| r.outstanding == 0);
            if (drained || self.reaps % ERRORS_EVERY_REAPS == 0) && self.error_stops_run()? {
                let progress: Vec<String> = self
                    .rings
                    .iter()
                    .filter(|r| r.outstanding > 0)
                    .map(|r| format!("{} queue {}: {} descriptors in flight", r.dir, r.queue, r.outstanding))
                    .collect();
                return Err(Error::Device(format!(
                    "QDMA logged an error while transfers were posted open loop ({})",
                    if progress.is_empty() { "none in flight".to_string() } else { progress.join(", ") }
                )));
            }
            Ok(())
        })();
        self.prepared = Some(prep);
        res
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::{QdmaEngine, QdmaOptions};
    use crate::dma::{Direction, DmaAllocator, Engine, Transfer, Work};
    use crate::sim::qdma::model::QdmaModelConfig;

    #[test]
    fn posted_transfers_complete_per_queue_in_order_and_a_full_ring_refuses_more() {
        // Stepped and stalled: doorbells are accepted and nothing moves until the test steps.
        let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
        let alloc = card.alloc();
        let opts = QdmaOptions { queues: 2, ring_size: Some(64), ..Default::default() };
        let mut eng = QdmaEngine::new(card.bar(), &alloc, opts).unwrap();
        assert!(eng.posts());
        let buf = alloc.alloc(8192).unwrap();
        pattern(3, bytes(&*buf));
        let work: Vec<Work> = (0..2u16)
            .map(|q| Work {
                buf: &*buf,
                t: Transfer { dir: Direction::H2c, buf_offset: q as u64 * 4096, card_addr: q as u64 * 4096, len: 4096 },
                queue: q,
            })
            .collect();
        eng.prepare_batch(&work).unwrap();
        card.model.set_stalled(Direction::H2c, true);
        // A ring of 64 holds 63 descriptors: one transfer of one descriptor each.
        for _ in 0..63 {
            assert!(Engine::post(&mut eng, 0).unwrap());
        }
        assert!(!Engine::post(&mut eng, 0).unwrap(), "the 64th does not fit");
        assert!(Engine::post(&mut eng, 1).unwrap(), "queue 1 has its own ring");
        let mut done = [0u32; 2];
        eng.reap(&mut done).unwrap();
        assert_eq!(done, [0, 0]);
        card.model.set_stalled(Direction::H2c, false);
        assert!(card.model.step(Direction::H2c));
        eng.reap(&mut done).unwrap();
        assert_eq!(done, [63, 1]);
        // Room again, and the data is what queue q's transfer carries.
        assert!(Engine::post(&mut eng, 0).unwrap());
        let mut on_card = vec![0u8; 8192];
        card.model.card_read(0, &mut on_card).unwrap();
        assert!(on_card[..] == bytes(&*buf)[..]);
        let e = Engine::post(&mut eng, 2).unwrap_err().to_string();
        assert!(e.starts_with("queue 2 has no prepared transfer to post"), "{e}");
    }
}
