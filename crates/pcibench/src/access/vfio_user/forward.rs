//! `pcibench serve`'s interrupts: DEVICE_GET_IRQ_INFO answered from the served device's config
//! space (the counts vfio-pci would report: vfio_pci_get_irq_count), and DEVICE_SET_IRQS carried
//! out on its `DeviceAccess::interrupts`, whatever it raises forwarded to the eventfds the client
//! assigned to each vector (SCM_RIGHTS) by one thread per client.
//!
//! DEVICE_SET_IRQS as QEMU's client sends it and libvfio-user's irq.c accepts it: any
//! `start`/`count` sub-range of the kind's vectors; DATA_EVENTFD with descriptors assigns them,
//! without descriptors de-assigns the range (QEMU sends runs of -1 that way, split at
//! `max_msg_fds` with start offsets); DATA_NONE or DATA_BOOL with ACTION_TRIGGER signals the
//! vectors' eventfds (a loopback, as vfio-pci does); ACTION_MASK/ACTION_UNMASK mask and unmask
//! INTx (advertised MASKABLE), the fires that come while it is masked held until the unmask;
//! count 0 with DATA_NONE disables the kind. The errnos are vfio-pci's for the same request
//! (vfio_pci_set_irqs_ioctl). A disable, another kind, or the client's leaving stops the thread
//! and drops the device's routing, which tears the interrupts down there.

use super::wire::Put;
use super::{IRQ_ACTION_MASK, IRQ_ACTION_TRIGGER, IRQ_ACTION_UNMASK, IRQ_DATA_BOOL, IRQ_DATA_EVENTFD, IRQ_DATA_NONE};
use super::{IRQ_INFO_AUTOMASKED, IRQ_INFO_EVENTFD, IRQ_INFO_MASKABLE, IRQ_INFO_NORESIZE};
use crate::access::irq_fds::{INTX_INDEX, MSIX_INDEX, MSI_INDEX};
use crate::access::{ConfigPort, DeviceAccess, Interrupts, IrqKind, IrqRequest};
use rustix::io::Errno;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one wait on the device lasts before the forwarder looks at its stop flag. Interrupts
/// are forwarded as they come (the wait returns at once); this bounds only how long a teardown
/// waits for the thread.
const TICK: Duration = Duration::from_millis(50);

/// A client's eventfds per vector, and INTx's mask as the client set it.
#[derive(Default)]
struct Targets {
    fds: Vec<Option<OwnedFd>>,
    /// ACTION_MASK on INTx: fires are held (counted) until ACTION_UNMASK.
    masked: bool,
    held: u64,
    /// INTx: a signal went to the client and no ACTION_UNMASK came since, so the client's pin is
    /// up (QEMU lowers it only at its EOI, which unmasks).
    signalled: bool,
}

/// A client's interrupts, routed on the served device and forwarded to its eventfds.
pub struct Routed {
    index: u32,
    irq: Arc<dyn Interrupts>,
    /// INTx: the device's config space, whose Interrupt Status says whether the line is asserted.
    config: Option<Arc<dyn ConfigPort>>,
    targets: Arc<Mutex<Targets>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Interrupts that had no eventfd to go to (a de-assigned vector, a full eventfd).
    pub lost: Arc<AtomicU64>,
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

impl Routed {
    /// The kind and vectors routed on the device, for the server's log.
    pub fn describe(&self) -> String {
        let kind = kind_of(self.index).map_or("?".to_string(), |k| k.to_string());
        format!("{kind} x{}", self.irq.vectors())
    }

    /// INTx: whether the client's pin is up (signalled, not yet unmasked). Config reads report
    /// Interrupt Status set meanwhile: a signal QEMU took after the cause was cleared (the fire
    /// raced the handler's clear; QEMU without KVM keeps its pin up until its next BAR access)
    /// would otherwise leave the guest's line asserted with Status clear, and the guest's
    /// vfio-pci handler (pci_check_and_mask_intx) returning IRQ_NONE until its kernel disables
    /// the line ("irq N: nobody cared"; lab/findings.md 6, q35-vu's sim-nvram). With Status set the
    /// handler claims it and masks; the next BAR access lowers the pin and unmasks.
    pub fn intx_pin_up(&self) -> bool {
        self.index == INTX_INDEX && self.targets.lock().unwrap_or_else(|e| e.into_inner()).signalled
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

/// VFIO_PCI_ERR_IRQ_INDEX: the error notifier.
pub const ERR_INDEX: u32 = 3;

/// Vectors of `index` the device offers, from its config space, as vfio_pci_get_irq_count counts
/// them, and ERR one for a PCI Express function: QEMU asks for it at realize and warns "Could not
/// enable error recovery for the device" without it; nothing here signals it. REQ (vfio-pci's
/// one) is not offered: with it QEMU 11.1 goes for the device's hot-unplug when the server dies
/// and aborts on the way (error_setv: Assertion `*errp == NULL', the lab's served_gone); without
/// it QEMU leaves the dead function in place, reading all-ones.
pub fn offered(dev: &dyn DeviceAccess, index: u32) -> u32 {
    let mut cfg = [0u8; 256];
    let read = dev.config_read(0, &mut cfg).is_ok();
    let caps = if read { crate::pci::intr::read(&cfg) } else { Default::default() };
    match index {
        INTX_INDEX => u32::from(caps.pin != 0),
        MSI_INDEX => caps.msi.map_or(0, |m| m.vectors),
        MSIX_INDEX => caps.msix.map_or(0, |m| m.vectors),
        ERR_INDEX => u32::from(read && crate::pci::config::parse(&cfg).pcie.is_some()),
        _ => 0,
    }
}

/// DEVICE_GET_IRQ_INFO's reply for `index`: struct vfio_irq_info (argsz, flags, index, count),
/// the count from the device's config space, the flags vfio-pci gives (vfio_pci_ioctl_get_irq_info:
/// INTx maskable and automasked, MSI and MSI-X not resizable while enabled).
pub fn irq_info(dev: &dyn DeviceAccess, index: u32) -> Vec<u8> {
    let count = offered(dev, index);
    let flags = match (index, count) {
        (_, 0) => 0,
        (INTX_INDEX, _) => IRQ_INFO_EVENTFD | IRQ_INFO_MASKABLE | IRQ_INFO_AUTOMASKED,
        _ => IRQ_INFO_EVENTFD | IRQ_INFO_NORESIZE,
    };
    Put::default().u32(16).u32(flags).u32(index).u32(count).0
}

/// One DEVICE_SET_IRQS request: struct vfio_irq_set's fields, its descriptors and its data
/// (DATA_BOOL's bytes).
pub struct SetIrqs<'a> {
    pub flags: u32,
    pub index: u32,
    pub start: u32,
    pub count: u32,
    pub fds: Vec<OwnedFd>,
    pub data: &'a [u8],
}

/// Whether `fd` is an eventfd: the only kind of descriptor the server writes interrupts to (a
/// pipe, a socket or a file could block the writer or mean something else entirely).
fn is_eventfd(fd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .is_ok_and(|l| l.as_os_str() == "anon_inode:[eventfd]")
}

/// Carry out `req` on `dev`, with the client's current routing in `routed`.
pub fn set_irqs(dev: &dyn DeviceAccess, routed: &mut Option<Routed>, req: SetIrqs<'_>) -> Result<(), Errno> {
    let SetIrqs { flags, index, start, count, fds, data } = req;
    let action = flags & (IRQ_ACTION_MASK | IRQ_ACTION_UNMASK | IRQ_ACTION_TRIGGER);
    let data_type = flags & (IRQ_DATA_NONE | IRQ_DATA_BOOL | IRQ_DATA_EVENTFD);
    // Exactly one action and one data type, nothing else (libvfio-user device_set_irqs_validate).
    if action.count_ones() != 1 || data_type.count_ones() != 1 || flags & !(action | data_type) != 0 {
        return Err(Errno::INVAL);
    }
    if (!fds.is_empty() && (data_type != IRQ_DATA_EVENTFD || fds.len() != count as usize))
        || (data_type == IRQ_DATA_BOOL && data.len() != count as usize)
    {
        return Err(Errno::INVAL);
    }
    let owns = routed.as_ref().is_some_and(|r| r.index == index);
    if count == 0 {
        // The one count-0 form: disable the kind (start 0, TRIGGER | DATA_NONE).
        if start != 0 || flags != IRQ_ACTION_TRIGGER | IRQ_DATA_NONE {
            return Err(Errno::INVAL);
        }
        if owns {
            *routed = None;
        }
        return Ok(());
    }
    if start.checked_add(count).is_none_or(|end| end > offered(dev, index)) {
        return Err(Errno::INVAL);
    }
    let Some(kind) = kind_of(index) else {
        // ERR: an eventfd is taken (and a loopback trigger), as vfio-pci takes it; the served cards
        // never signal it, so the descriptor is not kept.
        return match action {
            IRQ_ACTION_TRIGGER if fds.iter().all(is_eventfd) => Ok(()),
            _ => Err(Errno::INVAL),
        };
    };
    let selected = |i: u32| data_type != IRQ_DATA_BOOL || data[i as usize] != 0;
    match action {
        IRQ_ACTION_TRIGGER if data_type == IRQ_DATA_EVENTFD => {
            // One kind at a time, as vfio-pci (another kind enabled: EINVAL).
            if routed.is_some() && !owns {
                return Err(Errno::INVAL);
            }
            if !fds.iter().all(is_eventfd) {
                return Err(Errno::INVAL);
            }
            for fd in &fds {
                // Written without blocking: an eventfd whose counter is full refuses the write
                // (counted as lost) instead of holding the forwarder. Both known clients make their
                // eventfds non-blocking already (QEMU event_notifier_init, pcibench's irq_fds).
                let fl = rustix::fs::fcntl_getfl(fd).map_err(|_| Errno::BADF)?;
                rustix::fs::fcntl_setfl(fd, fl | rustix::fs::OFlags::NONBLOCK).map_err(|_| Errno::BADF)?;
            }
            let need = start + count;
            let grow = routed.as_ref().is_none_or(|r| r.irq.vectors() < need);
            let targets = if grow {
                // Routed anew with room for `need` vectors (the eventfds assigned so far kept).
                let old = routed.take();
                let targets = old.as_ref().map_or_else(Default::default, |r| Arc::clone(&r.targets));
                drop(old);
                *routed = Some(route(dev, index, kind, need, targets)?);
                &routed.as_ref().ok_or(Errno::INVAL)?.targets
            } else {
                &routed.as_ref().ok_or(Errno::INVAL)?.targets
            };
            let mut t = targets.lock().unwrap_or_else(|e| e.into_inner());
            if t.fds.len() < need as usize {
                t.fds.resize_with(need as usize, || None);
            }
            let mut given = fds.into_iter();
            for v in start..need {
                // No descriptors: de-assign (vfio-user.rst: "If no file descriptors are provided,
                // this de-assigns the specified previously configured interrupts").
                t.fds[v as usize] = given.next();
            }
            Ok(())
        }
        IRQ_ACTION_TRIGGER => {
            let r = routed.as_ref().filter(|_| owns).ok_or(Errno::INVAL)?;
            let t = r.targets.lock().unwrap_or_else(|e| e.into_inner());
            for v in (start..start + count).filter(|&v| selected(v - start)) {
                if let Some(Some(fd)) = t.fds.get(v as usize) {
                    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
                }
            }
            Ok(())
        }
        // MSI and MSI-X have no mask here, as in vfio-pci ("Need masking support exported").
        _ if kind != IrqKind::Intx => Err(Errno::NOTTY),
        _ if data_type == IRQ_DATA_EVENTFD => Err(Errno::NOTTY),
        IRQ_ACTION_MASK => {
            let r = routed.as_ref().filter(|_| owns && start == 0 && count == 1).ok_or(Errno::INVAL)?;
            if selected(0) {
                r.targets.lock().unwrap_or_else(|e| e.into_inner()).masked = true;
            }
            Ok(())
        }
        _ => {
            let r = routed.as_ref().filter(|_| owns && start == 0 && count == 1).ok_or(Errno::INVAL)?;
            if !selected(0) {
                return Ok(());
            }
            let mut t = r.targets.lock().unwrap_or_else(|e| e.into_inner());
            let held = std::mem::take(&mut t.held);
            let was_masked = std::mem::replace(&mut t.masked, false);
            t.signalled = false;
            if was_masked && held > 0 && asserted(r.config.as_deref()) {
                // The line fired while the client had it masked: it fires now, and stays masked
                // at the device until the handler's next unmask (vfio-pci's one masked flag).
                if let Some(Some(fd)) = t.fds.first() {
                    t.signalled = rustix::io::write(fd, &held.to_ne_bytes()).is_ok();
                }
                return Ok(());
            }
            drop(t);
            r.irq.unmask().map_err(|_| Errno::IO)
        }
    }
}

/// Route `vectors` vectors of `kind` on `dev` and start forwarding them to `targets`.
fn route(
    dev: &dyn DeviceAccess,
    index: u32,
    kind: IrqKind,
    vectors: u32,
    targets: Arc<Mutex<Targets>>,
) -> Result<Routed, Errno> {
    let irq: Arc<dyn Interrupts> =
        Arc::from(dev.interrupts(IrqRequest::only(kind, vectors)).map_err(|_| Errno::NOTSUP)?);
    if irq.kind() != kind || irq.vectors() < vectors {
        return Err(Errno::NOSPC);
    }
    let config = if kind == IrqKind::Intx { dev.config_port().ok() } else { None };
    let stop = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicU64::new(0));
    let thread = {
        let (irq, stop, targets, lost) = (Arc::clone(&irq), Arc::clone(&stop), Arc::clone(&targets), Arc::clone(&lost));
        let config = config.clone();
        std::thread::Builder::new()
            .name("vfio-user irq".into())
            .spawn(move || forward(&*irq, config.as_deref(), &targets, &stop, &lost))
            .map_err(|_| Errno::NOMEM)?
    };
    Ok(Routed { index, irq, config, targets, stop, thread: Some(thread), lost })
}

/// Whether INTx is asserted now: the function's Interrupt Status (PCI_STATUS bit 3, PCI 2.3),
/// which the served cards keep with their line. True where it cannot be read.
fn asserted(config: Option<&dyn ConfigPort>) -> bool {
    let mut status = [0u8; 2];
    match config.map(|c| c.read(0x06, &mut status)) {
        Some(Ok(())) => u16::from_le_bytes(status) & crate::pci::intr::STATUS_INTERRUPT != 0,
        _ => true,
    }
}

/// Forward what `irq` raises to the client's eventfds, each vector's count to its own, until
/// `stop` (or the device's wait fails: the client then sees no more interrupts).
///
/// INTx is a level: a fire is passed on only while the line is still asserted. The client cannot
/// take an eventfd signal back, and QEMU without KVM asserts its pin on each one and lowers it only
/// at its next BAR access (hw/vfio/region.c: "A read or write to a BAR always signals an INTx
/// EOI"), so a fire that lost the race with the handler's clear (the line already low when it
/// arrives) left the guest's pin up with Interrupt Status clear: the guest's vfio-pci handler
/// returned IRQ_NONE until its kernel disabled the line ("irq 22: nobody cared"; the lab's
/// q35-vu). Such a fire is dropped and the device unmasked, as if it had not come.
fn forward(
    irq: &dyn Interrupts,
    config: Option<&dyn ConfigPort>,
    targets: &Mutex<Targets>,
    stop: &AtomicBool,
    lost: &AtomicU64,
) {
    let intx = irq.kind() == IrqKind::Intx;
    while !stop.load(Ordering::Relaxed) {
        let Ok(fired) = irq.wait(TICK) else { return };
        if intx && !fired.is_empty() && !asserted(config) {
            let _ = irq.unmask();
            continue;
        }
        let mut t = targets.lock().unwrap_or_else(|e| e.into_inner());
        for v in fired.vectors() {
            let n = fired.vector(v);
            if intx && t.masked {
                t.held += n;
                continue;
            }
            // An eventfd adds what is written to its counter (eventfd(2)); written non-blocking,
            // one that is full refuses the write, and the interrupt is counted lost.
            match t.fds.get(v as usize) {
                Some(Some(fd)) if rustix::io::write(fd, &n.to_ne_bytes()).is_ok() => t.signalled |= intx,
                _ => {
                    lost.fetch_add(n, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Fired;

    /// INTx that fires once, then ends the forwarder; counts the unmasks it gets.
    struct OneFire {
        fired: AtomicBool,
        unmasks: AtomicU64,
        stop: Arc<AtomicBool>,
    }

    impl Interrupts for OneFire {
        fn kind(&self) -> IrqKind {
            IrqKind::Intx
        }
        fn vectors(&self) -> u32 {
            1
        }
        fn wait(&self, _: Duration) -> crate::Result<Fired> {
            if self.fired.swap(true, Ordering::Relaxed) {
                self.stop.store(true, Ordering::Relaxed);
                return Ok(Fired::none(1));
            }
            Ok(Fired::from_counts(vec![1]))
        }
        fn unmask(&self) -> crate::Result<()> {
            self.unmasks.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        fn describe(&self) -> String {
            "INTx (test)".into()
        }
    }

    /// Config space whose status register reads `0`.
    struct Status(u16);

    impl ConfigPort for Status {
        fn read(&self, offset: u64, buf: &mut [u8]) -> crate::Result<()> {
            let mut cfg = [0u8; 8];
            cfg[6..8].copy_from_slice(&self.0.to_le_bytes());
            buf.copy_from_slice(&cfg[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write(&self, _: u64, _: &[u8]) -> crate::Result<()> {
            Ok(())
        }
        fn address(&self) -> String {
            "test".into()
        }
    }

    /// A fire reaches the client only while the line is still asserted (Interrupt Status set);
    /// one that comes after the handler cleared the cause is dropped and the device unmasked, so no
    /// stale signal keeps QEMU's pin up.
    #[test]
    fn intx_is_forwarded_only_while_the_line_is_asserted() {
        for (status, delivered, unmasks) in [(STATUS_INTERRUPT_BIT, 1, 0), (0, 0, 1)] {
            let stop = Arc::new(AtomicBool::new(false));
            let irq = OneFire { fired: AtomicBool::new(false), unmasks: AtomicU64::new(0), stop: Arc::clone(&stop) };
            let efd = rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).unwrap();
            let reader = efd.try_clone().unwrap();
            let targets = Mutex::new(Targets { fds: vec![Some(efd)], ..Default::default() });
            let lost = AtomicU64::new(0);
            forward(&irq, Some(&Status(status)), &targets, &stop, &lost);
            let mut v = [0u8; 8];
            let got = rustix::io::read(&reader, &mut v).map_or(0, |_| u64::from_ne_bytes(v));
            assert_eq!((got, irq.unmasks.load(Ordering::Relaxed)), (delivered, unmasks), "status {status:#x}");
            assert_eq!(lost.load(Ordering::Relaxed), 0);
        }
    }

    const STATUS_INTERRUPT_BIT: u16 = crate::pci::intr::STATUS_INTERRUPT;
}
