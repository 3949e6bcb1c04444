//! What `info` (and every measurement) knows of a device served over vfio-user: its config space
//! read through region 7, its BARs from the region descriptions, and what the server said about
//! itself. A server that says it is `pcibench serve` with a simulated card is taken at its word
//! only when that word is backed by what it cannot forge (`own_card`): then it is described,
//! and measured without consent flags, as that simulated card.

use super::{VfioUserDevice, CONFIG_REGION, DEVICE_RESET};
use crate::pci::device::Served;
use crate::pci::{config, names, Bar, BarKind, DeviceInfo};
use crate::sim::SimId;
use crate::Result;
use std::path::Path;

/// PCI_BASE_ADDRESS_* bits of a BAR register (PCI Local Bus 3.0 §6.2.5.1).
const BAR_IO: u32 = 1;
const BAR_64: u32 = 0b100;
const BAR_PREFETCH: u32 = 0b1000;

fn rd(b: &[u8], off: usize, n: usize) -> u32 {
    b.get(off..off + n).map_or(0, |s| s.iter().rev().fold(0, |a, &x| (a << 8) | x as u32))
}

/// Describe the device the server at `socket` serves.
pub fn describe(socket: &Path) -> Result<DeviceInfo> {
    let dev = VfioUserDevice::open(socket)?;
    Ok(describe_open(&dev, socket))
}

/// Whether the claim to serve `card` holds: the peer process (SO_PEERCRED, which the kernel
/// fills in) runs this very executable (the same file as /proc/self/exe), as this user or root,
/// and the device it serves has the card's ids and BAR sizes. A relay in front of a real
/// `pcibench serve`, or any other program saying the same, fails the first test.
fn own_card(dev: &VfioUserDevice, card: SimId) -> std::result::Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let peer = dev.client().peer.ok_or("the peer's credentials (SO_PEERCRED) cannot be read")?;
    let pid = peer.pid.as_raw_nonzero().get();
    let me = rustix::process::geteuid().as_raw();
    if peer.uid.as_raw() != me && !peer.uid.is_root() {
        return Err(format!(
            "the server process (pid {pid}) runs as uid {}, not as this user or root",
            peer.uid.as_raw()
        ));
    }
    let exe = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino()));
    let theirs = exe(&format!("/proc/{pid}/exe"))
        .map_err(|e| format!("the server process's executable (pid {pid}) cannot be looked at: {e}"))?;
    if exe("/proc/self/exe").ok() != Some(theirs) {
        return Err(format!("the server process (pid {pid}) is not this pcibench executable"));
    }
    let spec = card.spec().info();
    let mut ids = [0u8; 4];
    let same_ids = crate::access::DeviceAccess::config_read(dev, 0, &mut ids).is_ok()
        && (rd(&ids, 0, 2) as u16, rd(&ids, 2, 2) as u16) == (spec.vendor_id, spec.device_id);
    let same_bars = spec.bars.iter().all(|b| dev.region(b.index as u32).is_some_and(|r| r.size == b.size));
    if !same_ids || !same_bars {
        return Err(format!("what it serves does not have {}'s ids and BARs", card.name()));
    }
    Ok(())
}

/// Describe an opened vfio-user device.
pub fn describe_open(dev: &VfioUserDevice, socket: &Path) -> DeviceInfo {
    let address = format!("vfio-user:{}", socket.display());
    let v = &dev.client().version;
    let claim = v.pcibench_card().map(|c| (c.to_string(), SimId::from_name(c)));
    let (card, claim_refused) = match &claim {
        None => (None, None),
        Some((name, None)) => (None, Some(format!("it says it serves {name}, which is no simulated card here"))),
        Some((name, Some(id))) => match own_card(dev, *id) {
            Ok(()) => (Some(*id), None),
            Err(why) => (None, Some(format!("it says it is pcibench serve with {name}, but {why}"))),
        },
    };
    let bars = dev.regions().iter().filter(|r| r.index < 6 && r.size > 0);
    let served = Served {
        socket: socket.display().to_string(),
        protocol: format!("{}.{}", v.major, v.minor),
        capabilities: crate::text::clip(&v.capabilities.to_string(), 400).into_owned(),
        pcibench_card: card.map(|c| c.name().to_string()),
        claim_refused,
        resettable: dev.flags() & DEVICE_RESET != 0,
        mapped_bars: bars.clone().filter(|r| r.mappable()).map(|r| r.index as u8).collect(),
        partly_mapped: bars.clone().filter(|r| r.partly_mappable()).map(|r| (r.index as u8, r.areas.clone())).collect(),
        unmapped: bars.filter_map(|r| r.fd_refused.clone().map(|w| (r.index as u8, w))).collect(),
        interrupts: dev
            .irqs()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|&(i, n)| (["INTx", "MSI", "MSI-X", "ERR", "REQ"].get(i as usize).unwrap_or(&"other").to_string(), n))
            .collect(),
    };
    if let Some(id) = card {
        // pcibench's own card, established: the same description as in process, so rows match the sim's.
        let mut info = id.spec().info();
        info.address = address;
        info.served = Some(served);
        return info;
    }
    let mut warnings = Vec::new();
    let cfg_len = dev.region(CONFIG_REGION).map_or(0, |r| r.size.min(4096) as usize);
    let mut bytes = vec![0u8; cfg_len];
    if let Err(e) = dev.client().region_read(CONFIG_REGION, 0, &mut bytes) {
        warnings.push(format!("cannot read its config space: {e}"));
        bytes.clear();
    }
    let cfg = config::parse(&bytes);
    warnings.extend(cfg.warnings.iter().cloned());
    let bars = dev
        .regions()
        .iter()
        .filter(|r| r.index < 6 && r.size > 0)
        .map(|r| {
            let reg = rd(&bytes, 0x10 + 4 * r.index as usize, 4);
            Bar {
                index: r.index as u8,
                start: 0,
                size: r.size,
                kind: if reg & BAR_IO != 0 { BarKind::Io } else { BarKind::Memory },
                is_64bit: reg & BAR_IO == 0 && reg & 0b110 == BAR_64,
                prefetchable: reg & BAR_IO == 0 && reg & BAR_PREFETCH != 0,
                flags: 0,
                files: Vec::new(),
            }
        })
        .collect();
    let (vid, did) = (rd(&bytes, 0, 2) as u16, rd(&bytes, 2, 2) as u16);
    let (svid, sdid) = (rd(&bytes, 0x2c, 2) as u16, rd(&bytes, 0x2e, 2) as u16);
    let class_code = rd(&bytes, 9, 3);
    let mut info = DeviceInfo {
        address,
        simulated: false,
        vendor_id: vid,
        vendor_name: names::vendor(vid).map(str::to_string),
        device_id: did,
        device_name: names::device(vid, did).map(str::to_string),
        subsystem_vendor_id: svid,
        subsystem_device_id: sdid,
        subsystem_name: Some(names::subsystem_phrase(vid, did, svid, sdid)),
        class_code,
        class_name: names::class(class_code),
        revision: rd(&bytes, 8, 1) as u8,
        driver: None,
        iommu_group: None,
        numa_node: None,
        physical_slot: None,
        parent: None,
        command: cfg.command.map(crate::pci::device::Command::from_raw),
        bars,
        // The protocol has no ROM region pcibench reads (VFIO_PCI_ROM_REGION_INDEX is not served).
        expansion_rom: None,
        // A model has no PCIe link: its figures are bounded by the model and the socket.
        link: None,
        model: None,
        aer: None,
        config_bytes: bytes.len(),
        capabilities: cfg.capabilities,
        extended_capabilities: cfg.extended_capabilities,
        warnings,
        interrupts: None,
        served: Some(served),
        datapath: None,
    };
    info.fill_model();
    info
}
