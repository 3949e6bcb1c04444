//! How a simulated engine's worker waits for work: spin briefly, then the caller parks on its
//! condition variable. Back-to-back runs (a benchmark loop) then start without a futex wake-up,
//! and an idle engine costs nothing after the spin.

use std::time::{Duration, Instant};

/// How long a worker spins after its last work before parking.
const SPIN: Duration = Duration::from_micros(100);
/// Past this the spin yields between checks: on a host with more runnable threads than cores a
/// pure spin would hold the core the driver thread needs to submit the next run.
const SPIN_PURE: Duration = Duration::from_micros(2);

/// Spin until `ready` holds or the spin time is up; true when it became ready.
pub fn briefly(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut spins = 0u32;
    while !ready() {
        spins = spins.wrapping_add(1);
        if spins % 64 == 0 {
            let waited = start.elapsed();
            if waited >= SPIN {
                return false;
            }
            if waited >= SPIN_PURE {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn returns_at_once_when_ready_and_gives_up_after_the_spin() {
        assert!(super::briefly(|| true));
        let t = std::time::Instant::now();
        assert!(!super::briefly(|| false));
        assert!(t.elapsed() >= super::SPIN);
    }
}
