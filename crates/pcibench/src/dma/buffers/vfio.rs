//! DMA buffers behind an IOMMU (VFIO type1, through `access::IommuMap`): anonymous memory (2 MiB hugepages when asked and
//! available) mapped with VFIO_IOMMU_MAP_DMA at an IOVA the device can drive, unmapped on drop.

use super::mapped::MappedBuffer;
use crate::access::IommuMap;
use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Segment};
use crate::host::Host;
use crate::os::memlock;
use crate::os::mmap::{page_size, Mmap, HUGE_2M};
use crate::units::human_size;
use crate::{Error, Result};
use std::sync::Arc;

pub struct VfioAllocator {
    container: Arc<dyn IommuMap>,
    host: Host,
    dma_bits: u32,
    hugepages: bool,
    /// The device's NUMA node, which each buffer prefers (`numa`).
    numa: Option<Arc<super::numa::NodePolicy>>,
}

impl VfioAllocator {
    pub fn new(container: Arc<dyn IommuMap>, host: &Host, dma_bits: u32, hugepages: bool) -> Self {
        VfioAllocator { container, host: host.clone(), dma_bits, hugepages, numa: None }
    }

    /// Buffers on the device's node (`numa`).
    pub fn on_node(mut self, numa: Option<Arc<super::numa::NodePolicy>>) -> Self {
        self.numa = numa;
        self
    }
}

/// Anonymous memory of at least `len` bytes: 2 MiB hugepages when `huge` and the kernel has them
/// reserved, else page-aligned memory and a note saying why. Returns (memory, description, align).
pub fn host_memory(len: usize, huge: bool) -> Result<(Mmap, String, usize)> {
    if len == 0 {
        return Err(Error::usage("a DMA buffer needs a size above 0"));
    }
    let page = page_size();
    let mut note = String::new();
    if huge {
        let size = len.div_ceil(HUGE_2M) * HUGE_2M;
        match Mmap::anonymous(size, true) {
            Ok(m) => return Ok((m, "2 MiB hugepages".into(), HUGE_2M)),
            Err(e) => {
                note = format!(
                    " (no 2 MiB hugepages: {e}: reserve some with echo {} | sudo tee /proc/sys/vm/nr_hugepages)",
                    size / HUGE_2M
                )
            }
        }
    }
    let size = len.div_ceil(page) * page;
    let m = Mmap::anonymous(size, false)
        .map_err(|e| Error::Unsupported(format!("cannot allocate a {} DMA buffer: {e}", human_size(size as u64))))?;
    Ok((m, format!("heap{note}"), page))
}

impl DmaAllocator for VfioAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let (mem, kind, align) = host_memory(len, self.hugepages)?;
        let size = mem.len() as u64;
        memlock::check(&self.host, size, &format!("a {} DMA buffer", human_size(size)))?;
        // Before VFIO pins (faults in) the pages: the policy applies when a page is first touched.
        if let Some(n) = &self.numa {
            n.prefer(&mem);
        }
        let iova = self.container.map_dma(mem.as_ptr() as u64, size, align as u64, self.dma_bits)?;
        if let Some(n) = &self.numa {
            n.record(&mem, align);
        }
        let container = self.container.clone();
        let buf = MappedBuffer::new(
            mem,
            vec![Segment { offset: 0, bus: iova, len: size }],
            Addressing::Iova,
            format!("vfio-mapped {kind} at IOVA {iova:#x}"),
        )
        // Unmap from the IOMMU before the memory goes back. Drop cannot report: a failure here
        // means the container is already gone, which unmaps everything.
        .on_release(move || {
            let _ = container.unmap_dma(iova, size);
        });
        Ok(Box::new(buf))
    }

    fn dma_bits(&self) -> u32 {
        self.dma_bits
    }
}
