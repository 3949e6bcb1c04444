//! Owned `mmap` regions (BARs through sysfs or VFIO, DMA buffers) and single volatile accesses
//! of a register width. The mmap, munmap, mlock and volatile-pointer `unsafe` of pcibench lives
//! here, so the backends above stay safe code.

use crate::mmio::Width;
use crate::{Error, Result};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
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

/// The base page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 only for unknown names.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl Mmap {
    fn from_raw(p: *mut libc::c_void, len: usize) -> io::Result<Mmap> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        Ok(Mmap { ptr, len })
    }

    /// Map `len` bytes of `file` at `offset`, shared (a BAR file, a VFIO region, a u-dma-buf node).
    pub fn file(file: &File, offset: u64, len: usize, writable: bool) -> io::Result<Mmap> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
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
        let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) of an open descriptor; it aliases
        // no Rust object, and the result is checked before use.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, file.as_raw_fd(), off) };
        Mmap::from_raw(p, len)
    }

    /// Private anonymous memory, page-aligned; `huge` asks for 2 MiB hugetlb pages (`len` must
    /// then be a multiple of 2 MiB, and the call fails with ENOMEM when none are reserved).
    pub fn anonymous(len: usize, huge: bool) -> io::Result<Mmap> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if huge {
            // MAP_HUGE_2MB = 21 << MAP_HUGE_SHIFT (include/uapi/asm-generic/hugetlb_encode.h).
            flags |= libc::MAP_HUGETLB | (21 << libc::MAP_HUGE_SHIFT);
        }
        // SAFETY: a fresh anonymous mapping chosen by the kernel; the result is checked before use.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        Mmap::from_raw(p, len)
    }

    /// Lock the pages in memory (and fault them in), so they stay resident for DMA.
    pub fn lock(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this live mapping.
        if unsafe { libc::mlock(self.ptr.as_ptr().cast(), self.len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
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
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
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
        return Err(Error::Refused(format!(
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
        return Err(Error::Refused(format!(
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
}
