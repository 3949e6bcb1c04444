//! Test patterns: different on every run (seeded from the clock and the PID), cheap to make
//! (xorshift64* per 8-byte word), never generated inside a timed part, and verified with the
//! first mismatch named.

use crate::units::human_size;
use crate::{Error, Result};
use serde::Serialize;

/// `len` zeroed bytes of host memory, or one line saying they could not be had (a low
/// `ulimit -v`, a huge --size) instead of the allocator's abort.
pub fn host_bytes(len: usize) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::Unsupported(format!(
            "cannot allocate {} of host memory for the data to move and verify: use a smaller --size, or raise the memory limit (ulimit -v)",
            human_size(len as u64)
        ))
    })?;
    v.resize(len, 0);
    Ok(v)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pattern {
    pub seed: u64,
}

/// Where verification found the first difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Mismatch {
    pub offset: u64,
    pub expected: u8,
    pub found: u8,
    /// Bytes that differ in the whole range.
    pub count: u64,
    /// Where the first difference lies when no transfer should have written it ("byte 1 past
    /// the end of transfer 0"): the engine wrote outside a transfer (`bench::dma::guard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside: Option<String>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "first mismatch at offset {:#x}: expected {:#04x}, found {:#04x} ({} bytes differ)",
            self.offset, self.expected, self.found, self.count
        )?;
        match &self.outside {
            Some(w) => write!(f, "; it is {w}: the engine wrote outside the transfer"),
            None => Ok(()),
        }
    }
}

fn next(state: &mut u64) -> u64 {
    // xorshift64* (Vigna 2016): full period over non-zero states, good enough to catch
    // stuck, shifted or stale data.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

impl Pattern {
    /// A pattern unlike the previous run's.
    pub fn fresh() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut s = t ^ ((std::process::id() as u64) << 32) ^ 0x9e37_79b9_7f4a_7c15;
        Pattern::with_seed(next(&mut s))
    }

    pub fn with_seed(seed: u64) -> Self {
        // xorshift has one fixed point, zero.
        Pattern { seed: if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed } }
    }

    /// The next pattern in a sequence (a new one per configuration of a run).
    pub fn successor(&self) -> Self {
        let mut s = self.seed;
        Pattern::with_seed(next(&mut s))
    }

    /// Fill `buf` with the pattern as it appears at byte `offset` of the stream.
    pub fn fill(&self, buf: &mut [u8]) {
        let mut s = self.seed;
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&next(&mut s).to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = next(&mut s).to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
    }

    pub fn try_generate(&self, len: usize) -> Result<Vec<u8>> {
        let mut v = host_bytes(len)?;
        self.fill(&mut v);
        Ok(v)
    }

    pub fn generate(&self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.fill(&mut v);
        v
    }
}

/// Compare `found` with `expected`; `base` is added to reported offsets.
pub fn verify(expected: &[u8], found: &[u8], base: u64) -> Result<(), Mismatch> {
    if expected == found {
        return Ok(());
    }
    let first = expected.iter().zip(found).position(|(a, b)| a != b).unwrap_or(expected.len().min(found.len()));
    let count =
        expected.iter().zip(found).filter(|(a, b)| a != b).count() as u64 + expected.len().abs_diff(found.len()) as u64;
    Err(Mismatch {
        offset: base + first as u64,
        expected: expected.get(first).copied().unwrap_or(0),
        found: found.get(first).copied().unwrap_or(0),
        count,
        outside: None,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn memory_that_cannot_be_had_is_an_error_not_an_abort() {
        let e = super::host_bytes(usize::MAX / 2).unwrap_err().to_string();
        assert!(e.contains("cannot allocate") && e.contains("ulimit -v"), "{e}");
        assert_eq!(super::host_bytes(3).unwrap(), vec![0, 0, 0]);
    }

    use super::*;

    #[test]
    fn patterns_differ_and_repeat_by_seed() {
        let a = Pattern::with_seed(42).generate(1000);
        assert_eq!(a, Pattern::with_seed(42).generate(1000));
        assert_ne!(a, Pattern::with_seed(43).generate(1000));
        assert_ne!(Pattern::with_seed(42).successor(), Pattern::with_seed(42));
        // No long runs of one byte value: stuck-at faults show.
        assert!(a.windows(8).all(|w| w.iter().any(|b| *b != w[0])));
        // A prefix of a longer pattern is the shorter pattern.
        assert_eq!(&Pattern::with_seed(9).generate(13)[..], &Pattern::with_seed(9).generate(16)[..13]);
    }

    #[test]
    fn first_mismatch_is_named() {
        let e = Pattern::with_seed(7).generate(64);
        let mut f = e.clone();
        assert!(verify(&e, &f, 0).is_ok());
        f[10] ^= 0xff;
        f[20] ^= 0x01;
        let m = verify(&e, &f, 0x1000).unwrap_err();
        assert_eq!((m.offset, m.expected, m.found, m.count), (0x100a, e[10], e[10] ^ 0xff, 2));
        assert!(m.to_string().starts_with("first mismatch at offset 0x100a"));
    }
}
