//! DMA buffers without an IOMMU (VFIO no-IOMMU): locked memory whose physical addresses come
//! from /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst). Hugepages keep 2 MiB
//! physically contiguous; 4 KiB pages are coalesced where they happen to be adjacent.
//!
//! mlock keeps pages resident, but the kernel may still migrate them: compaction moves mlocked
//! 4 KiB pages while vm.compact_unevictable_allowed is 1, the default (mm/compaction.c), and the
//! card would then write into a frame that is no longer ours. So without an IOMMU only memory
//! that does not move is taken: hugetlb pages (not migrated by compaction), u-dma-buf,
//! /dev/udmabuf or reserved memory; `--buffer heap` only with `--force` (the CLI warns), and then
//! its frame numbers are read again after each row's transfers (`still_in_place`), failing the
//! run with "a buffer page moved" if one changed. A missing hugepage reservation is an error
//! here, not the heap fallback the IOMMU path takes.

use super::mapped::MappedBuffer;
use super::vfio::host_memory;
use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Segment};
use crate::host::Host;
use crate::os::memlock;
use crate::os::mmap::page_size;
use crate::os::mmap::{Mmap, HUGE_2M};
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
    /// `--force`: take movable heap pages anyway.
    force_heap: bool,
    /// The device's NUMA node, which each buffer prefers (`numa`).
    numa: Option<std::sync::Arc<super::numa::NodePolicy>>,
}

impl PhysicalAllocator {
    pub fn new(host: &Host, dma_bits: u32, hugepages: bool, force_heap: bool) -> Self {
        let pagemap = crate::file::open_regular(&host.path("/proc/self/pagemap"));
        PhysicalAllocator { host: host.clone(), dma_bits, hugepages, pagemap, force_heap, numa: None }
    }

    /// Buffers on the device's node (`numa`).
    pub fn on_node(mut self, numa: Option<std::sync::Arc<super::numa::NodePolicy>>) -> Self {
        self.numa = numa;
        self
    }
}

/// The refusal of memory that can move, with the ways to memory that cannot.
fn movable_refusal(what: &str) -> Error {
    Error::Refused(format!(
        "{what}: without an IOMMU the card is given physical addresses, and the kernel may move 4 KiB pages \
         (compaction) while it holds them; use --buffer hugepage with hugepages reserved (echo 8 | sudo tee \
         /proc/sys/vm/nr_hugepages), u-dma-buf:NAME or reserved:START,SIZE, or add --force to take heap pages \
         anyway (checked after each row; the run fails if one moved)"
    ))
}

/// A physical buffer of movable pages: its frames read again on demand (`still_in_place`).
struct MovableBuffer {
    inner: MappedBuffer,
    pagemap: File,
    frames: Vec<u64>,
}

impl DmaBuffer for MovableBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.inner.as_ptr()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn segments(&self) -> &[Segment] {
        self.inner.segments()
    }
    fn addressing(&self) -> Addressing {
        self.inner.addressing()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn still_in_place(&self) -> Result<()> {
        let page = page_size() as u64;
        let now = physical_pages(&self.pagemap, self.inner.as_ptr() as u64, self.inner.len() as u64, page)?;
        moved(&self.frames, &now, page)
    }
}

/// "a buffer page moved" when any frame in `now` differs from `before`.
fn moved(before: &[u64], now: &[u64], page: u64) -> Result<()> {
    match before.iter().zip(now).enumerate().find(|(_, (a, b))| a != b) {
        None => Ok(()),
        Some((i, (a, b))) => Err(Error::Refused(format!(
            "a buffer page moved: the page at buffer offset {:#x} was at physical {a:#x} and is now at {b:#x} \
             (the kernel migrated it while the card held its address): the figures and data of this run cannot be \
             trusted; use --buffer hugepage, u-dma-buf:NAME or reserved:START,SIZE",
            i as u64 * page
        ))),
    }
}

impl DmaAllocator for PhysicalAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        if !self.hugepages && !self.force_heap {
            return Err(movable_refusal("--buffer heap is refused without an IOMMU"));
        }
        if len == 0 {
            return Err(Error::usage("a DMA buffer needs a size above 0"));
        }
        let (mem, kind) = if self.hugepages {
            // No fallback to heap pages here (see the module docs).
            let size = len.div_ceil(HUGE_2M) * HUGE_2M;
            let m = Mmap::anonymous(size, true).map_err(|e| {
                movable_refusal(&format!("no 2 MiB hugepages for a {} DMA buffer ({e})", human_size(size as u64)))
            })?;
            (m, "2 MiB hugepages".to_string())
        } else {
            let (m, kind, _) = host_memory(len, false)?;
            (m, kind)
        };
        let size = mem.len() as u64;
        memlock::check(&self.host, size, &format!("a {} DMA buffer", human_size(size)))?;
        // Before mlock faults the pages in: the policy applies when a page is first touched.
        if let Some(n) = &self.numa {
            n.prefer(&mem);
        }
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
        if let Some(n) = &self.numa {
            n.record(&mem, if self.hugepages { HUGE_2M } else { page as usize });
        }
        let phys = physical_pages(pagemap, mem.as_ptr() as u64, size, page)?;
        let segments = coalesce(&phys, page);
        check_reach(&segments, self.dma_bits)?;
        let describe = format!(
            "locked {kind} (physical, {} contiguous segment{})",
            segments.len(),
            if segments.len() == 1 { "" } else { "s" }
        );
        let buf = MappedBuffer::new(mem, segments, Addressing::Physical, describe);
        if self.hugepages {
            return Ok(Box::new(buf));
        }
        let pagemap = pagemap.try_clone().map_err(|e| Error::io("cannot reopen", "/proc/self/pagemap", e))?;
        Ok(Box::new(MovableBuffer { inner: buf, pagemap, frames: phys }))
    }

    fn dma_bits(&self) -> u32 {
        self.dma_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let a = PhysicalAllocator::new(&Host::with_root("/"), 64, false, true);
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

    /// M5 (issue 36): heap pages are refused without --force, and a frame that changed fails the run.
    #[test]
    fn movable_pages_are_refused_and_a_moved_page_fails() {
        let a = PhysicalAllocator::new(&Host::with_root("/"), 64, false, false);
        let e = a.alloc(page_size()).err().unwrap().to_string();
        assert!(e.starts_with("--buffer heap is refused without an IOMMU: ") && e.contains("--force"), "{e}");
        moved(&[0x1000, 0x2000], &[0x1000, 0x2000], 0x1000).unwrap();
        let e = moved(&[0x1000, 0x2000], &[0x1000, 0x7000], 0x1000).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "a buffer page moved: the page at buffer offset 0x1000 was at physical 0x2000 and is now at 0x7000"
            ),
            "{e}"
        );
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
