//! Plain host memory as a buffer: heap (page-aligned anonymous memory) or 2 MiB hugepages, and a
//! device's DMA buffer (VFIO-mapped, physical or a simulated card's) seen from the CPU. All of it
//! is cache-coherent host memory on the architectures pcibench runs on, so there is nothing to sync.

use super::{CpuBuffer, CpuView, Sync};
use crate::dma::DmaBuffer;
use crate::os::mmap::{page_size, Mmap, HUGE_2M};
use crate::units::human_size;
use crate::{Error, Result};

/// Anonymous memory, or a device's DMA buffer.
pub struct Anon {
    name: String,
    /// `heap`, `hugepages` or `device` (the buffers JSON's `kind`).
    kind: &'static str,
    mem: Memory,
}

enum Memory {
    Map(Mmap),
    Dma(Box<dyn DmaBuffer>),
}

impl Anon {
    /// `size` bytes of heap, or of 2 MiB hugepages (refused, with the fix, when none are free).
    pub fn new(size: u64, huge: bool) -> Result<Anon> {
        let len = usize::try_from(size).ok().filter(|l| *l > 0).ok_or_else(|| {
            Error::usage(format!("a buffer of {} cannot be allocated: give --size from 4K up", human_size(size)))
        })?;
        let (len, name) = if huge {
            (len.div_ceil(HUGE_2M) * HUGE_2M, "2 MiB hugepages")
        } else {
            (len.div_ceil(page_size()) * page_size(), "heap")
        };
        let map = Mmap::anonymous(len, huge).map_err(|e| {
            if huge {
                Error::Unsupported(format!(
                    "no {} of 2 MiB hugepages ({e}): reserve some with echo {} | sudo tee /proc/sys/vm/nr_hugepages",
                    human_size(len as u64),
                    len / HUGE_2M
                ))
            } else {
                Error::Unsupported(format!("cannot allocate {} of heap: {e}", human_size(len as u64)))
            }
        })?;
        Ok(Anon { name: name.into(), kind: if huge { "hugepages" } else { "heap" }, mem: Memory::Map(map) })
    }

    /// A device's DMA buffer, for the CPU side of what its engine will move.
    pub fn from_dma(buf: Box<dyn DmaBuffer>) -> Anon {
        Anon { name: buf.describe(), kind: "device", mem: Memory::Dma(buf) }
    }
}

struct View(*mut u8);

impl CpuView for View {
    fn ptr(&self) -> *mut u8 {
        self.0
    }
}

impl CpuBuffer for Anon {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn kind(&self) -> String {
        self.kind.into()
    }

    fn len(&self) -> usize {
        match &self.mem {
            Memory::Map(m) => m.len(),
            Memory::Dma(b) => b.len(),
        }
    }

    fn memory_type(&self, _sync: Sync) -> String {
        "cached (write-back host memory, cache-coherent with DMA)".into()
    }

    fn open(&self, _sync: Sync) -> Result<Box<dyn CpuView + '_>> {
        Ok(Box::new(View(match &self.mem {
            Memory::Map(m) => m.as_ptr(),
            Memory::Dma(b) => b.as_ptr(),
        })))
    }
}
