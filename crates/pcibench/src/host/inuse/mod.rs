//! What the running system uses a PCI function for: the one inventory `setup`, `doctor` and every
//! command that would unbind, bind, reset or write to a device consult before touching it.
//!
//! It follows sysfs and the kernel's own links, never device-name patterns:
//! - `block`: block devices below the function, NVMe multipath heads of its controllers,
//!   partitions, everything stacked on them (`holders/`: device-mapper, LVM, LUKS, md RAID; loop
//!   devices backed by a file on one of their filesystems), and what each is used for: mounted
//!   (the root filesystem and /boot named as such), active swap;
//! - `net`: its network interfaces that are up, have addresses, are enslaved to a bond, bridge or
//!   team, or carry an upper device that is up;
//! - `console`: the boot VGA device, a framebuffer of it while fbcon is bound;
//! - `driver`: references the kernel counts on the drivers of the function and of the devices
//!   below it.
//!
//! Each holder says why in words a user understands ("it backs / (root filesystem) through
//! nvme0n1p2", "eth0 is up with 10.0.0.5/24") and what frees it. An inconsistent sysfs (a
//! symlink or holder loop, a dangling link) is an `Error::Sysfs` naming the link: every walk is
//! bounded and keeps a visited set, so the inventory never hangs and never guesses "unused".
//! For a bridge the inventory covers everything below it, each holder naming its function.

mod block;
mod console;
mod driver;
mod net;
mod walk;

use crate::host::Host;
use crate::{Error, Result};
use serde::Serialize;
use std::path::PathBuf;

/// What a holder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HolderKind {
    /// It backs the root filesystem.
    RootFs,
    /// It backs /boot or the EFI system partition.
    Boot,
    /// It backs another mounted filesystem.
    Mount,
    /// It backs active swap.
    Swap,
    /// Something is stacked on it and held open (LVM, dm-crypt, md RAID, a loop file).
    Stacked,
    /// A network interface that is up, addressed, enslaved or carrying an upper device.
    Net,
    /// The boot VGA device or the framebuffer console.
    Console,
    /// The kernel counts references on its driver.
    Driver,
}

/// One way the running system uses the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub kind: HolderKind,
    /// Why, in words: "it backs / (root filesystem) through nvme0n1p2".
    pub why: String,
    /// Commands or steps that free it, in order ("umount /data", "swapoff /dev/vdc").
    pub free: Vec<String>,
}

/// Everything the running system uses a device for; empty when it is free to take.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Inventory {
    pub device: String,
    pub holders: Vec<Holder>,
}

impl Inventory {
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }

    /// Every holder's reason, in order.
    pub fn reasons(&self) -> Vec<&str> {
        self.holders.iter().map(|h| h.why.as_str()).collect()
    }

    /// The reasons as one clause: "it backs / (root filesystem) through vda1; eth0 is up".
    pub fn summary(&self) -> String {
        self.reasons().join("; ")
    }

    /// Whether every use has steps that free it (the running root filesystem or the boot console
    /// have none: choose another device).
    pub fn can_be_freed(&self) -> bool {
        self.holders.iter().all(|h| !h.free.is_empty())
    }

    /// What frees it, each step once, in order.
    pub fn free_steps(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for s in self.holders.iter().flat_map(|h| h.free.iter()) {
            if !v.contains(s) {
                v.push(s.clone());
            }
        }
        v
    }
}

/// The function being inventoried.
pub(crate) struct Scope<'a> {
    pub host: &'a Host,
    /// Its name in sysfs (`0000:01:00.0`).
    pub addr: String,
    /// Its real directory under /sys/devices.
    pub dir: PathBuf,
}

/// The inventory of the PCI function `addr` (as sysfs names it, `0000:01:00.0`). A device that is
/// not there is `Error::NoDevice`; an inconsistent sysfs is `Error::Sysfs`.
pub fn inventory(host: &Host, addr: &str) -> Result<Inventory> {
    let link = host.pci_devices_dir().join(addr);
    let Some(dir) = walk::resolve(&link)? else {
        return Err(Error::NoDevice(addr.to_string()));
    };
    let scope = Scope { host, addr: addr.to_string(), dir };
    let read = |p: &str| std::fs::read_to_string(host.path(p)).unwrap_or_default();
    let mounts = block::parse_mountinfo(&read("/proc/self/mountinfo"));
    let blks = block::devices(&scope, &mounts)?;
    let mut holders = block::holders(&scope, &blks, &mounts, &read("/proc/swaps"));
    holders.extend(net::holders(&scope)?);
    holders.extend(console::holders(&scope)?);
    holders.extend(driver::holders(&scope)?);
    Ok(Inventory { device: addr.to_string(), holders })
}

#[cfg(test)]
mod tests;
