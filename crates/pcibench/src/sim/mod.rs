//! The simulated card `sim`: shaped like seed 000's memmapped_blkram (10ee:7024, BAR0 1 MiB,
//! BAR2 128 KiB, BAR4 64 KiB, all 64-bit prefetchable, Gen2 x4, MPS 256, MRRS 512).
//! Its BARs are host memory, so its figures are host-memory figures and are labelled so.

pub mod config_space;
pub mod host_map;
pub mod mem;
mod xdma_engine;
pub mod xdma_model;
#[cfg(test)]
mod xdma_tests;

use crate::pci::config::{Capability, CMD_MEMORY};
use crate::pci::device::{Command, DeviceInfo, LinkStatus};
use crate::pci::resource::{Bar, BarKind};

pub const SIM_VENDOR: u16 = 0x10ee;
pub const SIM_DEVICE: u16 = 0x7024;
/// (index, size) of the sim card's BARs.
pub const SIM_BARS: [(u8, u64); 3] = [(0, 1 << 20), (2, 128 << 10), (4, 64 << 10)];
pub const SIM_LABEL: &str = "simulated card";

/// `resource` flags of a 64-bit prefetchable memory BAR (IORESOURCE_MEM | PREFETCH | MEM_64 | SIZEALIGN).
const SIM_BAR_FLAGS: u64 = 0x0014_220c;

pub fn device_info() -> DeviceInfo {
    let bars = SIM_BARS
        .iter()
        .map(|&(index, size)| Bar {
            index,
            start: 0,
            size,
            kind: BarKind::Memory,
            is_64bit: true,
            prefetchable: true,
            flags: SIM_BAR_FLAGS,
            files: Vec::new(),
        })
        .collect();
    let mut info = DeviceInfo {
        address: "sim".into(),
        simulated: true,
        vendor_id: SIM_VENDOR,
        vendor_name: Some("pcibench".into()),
        device_id: SIM_DEVICE,
        device_name: Some("simulated card (memmapped_blkram shape, BARs in host memory)".into()),
        subsystem_vendor_id: 0x0002,
        subsystem_device_id: 0x0001,
        subsystem_name: None,
        class_code: 0x058000,
        class_name: "Memory controller".into(),
        revision: 0,
        driver: None,
        iommu_group: None,
        numa_node: None,
        parent: None,
        command: Some(Command::from_raw(CMD_MEMORY)),
        bars,
        link: Some(LinkStatus {
            current_speed: Some("5.0 GT/s PCIe".into()),
            current_gen: Some(2),
            current_width: Some(4),
            max_speed: Some("5.0 GT/s PCIe".into()),
            max_gen: Some(2),
            max_width: Some(4),
            mps: Some(256),
            mps_supported: Some(512),
            mrrs: Some(512),
        }),
        model: None,
        aer: None,
        config_bytes: 0,
        capabilities: vec![Capability { id: 0x10, offset: 0x70, name: "PCI Express", version: None }],
        extended_capabilities: Vec::new(),
        warnings: Vec::new(),
    };
    info.fill_model();
    info
}
