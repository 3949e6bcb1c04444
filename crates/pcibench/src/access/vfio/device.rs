//! A VFIO device fd: region info (with the sparse-mmap capability), region I/O by pread/pwrite,
//! config space (region 7) and Bus Master, MSI through an eventfd, reset.

use super::caps::{parse_region_info, RegionInfo};
use super::ioctl;
use crate::access::{BarRegion, Mapping, Via};
use crate::mmio::Width;
use crate::os::mmap::check_access;
use crate::pci::PciAddress;
use crate::{Error, Result};
use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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

    /// Route MSI vector 0 to a new eventfd. The returned `Msi` disables MSI again on drop.
    pub fn enable_msi(self: &Arc<Self>) -> Result<Msi> {
        let info = ioctl::irq_info(&self.file, ioctl::VFIO_PCI_MSI_IRQ_INDEX)
            .map_err(|e| Error::io("VFIO_DEVICE_GET_IRQ_INFO failed for", label(&self.addr), e))?;
        if info.count == 0 || info.flags & ioctl::VFIO_IRQ_INFO_EVENTFD == 0 {
            return Err(Error::Unsupported(format!(
                "{} has no MSI capability VFIO can signal through an eventfd",
                self.addr
            )));
        }
        let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| Error::io("cannot create an eventfd for", label(&self.addr), e.into()))?;
        ioctl::set_irq_eventfds(&self.file, ioctl::VFIO_PCI_MSI_IRQ_INDEX, [efd.as_fd()])
            .map_err(|e| Error::io("VFIO_DEVICE_SET_IRQS (MSI) failed for", label(&self.addr), e))?;
        Ok(Msi { efd, device: self.clone() })
    }
}

fn label(addr: &PciAddress) -> PathBuf {
    PathBuf::from(format!("VFIO device {addr}"))
}

/// MSI vector 0 of a VFIO device, signalled through an eventfd.
pub struct Msi {
    efd: OwnedFd,
    device: Arc<Device>,
}

impl Msi {
    /// Wait up to `timeout` for interrupts; returns how many arrived (0 on timeout).
    pub fn wait(&self, timeout: Duration) -> Result<u64> {
        eventfd_wait(&self.efd, timeout)
            .map_err(|e| Error::io("waiting for MSI failed on", label(&self.device.addr), e))
    }
}

impl crate::access::Interrupts for Msi {
    fn kind(&self) -> crate::access::IrqKind {
        crate::access::IrqKind::Msi
    }
    fn vectors(&self) -> u32 {
        1
    }
    fn wait(&self, timeout: Duration) -> Result<crate::access::Fired> {
        Ok(crate::access::Fired::from_counts(vec![Msi::wait(self, timeout)?]))
    }
    fn describe(&self) -> String {
        "MSI vector 0 (VFIO eventfd)".into()
    }
}

impl Drop for Msi {
    fn drop(&mut self) {
        // Best effort: closing the device fd tears the IRQ down anyway (vfio_pci_core_disable).
        let _ = ioctl::set_irq_eventfds(&self.device.file, ioctl::VFIO_PCI_MSI_IRQ_INDEX, []);
    }
}

/// Wait up to `timeout` for the (non-blocking) eventfd; the count of signals since the last wait.
pub(crate) fn eventfd_wait(efd: &OwnedFd, timeout: Duration) -> io::Result<u64> {
    let deadline = std::time::Instant::now() + timeout.min(Duration::from_secs(i32::MAX as u64));
    loop {
        // Clamped above so the conversion cannot fail (about 68 years).
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ts = Timespec::try_from(left).map_err(io::Error::other)?;
        match poll(&mut [PollFd::new(efd, PollFlags::IN)], Some(&ts)) {
            Ok(0) => return Ok(0),
            Ok(_) => break,
            // A signal (Ctrl-C sets the stop flag) ends poll(2) early whatever SA_RESTART says:
            // wait out the rest, so the interrupt being waited for is not lost mid-transfer.
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    // An eventfd read returns exactly its 8-byte counter (eventfd(2)).
    let mut v = [0u8; 8];
    let n = rustix::io::read(efd, &mut v)?;
    if n != v.len() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("eventfd read returned {n} bytes, not 8")));
    }
    Ok(u64::from_ne_bytes(v))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventfd_wait_counts_signals_and_times_out() {
        let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap();
        assert_eq!(eventfd_wait(&efd, Duration::from_millis(1)).unwrap(), 0);
        // Two signals before a wait read as one count of 2, as two MSIs do.
        for _ in 0..2 {
            assert_eq!(rustix::io::write(&efd, &1u64.to_ne_bytes()).unwrap(), 8);
        }
        assert_eq!(eventfd_wait(&efd, Duration::from_secs(u64::MAX)).unwrap(), 2);
        assert_eq!(eventfd_wait(&efd, Duration::ZERO).unwrap(), 0);
    }
}
