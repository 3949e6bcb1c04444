//! Buffers the sim card can reach: page-aligned host memory registered in the card's host map.
//! The bus address is the buffer's process virtual address (`Addressing::Sim`); a buffer is
//! reachable only while it lives, and the card's DMA model faults on anything else, as an IOMMU
//! would. `SimAllocator::scattered` gives buffers whose every page is its own bus segment (in
//! reverse order), to exercise drivers on scattered physical pages without a real no-IOMMU host.

use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Segment};
use crate::sim::host_map::{HostMap, Registration};
use crate::sim::mem::{Pages, Scattered, PAGE};
use crate::{Error, Result};
use std::sync::Arc;

/// Makes buffers for one sim card.
pub struct SimAllocator {
    host: Arc<HostMap>,
    scattered: bool,
}

impl SimAllocator {
    /// Buffers that are one bus-contiguous segment each, reachable by the card whose view of
    /// host memory is `host`.
    pub fn new(host: Arc<HostMap>) -> SimAllocator {
        SimAllocator { host, scattered: false }
    }

    /// Buffers whose pages are scattered in bus space (one segment per 4 KiB page).
    pub fn scattered(host: Arc<HostMap>) -> SimAllocator {
        SimAllocator { host, scattered: true }
    }
}

impl DmaAllocator for SimAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        if len == 0 {
            return Err(Error::usage("a DMA buffer needs at least 1 byte"));
        }
        // Faulted in at once, as the pinned buffers of the real paths are (VFIO's MAP_DMA, mlock):
        // the first transfer must not pay the host's page faults.
        let reg = if self.scattered {
            let s = Scattered::new(len)?;
            s.populate();
            self.host.register_scattered(s)
        } else {
            let p = Pages::new("DMA buffer", len)?;
            p.populate(0, p.len() as u64);
            self.host.register_pages(p)
        };
        let pages = reg.len() / PAGE;
        let segments = if reg.is_scattered() {
            (0..pages)
                .map(|i| Segment { offset: (i * PAGE) as u64, bus: reg.bus_of_page(i), len: PAGE as u64 })
                .collect()
        } else {
            vec![Segment { offset: 0, bus: reg.bus_of_page(0), len: reg.len() as u64 }]
        };
        Ok(Box::new(SimBuffer { reg, segments }))
    }

    /// Bus addresses are user-space virtual addresses: at most 47 bits on x86-64 (4-level
    /// paging) and 48 on aarch64, well inside 64.
    fn dma_bits(&self) -> u32 {
        64
    }
}

/// One buffer registered with a sim card; unregistered (then freed) on drop.
pub struct SimBuffer {
    reg: Registration,
    segments: Vec<Segment>,
}

impl DmaBuffer for SimBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.reg.cpu_ptr()
    }
    fn len(&self) -> usize {
        self.reg.len()
    }
    fn segments(&self) -> &[Segment] {
        &self.segments
    }
    fn addressing(&self) -> Addressing {
        Addressing::Sim
    }
    fn describe(&self) -> String {
        if self.reg.is_scattered() {
            "sim host memory, scattered pages (one bus segment per 4 KiB page)".into()
        } else {
            "sim host memory (bus address = process virtual address)".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::sim::SimDevice;

    #[test]
    fn buffers_register_while_alive() {
        let dev = SimDevice::new().unwrap();
        let alloc = SimAllocator::new(dev.host_map().clone());
        let buf = alloc.alloc(5000).unwrap();
        assert_eq!(buf.len(), 8192);
        assert_eq!(buf.addressing(), Addressing::Sim);
        assert_eq!(buf.segments(), &[Segment { offset: 0, bus: buf.as_ptr() as u64, len: 8192 }]);
        assert!(dev.host_map().contains(buf.as_ptr() as u64, 8192));
        assert_eq!(buf.bus_range(100, 50), Some(buf.as_ptr() as u64 + 100));
        let bus = buf.as_ptr() as u64;
        drop(buf);
        assert!(!dev.host_map().contains(bus, 1));
        assert!(alloc.alloc(0).is_err());
    }

    #[test]
    fn scattered_buffers_have_one_segment_per_page() {
        let dev = SimDevice::new().unwrap();
        let buf = SimAllocator::scattered(dev.host_map().clone()).alloc(3 * PAGE).unwrap();
        let segs = buf.segments();
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[0].bus, segs[2].bus + 2 * PAGE as u64, "pages in reverse bus order");
        assert_eq!(buf.bus_range(PAGE as u64 - 4, 8), None, "no contiguous range across pages");
        // SAFETY: the buffer is 3 pages long.
        unsafe { buf.as_ptr().add(PAGE + 9).write(0x5a) };
        let mut b = [0u8];
        dev.host_map().read(segs[1].bus + 9, &mut b).unwrap();
        assert_eq!(b[0], 0x5a, "the card's view and the CPU's are the same memory");
    }
}
