//! The host's other network and mount namespaces, walked once per command (`Host::net_namespaces`,
//! `Host::mount_namespaces`) and only when an inventory needs them:
//! - network namespaces: every process's `/proc/PID/ns/net` and every name under `/run/netns` and
//!   `/var/run/netns` (`ip netns add`'s bind mounts), deduplicated by the namespace's inode; ours is
//!   left out (sysfs shows its interfaces). Each is looked into once (`Kernel::net_view`), by a name
//!   first (a bind mount outlives processes), then by up to `PATHS_KEPT` of its processes.
//! - mount namespaces: one process per distinct `/proc/PID/ns/mnt` inode, whose `mountinfo` names
//!   the filesystems mounted there (a container's volumes).
//!
//! Bounded: at most `MAX_NAMESPACES` of each; a process that exits while it is read is skipped; one
//! whose namespace cannot be read (another user's, not root) is counted as unchecked, never as
//! being in no other namespace.

use super::block::{parse_mountinfo, Mount};
use super::kernel::{ns_inode_of, NsError, NsView};
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
    /// Only processes are in it: the first, with its command.
    Pid(u32, String),
}

impl NsName {
    /// `network namespace blue (ip netns)`, `the network namespace of PID 812 (sleep)`.
    pub fn words(&self, kind: &str) -> String {
        match self {
            NsName::Named(n) => format!("{kind} namespace {n} (ip netns)"),
            NsName::Pid(p, c) => format!("the {kind} namespace of PID {p} ({c})"),
        }
    }

    /// The command prefix that runs `ip` in it: `ip -n blue`, `nsenter -t 812 -n ip`.
    pub fn ip(&self) -> String {
        match self {
            NsName::Named(n) => format!("ip -n {n}"),
            NsName::Pid(p, _) => format!("nsenter -t {p} -n ip"),
        }
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

/// The inode of namespace file `p` (a /proc/PID/ns link, or a bind mount under /run/netns). The real
/// host: the link's text, else the file's own inode (nsfs). A fixture: its link's text or first line.
pub(crate) fn ns_inode(host: &Host, p: &Path) -> std::io::Result<u64> {
    let bad = || std::io::Error::new(ErrorKind::InvalidData, format!("{} is not a namespace", p.display()));
    match std::fs::read_link(p) {
        Ok(t) => return ns_inode_of(&t.to_string_lossy()).ok_or_else(bad),
        Err(e) if e.raw_os_error() != Some(rustix::io::Errno::INVAL.raw_os_error()) => return Err(e),
        Err(_) => {}
    }
    if host.is_real() {
        let st = rustix::fs::statx(rustix::fs::CWD, p, rustix::fs::AtFlags::empty(), rustix::fs::StatxFlags::INO)?;
        return Ok(st.stx_ino);
    }
    let text = crate::file::read_string(p, 4096)?;
    ns_inode_of(text.lines().next().unwrap_or("")).ok_or_else(bad)
}

fn comm(host: &Host, pid: u32) -> String {
    crate::host::state::read_trim(&host.path(format!("/proc/{pid}/comm")))
        .filter(|c| !c.is_empty())
        .map(|c| crate::text::one_line(&c))
        .unwrap_or_else(|| "?".into())
}

/// The PIDs /proc lists, in order.
fn pids(host: &Host) -> Vec<u32> {
    let mut v: Vec<u32> = match std::fs::read_dir(host.path("/proc")) {
        Ok(rd) => {
            rd.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).take(1 << 22).collect()
        }
        Err(_) => Vec::new(),
    };
    v.sort_unstable();
    v
}

/// Each distinct namespace of `kind` (`net`, `mnt`) other than ours: its inode with up to
/// `PATHS_KEPT` PIDs in it, and the PIDs whose namespace could not be read.
fn by_inode(host: &Host, kind: &str) -> (BTreeMap<u64, Vec<u32>>, Vec<u32>, u64) {
    let own = ns_inode(host, &host.path(format!("/proc/self/ns/{kind}"))).unwrap_or(0);
    let me = host.own_pid();
    let mut map: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut denied = Vec::new();
    let mut over = 0;
    for pid in pids(host).into_iter().filter(|p| Some(*p) != me) {
        match ns_inode(host, &host.path(format!("/proc/{pid}/ns/{kind}"))) {
            Ok(i) if i == own => {}
            Ok(i) => {
                if !map.contains_key(&i) && map.len() >= MAX_NAMESPACES {
                    over += 1;
                    continue;
                }
                let v = map.entry(i).or_default();
                if v.len() < PATHS_KEPT {
                    v.push(pid);
                }
            }
            // Exited (ENOENT), or a kernel thread's (it shares init's).
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) if e.kind() == ErrorKind::PermissionDenied => denied.push(pid),
            Err(_) => denied.push(pid),
        }
    }
    (map, denied, over)
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

/// The host's other network namespaces, each looked into (see the module's words).
pub(crate) fn net_scan(host: &Host) -> NetScan {
    let (by_pid, denied, over) = by_inode(host, "net");
    let own = ns_inode(host, &host.path("/proc/self/ns/net")).unwrap_or(0);
    let mut scan = NetScan::default();
    scan.unchecked.extend(denied_words(&denied, "network"));
    // Named ones: ip netns add's bind mounts.
    let mut named: BTreeMap<u64, (String, PathBuf)> = BTreeMap::new();
    for dir in ["/run/netns", "/var/run/netns"] {
        let Ok(list) = entries(&host.path(dir)) else { continue };
        for (name, p) in list {
            match ns_inode(host, &p) {
                Ok(i) if i != own => {
                    named.entry(i).or_insert((crate::text::one_line(&name), p));
                }
                Ok(_) => {}
                // An empty file: `ip netns add` failed half-way, or the mount went. Not a namespace.
                Err(_) => {}
            }
        }
    }
    let mut inodes: Vec<u64> = by_pid.keys().chain(named.keys()).copied().collect();
    inodes.sort_unstable();
    inodes.dedup();
    let kernel = host.kernel();
    for inode in inodes {
        if scan.namespaces.len() >= MAX_NAMESPACES {
            scan.unchecked.push(format!("more than {MAX_NAMESPACES} network namespaces: the rest were not read"));
            break;
        }
        let mut tries: Vec<(NsName, PathBuf)> = Vec::new();
        if let Some((n, p)) = named.get(&inode) {
            tries.push((NsName::Named(n.clone()), p.clone()));
        }
        for pid in by_pid.get(&inode).into_iter().flatten() {
            tries.push((NsName::Pid(*pid, comm(host, *pid)), host.path(format!("/proc/{pid}/ns/net"))));
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
