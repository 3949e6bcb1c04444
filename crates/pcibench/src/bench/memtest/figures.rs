//! What `pcibench memtest` found, as data: each pass over the card memory, the bad ranges (and
//! whose data they held), the aliasing pass's markers, and the size that really answers.

use serde::{Deserialize, Serialize};

/// Bad ranges kept per pass (the count of bad bytes covers them all).
pub const MAX_RANGES: usize = 64;

/// A run of card addresses that did not hold what was written there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadRange {
    /// Card addresses (the engine's window offsets plus its card address), `end` exclusive.
    pub start: u64,
    pub end: u64,
    /// The range holds the data written this many bytes above it (its words decode to those
    /// addresses): the memory there aliases at that distance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds_from: Option<u64>,
}

/// One fill of the whole region and its read-back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pass {
    /// `address` (each 8-byte word holds its own address, keyed) or `inverse address` (its
    /// complement: every bit both ways).
    pub name: String,
    pub bad_bytes: u64,
    pub bad_ranges: Vec<BadRange>,
    /// Ranges past `MAX_RANGES`, counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_ranges: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The aliasing pass: a marker written at offset 0 and at each power of two inside the region,
/// then each read back: a marker found at a lower offset than its own shows the memory wrapping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aliasing {
    /// Offsets tested (from the region's start).
    pub offsets: Vec<u64>,
    /// (where a marker was found, the offset it was written at).
    pub found_elsewhere: Vec<(u64, u64)>,
    /// Offsets that held neither their marker nor another's.
    pub lost: Vec<u64>,
}

/// The whole test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memtest {
    /// The region: card address and bytes, and the host chunk it was moved in.
    pub card_addr: u64,
    pub size: u64,
    pub chunk: u64,
    pub passes: Vec<Pass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aliasing: Option<Aliasing>,
    /// The bytes from the region's start that answer as memory of their own: the region's size,
    /// or the distance at which it aliases.
    pub answers: u64,
    /// Bytes of the region written and read back in every pass (less than `size` after a stop).
    pub tested: u64,
}

impl Memtest {
    pub fn passed(&self) -> bool {
        self.passes.iter().all(|p| p.bad_bytes == 0)
            && self.aliasing.as_ref().is_none_or(|a| a.found_elsewhere.is_empty() && a.lost.is_empty())
            && self.answers == self.size
    }
}

/// Merges bad words into ranges as a pass reads them back, in address order.
#[derive(Debug, Default)]
pub struct Ranges {
    pub ranges: Vec<BadRange>,
    pub more: u64,
    pub bytes: u64,
    open: Option<BadRange>,
}

impl Ranges {
    /// `len` bad bytes at `at`, holding the data of `from` bytes above where it decodes so.
    pub fn bad(&mut self, at: u64, len: u64, from: Option<u64>) {
        self.bytes += len;
        if let Some(r) = &mut self.open {
            if r.end == at && r.holds_from == from {
                r.end = at + len;
                return;
            }
        }
        self.close();
        self.open = Some(BadRange { start: at, end: at + len, holds_from: from });
    }

    fn close(&mut self) {
        if let Some(r) = self.open.take() {
            if self.ranges.len() < MAX_RANGES {
                self.ranges.push(r);
            } else {
                self.more += 1;
            }
        }
    }

    pub fn finish(mut self, name: &str) -> Pass {
        self.close();
        Pass { name: name.to_string(), bad_bytes: self.bytes, bad_ranges: self.ranges, more_ranges: self.more }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_words_merge_into_ranges_by_what_they_hold() {
        let mut r = Ranges::default();
        r.bad(0, 8, Some(64));
        r.bad(8, 8, Some(64));
        r.bad(16, 8, None);
        r.bad(40, 8, None);
        let p = r.finish("address");
        assert_eq!(p.bad_bytes, 32);
        assert_eq!(
            p.bad_ranges,
            [
                BadRange { start: 0, end: 16, holds_from: Some(64) },
                BadRange { start: 16, end: 24, holds_from: None },
                BadRange { start: 40, end: 48, holds_from: None }
            ]
        );
    }
}
