//! First-fit bookkeeping of an address space: IOVAs in a VFIO container, offsets in a u-dma-buf.

/// Reserved `[start, start+len)` ranges, kept sorted by start.
#[derive(Debug, Default)]
pub struct Space {
    used: Vec<(u64, u64)>,
}

fn align_up(v: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    v.checked_add(align - 1).map(|x| x & !(align - 1))
}

impl Space {
    pub fn new() -> Self {
        Space::default()
    }

    /// Reserve `len` bytes aligned to `align` (a power of two), at or above `floor`, inside one of
    /// `ranges` (inclusive `(start, end)` pairs), with the last byte at or below `limit`.
    /// Returns the lowest such address, or None when nothing fits.
    pub fn reserve(&mut self, ranges: &[(u64, u64)], len: u64, align: u64, floor: u64, limit: u64) -> Option<u64> {
        if len == 0 || !align.is_power_of_two() {
            return None;
        }
        let mut sorted = ranges.to_vec();
        sorted.sort();
        for (rstart, rend) in sorted {
            let top = rend.min(limit);
            let mut next = align_up(rstart.max(floor), align);
            while let Some(cand) = next {
                let Some(last) = cand.checked_add(len - 1).filter(|l| *l <= top) else {
                    break;
                };
                match self.used.iter().find(|(s, l)| *s <= last && cand < s + l) {
                    None => {
                        let at = self.used.partition_point(|(s, _)| *s < cand);
                        self.used.insert(at, (cand, len));
                        return Some(cand);
                    }
                    Some((s, l)) => next = align_up(s + l, align),
                }
            }
        }
        None
    }

    /// Give back the range reserved at `start`.
    pub fn release(&mut self, start: u64) {
        self.used.retain(|(s, _)| *s != start);
    }

    pub fn reserved(&self) -> u64 {
        self.used.iter().map(|(_, l)| l).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The intel-iommu shape: the MSI window 0xfee00000-0xfeefffff is not in any range.
    const Q35: [(u64, u64); 2] = [(0, 0xfedf_ffff), (0xfef0_0000, 0x7f_ffff_ffff)];

    #[test]
    fn first_fit_above_floor_and_aligned() {
        let mut s = Space::new();
        let a = s.reserve(&Q35, 0x1000, 0x1000, 0x1000, u64::MAX).unwrap();
        assert_eq!(a, 0x1000);
        let b = s.reserve(&Q35, 0x20_0000, 0x20_0000, 0x20_0000, u64::MAX).unwrap();
        assert_eq!(b, 0x20_0000);
        let c = s.reserve(&Q35, 0x1000, 0x1000, 0x1000, u64::MAX).unwrap();
        assert_eq!(c, 0x2000, "fills the gap below the 2 MiB block");
        s.release(a);
        assert_eq!(s.reserve(&Q35, 0x1000, 0x1000, 0x1000, u64::MAX), Some(0x1000));
        assert_eq!(s.reserved(), 0x20_2000);
    }

    #[test]
    fn respects_dma_width_and_range_holes() {
        let mut s = Space::new();
        // A 32-bit device: the last byte must be <= 0xffff_ffff; the block straddling the MSI
        // window is skipped and the next fit is above it.
        let below = s.reserve(&Q35, 0x100_0000, 0x100_0000, 0xfd00_0000, 0xffff_ffff).unwrap();
        assert_eq!(below, 0xfd00_0000);
        let above = s.reserve(&Q35, 0x100_0000, 0x100_0000, 0xfd00_0000, 0xffff_ffff);
        assert_eq!(above, Some(0xff00_0000));
        assert_eq!(s.reserve(&Q35, 0x100_0000, 0x100_0000, 0xfd00_0000, 0xffff_ffff), None);
        // 28 bits (edu's default mask): everything must end below 256 MiB.
        let mut t = Space::new();
        assert_eq!(t.reserve(&Q35, 0x1000_0000, 0x1000, 0x1000, (1 << 28) - 1), None);
        assert_eq!(t.reserve(&Q35, 0x0fff_f000, 0x1000, 0x1000, (1 << 28) - 1), Some(0x1000));
    }

    #[test]
    fn never_overflows() {
        let mut s = Space::new();
        assert_eq!(s.reserve(&[(u64::MAX - 0xfff, u64::MAX)], 0x2000, 0x1000, 0, u64::MAX), None);
        assert_eq!(s.reserve(&[(0, u64::MAX)], 0, 0x1000, 0, u64::MAX), None);
        assert_eq!(s.reserve(&[(0, u64::MAX)], 0x1000, 3, 0, u64::MAX), None);
    }
}
