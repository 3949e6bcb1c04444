//! Built-in simulated devices. Each is a card whose BARs are host memory or register models of a
//! DMA engine, listed beside the real devices and reached through the same access trait
//! (`access::sim`). Their figures are host-memory figures and every report labels them so.
//!
//! A new simulated card is one folder implementing `CardSpec` (its identity, its engine's
//! datapath, and how to build its BARs) plus one line in `CARDS`. This module knows nothing of
//! access paths or DMA drivers: the models here are what a driver talks to, as hardware would be.
//! They have no threads of their own: an engine progresses with time at its declared datapath,
//! computed whenever the host looks (`datapath`).

pub mod card_memory;
pub mod config_space;
pub mod datapath;
pub mod host_map;
pub mod irq;
pub mod mem;
pub mod nvram;
pub mod overrun;
pub mod qdma;
mod served;
pub mod shake;
pub mod stage;
pub mod xdma;

use crate::mmio::Width;
use crate::pci::config::{Capability, CMD_MEMORY};
use crate::pci::device::{Command, DeviceInfo, LinkEnd, LinkStatus};
use crate::pci::resource::{Bar, BarKind};
use crate::Result;
use host_map::HostMap;
use mem::Pages;
use std::sync::Arc;

pub const SIM_LABEL: &str = "simulated card";

/// A register block a simulated card decodes (an engine's registers): every access goes to the
/// model, none through a CPU mapping, so the model sees each one as a device would.
pub trait RegisterModel: Send + Sync {
    /// Bytes of the BAR the block occupies.
    fn size(&self) -> u64;
    /// Refuse access widths the block does not decode (XDMA registers are 32-bit only),
    /// naming the BAR `index` in the message.
    fn check_width(&self, index: u8, width: Width) -> Result<()>;
    /// A read at an aligned offset inside the block (the BAR checks bounds and alignment).
    fn read(&self, offset: u64, width: Width) -> u64;
    /// A read that may fail: a completer abort of a user's model (`crate::model`). The sim
    /// cards' registers always answer.
    fn try_read(&self, offset: u64, width: Width) -> Result<u64> {
        Ok(self.read(offset, width))
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()>;
    /// Bus Master Enable changed in config space: an engine must not reach host memory without it.
    fn set_bus_master(&self, on: bool);
    /// Make the card memory `[addr, addr+len)` present before a run uses it (card memory is
    /// lazily mapped host memory; a real card's is simply there). Blocks without an engine.
    fn populate_card(&self, addr: u64, len: u64) {
        let _ = (addr, len);
    }
    /// Whether the card's header implements what conventional PCI has and PCI Express hardwires
    /// to 0: Memory Write and Invalidate Enable (command bit 4) and the latency timer (PCI Local
    /// Bus 3.0 §6.2.2, §6.2.4; PCIe Base 4.0 §7.5.1.1.1, §7.5.1.1.6).
    fn conventional_pci(&self) -> bool {
        false
    }
    /// Software wrote the card's config header: its command register and latency timer now.
    fn config_written(&self, command: u16, latency_timer: u8) {
        let _ = (command, latency_timer);
    }
    /// PCI_STATUS error bits the block has latched (write-1-to-clear in config space).
    fn pci_status(&self) -> u16 {
        0
    }
    /// Bring the engine to now: what its datapath has finished by now completes, in the calling
    /// thread (`datapath.rs`). Called whenever the host looks: every register access does it
    /// itself; a driver polling host memory says so through `BarRegion::observe`, an interrupt
    /// waiter or a server's timer when the engine's next completion is due. Blocks without an
    /// engine have nothing to do.
    fn advance(&self) {}
    /// How long until the engine next completes something (None: nothing under way), for a
    /// waiter's or a timer's timeout.
    fn due_in(&self) -> Option<std::time::Duration> {
        None
    }
    /// Software wrote 1s to these PCI_STATUS bits.
    fn clear_pci_status(&self, bits: u16) {
        let _ = bits;
    }
    /// What a driver made the block do that the real IP would act on badly, in words, oldest first
    /// (the engine models' violations; `pcibench serve` logs them as they appear, for drivers it did not write).
    fn violations(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What sits behind one BAR of a simulated card.
#[derive(Clone)]
pub enum SimBar {
    /// Host memory standing in for card memory behind a BAR (PIO targets).
    Memory(Arc<Pages>),
    /// An engine's register block.
    Registers(Arc<dyn RegisterModel>),
}

/// A simulated card, built: its BARs and the card's view of host memory (where DMA buffers
/// are registered, as an IOMMU would map them).
pub struct SimCard {
    pub bars: Vec<(u8, SimBar)>,
    pub host: Arc<HostMap>,
    /// Its interrupts (what its models raise; `access::sim` routes them), where it has any.
    pub irq: Option<Arc<irq::SimIrq>>,
}

/// One kind of simulated card.
pub trait CardSpec: Sync {
    /// The name the user types (`sim`, `sim-qdma`, ...), also its address in reports.
    fn name(&self) -> &'static str;
    /// Its identity, BARs and link, as `pcibench info` shows them.
    fn info(&self) -> DeviceInfo;
    /// A fresh instance: BAR memory and engine models.
    fn build(&self) -> Result<SimCard>;
}

/// Every simulated card, in the order `pcibench list` shows them.
pub static CARDS: &[&dyn CardSpec] = &[
    &xdma::card::XdmaCard,
    &qdma::card::QdmaCard,
    &nvram::card::NvramCard,
    &xdma::card::XdmaStreamCard,
    &qdma::stream_card::QdmaStreamCard,
    &xdma::card::XdmaQuadCard,
];

/// One of `CARDS`, by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimId(usize);

impl SimId {
    /// The default simulated card, `sim` (XDMA-shaped).
    pub const DEFAULT: SimId = SimId(0);

    pub fn all() -> impl Iterator<Item = SimId> {
        (0..CARDS.len()).map(SimId)
    }

    pub fn from_name(name: &str) -> Option<SimId> {
        CARDS.iter().position(|c| c.name().eq_ignore_ascii_case(name.trim())).map(SimId)
    }

    pub fn spec(self) -> &'static dyn CardSpec {
        CARDS[self.0]
    }

    pub fn name(self) -> &'static str {
        self.spec().name()
    }

    /// The accepted names, for messages: "sim, sim-qdma".
    pub fn names() -> String {
        CARDS.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
    }
}

/// The shape every simulated card shares: 64-bit prefetchable memory BARs, a PCI Express
/// capability at 0x70, Memory Space on, no driver, no IOMMU group. `bars` is (index, size).
pub struct CardShape {
    pub name: &'static str,
    pub vendor: u16,
    pub device: u16,
    pub device_name: &'static str,
    pub subsystem: (u16, u16),
    pub class: (u32, &'static str),
    pub bars: &'static [(u8, u64)],
    /// (generation, width) of the pretend link the config space reports.
    pub link: (u8, u8),
    pub mps: u32,
    pub mps_supported: u32,
    pub mrrs: u32,
    /// The interrupts its IP has (what its model's `SimIrq` offers); None: it raises none.
    pub irq: Option<irq::Offers>,
    /// What bounds its DMA engine's progress (`datapath`): `info`, the DMA header and the limit
    /// column of its rows show it.
    pub datapath: Option<datapath::Datapath>,
}

/// `resource` flags of a 64-bit prefetchable memory BAR (IORESOURCE_MEM | PREFETCH | MEM_64 | SIZEALIGN).
const SIM_BAR_FLAGS: u64 = 0x0014_220c;

/// `DeviceInfo` of a simulated card, from its shape.
pub fn card_info(s: &CardShape) -> DeviceInfo {
    let bars = s
        .bars
        .iter()
        .map(|&(index, size)| Bar {
            index,
            start: 0,
            size,
            kind: BarKind::Memory,
            is_64bit: true,
            prefetchable: true,
            flags: SIM_BAR_FLAGS,
            files: Vec::new(),
        })
        .collect();
    let speed = crate::pci::link::speed_name(s.link.0);
    let mut info = DeviceInfo {
        address: s.name.into(),
        simulated: true,
        vendor_id: s.vendor,
        vendor_name: Some("pcibench".into()),
        device_id: s.device,
        device_name: Some(s.device_name.into()),
        subsystem_vendor_id: s.subsystem.0,
        subsystem_device_id: s.subsystem.1,
        subsystem_name: None,
        class_code: s.class.0,
        class_name: s.class.1.into(),
        revision: 0,
        driver: None,
        iommu_group: None,
        numa_node: None,
        physical_slot: None,
        parent: None,
        command: Some(Command::from_raw(CMD_MEMORY)),
        bars,
        expansion_rom: None,
        link: Some({
            let mut l = LinkStatus::new(
                (speed.clone(), Some(s.link.0), Some(s.link.1)),
                (speed, Some(s.link.0), Some(s.link.1)),
                (Some(s.mps), Some(s.mps_supported), Some(s.mrrs)),
                Some("Endpoint".into()),
            );
            // No partner: the card's own capabilities are the limit, and it trains to them.
            (l.limit_gen, l.limit_width) = (Some(s.link.0), Some(s.link.1));
            (l.speed_limited_by, l.width_limited_by) = (Some(LinkEnd::Device), Some(LinkEnd::Device));
            l
        }),
        model: None,
        aer: None,
        config_bytes: 0,
        capabilities: vec![Capability { id: 0x10, offset: 0x70, name: "PCI Express", version: None }],
        extended_capabilities: Vec::new(),
        warnings: Vec::new(),
        interrupts: None,
        served: None,
        datapath: s.datapath.map(|p| crate::pci::device::DatapathInfo {
            mbps: p.mbps(),
            desc_bytes: p.desc_bytes,
            basis: p.basis.into(),
        }),
    };
    // The capability list as the card's config space links it (its MSI and MSI-X among them).
    let space = config_space::ConfigSpace::from_info(&info, s.irq.map(|o| (o, 0)));
    info.capabilities = crate::pci::config::parse(space.bytes()).capabilities;
    info.fill_model();
    info
}
