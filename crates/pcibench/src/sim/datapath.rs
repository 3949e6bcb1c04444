//! What bounds a simulated engine, and the time it runs on (issue #52).
//!
//! Each engine model declares its IP's datapath (`Datapath`: a rate in each direction, and the
//! bytes of each descriptor it fetches over it) and progresses as a function of time: a
//! descriptor the engine starts at t completes at t + `Datapath::desc_ns`. Nothing moves on a
//! thread of the model's own. Progress is computed when the host looks (a register read or
//! write, a poll of host memory the driver announces through `BarRegion::observe`, an interrupt
//! waiter whose timeout is the next completion, a server's timer), and the copies happen then,
//! in the thread that looked. So a figure depends on the host path and the declared datapath
//! alone, never on whether a second thread got a CPU: a loaded host gives the same figures as an
//! idle one. Stepped models (tests) take every due time as now: the order of events is the
//! test's.

use crate::clock::{Clock, MonotonicClock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A simulated engine's datapath: `bytes_per_s` in each direction (the directions do not share
/// it, as an IP's H2C and C2H engines do not), and the bytes of each descriptor it fetches over
/// the same datapath before the data (the per-descriptor cost).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Datapath {
    pub bytes_per_s: u64,
    pub desc_bytes: u64,
    /// What it stands for and where the figure comes from, for `info` and docs/sim-cards.md.
    pub basis: &'static str,
}

impl Datapath {
    /// The rate in MB/s (10^6 bytes).
    pub fn mbps(&self) -> f64 {
        self.bytes_per_s as f64 / 1e6
    }

    /// Nanoseconds one descriptor of `len` bytes takes: its fetch and its data, rounded up.
    pub fn desc_ns(&self, len: u64) -> u64 {
        self.bytes_ns(len.saturating_add(self.desc_bytes))
    }

    /// Nanoseconds `len` bytes take on the datapath, rounded up.
    pub fn bytes_ns(&self, len: u64) -> u64 {
        (len as u128 * 1_000_000_000).div_ceil(self.bytes_per_s.max(1) as u128) as u64
    }

    /// The longest run of bytes that fits in `ns` nanoseconds.
    pub fn bytes_in(&self, ns: u64) -> u64 {
        (ns as u128 * self.bytes_per_s as u128 / 1_000_000_000).min(u64::MAX as u128) as u64
    }

    /// "2,000 MB/s per direction".
    pub fn describe(&self) -> String {
        format!("{} MB/s per direction", crate::units::group_thousands(self.mbps().round() as u64))
    }
}

/// The clock a model's time is read from: the real monotonic clock, or a test's own (a
/// `FakeClock`), on which the test fixes time as a stepped test fixes order: such a model is never
/// shaken.
#[derive(Clone)]
pub struct ModelClock(Arc<dyn Clock>, bool);

impl ModelClock {
    pub fn real() -> ModelClock {
        ModelClock(Arc::new(MonotonicClock), false)
    }

    /// A test's clock.
    pub fn new(clock: Arc<dyn Clock>) -> ModelClock {
        ModelClock(clock, true)
    }

    /// Nanoseconds since the clock's origin.
    pub fn now(&self) -> u64 {
        self.0.now_ns()
    }

    /// Whether a test sets this time (the shaker leaves such a model alone).
    pub fn set_by_test(&self) -> bool {
        self.1
    }
}

impl Default for ModelClock {
    fn default() -> Self {
        ModelClock::real()
    }
}

impl std::fmt::Debug for ModelClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.name())
    }
}

thread_local! {
    static HANDS_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Make this thread one whose looks move no data (`on`), or an ordinary one again.
///
/// `pcibench serve` sets it on the thread that answers a client's register accesses while the
/// card reaches that client's memory by DMA_READ/DMA_WRITE message: QEMU's client answers those
/// only while none of its vCPUs waits on the device (hw/vfio-user/proxy.c), so an access whose
/// reply waited on the card's own DMA message would wait forever (lab/findings.md 15; libvfio-user
/// asks the same of its servers). On such a thread a register access reads and writes the
/// registers, and what it would have moved is made due now instead, for the server's clock
/// thread (`access::vfio_user::clock`) to move right after the reply has gone.
pub fn set_hands_off(on: bool) {
    HANDS_OFF.with(|h| h.set(on));
}

/// Whether this thread moves no data when it looks (`set_hands_off`).
pub fn hands_off() -> bool {
    HANDS_OFF.with(|h| h.get())
}

/// When a model next has something due, in its clock's nanoseconds (`IDLE`: nothing): one atomic
/// the host's poll compares the time against before it takes any lock.
#[derive(Debug)]
pub struct Due(AtomicU64);

impl Default for Due {
    fn default() -> Self {
        Due(AtomicU64::new(Due::IDLE))
    }
}

impl Due {
    pub const IDLE: u64 = u64::MAX;

    pub fn set(&self, at: u64) {
        self.0.store(at, Ordering::Release);
    }

    pub fn clear(&self) {
        self.set(Due::IDLE);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Whether something is due at `now`.
    pub fn by(&self, now: u64) -> bool {
        self.get() <= now
    }
}

/// The earliest of `dues` (model ns) as a wait from `now`: None when nothing is due.
pub fn wait_for(now: u64, dues: impl IntoIterator<Item = u64>) -> Option<Duration> {
    let at = dues.into_iter().min().filter(|d| *d != Due::IDLE)?;
    Some(Duration::from_nanos(at.saturating_sub(now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_takes_its_fetch_and_its_bytes_at_the_rate() {
        // XDMA's 64-bit datapath at 250 MHz: 2 bytes a nanosecond, a 32-byte descriptor.
        let d = Datapath { bytes_per_s: 2_000_000_000, desc_bytes: 32, basis: "" };
        assert_eq!(d.desc_ns(64 << 10), (65536 + 32) / 2);
        assert_eq!(d.bytes_ns(1), 1, "rounded up");
        assert_eq!(d.bytes_in(1000), 2000);
        assert_eq!(d.describe(), "2,000 MB/s per direction");
        assert_eq!(wait_for(10, [Due::IDLE, 25, 40]), Some(Duration::from_nanos(15)));
        assert_eq!(wait_for(10, [Due::IDLE]), None);
        assert_eq!(wait_for(50, [25]), Some(Duration::ZERO), "overdue: at once");
    }
}
