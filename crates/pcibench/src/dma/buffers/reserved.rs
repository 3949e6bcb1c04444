//! DMA buffers in physical memory reserved on the kernel command line (`memmap=SIZE$START`, as
//! seed 001 reserved 2 GiB at 4 GiB for its NVRAM card), mapped through /dev/mem: what a
//! no-IOMMU run needs when hugepages are too small or too scattered for the transfer.
//!
//! The range must be a top-level "Reserved" range in /proc/iomem with nothing claimed inside it
//! (`host::iomem::check_reserved`): never System RAM, which the kernel allocates from. Strict
//! devmem (CONFIG_STRICT_DEVMEM) lets /dev/mem map such non-RAM ranges; it refuses RAM.
//! Reserved memory has no `struct page`, so it is never in /proc/self/pagemap: its bus address
//! in no-IOMMU mode is its physical address. Each allocation is a page-aligned piece of the
//! range, mapped without O_SYNC (cached: right for cache-coherent DMA, as on x86).

use super::region::Region;
use crate::dma::{DmaAllocator, DmaBuffer, Segment};
use crate::host::{iomem, Host};
use crate::os::mmap::Mmap;
use crate::units::human_size;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;

pub struct ReservedAllocator {
    start: u64,
    size: u64,
    dma_bits: u32,
    node: PathBuf,
    mem: File,
    region: Region,
    /// What `--force` overrode, said in each buffer's description.
    forced: Option<String>,
}

impl ReservedAllocator {
    /// Check `[start, start+size)` against /proc/iomem, the kernel command line and the
    /// device's reach, then open /dev/mem. Nothing is mapped until `alloc`.
    ///
    /// Firmware marks ranges "Reserved" too (ACPI tables, SMM, pieces of the MMIO hole, the
    /// first page): those are in use by the firmware, so the range must also be one the kernel
    /// was told to leave alone (memmap=SIZE$START or reserve=START,SIZE), unless `force`. The
    /// first MiB (BIOS data, the real-mode trampoline, option ROMs) is refused even then.
    pub fn open(host: &Host, start: u64, size: u64, dma_bits: u32, force: bool) -> Result<ReservedAllocator> {
        if start < iomem::FIRST_MIB {
            return Err(Error::Refused(format!(
                "--buffer reserved:{start:#x},{}: the first MiB of physical memory (BIOS data, the real-mode \
                 trampoline, option ROMs) is never a DMA buffer, even with --force; reserve memory above it, e.g. {}",
                iomem::short_size(size),
                iomem::memmap_option(0x1000_0000, size)
            )));
        }
        iomem::check_reserved(&iomem::read(host)?, start, size)?;
        let forced = match iomem::cmdline_reservation(&crate::host::state::cmdline(host), start, size) {
            Some(_) => None,
            None if force => Some(format!(
                "--force: {start:#x}-{:#x} is Reserved in /proc/iomem but no memmap=/reserve= on the kernel command line reserved it",
                start + size - 1
            )),
            None => return Err(iomem::not_on_cmdline(start, size)),
        };
        super::physical::check_reach(&[Segment { offset: 0, bus: start, len: size }], dma_bits).map_err(|_| {
            Error::Refused(format!(
                "the reserved range {start:#x}-{:#x} ends above the device's {dma_bits}-bit DMA reach (--dma-bits {dma_bits}): \
                 no DMA was started; reserve memory below {:#x} instead (e.g. {})",
                start + size - 1,
                1u128 << dma_bits,
                iomem::memmap_option(0x1000_0000, size)
            ))
        })?;
        let node = host.path("/dev/mem");
        let mem = host.open_node(&node, OpenOptions::new().read(true).write(true)).map_err(|e| {
            Error::io_hint(
                "cannot open",
                &node,
                e,
                "/dev/mem needs root (CAP_SYS_RAWIO and write permission on the node)",
            )
        })?;
        Ok(ReservedAllocator { start, size, dma_bits, node, mem, region: Region::new(start, size), forced })
    }
}

impl DmaAllocator for ReservedAllocator {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let p = self.region.reserve(len, |want, used| {
            Error::Unsupported(format!(
                "the reserved range {:#x} ({}) has no free {} ({} in use): reserve more (e.g. {}) or use a smaller --size",
                self.start,
                human_size(self.size),
                human_size(want),
                human_size(used),
                iomem::memmap_option(self.start, (self.size + want).next_power_of_two())
            ))
        })?;
        let mem = Mmap::file(&self.mem, p.bus, p.len as usize, true).map_err(|e| {
            self.region.release(&p);
            Error::io_hint(
                "cannot mmap",
                &self.node,
                e,
                "with CONFIG_STRICT_DEVMEM /dev/mem maps only ranges that are not RAM: check /proc/iomem lists it as Reserved",
            )
        })?;
        let describe = match &self.forced {
            None => format!("reserved memory (memmap=) at physical {:#x}", p.bus),
            Some(f) => format!("reserved memory at physical {:#x} ({f})", p.bus),
        };
        Ok(Box::new(self.region.buffer(p, mem, describe)))
    }

    fn dma_bits(&self) -> u32 {
        self.dma_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::{Addressing, BufferSource};
    use crate::os::mmap::page_size;
    use std::fs;

    /// A sysroot with /proc/iomem reserving 64 MiB at 256 MiB, and a sparse file as /dev/mem.
    fn fixture() -> (tempfile::TempDir, Host) {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        fs::create_dir_all(host.path("/proc")).unwrap();
        fs::write(
            host.path("/proc/iomem"),
            "00001000-0009fbff : System RAM\n00100000-0fffffff : System RAM\n10000000-13ffffff : Reserved\n14000000-1ffdffff : System RAM\n",
        )
        .unwrap();
        fs::write(host.path("/proc/cmdline"), "ro quiet memmap=64M$0x10000000\n").unwrap();
        fs::create_dir_all(host.path("/dev")).unwrap();
        fs::File::create(host.path("/dev/mem")).unwrap().set_len(0x1400_0000).unwrap();
        (t, host)
    }

    #[test]
    fn pieces_of_the_range_with_physical_addresses() {
        let (_t, host) = fixture();
        let a = ReservedAllocator::open(&host, 0x1000_0000, 64 << 20, 32, false).unwrap();
        let page = page_size() as u64;
        let b1 = a.alloc(100).unwrap();
        assert_eq!(b1.segments(), &[Segment { offset: 0, bus: 0x1000_0000, len: page }]);
        assert_eq!(b1.addressing(), Addressing::Physical);
        assert!(b1.describe().contains("physical 0x10000000"), "{}", b1.describe());
        let b2 = a.alloc(8192).unwrap();
        assert_eq!(b2.bus_range(0, 16), Some(0x1000_0000 + page));
        // SAFETY (test): b2 is two pages, mapped writable.
        unsafe { b2.as_ptr().add(5).write_volatile(0xab) };
        drop(b2);
        let f = fs::read(host.path("/dev/mem")).unwrap();
        assert_eq!(f[(0x1000_0000 + page + 5) as usize], 0xab, "the piece is /dev/mem at its physical address");
        let e = a.alloc(64 << 20).err().unwrap().to_string();
        assert!(e.contains("no free 64 MiB") && e.contains("memmap="), "{e}");
    }

    #[test]
    fn refuses_ram_unreserved_and_out_of_reach_ranges() {
        let (_t, host) = fixture();
        let e = ReservedAllocator::open(&host, 0x0800_0000, 1 << 20, 64, false).err().unwrap().to_string();
        assert!(e.contains("is System RAM") && e.contains("memmap=1M$0x8000000"), "{e}");
        let e = ReservedAllocator::open(&host, 0x2000_0000, 1 << 20, 64, false).err().unwrap().to_string();
        assert!(e.contains("in no /proc/iomem range"), "{e}");
        let e = ReservedAllocator::open(&host, 0x1000_0000, 64 << 20, 28, false).err().unwrap().to_string();
        assert!(e.contains("28-bit DMA reach") && e.contains("no DMA was started"), "{e}");
    }

    /// A firmware Reserved range the command line did not reserve needs --force; the first MiB never.
    #[test]
    fn needs_the_command_line_reservation_or_force_and_never_the_first_mib() {
        let (_t, host) = fixture();
        fs::write(host.path("/proc/cmdline"), "ro quiet\n").unwrap();
        let e = ReservedAllocator::open(&host, 0x1000_0000, 64 << 20, 32, false).err().unwrap().to_string();
        assert!(
            e.contains("no memmap=/reserve= on the kernel command line reserved it") && e.contains("--force"),
            "{e}"
        );
        let a = ReservedAllocator::open(&host, 0x1000_0000, 64 << 20, 32, true).unwrap();
        assert!(a.alloc(4096).unwrap().describe().contains("--force: 0x10000000-0x13ffffff is Reserved"));
        fs::write(host.path("/proc/cmdline"), "reserve=0x10000000,0x1000000\n").unwrap();
        ReservedAllocator::open(&host, 0x1000_0000, 16 << 20, 32, false).unwrap();
        assert!(
            ReservedAllocator::open(&host, 0x1000_0000, 32 << 20, 32, false).is_err(),
            "beyond what reserve= covers"
        );
        fs::write(host.path("/proc/iomem"), "00000000-00000fff : Reserved\n").unwrap();
        for force in [false, true] {
            let e = ReservedAllocator::open(&host, 0, 4096, 32, force).err().unwrap().to_string();
            assert!(e.contains("the first MiB of physical memory"), "{e}");
        }
    }

    #[test]
    fn buffer_source_parses_and_refuses_unaligned_ranges() {
        let r = "reserved:0x10000000,64M".parse::<BufferSource>().unwrap();
        assert_eq!(r, BufferSource::Reserved { start: 0x1000_0000, size: 64 << 20, force: false });
        assert_eq!(r.to_string(), "reserved:0x10000000,0x4000000");
        for (bad, why) in [
            ("reserved:0x10000800,64M", "multiples of the"),
            ("reserved:0x10000000,100", "multiples of the"),
            ("reserved:0x10000000", "give START,SIZE"),
            ("reserved:0x10000000,0", "empty"),
            ("reserved:zz,4K", "not an address"),
        ] {
            let e = bad.parse::<BufferSource>().unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("memmap=64M$0x10000000"), "{bad}: {e}");
        }
    }
}
