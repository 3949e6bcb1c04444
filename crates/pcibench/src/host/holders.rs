//! What unbinding a driver would take away: mounted filesystems and active swap on the
//! device's block devices (and on device-mapper / md devices stacked on them), and network
//! interfaces that are up. `setup` refuses to unbind while any exist, unless forced.

use crate::host::state::read_trim;
use crate::host::Host;
use std::fs;
use std::path::{Path, PathBuf};

/// A block device found under the PCI device: its name (`sda1`, `nvme0n1p2`, `dm-0`),
/// `major:minor`, and device-mapper name if it has one.
#[derive(Debug, Clone)]
struct BlockDev {
    name: String,
    dev: Option<String>,
    dm_name: Option<String>,
}

/// Directories under `dir` (not following symlinks: sysfs links point all over the tree).
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth == 0 {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.filter_map(|e| e.ok()) {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
            walk(&e.path(), depth - 1, out);
        }
    }
}

fn subsystem(dir: &Path) -> Option<String> {
    crate::host::state::link_name(&dir.join("subsystem"))
}

fn name_of(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}

/// A directory is a block device when its subsystem is `block`, it sits in a `block/`
/// directory (disks: .../host0/.../block/sda), or it is a partition of one (sda/sda1).
fn is_block(dir: &Path) -> bool {
    let parent = dir.parent();
    subsystem(dir).as_deref() == Some("block")
        || parent.is_some_and(|p| name_of(p) == "block")
        || (dir.join("partition").exists() && parent.is_some_and(is_block))
}

fn is_net(dir: &Path) -> bool {
    subsystem(dir).as_deref() == Some("net") || dir.parent().is_some_and(|p| name_of(p) == "net")
}

fn block_dev(host: &Host, name: &str, dir: &Path) -> BlockDev {
    let dm_name =
        read_trim(&dir.join("dm/name")).or_else(|| read_trim(&host.path(format!("/sys/class/block/{name}/dm/name"))));
    BlockDev { name: name.to_string(), dev: read_trim(&dir.join("dev")), dm_name }
}

/// The block devices under `dev_dir`, plus what is stacked on them (holders: dm, md).
fn block_devices(host: &Host, dirs: &[PathBuf]) -> Vec<BlockDev> {
    let mut out: Vec<BlockDev> = Vec::new();
    let mut queue: Vec<(String, PathBuf)> =
        dirs.iter().filter(|d| is_block(d)).map(|d| (name_of(d), d.clone())).collect();
    while let Some((name, dir)) = queue.pop() {
        if out.iter().any(|b| b.name == name) || out.len() > 256 {
            continue;
        }
        out.push(block_dev(host, &name, &dir));
        if let Ok(rd) = fs::read_dir(dir.join("holders")) {
            for h in rd.filter_map(|e| e.ok()) {
                let hn = h.file_name().to_string_lossy().to_string();
                queue.push((hn.clone(), host.path(format!("/sys/class/block/{hn}"))));
            }
        }
    }
    out
}

/// Why unbinding the driver of the device at `dev_dir` would hurt; empty when it would not.
pub(crate) fn in_use(host: &Host, dev_dir: &Path) -> Vec<String> {
    let root = fs::canonicalize(dev_dir).unwrap_or_else(|_| dev_dir.to_path_buf());
    let mut dirs = Vec::new();
    walk(&root, 12, &mut dirs);
    let mut why = Vec::new();

    let blocks = block_devices(host, &dirs);
    let mounts = fs::read_to_string(host.path("/proc/mounts")).unwrap_or_default();
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(src), Some(dst)) = (f.next(), f.next()) else { continue };
        if let Some(b) = blocks.iter().find(|b| source_is(src, b)) {
            why.push(format!("{} is mounted on {dst}", dev_name(b)));
        }
    }
    // mountinfo names the device by major:minor, which catches /dev/root and by-uuid sources.
    let info = fs::read_to_string(host.path("/proc/self/mountinfo")).unwrap_or_default();
    for line in info.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dev), Some(dst)) = (f.get(2), f.get(4)) else { continue };
        if let Some(b) = blocks.iter().find(|b| b.dev.as_deref() == Some(*dev)) {
            let s = format!("{} is mounted on {dst}", dev_name(b));
            if !why.contains(&s) {
                why.push(s);
            }
        }
    }
    let swaps = fs::read_to_string(host.path("/proc/swaps")).unwrap_or_default();
    for line in swaps.lines().skip(1) {
        let Some(src) = line.split_whitespace().next() else { continue };
        if let Some(b) = blocks.iter().find(|b| source_is(src, b)) {
            why.push(format!("{} is in use as swap", dev_name(b)));
        }
    }

    for d in dirs.iter().filter(|d| is_net(d)) {
        let oper = read_trim(&d.join("operstate"));
        let flags = read_trim(&d.join("flags")).and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
        // IFF_UP is bit 0 of the interface flags (include/uapi/linux/if.h).
        if oper.as_deref() == Some("up") || flags.is_some_and(|f| f & 1 != 0) {
            why.push(format!("network interface {} is up", name_of(d)));
        }
    }
    why
}

fn dev_name(b: &BlockDev) -> String {
    match &b.dm_name {
        Some(n) => format!("/dev/mapper/{n} ({})", b.name),
        None => format!("/dev/{}", b.name),
    }
}

fn source_is(src: &str, b: &BlockDev) -> bool {
    let Some(rest) = src.strip_prefix("/dev/") else { return false };
    rest == b.name || b.dm_name.as_deref().is_some_and(|n| rest.strip_prefix("mapper/") == Some(n))
}
