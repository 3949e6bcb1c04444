//! When an engine's wait gives up: after the engine has made no progress for the timeout, not
//! when the whole transfer misses a deadline. A deadline assumes a rate; the same transfer is ten
//! times slower on a loaded host, under TCG or behind a Gen1 x1 link, and is still correct. What
//! tells a hung engine from a slow one is whether its progress counter (completed descriptors, a
//! queue's consumer index, semaphores written) still moves.
//!
//! Every poll-mode engine feeds its counter to a `Watchdog` as it polls; a counter that did not
//! change for `timeout` stops the wait, and the engine is stopped and reported with its progress
//! as before. A one-step engine (edu: one transfer, one status bit) has nothing finer to watch, so
//! there the timeout bounds the transfer itself.
//!
//! The no-progress span is measured up to the previous observation, not to now: the counter a
//! caller passes was read at some moment after the previous call, so the engine is only known to
//! have been idle until then. A watcher that was itself not running (a loaded host, SIGSTOP, a
//! paused VM) between reading its counter and calling `stalled` therefore never blames the engine
//! for the time it was away; the next poll reads a fresh counter (issue 34).

use std::time::{Duration, Instant};

/// A monotonic clock: the real one, or a test's.
pub trait Monotonic {
    /// Time since an arbitrary fixed origin.
    fn now(&self) -> Duration;
}

/// `Instant` from the moment the watchdog was made.
pub struct RealTime(Instant);

impl Monotonic for RealTime {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Watches one engine's progress counter during one wait.
pub struct Watchdog<C: Monotonic = RealTime> {
    clock: C,
    timeout: Duration,
    progress: u64,
    moved_at: Duration,
    /// When the previous observation was made: the counter passed now was read after it.
    seen_at: Duration,
}

impl Watchdog<RealTime> {
    /// Start watching now; the engine has made no progress yet (`progress` 0).
    pub fn new(timeout: Duration) -> Self {
        Self::with_clock(timeout, RealTime(Instant::now()))
    }
}

impl<C: Monotonic> Watchdog<C> {
    pub fn with_clock(timeout: Duration, clock: C) -> Self {
        let moved_at = clock.now();
        Watchdog { clock, timeout, progress: 0, moved_at, seen_at: moved_at }
    }

    /// Note the engine's progress counter (anything that changes only while the engine works:
    /// completed descriptors, a consumer index, bytes); true once it has not changed for the
    /// timeout. A change in either direction counts (a ring index wraps). The counter is known
    /// unchanged only up to the previous call (it was read after it), so that is where the idle
    /// span ends: one poll later than `now` would say, and never charged with a gap in which the
    /// watcher itself did not run.
    pub fn stalled(&mut self, progress: u64) -> bool {
        let now = self.clock.now();
        let seen = std::mem::replace(&mut self.seen_at, now);
        if progress != self.progress {
            self.progress = progress;
            self.moved_at = now;
            return false;
        }
        seen.saturating_sub(self.moved_at) >= self.timeout
    }

    /// Time since the wait began (for periodic status reads).
    pub fn elapsed(&self) -> Duration {
        self.clock.now()
    }

    /// How long the watchdog waits for progress.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Time since the counter last moved (or since the start).
    pub fn idle(&self) -> Duration {
        self.clock.now().saturating_sub(self.moved_at)
    }
}

/// The words every timeout report uses, so all engines say the same thing.
pub fn no_progress(timeout: Duration) -> String {
    format!("no progress for {}", human(timeout))
}

fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 1000 && ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else if ms >= 1 {
        format!("{ms} ms")
    } else {
        format!("{d:?}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A clock a test moves by hand.
    #[derive(Clone, Default)]
    pub struct FakeTime(pub Rc<Cell<Duration>>);

    impl FakeTime {
        pub fn advance(&self, d: Duration) {
            self.0.set(self.0.get() + d);
        }
    }

    impl Monotonic for FakeTime {
        fn now(&self) -> Duration {
            self.0.get()
        }
    }

    /// An engine that completes one of `n` descriptors every `step`, polled every `poll`,
    /// stopping after `stop_after` descriptors: the outcome of waiting with `timeout`.
    fn wait(
        n: u64,
        step: Duration,
        stop_after: u64,
        timeout: Duration,
    ) -> std::result::Result<Duration, (u64, Duration)> {
        let t = FakeTime::default();
        let mut dog = Watchdog::with_clock(timeout, t.clone());
        let poll = Duration::from_millis(1);
        loop {
            let done = ((t.now().as_nanos() / step.as_nanos()) as u64).min(stop_after).min(n);
            if done == n {
                return Ok(t.now());
            }
            if dog.stalled(done) {
                return Err((done, t.now()));
            }
            t.advance(poll);
        }
    }

    #[test]
    fn a_slow_engine_that_keeps_moving_is_waited_for_to_the_end() {
        // 65536 descriptors, one every 0.5 ms of a 1 s timeout: 33 s in all, far past a deadline
        // of one timeout, and every gap well inside it.
        let r = wait(65536, Duration::from_micros(500), u64::MAX, Duration::from_secs(1));
        assert_eq!(r, Ok(Duration::from_millis(32768)));
        // Gaps of 0.9 of the timeout, 10 descriptors: 9 timeouts in all.
        let r = wait(10, Duration::from_millis(900), u64::MAX, Duration::from_secs(1));
        assert_eq!(r, Ok(Duration::from_millis(9000)));
    }

    #[test]
    fn an_engine_that_stops_moving_is_stopped_one_timeout_after_its_last_progress() {
        let r = wait(65536, Duration::from_micros(10), 57152, Duration::from_secs(1));
        // The last descriptor completed at 571.52 ms (seen at the 572 ms poll); the wait ends one
        // timeout and one poll later.
        assert_eq!(r, Err((57152, Duration::from_millis(1573))));
        // Never moved at all: one timeout (and a poll) from the start.
        let r = wait(1, Duration::from_secs(3600), 0, Duration::from_secs(1));
        assert_eq!(r, Err((0, Duration::from_millis(1001))));
    }

    #[test]
    fn a_gap_longer_than_the_timeout_is_a_stall_even_if_the_engine_would_resume() {
        let r = wait(4, Duration::from_millis(1500), u64::MAX, Duration::from_secs(1));
        assert_eq!(r, Err((0, Duration::from_millis(1001))));
    }

    #[test]
    fn a_watcher_that_did_not_run_does_not_blame_the_engine_for_its_absence() {
        // The counter was read (unchanged) just before the process was stopped for 5 s; the
        // engine finished meanwhile. The call after the gap passes the stale value: no stall.
        let t = FakeTime::default();
        let mut dog = Watchdog::with_clock(Duration::from_secs(1), t.clone());
        t.advance(Duration::from_millis(500));
        assert!(!dog.stalled(0));
        t.advance(Duration::from_secs(5));
        assert!(!dog.stalled(0), "a gap in the watching was charged to the engine");
        // The next poll reads the finished counter: progress.
        t.advance(Duration::from_millis(1));
        assert!(!dog.stalled(7));
        // A real stall is still caught: one timeout of watching with no change.
        for _ in 0..1000 {
            t.advance(Duration::from_millis(1));
            assert!(!dog.stalled(7));
        }
        t.advance(Duration::from_millis(1));
        assert!(dog.stalled(7));
    }

    #[test]
    fn the_report_names_the_timeout_in_plain_units() {
        assert_eq!(no_progress(Duration::from_secs(2)), "no progress for 2 s");
        assert_eq!(no_progress(Duration::from_millis(30)), "no progress for 30 ms");
        assert_eq!(no_progress(Duration::from_millis(1500)), "no progress for 1500 ms");
    }
}
