//! Interrupts routed to one eventfd per vector, the shape VFIO and vfio-user share: the kind and
//! vector count chosen from what the function offers (`choose`), the eventfds handed over with
//! `VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER`, one epoll set over them all (the one
//! waiter), INTx unmasked with `VFIO_IRQ_SET_ACTION_UNMASK`, and everything torn down on drop.
//!
//! The path's side is an `IrqBackend` (the VFIO ioctls, the vfio-user messages, or a test's
//! fake), so the routing logic is tested without a device. A process that exits without dropping
//! (a forced exit, `_exit(130)` on a second Ctrl-C) closes the device fd, and the kernel tears the
//! interrupts down itself: vfio_pci_core_close_device → vfio_pci_core_disable, which calls
//! VFIO_IRQ_SET_DATA_NONE | ACTION_TRIGGER on the index in use (drivers/vfio/pci/vfio_pci_core.c).

use super::irq::{Fired, Interrupts, IrqKind, IrqRequest};
use crate::{Error, Result};
use rustix::event::{epoll, eventfd, EventfdFlags, Timespec};
use rustix::io::Errno;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX (include/uapi/linux/vfio.h).
pub const INTX_INDEX: u32 = 0;
pub const MSI_INDEX: u32 = 1;
pub const MSIX_INDEX: u32 = 2;
/// The most vectors one function has (MSI-X Table Size is 11 bits: PCI Local Bus 3.0 §6.8.2.3).
pub const MAX_VECTORS: u32 = 2048;

/// The VFIO irq index of `kind`.
pub const fn index_of(kind: IrqKind) -> u32 {
    match kind {
        IrqKind::Intx => INTX_INDEX,
        IrqKind::Msi => MSI_INDEX,
        IrqKind::MsiX => MSIX_INDEX,
    }
}

/// The path's side of routing: what `VFIO_DEVICE_SET_IRQS` does, by ioctl or by message.
pub trait IrqBackend: Send + Sync {
    /// Route vectors 0..fds.len() of `index` to `fds` (ACTION_TRIGGER | DATA_EVENTFD, start 0).
    fn trigger(&self, index: u32, fds: &[BorrowedFd<'_>]) -> Result<()>;
    /// Tear `index` down (ACTION_TRIGGER | DATA_NONE, count 0): the function's enable cleared.
    fn disable(&self, index: u32) -> Result<()>;
    /// Unmask vector 0 of `index` (ACTION_UNMASK | DATA_NONE, count 1): INTx after its handler.
    fn unmask(&self, index: u32) -> Result<()>;
    /// Where the eventfds come from, for `Interrupts::describe`: "VFIO eventfd".
    fn via(&self) -> &'static str;
    /// The device, for errors: "VFIO device 0000:00:04.0".
    fn device(&self) -> String;
}

/// Vectors the function offers per kind (VFIO_DEVICE_GET_IRQ_INFO's count; 0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offered {
    pub intx: u32,
    pub msi: u32,
    pub msix: u32,
}

impl Offered {
    pub fn count(&self, kind: IrqKind) -> u32 {
        match kind {
            IrqKind::Intx => self.intx.min(1),
            IrqKind::Msi => self.msi.min(32),
            IrqKind::MsiX => self.msix.min(MAX_VECTORS),
        }
    }
}

/// The kind and vector count to route for `req`: an explicit kind or a one-line refusal; `None`
/// takes MSI-X, else MSI, else INTx (libxdma's `xdma_irq_setup` order). The count is what was
/// asked for, at most what the function has (an engine shares the vectors it got).
pub fn choose(req: IrqRequest, offered: Offered, device: &str) -> Result<(IrqKind, u32)> {
    let kind = match req.kind {
        Some(k) if offered.count(k) > 0 => k,
        Some(k) => {
            let has: Vec<String> = [IrqKind::MsiX, IrqKind::Msi, IrqKind::Intx]
                .into_iter()
                .filter(|&k| offered.count(k) > 0)
                .map(|k| k.to_string())
                .collect();
            let has = if has.is_empty() { "none".to_string() } else { has.join(", ") };
            let more = match k {
                IrqKind::Intx => " (no interrupt pin, a virtual function, or vfio-pci loaded with nointxmask on a line it cannot mask)",
                _ => " (no such capability)",
            };
            return Err(Error::Unsupported(format!(
                "{device} offers no {k} vectors{more}; it offers: {has}: pick one of those with --irq-kind, or auto"
            )));
        }
        None => [IrqKind::MsiX, IrqKind::Msi, IrqKind::Intx].into_iter().find(|&k| offered.count(k) > 0).ok_or_else(
            || {
                Error::Unsupported(format!(
                    "{device} offers no interrupts at all (no MSI-X, no MSI, no INTx pin): complete by polling"
                ))
            },
        )?,
    };
    Ok((kind, req.vectors.clamp(1, offered.count(kind))))
}

/// Route `kind` with `vectors` vectors through `backend`. MSI with several vectors falls back to
/// one where the platform refuses multiple MSI (x86 without interrupt remapping allocates one:
/// vfio_msi_enable then enables nothing and returns the count it could have had, which the VFIO
/// backend reports as a failure).
pub fn route(backend: Arc<dyn IrqBackend>, kind: IrqKind, vectors: u32) -> Result<EventfdIrqs> {
    // INTx is one line per function (VFIO refuses a count above 1 on its index).
    let vectors = if kind == IrqKind::Intx { 1 } else { vectors.clamp(1, MAX_VECTORS) };
    match EventfdIrqs::new(Arc::clone(&backend), kind, vectors) {
        Err(_) if kind == IrqKind::Msi && vectors > 1 => EventfdIrqs::new(backend, kind, 1),
        r => r,
    }
}

/// A kind's vectors routed to eventfds, with one epoll set over them.
pub struct EventfdIrqs {
    kind: IrqKind,
    fds: Vec<OwnedFd>,
    epoll: OwnedFd,
    backend: Arc<dyn IrqBackend>,
}

impl EventfdIrqs {
    fn new(backend: Arc<dyn IrqBackend>, kind: IrqKind, vectors: u32) -> Result<EventfdIrqs> {
        let dev = backend.device();
        let sys = |what: &str, e: Errno| Error::Device(format!("{what} failed for {dev}'s {kind} interrupts: {e}"));
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| sys("epoll_create1", e))?;
        let mut fds = Vec::with_capacity(vectors as usize);
        for v in 0..vectors {
            let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|e| sys("eventfd", e))?;
            epoll::add(&epoll, &fd, epoll::EventData::new_u64(v as u64), epoll::EventFlags::IN)
                .map_err(|e| sys("epoll_ctl", e))?;
            fds.push(fd);
        }
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
        backend.trigger(index_of(kind), &borrowed)?;
        Ok(EventfdIrqs { kind, fds, epoll, backend })
    }

    /// Read `vector`'s counter (0 when it has not fired: the eventfd is non-blocking).
    fn take(&self, vector: usize) -> Result<u64> {
        let mut v = [0u8; 8];
        match rustix::io::read(&self.fds[vector], &mut v) {
            // An eventfd read returns exactly its 8-byte counter (eventfd(2)).
            Ok(8) => Ok(u64::from_ne_bytes(v)),
            Ok(n) => Err(Error::Device(format!("an eventfd read returned {n} bytes, not 8"))),
            Err(Errno::AGAIN) => Ok(0),
            Err(e) => Err(Error::Device(format!(
                "reading {}'s {} vector {vector} eventfd failed: {e}",
                self.backend.device(),
                self.kind
            ))),
        }
    }
}

impl Interrupts for EventfdIrqs {
    fn kind(&self) -> IrqKind {
        self.kind
    }
    fn vectors(&self) -> u32 {
        self.fds.len() as u32
    }
    fn wait(&self, timeout: Duration) -> Result<Fired> {
        // Clamped so the deadline cannot overflow (about 68 years is forever here).
        let deadline = Instant::now() + timeout.min(Duration::from_secs(i32::MAX as u64));
        let mut events = vec![
            epoll::Event { flags: epoll::EventFlags::empty(), data: epoll::EventData::new_u64(0) };
            self.fds.len().clamp(1, 64)
        ];
        let n = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ts = Timespec::try_from(left).map_err(|e| Error::Device(format!("interrupt wait: {e}")))?;
            match epoll::wait(&self.epoll, &mut events[..], Some(&ts)) {
                Ok(n) => break n,
                // A signal (Ctrl-C sets the stop flag) ends epoll_wait early whatever SA_RESTART
                // says: wait out the rest, so the interrupt waited for is not lost mid-transfer.
                Err(Errno::INTR) => continue,
                Err(e) => {
                    return Err(Error::Device(format!(
                        "waiting for {}'s {} interrupts failed: {e}",
                        self.backend.device(),
                        self.kind
                    )))
                }
            }
        };
        let mut counts = vec![0u64; self.fds.len()];
        if n == events.len() {
            // More vectors may be ready than the event list holds: read every one.
            for (v, c) in counts.iter_mut().enumerate() {
                *c = self.take(v)?;
            }
        } else {
            for e in &events[..n] {
                let v = e.data.u64() as usize;
                if v < counts.len() {
                    counts[v] += self.take(v)?;
                }
            }
        }
        Ok(Fired::from_counts(counts))
    }
    fn unmask(&self) -> Result<()> {
        match self.kind {
            IrqKind::Intx => self.backend.unmask(INTX_INDEX),
            // Edge messages: nothing is masked when they fire.
            IrqKind::Msi | IrqKind::MsiX => Ok(()),
        }
    }
    fn describe(&self) -> String {
        match (self.kind, self.fds.len()) {
            (IrqKind::Intx, _) => format!("INTx ({}, unmasked after each)", self.backend.via()),
            (k, 1) => format!("{k} vector 0 ({})", self.backend.via()),
            (k, n) => format!("{k} vectors 0-{} ({})", n - 1, self.backend.via()),
        }
    }
}

impl Drop for EventfdIrqs {
    fn drop(&mut self) {
        // Best effort: closing the device fd (or the connection) tears the vectors down anyway.
        let _ = self.backend.disable(index_of(self.kind));
    }
}

#[cfg(test)]
#[path = "irq_fds_tests.rs"]
mod tests;
