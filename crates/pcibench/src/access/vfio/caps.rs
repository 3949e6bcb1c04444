//! Parsing VFIO info replies and their capability chains (include/uapi/linux/vfio.h): plain
//! byte-buffer decoding, so it is tested without a device. Field offsets come from the
//! `vfio-bindings` structs (the tests below spell the kernel's layout out in numbers).
//!
//! A chain is a linked list of `struct vfio_info_cap_header { u16 id; u16 version; u32 next; }`
//! where `next` is the offset of the following header from the start of the info struct (0 ends).

use super::ioctl::abi::{
    vfio_info_cap_header as CapHeader, vfio_iommu_type1_info as IommuInfoHead,
    vfio_iommu_type1_info_cap_iova_range as IovaCap, vfio_iommu_type1_info_dma_avail as DmaAvailCap, vfio_iova_range,
    vfio_region_info as RegionHead, vfio_region_info_cap_sparse_mmap as SparseCap,
    vfio_region_sparse_mmap_area as SparseArea,
};
use super::ioctl::abi::{
    VFIO_IOMMU_INFO_CAPS, VFIO_IOMMU_INFO_PGSIZES, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE,
    VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL, VFIO_REGION_INFO_CAP_SPARSE_MMAP, VFIO_REGION_INFO_FLAG_CAPS,
    VFIO_REGION_INFO_FLAG_MMAP, VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};
use crate::{Error, Result};
use std::mem::{offset_of, size_of};

/// VFIO_REGION_INFO_CAP_SPARSE_MMAP: the only areas of a region that may be mmapped.
pub const REGION_CAP_SPARSE_MMAP: u16 = VFIO_REGION_INFO_CAP_SPARSE_MMAP as u16;
/// VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE: the IOVA ranges the container accepts.
pub const IOMMU_CAP_IOVA_RANGE: u16 = VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE as u16;
/// VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL: how many more DMA mappings the container allows.
pub const IOMMU_CAP_DMA_AVAIL: u16 = VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL as u16;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn malformed(what: &str) -> Error {
    Error::Device(format!("the kernel's VFIO {what} reply is malformed (truncated or looping capability chain)"))
}

/// One capability: its id, version and offset in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    pub id: u16,
    pub version: u16,
    pub offset: usize,
}

/// Walk the chain starting at `first` (0: no chain).
pub fn chain(buf: &[u8], first: u32, what: &str) -> Result<Vec<Cap>> {
    let mut out = Vec::new();
    let mut off = first as usize;
    while off != 0 {
        // A chain longer than the buffer has room for headers is a loop.
        if out.len() > buf.len() / size_of::<CapHeader>() {
            return Err(malformed(what));
        }
        let id = u16_at(buf, off + offset_of!(CapHeader, id)).ok_or_else(|| malformed(what))?;
        let version = u16_at(buf, off + offset_of!(CapHeader, version)).ok_or_else(|| malformed(what))?;
        let next = u32_at(buf, off + offset_of!(CapHeader, next)).ok_or_else(|| malformed(what))?;
        out.push(Cap { id, version, offset: off });
        off = next as usize;
    }
    Ok(out)
}

/// A decoded `struct vfio_region_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionInfo {
    pub index: u32,
    pub flags: u32,
    /// Region size in bytes (a BAR's size; 0 for an absent BAR).
    pub size: u64,
    /// Offset of the region in the device fd, for pread/pwrite and mmap.
    pub offset: u64,
    /// Sparse-mmap areas (offset, size) within the region, when the capability is present.
    pub sparse: Option<Vec<(u64, u64)>>,
}

impl RegionInfo {
    pub fn readable(&self) -> bool {
        self.flags & VFIO_REGION_INFO_FLAG_READ != 0
    }
    pub fn writable(&self) -> bool {
        self.flags & VFIO_REGION_INFO_FLAG_WRITE != 0
    }
    pub fn mmappable(&self) -> bool {
        self.flags & VFIO_REGION_INFO_FLAG_MMAP != 0
    }

    /// Whether mmapping the whole region is allowed: MMAP set and, with a sparse capability,
    /// its areas cover the region end to end.
    pub fn whole_mmap_allowed(&self) -> bool {
        if !self.mmappable() {
            return false;
        }
        match &self.sparse {
            None => true,
            Some(areas) => {
                let mut a = areas.clone();
                a.sort();
                let mut end = 0u64;
                for (o, s) in a {
                    if o > end {
                        return false;
                    }
                    end = end.max(o.saturating_add(s));
                }
                end >= self.size
            }
        }
    }
}

/// Decode a region info reply (struct vfio_region_info and its chain).
pub fn parse_region_info(buf: &[u8]) -> Result<RegionInfo> {
    let what = "region info";
    let bad = || malformed(what);
    let flags = u32_at(buf, offset_of!(RegionHead, flags)).ok_or_else(bad)?;
    let index = u32_at(buf, offset_of!(RegionHead, index)).ok_or_else(bad)?;
    let cap_offset = u32_at(buf, offset_of!(RegionHead, cap_offset)).ok_or_else(bad)?;
    let size = u64_at(buf, offset_of!(RegionHead, size)).ok_or_else(bad)?;
    let offset = u64_at(buf, offset_of!(RegionHead, offset)).ok_or_else(bad)?;
    let mut sparse = None;
    if flags & VFIO_REGION_INFO_FLAG_CAPS != 0 {
        for cap in chain(buf, cap_offset, what)? {
            if cap.id == REGION_CAP_SPARSE_MMAP {
                sparse = Some(parse_sparse(buf, cap.offset)?);
            }
        }
    }
    Ok(RegionInfo { index, flags, size, offset, sparse })
}

/// `struct vfio_region_info_cap_sparse_mmap { header; u32 nr_areas; u32 reserved;
/// struct { u64 offset; u64 size; } areas[]; }`
pub fn parse_sparse(buf: &[u8], cap: usize) -> Result<Vec<(u64, u64)>> {
    let bad = || malformed("sparse-mmap capability");
    let n = u32_at(buf, cap + offset_of!(SparseCap, nr_areas)).ok_or_else(bad)? as usize;
    (0..n)
        .map(|i| {
            let at = cap + offset_of!(SparseCap, areas) + i * size_of::<SparseArea>();
            let offset = u64_at(buf, at + offset_of!(SparseArea, offset)).ok_or_else(bad)?;
            Ok((offset, u64_at(buf, at + offset_of!(SparseArea, size)).ok_or_else(bad)?))
        })
        .collect()
}

/// An inclusive IOVA range the container accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IovaRange {
    pub start: u64,
    /// Inclusive, as the kernel reports it.
    pub end: u64,
}

/// A decoded `struct vfio_iommu_type1_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IommuInfo {
    /// Bitmap of supported IOMMU page sizes (bit n set: 2^n bytes).
    pub pgsizes: Option<u64>,
    /// The allowed IOVA ranges; None when the kernel predates the capability (before 5.4).
    pub ranges: Option<Vec<IovaRange>>,
    /// DMA mappings still available (vfio_iommu_type1 dma_entry_limit), when reported.
    pub dma_avail: Option<u32>,
}

impl IommuInfo {
    /// The smallest IOMMU page size (the IOVA and size granule), 4 KiB when not reported.
    pub fn min_page(&self) -> u64 {
        match self.pgsizes {
            Some(p) if p != 0 => 1 << p.trailing_zeros(),
            _ => 4096,
        }
    }

    /// Ranges to allocate from: the reported ones, or all of the 64-bit space when unreported.
    pub fn usable_ranges(&self) -> Vec<IovaRange> {
        self.ranges.clone().unwrap_or_else(|| vec![IovaRange { start: 0, end: u64::MAX }])
    }
}

pub fn parse_iommu_info(buf: &[u8]) -> Result<IommuInfo> {
    let what = "IOMMU info";
    let flags = u32_at(buf, offset_of!(IommuInfoHead, flags)).ok_or_else(|| malformed(what))?;
    let pgsizes =
        (flags & VFIO_IOMMU_INFO_PGSIZES != 0).then(|| u64_at(buf, offset_of!(IommuInfoHead, iova_pgsizes))).flatten();
    let mut info = IommuInfo { pgsizes, ranges: None, dma_avail: None };
    if flags & VFIO_IOMMU_INFO_CAPS != 0 {
        let first = u32_at(buf, offset_of!(IommuInfoHead, cap_offset)).unwrap_or(0);
        for cap in chain(buf, first, what)? {
            match cap.id {
                IOMMU_CAP_IOVA_RANGE => info.ranges = Some(parse_iova_ranges(buf, cap.offset)?),
                IOMMU_CAP_DMA_AVAIL => info.dma_avail = u32_at(buf, cap.offset + offset_of!(DmaAvailCap, avail)),
                _ => {}
            }
        }
    }
    Ok(info)
}

/// `struct vfio_iommu_type1_info_cap_iova_range { header; u32 nr_iovas; u32 reserved;
/// struct vfio_iova_range { u64 start; u64 end; } iova_ranges[]; }`
fn parse_iova_ranges(buf: &[u8], cap: usize) -> Result<Vec<IovaRange>> {
    let bad = || malformed("IOVA range capability");
    let n = u32_at(buf, cap + offset_of!(IovaCap, nr_iovas)).ok_or_else(bad)? as usize;
    let mut v = Vec::with_capacity(n.min(64));
    for i in 0..n {
        let at = cap + offset_of!(IovaCap, iova_ranges) + i * size_of::<vfio_iova_range>();
        v.push(IovaRange {
            start: u64_at(buf, at + offset_of!(vfio_iova_range, start)).ok_or_else(bad)?,
            end: u64_at(buf, at + offset_of!(vfio_iova_range, end)).ok_or_else(bad)?,
        });
    }
    Ok(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn put32(b: &mut Vec<u8>, at: usize, v: u32) {
        if b.len() < at + 4 {
            b.resize(at + 4, 0);
        }
        b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }
    pub(crate) fn put64(b: &mut Vec<u8>, at: usize, v: u64) {
        if b.len() < at + 8 {
            b.resize(at + 8, 0);
        }
        b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
    fn header(b: &mut Vec<u8>, at: usize, id: u16, version: u16, next: u32) {
        put32(b, at, id as u32 | (version as u32) << 16);
        put32(b, at + 4, next);
    }

    /// A BAR0 region of 16 KiB with the MSI-X table page (0x2000..0x3000) carved out, preceded
    /// in the chain by an unrelated capability (id 3, the MSI-X-mappable marker).
    fn sparse_region() -> Vec<u8> {
        let mut b = vec![0u8; 32];
        put32(&mut b, 0, 120);
        put32(&mut b, 4, 0xf); // READ WRITE MMAP CAPS
        put32(&mut b, 8, 0);
        put32(&mut b, 12, 32);
        put64(&mut b, 16, 0x4000);
        put64(&mut b, 24, 0);
        header(&mut b, 32, 3, 1, 40);
        header(&mut b, 40, REGION_CAP_SPARSE_MMAP, 1, 0);
        put32(&mut b, 48, 2);
        put32(&mut b, 52, 0);
        put64(&mut b, 56, 0);
        put64(&mut b, 64, 0x2000);
        put64(&mut b, 72, 0x3000);
        put64(&mut b, 80, 0x1000);
        b
    }

    #[test]
    fn sparse_mmap_capability_lists_the_areas() {
        let r = parse_region_info(&sparse_region()).unwrap();
        assert_eq!(r.size, 0x4000);
        assert!(r.readable() && r.writable() && r.mmappable());
        assert_eq!(r.sparse, Some(vec![(0, 0x2000), (0x3000, 0x1000)]));
        assert!(!r.whole_mmap_allowed(), "the hole at 0x2000 forbids a whole-BAR mapping");

        let mut full = r.clone();
        full.sparse = Some(vec![(0x2000, 0x2000), (0, 0x2000)]);
        assert!(full.whole_mmap_allowed());
        full.sparse = None;
        assert!(full.whole_mmap_allowed());
        full.flags = 0x3;
        assert!(!full.whole_mmap_allowed());
    }

    #[test]
    fn truncated_and_looping_chains_are_errors() {
        let b = sparse_region();
        assert!(parse_region_info(&b[..70]).is_err());
        let mut looped = b.clone();
        put32(&mut looped, 44, 32); // sparse cap's next points back at the first cap
        assert!(parse_region_info(&looped).is_err());
        assert!(parse_region_info(&b[..20]).is_err());
    }

    #[test]
    fn iommu_info_with_iova_ranges() {
        let mut b = vec![0u8; 24];
        put32(&mut b, 0, 24 + 48 + 12);
        put32(&mut b, 4, 0x3);
        put64(&mut b, 8, 0x4020_1000); // 4K, 2M, 1G
        put32(&mut b, 16, 24);
        header(&mut b, 24, IOMMU_CAP_IOVA_RANGE, 1, 72);
        put32(&mut b, 32, 2);
        put64(&mut b, 40, 0);
        put64(&mut b, 48, 0xfedf_ffff);
        put64(&mut b, 56, 0xfef0_0000);
        put64(&mut b, 64, 0x7f_ffff_ffff);
        header(&mut b, 72, IOMMU_CAP_DMA_AVAIL, 1, 0);
        put32(&mut b, 80, 65535);
        let i = parse_iommu_info(&b).unwrap();
        assert_eq!(i.min_page(), 4096);
        assert_eq!(i.dma_avail, Some(65535));
        let r = i.ranges.unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1], IovaRange { start: 0xfef0_0000, end: 0x7f_ffff_ffff });
    }

    #[test]
    fn old_kernels_without_caps() {
        let mut b = vec![0u8; 24];
        put32(&mut b, 4, 0x1);
        put64(&mut b, 8, 0xffff_f000);
        let i = parse_iommu_info(&b).unwrap();
        assert_eq!(i.ranges, None);
        assert_eq!(i.usable_ranges(), vec![IovaRange { start: 0, end: u64::MAX }]);
        assert_eq!(i.min_page(), 4096);
    }
}
