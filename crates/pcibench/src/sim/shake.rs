//! The shaker (issue #34): with `PCIBENCH_SIM_SHAKE=SEED` in the environment, every threaded
//! engine model's worker yields, sleeps or holds back its writebacks at points drawn from the
//! seed, so a test that passes only under one interleaving of the driver and the model fails
//! here, on any host, instead of now and then under qemu-user or on a loaded CI machine.
//! `scripts/test-all --shake N` runs the library's tests with N seeds pinned to one CPU.
//!
//! The points: before each descriptor a worker moves and before each status writeback or
//! completion it reports. Each worker draws from its own generator, seeded from the seed and its
//! name (`sim-qdma-h2c`), so what one worker does at its k-th point is the same in every run with
//! that seed (it acts at each of its first 256 points, then at one in 64); what the scheduler makes
//! of it is not, which is why a run repeats with many seeds.
//! Stepped models (no worker thread) are never shaken: their order is the test's. Unset (or 0),
//! a point costs one thread-local read.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable holding the seed.
pub const SHAKE_ENV: &str = "PCIBENCH_SIM_SHAKE";

thread_local! {
    /// This worker's generator state; 0 when the thread is not shaken.
    static STATE: Cell<u64> = const { Cell::new(0) };
    /// Points this worker has passed.
    static POINTS: Cell<u64> = const { Cell::new(0) };
}

/// A worker acts at each of its first `DENSE` points, then at one point in `SPARSE`: the
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
/// unless by a 2^-64 chance, which `arm` guards).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Shake the calling worker thread (named `worker`) when a seed is set.
pub(crate) fn arm(worker: &str) {
    let Some(seed) = seed() else { return };
    // Tests see the seed in a failing test's output (workers inherit the test's captured stderr).
    #[cfg(test)]
    eprintln!("{SHAKE_ENV}={seed}: shaking {worker}");
    STATE.with(|s| s.set(mix(seed ^ fnv(worker.as_bytes())).max(1)));
}

/// One shake point: on a shaken worker, carry on (half the time), yield, or sleep up to 1 ms.
pub(crate) fn point() {
    shake(false)
}

/// A shake point just before a worker reports (a writeback, a completion, an error): held back
/// more often and longer than at `point` (up to 2 ms), past the driver's periodic status reads,
/// so a driver that takes a stale writeback for the engine's progress is caught.
pub(crate) fn before_report() {
    shake(true)
}

fn shake(report: bool) {
    if STATE.with(|s| s.get()) == 0 {
        return;
    }
    let n = POINTS.with(|p| {
        p.set(p.get() + 1);
        p.get()
    });
    if n > DENSE && n % SPARSE != 0 {
        return;
    }
    let Some(x) = STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            return None;
        }
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        Some(x)
    }) else {
        return;
    };
    let r = x >> 8;
    if report {
        match x % 4 {
            0 => {}
            1 => std::thread::yield_now(),
            _ => std::thread::sleep(Duration::from_micros(100 + r % 1900)),
        }
        return;
    }
    match x % 16 {
        0..=7 => {}
        8..=11 => std::thread::yield_now(),
        12..=14 => std::thread::sleep(Duration::from_micros(r % 100)),
        _ => std::thread::sleep(Duration::from_micros(100 + r % 900)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unshaken_thread_passes_every_point_and_a_shaken_one_draws_from_its_own_sequence() {
        point(); // not armed: nothing, whatever the environment says
        assert_eq!(STATE.with(|s| s.get()), 0);
        // The same seed and name give the same sequence; another name another.
        let draw = |name: &str| {
            POINTS.with(|p| p.set(0));
            STATE.with(|s| s.set(mix(42 ^ fnv(name.as_bytes())).max(1)));
            let seq: Vec<u64> = (0..8)
                .map(|_| {
                    point();
                    STATE.with(|s| s.get())
                })
                .collect();
            STATE.with(|s| s.set(0));
            seq
        };
        assert_eq!(draw("sim-qdma-h2c"), draw("sim-qdma-h2c"));
        assert_ne!(draw("sim-qdma-h2c"), draw("sim-qdma-c2h"));
    }
}
