//! The host side of a timed copy: zeroed memory aligned to a page.
//!
//! Why not a `Vec<u8>`: glibc's malloc returns large blocks 16 bytes past a page boundary (the
//! chunk header of an mmap'd block) and small ones 16-byte aligned, so a 256/512-bit routine's
//! host-side accesses would straddle two cache lines every other (or every) access: a cost of
//! the tool's buffer, not of the mapping measured. On the Sapphire Rapids guest this was written
//! on, 256-bit reads into a buffer 16 bytes past a page ran at a third of the aligned rate at
//! 4 KiB and 19% slower at 64 KiB (`cargo bench --bench copy -- 256 +16`). memcpy hides it by
//! aligning its own stores; a width-exact routine cannot, so the buffer is aligned instead, as
//! a DMA buffer would be.

use crate::{Error, Result};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every `HostBuf`: a page, so that a buffer's offset within a page (and with it
/// 4 KiB aliasing against the other side of a copy) is the same from run to run.
const ALIGN: usize = 4096;

/// Zeroed, page-aligned host memory of a fixed length.
pub struct HostBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain owned memory, like a Vec<u8>.
unsafe impl Send for HostBuf {}
// SAFETY: shared access only reads, like &[u8].
unsafe impl Sync for HostBuf {}

impl HostBuf {
    /// `len` zeroed bytes, or a one-line error saying what to do when memory is short.
    pub fn zeroed(len: usize) -> Result<HostBuf> {
        let refuse = || {
            Error::Unsupported(format!(
                "cannot allocate {} of host memory for the data to move and verify: use a smaller --size, or raise the memory limit (ulimit -v)",
                crate::units::human_size(len as u64)
            ))
        };
        if len == 0 {
            return Ok(HostBuf { ptr: NonNull::dangling(), len: 0 });
        }
        let layout = Layout::from_size_align(len, ALIGN).map_err(|_| refuse())?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| HostBuf { ptr, len }).ok_or_else(refuse)
    }

    /// A page-aligned copy of `data`.
    pub fn copy_of(data: &[u8]) -> Result<HostBuf> {
        let mut b = HostBuf::zeroed(data.len())?;
        b.copy_from_slice(data);
        Ok(b)
    }
}

impl Deref for HostBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` bytes for the buffer's life (dangling only for 0 bytes,
        // which from_raw_parts allows for a non-null aligned pointer).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for HostBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in `zeroed` with this size and alignment.
            unsafe { dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, ALIGN)) };
        }
    }
}

impl std::fmt::Debug for HostBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuf({} bytes at {:p})", self.len, self.ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_aligned_zeroed_and_a_faithful_copy() {
        for len in [0, 1, 100, 4096, 1 << 20] {
            let b = HostBuf::zeroed(len).unwrap();
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            if len > 0 {
                assert_eq!(b.as_ptr() as usize % ALIGN, 0, "{len} bytes");
            }
        }
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let c = HostBuf::copy_of(&data).unwrap();
        assert_eq!(&c[..], &data[..]);
        let e = HostBuf::zeroed(usize::MAX / 2).unwrap_err().to_string();
        assert!(e.contains("cannot allocate") && !e.contains('\n'), "{e}");
    }
}
