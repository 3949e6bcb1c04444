//! The interrupt's own cost to this process: how long a thread asleep on an eventfd takes to run
//! again once the eventfd is signalled. Every path delivers a completion interrupt as an eventfd
//! signal (vfio-pci's `vfio_msihandler` / `vfio_intx_handler` call `eventfd_signal`; the sim card's
//! model writes it), so this wake is part of every `irq` row; what lies before it (the device's
//! message, the CPU's interrupt entry) only a real card has, and only the row shows. Measured here
//! against a second thread signalling at a known time, on this host as it is loaded now.

use super::super::result::WakeFigures;
use crate::Result;
use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wakes timed: enough for a p50 and a min, a few milliseconds in all.
pub const WAKES: usize = 64;
/// How long the signaller waits after the sleeper says it is about to block, so that it does.
const SETTLE: Duration = Duration::from_micros(200);
/// A wake that never comes (a broken eventfd) ends the measurement rather than the run.
const GIVE_UP: Duration = Duration::from_secs(2);

/// Time `wakes` eventfd wake-ups from another thread to this one (asleep in poll(2)).
pub fn eventfd_wake(wakes: usize) -> Result<WakeFigures> {
    let fail = |what: &str, e: std::io::Error| crate::Error::Device(format!("timing an eventfd wake: {what}: {e}"));
    let efd =
        Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|e| fail("eventfd", e.into()))?);
    let base = Instant::now();
    // The signaller's timestamp (ns since `base`) of the signal, and the sleeper's "about to block".
    let sent = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicBool::new(false));
    let (e2, s2, r2) = (Arc::clone(&efd), Arc::clone(&sent), Arc::clone(&ready));
    let signaller = std::thread::Builder::new()
        .name("pcibench-wake".into())
        .spawn(move || {
            for _ in 0..wakes {
                let t = Instant::now();
                while !r2.swap(false, Ordering::AcqRel) {
                    if t.elapsed() > GIVE_UP {
                        return;
                    }
                    std::thread::yield_now();
                }
                std::thread::sleep(SETTLE);
                s2.store(base.elapsed().as_nanos() as u64, Ordering::Release);
                let _ = rustix::io::write(&*e2, &1u64.to_ne_bytes());
            }
        })
        .map_err(|e| fail("thread", e))?;
    let mut ns = Vec::with_capacity(wakes);
    for _ in 0..wakes {
        ready.store(true, Ordering::Release);
        let ts =
            rustix::event::Timespec::try_from(GIVE_UP).map_err(std::io::Error::other).map_err(|e| fail("poll", e))?;
        match poll(&mut [PollFd::new(&*efd, PollFlags::IN)], Some(&ts)) {
            Ok(0) => break,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(fail("poll", e.into())),
        }
        let woke = base.elapsed().as_nanos() as u64;
        let mut v = [0u8; 8];
        let _ = rustix::io::read(&*efd, &mut v);
        ns.push(woke.saturating_sub(sent.load(Ordering::Acquire)) as f64);
    }
    let _ = signaller.join();
    if ns.is_empty() {
        return Err(crate::Error::Device("timing an eventfd wake: no wake came within 2 s".into()));
    }
    ns.sort_by(f64::total_cmp);
    Ok(WakeFigures { samples: ns.len() as u64, min_ns: ns[0], p50_ns: ns[ns.len() / 2], max_ns: ns[ns.len() - 1] })
}

#[cfg(test)]
mod tests {
    /// The figures are ordered and counted; their size depends on the host, so only that.
    #[test]
    fn wakes_are_counted_and_ordered() {
        let w = super::eventfd_wake(8).unwrap();
        assert!(w.samples > 0 && w.samples <= 8);
        assert!(w.min_ns <= w.p50_ns && w.p50_ns <= w.max_ns);
    }
}
