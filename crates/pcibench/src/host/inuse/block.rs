//! Block devices of a PCI function and everything the kernel stacks on them, found by following
//! sysfs the way the kernel lays it out (Documentation/ABI/stable/sysfs-block):
//! - every entry of /sys/class/block whose real directory lies below the function (disks, their
//!   partitions, NVMe per-path nodes `nvmeXcYnZ`);
//! - NVMe multipath heads, which live under /sys/devices/virtual/nvme-subsystem/, not under the
//!   function: a head's `multipath/` directory links to its per-path nodes
//!   (drivers/nvme/host/multipath.c, nvme_mpath_add_disk), and /sys/class/nvme-subsystem/S/ links
//!   to the controllers of subsystem S and holds its heads;
//! - partitions (subdirectories with a `partition` attribute);
//! - whatever holds them (`holders/`: device-mapper, LVM, dm-crypt/LUKS, md RAID), recursively;
//! - loop devices whose backing file (`loop/backing_file`) is one of them, or sits on a filesystem of
//!   one of them.
//!
//! Then what each is used for: mounted (/proc/self/mountinfo, by device number, and by source
//! for filesystems such as btrfs that report an anonymous device; a multi-device btrfs by any of
//! its members, /sys/fs/btrfs/UUID/devices/), active swap (/proc/swaps: partitions, and files on
//! one of its filesystems).

use super::walk::{self, entries, name_of, resolve, sysfs_error, MAX_DEPTH};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::Error;
use std::path::{Path, PathBuf};

/// One block device that depends on the function.
#[derive(Debug, Clone)]
pub(super) struct Blk {
    pub name: String,
    /// Its real sysfs directory.
    pub dir: PathBuf,
    /// `major:minor`.
    pub dev: Option<String>,
    pub dm_name: Option<String>,
    /// How it reaches the function: `vg-root (dm-0, LVM) on nvme0n1p2`.
    pub chain: String,
    /// The device it sits on (None: it hangs off the function itself).
    pub parent: Option<usize>,
    /// What keeps it stacked on the function (device-mapper, md RAID, the loop driver), if anything.
    pub stacker: Option<&'static str>,
    /// The PCI function below the target it hangs off (for a bridge's inventory).
    pub function: Option<String>,
    /// An NVMe multipath head (it lives outside the function's directory).
    pub head: bool,
    /// The other devices of the multi-device filesystem it belongs to (btrfs: /sys/fs/btrfs/UUID/devices/),
    /// any of which mountinfo may name as the source.
    pub fs_siblings: Vec<String>,
}

/// A line of /proc/self/mountinfo.
#[derive(Debug, Clone)]
pub(super) struct Mount {
    pub dev: String,
    pub point: String,
    pub source: String,
    /// The filesystem type (`ext4`, `nsfs`).
    pub fstype: String,
    /// The root of the mount within its filesystem; for a namespace file (nsfs) the namespace,
    /// `net:[4026532290]` (fs/nsfs.c, nsfs_show_path).
    pub root: String,
}

/// mountinfo and /proc/swaps escape space, tab, newline and backslash as \ooo (fs/proc_namespace.c).
pub(super) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64 + (b[i + 2] - b'0') as u32 * 8 + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`: device, mount point, source,
/// type and root (Documentation/filesystems/proc.rst, /proc/PID/mountinfo).
pub(super) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let sep = f.iter().position(|w| *w == "-")?;
            Some(Mount {
                dev: f.get(2)?.to_string(),
                point: unescape(f.get(4)?),
                source: unescape(f.get(sep + 2).copied().unwrap_or("")),
                fstype: f.get(sep + 1).copied().unwrap_or("").to_string(),
                root: unescape(f.get(3)?),
            })
        })
        .collect()
}

/// The mount holding `file`: the longest mount point that is a path prefix of it.
pub(super) fn mount_of<'a>(mounts: &'a [Mount], file: &str) -> Option<&'a Mount> {
    let f = Path::new(file);
    mounts.iter().filter(|m| f.starts_with(&m.point)).max_by_key(|m| Path::new(&m.point).components().count())
}

/// `0000:01:00.0`-shaped: the name sysfs gives a PCI function's directory.
pub(super) fn looks_like_function(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

/// The PCI function whose directory holds `dir`, nearest first.
fn function_of(dir: &Path) -> Option<String> {
    dir.ancestors().map(name_of).find(|n| looks_like_function(n))
}

struct Finder {
    blks: Vec<Blk>,
}

impl Finder {
    fn index(&self, name: &str) -> Option<usize> {
        self.blks.iter().position(|b| b.name == name)
    }

    fn ancestors(&self, mut i: usize) -> Vec<usize> {
        let mut v = vec![i];
        while let Some(p) = self.blks[i].parent {
            if v.len() > MAX_DEPTH {
                break;
            }
            v.push(p);
            i = p;
        }
        v
    }

    /// Add a device; `Ok(None)` when it is already known by another route.
    fn add(
        &mut self,
        name: &str,
        dir: PathBuf,
        parent: Option<usize>,
        stacker: Option<&'static str>,
        note: Option<String>,
    ) -> Result<Option<usize>, Error> {
        if let Some(known) = self.index(name) {
            // Reached again from something stacked on it: a holder loop (dm-0 holds dm-1 holds dm-0).
            if let Some(p) = parent {
                if self.ancestors(p).contains(&known) {
                    let mut names: Vec<String> =
                        self.ancestors(p).iter().rev().map(|i| self.blks[*i].name.clone()).collect();
                    names.push(name.to_string());
                    return Err(sysfs_error(format!(
                        "holder loop in sysfs: {} (each lists the next in holders/): sysfs is \
                         inconsistent; cannot tell what uses the device",
                        names.join(" -> ")
                    )));
                }
            }
            return Ok(None);
        }
        if let Some(p) = parent {
            if self.ancestors(p).len() >= MAX_DEPTH {
                return Err(sysfs_error(format!(
                    "block devices stacked more than {MAX_DEPTH} deep above {}: stopped",
                    self.blks[p].name
                )));
            }
        }
        if self.blks.len() >= walk::MAX_ENTRIES {
            return Err(sysfs_error("more block devices than any real machine has: stopped"));
        }
        let dm_name = read_trim(&dir.join("dm/name")).filter(|s| !s.is_empty());
        let dm_kind = read_trim(&dir.join("dm/uuid")).map(|u| {
            if u.starts_with("LVM-") {
                ", LVM"
            } else if u.starts_with("CRYPT-") {
                ", dm-crypt"
            } else {
                ""
            }
        });
        let label = match (&dm_name, dm_kind) {
            (Some(n), k) => format!("{n} ({name}{})", k.unwrap_or("")),
            (None, _) if dir.join("md").is_dir() => format!("{name} (md RAID)"),
            _ => name.to_string(),
        };
        let label = match note {
            Some(n) => format!("{label} ({n})"),
            None => label,
        };
        let is_partition = dir.join("partition").is_file();
        let chain = match parent {
            None => label.clone(),
            // A partition of a plain disk reads on its own: "nvme0n1p2", not "nvme0n1p2 on nvme0n1".
            Some(p) if is_partition && self.blks[p].parent.is_none() && !self.blks[p].head => label.clone(),
            Some(p) => format!("{label} on {}", self.blks[p].chain),
        };
        let function = parent.and_then(|p| self.blks[p].function.clone()).or_else(|| function_of(&dir));
        self.blks.push(Blk {
            name: name.to_string(),
            dev: read_trim(&dir.join("dev")),
            dir,
            dm_name,
            chain,
            parent,
            stacker,
            function,
            head: false,
            fs_siblings: Vec::new(),
        });
        Ok(Some(self.blks.len() - 1))
    }

    /// Partitions of `i` and what holds `i`, recursively.
    fn grow(&mut self, first: usize) -> Result<(), Error> {
        let mut queue = vec![first];
        while let Some(i) = queue.pop() {
            let dir = self.blks[i].dir.clone();
            for (name, p) in entries(&dir)? {
                if walk::is_real_dir(&p) && p.join("partition").is_file() {
                    if let Some(j) = self.add(&name, p, Some(i), None, None)? {
                        queue.push(j);
                    }
                }
            }
            for (name, link) in entries(&dir.join("holders"))? {
                let Some(hdir) = resolve(&link)? else { continue };
                let stacker = if hdir.join("dm").is_dir() {
                    "device-mapper"
                } else if hdir.join("md").is_dir() {
                    "md RAID"
                } else {
                    "the kernel"
                };
                if let Some(j) = self.add(&name, hdir, Some(i), Some(stacker), None)? {
                    queue.push(j);
                }
            }
        }
        Ok(())
    }
}

/// Every block device that depends on the function at `scope.dir`.
pub(super) fn devices(scope: &Scope, mounts: &[Mount]) -> Result<Vec<Blk>, Error> {
    let host = scope.host;
    let f = &scope.dir;
    let mut fd = Finder { blks: Vec::new() };
    let class = host.path("/sys/class/block");
    let mut class_entries = Vec::new();
    for (name, link) in entries(&class)? {
        let Some(real) = resolve(&link)? else { continue };
        class_entries.push((name, real));
    }
    let mut roots = Vec::new();
    // Below the function itself: disks, partitions (handled as partitions of their disk), per-path nodes.
    for (name, real) in &class_entries {
        if real.starts_with(f) && !real.join("partition").is_file() {
            if let Some(i) = fd.add(name, real.clone(), None, None, None)? {
                roots.push(i);
            }
        }
    }
    // NVMe multipath heads through their multipath/ links to per-path nodes below the function.
    for (name, real) in &class_entries {
        let mut via = Vec::new();
        let mut function = None;
        for (path_name, link) in entries(&real.join("multipath"))? {
            if let Some(p) = resolve(&link)?.filter(|p| p.starts_with(f)) {
                function = function.or_else(|| function_of(&p));
                via.push(path_name);
            }
        }
        if !via.is_empty() {
            let note = format!("NVMe multipath head over {}", via.join(", "));
            if let Some(i) = fd.add(name, real.clone(), None, None, Some(note))? {
                fd.blks[i].head = true;
                fd.blks[i].function = function.clone();
                roots.push(i);
            }
        }
    }
    // The same heads through /sys/class/nvme-subsystem, for kernels or trees without multipath/.
    for (subsys, link) in entries(&host.path("/sys/class/nvme-subsystem"))? {
        let Some(sdir) = resolve(&link)? else { continue };
        let mut ours = Vec::new();
        let mut heads = Vec::new();
        let mut function = None;
        for (name, p) in entries(&sdir)? {
            // The head's generic character node (ng0n1, class nvme-generic) sits beside it with a `dev`
            // of its own: only block devices are heads.
            let class = crate::host::state::link_name(&p.join("subsystem"));
            if walk::is_real_dir(&p) && p.join("dev").is_file() && class.as_deref().is_none_or(|c| c == "block") {
                heads.push((name, p));
            } else if fsym(&p) {
                if let Some(c) = resolve(&p)?.filter(|c| c.starts_with(f)) {
                    function = function.or_else(|| function_of(&c));
                    ours.push(name);
                }
            }
        }
        if ours.is_empty() {
            continue;
        }
        for (name, p) in heads {
            let note = format!("NVMe multipath head in {subsys} over controller {}", ours.join(", "));
            if let Some(i) = fd.add(&name, p, None, None, Some(note))? {
                fd.blks[i].head = true;
                fd.blks[i].function = function.clone();
                roots.push(i);
            }
        }
    }
    for i in roots {
        fd.grow(i)?;
    }
    siblings(host, &mut fd.blks)?;
    // Loop devices backed by a file on one of them; repeat while new ones appear (a loop on a
    // filesystem on a loop ...), each round adding at least one device or stopping.
    for _round in 0..MAX_DEPTH {
        let mut added = false;
        for (name, real) in &class_entries {
            if fd.index(name).is_some() {
                continue;
            }
            let Some(file) = read_trim(&real.join("loop/backing_file")).filter(|s| !s.is_empty()) else {
                continue;
            };
            let file = file.trim_end_matches(" (deleted)").to_string();
            let on = match backing_device(host, &file, &fd.blks) {
                Backing::Ours(i) => Some(i),
                Backing::OtherDevice => None,
                Backing::File => {
                    mount_of(mounts, &file).and_then(|m| fd.blks.iter().position(|b| mounted_here(host, m, b)))
                }
            };
            let Some(on) = on else { continue };
            let note = format!("backing file {file}");
            if let Some(j) = fd.add(name, real.clone(), Some(on), Some("the loop driver"), Some(note))? {
                // "loop0 (backing file /data/img) on nvme0n1p1".
                fd.grow(j)?;
                siblings(host, &mut fd.blks)?;
                added = true;
            }
        }
        if !added {
            break;
        }
    }
    Ok(fd.blks)
}

enum Backing {
    /// One of the function's block devices itself (`losetup /dev/loop7 /dev/vdd`).
    Ours(usize),
    /// Another block device.
    OtherDevice,
    /// A file (or a path that cannot be looked up here).
    File,
}

/// What a loop device's backing file is: by the node's device number where the path can be looked
/// up; else (a node in another mount namespace, since removed) by the name under /dev. The kernel
/// makes no holders/ link for a loop device on a block device, so this is the only way to see it.
fn backing_device(host: &crate::host::Host, file: &str, blks: &[Blk]) -> Backing {
    use super::procs::{identify, FileId};
    match identify(host, &host.path(file)) {
        Ok(FileId::Block(d)) => {
            match blks.iter().position(|b| b.dev.as_deref().and_then(super::procs::parse_devno) == Some(d)) {
                Some(i) => Backing::Ours(i),
                None => Backing::OtherDevice,
            }
        }
        Ok(_) => Backing::File,
        Err(_) => match file.strip_prefix("/dev/").and_then(|n| blks.iter().position(|b| b.name == n)) {
            Some(i) => Backing::Ours(i),
            None => Backing::File,
        },
    }
}

/// Multi-device btrfs filesystems: mountinfo names one member as the source (and an anonymous device
/// number), so each member learns the others' names.
fn siblings(host: &crate::host::Host, blks: &mut [Blk]) -> Result<(), Error> {
    for (_, fs) in entries(&host.path("/sys/fs/btrfs"))? {
        let members: Vec<String> = entries(&fs.join("devices"))?.into_iter().map(|(n, _)| n).collect();
        for b in blks.iter_mut().filter(|b| members.contains(&b.name)) {
            b.fs_siblings = members.iter().filter(|m| **m != b.name).cloned().collect();
        }
    }
    Ok(())
}

fn fsym(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether mount `m` is a filesystem on block device `b`: by device number, or by its source
/// (`/dev/nvme0n1p2`, `/dev/mapper/vg-root`, a /dev/disk/by-* link) for filesystems that report an
/// anonymous device number (btrfs).
pub(super) fn mounted_here(host: &crate::host::Host, m: &Mount, b: &Blk) -> bool {
    if b.dev.as_deref() == Some(m.dev.as_str()) {
        return true;
    }
    source_is(host, &m.source, b)
}

fn source_is(host: &crate::host::Host, src: &str, b: &Blk) -> bool {
    if let Some(n) = src.strip_prefix("/dev/mapper/") {
        return b.dm_name.as_deref() == Some(n);
    }
    names_device(host, src, &b.name) || b.fs_siblings.iter().any(|s| names_device(host, src, s))
}

/// Whether a source (`/dev/sda1`, or a /dev/disk/by-* or /dev/VG/LV link to the node) is block device `name`.
fn names_device(host: &crate::host::Host, src: &str, name: &str) -> bool {
    let Some(rest) = src.strip_prefix("/dev/") else { return false };
    rest == name || std::fs::canonicalize(host.path(src)).ok().is_some_and(|p| name_of(&p) == name)
}

/// How a mount point reads: `/ (root filesystem)`, `/boot (boot partition)`.
fn point_words(p: &str) -> String {
    match p {
        "/" => "/ (root filesystem)".into(),
        "/boot" => "/boot (the kernels and initramfs images)".into(),
        "/boot/efi" => "/boot/efi (EFI system partition)".into(),
        "/usr" | "/var" | "/home" => format!("{p} (part of the running system)"),
        _ => p.to_string(),
    }
}

fn on_function(scope: &Scope, b: &Blk) -> String {
    match &b.function {
        Some(f) if *f != scope.addr => format!(" (on {f} below it)"),
        _ => String::new(),
    }
}

/// What the running system uses the block devices for, and which of them it uses directly
/// (mounted here, swap): the exclusive probe leaves those alone.
pub(super) fn holders(scope: &Scope, blks: &[Blk], mounts: &[Mount], swaps: &str) -> (Vec<Holder>, Vec<bool>) {
    let host = scope.host;
    let mut out = Vec::new();
    let mut used = vec![false; blks.len()];
    // Mounts, grouped per device in mountinfo order (the same filesystem can be mounted twice);
    // the root filesystem first, then /boot, then the rest.
    let mut points: Vec<(usize, Vec<String>)> = Vec::new();
    for m in mounts {
        if let Some(i) = blks.iter().position(|b| mounted_here(host, m, b)) {
            match points.iter_mut().find(|(j, _)| *j == i) {
                Some((_, v)) if !v.contains(&m.point) => v.push(m.point.clone()),
                Some(_) => {}
                None => points.push((i, vec![m.point.clone()])),
            }
        }
    }
    let kind_of = |pts: &[String]| {
        if pts.iter().any(|p| p == "/") {
            HolderKind::RootFs
        } else if pts.iter().any(|p| p == "/boot" || p == "/boot/efi") {
            HolderKind::Boot
        } else {
            HolderKind::Mount
        }
    };
    let rank = |k: HolderKind| match k {
        HolderKind::RootFs => 0,
        HolderKind::Boot => 1,
        _ => 2,
    };
    points.sort_by_key(|(_, pts)| rank(kind_of(pts)));
    for (i, pts) in &points {
        used[*i] = true;
        let b = &blks[*i];
        let shown: Vec<String> = pts.iter().take(4).map(|p| point_words(p)).collect();
        let more = if pts.len() > 4 { format!(" and {} more mount points", pts.len() - 4) } else { String::new() };
        out.push(Holder {
            kind: kind_of(pts),
            why: format!("it backs {}{more} through {}{}", shown.join(", "), b.chain, on_function(scope, b)),
            // The running root filesystem cannot be freed: choose another device.
            free: if kind_of(pts) == HolderKind::RootFs {
                Vec::new()
            } else {
                pts.iter().rev().map(|p| format!("umount {p}")).collect()
            },
        });
    }
    // Active swap: a device (partition type) or a file on one of our filesystems.
    for line in swaps.lines().skip(1) {
        let mut f = line.split_whitespace();
        let (Some(src), Some(kind)) = (f.next(), f.next()) else { continue };
        let src = unescape(src);
        if kind == "file" {
            let Some(m) = mount_of(mounts, &src) else { continue };
            if let Some(i) = blks.iter().position(|b| mounted_here(host, m, b)) {
                used[i] = true;
                out.push(Holder {
                    kind: HolderKind::Swap,
                    why: format!(
                        "it backs active swap file {src} through {}{}",
                        blks[i].chain,
                        on_function(scope, &blks[i])
                    ),
                    free: vec![format!("swapoff {src}")],
                });
            }
        } else if let Some(i) = blks.iter().position(|b| source_is(host, &src, b)) {
            used[i] = true;
            out.push(Holder {
                kind: HolderKind::Swap,
                why: format!("it backs active swap through {}{}", blks[i].chain, on_function(scope, &blks[i])),
                free: vec![format!("swapoff {src}")],
            });
        }
    }
    // A device something is stacked on whose top nothing above uses: it is still held open
    // (an LVM volume group, an open LUKS mapping, an assembled array, an attached loop file).
    for (i, b) in blks.iter().enumerate() {
        let Some(stacker) = b.stacker else { continue };
        let has_above = blks.iter().any(|o| o.parent == Some(i) && o.stacker.is_some());
        if used[i] || has_above || (0..blks.len()).any(|j| used[j] && is_above(blks, j, i)) {
            continue;
        }
        let free = match (stacker, &b.dm_name) {
            ("device-mapper", Some(n)) => vec![format!("dmsetup remove {n} (or vgchange -an / cryptsetup close)")],
            ("md RAID", _) => vec![format!("mdadm --stop /dev/{}", b.name)],
            ("the loop driver", _) => vec![format!("losetup -d /dev/{}", b.name)],
            _ => Vec::new(),
        };
        out.push(Holder {
            kind: HolderKind::Stacked,
            why: format!("it carries {}, which {stacker} keeps open{}", b.chain, on_function(scope, b)),
            free,
        });
    }
    (out, used)
}

/// Whether device `j` sits (directly or not) on device `i`.
pub(super) fn is_above(blks: &[Blk], mut j: usize, i: usize) -> bool {
    for _ in 0..=MAX_DEPTH {
        match blks[j].parent {
            Some(p) if p == i => return true,
            Some(p) => j = p,
            None => return false,
        }
    }
    false
}
