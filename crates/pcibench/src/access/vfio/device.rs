//! A VFIO device fd: region info (with the sparse-mmap capability), region I/O by pread/pwrite,
//! config space (region 7) and Bus Master, interrupts routed to eventfds (`access::irq_fds`), reset.

use super::caps::{parse_region_info, RegionInfo};
use super::ioctl;
use crate::access::irq_fds::{self, choose, EventfdIrqs, IrqBackend, Offered, INTX_INDEX, MSIX_INDEX, MSI_INDEX};
use crate::access::{BarRegion, IrqRequest, Mapping, Via};
use crate::mmio::Width;
use crate::os::mmap::check_access;
use crate::pci::PciAddress;
use crate::{Error, Result};
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Device {
    file: File,
    addr: PciAddress,
    info: ioctl::vfio_device_info,
}

impl Device {
    pub fn new(file: File, addr: PciAddress) -> Result<Device> {
        let info =
            ioctl::device_info(&file).map_err(|e| Error::io("VFIO_DEVICE_GET_INFO failed for", label(&addr), e))?;
        if info.flags & ioctl::VFIO_DEVICE_FLAGS_PCI == 0 {
            return Err(Error::Unsupported(format!(
                "VFIO device {addr} is not a PCI device (flags {:#x})",
                info.flags
            )));
        }
        Ok(Device { file, addr, info })
    }

    pub fn address(&self) -> &PciAddress {
        &self.addr
    }

    pub fn num_regions(&self) -> u32 {
        self.info.num_regions
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// VFIO_DEVICE_GET_REGION_INFO with its capability chain decoded.
    pub fn region(&self, index: u32) -> Result<RegionInfo> {
        if index >= self.info.num_regions {
            return Err(Error::usage(format!(
                "{} has {} VFIO regions; there is no region {index}",
                self.addr, self.info.num_regions
            )));
        }
        let buf = ioctl::region_info(&self.file, index)
            .map_err(|e| Error::io("VFIO_DEVICE_GET_REGION_INFO failed for", label(&self.addr), e))?;
        parse_region_info(&buf)
    }

    /// pread of `buf.len()` bytes at `offset` into region `r` (the kernel does the accesses).
    pub fn read_region(&self, r: &RegionInfo, offset: u64, buf: &mut [u8]) -> Result<()> {
        let at = r.offset.checked_add(offset).ok_or_else(|| Error::usage("region offset overflows"))?;
        match self.file.read_at(buf, at) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(n) => Err(self.region_io_error(
                r,
                offset,
                io::Error::new(io::ErrorKind::UnexpectedEof, format!("{n} of {} bytes", buf.len())),
            )),
            Err(e) => Err(self.region_io_error(r, offset, e)),
        }
    }

    pub fn write_region(&self, r: &RegionInfo, offset: u64, data: &[u8]) -> Result<()> {
        let at = r.offset.checked_add(offset).ok_or_else(|| Error::usage("region offset overflows"))?;
        match self.file.write_at(data, at) {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => Err(self.region_io_error(
                r,
                offset,
                io::Error::new(io::ErrorKind::WriteZero, format!("{n} of {} bytes", data.len())),
            )),
            Err(e) => Err(self.region_io_error(r, offset, e)),
        }
    }

    fn region_io_error(&self, r: &RegionInfo, offset: u64, e: io::Error) -> Error {
        let what = if r.index == ioctl::VFIO_PCI_CONFIG_REGION_INDEX {
            "config space".to_string()
        } else {
            format!("BAR{}", r.index)
        };
        Error::io_hint(
            "VFIO region I/O failed on",
            label(&self.addr),
            e,
            format!(
                "{what} offset {offset:#x}: is Memory Space enabled and the device responding? see pcibench doctor {}",
                self.addr
            ),
        )
    }

    pub fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let r = self.region(ioctl::VFIO_PCI_CONFIG_REGION_INDEX)?;
        self.read_region(&r, offset, buf)
    }

    pub fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let r = self.region(ioctl::VFIO_PCI_CONFIG_REGION_INDEX)?;
        self.write_region(&r, offset, data)
    }

    pub fn command(&self) -> Result<u16> {
        let mut b = [0u8; 2];
        self.config_read(crate::pci::config::COMMAND as u64, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    pub fn can_reset(&self) -> bool {
        self.info.flags & ioctl::VFIO_DEVICE_FLAGS_RESET != 0
    }

    /// VFIO_DEVICE_RESET (function-level or another reset the kernel found for the device).
    pub fn reset(&self) -> Result<()> {
        if !self.can_reset() {
            return Err(Error::Unsupported(format!(
                "{} offers no reset through VFIO (no FLR, PM or bus reset available)",
                self.addr
            )));
        }
        ioctl::reset(&self.file).map_err(|e| Error::io("VFIO_DEVICE_RESET failed for", label(&self.addr), e))
    }

    /// What the function offers per kind: VFIO_DEVICE_GET_IRQ_INFO's count on the INTx, MSI and
    /// MSI-X indices, where VFIO signals through an eventfd. vfio-pci counts from config space
    /// (vfio_pci_get_irq_count): INTx 1 where the pin is set (0 for a VF, or with nointxmask on a
    /// line that cannot be masked), MSI the Multiple Message Capable vectors, MSI-X the table size.
    pub fn irqs_offered(&self) -> Result<Offered> {
        let count = |index: u32| -> Result<u32> {
            if index >= self.info.num_irqs {
                return Ok(0);
            }
            let info = ioctl::irq_info(&self.file, index)
                .map_err(|e| Error::io("VFIO_DEVICE_GET_IRQ_INFO failed for", label(&self.addr), e))?;
            Ok(if info.flags & ioctl::VFIO_IRQ_INFO_EVENTFD == 0 { 0 } else { info.count })
        };
        Ok(Offered { intx: count(INTX_INDEX)?, msi: count(MSI_INDEX)?, msix: count(MSIX_INDEX)? })
    }

    /// Route the interrupts `req` asks for to eventfds (`access::irq_fds`).
    pub fn interrupts(self: &Arc<Self>, req: IrqRequest) -> Result<EventfdIrqs> {
        let (kind, vectors) = choose(req, self.irqs_offered()?, &label(&self.addr).display().to_string())?;
        irq_fds::route(self.clone(), kind, vectors)
    }
}

fn label(addr: &PciAddress) -> PathBuf {
    PathBuf::from(format!("VFIO device {addr}"))
}

/// The ioctls behind `EventfdIrqs` (include/uapi/linux/vfio.h, VFIO_DEVICE_SET_IRQS).
impl IrqBackend for Device {
    fn trigger(&self, index: u32, fds: &[BorrowedFd<'_>]) -> Result<()> {
        ioctl::set_irq_eventfds(&self.file, index, fds).map_err(|e| {
            let hint = match index {
                // vfio_intx_enable asks for the line shared only where the function can mask
                // INTx itself (pci_2_3); an exclusive request fails on a line another device holds.
                INTX_INDEX => {
                    "INTx needs a line vfio-pci can have: see pcibench doctor (INTx maskable?), or use --irq-kind msi"
                }
                _ => "is another kind already enabled on it, or are vectors short (see /proc/interrupts)?",
            };
            Error::io_hint(
                "VFIO_DEVICE_SET_IRQS (routing interrupts) failed for",
                label(&self.addr),
                e,
                hint.to_string(),
            )
        })
    }
    fn disable(&self, index: u32) -> Result<()> {
        ioctl::set_irq_eventfds(&self.file, index, &[])
            .map_err(|e| Error::io("VFIO_DEVICE_SET_IRQS (disabling interrupts) failed for", label(&self.addr), e))
    }
    fn unmask(&self, index: u32) -> Result<()> {
        ioctl::unmask_irq(&self.file, index)
            .map_err(|e| Error::io("VFIO_DEVICE_SET_IRQS (unmasking INTx) failed for", label(&self.addr), e))
    }
    fn via(&self) -> &'static str {
        "VFIO eventfd"
    }
    fn device(&self) -> String {
        label(&self.addr).display().to_string()
    }
}

/// A BAR reached by one pread/pwrite on the device fd per access: no CPU mapping, every access a
/// system call (seed 002's slowness, kept for comparison and for BARs that cannot be mmapped).
pub struct SyscallBar {
    device: Arc<Device>,
    region: RegionInfo,
    via: Via,
}

impl SyscallBar {
    pub fn new(device: Arc<Device>, region: RegionInfo, via: Via) -> Self {
        SyscallBar { device, region, via }
    }
}

impl BarRegion for SyscallBar {
    fn index(&self) -> u8 {
        self.region.index as u8
    }
    fn len(&self) -> u64 {
        self.region.size
    }
    fn mapping(&self) -> Mapping {
        Mapping::Uc
    }
    fn via(&self) -> Via {
        self.via
    }
    fn device(&self) -> Option<String> {
        Some(self.device.address().to_string())
    }
    fn ptr(&self) -> Option<*mut u8> {
        None
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        check_access(self.region.size, offset, width)?;
        let mut b = [0u8; 8];
        self.device.read_region(&self.region, offset, &mut b[..width.bytes()])?;
        Ok(u64::from_le_bytes(b))
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        check_access(self.region.size, offset, width)?;
        crate::os::mmap::check_value(width, value)?;
        self.device.write_region(&self.region, offset, &value.to_le_bytes()[..width.bytes()])
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        crate::os::mmap::check_bulk(self.region.size, offset, buf.len(), width)?;
        let n = width.bytes();
        for (i, chunk) in buf.chunks_exact_mut(n).enumerate() {
            self.device.read_region(&self.region, offset + (i * n) as u64, chunk)?;
        }
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        crate::os::mmap::check_bulk(self.region.size, offset, buf.len(), width)?;
        let n = width.bytes();
        for (i, chunk) in buf.chunks_exact(n).enumerate() {
            self.device.write_region(&self.region, offset + (i * n) as u64, chunk)?;
        }
        Ok(())
    }
}
