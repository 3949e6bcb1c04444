//! Where the host's kernel interfaces live. Everything pcibench reads from /sys, /proc, /dev
//! and /boot goes through `Host`, so tests point it at a fixture tree instead of the real root.
//! `state` reads kernel state (drivers, IOMMU groups and mode, modules, lockdown, the kernel's
//! command line and configuration); `inuse` finds what the running system uses a device for.
//! A `Host` is made once per command; it keeps what is costly to read and the same for every device
//! (the /proc scan of open files), so a command reads it once however many devices it asks about.

pub mod inuse;
pub mod iomem;
pub mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Environment variable naming a directory that stands in for `/` (tests and fixtures).
pub const SYSROOT_ENV: &str = "PCIBENCH_SYSROOT";

#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
    /// Every process's open files and mappings, read on first use (`inuse::procs`); clones share it.
    procs: Arc<OnceLock<Arc<inuse::procs::ProcScan>>>,
}

impl Default for Host {
    fn default() -> Self {
        Host::from_env()
    }
}

impl Host {
    /// The real host, unless `PCIBENCH_SYSROOT` names a fixture root.
    pub fn from_env() -> Self {
        match std::env::var_os(SYSROOT_ENV) {
            Some(r) if !r.is_empty() => Host::with_root(PathBuf::from(r)),
            _ => Host::with_root(PathBuf::from("/")),
        }
    }

    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Host { root: root.into(), procs: Arc::default() }
    }

    /// The /proc scan of this command: taken on first use, then the same for every device.
    pub(crate) fn procs(&self) -> Arc<inuse::procs::ProcScan> {
        self.procs.get_or_init(|| Arc::new(inuse::procs::scan(self))).clone()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Join an absolute host path (`/sys/...`) onto the root.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let p = abs.as_ref();
        self.root.join(p.strip_prefix("/").unwrap_or(p))
    }

    pub fn pci_devices_dir(&self) -> PathBuf {
        self.path("/sys/bus/pci/devices")
    }
}
