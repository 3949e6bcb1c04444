//! Verification that sees a write outside a transfer, as Linux's `drivers/dma/dmatest.c` does: the
//! whole destination is filled before the transfers (here with a guard pattern of its own), and
//! after them every byte a transfer moved must hold its data and every other byte its guard, the
//! bytes before each transfer and after it. A card that writes past a transfer's end (an engine
//! moving 4-byte steps writes 4,100 bytes for a 4,097-byte transfer) then fails verification with
//! the offset of the first byte it should not have written, where comparing the transfer alone
//! said `ok`. The same check serves host buffers (C2H) and card memory read back (H2C).

use crate::bench::pattern::Mismatch;

/// The guard repeats with this period: a prime, so a guard byte never lines up with one of a
/// copy shifted by a power of two.
const PERIOD: usize = 251;

/// The guard bytes of one destination: byte `at` of it (its own offsets: host buffer or card) is
/// `period[at % PERIOD]`.
#[derive(Clone)]
pub struct Guard {
    /// The period repeated over `CHUNK + PERIOD` bytes: any `CHUNK` of the guard at any phase
    /// is one slice of it, so filling and checking run at memcpy and memcmp speed.
    tiled: Vec<u8>,
}

/// Bytes filled or compared at a time.
const CHUNK: usize = 4096;

impl Guard {
    /// A guard from `seed` (a row's pattern seed: each row's differs).
    pub fn new(seed: u64) -> Guard {
        let mut s = seed | 1;
        let mut period = [0u8; PERIOD];
        for b in &mut period {
            // xorshift64* (as bench::pattern): bytes unlike any transfer's data by construction.
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            *b = (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8;
        }
        Guard { tiled: period.iter().copied().cycle().take(CHUNK + PERIOD).collect() }
    }

    /// The guard from the destination's byte `base` on, `len` bytes (at most `CHUNK`).
    fn run(&self, base: u64, len: usize) -> &[u8] {
        let k = (base % PERIOD as u64) as usize;
        &self.tiled[k..k + len]
    }

    /// Fill `buf`, whose byte 0 is the destination's byte `base`.
    pub fn fill(&self, buf: &mut [u8], base: u64) {
        for (i, chunk) in buf.chunks_mut(CHUNK).enumerate() {
            chunk.copy_from_slice(self.run(base + (i * CHUNK) as u64, chunk.len()));
        }
    }

    /// The first byte of `got` (the destination's bytes from `base`) that is not its guard, the
    /// guard byte there, and how many are not.
    fn first_off(&self, got: &[u8], base: u64) -> Option<(usize, u8, u64)> {
        let (mut first, mut count) = (None, 0u64);
        for (i, chunk) in got.chunks(CHUNK).enumerate() {
            let want = self.run(base + (i * CHUNK) as u64, chunk.len());
            if chunk == want {
                continue;
            }
            for (k, (_, b)) in chunk.iter().zip(want).enumerate().filter(|(_, (a, b))| a != b) {
                first.get_or_insert((i * CHUNK + k, *b));
                count += 1;
            }
        }
        first.map(|(i, e)| (i, e, count))
    }
}

/// One transfer's place in a destination: at `at`, the `expected` bytes (a stream transfer may
/// land in several places: one per packet, each with its part of the bytes).
pub struct Place<'a> {
    pub at: u64,
    pub expected: &'a [u8],
    /// Which transfer, for words ("transfer 3").
    pub transfer: usize,
}

/// Check `got`, the destination's bytes from `base` (its offsets as the report names them): each
/// place holds its bytes, every other byte its guard. `places` in order of `at`, not
/// overlapping, inside `got`. The first difference, with how many bytes differ in all; a byte
/// outside every place says which transfer it follows (or precedes) and by how much.
pub fn check(got: &[u8], base: u64, places: &[Place], guard: &Guard) -> Result<(), Mismatch> {
    let mut first: Option<Mismatch> = None;
    let mut count = 0u64;
    let mut note = |m: Mismatch, n: u64| {
        count += n;
        if first.is_none() {
            first = Some(m);
        }
    };
    let mut at = 0usize;
    let mut prev: Option<&Place> = None;
    for p in places {
        let start = (p.at - base) as usize;
        if let Some((i, expected, n)) = guard.first_off(&got[at..start], base + at as u64) {
            let offset = base + (at + i) as u64;
            note(
                Mismatch {
                    offset,
                    expected,
                    found: got[at + i],
                    count: 0,
                    outside: Some(outside(offset, prev, Some(p))),
                },
                n,
            );
        }
        let here = &got[start..start + p.expected.len()];
        if here != p.expected {
            let diffs = || p.expected.iter().zip(here).enumerate().filter(|(_, (a, b))| a != b);
            if let Some((k, (e, f))) = diffs().next() {
                note(
                    Mismatch { offset: p.at + k as u64, expected: *e, found: *f, count: 0, outside: None },
                    diffs().count() as u64,
                );
            }
        }
        at = start + p.expected.len();
        prev = Some(p);
    }
    if let Some((i, expected, n)) = guard.first_off(&got[at..], base + at as u64) {
        let offset = base + (at + i) as u64;
        note(
            Mismatch { offset, expected, found: got[at + i], count: 0, outside: Some(outside(offset, prev, None)) },
            n,
        );
    }
    match first {
        None => Ok(()),
        Some(m) => Err(Mismatch { count, ..m }),
    }
}

/// Where a byte outside every transfer lies, in words: past the end of the transfer before it
/// when that is nearer (or the only one), else before the start of the one after it.
fn outside(offset: u64, before: Option<&Place>, after: Option<&Place>) -> String {
    let past = before.map(|p| (offset + 1 - (p.at + p.expected.len() as u64), p.transfer));
    let ahead = after.map(|p| (p.at - offset, p.transfer));
    match (past, ahead) {
        (Some((d, t)), Some((a, _))) if d <= a => format!("byte {d} past the end of transfer {t}"),
        (Some((d, t)), None) => format!("byte {d} past the end of transfer {t}"),
        (_, Some((a, t))) => format!("{a} bytes before the start of transfer {t}"),
        (None, None) => "outside every transfer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_written_past_a_transfer_is_named_by_its_offset() {
        let g = Guard::new(7);
        let mut buf = vec![0u8; 1000];
        g.fill(&mut buf, 0x100);
        let data: Vec<u8> = (0..100).map(|i| i as u8 ^ 0x5a).collect();
        buf[200..300].copy_from_slice(&data);
        buf[500..600].copy_from_slice(&data);
        let places = [
            Place { at: 0x100 + 200, expected: &data, transfer: 0 },
            Place { at: 0x100 + 500, expected: &data, transfer: 1 },
        ];
        assert_eq!(check(&buf, 0x100, &places, &g), Ok(()));
        // One byte past transfer 1's end, flipped (what the sim's overrun fault writes).
        let mut bad = buf.clone();
        bad[600] ^= 0xff;
        let m = check(&bad, 0x100, &places, &g).unwrap_err();
        assert_eq!((m.offset, m.count), (0x100 + 600, 1));
        assert_eq!(m.outside.as_deref(), Some("byte 1 past the end of transfer 1"));
        assert!(m.to_string().contains("byte 1 past the end of transfer 1"), "{m}");
        // A byte just before transfer 0, and one inside transfer 0 (no `outside`).
        let mut bad = buf.clone();
        bad[199] ^= 1;
        let m = check(&bad, 0x100, &places, &g).unwrap_err();
        assert_eq!(m.outside.as_deref(), Some("1 bytes before the start of transfer 0"));
        let mut bad = buf.clone();
        bad[250] ^= 1;
        let m = check(&bad, 0x100, &places, &g).unwrap_err();
        assert_eq!((m.offset, m.outside), (0x100 + 250, None));
        // The guard is the destination's own: the same bytes at another base are not it.
        let mut plain = vec![0u8; 10_000];
        g.fill(&mut plain, 0);
        assert_eq!(check(&plain, 0, &[], &g), Ok(()));
        assert!(check(&plain, 1, &[], &g).is_err());
    }
}
