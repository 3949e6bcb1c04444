//! Each stream's data, set up before the run and checked at each report while the streams are
//! idle (the interval's time leaves the check out). A stream owns a slot of its card's window:
//! its transfer's bytes and, after them, a guarded gap up to the next slot (as Linux's dmatest
//! guards a destination: `bench::dma::guard`). H2C moves a pattern to its slot, which is read
//! back and checked, then the pattern changes for the next interval, so a card that stopped
//! taking the data cannot pass on what it held. C2H moves the slot's pattern to a guarded host
//! buffer, which is checked, then guarded again, so the next interval's check sees fresh writes.

use crate::bench::dma::guard::{self, Guard, Place};
use crate::bench::dma::{bytes, bytes_mut, card_copy, put};
use crate::bench::pattern::{Mismatch, Pattern};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::Result;
use std::time::Duration;

/// Host bytes after a C2H transfer (and after a read-back) that are guarded.
pub const HOST_TAIL: u64 = 4096;

/// One stream's buffers, slot and pattern.
pub struct Data {
    pub dir: Direction,
    pub size: u64,
    /// The slot's start and length in the engine's window (`Transfer::card_addr` offsets): the
    /// transfer, then its guarded gap.
    pub card_at: u64,
    pub slot: u64,
    pub queue: u16,
    /// H2C: the pattern the card is given. C2H: the card image the slot is seeded with.
    src: Box<dyn DmaBuffer>,
    /// C2H: where the transfers land. H2C: where the slot is read back to.
    dst: Box<dyn DmaBuffer>,
    pattern: Pattern,
    expected: Vec<u8>,
    card_guard: Guard,
    host_guard: Guard,
}

impl Data {
    pub fn new(
        alloc: &dyn DmaAllocator,
        dir: Direction,
        size: u64,
        card_at: u64,
        slot: u64,
        queue: u16,
        pattern: Pattern,
    ) -> Result<Data> {
        let len = (slot + HOST_TAIL) as usize;
        Ok(Data {
            dir,
            size,
            card_at,
            slot,
            queue,
            src: alloc.alloc(len)?,
            dst: alloc.alloc(len)?,
            expected: pattern.try_generate(size as usize)?,
            card_guard: Guard::new(pattern.seed ^ 0xca2d),
            host_guard: Guard::new(pattern.seed ^ 0x6f73_7400),
            pattern,
        })
    }

    /// How the card was given the buffers' addresses, and the buffers in words.
    pub fn addressing(&self) -> crate::dma::Addressing {
        self.src.addressing()
    }

    pub fn describe(&self) -> String {
        self.src.describe()
    }

    /// The stream's one transfer.
    pub fn work(&self) -> Work<'_> {
        let buf = if self.dir == Direction::H2c { &*self.src } else { &*self.dst };
        Work {
            buf,
            t: Transfer { dir: self.dir, buf_offset: 0, card_addr: self.card_at, len: self.size },
            queue: self.queue,
        }
    }

    /// Untimed, before the run: the card slot holds the C2H data (and its guard after it), or
    /// the guard alone for H2C; the host destination its guard; the H2C source the pattern.
    pub fn seed(&mut self, engine: &mut dyn Engine, timeout: Duration) -> Result<()> {
        let mut img = vec![0u8; self.slot as usize];
        self.card_guard.fill(&mut img, self.card_at);
        if self.dir == Direction::C2h {
            img[..self.size as usize].copy_from_slice(&self.expected);
        }
        put(&mut *self.src, 0, &img);
        card_copy(engine, Direction::H2c, &*self.src, self.card_at, self.slot, timeout)?;
        self.host_guard.fill(bytes_mut(&mut *self.dst), 0);
        if self.dir == Direction::H2c {
            put(&mut *self.src, 0, &self.expected);
        }
        Ok(())
    }

    /// Untimed, with the stream idle: what its transfers left. H2C: the slot read back (the
    /// transfer's bytes, then its guard) and the host bytes after the read-back; then the next
    /// interval's pattern in the source. C2H: the destination (the data, then its guard), then
    /// guarded again. The caller prepares the stream's transfer again afterwards.
    pub fn check(&mut self, engine: &mut dyn Engine, timeout: Duration) -> Result<std::result::Result<(), Mismatch>> {
        let found = match self.dir {
            Direction::C2h => {
                let places = [Place { at: 0, expected: &self.expected, transfer: 0 }];
                let r = guard::check(bytes(&*self.dst), 0, &places, &self.host_guard);
                self.host_guard.fill(bytes_mut(&mut *self.dst), 0);
                r
            }
            Direction::H2c => {
                self.host_guard.fill(bytes_mut(&mut *self.dst), 0);
                card_copy(engine, Direction::C2h, &*self.dst, self.card_at, self.slot, timeout)?;
                let got = bytes(&*self.dst);
                let places = [Place { at: self.card_at, expected: &self.expected, transfer: 0 }];
                let slot = self.slot as usize;
                let r = guard::check(&got[..slot], self.card_at, &places, &self.card_guard).and_then(|()| {
                    guard::check(&got[slot..], self.slot, &[], &self.host_guard).map_err(|m| Mismatch {
                        outside: Some(format!(
                            "byte {} past the end of the read-back of the card slot, in the host buffer",
                            m.offset - self.slot + 1
                        )),
                        ..m
                    })
                });
                self.pattern = self.pattern.successor();
                self.expected = self.pattern.try_generate(self.size as usize)?;
                put(&mut *self.src, 0, &self.expected);
                r
            }
        };
        Ok(found)
    }
}

/// Where each of a card's `lanes` streams of `size` bytes lies in its window of `room` bytes from
/// `base`: slot i at `base + i × slot`, the slot the transfer and a guarded gap of up to 4 KiB.
/// None when they do not fit.
pub fn slots(size: u64, lanes: u64, room: u64) -> Option<u64> {
    let per = room / lanes.max(1);
    if size == 0 || size > per {
        return None;
    }
    Some(size + (per - size).min(crate::bench::dma::verify::TAIL))
}

/// The size each of `lanes` streams moves where none is asked for: its share of the window less a
/// guarded gap, in whole 4 KiB pages where it is that large, at most `most` (1 MiB, or the
/// engine's largest transfer).
pub fn default_size(lanes: u64, room: u64, most: u64) -> u64 {
    let per = room / lanes.max(1);
    let gap = if per > 2 * 4096 { 4096 } else { 0 };
    let s = (per - gap).min(most);
    if s >= 4096 {
        s & !0xfff
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_share_the_window_with_a_guarded_gap_each() {
        // The sim card's 1184 KiB over 8 streams: 148 KiB each, 144 KiB moved, 4 KiB guarded.
        assert_eq!(default_size(8, 0x12_8000, 1 << 20), 144 << 10);
        assert_eq!(slots(144 << 10, 8, 0x12_8000), Some(148 << 10));
        assert_eq!(default_size(2, 64 << 20, 1 << 20), 1 << 20, "at most 1 MiB");
        assert_eq!(default_size(1, 4096, 4095), 4095, "edu's buffer: its largest transfer, no room for a gap");
        assert_eq!(slots(4095, 1, 4096), Some(4096));
        assert_eq!(slots(1 << 20, 8, 4 << 20), None, "8 MiB do not fit 4");
    }
}
