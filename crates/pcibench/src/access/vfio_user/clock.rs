//! A session's clock thread: while the card reaches some of the client's memory by DMA_READ /
//! DMA_WRITE message, the card's engines move data here, never on the session thread that
//! answers the client's accesses (lab/findings.md 15).
//!
//! QEMU's client handles a server's DMA messages on its main loop, which needs the lock a vCPU
//! holds while it waits for a register access's reply (hw/vfio-user/proxy.c queues them for a
//! bottom half). A model that fetched a descriptor inside that access would wait for a reply that
//! cannot come until its own reply has gone. So while messages are in use the session thread is
//! "hands off" (`sim::datapath::set_hands_off`): an access reads and writes registers and makes
//! what it would have moved due now; this thread, woken after each command and at the engines'
//! next due time, moves it. Its DMA messages are answered once the vCPU has its reply; the
//! session thread meanwhile reads the socket and answers further accesses (`link.rs`), which the
//! sim models take without the locks a moving engine holds (their registers are atomics), or,
//! where a model's registers share a lock with its data path (the QDMA stream engine, the QDMA
//! interrupt rings), with a pass here that holds that lock across no DMA message (`sim::stage`).
//! This is the card's only mover then: the thread forwarding its interrupts waits and moves
//! nothing (`SimDevice::set_moved_by_clock`).
//! libvfio-user asks the same of its servers: no `vfu_sgl_read` inside a region callback.

use crate::access::sim::SimDevice;
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    /// The client has memory reached by message: this thread moves the card's data.
    active: bool,
    /// A command was handled since this thread last looked.
    kicked: bool,
    stop: bool,
}

#[derive(Default)]
pub struct ClockThread {
    state: Mutex<State>,
    wake: Condvar,
}

impl ClockThread {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the card moves data here (`true`) or where the host looks, as it does when all the
    /// client's memory is mapped (`false`).
    pub fn set_active(&self, on: bool) {
        let mut s = self.lock();
        s.active = on;
        s.kicked = on;
        self.wake.notify_all();
    }

    /// A command was handled (and answered, if it wanted an answer): bring the card to now.
    pub fn kick(&self) {
        let mut s = self.lock();
        if s.active {
            s.kicked = true;
            self.wake.notify_all();
        }
    }

    pub fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_all();
    }

    /// The thread's body, until `stop`.
    pub fn run(&self, dev: &SimDevice) {
        // Engines whose locks an access takes stage their I/O here (`sim::stage`).
        crate::sim::stage::set_clock_thread(true);
        // Wake at the modeled time, not up to the default 50 us of timer slack after it.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
        let mut s = self.lock();
        // The last look was for a due time and left the card due at once again (an engine that
        // cannot go on): the next waits a little, rather than spinning a CPU.
        let mut stuck = false;
        loop {
            if s.stop {
                return;
            }
            let mut due = if s.active { dev.due_in() } else { None };
            let now_due = due.is_some_and(|d| d.is_zero());
            if s.active && (s.kicked || (now_due && !stuck)) {
                stuck = !s.kicked;
                s.kicked = false;
                drop(s);
                dev.advance();
                s = self.lock();
                continue;
            }
            if now_due {
                due = Some(std::time::Duration::from_millis(1));
            }
            stuck = false;
            s = match due {
                Some(d) => self.wake.wait_timeout(s, d).unwrap_or_else(|e| e.into_inner()).0,
                None => self.wake.wait(s).unwrap_or_else(|e| e.into_inner()),
            };
            // A timed wait that ran out means something is due: the next turn sees it (due_in 0).
        }
    }
}
