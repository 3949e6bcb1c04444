//! The stream engine's staged pass on `pcibench serve`'s clock thread (`sim::stage`, lab/findings.md
//! 15): the descriptors and H2C packets a pass will read are fetched first, with no lock held, and
//! what it wrote and signalled is sent after. A doorbell rung between the fetch and the pass finds
//! its descriptors not at hand (`stream.rs`): they wait for the next pass, due at once.

use super::state::Shared;
use super::stream::{cost, le16, le64, C2H_DESC, H2C_DESC};
use crate::direction::Direction;
use crate::sim::stage::Op;

/// A ring's descriptors to fetch: base, first slot, the slot after the last, descriptors in the
/// ring (its status slot not counted).
type Span = (u64, u32, u32, u32);

impl Shared {
    /// What `dir`'s pass at model time `now` will read: (bus address, bytes) pieces.
    pub(super) fn st_fetch(&self, dir: Direction, now: u64) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        match dir {
            Direction::H2c => {
                let (spans, mut free_at) = {
                    let st = self.st();
                    let spans: Vec<Span> =
                        st.h2c_work.iter().filter_map(|(&q, &pidx)| self.span(dir, q, pidx)).collect();
                    (spans, st.h2c_free_at)
                };
                for span in spans {
                    for d in self.fetch_ring(&mut out, span, H2C_DESC) {
                        // As the pass will go (`stream.rs` h2c): the packets due by `now`.
                        let (len, src) = (le16(&d, 4), le64(&d, 8));
                        let due = free_at + cost(self, len);
                        if due > now {
                            break;
                        }
                        free_at = due;
                        let mut data = vec![0u8; len as usize];
                        if len > 0 && !self.cfg.stream_no_data && self.host.read(src, &mut data).is_ok() {
                            out.push((src, data));
                        }
                    }
                }
            }
            Direction::C2h => {
                // The generator's queue: the buffers it has credits for.
                let qid = self.st().gen_qid;
                let pidx = self.queue(dir, qid as usize).map(|q| q.lock().pidx());
                if let Some(span) = pidx.and_then(|p| self.span(dir, qid, p)) {
                    self.fetch_ring(&mut out, span, C2H_DESC);
                }
            }
        }
        out
    }

    /// Queue `qid`'s descriptors from its consumer index to `pidx`, where it is enabled and the
    /// indexes fit its ring (else the pass flags it, reading nothing).
    fn span(&self, dir: Direction, qid: u32, pidx: u32) -> Option<Span> {
        let c = self.queue(dir, qid as usize)?.lock();
        let ring = self.ring_entries(c.ring_idx()).saturating_sub(1);
        (c.enabled() && ring >= 2 && pidx < ring).then(|| (c.ring_base(), c.cidx(), pidx, ring))
    }

    /// Fetch a span's descriptors of `size` bytes into `out` (one piece, two where it wraps);
    /// each descriptor's bytes, in ring order. A piece the host cannot read is left out.
    fn fetch_ring(&self, out: &mut Vec<(u64, Vec<u8>)>, (base, from, to, ring): Span, size: u64) -> Vec<Vec<u8>> {
        let pieces = if from <= to { vec![(from, to)] } else { vec![(from, ring), (0, to)] };
        let mut descs = Vec::new();
        for (a, b) in pieces.into_iter().filter(|(a, b)| b > a) {
            let mut bytes = vec![0u8; ((b - a) as u64 * size) as usize];
            let at = base + a as u64 * size;
            if self.host.read(at, &mut bytes).is_err() {
                break;
            }
            descs.extend(bytes.chunks(size as usize).map(<[u8]>::to_vec));
            out.push((at, bytes));
        }
        descs
    }

    /// What a staged pass wrote and signalled, sent in its order (PCIe's: an interrupt message
    /// after the writes before it).
    pub(crate) fn send_staged(&self, ops: Vec<Op>) {
        for op in ops {
            match op {
                Op::Write(at, data) => {
                    let _ = self.host.write(at, &data);
                }
                Op::Store32(at, value) => {
                    let _ = self.host.store_u32_release(at, value);
                }
                Op::Message(vector, what) => self.irq_out.message(vector, || what),
            }
        }
    }
}
