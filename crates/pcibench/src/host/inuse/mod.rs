//! What the running system uses a PCI function for: the one inventory `setup`, `doctor` and every
//! command that would unbind, bind, reset or write to a device consult before touching it.
//!
//! It follows sysfs and the kernel's own links, never device-name patterns:
//! - `block`: block devices below the function, NVMe multipath heads of its controllers,
//!   partitions, everything stacked on them (`holders/`: device-mapper, LVM, LUKS, md RAID; loop
//!   devices backed by one of them or by a file on one of their filesystems), and what each is used for: mounted
//!   (the root filesystem and /boot named as such), active swap;
//! - `kusers`: in-kernel users that hold its devices without an exclusive claim, or whose claim
//!   should be named (nvmet, LIO, zram, bcache, rnbd, xen-blkback, pktcdvd, ocfs2's heartbeat);
//! - `net`: its network interfaces that are up, have addresses, are enslaved to a bond, bridge or
//!   team, or carry an upper device that is up;
//! - `console`: the boot VGA device, a framebuffer of it while fbcon is bound;
//! - `driver`: references the kernel counts on the drivers of the function and of the devices
//!   below it;
//! - `open`: processes holding any of its nodes open or mapped (its block devices and what is stacked
//!   on them, its class devices' nodes, its VFIO group node, its sysfs resource and config files),
//!   by device number and inode from the command's one /proc scan (`procs`); processes that could
//!   not be checked are kept apart (`Inventory::unchecked`), never taken as holding nothing;
//! - `sriov`: the virtual functions of a physical function that are bound to a driver or in use.
//!
//! Each holder says why in words a user understands ("it backs / (root filesystem) through
//! nvme0n1p2", "eth0 is up with 10.0.0.5/24") and what frees it. An inconsistent sysfs (a
//! symlink or holder loop, a dangling link) is an `Error::Sysfs` naming the link: every walk is
//! bounded and keeps a visited set, so the inventory never hangs and never guesses "unused".
//! For a bridge the inventory covers everything below it, each holder naming its function.

mod block;
mod console;
mod driver;
mod exclusive;
pub mod kernel;
mod kusers;
pub(crate) mod namespaces;
mod net;
mod netlink;
mod netns;
pub(crate) mod nsfile;
mod open;
pub(crate) mod procs;
mod sriov;
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
    /// A process holds one of its nodes open or mapped.
    Open,
    /// One of its SR-IOV virtual functions is bound to a driver or in use.
    Sriov,
    /// The kernel says one of its block devices is held exclusively, and not by whom (a mount in a
    /// namespace pcibench could not read, a storage target export).
    Exclusive,
    /// An in-kernel user holds it: a storage target's export (nvmet, LIO), zram's backing device,
    /// bcache, a Xen backend ... (`kusers`).
    Kernel,
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

/// Processes whose open files could not be read, so the inventory cannot say they hold nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unchecked {
    /// Each reason with the PIDs it kept from being checked (the first `PIDS_KEPT`) and how many in all.
    pub reasons: Vec<UncheckedReason>,
    /// Processes not even listed (/proc mounted hidepid=2), in words.
    pub unseen: Vec<String>,
    /// What else could not be looked at for this device, in words: a block device the kernel could
    /// not be asked about (no permission, no node), a network namespace that could not be entered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UncheckedReason {
    /// "no permission to read their open files: run it as root".
    pub why: String,
    pub pids: Vec<u32>,
    pub count: usize,
}

/// What replaces the "run it as root" hint when pcibench already runs as root.
const AS_ROOT: &str = ", even as root (a container, user namespace or security module denies it)";

/// PIDs kept per reason; the rest are counted.
const PIDS_KEPT: usize = 64;
/// PIDs named per reason in words.
const PIDS_SHOWN: usize = 8;

impl Unchecked {
    pub fn is_empty(&self) -> bool {
        self.reasons.is_empty() && self.unseen.is_empty() && self.skipped.is_empty()
    }

    pub(crate) fn add(&mut self, pid: u32, why: &str) {
        let r = match self.reasons.iter_mut().position(|r| r.why == why) {
            Some(i) => &mut self.reasons[i],
            None => {
                self.reasons.push(UncheckedReason { why: why.to_string(), ..Default::default() });
                self.reasons.last_mut().expect("just pushed")
            }
        };
        r.count += 1;
        if r.pids.len() < PIDS_KEPT {
            r.pids.push(pid);
        }
    }

    /// What root was denied all the same (a container, a user namespace, a security module: EPERM
    /// on /proc/1 even as root) says so, never "run it as root" (issue 43).
    pub(crate) fn as_root(&mut self) {
        let texts = self.reasons.iter_mut().map(|r| &mut r.why).chain(&mut self.unseen).chain(&mut self.skipped);
        for t in texts {
            *t = t.replace(": run it as root to check them", AS_ROOT).replace(": run it as root", AS_ROOT);
        }
    }

    /// "could not check PIDs 1, 17 and 12 more (no permission to read their open files: run it as root)".
    pub fn words(&self) -> String {
        let mut parts: Vec<String> = self
            .reasons
            .iter()
            .map(|r| {
                let mut pids = r.pids.clone();
                pids.sort_unstable();
                let shown: Vec<String> = pids.iter().take(PIDS_SHOWN).map(|p| p.to_string()).collect();
                let rest = r.count - shown.len();
                let more = if rest > 0 { format!(" and {rest} more") } else { String::new() };
                let s = if r.count == 1 { "" } else { "s" };
                format!("could not check PID{s} {}{more} ({})", shown.join(", "), r.why)
            })
            .collect();
        parts.extend(self.unseen.iter().cloned());
        parts.extend(self.skipped.iter().cloned());
        parts.join("; ")
    }
}

/// Everything the running system uses a device for; empty when it is free to take.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Inventory {
    pub device: String,
    pub holders: Vec<Holder>,
    /// Processes that could not be checked for open files of it (the same for every device of a
    /// command): not holders, but no proof it is free either.
    pub unchecked: Unchecked,
}

impl Inventory {
    /// No holder found (processes that could not be checked aside: see `unchecked`).
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

    /// What frees it, each step once, in order: what uses a filesystem (a swap file, a loop file, a
    /// storage target's file, a process) before the filesystem's unmount, and nested mounts before
    /// what they sit on (mountinfo lists a mount after the one below it).
    pub fn free_steps(&self) -> Vec<String> {
        let is_mount = |h: &&Holder| matches!(h.kind, HolderKind::RootFs | HolderKind::Boot | HolderKind::Mount);
        let users = self.holders.iter().filter(|h| !is_mount(h));
        let mounts = self.holders.iter().filter(is_mount).rev();
        let mut v: Vec<String> = Vec::new();
        for s in users.chain(mounts).flat_map(|h| h.free.iter()) {
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
/// not there is `Error::NoDevice`; an inconsistent sysfs is `Error::Sysfs`. The processes' open
/// files come from the command's one /proc scan (`Host::procs`).
pub fn inventory(host: &Host, addr: &str) -> Result<Inventory> {
    inventory_in(host, addr, &host.procs(), true)
}

/// The inventory against a given /proc scan; `sriov`: follow the function's virtual functions.
pub(crate) fn inventory_in(host: &Host, addr: &str, scan: &procs::ProcScan, sriov: bool) -> Result<Inventory> {
    let link = host.pci_devices_dir().join(addr);
    let Some(dir) = walk::resolve(&link)? else {
        return Err(Error::NoDevice(addr.to_string()));
    };
    let scope = Scope { host, addr: addr.to_string(), dir };
    let read = |p: &str| crate::file::read_string(&host.path(p), procs::PROC_TABLE_MAX).unwrap_or_default();
    let mounts = block::parse_mountinfo(&read("/proc/self/mountinfo"));
    let blks = block::devices(&scope, &mounts)?;
    let mut unchecked = scan.unchecked.clone();
    let (mut holders, mut used) = block::holders(&scope, &blks, &mounts, &read("/proc/swaps"));
    let users = kusers::holders(&scope, &blks, &mounts);
    holders.extend(users.holders);
    unchecked.skipped.extend(users.unchecked);
    for i in users.used {
        used[i] = true;
    }
    let excl = exclusive::holders(&scope, &blks, &used, scan);
    holders.extend(excl.holders);
    unchecked.skipped.extend(excl.unchecked);
    holders.extend(net::holders(&scope)?);
    let (elsewhere, not_looked) = netns::holders(&scope)?;
    holders.extend(elsewhere);
    unchecked.skipped.extend(not_looked);
    holders.extend(console::holders(&scope)?);
    holders.extend(open::holders(&scope, &blks, scan)?);
    if sriov {
        holders.extend(sriov::holders(&scope, scan)?);
    }
    // The module-reference count only as a last resort: it cannot tell which device a reference is
    // for, so it speaks only when nothing else was found.
    if holders.is_empty() {
        holders.extend(driver::holders(&scope)?);
    }
    if scan.privileged {
        unchecked.as_root();
    }
    Ok(Inventory { device: addr.to_string(), holders, unchecked })
}

/// Who, other than this process, holds a VFIO group node open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupUsers {
    /// The node as the kernel names it: /dev/vfio/7, /dev/vfio/noiommu-0.
    pub node: String,
    /// "PID 258 (qemu-system-x86)", one per process.
    pub who: Vec<String>,
    /// With how: "PID 258 (qemu-system-x86) for reading and writing".
    pub how: Vec<String>,
    /// Processes that could not be checked.
    pub unchecked: Unchecked,
}

/// The processes holding the VFIO group node of the PCI function `addr` open, by the node's device
/// number (the vfio class device's `dev`, else the node's): None when it has no group node (not
/// bound to vfio-pci).
pub fn vfio_group_users(host: &Host, addr: &str) -> Option<GroupUsers> {
    let dir = host.pci_devices_dir().join(addr);
    let (id, node) = open::vfio_group_node(host, &dir)?;
    let mut nodes = open::Nodes::default();
    let name = node.rsplit('/').next().unwrap_or_default().to_string();
    nodes.add(Some(id), None, name, String::new());
    let scan = host.procs();
    let holds = open::holds(host, &nodes, &scan);
    Some(GroupUsers {
        node,
        who: holds.iter().map(|h| h.who()).collect(),
        how: holds.iter().map(|h| format!("{}{}", h.who(), h.access())).collect(),
        unchecked: scan.unchecked.clone(),
    })
}

#[cfg(test)]
mod kusers_tests;
#[cfg(test)]
mod ns_tests;
#[cfg(test)]
mod open_tests;
#[cfg(test)]
mod tests;
