//! Device discovery from sysfs (Documentation/ABI/testing/sysfs-bus-pci). Every file is optional:
//! a missing or garbled one becomes a warning, never a failure of the whole device.

use super::address::PciAddress;
use super::config;
use super::device::{AerCounters, Command, DeviceInfo, LinkStatus};
use super::link::gen_from_speed;
use super::names;
use super::resource::parse_resource;
use crate::host::state::{link_name, read_trim};
use crate::host::Host;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

pub fn device_dir(host: &Host, addr: &PciAddress) -> PathBuf {
    host.pci_devices_dir().join(addr.to_string())
}

/// The endpoints (functions that are not bridges) below a bridge, through switches, sorted.
pub fn endpoints_below(host: &Host, addr: &PciAddress) -> Vec<PciAddress> {
    let Ok(root) = fs::canonicalize(device_dir(host, addr)) else { return Vec::new() };
    let mut out = Vec::new();
    // Real directories only (no symlinks), a PCI hierarchy is at most a few switches deep.
    let mut stack = vec![(root, 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if depth > 8 {
            continue;
        }
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let Some(a) = e.file_name().to_str().and_then(|n| n.parse::<PciAddress>().ok()) else { continue };
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let class = read_trim(&e.path().join("class"))
                .and_then(|c| u32::from_str_radix(c.trim_start_matches("0x"), 16).ok())
                .unwrap_or(0);
            if crate::host::state::class_is_bridge(class) {
                stack.push((e.path(), depth + 1));
            } else {
                out.push(a);
            }
        }
    }
    out.sort();
    out
}

/// Every PCI function the kernel knows, sorted by address.
pub fn list_addresses(host: &Host) -> Result<Vec<PciAddress>> {
    let dir = host.pci_devices_dir();
    let rd = fs::read_dir(&dir).map_err(|e| {
        Error::io_hint("cannot list PCI devices in", &dir, e, "is sysfs mounted? (mount -t sysfs sysfs /sys)")
    })?;
    let mut v: Vec<PciAddress> =
        rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect();
    v.sort();
    Ok(v)
}

fn read_hex(dir: &Path, name: &str, warnings: &mut Vec<String>) -> Option<u32> {
    let s = read_trim(&dir.join(name))?;
    match u32::from_str_radix(s.trim_start_matches("0x"), 16) {
        Ok(v) => Some(v),
        Err(_) => {
            warnings.push(format!("{name} holds {s:?}, not a hex number"));
            None
        }
    }
}

/// How much of a device to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// What `list` prints (ids, names, class, revision, driver): the 64-byte config header only,
    /// as `lspci -nn` reads it. Reading a whole 4 KiB extended config space costs a trapped
    /// config cycle per dword on many hosts (tens of ms on a VM's host bridge).
    Summary,
    /// Everything `info` shows: the whole config space, capabilities, link and its partner, AER.
    Full,
    /// What `health` judges: the link and its partner from the first 256 bytes of config space
    /// (the PCI Express capability, with Device and Link Status, lives there); no BARs, no
    /// extended space (AER counters come from sysfs, not from the AER capability).
    Link,
}

/// Read one device in full. Fails only when the device directory does not exist.
pub fn read_device(host: &Host, addr: &PciAddress) -> Result<DeviceInfo> {
    read_device_at(host, addr, Detail::Full)
}

/// Read one device at `detail`. Fails only when the device directory does not exist.
pub fn read_device_at(host: &Host, addr: &PciAddress, detail: Detail) -> Result<DeviceInfo> {
    read_device_with_config(host, addr, detail).map(|(info, _)| info)
}

/// `read_device_at`, with the config space bytes it read (as much as this reader may see: 64
/// bytes unprivileged).
pub fn read_device_with_config(host: &Host, addr: &PciAddress, detail: Detail) -> Result<(DeviceInfo, Vec<u8>)> {
    let dir = device_dir(host, addr);
    if !dir.is_dir() {
        return Err(Error::NoDevice(addr.to_string()));
    }
    let mut w = Vec::new();
    let ids = read_ids(&dir, &mut w);
    let cfg_path = dir.join("config");
    let cfg_bytes = match read_config(&cfg_path, detail) {
        Ok(b) => b,
        Err(e) => {
            w.push(format!("cannot read {}: {e}", cfg_path.display()));
            Vec::new()
        }
    };
    let cfg = config::parse(&cfg_bytes);
    let revision = ids.revision.or(cfg_bytes.get(8).copied());
    let full = detail == Detail::Full;
    if full {
        w.extend(cfg.warnings.iter().cloned());
        config_size_warning(host, addr, &cfg_bytes, cfg.pcie.is_some(), &mut w);
    }
    let bars = if full { read_bars(&dir, &mut w) } else { Vec::new() };
    let expansion_rom =
        if full { read_trim(&dir.join("resource")).and_then(|r| super::rom::read(&r, &cfg_bytes)) } else { None };
    let link = if detail != Detail::Summary { read_link(&dir, ids.class_code, cfg.pcie.as_ref()) } else { None };
    let parent = fs::canonicalize(&dir).ok().and_then(|p| {
        let up = p.parent()?.file_name()?.to_str()?;
        up.parse::<PciAddress>().ok().map(|a| a.to_string())
    });
    let numa_node = read_trim(&dir.join("numa_node")).and_then(|s| s.parse().ok()).filter(|n: &i32| *n >= 0);
    let (vid, did, svid, sdid) = (ids.vendor, ids.device, ids.subsystem_vendor, ids.subsystem_device);
    let mut info = DeviceInfo {
        datapath: None,
        address: addr.to_string(),
        simulated: false,
        vendor_id: vid,
        vendor_name: names::vendor(vid).map(str::to_string),
        device_id: did,
        device_name: names::device(vid, did).map(str::to_string),
        subsystem_vendor_id: svid,
        subsystem_device_id: sdid,
        subsystem_name: Some(names::subsystem_phrase(vid, did, svid, sdid)),
        class_code: ids.class_code,
        class_name: names::class(ids.class_code),
        revision: revision.unwrap_or(0),
        driver: link_name(&dir.join("driver")),
        iommu_group: iommu_group(&dir, &mut w),
        numa_node,
        physical_slot: if detail != Detail::Summary { super::slot::of(host, addr) } else { None },
        parent,
        command: cfg.command.map(Command::from_raw),
        bars,
        expansion_rom,
        link,
        model: None,
        aer: if full { read_aer(&dir, &mut w) } else { None },
        config_bytes: cfg_bytes.len(),
        capabilities: cfg.capabilities,
        extended_capabilities: cfg.extended_capabilities,
        // Beyond the 64-byte header (root reads it): the capabilities and their tables.
        interrupts: (full && cfg_bytes.len() > 64).then(|| super::intr::read(&cfg_bytes)),
        warnings: w,
        served: None,
    };
    info.fill_model();
    Ok((info, cfg_bytes))
}

/// The IOMMU group the `iommu_group` link names; a link to something that is not a group number
/// is a warning (a broken tree), not "no IOMMU".
fn iommu_group(dir: &Path, w: &mut Vec<String>) -> Option<u32> {
    let name = link_name(&dir.join("iommu_group"))?;
    let n = name.parse().ok();
    if n.is_none() {
        w.push(format!(
            "the iommu_group link points to {:?}, not an IOMMU group number: sysfs is inconsistent; the group is unknown",
            crate::text::clip(&name, 64)
        ));
    }
    n
}

/// Config space as `detail` needs it: the 64-byte header for a summary; else the 256 bytes every
/// function has, and the extended space (to 4 KiB) only where a PCI Express capability says it
/// exists, as lspci does: each dword is a config cycle the kernel makes (often trapped by a
/// hypervisor), so 4 KiB of a host bridge without one costs tens of milliseconds for nothing.
fn read_config(path: &Path, detail: Detail) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = crate::file::open_regular(path)?;
    let first = if detail == Detail::Summary { 64 } else { 256 };
    let mut buf = Vec::with_capacity(4096);
    (&mut f).take(first).read_to_end(&mut buf)?;
    if detail == Detail::Full && buf.len() == 256 && config::parse(&buf).pcie.is_some() {
        f.take(4096 - 256).read_to_end(&mut buf)?;
    }
    Ok(buf)
}

/// The identity files: vendor, device, subsystem ids, class and revision.
struct Ids {
    vendor: u16,
    device: u16,
    subsystem_vendor: u16,
    subsystem_device: u16,
    class_code: u32,
    revision: Option<u8>,
}

fn read_ids(dir: &Path, w: &mut Vec<String>) -> Ids {
    let vendor_id = read_hex(dir, "vendor", w);
    let device_id = read_hex(dir, "device", w);
    if vendor_id.is_none() || device_id.is_none() {
        w.push("vendor or device id file is missing or unreadable".into());
    }
    // Ids are 16 bits (PCI Local Bus 3.0 §6.2.1): a wider value is a broken file, not truncated.
    let id16 = |v: Option<u32>, name: &str, w: &mut Vec<String>| match v.map(u16::try_from) {
        Some(Ok(x)) => Some(x),
        Some(Err(_)) => {
            w.push(format!("{name} holds {:#x}, which is not a 16-bit PCI id", v.unwrap_or(0)));
            None
        }
        None => None,
    };
    let sv = read_hex(dir, "subsystem_vendor", w);
    let sd = read_hex(dir, "subsystem_device", w);
    Ids {
        vendor: id16(vendor_id, "vendor", w).unwrap_or(0xffff),
        device: id16(device_id, "device", w).unwrap_or(0xffff),
        subsystem_vendor: id16(sv, "subsystem_vendor", w).unwrap_or(0),
        subsystem_device: id16(sd, "subsystem_device", w).unwrap_or(0),
        class_code: read_hex(dir, "class", w).unwrap_or(0),
        revision: read_hex(dir, "revision", w).map(|r| r as u8),
    }
}

/// Why the config space read is shorter than the capabilities need, if it is.
fn config_size_warning(host: &Host, addr: &PciAddress, cfg: &[u8], pcie: bool, w: &mut Vec<String>) {
    let privileged = rustix::process::geteuid().is_root();
    if cfg.len() < 64 && !cfg.is_empty() {
        // Every reader gets at least the 64-byte header (pci-sysfs.c, pci_read_config): less is
        // not a permission question.
        w.push(format!(
            "config space is only {} bytes, shorter than the 64-byte header every reader gets: the file is not what the kernel exposes",
            cfg.len()
        ));
    } else if cfg.len() == 64 && privileged && host.is_real() {
        w.push("config space reads only 64 bytes even as root: the kernel limits it (lockdown?), so MPS, MRRS and link come from sysfs alone".into());
    } else if cfg.len() == 64 {
        w.push(format!(
            "only 64 bytes of config space are readable: the capability list (MPS, MRRS, link) needs root: sudo pcibench info {addr}"
        ));
    } else if cfg.len() <= 256 && pcie && !privileged && host.is_real() {
        w.push(format!(
            "extended config space (AER, other extended capabilities) is readable only by root: sudo pcibench info {addr}"
        ));
    }
}

/// BARs from `resource`, with the resourceN / resourceN_wc files that exist for each (warnings
/// to `w`).
pub fn read_bars(dir: &Path, w: &mut Vec<String>) -> Vec<super::resource::Bar> {
    let mut bars = match read_trim(&dir.join("resource")) {
        Some(text) => parse_resource(&text, w),
        None => {
            w.push("resource file is missing: BARs unknown".into());
            Vec::new()
        }
    };
    for bar in &mut bars {
        for name in [format!("resource{}", bar.index), format!("resource{}_wc", bar.index)] {
            if dir.join(&name).exists() {
                bar.files.push(name);
            }
        }
    }
    bars
}

/// The link from sysfs's link files, completed from the PCIe capability, judged against its
/// partner (lspci's rule, `pci::partner`).
fn read_link(dir: &Path, class_code: u32, pcie: Option<&config::PcieCap>) -> Option<LinkStatus> {
    let sysfs_speed = |n: &str| read_trim(&dir.join(n)).filter(|s| !s.is_empty() && !s.starts_with("Unknown"));
    let sysfs_width = |n: &str| read_trim(&dir.join(n)).and_then(|s| s.parse::<u8>().ok()).filter(|w| *w > 0);
    let cur_speed = sysfs_speed("current_link_speed");
    let max_speed = sysfs_speed("max_link_speed");
    if cur_speed.is_none() && max_speed.is_none() && pcie.is_none() {
        return None;
    }
    let cur_gen = cur_speed.as_deref().and_then(gen_from_speed).or(pcie.and_then(|p| p.cur_gen));
    let cur_width = sysfs_width("current_link_width").or(pcie.map(|p| p.cur_width).filter(|w| *w > 0));
    let max_gen = max_speed.as_deref().and_then(gen_from_speed).or(pcie.and_then(|p| p.max_gen));
    let max_width = sysfs_width("max_link_width").or(pcie.map(|p| p.max_width).filter(|w| *w > 0));
    let mut l = LinkStatus::new(
        (cur_speed, cur_gen, cur_width),
        (max_speed, max_gen, max_width),
        (pcie.map(|p| p.mps), pcie.map(|p| p.mps_supported), pcie.map(|p| p.mrrs)),
        pcie.map(|p| p.port_type.to_string()).filter(|t| t != "Unknown"),
    );
    super::partner::assess(dir, class_code, &mut l);
    Some(l)
}

/// AER counters (drivers/pci/pcie/aer.c; parsing in `pci::aer`).
fn read_aer(dir: &Path, w: &mut Vec<String>) -> Option<AerCounters> {
    let mut aer = AerCounters { correctable: None, nonfatal: None, fatal: None, nonzero: BTreeMap::new() };
    let mut any = false;
    for (file, sev) in super::aer::DEV_FILES {
        let Some(text) = read_trim(&dir.join(file)) else { continue };
        any = true;
        let entries = match super::aer::parse(&text) {
            Ok(e) => e,
            Err(e) => {
                w.push(format!("{file}: {e}"));
                continue;
            }
        };
        for (name, v) in &entries {
            if *v > 0 && !name.starts_with("TOTAL_ERR") {
                aer.nonzero.insert(name.clone(), *v);
            }
        }
        let t = super::aer::total(&entries);
        if t.is_none() {
            w.push(format!("{file}: the counters add up past 2^64: not what the kernel writes"));
        }
        match sev {
            "correctable" => aer.correctable = t,
            "nonfatal" => aer.nonfatal = t,
            _ => aer.fatal = t,
        }
    }
    any.then_some(aer)
}
