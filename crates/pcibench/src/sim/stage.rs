//! Staged host I/O: an engine that moves data on `pcibench serve`'s clock thread while the client's
//! memory is reached by DMA_READ/DMA_WRITE message (lab/findings.md 15) runs its logic under its
//! locks against host memory fetched beforehand, and its writes and interrupt messages are kept,
//! in order, and sent once those locks are released. QEMU answers a DMA message only while no
//! vCPU waits on the device; a register access that waited on a lock held across such a message
//! would keep the vCPU waiting, and the message unanswered, for good.
//!
//! The order kept is PCIe's (PCIe Base 6.0 §2.4.1, posted requests do not pass posted requests):
//! an MSI-X message is a posted write, so it goes after the writes before it, and a driver that
//! takes the interrupt sees the data and status those writes carried.

use std::cell::{Cell, RefCell};

/// What a staged pass left to do, in the order it did it.
#[derive(Debug, PartialEq)]
pub(crate) enum Op {
    Write(u64, Vec<u8>),
    /// A 32-bit word stored with release ordering (`HostMap::store_u32_release`).
    Store32(u64, u32),
    /// An interrupt message on `vector`, with what raised it (for a violation's words).
    Message(u32, String),
}

#[derive(Default)]
struct Stage {
    /// Host memory read before the pass: (bus address, bytes).
    fetched: Vec<(u64, Vec<u8>)>,
    out: Vec<Op>,
}

impl Stage {
    fn find(&self, bus: u64, len: usize) -> Option<&[u8]> {
        self.fetched.iter().find_map(|(at, bytes)| {
            let from = bus.checked_sub(*at)? as usize;
            bytes.get(from..from.checked_add(len)?)
        })
    }
}

thread_local! {
    static STAGE: RefCell<Option<Stage>> = const { RefCell::new(None) };
    static CLOCK: Cell<bool> = const { Cell::new(false) };
    static PASSES: Cell<u64> = const { Cell::new(0) };
    static AFTERWARDS: RefCell<Vec<Op>> = const { RefCell::new(Vec::new()) };
}

/// Staged passes this thread began (for tests that mean to exercise them).
#[cfg(test)]
pub(crate) fn passes() -> u64 {
    PASSES.with(|p| p.get())
}

/// Mark this thread as serve's clock thread (`access::vfio_user::clock`): engines that stage
/// their I/O do so here.
pub fn set_clock_thread(on: bool) {
    CLOCK.with(|c| c.set(on));
}

/// Whether this is serve's clock thread.
pub fn clock_thread() -> bool {
    CLOCK.with(|c| c.get())
}

/// Stage this thread's host I/O from now, with `fetched` read beforehand.
pub(crate) fn begin(fetched: Vec<(u64, Vec<u8>)>) {
    PASSES.with(|p| p.set(p.get() + 1));
    STAGE.with(|s| *s.borrow_mut() = Some(Stage { fetched, out: Vec::new() }));
}

/// Stop staging: what the pass left to do, in order.
pub(crate) fn end() -> Vec<Op> {
    STAGE.with(|s| s.borrow_mut().take().map(|s| s.out).unwrap_or_default())
}

/// Keep what a staged pass left to do until the look it ran in is over (`take_afterwards`): a
/// pass run under its caller's locks (an interrupt ring entry raised while a queue's lock is held)
/// must not send while they are held either.
pub(crate) fn afterwards(ops: Vec<Op>) {
    AFTERWARDS.with(|a| a.borrow_mut().extend(ops));
}

/// What `afterwards` kept, in order, to be sent now that no lock is held.
pub(crate) fn take_afterwards() -> Vec<Op> {
    AFTERWARDS.with(|a| std::mem::take(&mut *a.borrow_mut()))
}

/// Whether this thread stages its host I/O.
pub(crate) fn staging() -> bool {
    STAGE.with(|s| s.borrow().is_some())
}

/// Whether host memory at `bus` is at hand: always when not staging, else when fetched.
pub(crate) fn at_hand(bus: u64, len: usize) -> bool {
    STAGE.with(|s| s.borrow().as_ref().is_none_or(|s| s.find(bus, len).is_some()))
}

/// Staging and fetched: `out` filled from it (true). Not fetched, or not staging: false.
pub(crate) fn read(bus: u64, out: &mut [u8]) -> bool {
    STAGE.with(|s| match s.borrow().as_ref().and_then(|s| s.find(bus, out.len())) {
        Some(b) => {
            out.copy_from_slice(b);
            true
        }
        None => false,
    })
}

/// Staging: `op` kept for after the pass (true); not staging: false.
pub(crate) fn keep(op: impl FnOnce() -> Op) -> bool {
    STAGE.with(|s| match s.borrow_mut().as_mut() {
        Some(s) => {
            s.out.push(op());
            true
        }
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_pass_reads_what_was_fetched_and_keeps_its_writes_in_order() {
        assert!(!keep(|| Op::Store32(0, 1)), "nothing kept when not staging");
        assert!(at_hand(0x5000, 64), "everything is at hand when not staging");
        begin(vec![(0x1000, (0..32).collect())]);
        let mut b = [0u8; 4];
        assert!(read(0x1004, &mut b));
        assert_eq!(b, [4, 5, 6, 7]);
        assert!(!read(0x101e, &mut b), "a read past what was fetched");
        assert!(at_hand(0x1000, 32) && !at_hand(0x0fff, 2) && !at_hand(0x2000, 1));
        assert!(keep(|| Op::Write(0x2000, vec![1, 2])));
        assert!(keep(|| Op::Store32(0x2010, 9)));
        assert!(keep(|| Op::Message(3, "queue 0".into())));
        assert_eq!(end(), [Op::Write(0x2000, vec![1, 2]), Op::Store32(0x2010, 9), Op::Message(3, "queue 0".into())]);
        assert!(!staging() && end().is_empty());
        // A pass under its caller's locks: kept until the look is over, then taken once.
        begin(Vec::new());
        assert!(keep(|| Op::Store32(0x3000, 1)));
        afterwards(end());
        afterwards(vec![Op::Message(0, "ring 0".into())]);
        assert_eq!(take_afterwards(), [Op::Store32(0x3000, 1), Op::Message(0, "ring 0".into())]);
        assert!(take_afterwards().is_empty());
    }
}
