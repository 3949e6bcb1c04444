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
//! So each worker, when it starts and whenever it is woken from parking, looks at where its
//! driver is. A driver pinned to one CPU (`--cpu N`) keeps the worker off that CPU for good: the
//! worker may use every CPU the process had before any pinning (`os::cpu::process_cpus`) but
//! that one. A driver that floats only has the worker moved away once, if it sits on the
//! driver's CPU: pinned off it, then let free again, where the scheduler leaves it until it has
//! a reason to move it (a lasting pin to one CPU would starve the worker on a busy host, where a
//! free worker runs wherever there is room). With no other CPU (a one-CPU process), the worker
//! stays and shares.

use crate::os::cpu;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the driver was: its CPU, and whether it is pinned there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Driver {
    cpu: u32,
    pinned: bool,
}

impl Driver {
    /// The calling thread, as the driver of a worker it starts or wakes.
    pub fn here() -> Option<Driver> {
        let cpu = cpu::current_cpu()?;
        Some(Driver { cpu, pinned: cpu::allowed_cpus() == [cpu] })
    }

    fn pack(d: Option<Driver>) -> u64 {
        d.map_or(u64::MAX, |d| u64::from(d.cpu) << 1 | u64::from(d.pinned))
    }

    fn unpack(v: u64) -> Option<Driver> {
        (v != u64::MAX).then_some(Driver { cpu: (v >> 1) as u32, pinned: v & 1 == 1 })
    }
}

/// Where the thread that last woke a worker was, for the worker to keep off.
#[derive(Debug)]
pub(crate) struct Waker(AtomicU64);

impl Default for Waker {
    fn default() -> Self {
        Waker(AtomicU64::new(u64::MAX))
    }
}

impl Waker {
    /// Called by the waking thread (the driver), just before it wakes a parked worker.
    pub fn record(&self) {
        self.0.store(Driver::pack(Driver::here()), Ordering::Relaxed);
    }

    /// Called by the worker once woken: keep off the waker's CPU.
    pub fn keep_off(&self) {
        keep_off(Driver::unpack(self.0.load(Ordering::Relaxed)));
    }

    /// Called by the driver as it starts run `n` (a count the worker sees too): where it is, when
    /// the worker is parked (it is about to be woken) or every `RECHECK`th run. A driver that
    /// floats can be moved by the scheduler onto the CPU its running worker spins on, and stays
    /// there while the pair keeps the CPU hot: only a look now and then finds it. The periodic
    /// record is the CPU alone (one vDSO call), as a floating driver: a pinned driver's worker
    /// is off its CPU for good already.
    pub fn at_doorbell(&self, n: u64, parked: bool) {
        if parked {
            self.record();
        } else if n % RECHECK == 0 {
            let d = cpu::current_cpu().map(|cpu| Driver { cpu, pinned: false });
            self.0.store(Driver::pack(d), Ordering::Relaxed);
        }
    }

    /// Called by the worker as it takes run `now` after run `prev`: keep off the driver's CPU
    /// when it slept, or when a `RECHECK`th run went by (the driver recorded where it was).
    pub fn at_start(&self, prev: u64, now: u64, slept: bool) {
        if slept || now / RECHECK != prev / RECHECK {
            self.keep_off();
        }
    }
}

/// Runs between two looks at whether a busy driver and worker ended up on one CPU: a look costs
/// two CPU-number reads, tens of nanoseconds, under 2% of the shortest run a model does.
const RECHECK: u64 = 16;

/// Place the calling (worker) thread off `driver`'s CPU, as the module says. A failure leaves
/// the thread where it was: only speed is at stake.
pub(crate) fn keep_off(driver: Option<Driver>) {
    let Some(d) = driver else { return };
    // The common case, a floating driver elsewhere, answered by one CPU-number read.
    if !d.pinned && cpu::current_cpu() != Some(d.cpu) {
        return;
    }
    let all = cpu::process_cpus();
    let others: Vec<u32> = all.iter().copied().filter(|c| *c != d.cpu).collect();
    if others.is_empty() {
        return;
    }
    if d.pinned {
        if cpu::allowed_cpus() != others {
            let _ = cpu::set_current_thread_cpus(&others);
        }
    } else if cpu::current_cpu() == Some(d.cpu) {
        // Moved off now (the kernel migrates a thread whose mask excludes its CPU at once),
        // then free again.
        let mine = cpu::allowed_cpus();
        if cpu::set_current_thread_cpus(&others).is_ok() {
            let _ = cpu::set_current_thread_cpus(if mine.is_empty() { &all } else { &mine });
        }
    }
}

/// Start a worker thread named `name` running `f`, placed off the calling (driver) thread's CPU.
pub(crate) fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let driver = Driver::here();
    let shaken = name.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        keep_off(driver);
        super::shake::arm(&shaken);
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_started_by_a_pinned_thread_keeps_off_its_cpu() {
        let all = cpu::process_cpus();
        // The "driver" is a thread of its own, pinned to the first CPU, so the test's thread
        // keeps its affinity.
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

    #[test]
    fn a_worker_of_a_floating_driver_stays_free() {
        let all = cpu::process_cpus();
        let here = Driver::here().unwrap();
        assert_eq!(here.pinned, all.len() == 1);
        // Whether or not it had to be moved off the driver's CPU, it may run anywhere after.
        let h = spawn("sim-test-worker".into(), cpu::allowed_cpus).unwrap();
        assert_eq!(h.join().unwrap(), all);
        assert_eq!(Driver::unpack(Driver::pack(Some(here))), Some(here));
        assert_eq!(Driver::unpack(Driver::pack(None)), None);
    }
}
