//! Buffers shared with a device model in another process (vfio-user): each buffer is a memfd this
//! process maps and passes to the model with DMA_MAP, at an IOVA the device's map allocates (not
//! its address here), so the model's DMA reads and writes these very pages (no copy). The memfd
//! is sealed against shrinking before it is passed (F_SEAL_SHRINK, as `dma/cpu/dmabuf.rs` does):
//! a model that truncates it cannot make this process's loads fault. The model reaches nothing
//! else of this process; a buffer is unmapped from it (DMA_UNMAP) before its pages are released.

use super::mapped::MappedBuffer;
use crate::access::SharedMap;
use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Segment};
use crate::os::mmap::{page_size, Mmap};
use crate::{Error, Result};
use rustix::fs::{fcntl_add_seals, memfd_create, MemfdFlags, SealFlags};
use std::fs::File;
use std::os::fd::AsFd;
use std::sync::Arc;

/// Makes buffers a vfio-user server can reach.
pub struct SharedAllocator {
    map: Arc<dyn SharedMap>,
    dma_bits: u32,
}

impl SharedAllocator {
    pub fn new(map: Arc<dyn SharedMap>, dma_bits: u32) -> SharedAllocator {
        SharedAllocator { map, dma_bits }
    }
}

/// A memfd of `size` bytes, sealed so that nobody (this process, or a model it is passed to) can
/// shrink it or add seals.
pub fn sealed_memfd(name: &str, size: u64) -> std::io::Result<File> {
    let file = File::from(memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?);
    file.set_len(size)?;
    fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::SEAL)?;
    Ok(file)
}

impl DmaAllocator for SharedAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        if len == 0 {
            return Err(Error::usage("a DMA buffer needs at least 1 byte"));
        }
        let page = page_size();
        let size =
            len.checked_next_multiple_of(page).ok_or_else(|| Error::usage(format!("{len} bytes is too large")))?;
        let fail = |what: &str, e: std::io::Error| {
            Error::Unsupported(format!(
                "could not make a {size}-byte DMA buffer to share with the vfio-user server ({what}): {e}"
            ))
        };
        let file = sealed_memfd("pcibench-dma", size as u64).map_err(|e| fail("a sealed memfd", e))?;
        let mem = Mmap::file(&file, 0, size, true).map_err(|e| fail("mmap", e))?;
        // Faulted in now (as VFIO's MAP_DMA pins pages): the first transfer must not pay for it.
        for off in (0..size).step_by(page) {
            // SAFETY: inside the fresh mapping, which nothing else uses yet.
            unsafe { mem.as_ptr().add(off).write_volatile(0) };
        }
        let bus = self.map.map_shared(file.as_fd(), size as u64, self.dma_bits)?;
        let segments = vec![Segment { offset: 0, bus, len: size as u64 }];
        let map = Arc::clone(&self.map);
        let describe = "memfd shared with the vfio-user server (DMA_MAP)".to_string();
        // Unmapped from the server before our pages go (the release runs before the mapping is
        // dropped). Best effort: a server that is gone has no mapping left to remove, and the
        // pages stay alive in its process until it unmaps them, so releasing ours is safe either way.
        Ok(Box::new(MappedBuffer::new(mem, segments, Addressing::Iova, describe).on_release(move || {
            let _ = map.unmap_shared(bus, size as u64);
            drop(file);
        })))
    }

    fn dma_bits(&self) -> u32 {
        self.dma_bits
    }
}
