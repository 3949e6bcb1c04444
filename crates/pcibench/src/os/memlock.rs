//! RLIMIT_MEMLOCK: memory pinned for DMA (VFIO type1 pinning, mlock for no-IOMMU) counts against
//! it (drivers/vfio/vfio_iommu_type1.c vfio_lock_acct; mm/mlock.c), unless the process has
//! CAP_IPC_LOCK. Checked up front so the user gets the fix instead of a bare ENOMEM mid-run.

use crate::host::Host;
use crate::units::human_size;
use crate::{Error, Result};

/// The soft RLIMIT_MEMLOCK in bytes; None when unlimited.
pub fn limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Memlock).current
}

/// From /proc/self/status: (bytes already locked (VmLck), whether CAP_IPC_LOCK is effective).
pub fn status(host: &Host) -> (u64, bool) {
    let text =
        crate::file::read_string(&host.path("/proc/self/status"), crate::file::read::KERNEL_MAX).unwrap_or_default();
    parse_status(&text)
}

pub fn parse_status(text: &str) -> (u64, bool) {
    let mut locked = 0;
    let mut ipc_lock = false;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("VmLck:") {
            let kb = v.trim().trim_end_matches("kB").trim();
            locked = kb.parse::<u64>().unwrap_or(0) * 1024;
        } else if let Some(v) = line.strip_prefix("CapEff:") {
            // CAP_IPC_LOCK is capability 14 (include/uapi/linux/capability.h).
            ipc_lock = u64::from_str_radix(v.trim(), 16).map(|c| c & (1 << 14) != 0).unwrap_or(false);
        }
    }
    (locked, ipc_lock)
}

/// Whether `want` more bytes may be pinned; the error says how to raise the limit.
pub fn verdict(limit: Option<u64>, locked: u64, ipc_lock: bool, want: u64, what: &str) -> Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    if ipc_lock || locked.saturating_add(want) <= limit {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "{what} pins {} of memory but the locked-memory limit (RLIMIT_MEMLOCK) is {} with {} already locked: raise it with `ulimit -l unlimited` in the shell that runs pcibench, or a memlock line in /etc/security/limits.conf (e.g. `{} - memlock unlimited`, then log in again), or run as root",
        human_size(want),
        human_size(limit),
        human_size(locked),
        std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| "USER".into()),
    )))
}

/// Check that `want` bytes can be pinned by this process now.
pub fn check(host: &Host, want: u64, what: &str) -> Result<()> {
    let (locked, ipc_lock) = status(host);
    verdict(limit(), locked, ipc_lock, want, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let text = "Name:\tpcibench\nVmLck:\t    2048 kB\nCapEff:\t0000000000004000\n";
        assert_eq!(parse_status(text), (2 << 20, true));
        assert_eq!(parse_status("VmLck:\t0 kB\nCapEff:\t0000000000000000\n"), (0, false));
        assert_eq!(parse_status(""), (0, false));
    }

    /// The soft limit as /proc/self/limits prints it ("Max locked memory  8388608  8388608  bytes").
    #[test]
    fn limit_is_the_soft_rlimit() {
        let text = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = text.lines().find(|l| l.starts_with("Max locked memory")).unwrap();
        let soft = line["Max locked memory".len()..].split_whitespace().next().unwrap();
        assert_eq!(limit(), if soft == "unlimited" { None } else { Some(soft.parse().unwrap()) }, "{line}");
    }

    #[test]
    fn limit_decisions() {
        assert!(verdict(None, 0, false, 1 << 30, "x").is_ok());
        assert!(verdict(Some(8 << 20), 0, false, 8 << 20, "x").is_ok());
        assert!(verdict(Some(8 << 20), 0, true, 1 << 30, "x").is_ok(), "CAP_IPC_LOCK bypasses the limit");
        let e = verdict(Some(8 << 20), 4 << 20, false, 8 << 20, "a 8 MiB DMA buffer").unwrap_err().to_string();
        assert!(e.contains("ulimit -l unlimited") && e.contains("/etc/security/limits.conf"), "{e}");
        assert!(e.contains("8 MiB") && e.contains("4 MiB already locked") && e.contains("run as root"), "{e}");
        assert!(!e.contains('\n'));
    }
}
