//! One client of `pcibench serve`, from its VERSION to its leaving: each command handled as
//! QEMU's client sends it and libvfio-user answers it. A command with the No_reply flag gets no
//! reply, even on error (vfio-user.rst "Header"; libvfio-user do_reply): QEMU posts BAR writes
//! that way, and a reply it did not expect would be read as the next message's header. The
//! client's DMA maps and interrupts live as long as its connection.

use super::card::{Card, ServeOptions, Serving};
use super::clock::ClockThread;
use super::forward::{self, Routed, SetIrqs};
use super::link::{ByMessage, Link};
use super::version::{self, Caps, DmaLayout};
use super::wire::{cmd, Fields, Message, Put, WireError};
use super::{check_shared_fd, CAP_SPARSE_MMAP, CONFIG_REGION, DEVICE_PCI, DEVICE_RESET, REGION_CAPS, REGION_INFO_LEN};
use super::{REGION_MMAP, REGION_READ, REGION_WRITE};
use crate::access::{BarRegion, DeviceAccess};
use crate::mmio::Width;
use crate::sim::host_map::Registration;
use crate::sim::mem::Pages;
use rustix::io::Errno;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Regions a PCI device has: BAR0-5, ROM, config, VGA (VFIO_PCI_NUM_REGIONS).
pub const NUM_REGIONS: u32 = 9;
/// Interrupt kinds: INTx, MSI, MSI-X, ERR, REQ (VFIO_PCI_NUM_IRQS); `forward` serves them.
pub const NUM_IRQS: u32 = 5;
/// Config space the sim cards model.
const CONFIG_SIZE: u64 = 256;
/// PCI_STATUS's low byte, whose bit 3 is Interrupt Status (PCI 2.3).
const PCI_STATUS: u64 = 0x06;
/// DMA maps one client may hold at once: the spec's default `max_dma_maps` (65535, the Linux
/// kernel's dma_entry_limit).
pub const MAX_DMA_MAPS: usize = 65535;
/// DMA_MAP flags: readable, writeable (vfio-user.rst "VFIO_USER_DMA_MAP").
const DMA_FLAGS: u32 = 0b11;
/// DMA_UNMAP flag: every mapping (linux/vfio.h VFIO_DMA_UNMAP_FLAG_ALL, which QEMU sends).
const UNMAP_ALL: u32 = 1 << 1;

/// A command's outcome: the reply payload and descriptors, or an errno.
type Reply = std::result::Result<(Vec<u8>, Vec<OwnedFd>), Errno>;

/// One DMA_MAP: its IOVA range, the registration in the card's host map, and whether the client's
/// memory is mapped here or reached by message.
struct DmaMap {
    iova: u64,
    size: u64,
    // Unregistered from the fault guard before the registration unmaps the pages.
    guard: Option<crate::access::guard::Guarded>,
    /// Reached by DMA_READ/DMA_WRITE message, not mapped here.
    by_message: bool,
    _reg: Registration,
}

/// What a session did, for the server's log when the client leaves.
#[derive(Default, Debug, Clone, Copy)]
pub struct Counts {
    pub commands: u64,
    /// Commands with the No_reply flag (QEMU's posted BAR writes): handled, never answered.
    pub posted: u64,
    /// Commands answered with an error (or, posted, that failed silently).
    pub refused: u64,
}

pub struct Session<'a> {
    card: &'a Card,
    /// The server's log, and who the client is in it.
    log: &'a (dyn Fn(&str) + Sync),
    who: &'a str,
    link: Arc<Link>,
    dma: Vec<DmaMap>,
    mapped: u64,
    pub routed: Option<Routed>,
    pub counts: Counts,
    /// The client's capabilities (VERSION), once negotiated.
    caps: Option<Caps>,
    /// Why the last command was refused, for the log (a client that sends unsealed memory).
    pub notes: Vec<String>,
    /// This thread moves no data (some client memory is reached by message): `clock.rs`.
    hands_off: bool,
    /// No clock thread could be started.
    no_clock: bool,
}

impl<'a> Session<'a> {
    pub fn new(card: &'a Card, link: Arc<Link>, log: &'a (dyn Fn(&str) + Sync), who: &'a str) -> Session<'a> {
        Session {
            card,
            log,
            who,
            link,
            dma: Vec::new(),
            mapped: 0,
            routed: None,
            counts: Counts::default(),
            caps: None,
            notes: Vec::new(),
            hands_off: false,
            no_clock: false,
        }
    }

    fn opts(&self) -> &ServeOptions {
        &self.card.opts
    }

    /// Serve commands until the client leaves (Ok), the connection fails, or the server stops.
    ///
    /// This thread is also the card's clock for the client (issue 52): the models progress with
    /// time when someone looks, and a client polling its own memory (a writeback, a completion
    /// ring) sends nothing, so while the card has something due the wait for the next command ends
    /// at that time and the card is brought to now here. Only this thread touches the card, so a
    /// model reaching client memory by DMA_READ/DMA_WRITE never waits on a reply that only this
    /// thread, held elsewhere, could read.
    ///
    /// While the card reaches some of the client's memory by message, the clock is a thread of its
    /// own instead, and accesses here move nothing (`clock.rs` says why).
    pub fn run(&mut self) -> std::result::Result<(), WireError> {
        let clock = ClockThread::default();
        let card = self.card;
        let r = std::thread::scope(|s| {
            let spawned =
                std::thread::Builder::new().name("serve-clock".into()).spawn_scoped(s, || clock.run(&card.dev));
            #[cfg(test)]
            let spawned = spawned.and_then(|t| match card.opts.no_clock {
                true => Err(std::io::Error::other("test")),
                false => Ok(t),
            });
            if spawned.is_err() {
                // Without it, messages are answered as before: the card moves data where it is looked at.
                self.no_clock = true;
            }
            let r = self.commands(&clock);
            clock.stop();
            r
        });
        crate::sim::datapath::set_hands_off(false);
        self.card.dev.set_moved_by_clock(false);
        r
    }

    /// `run`'s loop, on the session thread.
    fn commands(&mut self, clock: &ClockThread) -> std::result::Result<(), WireError> {
        // Wake at the modeled time, not up to the default 50 us of timer slack after it.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
        loop {
            let by_message = self.dma.iter().any(|m| m.by_message) && !self.no_clock;
            if by_message != self.hands_off {
                self.hands_off = by_message;
                crate::sim::datapath::set_hands_off(by_message);
                self.card.dev.set_moved_by_clock(by_message);
                clock.set_active(by_message);
            }
            let due = match self.hands_off {
                true => None,
                false => self.card.dev.due_in().map(|d| Instant::now() + d),
            };
            let next = match self.link.next_command(due) {
                Err(WireError::Timeout) if due.is_some() => {
                    self.card.dev.advance();
                    self.check_faults()?;
                    continue;
                }
                next => next?,
            };
            let Some(Message { header, payload, fds }) = next else { return Ok(()) };
            self.counts.commands += 1;
            if self.caps.is_none() && header.command != cmd::VERSION {
                // The first command is VERSION (libvfio-user's tran_negotiate refuses any other).
                if !header.no_reply() {
                    self.link.send(header.error_reply(Errno::INVAL.raw_os_error()), &[], &[])?;
                }
                return Err(WireError::Malformed(format!("{} before VERSION", cmd::name(header.command))));
            }
            // While a command is handled, a wait for the client's reply on another thread (a
            // user's model's DMA by message) reads the socket (link.rs).
            self.link.lend(true);
            let reply = self.handle(header.command, &payload, fds);
            self.link.lend(false);
            self.check_faults()?;
            if reply.is_err() {
                self.counts.refused += 1;
            }
            if header.no_reply() {
                self.counts.posted += 1;
                clock.kick();
                continue;
            }
            match reply {
                Ok((p, fds)) => {
                    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
                    self.link.send(header.reply(), &p, &borrowed)?
                }
                Err(errno) => self.link.send(header.error_reply(errno.raw_os_error()), &[], &[])?,
            }
            clock.kick();
        }
    }

    /// The client's memory faulted under the card's DMA: the client is dropped.
    fn check_faults(&self) -> std::result::Result<(), WireError> {
        match self.dma.iter().find(|m| m.guard.as_ref().is_some_and(|g| g.faulted())) {
            Some(m) => Err(WireError::Malformed(format!(
                "its memory DMA_MAPped at {:#x} faulted under the card's DMA (SIGBUS): the client is dropped",
                m.iova
            ))),
            None => Ok(()),
        }
    }

    /// The device interrupts are routed on.
    fn irq_source(&self) -> &dyn DeviceAccess {
        self.card.irqs.as_deref().unwrap_or(&self.card.dev)
    }

    fn handle(&mut self, command: u16, payload: &[u8], fds: Vec<OwnedFd>) -> Reply {
        let inval = |_| Errno::INVAL;
        let mut f = Fields::new(payload, cmd::name(command));
        // Descriptors only where a command takes them (libvfio-user closes any others).
        if !fds.is_empty() && !matches!(command, cmd::DMA_MAP | cmd::DEVICE_SET_IRQS) {
            return Err(Errno::INVAL);
        }
        match command {
            cmd::VERSION => self.version(payload),
            cmd::DEVICE_GET_INFO => {
                if f.u32().map_err(inval)? < 16 {
                    return Err(Errno::INVAL);
                }
                let reset = if matches!(self.card.serving, Serving::Model { .. }) { DEVICE_RESET } else { 0 };
                Ok((Put::default().u32(16).u32(DEVICE_PCI | reset).u32(NUM_REGIONS).u32(NUM_IRQS).0, Vec::new()))
            }
            // A model's function reset (pcibench_model_reset); its config space and interrupt
            // routing stay, as vfio-pci restores them around a reset.
            cmd::DEVICE_RESET => match &self.card.serving {
                Serving::Model { reset, .. } => {
                    reset();
                    Ok((Vec::new(), Vec::new()))
                }
                Serving::Card(_) => Err(Errno::NOSYS),
            },
            cmd::DEVICE_GET_REGION_INFO => {
                let argsz = f.u32().map_err(inval)?;
                let (_, index) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                if argsz < REGION_INFO_LEN as u32 {
                    return Err(Errno::INVAL);
                }
                self.region_info(argsz, index)
            }
            cmd::DEVICE_GET_IRQ_INFO => {
                let (argsz, _, index) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                if index >= NUM_IRQS || argsz < 16 {
                    return Err(Errno::INVAL);
                }
                Ok((forward::irq_info(self.irq_source(), index), Vec::new()))
            }
            cmd::DEVICE_SET_IRQS => {
                let (argsz, flags, index) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                let (start, count) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                if index >= NUM_IRQS || argsz < 20 {
                    return Err(Errno::INVAL);
                }
                let req = SetIrqs { flags, index, start, count, fds, data: f.rest() };
                let src = self.card.irqs.clone();
                let dev: &dyn DeviceAccess = src.as_deref().unwrap_or(&self.card.dev);
                let before = self.routed.as_ref().map(Routed::describe);
                forward::set_irqs(dev, &mut self.routed, req)?;
                let now = self.routed.as_ref().map(Routed::describe);
                if now != before {
                    // Routing changes are few (a run's start and end): each is a line.
                    let what = now.map_or("off".to_string(), |k| format!("{k} routed"));
                    (self.log)(&format!("a client's interrupts ({}): {what}", self.who));
                }
                Ok((Vec::new(), Vec::new()))
            }
            cmd::REGION_READ => {
                let (offset, region, count) =
                    (f.u64().map_err(inval)?, f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                if count as usize > super::wire::MAX_DATA {
                    return Err(Errno::INVAL);
                }
                let mut data = vec![0u8; count as usize];
                self.access(region, offset, Access::Read(&mut data))?;
                Ok((Put::default().u64(offset).u32(region).u32(count).bytes(&data).0, Vec::new()))
            }
            cmd::REGION_WRITE => {
                let (offset, region, count) =
                    (f.u64().map_err(inval)?, f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                let data = f.rest();
                if data.len() != count as usize {
                    return Err(Errno::INVAL);
                }
                self.access(region, offset, Access::Write(data))?;
                Ok((Put::default().u64(offset).u32(region).u32(count).0, Vec::new()))
            }
            cmd::DMA_MAP => {
                let (argsz, flags) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                let (offset, iova, size) = (f.u64().map_err(inval)?, f.u64().map_err(inval)?, f.u64().map_err(inval)?);
                if argsz < 32 || flags & !DMA_FLAGS != 0 || fds.len() > 1 {
                    return Err(Errno::INVAL);
                }
                self.dma_map(offset, iova, size, fds.into_iter().next())?;
                Ok((Vec::new(), Vec::new()))
            }
            cmd::DMA_UNMAP => {
                let (argsz, flags) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                let (iova, size) = (f.u64().map_err(inval)?, f.u64().map_err(inval)?);
                if argsz < 24 || flags & !UNMAP_ALL != 0 {
                    return Err(Errno::INVAL);
                }
                if flags == UNMAP_ALL {
                    // Every mapping at once (QEMU's unmap_all; libvfio-user wants iova and size 0).
                    if (iova, size) != (0, 0) {
                        return Err(Errno::INVAL);
                    }
                    self.dma.clear();
                    self.mapped = 0;
                    return Ok((Put::default().u32(argsz).u32(flags).u64(iova).u64(size).0, Vec::new()));
                }
                // The spec wants an exact match; QEMU with a vIOMMU also unmaps ranges that hold several
                // mappings or none (intel-iommu's whole-space unmap, in power-of-two chunks, each time the
                // guest turns translation on or off), as the kernel's VFIO_IOMMU_UNMAP_DMA takes them
                // (vfio_dma_do_unmap): every mapping wholly inside goes, none is no error, and only one
                // that straddles an edge is refused.
                let end = iova.checked_add(size).ok_or(Errno::INVAL)?;
                let overlaps = |m: &&DmaMap| m.iova < end && iova < m.iova + m.size;
                let inside = |m: &DmaMap| iova <= m.iova && m.iova + m.size <= end;
                if size == 0 || self.dma.iter().filter(overlaps).any(|m| !inside(m)) {
                    return Err(Errno::INVAL);
                }
                // Dropping a registration waits out any DMA copy in flight (host_map.rs): the
                // spec's "release all references to that DMA region before replying".
                let (gone, kept): (Vec<DmaMap>, Vec<DmaMap>) = self.dma.drain(..).partition(inside);
                self.dma = kept;
                self.mapped -= gone.iter().map(|m| m.size).sum::<u64>();
                drop(gone);
                Ok((Put::default().u32(argsz).u32(flags).u64(iova).u64(size).0, Vec::new()))
            }
            // The sim cards offer no DEVICE_RESET (DEVICE_GET_INFO has no reset flag): they have
            // no reset to model beyond what their drivers do at open. Anything else, including
            // REGION_WRITE_MULTI (write_multiple is never offered), is not served.
            _ => Err(Errno::NOSYS),
        }
    }

    fn version(&mut self, payload: &[u8]) -> Reply {
        let mut f = Fields::new(payload, "VERSION");
        let (major, minor) = (f.u16().map_err(|_| Errno::INVAL)?, f.u16().map_err(|_| Errno::INVAL)?);
        if major != version::MAJOR || self.caps.is_some() {
            return Err(Errno::NOTSUP);
        }
        let proposed = parse_proposal(f.rest())?;
        let caps = Caps::parse(&proposed).map_err(|_| Errno::INVAL)?;
        let extension = match &self.card.serving {
            _ if self.opts().anonymous => serde_json::Value::Null,
            Serving::Card(card) => serde_json::json!({
                "version": env!("CARGO_PKG_VERSION"), "card": card.name(), "mmap": self.opts().mmap
            }),
            // A user's model is not pcibench's own card: clients treat it as any third-party
            // device (consent flags apply); the key only says what serves it.
            Serving::Model { name, .. } => serde_json::json!({ "version": env!("CARGO_PKG_VERSION"), "model": name }),
        };
        let (minor, reply) = version::server_reply(minor, &proposed, extension);
        self.caps = Some(caps);
        self.link.negotiated(DmaLayout::for_minor(minor), caps.max_data);
        let mut text = reply.to_string().into_bytes();
        text.push(0);
        Ok((Put::default().u16(version::MAJOR).u16(minor).bytes(&text).0, Vec::new()))
    }

    fn dma_map(&mut self, offset: u64, iova: u64, size: u64, fd: Option<OwnedFd>) -> Result<(), Errno> {
        let end = iova.checked_add(size).ok_or(Errno::INVAL)?;
        if size == 0 || end == 0 {
            return Err(Errno::INVAL);
        }
        if self.dma.len() >= MAX_DMA_MAPS {
            self.notes.push(format!("refused a DMA_MAP: {MAX_DMA_MAPS} maps held (the spec's max_dma_maps)"));
            return Err(Errno::NOSPC);
        }
        let limit = self.opts().max_dma;
        if self.mapped.saturating_add(size) > limit {
            self.notes.push(format!(
                "refused a DMA_MAP of {size} bytes: the client would hold more than {limit} bytes mapped (serve --max-dma)"
            ));
            return Err(Errno::NOSPC);
        }
        let host = self.card.dev.host_map();
        let mut guard = None;
        let by_message = |link: &Arc<Link>| Arc::new(ByMessage(Arc::clone(link)));
        let mut remote = true;
        let reg = match fd {
            Some(fd) => {
                let end_in_file = offset.checked_add(size).ok_or(Errno::INVAL)?;
                let page = crate::sim::mem::PAGE as u64;
                let aligned = offset % page == 0 && size % page == 0 && iova % page == 0;
                match check_shared_fd(fd.as_fd(), end_in_file) {
                    // Not whole pages (a ROM's odd section): not mappable, reached by message.
                    Ok(()) if !aligned => {
                        self.notes.push(format!("mapped {size} bytes at {iova:#x} by message: not whole pages"));
                        host.register_remote_at(iova, size, by_message(&self.link))
                    }
                    Ok(()) => {
                        let len = usize::try_from(size).map_err(|_| Errno::INVAL)?;
                        let pages = Pages::map_file("DMA_MAP", fd.as_fd(), offset, len).map_err(|_| Errno::INVAL)?;
                        // The card's copies into this memory are guarded: sealed, it cannot shrink,
                        // but a fault (a hugetlbfs page it cannot get) reads all-ones and ends the
                        // session, never the server.
                        guard =
                            crate::access::guard::register_vfio_user(pages.as_ptr(), pages.len(), &self.guard_key());
                        remote = false;
                        host.register_pages_at(iova, pages)
                    }
                    // Too short: the client's error, refused.
                    Err(why) if why.contains("too short") => {
                        self.notes.push(format!("refused a DMA_MAP at {iova:#x}: {why}"));
                        return Err(Errno::INVAL);
                    }
                    // Not sealed: the memory is not mapped here (the client could shrink it under
                    // the server's copies), and is reached by DMA_READ/DMA_WRITE instead.
                    Err(why) => {
                        self.notes.push(format!("mapped {size} bytes at {iova:#x} by message: {why}"));
                        host.register_remote_at(iova, size, by_message(&self.link))
                    }
                }
            }
            None => host.register_remote_at(iova, size, by_message(&self.link)),
        };
        // A map over an existing one: EEXIST (vfio-user.rst "VFIO_USER_DMA_MAP").
        let reg = reg.ok_or(Errno::EXIST)?;
        self.mapped += size;
        self.dma.push(DmaMap { iova, size, guard, by_message: remote, _reg: reg });
        Ok(())
    }

    fn region_info(&self, argsz: u32, index: u32) -> Reply {
        let (size, flags, fd) = match index {
            CONFIG_REGION => (CONFIG_SIZE, REGION_READ | REGION_WRITE, None),
            i if i < 6 => match self.card.bars.iter().find(|(b, _)| *b as u32 == i) {
                Some((b, bar)) => {
                    let fd = self.card.dev.bar_file(*b).filter(|_| self.opts().mmap);
                    let mmap = if fd.is_some() { REGION_MMAP } else { 0 };
                    (bar.len(), REGION_READ | REGION_WRITE | mmap, fd)
                }
                None => (0, 0, None),
            },
            i if i < NUM_REGIONS => (0, 0, None),
            _ => return Err(Errno::INVAL),
        };
        // The sparse mmap capability (vfio.h struct vfio_region_info_cap_sparse_mmap after its
        // vfio_info_cap_header): the whole BAR, or the pages around an MSI-X table in it.
        let cap = if fd.is_some() {
            let areas = self.card.guarded.mmap_areas(index, size);
            let mut cap = Put::default().u16(CAP_SPARSE_MMAP).u16(1).u32(0).u32(areas.len() as u32).u32(0);
            for (offset, len) in areas {
                cap = cap.u64(offset).u64(len);
            }
            cap.0
        } else {
            Vec::new()
        };
        let need = (REGION_INFO_LEN + cap.len()) as u32;
        // The capability, its flag and the descriptor only when the reply has room for them
        // (libvfio-user handle_device_get_region_info: "Only actually provide the caps if they
        // fit"); QEMU asks with argsz 32 first, refuses a caps flag without a capability, and asks
        // again with the argsz this reply names.
        let fits = !cap.is_empty() && argsz >= need;
        let fds = match fd {
            Some(fd) if fits => vec![fd.try_clone_to_owned().map_err(|_| Errno::NOMEM)?],
            _ => Vec::new(),
        };
        let (flags, cap_offset) = if fits { (flags | REGION_CAPS, REGION_INFO_LEN as u32) } else { (flags, 0) };
        let p = Put::default().u32(need).u32(flags).u32(index).u32(cap_offset).u64(size).u64(0);
        let p = if fits { p.bytes(&cap) } else { p };
        Ok((p.0, fds))
    }

    fn access(&self, region: u32, offset: u64, what: Access<'_>) -> std::result::Result<(), Errno> {
        let (card, len) = (self.card, what.len() as u64);
        if region == CONFIG_REGION {
            if offset.checked_add(len).is_none_or(|e| e > CONFIG_SIZE) {
                return Err(Errno::INVAL);
            }
            return match what {
                Access::Read(b) => card.dev.config_read(offset, b).map(|()| {
                    // INTx signalled and not yet unmasked: Status says the line is up, as the
                    // client's pin is (Routed::intx_pin_up says why).
                    if self.routed.as_ref().is_some_and(Routed::intx_pin_up) {
                        if let Some(byte) = PCI_STATUS.checked_sub(offset).and_then(|i| b.get_mut(i as usize)) {
                            *byte |= crate::pci::intr::STATUS_INTERRUPT as u8;
                        }
                    }
                }),
                Access::Write(b) => {
                    card.guarded.config_write(&card.dev, offset, b).and_then(|b| card.dev.config_write(offset, &b))
                }
            }
            .map_err(|_| Errno::INVAL);
        }
        let (_, bar) = card.bars.iter().find(|(b, _)| *b as u32 == region).ok_or(Errno::INVAL)?;
        if offset.checked_add(len).is_none_or(|e| e > bar.len()) {
            return Err(Errno::INVAL);
        }
        if card.guarded.hides(region, offset, len) {
            // The MSI-X table is the server's to program (DEVICE_SET_IRQS), as vfio-pci's is.
            if let Access::Read(b) = what {
                b.fill(0xff);
            }
            return Ok(());
        }
        access_bar(bar.as_ref(), offset, what)
    }

    /// How the fault guard names this client's memory.
    fn guard_key(&self) -> String {
        format!("serve-client:{}", self.who)
    }

    /// The link's DMA message count (for the log).
    pub fn dma_messages(&self) -> u64 {
        self.link.dma_messages.load(Ordering::Relaxed)
    }
}

fn access_bar(bar: &dyn BarRegion, offset: u64, what: Access<'_>) -> std::result::Result<(), Errno> {
    let len = what.len();
    let width = match len {
        1 => Width::B8,
        2 => Width::B16,
        4 => Width::B32,
        8 => Width::B64,
        _ => Width::B8,
    };
    let r = match (bar.ptr().is_some(), what) {
        // Memory: any length is a copy.
        (true, Access::Read(b)) => bar.read_bulk(offset, b, Width::B8),
        (true, Access::Write(b)) => bar.write_bulk(offset, b, Width::B8),
        // Registers: one access of the message's width (1, 2, 4 or 8 bytes), as a CPU's would be.
        (false, _) if !matches!(len, 1 | 2 | 4 | 8) => return Err(Errno::INVAL),
        (false, Access::Read(b)) => bar.read(offset, width).map(|v| b.copy_from_slice(&v.to_le_bytes()[..b.len()])),
        (false, Access::Write(b)) => {
            let mut v = [0u8; 8];
            v[..b.len()].copy_from_slice(b);
            bar.write(offset, width, u64::from_le_bytes(v))
        }
    };
    // A completer abort (a model's refusal) is an I/O error, as a failed access is on vfio-pci.
    r.map_err(|e| if matches!(e, crate::Error::Device(_)) { Errno::IO } else { Errno::INVAL })
}

/// The JSON a VERSION proposal carries: NUL-terminated (QEMU and libvfio-user refuse one that is
/// not), or absent.
pub fn parse_proposal(text: &[u8]) -> Result<serde_json::Value, Errno> {
    if text.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    let text = text.strip_suffix(&[0]).ok_or(Errno::INVAL)?;
    let v: serde_json::Value = serde_json::from_slice(text).map_err(|_| Errno::INVAL)?;
    if !v.is_object() {
        return Err(Errno::INVAL);
    }
    Ok(v)
}

enum Access<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Access<'_> {
    fn len(&self) -> usize {
        match self {
            Access::Read(b) => b.len(),
            Access::Write(b) => b.len(),
        }
    }
}
