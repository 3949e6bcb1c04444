//! DMA buffers without an IOMMU (VFIO no-IOMMU): locked memory whose physical addresses come
//! from /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst). Hugepages keep 2 MiB
//! physically contiguous; 4 KiB pages are coalesced where they happen to be adjacent.
//!
//! mlock keeps pages resident; the kernel may still migrate them (compaction), which the
//! contiguous hugepage or u-dma-buf buffers avoid in practice: prefer them for long runs.

use super::mapped::MappedBuffer;
use super::memlock;
use super::vfio::host_memory;
use crate::access::mapped::page_size;
use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Segment};
use crate::host::Host;
use crate::units::human_size;
use crate::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;

const PM_PRESENT: u64 = 1 << 63;
const PM_SWAPPED: u64 = 1 << 62;
const PM_PFN_MASK: u64 = (1 << 55) - 1;

/// One pagemap entry, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageEntry {
    /// Resident at this page frame number.
    Present(u64),
    /// Resident, but the PFN reads 0: the reader lacks CAP_SYS_ADMIN (since Linux 4.2).
    Hidden,
    Swapped,
    NotPresent,
}

pub fn decode_entry(e: u64) -> PageEntry {
    if e & PM_PRESENT != 0 {
        match e & PM_PFN_MASK {
            0 => PageEntry::Hidden,
            pfn => PageEntry::Present(pfn),
        }
    } else if e & PM_SWAPPED != 0 {
        PageEntry::Swapped
    } else {
        PageEntry::NotPresent
    }
}

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

/// Physical addresses of the pages of `[vaddr, vaddr+len)` from an open /proc/self/pagemap.
pub fn physical_pages(pagemap: &File, vaddr: u64, len: u64, page: u64) -> Result<Vec<u64>> {
    let n = len.div_ceil(page) as usize;
    let mut raw = vec![0u8; n * 8];
    pagemap
        .read_exact_at(&mut raw, (vaddr / page) * 8)
        .map_err(|e| Error::io("cannot read", "/proc/self/pagemap", e))?;
    let mut out = Vec::with_capacity(n);
    for (i, c) in raw.chunks_exact(8).enumerate() {
        let e = u64::from_ne_bytes(c.try_into().unwrap_or_default());
        match decode_entry(e) {
            PageEntry::Present(pfn) => out.push(pfn * page),
            PageEntry::Hidden => {
                return Err(Error::Unsupported(
                    "/proc/self/pagemap shows every physical frame number as 0: reading them needs CAP_SYS_ADMIN, and no-IOMMU DMA needs physical addresses: run as root (or use --buffer u-dma-buf:NAME)".into(),
                ))
            }
            other => {
                return Err(Error::Device(format!(
                    "page {i} of a locked DMA buffer is not resident ({other:?}) after mlock: cannot give the device its address"
                )))
            }
        }
    }
    Ok(out)
}

pub struct PhysicalAllocator {
    host: Host,
    dma_bits: u32,
    hugepages: bool,
}

impl PhysicalAllocator {
    pub fn new(host: &Host, dma_bits: u32, hugepages: bool) -> Self {
        PhysicalAllocator { host: host.clone(), dma_bits, hugepages }
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
        let path = self.host.path("/proc/self/pagemap");
        let pagemap = File::open(&path).map_err(|e| Error::io("cannot open", &path, e))?;
        let page = page_size() as u64;
        let phys = physical_pages(&pagemap, mem.as_ptr() as u64, size, page)?;
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
    use crate::access::mapped::Mmap;
    use std::io::Write;

    #[test]
    fn pagemap_entries() {
        assert_eq!(decode_entry(PM_PRESENT | 0x12345), PageEntry::Present(0x12345));
        // Bits 55-62 are flags (soft-dirty, exclusive, file/shared), never part of the PFN.
        assert_eq!(decode_entry(PM_PRESENT | (1 << 55) | (1 << 56) | (1 << 61) | 0x7), PageEntry::Present(7));
        assert_eq!(decode_entry(PM_PRESENT | (1 << 55)), PageEntry::Hidden);
        assert_eq!(decode_entry(PM_SWAPPED | 0x3), PageEntry::Swapped);
        assert_eq!(decode_entry(0), PageEntry::NotPresent);
    }

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

    #[test]
    fn reads_a_pagemap_and_explains_hidden_pfns() {
        let mut f = tempfile::tempfile().unwrap();
        // Pages 4 and 5 of the address space: PFNs 0x200 and 0x201.
        let mut raw = vec![0u8; 4 * 8];
        raw.extend_from_slice(&(PM_PRESENT | 0x200).to_ne_bytes());
        raw.extend_from_slice(&(PM_PRESENT | 0x201).to_ne_bytes());
        raw.extend_from_slice(&PM_PRESENT.to_ne_bytes());
        f.write_all(&raw).unwrap();
        let phys = physical_pages(&f, 4 * 0x1000, 0x2000, 0x1000).unwrap();
        assert_eq!(phys, vec![0x200000, 0x201000]);
        assert_eq!(coalesce(&phys, 0x1000), vec![Segment { offset: 0, bus: 0x200000, len: 0x2000 }]);
        let e = physical_pages(&f, 5 * 0x1000, 0x2000, 0x1000).unwrap_err().to_string();
        assert!(e.contains("CAP_SYS_ADMIN") && e.contains("run as root"), "{e}");
        assert!(physical_pages(&f, 0, 0x1000, 0x1000).is_err(), "page 0 is not present");
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
