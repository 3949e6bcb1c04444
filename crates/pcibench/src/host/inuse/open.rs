//! Processes that hold a function's nodes open or mapped, named as fuser and lsof name them
//! ("held open by PID 258 (postgres) for writing: /dev/vde"), from the command's one /proc scan
//! (`procs`). Its nodes are known by device number and inode, never by name:
//! - its block devices and everything stacked on them (`block`: partitions, multipath heads,
//!   device-mapper, md, loop devices), by the `dev` attribute each has in sysfs;
//! - the class devices below it with a node (DRM cards and render nodes, the NVMe controller and
//!   its generic `ng` nodes, uio, the vfio-dev cdev, InfiniBand verbs ...), and those of the upper
//!   devices of its network interfaces (macvtap's /dev/tapN), by their `dev` attribute;
//! - its VFIO group's node, /dev/vfio/N or /dev/vfio/noiommu-N (the vfio class device's `dev`,
//!   drivers/vfio/vfio_main.c vfio_group_alloc; else the node's own number);
//! - its sysfs `resource*` and `config` files, by device and inode, and by the path the kernel shows
//!   for them (a process in another network namespace has its own sysfs mount of the same files).
//!
//! Read or write comes from the descriptor's `flags` in /proc/PID/fdinfo (O_ACCMODE), a mapping's
//! from its permissions.

use super::block::Blk;
use super::procs::{identify, parse_devno, FileId, ProcScan};
use super::walk::{dirs_below, entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::host::Host;
use crate::Error;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// How far below the function class devices sit (pci → nvme → nvme0 → ng0n1; a bridge adds a level
/// per port).
const DEPTH: usize = 8;
/// Processes named one by one; the rest are counted.
const NAMED: usize = 16;
/// Nodes named per process.
const NODES_SHOWN: usize = 4;

/// A function's nodes: what each is known by, and how it is shown.
#[derive(Default)]
pub(super) struct Nodes {
    ids: HashMap<FileId, usize>,
    paths: HashMap<String, usize>,
    /// The kernel's name for it (vde, card0, resource0).
    names: Vec<String>,
    /// Words shown after the node's path ("(vg-data (dm-0, LVM) on vde)"), or nothing.
    notes: Vec<String>,
}

impl Nodes {
    pub fn add(&mut self, id: Option<FileId>, path: Option<String>, name: String, note: String) {
        let i = self.notes.len();
        self.names.push(name);
        self.notes.push(note);
        if let Some(id) = id {
            self.ids.entry(id).or_insert(i);
        }
        if let Some(p) = path {
            self.paths.entry(p).or_insert(i);
        }
    }

    fn find(&self, id: Option<FileId>, path: &str) -> Option<usize> {
        id.and_then(|id| self.ids.get(&id)).or_else(|| self.paths.get(path)).copied()
    }

    /// Node `i` as a process has it: its path, with the kernel's name where the path names it
    /// otherwise (a node made in a container), and the node's note.
    fn shown(&self, i: usize, path: &str) -> String {
        let base = path.rsplit('/').next().unwrap_or(path);
        let note = &self.notes[i];
        if note.is_empty() && base != self.names[i] {
            format!("{path} ({})", self.names[i])
        } else {
            format!("{path}{note}")
        }
    }

    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }
}

/// Every node of the function at `scope.dir`, its block devices `blks` included.
pub(super) fn nodes(scope: &Scope, blks: &[Blk]) -> Result<Nodes, Error> {
    let host = scope.host;
    let mut n = Nodes::default();
    for b in blks {
        let Some(d) = b.dev.as_deref().and_then(parse_devno) else { continue };
        let mut note = if b.chain != b.name { format!(" ({})", b.chain) } else { String::new() };
        note.push_str(&below(scope, b.function.as_deref()));
        n.add(Some(FileId::Block(d)), None, b.name.clone(), note);
    }
    for d in dirs_below(&scope.dir, DEPTH)? {
        char_node(scope, &mut n, &d, "");
    }
    for (name, link) in entries(&host.path("/sys/class/net"))? {
        let Some(real) = resolve(&link)?.filter(|r| r.starts_with(&scope.dir)) else { continue };
        for (entry, l) in entries(&real)? {
            let Some(upper) = entry.strip_prefix("upper_") else { continue };
            let Some(udir) = resolve(&l)? else { continue };
            for d in dirs_below(&udir, 3)? {
                char_node(scope, &mut n, &d, &format!(" ({upper} on {name})"));
            }
        }
    }
    if let Some((id, path)) = vfio_group_node(host, &scope.dir) {
        let name = path.rsplit('/').next().unwrap_or_default().to_string();
        n.add(Some(id), Some(path), name, String::new());
    }
    for (name, p) in entries(&scope.dir)? {
        if name == "config" || name.starts_with("resource") {
            let id = identify(host, &p).ok();
            let shown = std::fs::canonicalize(&p).ok().map(|c| shown_path(host, &c));
            n.add(id, shown, name, String::new());
        }
    }
    Ok(n)
}

/// A class device's node (`dev` in its directory), unless it is a block device (those come from `block`).
fn char_node(scope: &Scope, n: &mut Nodes, dir: &Path, note: &str) {
    let Some(d) = read_trim(&dir.join("dev")).as_deref().and_then(parse_devno) else { return };
    if crate::host::state::link_name(&dir.join("subsystem")).as_deref() == Some("block")
        || dir.join("partition").exists()
    {
        return;
    }
    let function = dir.ancestors().map(name_of).find(|a| super::block::looks_like_function(a));
    n.add(Some(FileId::Char(d)), None, name_of(dir), format!("{note}{}", below(scope, function.as_deref())));
}

fn below(scope: &Scope, function: Option<&str>) -> String {
    match function {
        Some(f) if f != scope.addr => format!(" (on {f} below it)"),
        _ => String::new(),
    }
}

/// The path of a file of this host as the kernel shows it (`/sys/devices/...`: the root taken off).
fn shown_path(host: &Host, p: &Path) -> String {
    match p.strip_prefix(host.root()) {
        Ok(rel) => format!("/{}", rel.display()),
        Err(_) => p.display().to_string(),
    }
}

/// The VFIO group node of the function at `dir`: its device number (the vfio class device's `dev`,
/// else the node's own) and the node's path (/dev/vfio/N or /dev/vfio/noiommu-N). None when it is
/// in no group or the group has no node (not bound to vfio-pci).
pub(super) fn vfio_group_node(host: &Host, dir: &Path) -> Option<(FileId, String)> {
    let g: u32 = crate::host::state::link_name(&dir.join("iommu_group"))?.parse().ok()?;
    for name in [format!("noiommu-{g}"), g.to_string()] {
        let node = format!("/dev/vfio/{name}");
        let from_class = read_trim(&host.path(format!("/sys/class/vfio/{name}/dev"))).as_deref().and_then(parse_devno);
        if let Some(d) = from_class {
            return Some((FileId::Char(d), node));
        }
        if let Ok(id @ FileId::Char(_)) = identify(host, &host.path(&node)) {
            return Some((id, node));
        }
    }
    None
}

/// One process holding nodes of the function.
pub(super) struct Hold {
    pub pid: u32,
    pub comm: String,
    /// The nodes as shown, each once, in the order met.
    pub nodes: Vec<String>,
    pub by_fd: bool,
    pub mapped: bool,
    pub read: bool,
    pub write: bool,
}

impl Hold {
    /// "for reading and writing", "for writing", "for reading", or nothing when no flags were readable.
    pub fn access(&self) -> &'static str {
        match (self.read, self.write) {
            (true, true) => " for reading and writing",
            (false, true) => " for writing",
            (true, false) => " for reading",
            (false, false) => "",
        }
    }

    fn nodes_words(&self) -> String {
        let mut s = self.nodes.iter().take(NODES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if self.nodes.len() > NODES_SHOWN {
            s.push_str(&format!(" and {} more", self.nodes.len() - NODES_SHOWN));
        }
        s
    }

    /// "PID 258 (postgres)".
    pub fn who(&self) -> String {
        format!("PID {} ({})", self.pid, self.comm)
    }

    /// "held open by PID 258 (postgres) for writing: /dev/vde".
    pub fn why(&self) -> String {
        let verb = match (self.by_fd, self.mapped) {
            (true, true) => "held open and mapped",
            (false, true) => "mapped",
            _ => "held open",
        };
        format!("{verb} by {}{}: {}", self.who(), self.access(), self.nodes_words())
    }
}

/// The processes of `scan` holding any of `nodes`, by PID. A process gone since the scan (no
/// /proc/PID any more) holds nothing and is left out.
pub(super) fn holds(host: &Host, nodes: &Nodes, scan: &ProcScan) -> Vec<Hold> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let mut by_pid: BTreeMap<u32, Hold> = BTreeMap::new();
    for o in &scan.opens {
        let Some(i) = nodes.find(o.id, &o.path) else { continue };
        // `config` is world-readable: any user holding it read-only (lspci, a monitor) would
        // otherwise make the device "in use" and block setup for everyone. Information, not a use.
        if let Some(fd) = o.fd {
            if nodes.shown(i, &o.path).ends_with("/config") && fd_access(host, o.pid, fd) == Some((true, false)) {
                continue;
            }
        }
        let h = by_pid.entry(o.pid).or_insert_with(|| Hold {
            pid: o.pid,
            comm: String::new(),
            nodes: Vec::new(),
            by_fd: false,
            mapped: false,
            read: false,
            write: false,
        });
        let shown = nodes.shown(i, &o.path);
        if !h.nodes.contains(&shown) {
            h.nodes.push(shown);
        }
        match o.fd {
            Some(fd) => {
                h.by_fd = true;
                if let Some((r, w)) = fd_access(host, o.pid, fd) {
                    h.read |= r;
                    h.write |= w;
                }
            }
            None => {
                h.mapped = true;
                h.read = true;
                h.write |= o.map_write;
            }
        }
    }
    let mut out = Vec::new();
    for (pid, mut h) in by_pid {
        let dir = host.path(format!("/proc/{pid}"));
        if !dir.exists() {
            continue;
        }
        h.comm = read_trim(&dir.join("comm")).filter(|c| !c.is_empty()).unwrap_or_else(|| "?".into());
        out.push(h);
    }
    out
}

/// Read and write from the descriptor's open flags (`flags:` in /proc/PID/fdinfo/FD, octal;
/// O_ACCMODE: 0 read, 1 write, 2 both), None when it cannot be read (closed since).
fn fd_access(host: &Host, pid: u32, fd: u32) -> Option<(bool, bool)> {
    let text = read_trim(&host.path(format!("/proc/{pid}/fdinfo/{fd}")))?;
    let flags = text.lines().find_map(|l| l.strip_prefix("flags:"))?.trim();
    let f = u32::from_str_radix(flags, 8).ok()?;
    match f & 3 {
        0 => Some((true, false)),
        1 => Some((false, true)),
        _ => Some((true, true)),
    }
}

/// The function's holders among the processes of `scan`.
pub(super) fn holders(scope: &Scope, blks: &[Blk], scan: &ProcScan) -> Result<Vec<Holder>, Error> {
    let n = nodes(scope, blks)?;
    let holds = holds(scope.host, &n, scan);
    let mut out: Vec<Holder> = holds
        .iter()
        .take(NAMED)
        .map(|h| Holder {
            kind: HolderKind::Open,
            why: h.why(),
            free: vec![format!("stop {}, or have it close {}", h.who(), h.nodes_words())],
        })
        .collect();
    if holds.len() > NAMED {
        let rest: Vec<String> = holds[NAMED..].iter().take(NAMED).map(|h| h.pid.to_string()).collect();
        let more = if holds.len() > 2 * NAMED { " ..." } else { "" };
        out.push(Holder {
            kind: HolderKind::Open,
            why: format!("{} more processes hold it open (PIDs {}{more})", holds.len() - NAMED, rest.join(", ")),
            free: vec!["stop them: fuser -v on its nodes lists them".into()],
        });
    }
    Ok(out)
}
