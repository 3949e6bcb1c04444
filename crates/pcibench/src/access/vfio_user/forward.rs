//! `pcibench serve`'s interrupts: DEVICE_GET_IRQ_INFO answered from the served device's config
//! space (the counts vfio-pci would report: vfio_pci_get_irq_count), and DEVICE_SET_IRQS carried
//! out on its `DeviceAccess::interrupts`, whatever it raises forwarded to the eventfds the client
//! passed (SCM_RIGHTS) by one thread per client. INTx unmask is passed on; a disable, a new
//! routing or the client's leaving stops the thread and drops the device's interrupts, which tears
//! them down there. `Guarded` keeps the MSI and MSI-X registers and the MSI-X table from the client,
//! as vfio-pci keeps them from a user.

use super::wire::Put;
use super::{IRQ_ACTION_TRIGGER, IRQ_ACTION_UNMASK, IRQ_DATA_EVENTFD, IRQ_DATA_NONE};
use super::{IRQ_INFO_AUTOMASKED, IRQ_INFO_EVENTFD, IRQ_INFO_MASKABLE, IRQ_INFO_NORESIZE};
use crate::access::irq_fds::{INTX_INDEX, MSIX_INDEX, MSI_INDEX};
use crate::access::{DeviceAccess, Interrupts, IrqKind, IrqRequest};
use rustix::io::Errno;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one wait on the device lasts before the forwarder looks at its stop flag. Interrupts
/// are forwarded as they come (the wait returns at once); this bounds only how long a teardown
/// waits for the thread.
const TICK: Duration = Duration::from_millis(50);

/// A client's interrupts, routed on the served device and forwarded to its eventfds.
pub struct Routed {
    index: u32,
    irq: Arc<dyn Interrupts>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Routed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // `irq` drops after this: the device's interrupts are torn down once nothing waits on them.
    }
}

fn kind_of(index: u32) -> Option<IrqKind> {
    match index {
        INTX_INDEX => Some(IrqKind::Intx),
        MSI_INDEX => Some(IrqKind::Msi),
        MSIX_INDEX => Some(IrqKind::MsiX),
        _ => None,
    }
}

/// DEVICE_GET_IRQ_INFO's reply for `index`: struct vfio_irq_info (argsz, flags, index, count),
/// the count from the device's config space, the flags vfio-pci gives (vfio_pci_ioctl_get_irq_info:
/// INTx maskable and automasked, MSI and MSI-X not resizable while enabled).
pub fn irq_info(dev: &dyn DeviceAccess, index: u32) -> Vec<u8> {
    let mut cfg = [0u8; 256];
    let caps = match dev.config_read(0, &mut cfg) {
        Ok(()) => crate::pci::intr::read(&cfg),
        Err(_) => Default::default(),
    };
    let count = match index {
        INTX_INDEX => u32::from(caps.pin != 0),
        MSI_INDEX => caps.msi.map_or(0, |m| m.vectors),
        MSIX_INDEX => caps.msix.map_or(0, |m| m.vectors),
        _ => 0,
    };
    let flags = match (index, count) {
        (_, 0) => 0,
        (INTX_INDEX, _) => IRQ_INFO_EVENTFD | IRQ_INFO_MASKABLE | IRQ_INFO_AUTOMASKED,
        _ => IRQ_INFO_EVENTFD | IRQ_INFO_NORESIZE,
    };
    Put::default().u32(16).u32(flags).u32(index).u32(count).0
}

/// DEVICE_SET_IRQS (`flags`, `index`, `start`, `count`, the client's eventfds) on `dev`, with the
/// client's current routing in `routed`. The errnos are the ones vfio-pci returns for the same
/// request (vfio_pci_set_irqs_ioctl).
pub fn set_irqs(
    dev: &dyn DeviceAccess,
    routed: &mut Option<Routed>,
    (flags, index, start, count): (u32, u32, u32, u32),
    fds: Vec<OwnedFd>,
) -> Result<(), Errno> {
    let Some(kind) = kind_of(index) else {
        // ERR and REQ: nothing to route; disabling them is fine.
        return if count == 0 && flags & IRQ_DATA_NONE != 0 { Ok(()) } else { Err(Errno::INVAL) };
    };
    let owns = routed.as_ref().is_some_and(|r| r.index == index);
    match flags {
        f if f == IRQ_ACTION_TRIGGER | IRQ_DATA_NONE && count == 0 => {
            if owns {
                *routed = None;
            }
            Ok(())
        }
        f if f == IRQ_ACTION_TRIGGER | IRQ_DATA_EVENTFD => {
            if start != 0 || count == 0 || fds.len() != count as usize {
                return Err(Errno::INVAL);
            }
            // One kind at a time, as vfio-pci (another kind enabled: EINVAL).
            if routed.is_some() && !owns {
                return Err(Errno::INVAL);
            }
            *routed = None;
            let irq: Arc<dyn Interrupts> =
                Arc::from(dev.interrupts(IrqRequest::only(kind, count)).map_err(|_| Errno::NOTSUP)?);
            if irq.kind() != kind || irq.vectors() < count {
                return Err(Errno::NOSPC);
            }
            let stop = Arc::new(AtomicBool::new(false));
            let thread = {
                let (irq, stop) = (Arc::clone(&irq), Arc::clone(&stop));
                std::thread::Builder::new()
                    .name("vfio-user irq".into())
                    .spawn(move || forward(&*irq, &fds, &stop))
                    .map_err(|_| Errno::NOMEM)?
            };
            *routed = Some(Routed { index, irq, stop, thread: Some(thread) });
            Ok(())
        }
        f if f == IRQ_ACTION_UNMASK | IRQ_DATA_NONE => match routed {
            Some(r) if owns && start == 0 && count == 1 => r.irq.unmask().map_err(|_| Errno::IO),
            _ => Err(Errno::INVAL),
        },
        // Masking, and the bool form of each action, are not carried.
        _ => Err(Errno::NOTSUP),
    }
}

/// Forward what `irq` raises to the client's eventfds, each vector's count to its own, until
/// `stop` (or the device's wait fails: the client then sees no more interrupts).
fn forward(irq: &dyn Interrupts, fds: &[OwnedFd], stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(fired) = irq.wait(TICK) else { return };
        for v in fired.vectors() {
            if let Some(fd) = fds.get(v as usize) {
                // An eventfd adds what is written to its counter (eventfd(2)); one that is full
                // (2^64 - 2) only refuses the write, and the client has that many pending anyway.
                let _ = rustix::io::write(fd, &fired.vector(v).to_ne_bytes());
            }
        }
    }
}

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
