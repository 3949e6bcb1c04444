//! Physical addresses of this process's pages from /proc/self/pagemap
//! (Documentation/admin-guide/mm/pagemap.rst): a 64-bit entry per page, bits 0-54 the page frame
//! number, bit 62 swapped, bit 63 present. Since Linux 4.2 the PFN reads 0 without CAP_SYS_ADMIN.

use crate::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;

const PM_PRESENT: u64 = 1 << 63;
const PM_SWAPPED: u64 = 1 << 62;
const PM_PFN_MASK: u64 = (1 << 55) - 1;

/// One pagemap entry, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageEntry {
    /// Resident at this page frame number.
    Present(u64),
    /// Resident, but the PFN reads 0: the reader lacks CAP_SYS_ADMIN (since Linux 4.2).
    Hidden,
    Swapped,
    NotPresent,
}

pub fn decode_entry(e: u64) -> PageEntry {
    if e & PM_PRESENT != 0 {
        match e & PM_PFN_MASK {
            0 => PageEntry::Hidden,
            pfn => PageEntry::Present(pfn),
        }
    } else if e & PM_SWAPPED != 0 {
        PageEntry::Swapped
    } else {
        PageEntry::NotPresent
    }
}

/// Physical addresses of the pages of `[vaddr, vaddr+len)` from an open /proc/self/pagemap.
pub fn physical_pages(pagemap: &File, vaddr: u64, len: u64, page: u64) -> Result<Vec<u64>> {
    let n = len.div_ceil(page) as usize;
    let mut raw = vec![0u8; n * 8];
    pagemap
        .read_exact_at(&mut raw, (vaddr / page) * 8)
        .map_err(|e| Error::io("cannot read", "/proc/self/pagemap", e))?;
    let mut out = Vec::with_capacity(n);
    for (i, c) in raw.chunks_exact(8).enumerate() {
        let e = u64::from_ne_bytes(c.try_into().unwrap_or_default());
        match decode_entry(e) {
            PageEntry::Present(pfn) => out.push(pfn * page),
            PageEntry::Hidden => {
                return Err(Error::Unsupported(
                    "/proc/self/pagemap shows every physical frame number as 0: reading them needs CAP_SYS_ADMIN, and no-IOMMU DMA needs physical addresses: run as root (or use --buffer u-dma-buf:NAME)".into(),
                ))
            }
            other => {
                return Err(Error::Device(format!(
                    "page {i} of a locked DMA buffer is not resident ({other:?}) after mlock: cannot give the device its address"
                )))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn pagemap_entries() {
        assert_eq!(decode_entry(PM_PRESENT | 0x12345), PageEntry::Present(0x12345));
        // Bits 55-62 are flags (soft-dirty, exclusive, file/shared), never part of the PFN.
        assert_eq!(decode_entry(PM_PRESENT | (1 << 55) | (1 << 56) | (1 << 61) | 0x7), PageEntry::Present(7));
        assert_eq!(decode_entry(PM_PRESENT | (1 << 55)), PageEntry::Hidden);
        assert_eq!(decode_entry(PM_SWAPPED | 0x3), PageEntry::Swapped);
        assert_eq!(decode_entry(0), PageEntry::NotPresent);
    }

    #[test]
    fn reads_a_pagemap_and_explains_hidden_pfns() {
        let mut f = tempfile::tempfile().unwrap();
        // Pages 4 and 5 of the address space: PFNs 0x200 and 0x201.
        let mut raw = vec![0u8; 4 * 8];
        raw.extend_from_slice(&(PM_PRESENT | 0x200).to_ne_bytes());
        raw.extend_from_slice(&(PM_PRESENT | 0x201).to_ne_bytes());
        raw.extend_from_slice(&PM_PRESENT.to_ne_bytes());
        f.write_all(&raw).unwrap();
        let phys = physical_pages(&f, 4 * 0x1000, 0x2000, 0x1000).unwrap();
        assert_eq!(phys, vec![0x200000, 0x201000]);
        let e = physical_pages(&f, 5 * 0x1000, 0x2000, 0x1000).unwrap_err().to_string();
        assert!(e.contains("CAP_SYS_ADMIN") && e.contains("run as root"), "{e}");
        assert!(physical_pages(&f, 0, 0x1000, 0x1000).is_err(), "page 0 is not present");
    }
}
