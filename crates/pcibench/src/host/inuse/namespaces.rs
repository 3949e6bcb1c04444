//! The host's other network and mount namespaces, walked once per command (`Host::net_namespaces`,
//! `Host::mount_namespaces`) and only when an inventory needs them:
//! - network namespaces: every name under `/run/netns` and `/var/run/netns` (`ip netns add`'s bind
//!   mounts), every namespace file mounted anywhere else in this mount namespace or in any other
//!   (an `nsfs` line of a mountinfo, whose root is `net:[INODE]`, fs/nsfs.c nsfs_show_path: Docker
//!   keeps a container's under /run/docker/netns/), every process's `/proc/PID/ns/net`, and every
//!   descriptor a process holds on one (`/proc/PID/fd/N` linking to `net:[INODE]`), deduplicated by
//!   the namespace's inode; ours is left out (sysfs shows its interfaces). Each is looked into once
//!   (`Kernel::net_view`), by a name first (a bind mount outlives processes), then a mount, a
//!   process in it, a descriptor, up to `PATHS_KEPT` of each. What keeps a namespace alive and none
//!   of these show (a socket made in it, the kernel's own references) is not found: a function
//!   whose interfaces are in no namespace found is "could not check" (`netns`).
//! - mount namespaces: one process per distinct `/proc/PID/ns/mnt` inode, whose `mountinfo` names
//!   the filesystems mounted there (a container's volumes).
//!
//! Bounded: at most `MAX_NAMESPACES` of each; a process that exits while it is read is skipped; one
//! whose namespace cannot be read (another user's, not root) is counted as unchecked, never as
//! being in no other namespace.

use super::block::{parse_mountinfo, Mount};
use super::kernel::{NsError, NsView};
use super::nsfile::{ns_inode, ns_inode_of};
use super::walk::entries;
use crate::host::Host;
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// More namespaces than this are not read (each costs a thread and two netlink dumps).
pub(crate) const MAX_NAMESPACES: usize = 4096;
/// Processes kept per namespace to enter it by.
const PATHS_KEPT: usize = 4;

/// How a user finds a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NsName {
    /// `ip netns` lists it under this name.
    Named(String),
    /// Its file is mounted on this path here, outside /run/netns (Docker's /run/docker/netns/ID).
    Mounted(String),
    /// Its file is mounted on a path in the mount namespace of a process (PID, command, path),
    /// reached from here through /proc/PID/root.
    MountedIn(u32, String, String),
    /// Processes are in it: the first, with its command.
    Pid(u32, String),
    /// A process holds it open by a descriptor (PID, command, fd), and nothing else shows it.
    Fd(u32, String, u32),
}

impl NsName {
    /// `network namespace blue (ip netns)`, `the network namespace of PID 812 (sleep)`.
    pub fn words(&self, kind: &str) -> String {
        match self {
            NsName::Named(n) => format!("{kind} namespace {n} (ip netns)"),
            NsName::Mounted(p) => format!("the {kind} namespace mounted on {p}"),
            NsName::MountedIn(pid, c, p) => {
                format!("the {kind} namespace mounted on {p} in the mount namespace of PID {pid} ({c})")
            }
            NsName::Pid(p, c) => format!("the {kind} namespace of PID {p} ({c})"),
            NsName::Fd(pid, c, fd) => format!("the {kind} namespace PID {pid} ({c}) holds open as descriptor {fd}"),
        }
    }

    /// The command prefix that runs `ip` in it: `ip -n blue`, `nsenter -t 812 -n ip`,
    /// `nsenter --net=/run/docker/netns/1a2b ip` (nsenter opens the file and enters it).
    pub fn ip(&self) -> String {
        match self {
            NsName::Named(n) => format!("ip -n {n}"),
            NsName::Mounted(p) => format!("nsenter --net={} ip", shell_word(p)),
            NsName::MountedIn(pid, _, p) => format!("nsenter --net={} ip", shell_word(&format!("/proc/{pid}/root{p}"))),
            NsName::Pid(p, _) => format!("nsenter -t {p} -n ip"),
            NsName::Fd(pid, _, fd) => format!("nsenter --net=/proc/{pid}/fd/{fd} ip"),
        }
    }
}

/// A path as one word of a shell command: quoted when it holds anything but the plain characters.
fn shell_word(p: &str) -> String {
    if p.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-:@+=,".contains(&b)) {
        p.to_string()
    } else {
        format!("'{}'", p.replace('\'', "'\\''"))
    }
}

/// One other network namespace and what it showed.
#[derive(Debug)]
pub(crate) struct NetNs {
    pub name: NsName,
    pub view: Result<NsView, NsError>,
}

/// Every other network namespace of the host, and what kept some from being read.
#[derive(Debug, Default)]
pub(crate) struct NetScan {
    pub namespaces: Vec<NetNs>,
    /// In words: processes whose namespace could not be read, namespaces past the limit.
    pub unchecked: Vec<String>,
}

/// One other mount namespace, by one of its processes.
#[derive(Debug)]
pub(crate) struct MountNs {
    pub(super) pid: u32,
    pub(super) comm: String,
    pub(super) mounts: Vec<Mount>,
}

#[derive(Debug, Default)]
pub(crate) struct MountScan {
    pub namespaces: Vec<MountNs>,
    pub unchecked: Vec<String>,
}

fn comm(host: &Host, pid: u32) -> String {
    crate::host::state::read_trim(&host.path(format!("/proc/{pid}/comm")))
        .filter(|c| !c.is_empty())
        .map(|c| crate::text::one_line(&c))
        .unwrap_or_else(|| "?".into())
}

/// Each distinct namespace of `kind` (`net`, `mnt`) other than ours: its inode with up to
/// `PATHS_KEPT` PIDs in it, the PIDs whose namespace could not be read, and how many processes
/// were past `MAX_NAMESPACES`. From the command's one /proc scan (`Host::procs`).
fn by_inode(host: &Host, kind: &str) -> (BTreeMap<u64, Vec<u32>>, Vec<u32>, u64) {
    let own = ns_inode(host, &host.path(format!("/proc/self/ns/{kind}"))).unwrap_or(0);
    let scan = host.procs();
    let mut map: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut over = 0;
    for p in &scan.ns {
        let Some(i) = (if kind == "net" { p.net } else { p.mnt }) else { continue };
        if i == own {
            continue;
        }
        if !map.contains_key(&i) && map.len() >= MAX_NAMESPACES {
            over += 1;
            continue;
        }
        let v = map.entry(i).or_default();
        if v.len() < PATHS_KEPT {
            v.push(p.pid);
        }
    }
    (map, scan.ns_denied.clone(), over)
}

fn denied_words(denied: &[u32], kind: &str) -> Option<String> {
    if denied.is_empty() {
        return None;
    }
    let shown: Vec<String> = denied.iter().take(8).map(|p| p.to_string()).collect();
    let more = if denied.len() > 8 { format!(" and {} more", denied.len() - 8) } else { String::new() };
    Some(format!(
        "could not see the {kind} namespace of PID{} {}{more} (no permission: run it as root)",
        if denied.len() == 1 { "" } else { "s" },
        shown.join(", ")
    ))
}

/// The network namespace files mounted in `mounts` (nsfs lines whose root is `net:[INODE]`), as
/// (inode, mount point).
fn nsfs_mounts(mounts: &[Mount]) -> impl Iterator<Item = (u64, &str)> {
    mounts.iter().filter(|m| m.fstype == "nsfs" && m.root.starts_with("net:[")).filter_map(|m| {
        let i = ns_inode_of(&m.root)?;
        Some((i, m.point.as_str()))
    })
}

/// Whether `p` is where `ip netns` keeps its names (those are named by the directory's walk).
fn under_ip_netns(p: &str) -> bool {
    let p = Path::new(p);
    p.parent().is_some_and(|d| d == Path::new("/run/netns") || d == Path::new("/var/run/netns"))
}

/// The host's other network namespaces, each looked into (see the module's words).
pub(crate) fn net_scan(host: &Host) -> NetScan {
    let (by_pid, denied, over) = by_inode(host, "net");
    let own = ns_inode(host, &host.path("/proc/self/ns/net")).unwrap_or(0);
    let mut scan = NetScan::default();
    scan.unchecked.extend(denied_words(&denied, "network"));
    // Every way into each namespace, by inode, in the order they are tried.
    let mut ways: BTreeMap<u64, Vec<(NsName, PathBuf)>> = BTreeMap::new();
    let add = |ways: &mut BTreeMap<u64, Vec<(NsName, PathBuf)>>, inode: u64, name: NsName, p: PathBuf| {
        if inode == own {
            return;
        }
        let v = ways.entry(inode).or_default();
        let same_kind = v.iter().filter(|(n, _)| std::mem::discriminant(n) == std::mem::discriminant(&name)).count();
        if same_kind < PATHS_KEPT && !v.iter().any(|(n, _)| *n == name) {
            v.push((name, p));
        }
    };
    // Named ones: ip netns add's bind mounts.
    for dir in ["/run/netns", "/var/run/netns"] {
        let Ok(list) = entries(&host.path(dir)) else { continue };
        for (name, p) in list {
            // An empty file: `ip netns add` failed half-way, or the mount went. Not a namespace.
            if let Ok(i) = ns_inode(host, &p) {
                add(&mut ways, i, NsName::Named(crate::text::one_line(&name)), p);
            }
        }
    }
    // Namespace files mounted anywhere else here, then in every other mount namespace.
    let read = crate::file::read_string(&host.path("/proc/self/mountinfo"), super::procs::PROC_TABLE_MAX);
    let here = parse_mountinfo(&read.unwrap_or_default());
    for (i, point) in nsfs_mounts(&here).filter(|(_, p)| !under_ip_netns(p)) {
        add(&mut ways, i, NsName::Mounted(crate::text::one_line(point)), host.path(point));
    }
    let mntns = host.mount_namespaces();
    scan.unchecked.extend(mntns.unchecked.iter().cloned());
    for ns in &mntns.namespaces {
        for (i, point) in nsfs_mounts(&ns.mounts) {
            let via = host.path(format!("/proc/{}/root{point}", ns.pid));
            add(&mut ways, i, NsName::MountedIn(ns.pid, ns.comm.clone(), crate::text::one_line(point)), via);
        }
    }
    for (inode, pids) in &by_pid {
        for pid in pids {
            add(&mut ways, *inode, NsName::Pid(*pid, comm(host, *pid)), host.path(format!("/proc/{pid}/ns/net")));
        }
    }
    for f in &host.procs().ns_fds {
        let p = host.path(format!("/proc/{}/fd/{}", f.pid, f.fd));
        add(&mut ways, f.inode, NsName::Fd(f.pid, comm(host, f.pid), f.fd), p);
    }
    let kernel = host.kernel();
    for (inode, tries) in ways {
        if scan.namespaces.len() >= MAX_NAMESPACES {
            scan.unchecked.push(format!("more than {MAX_NAMESPACES} network namespaces: the rest were not read"));
            break;
        }
        let mut found = None;
        let mut last = Err(NsError::Gone);
        for (name, p) in tries {
            last = kernel.net_view(host, &p, inode);
            if !matches!(last, Err(NsError::Gone)) {
                found = Some(name);
                break;
            }
        }
        // Every way in went away: its processes exited and no name keeps it; what was in it has
        // gone back to the initial namespace (net/core/net_namespace.c, default_device_exit_net).
        let Some(name) = found else { continue };
        scan.namespaces.push(NetNs { name, view: last });
    }
    if over > 0 {
        scan.unchecked
            .push(format!("{over} processes are in network namespaces past the first {MAX_NAMESPACES}: not read"));
    }
    scan
}

/// The host's other mount namespaces with their mounts (see the module's words).
pub(crate) fn mount_scan(host: &Host) -> MountScan {
    let (by_pid, denied, over) = by_inode(host, "mnt");
    let mut scan = MountScan::default();
    scan.unchecked.extend(denied_words(&denied, "mount"));
    for pids in by_pid.values() {
        let mut got = None;
        let mut refused = None;
        for pid in pids {
            match crate::file::read_string(&host.path(format!("/proc/{pid}/mountinfo")), super::procs::PROC_TABLE_MAX) {
                Ok(t) => {
                    got = Some((*pid, t));
                    break;
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => refused = Some(format!("could not read the mounts of PID {pid} ({e})")),
            }
        }
        match (got, refused) {
            (Some((pid, t)), _) => {
                scan.namespaces.push(MountNs { pid, comm: comm(host, pid), mounts: parse_mountinfo(&t) })
            }
            (None, Some(w)) => scan.unchecked.push(w),
            (None, None) => {}
        }
    }
    if over > 0 {
        scan.unchecked
            .push(format!("{over} processes are in mount namespaces past the first {MAX_NAMESPACES}: not read"));
    }
    scan
}
