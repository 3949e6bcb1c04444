//! In-kernel users of a function's devices, read from where each says what it holds: the exclusive
//! probe (`exclusive`) answers only for those that claim a block device exclusively, and these do
//! not, or do but should be named, not guessed (each opens what it was given with the kernel's
//! blkdev_get_by_path/by_dev, Linux 6.1; bdev_file_open_by_path/by_dev since 6.9, where a holder of
//! NULL still claims nothing):
//! - nvmet, the NVMe over Fabrics target: an enabled namespace's `device_path` (configfs
//!   nvmet/subsystems/NQN/namespaces/N/), a block device opened without a holder
//!   (drivers/nvme/target/io-cmd-bdev.c, nvmet_bdev_ns_enable) or, for a file, a node with
//!   `buffered_io` or a file on a filesystem, filp_open (io-cmd-file.c, nvmet_file_ns_enable); a
//!   subsystem's `passthru/device_path`, an NVMe controller's node (passthru.c,
//!   nvmet_passthru_ctrl_enable); the ports it is served on (ports/P/subsystems/NQN);
//! - LIO, the SCSI target: an enabled backstore's `info` (configfs target/core/HBA/DEV/): fileio's
//!   `File:`, filp_open (target_core_file.c, fd_configure_device), a node or a file; iblock's
//!   `Major: Minor:` (exclusive, target_core_iblock.c); pscsi's SCSI address (target_core_pscsi.c:
//!   exclusive for a disk, a bare scsi_device reference for a tape or CD-ROM);
//! - zram's `backing_dev` (drivers/block/zram/zram_drv.c, backing_dev_store: exclusive);
//! - bcache: a registered backing or cache device has a `bcache/` directory (drivers/md/bcache/
//!   super.c, register_bdev and register_cache);
//! - rnbd-server: /sys/class/rnbd-server/ctl/devices/NAME (drivers/block/rnbd/rnbd-srv-sysfs.c; 6.1
//!   opens without FMODE_EXCL, rnbd-srv.c);
//! - xen-blkback: a backend's `physical_device` (drivers/block/xen-blkback/xenbus.c, opened
//!   without a holder);
//! - pktcdvd: /sys/class/pktcdvd/device_map (drivers/block/pktcdvd.c, pkt_setup_dev opens without a
//!   holder);
//! - ocfs2's disk heartbeat: configfs cluster/C/heartbeat/R/dev (fs/ocfs2/cluster/heartbeat.c,
//!   o2hb_region_dev_store, without a holder).
//!
//! A path is looked up here: a block node by its device number, a character node among the
//! function's class devices, a file by the filesystem it lies on. One that cannot be looked up here
//! (it lives in another mount namespace) is "could not check" for a function with block devices.
//! A module that is loaded while configfs is not mounted cannot be read at all: said the same way.
//! Device-mapper, md, drbd, bcache's cached devices, loop devices and swap are stacked or listed
//! elsewhere (`block`); a process serving a device (ublk, qemu-nbd, nbd-server, a TCMU handler)
//! holds it open (`open`).

use super::block::{mount_of, mounted_here, Blk, Mount};
use super::procs::{identify, parse_devno, Devno, FileId};
use super::walk::{dirs_below, entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use std::path::{Path, PathBuf};

/// What the users named, which block devices they account for, and what could not be read.
#[derive(Default)]
pub(super) struct Found {
    pub holders: Vec<Holder>,
    /// Indices into the function's block devices that a user holds (the probe leaves them alone).
    pub used: Vec<usize>,
    pub unchecked: Vec<String>,
}

/// What a kernel user says it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Held {
    /// A path it was given: a device node or a file.
    Path(String),
    /// A block device by number.
    Dev(Devno),
    /// A block device by the kernel's name for it (`%pg`: vdb, vdb1).
    Name(String),
    /// A SCSI device by host:channel:target:lun.
    Scsi(String),
}

/// One in-kernel user and what frees it.
#[derive(Debug, Clone)]
struct User {
    /// "nvmet (the kernel's NVMe over Fabrics target)".
    who: String,
    /// "exports", "passes through".
    verb: &'static str,
    held: Held,
    /// After the device: " as namespace 1 of subsystem nqn.x (port 1: tcp 127.0.0.1:4420)".
    rest: String,
    free: String,
}

const NVMET: &str = "nvmet (the kernel's NVMe over Fabrics target)";
const LIO: &str = "LIO (the kernel's SCSI target)";

fn read(p: &Path) -> Option<String> {
    read_trim(p).filter(|s| !s.is_empty())
}

/// Where configfs is mounted here (mountinfo), if it is.
fn configfs(scope: &Scope, mounts: &[Mount]) -> Option<PathBuf> {
    mounts.iter().find(|m| m.fstype == "configfs").map(|m| scope.host.path(&m.point))
}

/// The users configfs describes, and the modules loaded whose configuration could not be read.
fn configfs_users(scope: &Scope, mounts: &[Mount], out: &mut Vec<User>, unread: &mut Vec<String>) {
    let host = scope.host;
    let Some(cfs) = configfs(scope, mounts) else {
        for (module, what) in [("nvmet", "nvmet"), ("target_core_mod", "LIO"), ("ocfs2_nodemanager", "ocfs2")] {
            if host.path(format!("/sys/module/{module}")).is_dir() {
                unread.push(format!(
                    "{what} is loaded but configfs is not mounted here (systemd mounts it on /sys/kernel/config), so \
                     what it serves cannot be read: mount -t configfs none /sys/kernel/config"
                ));
            }
        }
        return;
    };
    nvmet(&cfs, out);
    lio(&cfs, out);
    for (cluster, c) in entries(&cfs.join("cluster")).unwrap_or_default() {
        for (region, r) in entries(&c.join("heartbeat")).unwrap_or_default() {
            let Some(dev) = read(&r.join("dev")) else { continue };
            out.push(User {
                who: "ocfs2's disk heartbeat (o2hb)".into(),
                verb: "beats on",
                held: Held::Name(dev),
                rest: format!(" (region {region} of cluster {cluster})"),
                free: "stop the ocfs2 cluster stack: umount its ocfs2 volumes, then o2cb offline (or systemctl stop \
                       o2cb)"
                    .into(),
            });
        }
    }
}

fn nvmet(cfs: &Path, out: &mut Vec<User>) {
    let root = cfs.join("nvmet");
    // Each subsystem's ports: "port 1: tcp 127.0.0.1:4420".
    let mut ports: Vec<(String, String)> = Vec::new();
    for (port, p) in entries(&root.join("ports")).unwrap_or_default() {
        let addr = [("addr_trtype", ""), ("addr_traddr", " "), ("addr_trsvcid", ":")]
            .iter()
            .filter_map(|(f, sep)| read(&p.join(f)).map(|v| format!("{sep}{v}")))
            .collect::<String>();
        for (nqn, _) in entries(&p.join("subsystems")).unwrap_or_default() {
            ports.push((nqn, format!("port {port}: {}", addr.trim())));
        }
    }
    for (nqn, s) in entries(&root.join("subsystems")).unwrap_or_default() {
        let served: Vec<&str> = ports.iter().filter(|(n, _)| *n == nqn).map(|(_, w)| w.as_str()).collect();
        let on = if served.is_empty() { String::new() } else { format!(" ({})", served.join("; ")) };
        for (nsid, n) in entries(&s.join("namespaces")).unwrap_or_default() {
            let (Some("1"), Some(path)) = (read(&n.join("enable")).as_deref(), read(&n.join("device_path"))) else {
                continue;
            };
            out.push(User {
                who: NVMET.into(),
                verb: "exports",
                held: Held::Path(path),
                rest: format!(" as namespace {nsid} of subsystem {nqn}{on}"),
                free: format!("echo 0 > /sys/kernel/config/nvmet/subsystems/{nqn}/namespaces/{nsid}/enable"),
            });
        }
        let pt = s.join("passthru");
        if let (Some("1"), Some(path)) = (read(&pt.join("enable")).as_deref(), read(&pt.join("device_path"))) {
            out.push(User {
                who: NVMET.into(),
                verb: "passes through",
                held: Held::Path(path),
                rest: format!(" as subsystem {nqn}{on}"),
                free: format!("echo 0 > /sys/kernel/config/nvmet/subsystems/{nqn}/passthru/enable"),
            });
        }
    }
}

/// `File: /srv/lun0.img  Size: ...` (fd_show_configfs_dev_params): the path, which may hold spaces.
fn fileio_path(info: &str) -> Option<String> {
    let (_, rest) = info.split_once("File: ")?;
    let end = rest.find("  Size: ").unwrap_or(rest.len());
    Some(rest[..end].trim().to_string()).filter(|p| !p.is_empty())
}

/// `Major: 254 Minor: 16` (iblock_show_configfs_dev_params).
fn iblock_dev(info: &str) -> Option<Devno> {
    let (_, rest) = info.split_once("Major: ")?;
    let mut w = rest.split_whitespace();
    let major = w.next()?.parse().ok()?;
    (w.next()? == "Minor:").then_some(())?;
    let minor = w.next()?.parse().ok()?;
    Some((major, minor)).filter(|d| *d != (0, 0))
}

/// `Channel ID: 0 Target ID: 0 LUN: 0 Host ID: 2` or `... Host ID: PHBA Mode`, where the host is the
/// HBA's own number (pscsi_N: pscsi_attach_hba's host_id) (pscsi_show_configfs_dev_params).
fn pscsi_addr(info: &str, hba: &str) -> Option<String> {
    let field = |k: &str| info.split_once(k).and_then(|(_, r)| r.split_whitespace().next().map(str::to_string));
    let (c, t, l) = (field("Channel ID: ")?, field("Target ID: ")?, field("LUN: ")?);
    let h = match field("Host ID: ")? {
        h if h == "PHBA" => hba.rsplit('_').next()?.to_string(),
        h => h,
    };
    Some(format!("{h}:{c}:{t}:{l}"))
}

fn lio(cfs: &Path, out: &mut Vec<User>) {
    for (hba, h) in entries(&cfs.join("target/core")).unwrap_or_default() {
        let kind = hba.rsplit_once('_').map_or(hba.as_str(), |(k, _)| k);
        let store = match kind {
            "fileio" => "fileio",
            "iblock" => "block",
            "pscsi" => "pscsi",
            _ => continue,
        };
        for (dev, d) in entries(&h).unwrap_or_default() {
            if !d.is_dir() || read(&d.join("enable")).as_deref() != Some("1") {
                continue;
            }
            let info = read(&d.join("info")).unwrap_or_default();
            let held = match kind {
                "fileio" => fileio_path(&info).map(Held::Path),
                "iblock" => iblock_dev(&info).map(Held::Dev),
                _ => pscsi_addr(&info, &hba).map(Held::Scsi),
            };
            let Some(held) = held else { continue };
            out.push(User {
                who: LIO.into(),
                verb: "exports",
                held,
                rest: format!(" as backstore {hba}/{dev}"),
                free: format!("delete the backstore: targetcli /backstores/{store} delete {dev}"),
            });
        }
    }
}

/// The users sysfs describes.
fn sysfs_users(scope: &Scope, blks: &[Blk], out: &mut Vec<User>) {
    let host = scope.host;
    for (name, link) in entries(&host.path("/sys/class/block")).unwrap_or_default() {
        if !name.starts_with("zram") {
            continue;
        }
        let dir = resolve(&link).ok().flatten().unwrap_or_default();
        let Some(path) = read(&dir.join("backing_dev")).filter(|p| p != "none") else { continue };
        out.push(User {
            who: name.clone(),
            verb: "writes its pages back to",
            held: Held::Path(path),
            rest: " (its backing_dev)".into(),
            free: format!("swapoff /dev/{name} (or umount it), then echo 1 > /sys/block/{name}/reset"),
        });
    }
    for b in blks.iter().filter(|b| b.dir.join("bcache").is_dir()) {
        let cache = b.dir.join("bcache/set").exists();
        let (role, stop) = if cache { ("cache", "set/unregister") } else { ("backing", "stop") };
        out.push(User {
            who: "bcache".into(),
            verb: "holds",
            held: Held::Name(b.name.clone()),
            rest: format!(" (registered as a {role} device)"),
            free: format!("echo 1 > /sys/class/block/{}/bcache/{stop}", b.name),
        });
    }
    for (name, _) in entries(&host.path("/sys/class/rnbd-server/ctl/devices")).unwrap_or_default() {
        out.push(User {
            who: "rnbd-server (the kernel's RDMA network block device server)".into(),
            verb: "exports",
            held: Held::Name(name.clone()),
            rest: String::new(),
            free: format!(
                "unmap it on its clients, or force_close each session under /sys/class/rnbd-server/ctl/devices/{name}/sessions"
            ),
        });
    }
    for (be, d) in entries(&host.path("/sys/bus/xen-backend/devices")).unwrap_or_default() {
        // "%x:%x": the major and minor in hex.
        let Some(dev) = read(&d.join("physical_device")).and_then(|s| {
            let (a, b) = s.split_once(':')?;
            Some((u32::from_str_radix(a, 16).ok()?, u32::from_str_radix(b, 16).ok()?))
        }) else {
            continue;
        };
        out.push(User {
            who: "xen-blkback".into(),
            verb: "gives",
            held: Held::Dev(dev),
            rest: format!(" to a Xen guest ({be})"),
            free: "detach it from the guest: xl block-detach DOMAIN DEVICE".into(),
        });
    }
    let map = read(&host.path("/sys/class/pktcdvd/device_map")).unwrap_or_default();
    for line in map.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(dev)) = (w.first(), w.get(2).and_then(|d| parse_devno(d))) else { continue };
        out.push(User {
            who: "pktcdvd".into(),
            verb: "writes packets to",
            held: Held::Dev(dev),
            rest: format!(" as {name}"),
            free: format!("pktsetup -d {name}"),
        });
    }
}

/// What a user's hold is, in this function's terms: the block device it rests on (index) and how
/// it reads ("vdb", "file /srv/img on vdb1", "controller nvme0"); None: not this function's.
enum Match {
    Blk(usize, String),
    Other(String),
    None,
    /// The path cannot be looked up here: in words why.
    Unknown(String),
}

fn devno_of(b: &Blk) -> Option<Devno> {
    b.dev.as_deref().and_then(parse_devno)
}

/// The function's character device with number `d` (an NVMe controller's node), by name.
fn char_device(scope: &Scope, d: Devno) -> Option<String> {
    dirs_below(&scope.dir, 6).ok()?.into_iter().find_map(|p| {
        let dev = read(&p.join("dev")).as_deref().and_then(parse_devno)?;
        let block = crate::host::state::link_name(&p.join("subsystem")).as_deref() == Some("block");
        (dev == d && !block).then(|| name_of(&p))
    })
}

fn matched(scope: &Scope, blks: &[Blk], mounts: &[Mount], held: &Held) -> Match {
    let by_dev = |d: Devno| blks.iter().position(|b| devno_of(b) == Some(d));
    let blk = |i: usize| Match::Blk(i, blks[i].chain.clone());
    match held {
        Held::Dev(d) => by_dev(*d).map_or(Match::None, blk),
        Held::Name(n) => blks.iter().position(|b| b.name == *n).map_or(Match::None, blk),
        Held::Scsi(hctl) => {
            let link = scope.host.path(format!("/sys/bus/scsi/devices/{hctl}"));
            let Some(dir) = resolve(&link).ok().flatten().filter(|d| d.starts_with(&scope.dir)) else {
                return Match::None;
            };
            match blks.iter().position(|b| b.dir.starts_with(&dir)) {
                Some(i) => blk(i),
                None => Match::Other(format!("SCSI device {hctl}")),
            }
        }
        Held::Path(p) => match identify(scope.host, &scope.host.path(p)) {
            Ok(FileId::Block(d)) => by_dev(d).map_or(Match::None, blk),
            Ok(FileId::Char(d)) => {
                char_device(scope, d).map_or(Match::None, |n| Match::Other(format!("controller {n}")))
            }
            Ok(FileId::File { dev, .. }) => {
                // The filesystem it lies on: by the device number its mount reports (btrfs: an
                // anonymous one, matched by the mount's source), else by the mount holding the path.
                let on = by_dev(dev).or_else(|| {
                    let devs = format!("{}:{}", dev.0, dev.1);
                    let m = mounts.iter().find(|m| m.dev == devs).or_else(|| mount_of(mounts, p))?;
                    blks.iter().position(|b| mounted_here(scope.host, m, b))
                });
                on.map_or(Match::None, |i| Match::Blk(i, format!("file {p} on {}", blks[i].chain)))
            }
            Err(e) => match p.strip_prefix("/dev/").and_then(|n| blks.iter().position(|b| b.name == n)) {
                Some(i) => blk(i),
                None => Match::Unknown(e.to_string()),
            },
        },
    }
}

/// The in-kernel users holding the function's devices (see the module's words).
pub(super) fn holders(scope: &Scope, blks: &[Blk], mounts: &[Mount]) -> Found {
    let mut users = Vec::new();
    let mut unread = Vec::new();
    configfs_users(scope, mounts, &mut users, &mut unread);
    sysfs_users(scope, blks, &mut users);
    let mut found = Found::default();
    // What could not be read matters only to a function whose storage it could be.
    if !blks.is_empty() {
        found.unchecked.extend(unread);
    }
    for u in users {
        let on = match matched(scope, blks, mounts, &u.held) {
            Match::Blk(i, words) => {
                found.used.push(i);
                format!("{words}{}", below(scope, &blks[i]))
            }
            Match::Other(words) => words,
            Match::None => continue,
            Match::Unknown(why) => {
                if !blks.is_empty() {
                    let Held::Path(p) = &u.held else { continue };
                    found.unchecked.push(format!(
                        "{} {} {p}{}, which cannot be looked up here ({why}): it may lie on this device; look it up \
                         where it was configured",
                        u.who, u.verb, u.rest
                    ));
                }
                continue;
            }
        };
        found.holders.push(Holder {
            kind: HolderKind::Kernel,
            why: format!("{} {} {on}{}", u.who, u.verb, u.rest),
            free: vec![u.free],
        });
    }
    found
}

fn below(scope: &Scope, b: &Blk) -> String {
    match &b.function {
        Some(f) if *f != scope.addr => format!(" (on {f} below it)"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configfs_info_lines_read_as_the_kernel_writes_them() {
        let f = "TCM FILEIO ID: 0        File: /srv/my lun.img  Size: 1048576  Mode: O_DSYNC Async: 0";
        assert_eq!(fileio_path(f).as_deref(), Some("/srv/my lun.img"));
        assert_eq!(fileio_path("TCM FILEIO ID: 0"), None);
        let i = "iBlock device: vdb  UDEV PATH: /dev/vdb  readonly: 0\n        Major: 254 Minor: 16  CLAIMED: IBLOCK";
        assert_eq!(iblock_dev(i), Some((254, 16)));
        assert_eq!(iblock_dev("iBlock device:   readonly: 0\n        Major: 0 Minor: 0"), None);
        let p = "SCSI Device Bus Location: Channel ID: 0 Target ID: 1 LUN: 2 Host ID: 3\n        Vendor: QEMU";
        assert_eq!(pscsi_addr(p, "pscsi_0").as_deref(), Some("3:0:1:2"));
        let p = "SCSI Device Bus Location: Channel ID: 0 Target ID: 0 LUN: 0 Host ID: PHBA Mode";
        assert_eq!(pscsi_addr(p, "pscsi_5").as_deref(), Some("5:0:0:0"));
    }
}
