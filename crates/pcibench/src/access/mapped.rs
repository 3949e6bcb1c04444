//! A BAR mapped into this process (sysfs resourceN[_wc] or a VFIO region mmap) as a `BarRegion`.

use super::{BarRegion, Mapping, Via};
use crate::mmio::Width;
use crate::os::mmap::{check_access, check_bulk, Mmap};
use crate::Result;

/// A BAR mapped into this process: sysfs resourceN[_wc] or a VFIO region mmap.
pub struct MappedBar {
    /// Registered with the MMIO fault guard; declared before `map` so it unregisters first.
    guard: Option<super::guard::Guarded>,
    map: Mmap,
    index: u8,
    mapping: Mapping,
    via: Via,
    /// The BAR's size (the mapping may be rounded up to a page).
    size: u64,
    /// False for a read-only mapping: single writes are refused rather than faulting.
    writable: bool,
    /// The PCI function it belongs to, once `guarded` names it.
    device: Option<crate::pci::PciAddress>,
}

impl MappedBar {
    pub fn new(map: Mmap, index: u8, size: u64, mapping: Mapping, via: Via) -> Self {
        let size = size.min(map.len() as u64);
        MappedBar { guard: None, map, index, mapping, via, size, writable: true, device: None }
    }

    /// Register the mapping with the MMIO fault guard (`access::guard`) as a BAR of `device`,
    /// with its config region's descriptor where the path has one: a card that vanishes under it
    /// then reads all-ones and is named, instead of SIGBUS ending the process.
    pub fn guarded(mut self, device: &crate::pci::PciAddress, config: Option<(std::os::fd::RawFd, u64)>) -> Self {
        self.guard = super::guard::register(self.map.as_ptr(), self.map.len(), device, config);
        self.device = Some(*device);
        self
    }

    /// Mark a read-only mapping (`Mmap::file(.., writable: false)`).
    pub fn writable(mut self, writable: bool) -> Self {
        self.writable = writable;
        self
    }

    fn check_writable(&self) -> Result<()> {
        if self.writable {
            return Ok(());
        }
        Err(crate::Error::Refused(format!(
            "BAR{} is mapped read-only (opened for reading): writes need --allow-write",
            self.index
        )))
    }
}

impl BarRegion for MappedBar {
    fn index(&self) -> u8 {
        self.index
    }
    fn len(&self) -> u64 {
        self.size
    }
    fn mapping(&self) -> Mapping {
        self.mapping
    }
    fn via(&self) -> Via {
        self.via
    }
    fn ptr(&self) -> Option<*mut u8> {
        Some(self.map.as_ptr())
    }
    fn device(&self) -> Option<String> {
        self.device.map(|d| d.to_string())
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        check_access(self.size, offset, width)?;
        self.map.read(offset, width)
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        self.check_writable()?;
        check_access(self.size, offset, width)?;
        self.map.write(offset, width, value)
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        check_bulk(self.size, offset, buf.len(), width)?;
        let n = width.bytes();
        for (i, chunk) in buf.chunks_exact_mut(n).enumerate() {
            let v = self.map.read(offset + (i * n) as u64, width)?;
            chunk.copy_from_slice(&v.to_le_bytes()[..n]);
        }
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        self.check_writable()?;
        check_bulk(self.size, offset, buf.len(), width)?;
        let n = width.bytes();
        for (i, chunk) in buf.chunks_exact(n).enumerate() {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(chunk);
            self.map.write(offset + (i * n) as u64, width, u64::from_le_bytes(b))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::mmap::page_size;

    #[test]
    fn anonymous_mapping_reads_back_what_was_written() {
        let m = Mmap::anonymous(page_size(), false).unwrap();
        let bar = MappedBar::new(m, 2, 64, Mapping::Uc, Via::Sysfs);
        bar.write(8, Width::B64, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(bar.read(8, Width::B32).unwrap(), 0x5566_7788);
        assert_eq!(bar.read(14, Width::B16).unwrap(), 0x1122);
        bar.write_bulk(16, &[1, 2, 3, 4, 5, 6, 7, 8], Width::B16).unwrap();
        let mut back = [0u8; 8];
        bar.read_bulk(16, &mut back, Width::B32).unwrap();
        assert_eq!(back, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(bar.read(64, Width::B8).is_err(), "the BAR is 64 bytes even if the page is larger");
    }
}
