//! The buffer every mmap-backed allocator hands out (VFIO type1, no-IOMMU physical, u-dma-buf,
//! vfio-user's shared memfds): mapped memory, its bus segments, and what to undo before the memory
//! goes back.

use super::super::{Addressing, DmaBuffer, Segment};
use crate::os::mmap::Mmap;

type Release = Box<dyn FnOnce() + Send + Sync>;

pub struct MappedBuffer {
    mem: Mmap,
    segments: Vec<Segment>,
    addressing: Addressing,
    describe: String,
    /// Runs in `drop` before `mem` is unmapped (IOMMU unmap, u-dma-buf range release).
    release: Option<Release>,
}

impl MappedBuffer {
    pub fn new(mem: Mmap, segments: Vec<Segment>, addressing: Addressing, describe: String) -> Self {
        MappedBuffer { mem, segments, addressing, describe, release: None }
    }

    /// `release` runs when the buffer is dropped, while its memory is still mapped.
    pub fn on_release(mut self, release: impl FnOnce() + Send + Sync + 'static) -> Self {
        self.release = Some(Box::new(release));
        self
    }
}

impl DmaBuffer for MappedBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn segments(&self) -> &[Segment] {
        &self.segments
    }
    fn addressing(&self) -> Addressing {
        self.addressing
    }
    fn describe(&self) -> String {
        self.describe.clone()
    }
}

impl Drop for MappedBuffer {
    fn drop(&mut self) {
        // Fields (the mapping) drop after this body, so the device loses access first.
        if let Some(r) = self.release.take() {
            r();
        }
    }
}
