//! Where a simulated engine's worker threads run: off the CPU of the thread that drives them
//! (the measuring thread), whenever the process may use another CPU.
//!
//! Why (issue #26): a worker that shares its driver's CPU turns every transfer into a relay of
//! context switches (the driver polls, yields, the worker copies, spins, yields back): about
//! 6 µs per transfer, which at 64 KiB is five times the copy itself. It happened by accident
//! two ways. Workers start at the first transfer, after `--cpu N` pinned the measuring thread,
//! and inherit its single-CPU affinity. And a worker that parked (idle for the spin time)
//! is woken by the driver through a futex, where the scheduler's wake-affine placement may put
//! it on the waker's CPU, and cache-hot tasks are then rarely migrated; so one direction could
//! run stacked and the other not (c2h at 64 KiB five times slower than h2c on a 2-core EPYC).
//! A real card's engine never takes the CPU's time: its model should not either.
//!
//! So each worker, when it starts and whenever it is woken from parking, moves itself to the
//! CPUs the process had before any pinning (`os::cpu::process_cpus`) less the waker's current
//! CPU; with no other CPU (a one-CPU process), it stays and shares.

use crate::os::cpu;
use std::sync::atomic::{AtomicU32, Ordering};

const NONE: u32 = u32::MAX;

/// The CPU of the thread that last woke a worker, for the worker to keep off.
#[derive(Debug)]
pub(crate) struct Waker(AtomicU32);

impl Default for Waker {
    fn default() -> Self {
        Waker(AtomicU32::new(NONE))
    }
}

impl Waker {
    /// Called by the waking thread (the driver), just before it wakes a parked worker.
    pub fn record(&self) {
        self.0.store(cpu::current_cpu().unwrap_or(NONE), Ordering::Relaxed);
    }

    /// Called by the worker once woken: keep off the waker's CPU.
    pub fn keep_off(&self) {
        let c = self.0.load(Ordering::Relaxed);
        keep_off((c != NONE).then_some(c));
    }
}

/// Move the calling thread to every CPU the process may use except `driver`, unless it is there
/// already or there is no other. A failure leaves the thread where it was: only speed is at
/// stake, and the scheduler may still place it well.
pub(crate) fn keep_off(driver: Option<u32>) {
    let Some(d) = driver else { return };
    let others: Vec<u32> = cpu::process_cpus().into_iter().filter(|c| *c != d).collect();
    if others.is_empty() || cpu::allowed_cpus() == others {
        return;
    }
    let _ = cpu::set_current_thread_cpus(&others);
}

/// Start a worker thread named `name` running `f`, placed off the calling (driver) thread's CPU.
pub(crate) fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let driver = cpu::current_cpu();
    std::thread::Builder::new().name(name).spawn(move || {
        keep_off(driver);
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_started_by_a_pinned_thread_keeps_off_its_cpu() {
        let all = cpu::process_cpus();
        // Run the "driver" on a thread of its own, pinned to the first CPU, so the test's own
        // thread keeps its affinity.
        let (first, worker_cpus) = std::thread::spawn(move || {
            let first = all[0];
            cpu::pin_current_thread(first).unwrap();
            let h = spawn("sim-test-worker".into(), cpu::allowed_cpus).unwrap();
            (first, h.join().unwrap())
        })
        .join()
        .unwrap();
        let expected: Vec<u32> = cpu::process_cpus().into_iter().filter(|c| *c != first).collect();
        if expected.is_empty() {
            assert_eq!(worker_cpus, vec![first], "a one-CPU process: the worker shares it");
        } else {
            assert_eq!(worker_cpus, expected, "every CPU but the driver's");
        }
    }
}
