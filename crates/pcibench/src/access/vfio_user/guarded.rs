//! What `pcibench serve` keeps from its client, as vfio-pci keeps it from a user: the MSI and
//! MSI-X registers and the MSI-X table.

use crate::access::DeviceAccess;

/// What vfio-pci keeps from a user of the device's interrupts: the MSI and MSI-X capabilities'
/// registers, which only DEVICE_SET_IRQS changes (vfio_pci_config.c: MSI's flags, address and
/// data are virtualized, MSI-X's capability has no write permission), and the MSI-X table, which
/// region reads and writes skip (vfio_pci_core_do_io_rw: reads of it give 0xff, writes are
/// dropped; the PBA stays readable).
pub struct Guarded {
    /// Config space byte ranges a client's writes do not reach.
    caps: Vec<(u64, u64)>,
    /// The MSI-X table: its BAR, first byte and end.
    table: Option<(u32, u64, u64)>,
}

impl Guarded {
    /// From the served device's config space.
    pub fn of(dev: &dyn DeviceAccess) -> Guarded {
        let mut cfg = [0u8; 256];
        let caps = match dev.config_read(0, &mut cfg) {
            Ok(()) => crate::pci::intr::read(&cfg),
            Err(_) => Default::default(),
        };
        let mut ranges = Vec::new();
        if let Some(m) = caps.msi {
            // Message Control onwards: 32- or 64-bit address, with or without the mask and
            // pending words (PCI Local Bus 3.0 §6.8.1).
            let len = match (m.addr64, m.per_vector_mask) {
                (false, false) => 10,
                (true, false) => 14,
                (false, true) => 20,
                (true, true) => 24,
            };
            ranges.push((m.offset as u64 + 2, m.offset as u64 + len));
        }
        if let Some(x) = caps.msix {
            ranges.push((x.offset as u64 + 2, x.offset as u64 + 12));
        }
        let table = caps.msix.map(|x| {
            let start = x.table_offset as u64;
            (x.table_bar as u32, start, start + 16 * x.vectors as u64)
        });
        Guarded { caps: ranges, table }
    }

    /// A client's config write of `data` at `offset`, with the bytes that fall in the MSI and
    /// MSI-X capabilities replaced by what the device holds (so they do not change).
    pub fn config_write(&self, dev: &dyn DeviceAccess, offset: u64, data: &[u8]) -> crate::Result<Vec<u8>> {
        let mut out = data.to_vec();
        let end = offset + data.len() as u64;
        if self.caps.iter().any(|&(a, b)| a < end && offset < b) {
            let mut now = vec![0u8; data.len()];
            dev.config_read(offset, &mut now)?;
            for (i, byte) in out.iter_mut().enumerate() {
                let at = offset + i as u64;
                if self.caps.iter().any(|&(a, b)| (a..b).contains(&at)) {
                    *byte = now[i];
                }
            }
        }
        Ok(out)
    }

    /// The areas of BAR `region` (`size` bytes) a client may map: all of it, or the whole pages
    /// before and after an MSI-X table in it. The vfio-user spec's one way to say so is the
    /// sparse mmap capability (vfio-pci before Linux 4.16 did the same: msix_sparse_mmap_cap).
    pub fn mmap_areas(&self, region: u32, size: u64) -> Vec<(u64, u64)> {
        const PAGE: u64 = 4096;
        match self.table {
            Some((bar, start, end)) if bar == region => {
                let (before, after) = (start / PAGE * PAGE, end.div_ceil(PAGE) * PAGE);
                [(0, before), (after, size.saturating_sub(after))].into_iter().filter(|&(_, len)| len > 0).collect()
            }
            _ => vec![(0, size)],
        }
    }

    /// Whether a region access of `len` bytes at `offset` of `region` touches the MSI-X table.
    pub fn hides(&self, region: u32, offset: u64, len: u64) -> bool {
        self.table.is_some_and(|(bar, a, b)| bar == region && a < offset + len && offset < b)
    }
}

#[cfg(test)]
mod tests {
    use super::Guarded;

    #[test]
    fn a_msix_table_in_a_mappable_bar_is_kept_out_of_its_mmap_areas() {
        let g = Guarded { caps: Vec::new(), table: Some((2, 0x2100, 0x2300)) };
        assert_eq!(g.mmap_areas(2, 0x10000), vec![(0, 0x2000), (0x3000, 0xd000)]);
        assert_eq!(g.mmap_areas(0, 0x10000), vec![(0, 0x10000)], "another BAR: all of it");
        let at_start = Guarded { caps: Vec::new(), table: Some((2, 0, 0x200)) };
        assert_eq!(at_start.mmap_areas(2, 0x2000), vec![(0x1000, 0x1000)]);
        let whole = Guarded { caps: Vec::new(), table: Some((2, 0, 0x200)) };
        assert_eq!(whole.mmap_areas(2, 0x1000), vec![], "a one-page BAR holding the table: nothing to map");
        assert!(g.hides(2, 0x22fc, 4) && !g.hides(2, 0x2300, 4) && !g.hides(4, 0x2100, 4));
    }
}
