//! The clock every runner times with, and the simulated cards' models progress by (issue #52).
//! `MonotonicClock` is the real one (`Instant`, the vDSO's CLOCK_MONOTONIC); `FakeClock` is a
//! deterministic stand-in whose time advances only by a cost model, so runners, reports and the
//! models can be tested with exact figures (as hyperfine tests its output with a mock executor).
//! `bench::sample::tsc::TscClock` (x86-64, invariant TSC) is another, chosen by the latency
//! runner (`latency::row::latency_clock`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// A monotonic clock in nanoseconds, told about the work done between its readings.
pub trait Clock: Send + Sync {
    /// Nanoseconds since an arbitrary origin; never decreases.
    fn now_ns(&self) -> u64;
    /// `transfers` transfers moving `bytes` bytes in all have just been done. The real clock
    /// ignores it; a fake one advances by its cost model.
    fn did(&self, transfers: u64, bytes: u64) {
        let _ = (transfers, bytes);
    }
    /// What reports call this clock.
    fn name(&self) -> String {
        MONOTONIC_NAME.to_string()
    }
    /// The shortest sample worth taking in this clock's time, whatever its own cost: real time
    /// has interrupts in it (`SAMPLE_FLOOR_NS`); a fake clock's has none (0).
    fn sample_floor_ns(&self) -> u64 {
        0
    }
}

/// The shortest throughput sample on a real clock, in nanoseconds.
///
/// Why (issue #26): the host's timer interrupt (HZ 250-1000, plus hrtimers: ~390 a second on a
/// busy CPU of a 2-core KVM guest) costs 7-12 µs there each time it lands, and samples of 100
/// timer overheads (2-3 µs) came out 3-5 times slower when one did: about one sample in 60
/// (`cargo bench --bench samples` counted 932 slow samples against 956 local timer interrupts
/// on the measuring CPU, spaced by the tick), enough to flag most `run sim` PIO rows `!noisy`
/// although their medians were steady. In a sample of 100 µs the same interrupt is about 10%
/// of one sample in 25: the spread left is the host's own (another process, the hypervisor),
/// which the flag is for.
pub const SAMPLE_FLOOR_NS: u64 = 100_000;

/// The real clock's name in reports.
pub const MONOTONIC_NAME: &str = "CLOCK_MONOTONIC (vDSO)";

/// `Instant`: CLOCK_MONOTONIC through the vDSO on Linux.
#[derive(Debug, Default, Clone, Copy)]
pub struct MonotonicClock;

/// The real clock, for callers that need one with a static lifetime.
pub static MONOTONIC: MonotonicClock = MonotonicClock;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        origin().elapsed().as_nanos() as u64
    }
    fn sample_floor_ns(&self) -> u64 {
        SAMPLE_FLOOR_NS
    }
}

/// Deterministic time: each reading costs `read_ns`; each batch of transfers costs
/// `per_transfer_ns` per transfer plus `bytes * 1000 / bytes_per_us`. Samples can also be
/// scripted: `slow_every(n, extra_ns)` makes every n-th batch take `extra_ns` longer.
#[derive(Debug)]
pub struct FakeClock {
    t: AtomicU64,
    read_ns: u64,
    per_transfer_ns: u64,
    bytes_per_us: u64,
    slow: (u64, u64),
    batches: AtomicU64,
    floor: u64,
}

impl FakeClock {
    pub fn new(read_ns: u64, per_transfer_ns: u64, bytes_per_us: u64) -> FakeClock {
        FakeClock {
            t: AtomicU64::new(0),
            read_ns,
            per_transfer_ns,
            bytes_per_us: bytes_per_us.max(1),
            slow: (0, 0),
            batches: AtomicU64::new(0),
            floor: 0,
        }
    }

    /// Samples must last at least `ns`, as on a real clock (`SAMPLE_FLOOR_NS`).
    pub fn with_floor(mut self, ns: u64) -> FakeClock {
        self.floor = ns;
        self
    }

    /// Every `every`-th batch of transfers takes `extra_ns` longer (noise on demand).
    pub fn slow_every(mut self, every: u64, extra_ns: u64) -> FakeClock {
        self.slow = (every, extra_ns);
        self
    }

    pub fn advance(&self, ns: u64) {
        self.t.fetch_add(ns, Ordering::Relaxed);
    }
}

impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        self.t.fetch_add(self.read_ns, Ordering::Relaxed)
    }

    fn name(&self) -> String {
        "fake clock".into()
    }

    fn sample_floor_ns(&self) -> u64 {
        self.floor
    }

    fn did(&self, transfers: u64, bytes: u64) {
        let n = self.batches.fetch_add(1, Ordering::Relaxed) + 1;
        let data = (bytes as u128 * 1000 / self.bytes_per_us as u128) as u64;
        let mut cost = transfers.saturating_mul(self.per_transfer_ns).saturating_add(data);
        if self.slow.0 > 0 && n % self.slow.0 == 0 {
            cost += self.slow.1;
        }
        self.advance(cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_time_follows_the_cost_model() {
        let c = FakeClock::new(10, 100, 1000).slow_every(2, 5000);
        assert_eq!(c.now_ns(), 0);
        assert_eq!(c.now_ns(), 10);
        c.did(2, 4000); // 2 x 100 ns + 4000 B at 1000 B/us = 4200 ns
        assert_eq!(c.now_ns(), 4220);
        c.did(1, 0); // second batch: 100 + 5000
        assert_eq!(c.now_ns(), 9330);
        let m = MonotonicClock;
        let a = m.now_ns();
        assert!(m.now_ns() >= a);
        assert_eq!(m.name(), MONOTONIC_NAME);
    }
}
