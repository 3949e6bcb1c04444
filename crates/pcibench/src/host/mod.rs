//! Where the host's kernel interfaces live. Everything pcibench reads from /sys, /proc, /dev
//! and /boot goes through `Host`, so tests point it at a fixture tree instead of the real root.
//! `state` reads kernel state (drivers, IOMMU groups and mode, modules, lockdown, the kernel's
//! command line and configuration); `inuse` finds what the running system uses a device for.

pub mod inuse;
pub mod iomem;
pub mod state;

use std::path::{Path, PathBuf};

/// Environment variable naming a directory that stands in for `/` (tests and fixtures).
pub const SYSROOT_ENV: &str = "PCIBENCH_SYSROOT";

#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

impl Default for Host {
    fn default() -> Self {
        Host::from_env()
    }
}

impl Host {
    /// The real host, unless `PCIBENCH_SYSROOT` names a fixture root. A process with more
    /// privilege than its caller never takes it (the CLI refuses it in one line before this).
    pub fn from_env() -> Self {
        if crate::os::privilege::elevated() {
            return Host::with_root(PathBuf::from("/"));
        }
        match std::env::var_os(SYSROOT_ENV) {
            Some(r) if !r.is_empty() => Host::with_root(PathBuf::from(r)),
            _ => Host::with_root(PathBuf::from("/")),
        }
    }

    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Host { root: root.into() }
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
