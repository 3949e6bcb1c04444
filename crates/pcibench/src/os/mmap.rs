//! Owned `mmap` regions (BARs through sysfs or VFIO, DMA buffers) and single volatile accesses
//! of a register width. The mmap, munmap, mlock and volatile-pointer `unsafe` of pcibench lives
//! here, so the backends above stay safe code.

use crate::mmio::Width;
use crate::{Error, Result};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use std::ffi::c_void;
use std::fs::File;
use std::io;
use std::ptr::NonNull;
/// An owned mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory (or device memory) owned by this value; concurrent access
// through it is the caller's business exactly as for a raw pointer, and nothing is thread-local.
unsafe impl Send for Mmap {}
// SAFETY: as above; `&Mmap` only hands out the base pointer and volatile accesses.
unsafe impl Sync for Mmap {}

/// Size of a 2 MiB huge page (x86-64 and arm64 with 4 KiB base pages).
pub const HUGE_2M: usize = 2 << 20;

/// The base page size (AT_PAGESZ from the auxiliary vector).
pub fn page_size() -> usize {
    rustix::param::page_size()
}

impl Mmap {
    fn from_raw(p: *mut c_void, len: usize) -> io::Result<Mmap> {
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::INVAL)?;
        Ok(Mmap { ptr, len })
    }

    /// Map `len` bytes of `file` at `offset`, shared (a BAR file, a VFIO region, a u-dma-buf node).
    pub fn file(file: &File, offset: u64, len: usize, writable: bool) -> io::Result<Mmap> {
        if len == 0 {
            return Err(Errno::INVAL.into());
        }
        // Touching a shared mapping past the end of a regular file raises SIGBUS, so refuse it up
        // front (sysfs resourceN files have the BAR's size; VFIO fds and device nodes are not files).
        let meta = file.metadata()?;
        if meta.is_file() && meta.len() < offset.saturating_add(len as u64) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the file is {} bytes, too short for {len} bytes at offset {offset:#x} (not a real BAR resource file?)",
                    meta.len()
                ),
            ));
        }
        let prot = if writable { ProtFlags::READ | ProtFlags::WRITE } else { ProtFlags::READ };
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) of an open descriptor; it aliases
        // no Rust object.
        let p = unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, file, offset) }?;
        Mmap::from_raw(p, len)
    }

    /// Private anonymous memory, page-aligned; `huge` asks for 2 MiB hugetlb pages (`len` must
    /// then be a multiple of 2 MiB, and the call fails with ENOMEM when none are reserved).
    pub fn anonymous(len: usize, huge: bool) -> io::Result<Mmap> {
        if len == 0 {
            return Err(Errno::INVAL.into());
        }
        let mut flags = MapFlags::PRIVATE;
        if huge {
            flags |= MapFlags::HUGETLB | MapFlags::HUGE_2MB;
        }
        let prot = ProtFlags::READ | ProtFlags::WRITE;
        // SAFETY: a fresh anonymous mapping chosen by the kernel; it aliases no Rust object.
        let p = unsafe { rustix::mm::mmap_anonymous(std::ptr::null_mut(), len, prot, flags) }?;
        Mmap::from_raw(p, len)
    }

    /// Lock the pages in memory (and fault them in), so they stay resident for DMA.
    pub fn lock(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this live mapping.
        Ok(unsafe { rustix::mm::mlock(self.ptr.as_ptr().cast(), self.len) }?)
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One volatile load of `width` at `offset`: a single bus access of that size on a device
    /// mapping. Checks bounds and alignment itself.
    pub fn read(&self, offset: u64, width: Width) -> Result<u64> {
        check_access(self.len as u64, offset, width)?;
        // SAFETY: check_access proved [offset, offset+size) lies inside the mapping and that
        // offset is aligned to the access size; the base is page-aligned.
        unsafe {
            let p = self.ptr.as_ptr().add(offset as usize);
            Ok(match width {
                Width::B8 => p.read_volatile() as u64,
                Width::B16 => p.cast::<u16>().read_volatile() as u64,
                Width::B32 => p.cast::<u32>().read_volatile() as u64,
                _ => p.cast::<u64>().read_volatile(),
            })
        }
    }

    /// One volatile store of `width` at `offset` (bounds and alignment checked).
    pub fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        check_access(self.len as u64, offset, width)?;
        check_value(width, value)?;
        // SAFETY: as in `read`; the mapping is writable whenever a caller writes (BARs are mapped
        // PROT_WRITE; a read-only mapping would fault, which callers never create for writes).
        unsafe {
            let p = self.ptr.as_ptr().add(offset as usize);
            match width {
                Width::B8 => p.write_volatile(value as u8),
                Width::B16 => p.cast::<u16>().write_volatile(value as u16),
                Width::B32 => p.cast::<u32>().write_volatile(value as u32),
                _ => p.cast::<u64>().write_volatile(value),
            }
        }
        Ok(())
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region this value owns; no reference into it outlives self.
        // A failure (impossible for a valid mapping) leaves the memory mapped: nothing to report to.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A single register access must be 8/16/32/64 bits, aligned, and inside the region.
pub fn check_access(region_len: u64, offset: u64, width: Width) -> Result<()> {
    let n = width.bytes() as u64;
    if !matches!(width, Width::B8 | Width::B16 | Width::B32 | Width::B64) {
        return Err(Error::usage(format!("a single register access is 8, 16, 32 or 64 bits wide, not {width}")));
    }
    if offset % n != 0 {
        return Err(Error::usage(format!(
            "offset {offset:#x} is not aligned to the {}-bit access width: use a multiple of {n}",
            n * 8
        )));
    }
    if !matches!(offset.checked_add(n), Some(end) if end <= region_len) {
        return Err(Error::usage(format!(
            "offset {offset:#x} + {n} bytes is past the end of the {region_len:#x}-byte BAR"
        )));
    }
    Ok(())
}

/// A value must fit the access width (poke 0x1ff at 8 bits is a user mistake, not a truncation).
pub fn check_value(width: Width, value: u64) -> Result<()> {
    let bits = width.bytes() * 8;
    if bits < 64 && value >> bits != 0 {
        return Err(Error::usage(format!("value {value:#x} does not fit in {bits} bits")));
    }
    Ok(())
}

/// A bulk transfer: `len` bytes at `offset`, in accesses of one scalar width.
pub fn check_bulk(region_len: u64, offset: u64, len: usize, width: Width) -> Result<()> {
    let n = width.bytes();
    if !matches!(width, Width::B8 | Width::B16 | Width::B32 | Width::B64) {
        return Err(Error::Unsupported(format!(
            "{width}-bit copies need a CPU mapping of the BAR: use the mmio copy routines on ptr(), or width 8/16/32/64"
        )));
    }
    if len % n != 0 || offset % n as u64 != 0 {
        return Err(Error::usage(format!(
            "offset {offset:#x} and length {len} must be multiples of the {}-bit access width",
            n * 8
        )));
    }
    if !matches!(offset.checked_add(len as u64), Some(end) if end <= region_len) {
        return Err(Error::usage(format!(
            "{len} bytes at offset {offset:#x} run past the end of the {region_len:#x}-byte BAR"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_checks_name_the_problem() {
        assert!(check_access(0x1000, 0xffc, Width::B32).is_ok());
        let e = check_access(0x1000, 0x1000, Width::B32).unwrap_err().to_string();
        assert!(e.contains("past the end"), "{e}");
        let e = check_access(0x1000, 0x2, Width::B32).unwrap_err().to_string();
        assert!(e.contains("not aligned"), "{e}");
        let e = check_access(0x1000, 0, Width::V128).unwrap_err().to_string();
        assert!(e.contains("8, 16, 32 or 64"), "{e}");
        assert!(check_access(u64::MAX, u64::MAX - 3, Width::B64).is_err());
        assert!(check_value(Width::B8, 0x1ff).is_err());
        assert!(check_value(Width::B64, u64::MAX).is_ok());
        assert!(check_bulk(0x100, 0x80, 0x80, Width::B64).is_ok());
        assert!(check_bulk(0x100, 0x80, 0x88, Width::B64).is_err());
        assert!(check_bulk(0x100, 0x80, 0x7, Width::B16).is_err());
    }

    #[test]
    fn file_mappings_write_through_and_refuse_bad_lengths() {
        use std::os::unix::fs::FileExt;
        let page = page_size();
        assert!(page.is_power_of_two() && page >= 4096, "{page}");
        let f = tempfile::tempfile().unwrap();
        f.set_len(2 * page as u64).unwrap();
        let m = Mmap::file(&f, page as u64, page, true).unwrap();
        assert_eq!(m.as_ptr() as usize % page, 0);
        m.write(8, Width::B32, 0xdead_beef).unwrap();
        let mut b = [0u8; 4];
        f.read_exact_at(&mut b, page as u64 + 8).unwrap();
        assert_eq!(u32::from_ne_bytes(b), 0xdead_beef);
        let e = Mmap::file(&f, page as u64, 2 * page, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert_eq!(Mmap::file(&f, 0, 0, true).unwrap_err().raw_os_error(), Some(Errno::INVAL.raw_os_error()));
        assert_eq!(Mmap::anonymous(0, false).unwrap_err().raw_os_error(), Some(Errno::INVAL.raw_os_error()));
    }

    #[test]
    fn anonymous_memory_is_zeroed_and_lockable() {
        let m = Mmap::anonymous(page_size(), false).unwrap();
        assert_eq!(m.read(page_size() as u64 - 8, Width::B64).unwrap(), 0);
        // One page fits any RLIMIT_MEMLOCK but 0 (the default is 8 MiB, or 64 KiB on old kernels).
        if crate::os::memlock::limit().is_none_or(|l| l >= page_size() as u64) {
            m.lock().unwrap();
        }
        // MAP_HUGE_2MB is log2(2 MiB) << MAP_HUGE_SHIFT (include/uapi/asm-generic/hugetlb_encode.h).
        assert_eq!(MapFlags::HUGE_2MB.bits(), 21 << 26);
    }
}
