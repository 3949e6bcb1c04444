//! Host buffers a card can reach, one file per way of getting them, and `allocator`, which picks
//! the way from the device's access path (`access::DmaPath`) and the user's `--buffer`.

pub mod mapped;
pub mod numa;
pub mod physical;
pub mod region;
pub mod reserved;
pub mod shared;
pub mod sim;
pub mod traced;
pub mod udmabuf;
pub mod vfio;

use super::{BufferSource, DmaAllocator};
use crate::access::{DeviceAccess, DmaPath};
use crate::host::Host;
use crate::{Error, Result};

/// An allocator of `source` buffers that the device opened as `dev` can reach within
/// `dma_bits` address bits.
pub fn allocator(
    host: &Host,
    dev: &dyn DeviceAccess,
    source: &BufferSource,
    dma_bits: u32,
) -> Result<Box<dyn DmaAllocator>> {
    allocator_forced(host, dev, source, dma_bits, false)
}

/// `allocator`, where `force_heap` (`dma --force --buffer heap`) takes movable heap pages
/// without an IOMMU (`physical`'s module docs say why they are refused otherwise).
pub fn allocator_forced(
    host: &Host,
    dev: &dyn DeviceAccess,
    source: &BufferSource,
    dma_bits: u32,
    force_heap: bool,
) -> Result<Box<dyn DmaAllocator>> {
    allocator_on(host, dev, source, dma_bits, force_heap, None)
}

/// `allocator_forced` whose heap and hugepage buffers prefer the device's NUMA node (`numa`).
pub fn allocator_on(
    host: &Host,
    dev: &dyn DeviceAccess,
    source: &BufferSource,
    dma_bits: u32,
    force_heap: bool,
    numa: Option<std::sync::Arc<numa::NodePolicy>>,
) -> Result<Box<dyn DmaAllocator>> {
    let alloc = open_allocator(host, dev, source, dma_bits, force_heap, numa)?;
    // The buffers' source is open (/dev/mem, pagemap, the u-dma-buf node): nothing later needs
    // CAP_SYS_RAWIO or CAP_SYS_ADMIN. CAP_IPC_LOCK stays: VFIO checks it at each DMA map
    // (drivers/vfio/vfio_iommu_type1.c, vfio_dma_do_map).
    use crate::os::privilege::{caps, keep_only, CAP_IPC_LOCK};
    keep_only(caps(&[CAP_IPC_LOCK]), &format!("opening the DMA buffers ({source})"))?;
    Ok(match dev.tracer() {
        Some(t) => Box::new(traced::TracedAllocator::new(alloc, t.clone())),
        None => alloc,
    })
}

fn open_allocator(
    host: &Host,
    dev: &dyn DeviceAccess,
    source: &BufferSource,
    dma_bits: u32,
    force_heap: bool,
    numa: Option<std::sync::Arc<numa::NodePolicy>>,
) -> Result<Box<dyn DmaAllocator>> {
    let huge = *source == BufferSource::Hugepage;
    Ok(match (dev.dma_path()?, source) {
        (DmaPath::Sim(map), BufferSource::Heap | BufferSource::Hugepage) => Box::new(sim::SimAllocator::new(map)),
        (DmaPath::Sim(_), BufferSource::UDmaBuf(name)) => {
            return Err(Error::usage(format!(
                "u-dma-buf {name} is physical memory for a real device: the simulated card's engine reaches only its own host buffers (drop --buffer)"
            )))
        }
        (DmaPath::Shared(map), BufferSource::Heap | BufferSource::Hugepage) => {
            Box::new(shared::SharedAllocator::new(map, dma_bits))
        }
        (DmaPath::Shared(_), BufferSource::UDmaBuf(_) | BufferSource::Reserved { .. }) => {
            return Err(Error::usage(format!(
                "--buffer {source} is physical memory for a real device: a vfio-user model reaches only the memfd buffers shared with it (use --buffer heap)"
            )))
        }
        (DmaPath::Iommu(map), BufferSource::Heap | BufferSource::Hugepage) => {
            Box::new(vfio::VfioAllocator::new(map, host, dma_bits, huge).on_node(numa))
        }
        (DmaPath::Iommu(_), BufferSource::UDmaBuf(name)) => {
            return Err(Error::Unsupported(format!(
                "u-dma-buf {name} has a bus address for u-dma-buf's own device, not one a device behind the IOMMU can use: use --buffer heap or hugepage with --via vfio"
            )))
        }
        (DmaPath::Physical, BufferSource::Heap | BufferSource::Hugepage) => {
            Box::new(physical::PhysicalAllocator::new(host, dma_bits, huge, force_heap).on_node(numa))
        }
        (DmaPath::Physical, BufferSource::UDmaBuf(name)) => Box::new(udmabuf::UDmaBufAllocator::open(host, name, dma_bits)?),
        (DmaPath::Physical, BufferSource::Reserved { start, size, force }) => {
            Box::new(reserved::ReservedAllocator::open(host, *start, *size, dma_bits, *force)?)
        }
        (DmaPath::Sim(_), BufferSource::Reserved { .. }) => {
            return Err(Error::usage(
                "--buffer reserved is physical memory for a real device: the simulated card's engine reaches only its own host buffers (drop --buffer)",
            ))
        }
        // VFIO_IOMMU_MAP_DMA pins the pages of a process mapping; a /dev/mem mapping of reserved
        // memory has no struct page to pin. Not tried: refused rather than half-supported.
        (DmaPath::Iommu(_), BufferSource::Reserved { .. }) => {
            return Err(Error::Unsupported(
                "--buffer reserved is for no-IOMMU runs (the card is given the physical address); behind an IOMMU \
                 (--via vfio) use --buffer heap or hugepage, which VFIO maps at IOVAs"
                    .into(),
            ))
        }
    })
}
