//! The SIGBUS half of the MMIO fault guard (`access::guard` holds the BAR registry). A load from a
//! mapping whose backing went away raises SIGBUS: vfio-pci's fault handler answers VM_FAULT_SIGBUS
//! once the device's Memory Space Enable is off or a reset is under way
//! (drivers/vfio/pci/vfio_pci_core.c, vfio_pci_mmap_fault: `if (!__vfio_pci_memory_enabled(vdev))`),
//! and a sysfs resource mapping zapped by revoke_iomem refaults into nothing. The default action
//! ends the process (exit 135) with no word of why; instead the handler asks the registry whether
//! the address is a BAR's, and if so puts memory that reads all-ones (what a read of a function
//! that is not there completes with, PCI Local Bus 3.0 §6.2.1) under the faulting page and returns:
//! the load runs again and reads 0xFF bytes, and the run's card-gone checks take it from there.
//!
//! Everything the handler runs is async-signal-safe: atomics, mmap(2), a fill of one page, and
//! sigaction(2)/raise(3) for the default action. No allocation, no lock.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// What the registry answers for a faulting address: `None` when it is none of its mappings;
/// otherwise it records the mapping as gone and runs the remedy on it (`ones_under`), holding the
/// mapping registered (and so mapped) until the remedy returns, and answers what the remedy did.
pub type Lookup = fn(usize, Remedy) -> Option<bool>;

/// What the handler does to a mapping that faulted: true when the faulting load may run again.
pub type Remedy = fn(Hit, usize) -> bool;

/// A fault inside a registered mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// The whole mapping: its first byte and length.
    pub start: usize,
    pub len: usize,
    /// This fault is the mapping's first (the registry saw it live until now).
    pub first: bool,
}

static LOOKUP: AtomicUsize = AtomicUsize::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// An empty memfd, made at install time (memfd_create is no async-signal-safe call to make in
/// the handler): a whole gone mapping is remapped onto it, so every page of it faults once more
/// and gets its all-ones page on demand instead of all of a large BAR being filled at once.
static EMPTY: AtomicI32 = AtomicI32::new(-1);

/// Install the SIGBUS handler that consults `lookup`. Idempotent; the last lookup wins.
pub fn install(lookup: Lookup) -> std::io::Result<()> {
    PAGE.store(super::mmap::page_size(), Ordering::SeqCst);
    if EMPTY.load(Ordering::SeqCst) < 0 {
        // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned by EMPTY for
        // the life of the process.
        let fd = unsafe { libc::memfd_create(c"pcibench-gone".as_ptr(), libc::MFD_CLOEXEC) };
        // Without memfd (kernels before 3.17) each faulting page is replaced where it is.
        EMPTY.store(fd, Ordering::SeqCst);
    }
    LOOKUP.store(lookup as usize, Ordering::SeqCst);
    // SAFETY: a sigaction struct zeroed and filled before the call; the handler is an
    // `extern "C"` function with the SA_SIGINFO signature.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

extern "C" fn on_sigbus(_sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let lookup = LOOKUP.load(Ordering::SeqCst);
    // si_code > 0: raised by the kernel for a fault (BUS_ADRERR and kin), not sent by kill(2).
    if code > 0 && lookup != 0 {
        // SAFETY: LOOKUP only ever holds a `Lookup` stored by `install`.
        let lookup: Lookup = unsafe { std::mem::transmute::<usize, Lookup>(lookup) };
        if lookup(addr, ones_under) == Some(true) {
            return;
        }
    }
    // None of ours (or the remap failed): the default action, as if no handler were installed.
    // SAFETY: signal(2) and raise(3) are async-signal-safe; SIGBUS stays blocked until the
    // handler returns, so the raised one is delivered with the default action right after.
    unsafe {
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
        libc::raise(libc::SIGBUS);
    }
}

/// Put an all-ones page under `addr`, inside the mapping `hit`; on a mapping's first fault the
/// whole of it is first remapped onto the empty memfd, so that every other page of it faults into
/// here as well rather than reaching the card (or a card that came back) through the old mapping.
/// Two threads faulting at once converge: a page wiped by the other's remap faults again.
/// Runs inside the registry's `lookup`, which keeps the mapping from being unregistered (and so
/// unmapped, and its range reused) until this returns. Async-signal-safe. False when a mapping
/// call failed.
fn ones_under(hit: Hit, addr: usize) -> bool {
    let Hit { start, len, first } = hit;
    let page = PAGE.load(Ordering::Relaxed);
    let end = (start + len).next_multiple_of(page);
    let empty = EMPTY.load(Ordering::Relaxed);
    // SAFETY: the range is a live BAR mapping the registry holds while this runs (unregistering
    // waits for it, and comes before the unmap);
    // MAP_FIXED replaces its pages in place, and nothing in Rust holds a reference into device
    // memory (all BAR access is volatile loads and stores through raw pointers).
    unsafe {
        if first && empty >= 0 {
            let p = libc::mmap(
                start as *mut c_void,
                end - start,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                empty,
                0,
            );
            if p as usize != start {
                return false;
            }
        }
        let at = addr & !(page - 1);
        let p = libc::mmap(
            at as *mut c_void,
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        );
        if p as usize != at {
            return false;
        }
        std::ptr::write_bytes(at as *mut u8, 0xff, page);
    }
    true
}
