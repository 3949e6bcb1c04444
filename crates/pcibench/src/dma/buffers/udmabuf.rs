//! DMA buffers from a u-dma-buf device (ikwzm/u-dma-buf): memory the driver reserved physically
//! contiguous at load time. `/dev/NAME` is mmapped; its bus address is
//! /sys/class/u-dma-buf/NAME/phys_addr and its size /sys/class/u-dma-buf/NAME/size. Each
//! allocation takes a page-aligned piece of it. The mapping is opened without O_SYNC, so it is
//! cached: right for cache-coherent DMA (x86); non-coherent hosts need u-dma-buf's sync_* files.

use super::region::Region;
use crate::dma::{DmaAllocator, DmaBuffer, Segment};
use crate::host::Host;
use crate::os::mmap::Mmap;
use crate::units::human_size;
use crate::{Error, Result};
use std::fs::OpenOptions;
use std::path::PathBuf;

pub struct UDmaBufAllocator {
    host: Host,
    name: String,
    dev: PathBuf,
    phys: u64,
    size: u64,
    dma_bits: u32,
    region: Region,
}

/// u-dma-buf prints phys_addr with %pad (0x-prefixed hex) and size as decimal; take either form.
pub fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl UDmaBufAllocator {
    pub fn open(host: &Host, name: &str, dma_bits: u32) -> Result<UDmaBufAllocator> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(Error::usage(format!("invalid u-dma-buf name '{name}': give the device name, e.g. udmabuf0")));
        }
        let class = host.path(format!("/sys/class/u-dma-buf/{name}"));
        if !class.is_dir() {
            return Err(Error::Unsupported(format!(
                "no u-dma-buf named {name} ({} is missing): load the driver with a buffer, e.g. sudo insmod u-dma-buf.ko udmabuf0=0x1000000, then ls /sys/class/u-dma-buf",
                class.display()
            )));
        }
        let attr = |a: &str| -> Result<u64> {
            let p = class.join(a);
            let text = crate::file::read_string(&p, crate::file::read::KERNEL_MAX)
                .map_err(|e| Error::io("cannot read", &p, e))?;
            parse_number(&text)
                .ok_or_else(|| Error::Device(format!("{} holds {:?}, not a number", p.display(), text.trim())))
        };
        let phys = attr("phys_addr")?;
        let size = attr("size")?;
        if size == 0 {
            return Err(Error::Device(format!("u-dma-buf {name} reports size 0")));
        }
        Ok(UDmaBufAllocator {
            name: name.to_string(),
            host: host.clone(),
            dev: host.path(format!("/dev/{name}")),
            phys,
            size,
            dma_bits,
            region: Region::new(phys, size),
        })
    }

    pub fn phys_addr(&self) -> u64 {
        self.phys
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

impl DmaAllocator for UDmaBufAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let p = self.region.reserve(len, |want, used| {
            Error::Unsupported(format!(
                "u-dma-buf {} has no free {} ({} of {} in use): load it with a larger buffer (udmabuf0=SIZE) or use smaller transfers",
                self.name,
                human_size(want),
                human_size(used),
                human_size(self.size)
            ))
        })?;
        let release = |e: Error| {
            self.region.release(&p);
            e
        };
        super::physical::check_reach(&[Segment { offset: 0, bus: p.bus, len: p.len }], self.dma_bits)
            .map_err(release)?;
        let file = self.host.open_node(&self.dev, OpenOptions::new().read(true).write(true)).map_err(|e| {
            release(Error::io_hint(
                "cannot open",
                &self.dev,
                e,
                "u-dma-buf devices are root-only by default: run as root or chmod the node",
            ))
        })?;
        let mem = Mmap::file(&file, p.off, p.len as usize, true)
            .map_err(|e| release(Error::io("cannot mmap", &self.dev, e)))?;
        let describe = format!("u-dma-buf {} at physical {:#x}", self.name, p.bus);
        Ok(Box::new(self.region.buffer(p, mem, describe)))
    }

    fn dma_bits(&self) -> u32 {
        self.dma_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::Addressing;
    use crate::os::mmap::page_size;
    use std::fs;

    /// A sysroot with /sys/class/u-dma-buf/udmabuf0 and a plain 64 KiB file as /dev/udmabuf0.
    fn fixture(phys: &str, size: &str) -> (tempfile::TempDir, Host) {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let class = host.path("/sys/class/u-dma-buf/udmabuf0");
        fs::create_dir_all(&class).unwrap();
        fs::write(class.join("phys_addr"), format!("{phys}\n")).unwrap();
        fs::write(class.join("size"), format!("{size}\n")).unwrap();
        fs::create_dir_all(host.path("/dev")).unwrap();
        fs::write(host.path("/dev/udmabuf0"), vec![0u8; 65536]).unwrap();
        (t, host)
    }

    #[test]
    fn allocates_pieces_with_bus_addresses() {
        let (_t, host) = fixture("0x0000000012340000", "65536");
        let a = UDmaBufAllocator::open(&host, "udmabuf0", 32).unwrap();
        assert_eq!((a.phys_addr(), a.size()), (0x1234_0000, 65536));
        let page = page_size() as u64;
        let b1 = a.alloc(100).unwrap();
        assert_eq!(b1.segments(), &[Segment { offset: 0, bus: 0x1234_0000, len: page }]);
        assert_eq!(b1.addressing(), Addressing::Physical);
        assert!(b1.describe().contains("udmabuf0"));
        let b2 = a.alloc(page as usize).unwrap();
        assert_eq!(b2.bus_range(0, 16), Some(0x1234_0000 + page));
        // Writes through the mapping land in /dev/udmabuf0 (the plain file) at the piece's offset.
        // SAFETY (test): b2 is at least a page long and mapped writable.
        unsafe { b2.as_ptr().write_volatile(0xab) };
        drop(b2);
        assert_eq!(fs::read(host.path("/dev/udmabuf0")).unwrap()[page as usize], 0xab);
        let e = a.alloc(65536).err().unwrap().to_string();
        assert!(e.contains("no free 64 KiB"), "{e}");
        drop(b1);
        assert!(a.alloc(65536).is_ok(), "freed pieces are reused");
    }

    #[test]
    fn refuses_what_the_device_cannot_reach_and_missing_buffers() {
        let (_t, host) = fixture("0x100000000", "65536");
        let a = UDmaBufAllocator::open(&host, "udmabuf0", 32).unwrap();
        let e = a.alloc(4096).err().unwrap().to_string();
        assert!(e.contains("32-bit DMA reach"), "{e}");
        assert!(UDmaBufAllocator::open(&host, "udmabuf0", 64).unwrap().alloc(4096).is_ok());
        let e = UDmaBufAllocator::open(&host, "udmabuf1", 32).err().unwrap().to_string();
        assert!(e.contains("no u-dma-buf named udmabuf1") && e.contains("insmod"), "{e}");
        assert!(UDmaBufAllocator::open(&host, "../x", 32).is_err());
    }

    #[test]
    fn buffer_source_names() {
        use crate::dma::BufferSource;
        assert_eq!("heap".parse::<BufferSource>().unwrap(), BufferSource::Heap);
        assert_eq!("hugepage".parse::<BufferSource>().unwrap(), BufferSource::Hugepage);
        assert_eq!("u-dma-buf:udmabuf0".parse::<BufferSource>().unwrap(), BufferSource::UDmaBuf("udmabuf0".into()));
        for bad in ["u-dma-buf:", "u-dma-buf:../x", "pinned", ""] {
            let e = bad.parse::<BufferSource>().unwrap_err().to_string();
            assert!(e.contains("u-dma-buf:NAME"), "{bad}: {e}");
        }
    }

    #[test]
    fn numbers_in_either_base() {
        assert_eq!(parse_number("0x00000000fe000000\n"), Some(0xfe00_0000));
        assert_eq!(parse_number("1048576"), Some(1 << 20));
        assert_eq!(parse_number("zz"), None);
    }
}
