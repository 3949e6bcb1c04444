//! Every process's open files and mappings that could be a device's node, read once per command
//! (`Host::procs`) from `/proc/PID/fd` (links and, later, `fdinfo` flags) and `/proc/PID/maps`, with
//! the network and mount namespaces each process is in (`/proc/PID/ns/net`, `ns/mnt`) and the network
//! namespaces it holds by a descriptor (an fd link `net:[INODE]`, fs/nsfs.c ns_dname): the one walk
//! of /proc a command makes. Matching them to one device is `open.rs`'s job; this only reads, and
//! bounds the work, per process a fixed number of lookups plus one per descriptor and one read of
//! its maps (at most `Limits::map_bytes`):
//! - a process that exits mid-scan (its /proc/PID, its fd directory or one fd gone: ENOENT) holds
//!   nothing any more and is skipped;
//! - a process whose files cannot be read (another user's; /proc mounted hidepid=1) is kept as
//!   unchecked, never taken as holding nothing; kernel threads (PF_KTHREAD in /proc/PID/stat) own no
//!   file table and are skipped; processes /proc does not even list (hidepid=2) are said in words;
//! - entries (fds and maps lines) are counted against `Limits`: past them the scan stops and every
//!   process not read is unchecked, so 100,000 open files cost time, never a hang or a pass;
//! - the real host's open files are identified with statx(AT_STATX_DONT_SYNC) through the magic
//!   fd link (fs/proc/fd.c: it leads to the open file itself, in whatever mount namespace it was
//!   opened, and never loops); DONT_SYNC keeps a network filesystem's server out of it, so a dead NFS
//!   server cannot hang the scan.
//!
//! Our own process is not a holder: it opens the device itself.
//!
//! /proc lists the processes of pcibench's own PID namespace and those below it: run in a
//! container's PID namespace it cannot see the host's, which is said (`unseen`), never taken as
//! holding nothing. Read-only commands (`list`, `info`, `health`) walk no /proc at all
//! (`Host::without_process_walk`): their scan is `ProcScan::not_walked`, incomplete by its words.

use super::Unchecked;
use crate::host::Host;
use rustix::fd::OwnedFd;
use rustix::fs::{openat, openat2, readlinkat, AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, StatxFlags, CWD};
use rustix::io::Errno;
use std::fs;
use std::io::{self, ErrorKind, Read};
use std::path::{Component, Path, PathBuf};

/// A device number: (major, minor).
pub(crate) type Devno = (u32, u32);

/// `major:minor` as sysfs writes it.
pub(super) fn parse_devno(s: &str) -> Option<Devno> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// What an open file is, as the kernel identifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FileId {
    Block(Devno),
    Char(Devno),
    /// Any other file (a sysfs attribute): its filesystem's device number and its inode.
    File {
        dev: Devno,
        ino: u64,
    },
}

/// One open file or mapping of a process that could be a device's node.
#[derive(Debug, Clone)]
pub(crate) struct Open {
    pub pid: u32,
    /// The descriptor; None for a mapping.
    pub fd: Option<u32>,
    /// The path as the kernel shows it (the fd link's target, the mapping's path), " (deleted)" removed.
    pub path: String,
    /// None when only the path is known (a mapping of a node that cannot be looked up).
    pub id: Option<FileId>,
    /// A mapping that is writable (`w` in maps' permissions).
    pub map_write: bool,
}

/// A network namespace a process holds by a descriptor: /proc/PID/fd/FD links to `net:[INODE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NsFd {
    pub pid: u32,
    pub fd: u32,
    pub inode: u64,
}

/// The namespaces a process is in, by inode (/proc/PID/ns/net and ns/mnt); None where it had exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcNs {
    pub pid: u32,
    pub net: Option<u64>,
    pub mnt: Option<u64>,
}

/// What the scan found: the open files worth matching, and whom it could not check.
#[derive(Debug, Default)]
pub(crate) struct ProcScan {
    pub opens: Vec<Open>,
    pub unchecked: Unchecked,
    /// Scanned as root: what was still denied needs no "run it as root" (`Unchecked::as_root`).
    pub privileged: bool,
    /// Each process's namespaces, in PID order.
    pub ns: Vec<ProcNs>,
    /// Processes whose namespaces could not be read (another user's: ptrace read access, fs/proc/namespaces.c).
    pub ns_denied: Vec<u32>,
    /// Network namespaces held by descriptors.
    pub ns_fds: Vec<NsFd>,
}

/// What a read-only command answers for the processes: none looked at.
pub(crate) const NOT_WALKED: &str =
    "no process was looked at (a read-only command walks no /proc): pcibench doctor ADDR checks them";

impl ProcScan {
    /// The scan of a command that walks no /proc: nothing found, and said to be incomplete, so
    /// nothing that takes a device can ever follow from it.
    pub(crate) fn not_walked() -> ProcScan {
        let mut s = ProcScan::default();
        s.unchecked.unseen.push(NOT_WALKED.into());
        s
    }
}

/// PROC_PID_INIT_INO (include/linux/proc_ns.h): the inode of the initial PID namespace, whose /proc
/// lists every process of the host.
const PID_INIT_INO: u64 = 0xEFFF_FFFC;

/// How much one scan reads at most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// fd entries and maps lines, over all processes.
    pub entries: usize,
    /// Bytes of one process's maps (65,530 mappings, vm.max_map_count's default, are ~7 MiB).
    pub map_bytes: u64,
}

pub(crate) const LIMITS: Limits = Limits { entries: 1 << 21, map_bytes: 64 << 20 };

/// PF_KTHREAD (include/linux/sched.h): the task is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;
/// The kernel follows at most 40 symlinks in one lookup (MAXSYMLINKS, include/linux/namei.h).
const MAX_SYMLINKS: usize = 40;
/// The most of a /proc table read (mountinfo, swaps, the network's): thousands of mounts fit.
pub(crate) const PROC_TABLE_MAX: u64 = 16 << 20;
pub(super) const NO_PERMISSION: &str = "no permission to read their open files: run it as root";

/// The scan of this host as the running user sees it.
pub(crate) fn scan(host: &Host) -> ProcScan {
    scan_with(host, &LIMITS, rustix::process::geteuid().is_root())
}

/// Why one process's files were not all read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// It exited: it holds nothing.
    Gone,
    /// A kernel thread: no file table.
    Kernel,
    Unchecked(String),
    /// The scan's limit was reached.
    Limit,
}

/// The scan with explicit limits and privilege (tests).
pub(crate) fn scan_with(host: &Host, limits: &Limits, privileged: bool) -> ProcScan {
    // A fixture tree's words do not depend on who runs the tests.
    let mut s = ProcScan { privileged: privileged && host.is_real(), ..ProcScan::default() };
    let proc = host.path("/proc");
    if host.is_real() && !proc.join("self").exists() {
        s.unchecked.unseen.push("/proc is not mounted, so no process was checked: mount -t proc proc /proc".into());
        return s;
    }
    if let Some(words) = own_pid_namespace(host) {
        s.unchecked.unseen.push(words);
    }
    if let Some(h) = hidepid(host).filter(|_| !privileged) {
        s.unchecked.unseen.push(format!(
            "other users' processes are hidden (/proc is mounted with hidepid={h}): run it as root to check them"
        ));
    }
    let rd = match fs::read_dir(&proc) {
        Ok(rd) => rd,
        // A fixture tree without /proc has no processes.
        Err(e) if e.kind() == ErrorKind::NotFound => return s,
        Err(e) => {
            s.unchecked.unseen.push(format!("/proc cannot be listed ({e}), so no process was checked"));
            return s;
        }
    };
    let sysfs_dev = match identify(host, &host.path("/sys/devices")) {
        Ok(FileId::File { dev, .. }) => Some(dev),
        _ => None,
    };
    let me = host.own_pid();
    // In PID order, so what is said (and where the limit falls) does not depend on readdir's order.
    let mut pids = Vec::new();
    for e in rd {
        match e {
            Ok(e) => pids.extend(e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()).filter(|p| Some(*p) != me)),
            Err(err) => {
                s.unchecked.unseen.push(format!("/proc could not be listed to the end ({err})"));
                break;
            }
        }
        // pid_max is at most 2^22 (PID_MAX_LIMIT): more entries than that is not a /proc.
        if pids.len() > 1 << 22 {
            s.unchecked.unseen.push("/proc lists more processes than a kernel can have: not all were read".into());
            break;
        }
    }
    pids.sort_unstable();
    let mut budget = limits.entries;
    let mut stopped = false;
    let stop_words = format!("the scan stopped after {} open files and mappings", limits.entries);
    for pid in pids {
        if stopped {
            s.unchecked.add(pid, &stop_words);
            continue;
        }
        let mut found = Found::default();
        let r = process(host, pid, sysfs_dev, &mut budget, limits, &mut found);
        match found.ns {
            Some(Ok((net, mnt))) => s.ns.push(ProcNs { pid, net, mnt }),
            Some(Err(())) => s.ns_denied.push(pid),
            None => {}
        }
        match r {
            Ok(()) => {
                s.opens.append(&mut found.opens);
                s.ns_fds.append(&mut found.ns_fds);
            }
            Err(Stop::Gone | Stop::Kernel) => {}
            Err(Stop::Unchecked(why)) => s.unchecked.add(pid, &why),
            Err(Stop::Limit) => {
                stopped = true;
                s.unchecked.add(pid, &stop_words);
            }
        }
    }
    s
}

fn is_permission(e: &io::Error) -> bool {
    e.kind() == ErrorKind::PermissionDenied
}

/// Whether this process's /proc shows every process of the host: not when pcibench runs in a PID
/// namespace of its own (a container's), whose /proc lists only that namespace and those below it
/// (fs/proc/base.c, proc_pid_readdir walks the reader's namespace). None: it does, or a fixture
/// that does not say.
fn own_pid_namespace(host: &Host) -> Option<String> {
    let p = host.path("/proc/self/ns/pid");
    let words = |why: String| {
        Some(format!(
            "{why}, so processes outside it (the host's) cannot be seen: run the check in the host's PID namespace"
        ))
    };
    match super::nsfile::ns_inode(host, &p) {
        Ok(PID_INIT_INO) => None,
        Ok(_) => words("pcibench runs in a PID namespace of its own (a container's)".into()),
        Err(_) if !host.is_real() => None,
        Err(e) => words(format!("whether pcibench sees every process cannot be told ({}: {e})", p.display())),
    }
}

/// A process's namespaces as read: its (net, mnt) inodes; Err: they could not be read.
type NsRead = Result<(Option<u64>, Option<u64>), ()>;

/// What one process's walk found.
#[derive(Default)]
struct Found {
    opens: Vec<Open>,
    ns_fds: Vec<NsFd>,
    /// Its namespaces; None: not looked at (it had exited).
    ns: Option<NsRead>,
}

/// The inode of namespace `kind` of the process whose /proc directory is `pid_dir`: Ok(None) when
/// it exited, Err when it may not be read.
fn ns_of(host: &Host, pid_dir: &OwnedFd, dir: &Path, kind: &str) -> Result<Option<u64>, ()> {
    let link = format!("ns/{kind}");
    let got = if host.is_real() {
        readlinkat(pid_dir, link.as_str(), Vec::new()).map_err(io::Error::from).and_then(|t| {
            super::nsfile::ns_inode_of(&t.to_string_lossy())
                .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "not a namespace"))
        })
    } else {
        super::nsfile::ns_inode(host, &dir.join(&link))
    };
    match got {
        Ok(i) => Ok(Some(i)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        // ESRCH: exiting as it was read.
        Err(e) if e.raw_os_error() == Some(Errno::SRCH.raw_os_error()) => Ok(None),
        Err(_) => Err(()),
    }
}

/// One process: its fd links, then its maps. /proc/PID is looked up once and everything below it
/// is read relative to it: each /proc/PID/... path would look the process up again.
fn process(
    host: &Host,
    pid: u32,
    sysfs_dev: Option<Devno>,
    budget: &mut usize,
    limits: &Limits,
    found: &mut Found,
) -> Result<(), Stop> {
    let dir = host.path(format!("/proc/{pid}"));
    let dir_error = |e: Errno| fd_dir_error(&io::Error::from(e), &dir);
    let pid_dir =
        openat(CWD, &dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).map_err(dir_error)?;
    found.ns = match (ns_of(host, &pid_dir, &dir, "net"), ns_of(host, &pid_dir, &dir, "mnt")) {
        (Ok(None), Ok(None)) => None,
        (Ok(net), Ok(mnt)) => Some(Ok((net, mnt))),
        _ => Some(Err(())),
    };
    let out = &mut found.opens;
    let fd_dir = openat(&pid_dir, "fd", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(dir_error)?;
    let mut listing = Dir::new(fd_dir).map_err(dir_error)?;
    let mut fds = Vec::new();
    for ent in &mut listing {
        let ent = match ent {
            Ok(ent) => ent,
            Err(Errno::NOENT) => return Err(Stop::Gone),
            Err(e) => return Err(dir_error(e)),
        };
        *budget = budget.checked_sub(1).ok_or(Stop::Limit)?;
        if let Some(fd) = ent.file_name().to_str().ok().and_then(|n| n.parse::<u32>().ok()) {
            fds.push(fd);
        }
    }
    let fd_dir = listing.fd().map_err(dir_error)?;
    let mut buf = Vec::new();
    for fd in fds {
        let name = fd.to_string();
        let target = match readlinkat(fd_dir, name.as_str(), std::mem::take(&mut buf)) {
            Ok(t) => t.into_bytes(),
            // Closed since the directory was listed.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(Stop::Unchecked(format!("an fd link cannot be read ({})", io::Error::from(e)))),
        };
        // pipe:[..], socket:[..], anon_inode:[..] name no path; net:[..] is a network namespace held
        // open (what keeps it alive when no process is in it and no name mounts it).
        if target.first() != Some(&b'/') {
            if target.starts_with(b"net:[") {
                if let Some(inode) = super::nsfile::ns_inode_of(&String::from_utf8_lossy(&target)) {
                    found.ns_fds.push(NsFd { pid, fd, inode });
                }
            }
            buf = target;
            continue;
        }
        let text = String::from_utf8_lossy(&target);
        let path = text.strip_suffix(" (deleted)").unwrap_or(&text).to_string();
        buf = target;
        let id = if host.is_real() {
            // The magic link leads to the open file itself (never loops, whatever namespace).
            rustix::fs::statx(fd_dir, name.as_str(), AtFlags::STATX_DONT_SYNC, StatxFlags::TYPE | StatxFlags::INO)
                .map(|st| id_of(&st))
                .map_err(io::Error::from)
        } else {
            identify(host, &host.path(&path))
        };
        let id = match id {
            Ok(id) => Some(id),
            // The real host: closed since its link was read. A fixture: a path the tree lacks.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if host.is_real() {
                    continue;
                }
                None
            }
            Err(e) => return Err(Stop::Unchecked(format!("what an open file is cannot be told ({e})"))),
        };
        if worth_keeping(id, &path, sysfs_dev) {
            out.push(Open { pid, fd: Some(fd), path, id, map_write: false });
        }
    }
    maps(host, pid, &pid_dir, sysfs_dev, budget, limits, out)
}

/// What a failure to list /proc/PID/fd means: the process exited; a kernel thread (root-owned, no
/// file table); or a process this user may not inspect (ptrace access mode read, fs/proc/fd.c), which
/// stays unchecked.
pub(super) fn fd_dir_error(e: &io::Error, dir: &Path) -> Stop {
    match e.kind() {
        ErrorKind::NotFound => Stop::Gone,
        _ if is_permission(e) && is_kernel_thread(dir) => Stop::Kernel,
        _ if is_permission(e) => Stop::Unchecked(NO_PERMISSION.into()),
        _ => Stop::Unchecked(format!("/proc/PID/fd cannot be listed ({e})")),
    }
}

/// Device nodes, and files that could be a device's sysfs attributes; the rest (regular files,
/// libraries) cannot be one of its nodes.
fn worth_keeping(id: Option<FileId>, path: &str, sysfs_dev: Option<Devno>) -> bool {
    match id {
        Some(FileId::Block(_) | FileId::Char(_)) => true,
        Some(FileId::File { dev, .. }) => Some(dev) == sysfs_dev || path.starts_with("/sys/"),
        None => path.starts_with("/sys/") || path.starts_with("/dev/"),
    }
}

/// `/proc/PID/maps`: mappings of sysfs files (by the device and inode the line gives) and of device
/// nodes (looked up in the process's own root, checked against the line's device and inode).
fn maps(
    host: &Host,
    pid: u32,
    pid_dir: &OwnedFd,
    sysfs_dev: Option<Devno>,
    budget: &mut usize,
    limits: &Limits,
    out: &mut Vec<Open>,
) -> Result<(), Stop> {
    let mut text = String::new();
    let read = openat(pid_dir, "maps", OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())
        .map_err(io::Error::from)
        .and_then(|fd| fs::File::from(fd).take(limits.map_bytes + 1).read_to_string(&mut text));
    match read {
        Ok(n) if n as u64 > limits.map_bytes => {
            return Err(Stop::Unchecked(format!(
                "/proc/PID/maps is larger than {} MiB: not read",
                limits.map_bytes >> 20
            )))
        }
        Ok(_) => {}
        // Exited since its fds were read (ESRCH: while its maps were): what it held is dropped when
        // the holders are named (`open::holds` finds no /proc/PID).
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => return Ok(()),
        Err(e) if is_permission(&e) => return Err(Stop::Unchecked(NO_PERMISSION.into())),
        Err(e) => return Err(Stop::Unchecked(format!("/proc/PID/maps cannot be read ({e})"))),
    }
    for line in text.lines() {
        *budget = budget.checked_sub(1).ok_or(Stop::Limit)?;
        let Some(m) = parse_maps_line(line) else { continue };
        let path = m.path.strip_suffix(" (deleted)").unwrap_or(m.path);
        let in_sysfs = Some(m.dev) == sysfs_dev || path.starts_with("/sys/");
        let id = if in_sysfs {
            Some(FileId::File { dev: m.dev, ino: m.ino })
        } else if path.starts_with("/dev/") {
            mapped_node(host, pid, path, m.dev, m.ino)
        } else {
            continue;
        };
        out.push(Open { pid, fd: None, path: path.to_string(), id, map_write: m.write });
    }
    Ok(())
}

/// One line of /proc/PID/maps: `start-end perms offset MAJ:MIN inode   path` (fs/proc/task_mmu.c,
/// show_vma_header_prefix: the device in hex, the inode in decimal).
pub(super) struct MapsLine<'a> {
    pub write: bool,
    pub dev: Devno,
    pub ino: u64,
    pub path: &'a str,
}

pub(super) fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut f = [""; 5];
    for v in f.iter_mut() {
        rest = rest.trim_start_matches(' ');
        let end = rest.find(' ').unwrap_or(rest.len());
        *v = &rest[..end];
        rest = &rest[end..];
    }
    let path = rest.trim_start_matches(' ');
    if !path.starts_with('/') {
        return None;
    }
    let (maj, min) = f[3].split_once(':')?;
    Some(MapsLine {
        write: f[1].as_bytes().get(1) == Some(&b'w'),
        dev: (u32::from_str_radix(maj, 16).ok()?, u32::from_str_radix(min, 16).ok()?),
        ino: f[4].parse().ok()?,
        path,
    })
}

/// The node a mapping of `path` is: looked up where the process sees it (/proc/PID/root), and
/// only if that file is the one mapped (same device and inode), so a name alone never matches.
fn mapped_node(host: &Host, pid: u32, path: &str, dev: Devno, ino: u64) -> Option<FileId> {
    if !host.is_real() {
        return identify(host, &host.path(path)).ok();
    }
    let p = format!("/proc/{pid}/root{path}");
    let st = rustix::fs::statx(CWD, p.as_str(), AtFlags::STATX_DONT_SYNC, StatxFlags::TYPE | StatxFlags::INO).ok()?;
    if (st.stx_dev_major, st.stx_dev_minor) != dev || st.stx_ino != ino {
        return None;
    }
    Some(id_of(&st))
}

fn id_of(st: &rustix::fs::Statx) -> FileId {
    match FileType::from_raw_mode(st.stx_mode as rustix::fs::RawMode) {
        FileType::BlockDevice => FileId::Block((st.stx_rdev_major, st.stx_rdev_minor)),
        FileType::CharacterDevice => FileId::Char((st.stx_rdev_major, st.stx_rdev_minor)),
        _ => FileId::File { dev: (st.stx_dev_major, st.stx_dev_minor), ino: st.stx_ino },
    }
}

/// What the file at `path` (a path on this host, the root already joined) is. In a fixture tree
/// its symlinks resolve inside the tree (openat2 RESOLVE_IN_ROOT: the kernel's own lookup, ELOOP
/// after 40 links), and since tests cannot make device nodes (mknod needs CAP_MKNOD), a regular file
/// under /dev that reads `block MAJ:MIN` or `char MAJ:MIN` stands for one.
pub(crate) fn identify(host: &Host, path: &Path) -> io::Result<FileId> {
    let flags = AtFlags::STATX_DONT_SYNC;
    let mask = StatxFlags::TYPE | StatxFlags::INO;
    if host.is_real() {
        return Ok(id_of(&rustix::fs::statx(CWD, path, flags, mask)?));
    }
    let root = openat(CWD, host.root(), OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let rel = path.strip_prefix(host.root()).unwrap_or(path);
    let in_root = |o: OFlags| openat2(&root, rel, o | OFlags::CLOEXEC, Mode::empty(), ResolveFlags::IN_ROOT);
    let id = match in_root(OFlags::PATH) {
        Ok(fd) => id_of(&rustix::fs::statx(&fd, "", flags | AtFlags::EMPTY_PATH, mask)?),
        // No openat2 (a kernel before 5.6, or qemu-user's emulation): resolve in user space.
        Err(Errno::NOSYS) => {
            let real = resolve_in_root(host.root(), path)?;
            id_of(&rustix::fs::statx(CWD, &real, flags | AtFlags::SYMLINK_NOFOLLOW, mask)?)
        }
        Err(e) => return Err(e.into()),
    };
    if matches!(id, FileId::File { .. }) && rel.starts_with("dev") {
        let text = match in_root(OFlags::RDONLY | OFlags::NONBLOCK) {
            Ok(fd) => {
                let mut t = String::new();
                fs::File::from(fd).take(64).read_to_string(&mut t).ok().map(|_| t)
            }
            Err(_) => crate::host::state::read_trim(&resolve_in_root(host.root(), path)?),
        };
        if let Some(node) = text.as_deref().and_then(fixture_node) {
            return Ok(node);
        }
    }
    Ok(id)
}

/// A fixture's stand-in for a device node: `block 254:64` or `char 511:0`.
fn fixture_node(text: &str) -> Option<FileId> {
    let (kind, num) = text.trim().split_once(' ')?;
    let d = parse_devno(num)?;
    match kind {
        "block" => Some(FileId::Block(d)),
        "char" => Some(FileId::Char(d)),
        _ => None,
    }
}

/// `path` with every symlink resolved as if `root` were `/`, at most `MAX_SYMLINKS` of them (then
/// ELOOP): `identify`'s way where openat2 is missing.
pub(super) fn resolve_in_root(root: &Path, path: &Path) -> io::Result<PathBuf> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut pending: Vec<PathBuf> = rel.components().rev().map(|c| PathBuf::from(c.as_os_str())).collect();
    let mut cur = root.to_path_buf();
    let mut hops = 0;
    while let Some(c) = pending.pop() {
        match c.components().next() {
            Some(Component::ParentDir) => {
                if cur != root {
                    cur.pop();
                }
                continue;
            }
            Some(Component::Normal(_)) => {}
            _ => continue,
        }
        let next = cur.join(&c);
        if fs::symlink_metadata(&next)?.file_type().is_symlink() {
            hops += 1;
            if hops > MAX_SYMLINKS {
                return Err(io::Error::from_raw_os_error(Errno::LOOP.raw_os_error()));
            }
            let t = fs::read_link(&next)?;
            if t.is_absolute() {
                cur = root.to_path_buf();
            }
            pending.extend(t.components().rev().map(|c| PathBuf::from(c.as_os_str())));
        } else {
            cur = next;
        }
    }
    Ok(cur)
}

/// A kernel thread (PF_KTHREAD in field 9 of /proc/PID/stat, after the parenthesised command name,
/// which may itself hold spaces and parentheses).
fn is_kernel_thread(dir: &Path) -> bool {
    let Some(stat) = crate::host::state::read_trim(&dir.join("stat")) else { return false };
    let Some((_, after)) = stat.rsplit_once(')') else { return false };
    after.split_whitespace().nth(6).and_then(|f| f.parse::<u64>().ok()).is_some_and(|f| f & PF_KTHREAD != 0)
}

/// /proc's hidepid= option (fs/proc/root.c) when it hides anything: `1`/`noaccess`, `2`/`invisible`,
/// `4`/`ptraceable`, from the super options of /proc's line in our mountinfo.
fn hidepid(host: &Host) -> Option<String> {
    let text = crate::file::read_string(&host.path("/proc/self/mountinfo"), PROC_TABLE_MAX).ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let sep = f.iter().position(|w| *w == "-")?;
        if f.get(4) != Some(&"/proc") || f.get(sep + 1) != Some(&"proc") {
            return None;
        }
        let opts = f.get(sep + 3)?;
        let v = opts.split(',').find_map(|o| o.strip_prefix("hidepid="))?;
        (!matches!(v, "0" | "off")).then(|| v.to_string())
    })
}
