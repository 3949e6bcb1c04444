//! SIGINT, SIGTERM and SIGHUP: the first sets the stop flag (runners stop at the next sample, stop
//! engines, restore Bus Master and report what they have: exit 130). A second signal ends the
//! process at once, with 130, only when a person sent it: a different signal, or the same one more
//! than `REPEAT` after the first. The same signal arriving twice at once is one interruption:
//! timeout(1) sends its signal to the command and then to its own process group, which holds the
//! command too (coreutils timeout.c, `send_sig (monitored_pid, sig)` then `send_sig (0, sig)`), so
//! every `timeout -s INT` delivers two, microseconds apart; the results must not vanish for it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A repeat of the same signal sooner than this is the same interruption delivered twice.
pub const REPEAT: Duration = Duration::from_secs(1);

/// The first signal: its number in the top 8 bits, the nanoseconds since `EPOCH` (plus one, so 0
/// means none yet) below: one word, so a second signal never sees half of it.
static FIRST: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();
const NS_BITS: u32 = 56;

/// Whether `sig` at `now_ns` ends the process at once, after `first` at `first_ns`.
pub fn forced(first: i32, first_ns: u64, sig: i32, now_ns: u64) -> bool {
    sig != first || now_ns.saturating_sub(first_ns) > REPEAT.as_nanos() as u64
}

/// What the handler does; only atomics and a clock reading (async-signal-safe).
fn on_signal(sig: i32, flag: &AtomicBool) {
    let ns = EPOCH.get().map_or(0, |e| e.elapsed().as_nanos() as u64).min((1 << NS_BITS) - 2) + 1;
    let word = ((sig as u64 & 0xff) << NS_BITS) | ns;
    match FIRST.compare_exchange(0, word, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => flag.store(true, Ordering::SeqCst),
        Err(first) => {
            if forced((first >> NS_BITS) as i32, first & ((1 << NS_BITS) - 1), sig, ns) {
                // The engine may still be moving data: Bus Master off first (access::emergency).
                pcibench::access::emergency::clear_bus_master();
                signal_hook::low_level::exit(130);
            }
        }
    }
}

/// The stop flag, with the handlers installed on first use.
pub fn flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        EPOCH.get_or_init(Instant::now);
        let flag = Arc::new(AtomicBool::new(false));
        // Every vfio-user request watches it too: a server that stops answering cannot hold a
        // stopping run past the client's grace (access::vfio_user::client::STOP_GRACE).
        pcibench::access::vfio_user::client::watch_stop(Arc::clone(&flag));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
            let f = Arc::clone(&flag);
            // SAFETY: the action only touches atomics and reads the monotonic clock (vDSO
            // clock_gettime), both async-signal-safe; `exit` is _exit(2).
            let _ = unsafe { signal_hook::low_level::register(sig, move || on_signal(sig, &f)) };
        }
        flag
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_person_forces_an_exit() {
        let (int, term) = (signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM);
        let ms = 1_000_000;
        // timeout(1): the same signal to the process and its group, microseconds apart.
        assert!(!forced(int, 5 * ms, int, 5 * ms + 20_000));
        assert!(!forced(term, 5 * ms, term, 900 * ms));
        // A person: Ctrl-C again after a while, or another signal.
        assert!(forced(int, 5 * ms, int, 1500 * ms));
        assert!(forced(int, 5 * ms, term, 5 * ms + 1));
    }
}
