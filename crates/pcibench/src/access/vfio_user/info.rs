//! What `info` (and every measurement) knows of a device served over vfio-user: its config space
//! read through region 7, its BARs from the region descriptions, and what the server said about
//! itself. pcibench's own served sim cards (`pcibench serve`) are the simulated card they serve.

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

/// Describe an opened vfio-user device.
pub fn describe_open(dev: &VfioUserDevice, socket: &Path) -> DeviceInfo {
    let address = format!("vfio-user:{}", socket.display());
    let v = &dev.client().version;
    let card = v.pcibench_card().and_then(SimId::from_name);
    let served = Served {
        socket: socket.display().to_string(),
        protocol: format!("{}.{}", v.major, v.minor),
        capabilities: crate::text::clip(&v.capabilities.to_string(), 400).into_owned(),
        pcibench_card: card.map(|c| c.name().to_string()),
        resettable: dev.flags & DEVICE_RESET != 0,
        mapped_bars: dev
            .regions
            .iter()
            .filter(|r| r.index < 6 && r.size > 0 && r.mappable())
            .map(|r| r.index as u8)
            .collect(),
        interrupts: dev
            .irqs
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|&(i, n)| (["INTx", "MSI", "MSI-X", "ERR", "REQ"].get(i as usize).unwrap_or(&"other").to_string(), n))
            .collect(),
    };
    if let Some(id) = card {
        // pcibench's own card: the same description as in process, so rows match the sim's.
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
        .regions
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
        served: Some(served),
    };
    info.fill_model();
    info
}
