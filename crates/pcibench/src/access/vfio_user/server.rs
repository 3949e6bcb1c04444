//! `pcibench serve`: a simulated card as a vfio-user server, so the vfio-user path (region info,
//! sparse mmap, DMA_MAP of the client's memory, region messages) runs across a real process
//! boundary. Its memory BARs are memfds the client may map; its register BARs answer messages;
//! its engine's DMA reaches the client's memfd buffers, mapped here and registered in the card's
//! host map at the IOVAs the client chose. Clients are served side by side on one card, which lives as long as the
//! server, and a client's DMA mappings as long as its connection.

use super::forward::{self, Routed};
use super::wire::{self, cmd, Fields, Header, Message, Put, WireError};
use super::{
    CAP_SPARSE_MMAP, CONFIG_REGION, DEVICE_PCI, REGION_CAPS, REGION_INFO_LEN, REGION_MMAP, REGION_READ, REGION_WRITE,
};
use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::mmio::Width;
use crate::sim::host_map::Registration;
use crate::sim::mem::Pages;
use crate::sim::SimId;
use crate::{Error, Result};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the server looks at its stop flag while waiting.
const TICK: Timespec = Timespec { tv_sec: 0, tv_nsec: 200_000_000 };
/// A client has this long to finish a message it started.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Regions a PCI device has: BAR0-5, ROM, config, VGA (VFIO_PCI_NUM_REGIONS).
const NUM_REGIONS: u32 = 9;
/// Interrupt kinds: INTx, MSI, MSI-X, ERR, REQ (VFIO_PCI_NUM_IRQS); `forward` serves them.
const NUM_IRQS: u32 = 5;
/// Config space the sim cards model.
const CONFIG_SIZE: u64 = 256;
/// The most memory one DMA_MAP may share (a sanity bound on a client's request).
const MAX_DMA_MAP: u64 = 1 << 40;

/// How to serve.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Offer memory BARs as mmap-able regions; false: every access is a message.
    pub mmap: bool,
    /// Exit after the first client disconnects.
    pub once: bool,
    /// Do not say the card is pcibench's own: clients treat it as any third-party model (its
    /// description read from config space, consent flags applying).
    pub anonymous: bool,
}

/// The capabilities this server announces: the protocol's, and that it is pcibench's own card.
pub fn capabilities(card: SimId, opts: &ServeOptions) -> String {
    let protocol =
        serde_json::json!({ "max_msg_fds": wire::MAX_FDS, "max_data_xfer_size": wire::MAX_DATA, "pgsizes": 4096 });
    if opts.anonymous {
        return serde_json::json!({ "capabilities": protocol }).to_string();
    }
    serde_json::json!({
        "capabilities": { "max_msg_fds": wire::MAX_FDS, "max_data_xfer_size": wire::MAX_DATA, "pgsizes": 4096 },
        "pcibench": { "version": env!("CARGO_PKG_VERSION"), "card": card.name(), "mmap": opts.mmap },
    })
    .to_string()
}

/// Bind `socket`: refused when the path is something other than a socket, or a live server's.
pub fn bind(socket: &Path) -> Result<UnixListener> {
    let shown = socket.display();
    if let Ok(m) = std::fs::symlink_metadata(socket) {
        if !m.file_type().is_socket() {
            return Err(Error::usage(format!("{shown} exists and is not a socket: pick a new path for --socket")));
        }
        if UnixStream::connect(socket).is_ok() {
            return Err(Error::Refused(format!(
                "a server is already listening on {shown}: stop it or pick another --socket"
            )));
        }
        // A socket nobody listens on: left by a server that was killed.
        std::fs::remove_file(socket)
            .map_err(|e| Error::Refused(format!("cannot remove the stale socket {shown}: {e}")))?;
    }
    let l = UnixListener::bind(socket).map_err(|e| Error::Refused(format!("cannot listen on {shown}: {e}")))?;
    l.set_nonblocking(true).map_err(|e| Error::Refused(format!("cannot listen on {shown}: {e}")))?;
    Ok(l)
}

/// Serve a fresh `card` on `listener` until `stop` is set (or, with `once`, the first client
/// leaves). `log` gets one line per event (a client connected, left, or sent garbage).
pub fn serve(
    listener: &UnixListener,
    card: SimId,
    opts: ServeOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> Result<()> {
    serve_on(listener, card, opts, stop, log, None)
}

/// `serve`, with the interrupts taken from `irqs` instead of the card (a test's device whose
/// interrupts it raises itself).
#[cfg(test)]
pub(super) fn serve_irqs_from(
    listener: &UnixListener,
    card: SimId,
    stop: &AtomicBool,
    irqs: Arc<dyn DeviceAccess>,
) -> Result<()> {
    let opts = ServeOptions { mmap: true, once: false, anonymous: false };
    serve_on(listener, card, opts, stop, &|_| {}, Some(irqs))
}

fn serve_on(
    listener: &UnixListener,
    card: SimId,
    opts: ServeOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
    irqs: Option<Arc<dyn DeviceAccess>>,
) -> Result<()> {
    let dev = SimDevice::open(card)?;
    let mut bars: Vec<(u8, Box<dyn BarRegion>)> = Vec::new();
    for b in card.spec().info().bars {
        bars.push((b.index, dev.open_bar(b.index, Mapping::Uc, IoMode::Mmap)?));
    }
    let guarded = forward::Guarded::of(&dev);
    let server = Server { dev, bars, opts, caps: capabilities(card, &opts), irqs, guarded };
    // One thread per client, all on the same card (a command may hold one connection while
    // another opens): each client's DMA mappings live and die with its connection.
    std::thread::scope(|scope| {
        let mut clients = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if opts.once && clients.iter().any(|c: &std::thread::ScopedJoinHandle<'_, ()>| c.is_finished()) {
                break;
            }
            if !readable(listener.as_fd())? {
                continue;
            }
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(Error::Device(format!("accepting a vfio-user client failed: {e}"))),
            };
            log("a client connected");
            let server = &server;
            clients.push(scope.spawn(move || {
                let (mut dma, mut routed) = (Vec::new(), None);
                let why = server.session(&stream, stop, &mut dma, &mut routed);
                // The client's interrupts are torn down, its memory unreachable from now on.
                drop(routed);
                dma.clear();
                log(&match why {
                    Ok(()) => "a client disconnected".to_string(),
                    Err(e) => format!("a client was dropped: {e}"),
                });
            }));
        }
        // With --once, the other clients' sessions end at the stop flag too.
        stop.store(true, Ordering::Relaxed);
        Ok(())
    })
}

/// Wait up to one tick for `fd` to be readable.
fn readable(fd: std::os::fd::BorrowedFd<'_>) -> Result<bool> {
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    match poll(&mut fds, Some(&TICK)) {
        Ok(n) => Ok(n > 0),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(Error::Device(format!("waiting for a vfio-user client failed: {e}"))),
    }
}

struct Server {
    dev: SimDevice,
    bars: Vec<(u8, Box<dyn BarRegion>)>,
    opts: ServeOptions,
    caps: String,
    /// Where interrupts come from when not the card (`serve_irqs_from`).
    irqs: Option<Arc<dyn DeviceAccess>>,
    /// The interrupt registers a client's accesses do not reach (as vfio-pci keeps them).
    guarded: forward::Guarded,
}

/// One client's DMA_MAPs: (IOVA, size, the registration in the card's host map).
type DmaMaps = Vec<(u64, u64, Registration)>;

/// A command's outcome: the reply payload and descriptors, or an errno.
type Reply = std::result::Result<(Vec<u8>, Vec<OwnedFd>), Errno>;

impl Server {
    fn session(
        &self,
        stream: &UnixStream,
        stop: &AtomicBool,
        dma: &mut DmaMaps,
        routed: &mut Option<Routed>,
    ) -> std::result::Result<(), WireError> {
        stream.set_read_timeout(Some(MESSAGE_TIMEOUT)).map_err(WireError::Io)?;
        stream.set_write_timeout(Some(MESSAGE_TIMEOUT)).map_err(WireError::Io)?;
        while !stop.load(Ordering::Relaxed) {
            if !readable(stream.as_fd()).map_err(|e| WireError::Malformed(e.to_string()))? {
                continue;
            }
            let Some(Message { header, payload, fds }) = wire::recv(stream)? else { return Ok(()) };
            if header.is_reply() {
                return Err(WireError::Malformed(format!(
                    "a reply ({}) where a command belongs",
                    cmd::name(header.command)
                )));
            }
            let reply = self.handle(header.command, &payload, fds, dma, routed);
            let h = Header { id: header.id, command: header.command, size: 0, flags: wire::FLAG_REPLY, error: 0 };
            match reply {
                Ok((p, fds)) => {
                    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
                    wire::send(stream, h, &p, &borrowed)?
                }
                Err(errno) => {
                    let h =
                        Header { flags: wire::FLAG_REPLY | wire::FLAG_ERROR, error: errno.raw_os_error() as u32, ..h };
                    wire::send(stream, h, &[], &[])?
                }
            }
        }
        Ok(())
    }

    /// The device interrupts are routed on.
    fn irq_source(&self) -> &dyn DeviceAccess {
        self.irqs.as_deref().unwrap_or(&self.dev)
    }

    fn handle(
        &self,
        command: u16,
        payload: &[u8],
        fds: Vec<OwnedFd>,
        dma: &mut DmaMaps,
        routed: &mut Option<Routed>,
    ) -> Reply {
        let inval = |_| Errno::INVAL;
        let mut f = Fields::new(payload, cmd::name(command));
        match command {
            cmd::VERSION => {
                let (major, _minor) = (f.u16().map_err(inval)?, f.u16().map_err(inval)?);
                if major != super::client::MAJOR {
                    return Err(Errno::NOTSUP);
                }
                let mut caps = self.caps.clone().into_bytes();
                caps.push(0);
                Ok((Put::default().u16(super::client::MAJOR).u16(super::client::MINOR).bytes(&caps).0, Vec::new()))
            }
            cmd::DEVICE_GET_INFO => {
                Ok((Put::default().u32(16).u32(DEVICE_PCI).u32(NUM_REGIONS).u32(NUM_IRQS).0, Vec::new()))
            }
            cmd::DEVICE_GET_REGION_INFO => {
                let argsz = f.u32().map_err(inval)?;
                let (_, index) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                self.region_info(argsz, index)
            }
            cmd::DEVICE_GET_IRQ_INFO => {
                let (_, _, index) = (f.u32().map_err(inval)?, f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                if index >= NUM_IRQS {
                    return Err(Errno::INVAL);
                }
                Ok((forward::irq_info(self.irq_source(), index), Vec::new()))
            }
            cmd::DEVICE_SET_IRQS => {
                let (_, flags, index, start, count) = (
                    f.u32().map_err(inval)?,
                    f.u32().map_err(inval)?,
                    f.u32().map_err(inval)?,
                    f.u32().map_err(inval)?,
                    f.u32().map_err(inval)?,
                );
                if index >= NUM_IRQS {
                    return Err(Errno::INVAL);
                }
                forward::set_irqs(self.irq_source(), routed, (flags, index, start, count), fds)?;
                Ok((Vec::new(), Vec::new()))
            }
            cmd::REGION_READ => {
                let (offset, region, count) =
                    (f.u64().map_err(inval)?, f.u32().map_err(inval)?, f.u32().map_err(inval)?);
                if count as usize > wire::MAX_DATA {
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
                let (_, _flags, offset, iova, size) = (
                    f.u32().map_err(inval)?,
                    f.u32().map_err(inval)?,
                    f.u64().map_err(inval)?,
                    f.u64().map_err(inval)?,
                    f.u64().map_err(inval)?,
                );
                let [fd] = <[OwnedFd; 1]>::try_from(fds).map_err(|_| Errno::INVAL)?;
                if size == 0 || size > MAX_DMA_MAP {
                    return Err(Errno::INVAL);
                }
                let pages = Pages::map_file("DMA_MAP", fd.as_fd(), offset, size as usize).map_err(|_| Errno::INVAL)?;
                let reg = self.dev.host_map().register_pages_at(iova, pages).ok_or(Errno::EXIST)?;
                dma.push((iova, size, reg));
                Ok((Vec::new(), Vec::new()))
            }
            cmd::DMA_UNMAP => {
                let (argsz, flags, iova, size) = (
                    f.u32().map_err(inval)?,
                    f.u32().map_err(inval)?,
                    f.u64().map_err(inval)?,
                    f.u64().map_err(inval)?,
                );
                let at = dma.iter().position(|(a, s, _)| (*a, *s) == (iova, size)).ok_or(Errno::INVAL)?;
                // Dropping the registration waits out any DMA copy in flight (host_map.rs).
                dma.swap_remove(at);
                Ok((Put::default().u32(argsz).u32(flags).u64(iova).u64(size).0, Vec::new()))
            }
            // DEVICE_RESET is not offered (DEVICE_GET_INFO has no reset flag): the sim cards have
            // no reset to model beyond what their drivers do at open.
            _ => Err(Errno::NOSYS),
        }
    }

    fn region_info(&self, argsz: u32, index: u32) -> Reply {
        let (size, flags, fd) = match index {
            CONFIG_REGION => (CONFIG_SIZE, REGION_READ | REGION_WRITE, None),
            i if i < 6 => match self.bars.iter().find(|(b, _)| *b as u32 == i) {
                Some((b, bar)) => {
                    let fd = self.dev.bar_file(*b).filter(|_| self.opts.mmap);
                    let mmap = if fd.is_some() { REGION_MMAP | REGION_CAPS } else { 0 };
                    (bar.len(), REGION_READ | REGION_WRITE | mmap, fd)
                }
                None => (0, 0, None),
            },
            i if i < NUM_REGIONS => (0, 0, None),
            _ => return Err(Errno::INVAL),
        };
        let fds = match fd {
            Some(fd) => vec![fd.try_clone_to_owned().map_err(|_| Errno::NOMEM)?],
            None => Vec::new(),
        };
        // The sparse mmap capability (vfio.h struct vfio_region_info_cap_sparse_mmap after its
        // vfio_info_cap_header): the whole BAR, or the pages around an MSI-X table in it.
        let cap = if flags & REGION_CAPS != 0 {
            let areas = self.guarded.mmap_areas(index, size);
            let mut cap = Put::default().u16(CAP_SPARSE_MMAP).u16(1).u32(0).u32(areas.len() as u32).u32(0);
            for (offset, len) in areas {
                cap = cap.u64(offset).u64(len);
            }
            cap.0
        } else {
            Vec::new()
        };
        let need = (REGION_INFO_LEN + cap.len()) as u32;
        let with_caps = !cap.is_empty() && argsz >= need;
        let cap_offset = if with_caps { REGION_INFO_LEN as u32 } else { 0 };
        let p = Put::default().u32(need).u32(flags).u32(index).u32(cap_offset).u64(size).u64(0);
        let p = if with_caps { p.bytes(&cap) } else { p };
        Ok((p.0, fds))
    }

    fn access(&self, region: u32, offset: u64, what: Access<'_>) -> std::result::Result<(), Errno> {
        let len = what.len() as u64;
        if region == CONFIG_REGION {
            if offset.checked_add(len).is_none_or(|e| e > CONFIG_SIZE) {
                return Err(Errno::INVAL);
            }
            return match what {
                Access::Read(b) => self.dev.config_read(offset, b),
                Access::Write(b) => {
                    self.guarded.config_write(&self.dev, offset, b).and_then(|b| self.dev.config_write(offset, &b))
                }
            }
            .map_err(|_| Errno::INVAL);
        }
        let (_, bar) = self.bars.iter().find(|(b, _)| *b as u32 == region).ok_or(Errno::INVAL)?;
        if offset.checked_add(len).is_none_or(|e| e > bar.len()) {
            return Err(Errno::INVAL);
        }
        if self.guarded.hides(region, offset, len) {
            // The MSI-X table is the server's to program (DEVICE_SET_IRQS), as vfio-pci's is.
            if let Access::Read(b) = what {
                b.fill(0xff);
            }
            return Ok(());
        }
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
        r.map_err(|_| Errno::INVAL)
    }
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
