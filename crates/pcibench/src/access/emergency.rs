//! The last thing a forced exit does (a second signal: `_exit(130)` without unwinding): clear Bus
//! Master through the config-space descriptor saved when it was enabled. The kernel tears the
//! address space down before it closes the VFIO device (exit_mm runs before exit_files in
//! kernel/exit.c, do_exit), so a no-IOMMU transfer still in flight could otherwise land in pages
//! already freed. Only atomics and one pwrite(2) run here: both async-signal-safe. SIGKILL cannot
//! be caught, and leaves the card as it was.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

static FD: AtomicI32 = AtomicI32::new(-1);
static AT: AtomicU64 = AtomicU64::new(0);
static COMMAND: AtomicU32 = AtomicU32::new(0);

/// Remember where the command register is (`fd`, `at`: the config region's file offset) and the
/// value that turns Bus Master off again (`command`).
pub fn arm(fd: RawFd, at: u64, command: u16) {
    AT.store(at, Ordering::SeqCst);
    COMMAND.store(command as u32, Ordering::SeqCst);
    FD.store(fd, Ordering::SeqCst);
}

/// Bus Master is off again by the ordinary path: nothing to do on a forced exit.
pub fn disarm() {
    FD.store(-1, Ordering::SeqCst);
}

/// Write the saved command register (Bus Master off) when armed; true when a write was made.
/// Async-signal-safe: call it from a signal handler right before `_exit`.
pub fn clear_bus_master() -> bool {
    let fd = FD.swap(-1, Ordering::SeqCst);
    if fd < 0 {
        return false;
    }
    let value = (COMMAND.load(Ordering::SeqCst) as u16).to_le_bytes();
    let at = AT.load(Ordering::SeqCst) + crate::pci::config::COMMAND as u64;
    // SAFETY: pwrite(2) of two bytes from a stack buffer to a descriptor; async-signal-safe.
    unsafe { libc::pwrite(fd, value.as_ptr().cast(), 2, at as libc::off_t) == 2 }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    /// L1 (issue 36): armed, the forced exit writes the saved command register at the config
    /// region's offset; disarmed (Bus Master restored the ordinary way) it writes nothing.
    #[test]
    fn a_forced_exit_writes_the_saved_command_register() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(0x2000).unwrap();
        super::arm(f.as_raw_fd(), 0x1000, 0x0002);
        assert!(super::clear_bus_master());
        let mut b = [0u8; 2];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, 0x1000 + crate::pci::config::COMMAND as u64).unwrap();
        assert_eq!(u16::from_le_bytes(b), 0x0002);
        assert!(!super::clear_bus_master(), "once only");
        super::arm(f.as_raw_fd(), 0, 0x0006);
        super::disarm();
        assert!(!super::clear_bus_master());
    }
}
