//! Ask the kernel whether anyone holds a block device of the function exclusively (`Kernel::
//! exclusive_open`), for what no sysfs link shows: a filesystem mounted only in another mount
//! namespace, an in-kernel storage target (LIO's iblock backstore, nvmet's block backend), and any
//! later kind of exclusive holder.
//!
//! Safety: only the block devices `block::devices` found below the function are probed, only those
//! nothing already accounts for (mounted here, swap, something stacked on them, a process holding
//! them), never stacked ones (their holder is named already), never an NVMe per-path node the
//! kernel hides (`hidden`: it has no node). The node is `/dev/` + the kernel's DEVNAME (its
//! `uevent`), checked to be that device number before it is opened read-only, never for writing,
//! and closed at once. For the length of that open the kernel counts pcibench as the holder, so a
//! mount or array assembly racing it in that instant fails once with EBUSY, as it would against
//! blkid or parted.
//!
//! A device said held is then looked for in every other mount namespace (`namespaces`), which names
//! the mount and a process in it; else it is "held exclusively by the kernel" with the commands that
//! find the holder. A whole disk is busy while one of its partitions is held (block/bdev.c,
//! bd_may_claim): the partition is named, not the disk.

use super::block::{is_above, mounted_here, Blk};
use super::kernel::Exclusive;
use super::procs::{parse_devno, FileId, ProcScan};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;

/// What the probe found: the holders it named, and the devices it could not look at, in words.
pub(super) struct Found {
    pub holders: Vec<Holder>,
    pub unchecked: Vec<String>,
}

/// The node of block device `b`: /dev/ and the kernel's DEVNAME (`uevent`), else its sysfs name with
/// `!` standing for `/` (block/genhd.c names `cciss/c0d0` `cciss!c0d0` in sysfs).
fn node_of(b: &Blk) -> String {
    let uevent = crate::file::read_string(&b.dir.join("uevent"), 4096).unwrap_or_default();
    let name = uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_string)
        .unwrap_or_else(|| b.name.replace('!', "/"));
    format!("/dev/{name}")
}

/// Which devices are already accounted for: used here (`used`, from `block::holders`), something
/// stacked on them, or a process holding them open, themselves or a device above them (a partition
/// mounted accounts for its disk). Each flag is carried down its device's parent chain.
fn accounted(blks: &[Blk], used: &[bool], held: &[(u32, u32)]) -> Vec<bool> {
    let mut out = vec![false; blks.len()];
    for (j, b) in blks.iter().enumerate() {
        let by_process = b.dev.as_deref().and_then(parse_devno).is_some_and(|d| held.contains(&d));
        if used[j] || by_process {
            out[j] = true;
        }
        // A stacked device keeps what it sits on open, not itself.
        let from = if used[j] || by_process {
            Some(j)
        } else if b.stacker.is_some() {
            b.parent
        } else {
            None
        };
        let mut at = from;
        for _ in 0..=super::walk::MAX_DEPTH {
            let Some(i) = at else { break };
            out[i] = true;
            at = blks[i].parent;
        }
    }
    out
}

pub(super) fn holders(scope: &Scope, blks: &[Blk], used: &[bool], scan: &ProcScan) -> Found {
    let host = scope.host;
    let kernel = host.kernel();
    let held: Vec<(u32, u32)> = scan
        .opens
        .iter()
        .filter_map(|o| match o.id {
            Some(FileId::Block(d)) => Some(d),
            _ => None,
        })
        .collect();
    let mut found = Found { holders: Vec::new(), unchecked: Vec::new() };
    let mut busy = vec![false; blks.len()];
    let accounted = accounted(blks, used, &held);
    for (i, b) in blks.iter().enumerate() {
        if b.stacker.is_some() || read_trim(&b.dir.join("hidden")).as_deref() == Some("1") {
            continue;
        }
        let Some(dev) = b.dev.as_deref().and_then(parse_devno) else { continue };
        if accounted[i] {
            continue;
        }
        let node = node_of(b);
        let cannot = |why: String| format!("could not ask the kernel whether {} is held exclusively ({why})", b.name);
        match kernel.exclusive_open(host, &host.path(&node), dev) {
            Exclusive::Free => {}
            Exclusive::Busy => busy[i] = true,
            Exclusive::NoPermission(w) => found.unchecked.push(cannot(format!("{node}: {w}: run it as root"))),
            Exclusive::NoNode => found.unchecked.push(cannot(format!("no node {node}: is devtmpfs mounted on /dev?"))),
            Exclusive::NotTheDevice(w) => {
                found.unchecked.push(cannot(format!("{node} is a {w}, not block device {}:{}", dev.0, dev.1)))
            }
            Exclusive::Failed(w) => found.unchecked.push(cannot(format!("{node}: {w}"))),
        }
    }
    if !busy.contains(&true) {
        return found;
    }
    let mntns = host.mount_namespaces();
    let mut unnamed = false;
    for (i, b) in blks.iter().enumerate() {
        // A disk whose partition is held: the partition says it.
        if !busy[i] || (0..blks.len()).any(|j| busy[j] && is_above(blks, j, i)) {
            continue;
        }
        let on = on_function(scope, b);
        let mut named = false;
        for ns in &mntns.namespaces {
            let mut points: Vec<&str> = Vec::new();
            for m in ns.mounts.iter().filter(|m| mounted_here(host, m, b)) {
                if !points.contains(&m.point.as_str()) {
                    points.push(&m.point);
                }
            }
            if points.is_empty() {
                continue;
            }
            named = true;
            found.holders.push(Holder {
                kind: HolderKind::Mount,
                why: format!(
                    "it backs {} in the mount namespace of PID {} ({}) through {}{on}",
                    points.join(", "),
                    ns.pid,
                    ns.comm,
                    b.chain
                ),
                free: points.iter().rev().map(|p| format!("nsenter -t {} -m umount {p}", ns.pid)).collect(),
            });
        }
        if named {
            continue;
        }
        unnamed = true;
        found.holders.push(Holder {
            kind: HolderKind::Exclusive,
            why: format!(
                "{} is held exclusively by the kernel (a mount in another namespace, a storage target export, \
                 ...){on}",
                b.chain
            ),
            free: vec![format!(
                "find its holder with `lsblk {}`, `findmnt -N PID` (a container's PID), `targetcli ls`, and release it",
                node_of(b)
            )],
        });
    }
    if unnamed {
        found.unchecked.extend(mntns.unchecked.iter().cloned());
    }
    found
}

fn on_function(scope: &Scope, b: &Blk) -> String {
    match &b.function {
        Some(f) if *f != scope.addr => format!(" (on {f} below it)"),
        _ => String::new(),
    }
}
