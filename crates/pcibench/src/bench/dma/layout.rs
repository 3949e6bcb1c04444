//! Where the transfers of one DMA run go. A run is a batch of equal-sized transfers spread over
//! the engine's queues (transfer i on queue i mod queues), each with a host buffer offset and a
//! card offset; card offsets never overlap within a run, so whatever order the queues finish
//! in, card memory ends up holding exactly one known transfer per slot.
//!
//! Sequential: transfer i at host and card offset i × size, as many in flight per queue as keep
//! a run near `RUN_BYTES` (one per queue for engines that take one transfer at a time).
//! Random (seed 004's `qdma_random`): fixed-size packets at distinct random size-aligned
//! offsets in a host window, card offsets sequential.

use crate::dma::{Direction, DmaBuffer, Transfer, Work};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Bytes a sequential run aims to keep in flight (enough to hide a doorbell and a completion).
pub const RUN_BYTES: u64 = 1 << 20;
/// Most transfers in flight per queue in a sequential run.
pub const MAX_DEPTH: u64 = 1024;
/// Bytes of packets per random run: 16 runs (samples) in the default 64 MiB total.
pub const RANDOM_RUN_BYTES: u64 = 4 << 20;
/// Most packets per random run (seed 004 issues 256 Ki commands per test).
pub const MAX_PACKETS: u64 = 65536;

/// How host offsets are chosen (`--pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "access")]
pub enum Access {
    Sequential,
    /// Packets at random offsets in a host window of `window` bytes.
    Random {
        window: u64,
    },
}

/// One run's transfers of `size` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub size: u64,
    /// Transfer i's card offset is `card_base + i × stride`, and a sequential layout's host
    /// offsets are `stride` apart: `size` rounded up to the engine's `Engine::transfer_align`.
    pub stride: u64,
    pub queues: u16,
    /// Host buffer offset of each transfer.
    pub host: Vec<u64>,
    pub card_base: u64,
}

impl Layout {
    pub fn count(&self) -> u64 {
        self.host.len() as u64
    }

    pub fn bytes(&self) -> u64 {
        self.count() * self.size
    }

    /// Host bytes the layout reaches from offset 0 (the last transfer's whole stride: an engine
    /// may round a receive buffer up to it).
    pub fn host_extent(&self) -> u64 {
        self.host.iter().max().map_or(0, |m| m + self.stride)
    }

    /// Card bytes the layout spans from `card_base`.
    pub fn card_extent(&self) -> u64 {
        self.count() * self.stride
    }

    /// Transfer i's card offset.
    pub fn card_at(&self, i: usize) -> u64 {
        self.card_base + i as u64 * self.stride
    }

    pub fn work<'a>(&'a self, dir: Direction, buf: &'a dyn DmaBuffer) -> impl Iterator<Item = Work<'a>> + 'a {
        self.host.iter().enumerate().map(move |(i, &h)| Work {
            buf,
            t: Transfer { dir, buf_offset: h, card_addr: self.card_at(i), len: self.size },
            queue: (i % self.queues as usize) as u16,
        })
    }
}

/// Sequential transfers for `queues` queues within `room` bytes of card memory, `align` apart
/// at least (`Engine::transfer_align`); None when not even one transfer per queue fits. Engines
/// taking one transfer per run (`max_batch` 1) get one.
pub fn sequential(size: u64, align: u64, queues: u16, room: u64, card_base: u64, max_batch: usize) -> Option<Layout> {
    let q = queues.max(1) as u64;
    let stride = size.checked_next_multiple_of(align.max(1))?;
    let per_round = q.checked_mul(stride)?;
    if per_round > room || q > max_batch as u64 {
        return None;
    }
    let depth = (RUN_BYTES / per_round).clamp(1, MAX_DEPTH).min(room / per_round).min(max_batch as u64 / q).max(1);
    let host = (0..q * depth).map(|i| i * stride).collect();
    Some(Layout { size, stride, queues: q as u16, host, card_base })
}

/// xorshift64* (Vigna 2016): a fast, reproducible stream for offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift: uniform enough for offsets, no division.
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// Random packets: distinct offsets in `window` host bytes aligned to the size (rounded up to
/// `align`), as many as fit a run (`RANDOM_RUN_BYTES`), the card room and the engine's batch, a
/// multiple of `queues`. None when fewer than one per queue fit.
#[allow(clippy::too_many_arguments)]
pub fn random(
    size: u64,
    align: u64,
    queues: u16,
    window: u64,
    room: u64,
    card_base: u64,
    max_batch: usize,
    seed: u64,
) -> Option<Layout> {
    let q = queues.max(1) as u64;
    let stride = size.max(1).checked_next_multiple_of(align.max(1))?;
    let slots = window / stride;
    let n = (RANDOM_RUN_BYTES / size.max(1)).clamp(1, MAX_PACKETS).min(room / stride).min(slots).min(max_batch as u64);
    let n = n / q * q;
    if n == 0 {
        return None;
    }
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let picked: Vec<u64> = if n * 2 >= slots {
        // Dense: a partial Fisher-Yates shuffle of every slot.
        let mut all: Vec<u64> = (0..slots).collect();
        for i in 0..n {
            let j = i + rng.below(slots - i);
            all.swap(i as usize, j as usize);
        }
        all.truncate(n as usize);
        all
    } else {
        let mut seen = HashSet::with_capacity(n as usize);
        let mut v = Vec::with_capacity(n as usize);
        while (v.len() as u64) < n {
            let s = rng.below(slots);
            if seen.insert(s) {
                v.push(s);
            }
        }
        v
    };
    Some(Layout { size, stride, queues: q as u16, host: picked.into_iter().map(|s| s * stride).collect(), card_base })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_runs_fill_queues_within_the_card() {
        let l = sequential(4096, 1, 4, 32 << 20, 0x100, usize::MAX).unwrap();
        assert_eq!((l.count(), l.bytes()), (256, 1 << 20), "64 per queue keep 1 MiB in flight");
        assert_eq!(l.host[..3], [0, 4096, 8192]);
        let w: Vec<Work> = l.work(Direction::H2c, &NoBuf).take(5).collect();
        assert_eq!(w.iter().map(|w| w.queue).collect::<Vec<_>>(), [0, 1, 2, 3, 0]);
        assert_eq!(w[1].t.card_addr, 0x100 + 4096);
        assert_eq!(sequential(64, 1, 1, 1 << 30, 0, usize::MAX).unwrap().count(), MAX_DEPTH);
        assert_eq!(sequential(1 << 20, 1, 16, 32 << 20, 0, usize::MAX).unwrap().count(), 16);
        assert_eq!(sequential(64 << 10, 1, 1, 1 << 20, 0, 1).unwrap().count(), 1, "one transfer per run");
        assert!(sequential(1 << 20, 1, 16, 8 << 20, 0, usize::MAX).is_none(), "16 MiB do not fit 8");
        assert!(sequential(64, 1, 2, 1 << 20, 0, 1).is_none(), "two queues on a one-transfer engine");
    }

    #[test]
    fn random_packets_are_distinct_aligned_and_in_the_window() {
        for (size, window, q) in [(64u64, 1u64 << 30, 8u16), (4096, 1 << 20, 16), (256, 8192, 4)] {
            let l = random(size, 1, q, window, 32 << 20, 0, usize::MAX, 42).unwrap();
            assert_eq!(l.count() % q as u64, 0);
            assert!(l.host.iter().all(|h| h % size == 0 && h + size <= window));
            let distinct: HashSet<u64> = l.host.iter().copied().collect();
            assert_eq!(distinct.len(), l.host.len(), "{size} in {window}");
            assert!(l.bytes() <= RANDOM_RUN_BYTES);
        }
        let l = random(64, 1, 8, 1 << 30, 32 << 20, 0, usize::MAX, 42).unwrap();
        assert_eq!(l.count(), MAX_PACKETS);
        assert!(l.host_extent() > 1 << 29, "spread over the window");
        assert_ne!(l.host, random(64, 1, 8, 1 << 30, 32 << 20, 0, usize::MAX, 43).unwrap().host);
        assert_eq!(random(4096, 1, 1, 1 << 30, 8192, 0, usize::MAX, 1).unwrap().count(), 2, "card room bounds it");
        assert!(random(4096, 1, 4, 8192, 1 << 20, 0, usize::MAX, 1).is_none(), "2 slots for 4 queues");
    }

    struct NoBuf;
    impl DmaBuffer for NoBuf {
        fn as_ptr(&self) -> *mut u8 {
            std::ptr::null_mut()
        }
        fn len(&self) -> usize {
            0
        }
        fn segments(&self) -> &[crate::dma::Segment] {
            &[]
        }
        fn addressing(&self) -> crate::dma::Addressing {
            crate::dma::Addressing::Sim
        }
        fn describe(&self) -> String {
            String::new()
        }
    }
}
