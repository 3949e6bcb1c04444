//! The shaker (issues #34, #52): with `PCIBENCH_SIM_SHAKE=SEED` in the environment, every
//! engine model holds back its completions at points drawn from the seed: a descriptor (or a
//! stream's piece, a burst of a queue) then completes up to 2 ms after its modeled time, and its
//! writeback, completion count and interrupt with it. A test (or a driver) that takes a stale
//! writeback for the engine's progress, or that holds only when completions come exactly when
//! due, fails here, on any host. The models have no threads of their own (docs/determinism.md):
//! the shaker moves their due times, and with them the point at which the host, looking, finds
//! the work done; the host threads that remain (a `serve` session, its timer, `latency --load`'s
//! streaming thread) meet that perturbed timing. `scripts/test-all --shake N` runs the library's
//! tests with N seeds pinned to one CPU.
//!
//! The points: before each descriptor an engine starts (`point`: small delays) and before each
//! completion it reports (`before_report`: more often, longer). Each model part draws from its
//! own generator, seeded from the seed and its name (`sim-qdma-h2c`), so what it does at its k-th
//! point is the same in every run with that seed (it acts at each of its first 256 points, then at
//! one in 64). Stepped models are never shaken: their order is the test's. Unset (or 0), a point
//! costs one atomic load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable holding the seed.
pub const SHAKE_ENV: &str = "PCIBENCH_SIM_SHAKE";

/// A part acts at each of its first `DENSE` points, then at one point in `SPARSE`: the
/// interleavings a test asserts on are in its first runs, and a benchmark-sized test (thousands
/// of runs) must not take minutes.
const DENSE: u64 = 256;
const SPARSE: u64 = 64;

/// The seed from the environment, read once: a number, or any other word hashed into one.
pub fn seed() -> Option<u64> {
    static SEED: OnceLock<Option<u64>> = OnceLock::new();
    *SEED.get_or_init(|| {
        let v = std::env::var(SHAKE_ENV).ok()?;
        let v = v.trim();
        let seed = v.parse::<u64>().unwrap_or_else(|_| fnv(v.as_bytes()));
        (seed != 0).then_some(seed)
    })
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// SplitMix64's finaliser: spreads a seed over all 64 bits (never 0 for the inputs used here
/// unless by a 2^-64 chance, which `Shaker::new` guards).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One model part's generator: its state (0 when not shaken) and the points it passed.
#[derive(Debug, Default)]
pub(crate) struct Shaker {
    state: AtomicU64,
    points: AtomicU64,
}

impl Shaker {
    /// The generator of the model part `name`, armed when a seed is set and the model is not
    /// `unshaken` (stepped, or on a test's clock: the test fixes order and time itself).
    pub fn new(name: &str, unshaken: bool) -> Shaker {
        let state = match seed() {
            Some(seed) if !unshaken => {
                // Tests see the seed in a failing test's output.
                #[cfg(test)]
                eprintln!("{SHAKE_ENV}={seed}: shaking {name}");
                mix(seed ^ fnv(name.as_bytes())).max(1)
            }
            _ => 0,
        };
        Shaker { state: AtomicU64::new(state), points: AtomicU64::new(0) }
    }

    /// Nanoseconds to hold back the descriptor starting now: none (half the time), up to
    /// 100 µs, or up to 1 ms.
    pub fn point(&self) -> u64 {
        self.shake(false)
    }

    /// Nanoseconds to hold back a completion about to be reported: more often and longer than
    /// at `point` (up to 2 ms), past the drivers' periodic status reads, so a driver that takes a
    /// stale writeback for the engine's progress is caught.
    pub fn before_report(&self) -> u64 {
        self.shake(true)
    }

    fn shake(&self, report: bool) -> u64 {
        if self.state.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let n = self.points.fetch_add(1, Ordering::Relaxed) + 1;
        if n > DENSE && n % SPARSE != 0 {
            return 0;
        }
        // xorshift64; concurrent draws may repeat a state, which only makes the sequence coarser.
        let mut x = self.state.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.store(x, Ordering::Relaxed);
        let r = x >> 8;
        let us = if report {
            match x % 4 {
                0 => 0,
                1 => r % 100,
                _ => 100 + r % 1900,
            }
        } else {
            match x % 16 {
                0..=7 => 0,
                8..=14 => r % 100,
                _ => 100 + r % 900,
            }
        };
        us * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unarmed_part_holds_nothing_back_and_an_armed_one_draws_from_its_own_sequence() {
        let quiet = Shaker::default();
        assert_eq!((quiet.point(), quiet.before_report()), (0, 0));
        // The same seed and name give the same sequence; another name another.
        let draw = |name: &str| {
            let s = Shaker { state: AtomicU64::new(mix(42 ^ fnv(name.as_bytes())).max(1)), points: AtomicU64::new(0) };
            (0..16).map(|i| if i % 2 == 0 { s.point() } else { s.before_report() }).collect::<Vec<u64>>()
        };
        assert_eq!(draw("sim-qdma-h2c"), draw("sim-qdma-h2c"));
        assert_ne!(draw("sim-qdma-h2c"), draw("sim-qdma-c2h"));
        assert!(draw("sim-qdma-h2c").iter().all(|ns| *ns < 2_000_000), "at most 2 ms");
    }
}
