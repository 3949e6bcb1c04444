//! Host memory for the sim card: page-aligned anonymous mappings (BAR backing, card memory,
//! DMA buffers) and "scattered" buffers whose bus view places each page elsewhere, so drivers
//! are tested against non-contiguous buffers as on a physical-address (no-IOMMU) path.
//!
//! All raw-pointer work of the sim card's memory lives here; callers get bounds-checked methods.

use crate::{Error, Result};
use rustix::fs::{memfd_create, MemfdFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::ptr::NonNull;

/// The sim card's page size: buffers, BARs and scatter pieces are multiples of it.
pub const PAGE: usize = 4096;

fn round_up(len: usize) -> Option<usize> {
    len.checked_add(PAGE - 1).map(|l| l & !(PAGE - 1))
}

fn os_error(what: &str, len: usize, e: impl Into<std::io::Error>) -> Error {
    Error::Unsupported(format!("could not map {len} bytes of host memory for the sim card's {what}: {}", e.into()))
}

/// One mmap'd range, unmapped on drop.
struct Map {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; concurrent access goes through raw
// pointers whose users (BAR copy routines, the DMA model) coordinate as device memory would.
unsafe impl Send for Map {}
// SAFETY: as above; `Map` itself is never mutated after creation.
unsafe impl Sync for Map {}

impl Map {
    /// A fresh mapping at an address the kernel picks: of `file` from offset 0 when given, else
    /// anonymous; `len` is already page-rounded and non-zero.
    fn new(what: &str, len: usize, prot: ProtFlags, flags: MapFlags, file: Option<BorrowedFd<'_>>) -> Result<Map> {
        Map::at_offset(what, len, prot, flags, file, 0)
    }

    /// `new`, of `file` from `offset` (page-aligned).
    fn at_offset(
        what: &str,
        len: usize,
        prot: ProtFlags,
        flags: MapFlags,
        file: Option<BorrowedFd<'_>>,
        offset: u64,
    ) -> Result<Map> {
        let null = std::ptr::null_mut();
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL); it aliases no Rust object.
        let p = unsafe {
            match file {
                Some(fd) => rustix::mm::mmap(null, len, prot, flags, fd, offset),
                None => rustix::mm::mmap_anonymous(null, len, prot, flags),
            }
        }
        .map_err(|e| os_error(what, len, e))?;
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| os_error(what, len, Errno::INVAL))?;
        Ok(Map { ptr, len })
    }
}

impl Map {
    /// Make `[off, off+len)` (page-rounded, clipped to the mapping) present and writable now, so
    /// no later access pays a page fault: MADV_POPULATE_WRITE (Linux 5.14), else a read and a
    /// write back of one byte per page, which keeps the contents.
    fn populate(&self, off: usize, len: usize) {
        let start = (off & !(PAGE - 1)).min(self.len);
        let end = round_up(off.saturating_add(len)).unwrap_or(self.len).min(self.len);
        if start >= end {
            return;
        }
        // SAFETY: [start, end) lies inside this mapping; populating changes no byte.
        let at = unsafe { self.ptr.as_ptr().add(start) };
        // SAFETY: as above; madvise only faults the range in.
        let advised = unsafe { rustix::mm::madvise(at.cast(), end - start, rustix::mm::Advice::LinuxPopulateWrite) };
        if advised.is_ok() {
            return;
        }
        for page in (start..end).step_by(PAGE) {
            // SAFETY: inside the mapping; the byte is written back unchanged, before any engine
            // runs on this memory (callers populate before the first transfer).
            unsafe {
                let p = self.ptr.as_ptr().add(page);
                p.write_volatile(p.read_volatile());
            }
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range this value mapped; nobody holds it any more (owners
        // unregister from the sim card's host map before dropping, see host_map.rs). A failure
        // (impossible for a valid mapping) leaves the memory mapped: nothing to report to.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Zeroed, page-aligned memory: anonymous, or a memfd another process can map too (`shared`).
pub struct Pages {
    map: Map,
    /// The memfd behind a `shared` mapping, which a vfio-user client maps (`pcibench serve`).
    file: Option<File>,
}

impl Pages {
    /// At least `len` bytes (rounded up to whole pages), zeroed.
    pub fn new(what: &str, len: usize) -> Result<Pages> {
        let len = round_up(len.max(1)).ok_or_else(|| Error::usage(format!("{len} bytes is too large")))?;
        let map = Map::new(what, len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::PRIVATE, None)?;
        Ok(Pages { map, file: None })
    }

    /// Like `new`, but the pages are a memfd (`file`), so another process may map the same
    /// memory: a memory BAR `pcibench serve` offers a vfio-user client as an mmap-able region.
    pub fn shared(what: &str, len: usize) -> Result<Pages> {
        let len = round_up(len.max(1)).ok_or_else(|| Error::usage(format!("{len} bytes is too large")))?;
        let fd = memfd_create("pcibench-sim-bar", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
            .map_err(|e| os_error(what, len, e))?;
        let file = File::from(fd);
        file.set_len(len as u64).map_err(|e| os_error(what, len, e))?;
        // Sealed against shrinking before any client gets it: a client's ftruncate would
        // otherwise make the server's own accesses to the BAR raise SIGBUS.
        let seals = rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::SEAL;
        rustix::fs::fcntl_add_seals(&file, seals).map_err(|e| os_error(what, len, e))?;
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        let map = Map::new(what, len, rw, MapFlags::SHARED, Some(file.as_fd()))?;
        Ok(Pages { map, file: Some(file) })
    }

    /// `len` bytes of another process's memory passed as `fd`, from `offset` (both page-aligned):
    /// a vfio-user client's DMA buffer, which the served card's engine reaches through its host map.
    pub fn map_file(what: &str, fd: BorrowedFd<'_>, offset: u64, len: usize) -> Result<Pages> {
        if len == 0 || len % PAGE != 0 || offset % PAGE as u64 != 0 {
            return Err(Error::usage(format!("{what}: {len} bytes at file offset {offset:#x} is not whole pages")));
        }
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        let map = Map::at_offset(what, len, rw, MapFlags::SHARED, Some(fd), offset)?;
        Ok(Pages { map, file: None })
    }

    /// The memfd of `shared` pages.
    pub fn file(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().map(|f| f.as_fd())
    }

    /// Like `new`, but not charged against the commit limit (MAP_NORESERVE): for large card
    /// memory of which a run touches only part (a 1 GiB NVRAM card in a 512 MiB guest, where the
    /// kernel's overcommit heuristic would refuse a charged mapping larger than RAM).
    pub fn sparse(what: &str, len: usize) -> Result<Pages> {
        let len = round_up(len.max(1)).ok_or_else(|| Error::usage(format!("{len} bytes is too large")))?;
        let flags = MapFlags::PRIVATE | MapFlags::NORESERVE;
        let map = Map::new(what, len, ProtFlags::READ | ProtFlags::WRITE, flags, None)?;
        Ok(Pages { map, file: None })
    }

    pub fn len(&self) -> usize {
        self.map.len
    }

    /// Fault `[off, off+len)` in now (see `Map::populate`): the first DMA into lazily mapped
    /// card memory must not pay for the host's page faults, which a real card never has.
    pub fn populate(&self, off: u64, len: u64) {
        let off = usize::try_from(off).unwrap_or(usize::MAX);
        self.map.populate(off, usize::try_from(len).unwrap_or(usize::MAX));
    }

    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.map.ptr.as_ptr()
    }

    fn range(&self, off: u64, len: usize) -> Result<usize> {
        let off_us = usize::try_from(off).ok();
        match off_us.and_then(|o| o.checked_add(len).map(|end| (o, end))) {
            Some((o, end)) if end <= self.map.len => Ok(o),
            _ => Err(Error::Refused(format!(
                "{len} bytes at offset {off:#x} run past the end of a {:#x}-byte sim region",
                self.map.len
            ))),
        }
    }

    pub fn read(&self, off: u64, out: &mut [u8]) -> Result<()> {
        let o = self.range(off, out.len())?;
        // SAFETY: [o, o+len) is inside the mapping (checked above); `out` is a distinct buffer.
        unsafe { std::ptr::copy_nonoverlapping(self.as_ptr().add(o), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        let o = self.range(off, data.len())?;
        // SAFETY: [o, o+len) is inside the mapping (checked above); `data` is a distinct buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(o), data.len()) };
        Ok(())
    }

    /// One naturally aligned 1/2/4/8-byte volatile load, as a CPU access to a BAR would be.
    pub fn read_scalar(&self, off: u64, bytes: usize) -> Result<u64> {
        let o = self.scalar_range(off, bytes)?;
        // SAFETY: in bounds and naturally aligned (checked), the mapping is page-aligned.
        let v = unsafe {
            let p = self.as_ptr().add(o);
            match bytes {
                1 => p.read_volatile() as u64,
                2 => p.cast::<u16>().read_volatile() as u64,
                4 => p.cast::<u32>().read_volatile() as u64,
                _ => p.cast::<u64>().read_volatile(),
            }
        };
        Ok(u64::from_le(v))
    }

    pub fn write_scalar(&self, off: u64, bytes: usize, value: u64) -> Result<()> {
        let o = self.scalar_range(off, bytes)?;
        // SAFETY: in bounds and naturally aligned (checked), the mapping is page-aligned.
        unsafe {
            let p = self.as_ptr().add(o);
            match bytes {
                1 => p.write_volatile(value as u8),
                2 => p.cast::<u16>().write_volatile((value as u16).to_le()),
                4 => p.cast::<u32>().write_volatile((value as u32).to_le()),
                _ => p.cast::<u64>().write_volatile(value.to_le()),
            }
        }
        Ok(())
    }

    fn scalar_range(&self, off: u64, bytes: usize) -> Result<usize> {
        if !matches!(bytes, 1 | 2 | 4 | 8) || off % bytes as u64 != 0 {
            return Err(Error::Refused(format!(
                "a {}-bit access at offset {off:#x} must be naturally aligned",
                bytes * 8
            )));
        }
        self.range(off, bytes)
    }
}

/// A buffer whose CPU view is contiguous but whose bus view (what the sim card is given) puts
/// page `i` at bus page `n - 1 - i`: every page is its own bus segment, in reverse order, as a
/// buffer of scattered physical pages would be. Both views map the same memfd pages.
pub struct Scattered {
    cpu: Map,
    bus: Map,
}

impl Scattered {
    pub fn new(len: usize) -> Result<Scattered> {
        let len = round_up(len.max(1)).ok_or_else(|| Error::usage(format!("{len} bytes is too large")))?;
        // The mappings keep the memfd's pages alive after the File closes at the end of `new`.
        let fd = memfd_create("pcibench-sim-scattered", MemfdFlags::CLOEXEC)
            .map_err(|e| os_error("scattered buffer (memfd_create)", len, e))?;
        let file = File::from(fd);
        file.set_len(len as u64).map_err(|e| os_error("scattered buffer (ftruncate)", len, e))?;
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        let cpu = Map::new("scattered buffer", len, rw, MapFlags::SHARED, Some(file.as_fd()))?;
        // Reserve the bus view, then place each file page into it at its reversed slot.
        let bus = Map::new("scattered buffer", len, ProtFlags::empty(), MapFlags::PRIVATE, None)?;
        let pages = len / PAGE;
        for i in 0..pages {
            let slot = pages - 1 - i;
            // SAFETY: MAP_FIXED replaces one page inside the reservation `bus` owns, which no
            // Rust reference points into yet; the file offset i*PAGE is inside the memfd (set_len).
            unsafe {
                let at = bus.ptr.as_ptr().add(slot * PAGE).cast();
                rustix::mm::mmap(at, PAGE, rw, MapFlags::SHARED | MapFlags::FIXED, &file, (i * PAGE) as u64)
            }
            .map_err(|e| os_error("scattered buffer (page alias)", len, e))?;
        }
        Ok(Scattered { cpu, bus })
    }

    pub fn len(&self) -> usize {
        self.cpu.len
    }

    pub fn is_empty(&self) -> bool {
        self.cpu.len == 0
    }

    /// Fault both views in now (the engine reaches the pages through the bus view).
    pub fn populate(&self) {
        self.cpu.populate(0, self.cpu.len);
        self.bus.populate(0, self.bus.len);
    }

    pub fn cpu_ptr(&self) -> *mut u8 {
        self.cpu.ptr.as_ptr()
    }

    pub fn bus_ptr(&self) -> *mut u8 {
        self.bus.ptr.as_ptr()
    }

    /// Bus address of CPU-view page `i`.
    pub fn bus_of_page(&self, i: usize) -> u64 {
        let pages = self.cpu.len / PAGE;
        self.bus.ptr.as_ptr() as u64 + ((pages - 1 - i) * PAGE) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_zeroed_aligned_and_bounds_checked() {
        let p = Pages::new("test", 5000).unwrap();
        assert_eq!(p.len(), 8192);
        assert_eq!(p.as_ptr() as usize % PAGE, 0);
        assert_eq!(p.read_scalar(8184, 8).unwrap(), 0);
        p.write_scalar(16, 4, 0xdead_beef).unwrap();
        assert_eq!(p.read_scalar(16, 4).unwrap(), 0xdead_beef);
        assert_eq!(p.read_scalar(16, 2).unwrap(), 0xbeef);
        assert!(p.read_scalar(8190, 4).is_err(), "misaligned");
        assert!(p.read_scalar(8192, 1).is_err(), "past the end");
        assert!(p.write(8190, &[0; 4]).is_err());
        assert!(p.read(u64::MAX, &mut [0; 1]).is_err());
    }

    #[test]
    fn scattered_views_share_pages_in_reverse_order() {
        let s = Scattered::new(3 * PAGE).unwrap();
        // SAFETY: both views are 3 pages long and map the same file pages.
        unsafe {
            s.cpu_ptr().write(0x11);
            s.cpu_ptr().add(2 * PAGE + 5).write(0x33);
            assert_eq!((s.bus_of_page(0) as *const u8).read(), 0x11);
            assert_eq!((s.bus_of_page(2) as *const u8).add(5).read(), 0x33);
        }
        assert_eq!(s.bus_of_page(0), s.bus_ptr() as u64 + 2 * PAGE as u64);
        assert_eq!(s.bus_of_page(2), s.bus_ptr() as u64);
    }
}
