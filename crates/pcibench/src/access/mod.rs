//! Access paths: how the host reaches a device's BARs, config space and (for DMA) how the device
//! reaches host memory. One file per path behind small traits: `DeviceAccess` (an opened
//! device), `BarRegion` (one reachable BAR) and `IommuMap` (the IOMMU boundary for DMA buffers).
//! sysfs.rs, vfio/ and sim.rs implement them. Nothing here knows a DMA engine or a buffer kind:
//! `dma` builds on `DeviceAccess::dma_path`.

pub mod irq;
pub mod irq_fds;
pub mod mapped;
pub mod regs;
pub mod sim;
pub mod sysfs;
pub mod traced;
pub mod vfio;
pub mod vfio_user;

pub use irq::{Fired, Interrupts, IrqKind, IrqRequest};

use crate::host::Host;
use crate::mmio::{MemType, Width};
use crate::pci::{DeviceInfo, PciAddress};
use crate::sim::host_map::HostMap;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// `--via`: the access path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    Sysfs,
    Vfio,
    VfioNoiommu,
    Sim,
    /// A device model in another process, over the vfio-user protocol (`vfio-user:SOCKET`).
    VfioUser,
    /// No device and no path to one: host memory measured from the CPU (`pcibench buffers`).
    /// Saved runs before it said `sim` there.
    Host,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Sysfs => "sysfs",
            Via::Vfio => "vfio",
            Via::VfioNoiommu => "vfio-noiommu",
            Via::Sim => "sim",
            Via::VfioUser => "vfio-user",
            Via::Host => "host",
        })
    }
}

/// The memory type of a BAR mapping (`--map`; `wc-flush` is WC plus a read in the timed part).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// Uncached-minus (UC-): sysfs resourceN, every VFIO mmap.
    Uc,
    /// Write-combining: sysfs resourceN_wc (prefetchable BARs only).
    Wc,
}

impl Mapping {
    /// The memory type a BAR mapped this way gets: sysfs `resourceN` and every VFIO mmap are
    /// uncached (pgprot_device / pgprot_noncached), `resourceN_wc` write-combining
    /// (pgprot_writecombine; drivers/pci/mmap.c, drivers/vfio/pci/vfio_pci_core.c).
    pub fn mem_type(&self) -> MemType {
        match self {
            Mapping::Uc => MemType::Uc,
            Mapping::Wc => MemType::Wc,
        }
    }
}

impl fmt::Display for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mapping::Uc => "uc",
            Mapping::Wc => "wc",
        })
    }
}

/// How bulk transfers reach the BAR: through a CPU mapping, or one pread/pwrite per access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    Mmap,
    Syscall,
}

/// One BAR the host can reach.
///
/// Implementations with a CPU mapping return it from `ptr`; the bulk copy routines in `mmio`
/// use it directly. Single accesses (`read`/`write`) work on every implementation: through the
/// mapping, through pread/pwrite on a VFIO region, or into the sim card's register model.
pub trait BarRegion: Send + Sync {
    fn index(&self) -> u8;
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn mapping(&self) -> Mapping;
    /// The memory type behind the mapping, which picks the copy routines' loads: the mapping's
    /// own on a real BAR, write-back where host memory stands in for one (the sim card).
    fn mem_type(&self) -> MemType {
        self.mapping().mem_type()
    }
    fn via(&self) -> Via;
    /// Base of the CPU mapping, if this region is mapped.
    fn ptr(&self) -> Option<*mut u8>;
    /// Read `width` (8/16/32/64-bit) at `offset`. Callers check bounds and alignment first.
    fn read(&self, offset: u64, width: Width) -> Result<u64>;
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()>;
    /// Bulk transfer without a mapping (pread/pwrite, one call per `width` access).
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()>;
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()>;
    /// Where this BAR's accesses are traced (`--trace`; `traced::TracedBar`): engines report their
    /// descriptors and writebacks to it too. None when nothing is traced.
    fn tracer(&self) -> Option<&crate::trace::Tracer> {
        None
    }
    /// How its bulk accesses really go, where that differs from what was asked: a vfio-user BAR
    /// the server does not let this process map is one message per access, labelled `syscall`.
    fn io_mode(&self) -> Option<IoMode> {
        None
    }
    /// The host is polling host memory for the device's progress (a writeback word, a semaphore,
    /// a completion ring) rather than reading this BAR: a simulated card's engine brings itself
    /// up to now (`sim::datapath`), as hardware does on its own. Drivers call it in every poll
    /// loop; elsewhere it does nothing.
    fn observe(&self) {}

    /// The PCI function this BAR belongs to (`0000:03:00.0`), where the path knows it: an engine
    /// that hangs names the command that resets it (`dma::engines::reset_the_card`).
    fn device(&self) -> Option<String> {
        None
    }
}

/// An opened device on one access path.
pub trait DeviceAccess: Send + Sync {
    fn via(&self) -> Via;
    /// Map (or open for syscall I/O) one BAR with the requested memory type.
    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>>;
    /// The same for reading only: where the path allows it, the file is opened and mapped
    /// read-only, so read permission is enough; the region refuses single writes.
    fn open_bar_read_only(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        self.open_bar(index, mapping, io)
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// The descriptor and offset at which a pwrite(2) reaches config space (VFIO's config
    /// region), for `emergency`: a forced exit clears Bus Master through it. None elsewhere.
    fn config_fd(&self) -> Option<(std::os::fd::RawFd, u64)> {
        None
    }
    /// The device's interrupts delivered to this process, for engines that complete by interrupt
    /// (`access::irq`). VFIO and vfio-user route a function's vectors to eventfds; the other
    /// paths say in one line why there are none.
    fn interrupts(&self, req: IrqRequest) -> Result<Box<dyn Interrupts>> {
        let _ = req;
        Err(Error::Unsupported(match self.via() {
            Via::Sim => "this simulated card raises no interrupts (its engine model completes by polling): completion by interrupt needs a device bound to vfio-pci".to_string(),
            via => format!(
                "interrupts are not available through {via}: only VFIO delivers a device's interrupts to user space; bind it to vfio-pci (sudo pcibench setup ADDR --vfio)"
            ),
        }))
    }
    /// Make the card memory `[addr, addr+len)` a run will use present before its first transfer.
    /// A simulated card's memory is lazily mapped host memory whose first touch would otherwise
    /// be charged to the first timed (and timeout-bounded) transfer; a real card's memory is
    /// simply there, so the other paths do nothing.
    fn populate_card_memory(&self, addr: u64, len: u64) {
        let _ = (addr, len);
    }
    /// The device's config space as a handle an engine can keep for as long as it runs (the
    /// umem engine clears the card's latched PCI_STATUS errors after a failed transfer, as
    /// umem.c does). Paths without DMA have no engine to hand one to.
    fn config_port(&self) -> Result<Arc<dyn ConfigPort>> {
        Err(Error::Unsupported(format!(
            "an engine cannot keep the config space of a device opened through {}: bind it to vfio-pci (sudo pcibench setup ADDR --vfio)",
            self.via()
        )))
    }
    /// How the device reaches host memory on this path (what DMA buffers must be made of).
    fn dma_path(&self) -> Result<DmaPath> {
        Err(Error::Unsupported(format!(
            "DMA is not available through {}: bind the device to vfio-pci (sudo pcibench setup ADDR --vfio) and use --via vfio or vfio-noiommu",
            self.via()
        )))
    }
    /// Where this device's accesses are traced (`--trace`; `traced::TracedDevice`). None when
    /// nothing is traced.
    fn tracer(&self) -> Option<&crate::trace::Tracer> {
        None
    }
}

/// A device's config space, owned (see `DeviceAccess::config_port`).
pub trait ConfigPort: Send + Sync {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    fn write(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// The device as messages and commands name it: its PCI address, or a simulated card's name.
    fn address(&self) -> String;
}

/// The IOMMU boundary: makes process memory reachable by the device at an I/O virtual address.
/// The VFIO type1 container implements it; an iommufd IOAS would be a second implementation.
pub trait IommuMap: Send + Sync {
    /// Map `len` bytes at process address `vaddr` for device reads and writes, at an IOVA
    /// aligned to `align` whose last byte fits in `dma_bits` address bits. Returns the IOVA.
    fn map_dma(&self, vaddr: u64, len: u64, align: u64, dma_bits: u32) -> Result<u64>;
    /// Undo `map_dma`.
    fn unmap_dma(&self, iova: u64, len: u64) -> Result<()>;
}

/// Shared memory a device model in another process reaches (vfio-user's DMA_MAP): a buffer is a
/// file (a memfd) this process maps and hands to the model, which maps the same pages, so its DMA
/// lands in the buffer with no copy.
pub trait SharedMap: Send + Sync {
    /// Make `len` bytes of `fd` from offset 0 reachable by the device, at a bus address (IOVA)
    /// below 2^`bits` that the map chooses and returns.
    fn map_shared(&self, fd: std::os::fd::BorrowedFd<'_>, len: u64, bits: u32) -> Result<u64>;
    /// Undo `map_shared`.
    fn unmap_shared(&self, iova: u64, len: u64) -> Result<()>;
}

/// How a device on an access path reaches host memory.
#[derive(Clone)]
pub enum DmaPath {
    /// Behind an IOMMU: buffers are mapped through this and the card is given IOVAs.
    Iommu(Arc<dyn IommuMap>),
    /// No IOMMU (VFIO no-IOMMU): the card is given CPU physical addresses.
    Physical,
    /// A simulated card: buffers are registered in its view of host memory.
    Sim(Arc<HostMap>),
    /// A model in another process (vfio-user): buffers are memfds shared with it.
    Shared(Arc<dyn SharedMap>),
}

/// Open a PCI device on the access path `via`, or on the default one:
/// sysfs when no driver is bound, VFIO (type1 or no-IOMMU, as its group says) when bound to
/// vfio-pci. A device bound to any other driver is refused. Simulated cards are opened by
/// `access::sim` (see `device::open`).
pub fn open_device(
    host: &Host,
    addr: &PciAddress,
    info: &DeviceInfo,
    via: Option<Via>,
) -> Result<Box<dyn DeviceAccess>> {
    if info.simulated || via == Some(Via::Sim) {
        return Err(Error::usage(format!(
            "--via sim applies only to the simulated card (pcibench ... sim), not {}",
            info.address
        )));
    }
    match (info.driver.as_deref(), via) {
        (Some("vfio-pci"), None | Some(Via::Vfio) | Some(Via::VfioNoiommu)) => {
            // VFIO is the path that turns Bus Master on: not while another user holds the
            // resource files, who could then point the engine anywhere (issue 36 M4).
            let foreign = crate::host::state::foreign_resource_files(host, addr);
            if !foreign.is_empty() {
                return Err(Error::Refused(format!(
                    "refusing to open {addr} through VFIO: its resource files belong to another user ({}), who could \
                     rewrite its DMA engine's addresses once Bus Master is on; take the grant back first: sudo \
                     pcibench setup {addr} --release",
                    foreign.join(", ")
                )));
            }
            let dev = vfio::VfioDevice::open(host, addr, via)?;
            // The group is open, attached and the device fd taken: what CAP_SYS_RAWIO was for on
            // a no-IOMMU group (vfio_group_fops_open, vfio_noiommu_open). Without an IOMMU the DMA
            // buffers are still to be opened: /dev/mem (CAP_SYS_RAWIO) or pagemap's frame numbers
            // (CAP_SYS_ADMIN, fs/proc/task_mmu.c pagemap_read); `buffers::allocator` drops those.
            use crate::os::privilege::{caps, keep_only, CAP_IPC_LOCK, CAP_SYS_ADMIN, CAP_SYS_RAWIO};
            let keep = match dev.via() {
                Via::VfioNoiommu => caps(&[CAP_SYS_RAWIO, CAP_SYS_ADMIN, CAP_IPC_LOCK]),
                _ => caps(&[CAP_IPC_LOCK]),
            };
            keep_only(keep, &format!("opening {addr}'s VFIO group and device"))?;
            Ok(Box::new(dev))
        }
        (Some("vfio-pci"), Some(_)) => Err(Error::Refused(format!(
            "{addr} is bound to vfio-pci, which owns its BARs: use --via vfio (or vfio-noiommu), or release it for sysfs: sudo pcibench setup {addr} --release"
        ))),
        (Some(driver), _) => Err(sysfs::bound_driver_refusal(host, addr, driver)),
        (None, None | Some(Via::Sysfs)) => {
            // No driver, yet the system may still use it (the boot VGA device under efifb/simpledrm).
            match crate::host::inuse::inventory(host, &addr.to_string()) {
                Ok(inv) if !inv.is_empty() => {
                    return Err(Error::Refused(format!(
                        "{addr} is in use by the running system: {}: pcibench will not map its BARs; pick another device",
                        inv.summary()
                    )))
                }
                Err(e @ Error::Sysfs(_)) => {
                    return Err(Error::Refused(format!(
                        "{addr}: cannot tell what the running system uses it for ({e}): pcibench will not map its BARs"
                    )))
                }
                _ => {}
            }
            let dev = sysfs::SysfsDevice::open(host, addr, info)?;
            // The resource files are the user's to open by their mode (setup --sysfs-user), never
            // by a capability; CAP_IPC_LOCK stays for locking DMA-free buffers.
            crate::os::privilege::keep_only(
                crate::os::privilege::caps(&[crate::os::privilege::CAP_IPC_LOCK]),
                &format!("opening {addr} through sysfs"),
            )?;
            Ok(Box::new(dev))
        }
        (None, Some(v)) => Err(Error::Refused(format!(
            "{addr} has no driver bound, so --via {v} cannot reach it: bind it to vfio-pci first: sudo pcibench setup {addr} --vfio (or use --via sysfs)"
        ))),
    }
}

pub mod emergency;
pub mod guard;

/// Set or clear Bus Master Enable (command register bit 2, PCI Local Bus 3.0 §6.2.2) through
/// the device's config space on any access path; returns the command register as it was.
pub fn set_bus_master(dev: &dyn DeviceAccess, on: bool) -> Result<u16> {
    use crate::pci::config::{CMD_BUS_MASTER, COMMAND};
    let mut b = [0u8; 2];
    dev.config_read(COMMAND as u64, &mut b)?;
    let old = u16::from_le_bytes(b);
    let new = if on { old | CMD_BUS_MASTER } else { old & !CMD_BUS_MASTER };
    if new != old {
        dev.config_write(COMMAND as u64, &new.to_le_bytes())?;
    }
    Ok(old)
}

/// Bus Master enabled for as long as this lives, then put back as it was.
pub struct BusMaster<'a> {
    dev: &'a dyn DeviceAccess,
    was_on: bool,
}

impl<'a> BusMaster<'a> {
    pub fn enable(dev: &'a dyn DeviceAccess) -> Result<Self> {
        let old = set_bus_master(dev, true)?;
        let was_on = old & crate::pci::config::CMD_BUS_MASTER != 0;
        if let (false, Some((fd, at))) = (was_on, dev.config_fd()) {
            emergency::arm(fd, at, old & !crate::pci::config::CMD_BUS_MASTER);
        }
        Ok(BusMaster { dev, was_on })
    }
}

impl Drop for BusMaster<'_> {
    fn drop(&mut self) {
        emergency::disarm();
        if !self.was_on {
            // Best effort on the way out: the run's own result matters more than this error.
            let _ = set_bus_master(self.dev, false);
        }
    }
}
