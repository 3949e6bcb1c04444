//! The VFIO access paths: type1 (with an IOMMU) and no-IOMMU, through the legacy container/group
//! interface (Documentation/driver-api/vfio.rst). Our own thin wrapper: the rust-vmm crates do
//! not support no-IOMMU. `ioctl` holds the kernel ABI and all the unsafe; `caps` parses replies.

pub mod caps;
pub mod container;
pub mod device;
pub mod group;
pub mod ioctl;

use super::mapped::MappedBar;
use super::{BarRegion, DeviceAccess, DmaPath, IoMode, Mapping, Via};
use crate::host::Host;
use crate::os::mmap::Mmap;
use crate::pci::PciAddress;
use crate::{Error, Result};
use container::{Container, IommuType};
use device::{Device, SyscallBar};
use group::{Group, GroupKind};
use std::sync::Arc;

/// A device bound to vfio-pci, opened through its group and a container of its own.
///
/// Field order is drop order: the device fd closes before its group, the group before the
/// container (buffers hold the container until they are unmapped).
pub struct VfioDevice {
    device: Arc<Device>,
    group: Group,
    container: Arc<Container>,
    via: Via,
}

impl VfioDevice {
    /// Open `addr` (bound to vfio-pci). `want` is an explicit `--via`; the group decides
    /// between type1 and no-IOMMU, and a mismatch is explained.
    pub fn open(host: &Host, addr: &PciAddress, want: Option<Via>) -> Result<VfioDevice> {
        if matches!(want, Some(Via::Sysfs) | Some(Via::Sim)) {
            return Err(Error::usage(format!(
                "VfioDevice cannot open {addr} --via {}",
                want.map(|v| v.to_string()).unwrap_or_default()
            )));
        }
        let (n, kind, node) = group::locate(host, addr)?;
        match (want, kind) {
            (Some(Via::Vfio), GroupKind::NoIommu) => {
                return Err(Error::Unsupported(format!(
                    "{addr} is in a no-IOMMU VFIO group ({}): there is no IOMMU to translate for it, so type1 VFIO cannot work: use --via vfio-noiommu, or enable the IOMMU (intel_iommu=on / amd_iommu=on)",
                    node.display()
                )))
            }
            (Some(Via::VfioNoiommu), GroupKind::Iommu) => {
                return Err(Error::Unsupported(format!(
                    "{addr} is behind an IOMMU (group {n}, {}): no-IOMMU mode applies only to devices without one: use --via vfio",
                    node.display()
                )))
            }
            _ => {}
        }
        let group = Group::open(host, addr)?;
        let mut container = Container::open(host)?;
        group.attach(&container)?;
        let (iommu, via) = match group.kind() {
            GroupKind::Iommu => (IommuType::Type1v2, Via::Vfio),
            GroupKind::NoIommu => (IommuType::NoIommu, Via::VfioNoiommu),
        };
        container.set_iommu(iommu)?;
        let device = Device::new(group.device_fd(addr)?, *addr)?;
        Ok(VfioDevice { device: Arc::new(device), group, container: Arc::new(container), via })
    }

    pub fn address(&self) -> &PciAddress {
        self.device.address()
    }

    pub fn group(&self) -> &Group {
        &self.group
    }

    pub fn container(&self) -> &Arc<Container> {
        &self.container
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// VFIO_DEVICE_RESET, where the device offers one.
    pub fn reset(&self) -> Result<()> {
        self.device.reset()
    }
}

/// The config region of an open VFIO device. vfio-pci filters what reaches the device
/// (drivers/vfio/pci/vfio_pci_config.c): PCI_STATUS writes are dropped, INTx Disable is
/// virtualized (and followed in hardware while no INTx is set up), the rest of the command
/// register and the latency timer pass through.
struct VfioConfig(Arc<Device>);

impl super::ConfigPort for VfioConfig {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.config_read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.0.config_write(offset, data)
    }
    fn address(&self) -> String {
        self.0.address().to_string()
    }
}

fn uncached_only(addr: &PciAddress, index: u8) -> Error {
    Error::Unsupported(format!(
        "write-combining is unavailable for BAR{index} of {addr} through VFIO: vfio-pci maps BARs uncached only (pgprot_noncached in drivers/vfio/pci/vfio_pci_core.c vfio_pci_core_mmap): use --map uc, or release the device (sudo pcibench setup {addr} --release) and use --via sysfs --map wc"
    ))
}

impl DeviceAccess for VfioDevice {
    fn via(&self) -> Via {
        self.via
    }

    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        let addr = *self.address();
        if index > 5 {
            return Err(Error::usage(format!("BAR index {index} is out of range: BARs are 0-5")));
        }
        let region = self.device.region(index as u32)?;
        if region.size == 0 {
            return Err(Error::usage(format!("{addr} has no BAR{index} (VFIO reports a zero-size region)")));
        }
        if mapping == Mapping::Wc {
            return Err(uncached_only(&addr, index));
        }
        if io == IoMode::Syscall {
            if !region.readable() {
                return Err(Error::Unsupported(format!(
                    "vfio-pci offers no read/write access to BAR{index} of {addr}"
                )));
            }
            return Ok(Box::new(SyscallBar::new(self.device.clone(), region, self.via)));
        }
        if !region.whole_mmap_allowed() {
            let why = match &region.sparse {
                Some(areas) if region.mmappable() => {
                    let a: Vec<String> = areas.iter().map(|(o, s)| format!("{o:#x}-{:#x}", o + s)).collect();
                    format!("only parts of it may be mapped (sparse areas {}; the rest, such as an MSI-X table, is trapped by the kernel)", a.join(", "))
                }
                _ => "vfio-pci does not allow mapping it (an I/O port BAR, or one smaller than a page)".to_string(),
            };
            return Err(Error::Unsupported(format!(
                "cannot mmap BAR{index} of {addr} through VFIO: {why}: use syscall I/O (one pread/pwrite per access) for this BAR"
            )));
        }
        let len = usize::try_from(region.size).map_err(|_| {
            Error::Unsupported(format!("BAR{index} ({} bytes) is larger than the address space", region.size))
        })?;
        let map = Mmap::file(self.device.file(), region.offset, len, true).map_err(|e| {
            Error::io_hint(
                "cannot mmap VFIO region of",
                std::path::Path::new(&format!("VFIO device {addr}")),
                e,
                format!("BAR{index} at device-fd offset {:#x}", region.offset),
            )
        })?;
        let bar = MappedBar::new(map, index, region.size, Mapping::Uc, self.via);
        Ok(Box::new(bar.guarded(&addr, self.config_fd())))
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.device.config_read(offset, buf)
    }

    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.device.config_write(offset, data)
    }

    fn config_fd(&self) -> Option<(std::os::fd::RawFd, u64)> {
        use std::os::fd::AsRawFd;
        let r = self.device.region(ioctl::VFIO_PCI_CONFIG_REGION_INDEX).ok()?;
        Some((self.device.file().as_raw_fd(), r.offset))
    }

    /// MSI-X, MSI or INTx routed to eventfds (`access::irq_fds`; `None` picks as libxdma does).
    fn interrupts(&self, req: super::IrqRequest) -> Result<Box<dyn super::Interrupts>> {
        Ok(Box::new(self.device.interrupts(req)?))
    }

    fn config_port(&self) -> Result<Arc<dyn super::ConfigPort>> {
        Ok(Arc::new(VfioConfig(Arc::clone(&self.device))))
    }

    fn dma_path(&self) -> Result<DmaPath> {
        Ok(match self.container.iommu() {
            Some(IommuType::Type1v2) => DmaPath::Iommu(self.container.clone()),
            _ => DmaPath::Physical,
        })
    }
}
