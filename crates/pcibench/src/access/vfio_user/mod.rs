//! The vfio-user access path: a PCI device that is a model in another process (an RTL
//! co-simulation, a vendor's model, `pcibench serve`), reached over a UNIX socket with the VFIO
//! ioctls' meaning as messages (QEMU docs/interop/vfio-user.rst).
//!
//! BARs are mapped where the server offers mmap-able areas with a sealed descriptor (`bars`:
//! whole or sparse), else every access is a REGION_READ/REGION_WRITE message; config space is
//! region 7; DMA buffers are memfds passed with DMA_MAP at IOVAs from an allocator
//! (`dma::buffers::shared`), which the server may also reach by DMA_READ/DMA_WRITE messages.
//! One command is one connection (`VfioUserDevice::open` hands out the live one): a server may
//! serve one client at a time (libvfio-user does), and `pcibench serve` gives its card one owner.
//!
//! The rust-vmm `vfio_user` crate was judged and not used: archived (May 2025), built on
//! vfio-bindings 0.4 (this crate uses 0.7), its client blocks without a timeout, panics on
//! malformed replies (an `assert_eq!` on a peer's sizes, subtractions that underflow) and
//! allocates whatever size the peer names.

mod bars;
mod card;
pub mod client;
mod clock;
mod forward;
mod guarded;
pub mod info;
mod link;
pub mod server;
mod session;
pub mod version;
pub mod wire;

#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
mod stall_tests;
#[cfg(test)]
mod tests;

use super::irq_fds::{self, choose, IrqBackend, Offered, INTX_INDEX, MSIX_INDEX, MSI_INDEX};
use super::{BarRegion, ConfigPort, DeviceAccess, DmaPath, Interrupts, IoMode, IrqRequest, Mapping, SharedMap, Via};
use crate::{Error, Result};
use client::Client;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use wire::{cmd, Fields, Put};

/// VFIO region indices of a PCI device (include/uapi/linux/vfio.h, VFIO_PCI_*_REGION_INDEX).
pub const CONFIG_REGION: u32 = 7;
/// vfio_region_info flags.
pub const REGION_READ: u32 = 1 << 0;
pub const REGION_WRITE: u32 = 1 << 1;
pub const REGION_MMAP: u32 = 1 << 2;
pub const REGION_CAPS: u32 = 1 << 3;
/// VFIO_REGION_INFO_CAP_SPARSE_MMAP.
pub const CAP_SPARSE_MMAP: u16 = 1;
/// vfio_device_info flags: VFIO_DEVICE_FLAGS_RESET, VFIO_DEVICE_FLAGS_PCI.
pub const DEVICE_RESET: u32 = 1 << 0;
pub const DEVICE_PCI: u32 = 1 << 1;
/// struct vfio_region_info: argsz, flags, index, cap_offset (u32 each), size, offset (u64).
pub const REGION_INFO_LEN: usize = 32;
/// vfio_irq_set flags: DATA_NONE, DATA_BOOL, DATA_EVENTFD, ACTION_MASK, ACTION_UNMASK, ACTION_TRIGGER.
pub const IRQ_DATA_NONE: u32 = 1 << 0;
pub const IRQ_DATA_BOOL: u32 = 1 << 1;
pub const IRQ_DATA_EVENTFD: u32 = 1 << 2;
pub const IRQ_ACTION_MASK: u32 = 1 << 3;
pub const IRQ_ACTION_UNMASK: u32 = 1 << 4;
pub const IRQ_ACTION_TRIGGER: u32 = 1 << 5;
/// vfio_irq_info flags: EVENTFD, MASKABLE, AUTOMASKED, NORESIZE.
pub const IRQ_INFO_EVENTFD: u32 = 1 << 0;
pub const IRQ_INFO_MASKABLE: u32 = 1 << 1;
pub const IRQ_INFO_AUTOMASKED: u32 = 1 << 2;
pub const IRQ_INFO_NORESIZE: u32 = 1 << 3;
/// DMA_MAP flags: the device may read and write the memory.
pub const DMA_READ_WRITE: u32 = 0b11;
/// Regions and capabilities a server may describe: far more than a PCI device has.
const MAX_REGIONS: u32 = 64;
const MAX_SPARSE_AREAS: u32 = 64;

/// One region as the server described it.
#[derive(Debug)]
pub struct Region {
    pub index: u32,
    pub flags: u32,
    pub size: u64,
    /// Where the region starts in `fd`, for mmap.
    pub offset: u64,
    /// The mmap-able areas, (offset, size) within the region.
    pub areas: Vec<(u64, u64)>,
    pub fd: Option<Arc<OwnedFd>>,
    /// Why the descriptor the server gave is not used (not sealed against shrinking, too short):
    /// the region is then reached by messages only.
    pub fd_refused: Option<String>,
}

impl Region {
    /// The descriptor to map, if the server gave one this process may map.
    pub fn usable_fd(&self) -> Option<&Arc<OwnedFd>> {
        self.fd.as_ref().filter(|_| self.flags & REGION_MMAP != 0 && self.fd_refused.is_none())
    }

    /// Whether one mmap-able area covers the whole region.
    pub fn mappable(&self) -> bool {
        self.usable_fd().is_some() && self.areas.iter().any(|&(o, s)| o == 0 && s >= self.size)
    }

    /// Whether some, but not all, of it is mapped: the sparse areas are.
    pub fn partly_mappable(&self) -> bool {
        self.usable_fd().is_some() && !self.mappable() && !self.areas.is_empty()
    }
}

/// What a server-given descriptor must be before this process maps it: a file sealed against
/// shrinking (F_SEAL_SHRINK: else the server could truncate it under the mapping, and the next
/// load would raise SIGBUS) and at least `end` bytes long.
pub fn check_shared_fd(fd: BorrowedFd<'_>, end: u64) -> std::result::Result<(), String> {
    use rustix::fs::SealFlags;
    let seals = rustix::fs::fcntl_get_seals(fd)
        .map_err(|e| format!("the descriptor's seals cannot be read ({e}): not a memfd"))?;
    if !seals.contains(SealFlags::SHRINK) {
        return Err("the descriptor is not sealed against shrinking (F_SEAL_SHRINK)".into());
    }
    let size = rustix::fs::fstat(fd).map_err(|e| format!("fstat of the descriptor failed: {e}"))?.st_size as u64;
    if size < end {
        return Err(format!("the descriptor is {size} bytes, too short for the {end} bytes it is to back"));
    }
    Ok(())
}

struct Inner {
    client: Arc<Client>,
    flags: u32,
    regions: Vec<Region>,
    irqs: Vec<(u32, u32)>,
    dma: Arc<Dma>,
}

/// A device served over vfio-user, opened: a handle on one connection, shared by every part of
/// the command that reaches the device (the connection closes when the last handle goes).
#[derive(Clone)]
pub struct VfioUserDevice(Arc<Inner>);

/// The connections open in this process, by socket path: a second `open` of the same path while
/// one lives gets the same connection, so one command is one client of the server.
static LIVE: Mutex<Vec<(String, Weak<Inner>)>> = Mutex::new(Vec::new());

impl VfioUserDevice {
    /// The device served at `socket`: the connection this process already has to it, or a new
    /// one (connect, negotiate, read its device and region descriptions).
    pub fn open(socket: &Path) -> Result<VfioUserDevice> {
        let key = socket.display().to_string();
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(_, w)| w.strong_count() > 0);
        if let Some(inner) = live.iter().find(|(p, _)| *p == key).and_then(|(_, w)| w.upgrade()) {
            return Ok(VfioUserDevice(inner));
        }
        let inner = Arc::new(Self::connect(socket)?);
        live.push((key, Arc::downgrade(&inner)));
        Ok(VfioUserDevice(inner))
    }

    fn connect(socket: &Path) -> Result<Inner> {
        let client = Arc::new(Client::connect(socket)?);
        let payload = Put::default().u32(16).u32(0).u32(0).u32(0).0;
        let (reply, _) = client.request(cmd::DEVICE_GET_INFO, &payload, &[])?;
        let mut f = Fields::new(&reply, "the DEVICE_GET_INFO reply");
        let parse = |f: &mut Fields| Ok::<_, wire::WireError>((f.u32()?, f.u32()?, f.u32()?, f.u32()?));
        let (_, flags, num_regions, num_irqs) = parse(&mut f).map_err(|e| bad(&client, e))?;
        if flags & DEVICE_PCI == 0 {
            return Err(Error::Unsupported(format!(
                "the vfio-user server at {} serves a device that is not PCI: pcibench drives PCI devices",
                client.path()
            )));
        }
        let mut regions = Vec::new();
        for index in 0..num_regions.min(MAX_REGIONS) {
            regions.push(region_info(&client, index)?);
        }
        let mut irqs = Vec::new();
        for index in 0..num_irqs.min(8) {
            let payload = Put::default().u32(16).u32(0).u32(index).u32(0).0;
            let (reply, _) = client.request(cmd::DEVICE_GET_IRQ_INFO, &payload, &[])?;
            let mut f = Fields::new(&reply, "the DEVICE_GET_IRQ_INFO reply");
            let parse = |f: &mut Fields| Ok::<_, wire::WireError>((f.u32()?, f.u32()?, f.u32()?, f.u32()?));
            let (_, _, i, count) = parse(&mut f).map_err(|e| bad(&client, e))?;
            irqs.push((i, count));
        }
        let dma = Arc::new(Dma { client: Arc::clone(&client), iovas: Mutex::new(Vec::new()) });
        Ok(Inner { client, flags, regions, irqs, dma })
    }

    /// DEVICE_RESET, where the server offers it (DEVICE_GET_INFO's reset flag), as VFIO's
    /// `VfioDevice::reset`.
    pub fn reset(&self) -> Result<()> {
        if self.0.flags & DEVICE_RESET == 0 {
            return Err(Error::Unsupported(format!(
                "the vfio-user server at {} offers no reset (DEVICE_GET_INFO has no reset flag)",
                self.0.client.path()
            )));
        }
        self.0.client.request(cmd::DEVICE_RESET, &[], &[]).map(|_| ())
    }

    pub fn client(&self) -> &Client {
        &self.0.client
    }

    pub fn flags(&self) -> u32 {
        self.0.flags
    }

    pub fn regions(&self) -> &[Region] {
        &self.0.regions
    }

    /// (irq index, count) as DEVICE_GET_IRQ_INFO said.
    pub fn irqs(&self) -> &[(u32, u32)] {
        &self.0.irqs
    }

    pub fn region(&self, index: u32) -> Option<&Region> {
        self.0.regions.iter().find(|r| r.index == index && r.size > 0)
    }
}

fn bad(client: &Client, e: wire::WireError) -> Error {
    Error::Device(format!(
        "the vfio-user server at {} sent a malformed reply ({e}): is it a vfio-user server?",
        client.path()
    ))
}

/// DEVICE_GET_REGION_INFO for `index`, with its sparse mmap areas and descriptor. A reply whose
/// argsz is larger than asked carries only the fixed part (the spec's "Message sizes"; neither
/// QEMU nor libvfio-user sets the caps flag then): ask again with that argsz, as QEMU's
/// vfio_device_get_region_info does.
fn region_info(client: &Client, index: u32) -> Result<Region> {
    let mut argsz = REGION_INFO_LEN as u32;
    for _ in 0..2 {
        let payload = Put::default().u32(argsz).u32(0).u32(index).u32(0).u64(0).u64(0).0;
        let (reply, fds) = client.request(cmd::DEVICE_GET_REGION_INFO, &payload, &[])?;
        let mut f = Fields::new(&reply, "the DEVICE_GET_REGION_INFO reply");
        let parse =
            |f: &mut Fields| Ok::<_, wire::WireError>((f.u32()?, f.u32()?, f.u32()?, f.u32()?, f.u64()?, f.u64()?));
        let (need, flags, i, cap_offset, size, offset) = parse(&mut f).map_err(|e| bad(client, e))?;
        if i != index {
            return Err(bad(client, wire::WireError::Malformed(format!("region {i} came back for region {index}"))));
        }
        if need > argsz && (need as usize) <= wire::MAX_MESSAGE {
            argsz = need;
            continue;
        }
        let caps = flags & REGION_CAPS != 0;
        if caps && (cap_offset < REGION_INFO_LEN as u32 || cap_offset as usize >= reply.len()) {
            return Err(bad(
                client,
                wire::WireError::Malformed(format!(
                    "region {index}'s capabilities at {cap_offset} lie outside its reply"
                )),
            ));
        }
        let areas = if caps {
            sparse_areas(&reply, cap_offset as usize).map_err(|e| bad(client, e))?.unwrap_or(vec![(0, size)])
        } else {
            vec![(0, size)]
        };
        let fd = fds.into_iter().next().map(Arc::new);
        let end = areas.iter().map(|&(o, s)| o.saturating_add(s)).max().unwrap_or(0);
        let fd_refused = match &fd {
            Some(fd) if flags & REGION_MMAP != 0 => check_shared_fd(fd.as_fd(), offset.saturating_add(end)).err(),
            _ => None,
        };
        return Ok(Region { index, flags, size, offset, areas, fd, fd_refused });
    }
    Err(bad(client, wire::WireError::Malformed(format!("region {index}'s info kept growing"))))
}

/// The sparse mmap capability in the chain starting at `at` (offsets from the struct's start);
/// None when the chain holds none.
fn sparse_areas(reply: &[u8], mut at: usize) -> std::result::Result<Option<Vec<(u64, u64)>>, wire::WireError> {
    for _ in 0..16 {
        if at < REGION_INFO_LEN || at >= reply.len() {
            break;
        }
        let mut f = Fields::new(&reply[at..], "a region capability");
        let (id, _version, next) = (f.u16()?, f.u16()?, f.u32()?);
        if id == CAP_SPARSE_MMAP {
            let n = f.u32()?;
            let _reserved = f.u32()?;
            if n > MAX_SPARSE_AREAS {
                return Err(wire::WireError::Malformed(format!("{n} sparse mmap areas (at most {MAX_SPARSE_AREAS})")));
            }
            let areas: std::result::Result<Vec<_>, _> = (0..n).map(|_| Ok((f.u64()?, f.u64()?))).collect();
            return areas.map(|a| Some(a.into_iter().filter(|&(_, s)| s > 0).collect()));
        }
        if next as usize <= at {
            break;
        }
        at = next as usize;
    }
    Ok(None)
}

impl DeviceAccess for VfioUserDevice {
    fn via(&self) -> Via {
        Via::VfioUser
    }

    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        let r = self.region(index as u32).filter(|_| index < 6).ok_or_else(|| {
            let path = self.0.client.path();
            Error::usage(format!(
                "the device at vfio-user:{path} has no BAR{index} (run `pcibench info vfio-user:{path}`)"
            ))
        })?;
        bars::open(&self.0.client, r, mapping, io)
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.client.region_read(CONFIG_REGION, offset, buf)
    }

    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.0.client.region_write(CONFIG_REGION, offset, data)
    }

    fn config_port(&self) -> Result<Arc<dyn ConfigPort>> {
        Ok(Arc::new(Config(Arc::clone(&self.0.client))))
    }

    fn dma_path(&self) -> Result<DmaPath> {
        Ok(DmaPath::Shared(self.0.dma.clone()))
    }

    /// MSI-X, MSI or INTx through eventfds the server signals (DEVICE_SET_IRQS, as VFIO's
    /// ioctl; `access::irq_fds` chooses and waits), INTx unmasked by message.
    fn interrupts(&self, req: IrqRequest) -> Result<Box<dyn Interrupts>> {
        let count = |index: u32| self.0.irqs.iter().find(|&&(i, _)| i == index).map_or(0, |&(_, n)| n);
        let offered = Offered { intx: count(INTX_INDEX), msi: count(MSI_INDEX), msix: count(MSIX_INDEX) };
        let backend = UserIrqs(Arc::clone(&self.0.client));
        let (kind, vectors) = choose(req, offered, &backend.device())?;
        Ok(Box::new(irq_fds::route(Arc::new(backend), kind, vectors)?))
    }
}

/// DEVICE_SET_IRQS messages (struct vfio_irq_set: argsz, flags, index, start, count; the eventfds
/// travel as descriptors, SCM_RIGHTS).
struct UserIrqs(Arc<Client>);

impl UserIrqs {
    fn set(&self, flags: u32, index: u32, start: u32, count: u32, fds: &[BorrowedFd<'_>]) -> Result<()> {
        let payload = Put::default().u32(20).u32(flags).u32(index).u32(start).u32(count).0;
        self.0.request(cmd::DEVICE_SET_IRQS, &payload, fds).map(|_| ())
    }
}

impl IrqBackend for UserIrqs {
    /// In runs of at most the server's `max_msg_fds` descriptors (the spec's default 1 when it
    /// announced none), each with its `start`, as QEMU's vfio_user_device_io_set_irqs splits at
    /// `max_send_fds`.
    fn trigger(&self, index: u32, fds: &[BorrowedFd<'_>]) -> Result<()> {
        let per = self.0.version.caps.max_msg_fds as usize;
        if per == 0 {
            return Err(Error::Unsupported(format!(
                "the vfio-user server at {} accepts no descriptors on a message (max_msg_fds 0): it cannot be given eventfds; complete by polling",
                self.0.path()
            )));
        }
        for (i, run) in fds.chunks(per).enumerate() {
            let start = (i * per) as u32;
            self.set(IRQ_DATA_EVENTFD | IRQ_ACTION_TRIGGER, index, start, run.len() as u32, run)?;
        }
        Ok(())
    }
    fn disable(&self, index: u32) -> Result<()> {
        self.set(IRQ_DATA_NONE | IRQ_ACTION_TRIGGER, index, 0, 0, &[])
    }
    fn unmask(&self, index: u32) -> Result<()> {
        self.set(IRQ_DATA_NONE | IRQ_ACTION_UNMASK, index, 0, 1, &[])
    }
    fn via(&self) -> &'static str {
        "vfio-user eventfd"
    }
    fn device(&self) -> String {
        format!("the vfio-user server at {}", self.0.path())
    }
}

struct Config(Arc<Client>);

impl ConfigPort for Config {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.region_read(CONFIG_REGION, offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.0.region_write(CONFIG_REGION, offset, data)
    }
    fn address(&self) -> String {
        format!("vfio-user:{}", self.0.path())
    }
}

/// Where IOVAs start: above the first megabyte, so a zero or small bogus address a model uses
/// is a fault, not a buffer.
const IOVA_BASE: u64 = 1 << 20;
/// An unmapped page after every buffer: a model's DMA that runs past a buffer's end faults
/// instead of landing in the next one.
const IOVA_GAP: u64 = 4096;

/// DMA_MAP / DMA_UNMAP of memfd buffers, at IOVAs from a first-fit allocator (not the buffers'
/// addresses here, which would hand the server this process's address layout).
struct Dma {
    client: Arc<Client>,
    /// (IOVA, length) of each live mapping, in order.
    iovas: Mutex<Vec<(u64, u64)>>,
}

impl Dma {
    /// The lowest free IOVA range of `len` bytes (plus the gap) below 2^bits.
    fn allocate(&self, len: u64, bits: u32) -> Result<u64> {
        let mut used = self.iovas.lock().unwrap_or_else(|e| e.into_inner());
        let limit = if bits >= 64 { u64::MAX } else { 1u64 << bits };
        let mut at = IOVA_BASE;
        for &(start, n) in used.iter() {
            if at.checked_add(len + IOVA_GAP).is_some_and(|end| end <= start) {
                break;
            }
            at = at.max(start + n + IOVA_GAP);
        }
        if at.checked_add(len).is_none_or(|end| end > limit) {
            return Err(Error::Unsupported(format!(
                "no room for a {len}-byte DMA buffer below the device's {bits} address bits"
            )));
        }
        let pos = used.partition_point(|&(s, _)| s < at);
        used.insert(pos, (at, len));
        Ok(at)
    }

    fn release(&self, iova: u64) {
        self.iovas.lock().unwrap_or_else(|e| e.into_inner()).retain(|&(s, _)| s != iova);
    }
}

impl SharedMap for Dma {
    fn map_shared(&self, fd: BorrowedFd<'_>, len: u64, bits: u32) -> Result<u64> {
        let iova = self.allocate(len, bits)?;
        // struct vfio_user_dma_map: argsz, flags (u32), offset in the file, address, size (u64).
        let payload = Put::default().u32(32).u32(DMA_READ_WRITE).u64(0).u64(iova).u64(len).0;
        if let Err(e) = self.client.request(cmd::DMA_MAP, &payload, &[fd]) {
            self.release(iova);
            return Err(e);
        }
        self.client.add_window(iova, len, fd)?;
        Ok(iova)
    }

    fn unmap_shared(&self, iova: u64, len: u64) -> Result<()> {
        self.client.remove_window(iova);
        let payload = Put::default().u32(24).u32(0).u64(iova).u64(len).0;
        let r = self.client.request(cmd::DMA_UNMAP, &payload, &[]).map(|_| ());
        self.release(iova);
        r
    }
}
