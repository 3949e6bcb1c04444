//! DMA buffers without an IOMMU (VFIO no-IOMMU): locked memory whose physical addresses come
//! from /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst). Hugepages keep 2 MiB
//! physically contiguous; 4 KiB pages are coalesced where they happen to be adjacent.
//!
//! mlock keeps pages resident; the kernel may still migrate them (compaction), which the
//! contiguous hugepage or u-dma-buf buffers avoid in practice: prefer them for long runs.

use super::mapped::MappedBuffer;
use super::vfio::host_memory;
use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Segment};
use crate::host::Host;
use crate::os::memlock;
use crate::os::mmap::page_size;
use crate::os::pagemap::physical_pages;
use crate::units::human_size;
use crate::{Error, Result};
use std::fs::File;

/// Physical addresses of consecutive pages → bus-contiguous segments (merged when adjacent).
pub fn coalesce(phys: &[u64], page: u64) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for (i, &p) in phys.iter().enumerate() {
        match out.last_mut() {
            Some(s) if s.bus + s.len == p => s.len += page,
            _ => out.push(Segment { offset: i as u64 * page, bus: p, len: page }),
        }
    }
    out
}

/// Every segment must end within `dma_bits` address bits, or the device would reach elsewhere.
pub fn check_reach(segments: &[Segment], dma_bits: u32) -> Result<()> {
    if dma_bits >= 64 {
        return Ok(());
    }
    let limit = (1u64 << dma_bits) - 1;
    match segments.iter().find(|s| s.bus.saturating_add(s.len - 1) > limit) {
        None => Ok(()),
        Some(s) => Err(Error::Refused(format!(
            "buffer memory at physical {:#x}-{:#x} is above the device's {dma_bits}-bit DMA reach (--dma-bits {dma_bits}): no DMA was started; use a u-dma-buf reserved low (e.g. CMA below 4 GiB), or raise --dma-bits if the device drives more address bits",
            s.bus,
            s.bus + s.len
        ))),
    }
}

pub struct PhysicalAllocator {
    host: Host,
    dma_bits: u32,
    hugepages: bool,
    /// /proc/self/pagemap, opened once here: whether it shows frame numbers is decided by the
    /// opener's CAP_SYS_ADMIN (fs/proc/task_mmu.c, pagemap_read: file_ns_capable on the file),
    /// so it stays usable after a privileged pcibench gives its capabilities up.
    pagemap: std::io::Result<File>,
}

impl PhysicalAllocator {
    pub fn new(host: &Host, dma_bits: u32, hugepages: bool) -> Self {
        let pagemap = crate::file::open_regular(&host.path("/proc/self/pagemap"));
        PhysicalAllocator { host: host.clone(), dma_bits, hugepages, pagemap }
    }
}

impl DmaAllocator for PhysicalAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let (mem, kind, _) = host_memory(len, self.hugepages)?;
        let size = mem.len() as u64;
        memlock::check(&self.host, size, &format!("a {} DMA buffer", human_size(size)))?;
        mem.lock().map_err(|e| {
            Error::Unsupported(format!(
                "cannot lock a {} DMA buffer in memory (mlock: {e}): raise the locked-memory limit (ulimit -l unlimited) or run as root",
                human_size(size)
            ))
        })?;
        let pagemap = self.pagemap.as_ref().map_err(|e| {
            let path = self.host.path("/proc/self/pagemap");
            Error::io("cannot open", &path, std::io::Error::new(e.kind(), e.to_string()))
        })?;
        let page = page_size() as u64;
        let phys = physical_pages(pagemap, mem.as_ptr() as u64, size, page)?;
        let segments = coalesce(&phys, page);
        check_reach(&segments, self.dma_bits)?;
        let describe = format!(
            "locked {kind} (physical, {} contiguous segment{})",
            segments.len(),
            if segments.len() == 1 { "" } else { "s" }
        );
        Ok(Box::new(MappedBuffer::new(mem, segments, Addressing::Physical, describe)))
    }

    fn dma_bits(&self) -> u32 {
        self.dma_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::mmap::Mmap;

    #[test]
    fn coalesces_adjacent_pages() {
        let p = 0x1000;
        let segs = coalesce(&[0x10000, 0x11000, 0x12000, 0x40000, 0x3f000, 0x40000], p);
        assert_eq!(
            segs,
            vec![
                Segment { offset: 0, bus: 0x10000, len: 0x3000 },
                Segment { offset: 0x3000, bus: 0x40000, len: 0x1000 },
                Segment { offset: 0x4000, bus: 0x3f000, len: 0x2000 },
            ]
        );
        assert!(coalesce(&[], p).is_empty());
    }

    #[test]
    fn refuses_memory_beyond_the_dma_reach() {
        let segs = [Segment { offset: 0, bus: 0xffff_f000, len: 0x1000 }];
        assert!(check_reach(&segs, 32).is_ok());
        let segs = [Segment { offset: 0, bus: 0xffff_f000, len: 0x2000 }];
        let e = check_reach(&segs, 32).unwrap_err().to_string();
        assert!(e.contains("32-bit DMA reach") && e.contains("no DMA was started"), "{e}");
        assert!(check_reach(&segs, 64).is_ok());
    }

    /// On the real host: locked memory gets physical addresses when we may read them, and the
    /// refusal names the fix when we may not.
    #[test]
    fn locks_memory_and_finds_its_physical_pages() {
        let a = PhysicalAllocator::new(&Host::with_root("/"), 64, false);
        match a.alloc(3 * page_size()) {
            Ok(b) => {
                assert_eq!(b.addressing(), Addressing::Physical);
                assert_eq!(b.segments().iter().map(|s| s.len).sum::<u64>(), 3 * page_size() as u64);
                assert!(b.segments().iter().all(|s| s.bus != 0 && s.bus % page_size() as u64 == 0));
                assert!(b.describe().starts_with("locked heap (physical"), "{}", b.describe());
            }
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("CAP_SYS_ADMIN") || e.contains("ulimit -l"), "{e}");
            }
        }
    }

    #[test]
    fn bus_range_needs_one_segment() {
        let buf = MappedBuffer::new(
            Mmap::anonymous(0x3000, false).unwrap(),
            coalesce(&[0x10000, 0x11000, 0x30000], 0x1000),
            Addressing::Physical,
            String::new(),
        );
        assert_eq!(buf.bus_range(0x800, 0x1000), Some(0x10800));
        assert_eq!(buf.bus_range(0x1800, 0x1000), None, "crosses into a non-adjacent page");
    }
}
