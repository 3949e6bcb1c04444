//! `DeviceInfo`: everything `pcibench info` reports about one device, from sysfs or the sim card.
//! Field names are part of the JSON contract (docs/json.md).

use super::config::{Capability, CMD_BUS_MASTER, CMD_IO, CMD_MEMORY};
use super::link::Link;
use super::resource::Bar;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

fn hex4<S: Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:04x}"))
}

fn hex6<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:06x}"))
}

#[derive(Debug, Clone, Serialize)]
pub struct Command {
    pub raw: u16,
    pub io: bool,
    pub memory: bool,
    pub bus_master: bool,
}

impl Command {
    pub fn from_raw(raw: u16) -> Self {
        Command { raw, io: raw & CMD_IO != 0, memory: raw & CMD_MEMORY != 0, bus_master: raw & CMD_BUS_MASTER != 0 }
    }

    /// lspci's `I/O- Mem+ BusMaster-`.
    pub fn describe(&self) -> String {
        let f = |b: bool| if b { '+' } else { '-' };
        format!("I/O{} Mem{} BusMaster{}", f(self.io), f(self.memory), f(self.bus_master))
    }
}

/// Which end of a link sets its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkEnd {
    /// This device's own Link Capabilities.
    Device,
    /// The link partner's.
    Partner,
    /// Both ends support the same.
    Both,
}

/// The other end of a device's link: the port above an endpoint, the device below a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkPartner {
    pub address: String,
    /// "upstream port", "device below it", "switch port below it".
    pub role: String,
    pub max_gen: Option<u8>,
    pub max_width: Option<u8>,
    pub max_speed: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkStatus {
    pub current_speed: Option<String>,
    pub current_gen: Option<u8>,
    pub current_width: Option<u8>,
    pub max_speed: Option<String>,
    pub max_gen: Option<u8>,
    pub max_width: Option<u8>,
    pub mps: Option<u32>,
    pub mps_supported: Option<u32>,
    pub mrrs: Option<u32>,
    /// The PCI Express port type (`Endpoint`, `Root Port`, ...) when config space shows it.
    pub port_type: Option<String>,
    /// The other end of the link, when known (`pci::partner`).
    pub partner: Option<LinkPartner>,
    /// What the link can train to: the lower of both ends' capabilities (this device's alone
    /// for an endpoint whose partner is unknown; none for a port whose partner is unknown).
    pub limit_gen: Option<u8>,
    pub limit_width: Option<u8>,
    pub speed_limited_by: Option<LinkEnd>,
    pub width_limited_by: Option<LinkEnd>,
    /// Trained below that limit (lspci's "(downgraded)"); never for a port by its own LnkCap alone.
    pub degraded: bool,
}

impl LinkStatus {
    /// A link as read, before `pci::partner` judges it.
    pub fn new(
        current: (Option<String>, Option<u8>, Option<u8>),
        max: (Option<String>, Option<u8>, Option<u8>),
        payload: (Option<u32>, Option<u32>, Option<u32>),
        port_type: Option<String>,
    ) -> LinkStatus {
        LinkStatus {
            current_speed: current.0,
            current_gen: current.1,
            current_width: current.2,
            max_speed: max.0,
            max_gen: max.1,
            max_width: max.2,
            mps: payload.0,
            mps_supported: payload.1,
            mrrs: payload.2,
            port_type,
            partner: None,
            limit_gen: None,
            limit_width: None,
            speed_limited_by: None,
            width_limited_by: None,
            degraded: false,
        }
    }

    /// Which end limits the link, in words: "this device", "the upstream port 0000:00:1c.0",
    /// "both ends", or "speed: ..., width: ..." when they differ.
    pub fn limited_by_words(&self) -> Option<String> {
        let who = |e: LinkEnd| match (e, &self.partner) {
            (LinkEnd::Device, _) => "this device".to_string(),
            (LinkEnd::Partner, Some(p)) => format!("the {} {}", p.role.trim_end_matches(" below it"), p.address),
            (LinkEnd::Partner, None) => "its link partner".to_string(),
            (LinkEnd::Both, _) => "both ends".to_string(),
        };
        match (self.speed_limited_by, self.width_limited_by) {
            (Some(a), Some(b)) if a == b => Some(who(a)),
            (Some(a), Some(b)) => Some(format!("speed: {}, width: {}", who(a), who(b))),
            (Some(a), None) | (None, Some(a)) => Some(who(a)),
            (None, None) => None,
        }
    }

    /// The model's inputs: the negotiated link when known, else the maximum.
    pub fn model_link(&self) -> Option<Link> {
        let gen = self.current_gen.or(self.max_gen)?;
        let width = self.current_width.filter(|w| *w > 0).or(self.max_width)?;
        Some(Link { gen, width, mps: self.mps.unwrap_or(128), mrrs: self.mrrs.unwrap_or(512) })
    }
}

/// The link model's limits for large transfers (>= MPS), MB/s.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub link: Link,
    pub raw_mbps: f64,
    pub write_mbps: f64,
    pub read_mbps: f64,
    /// Whether MPS/MRRS were read from config space or assumed (128/512).
    pub assumed_payload_sizes: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AerCounters {
    pub correctable: Option<u64>,
    pub nonfatal: Option<u64>,
    pub fatal: Option<u64>,
    /// Every named counter with a non-zero value, e.g. `BadTLP: 3`.
    pub nonzero: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub address: String,
    pub simulated: bool,
    #[serde(serialize_with = "hex4")]
    pub vendor_id: u16,
    pub vendor_name: Option<String>,
    #[serde(serialize_with = "hex4")]
    pub device_id: u16,
    pub device_name: Option<String>,
    #[serde(serialize_with = "hex4")]
    pub subsystem_vendor_id: u16,
    #[serde(serialize_with = "hex4")]
    pub subsystem_device_id: u16,
    pub subsystem_name: Option<String>,
    #[serde(serialize_with = "hex6")]
    pub class_code: u32,
    pub class_name: String,
    pub revision: u8,
    pub driver: Option<String>,
    pub iommu_group: Option<u32>,
    pub numa_node: Option<i32>,
    /// The physical slot it sits in, where sysfs or a port's Slot Capabilities name one (`pci::slot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_slot: Option<super::slot::PhysicalSlot>,
    /// The upstream bridge, when the device sits behind one.
    pub parent: Option<String>,
    pub command: Option<Command>,
    pub bars: Vec<Bar>,
    /// The expansion ROM, where the device has one (`pci::rom`: lspci's rules).
    pub expansion_rom: Option<super::rom::ExpansionRom>,
    pub link: Option<LinkStatus>,
    pub model: Option<ModelSummary>,
    pub aer: Option<AerCounters>,
    pub config_bytes: usize,
    pub capabilities: Vec<Capability>,
    pub extended_capabilities: Vec<Capability>,
    /// Its interrupts as config space lays them out (the MSI and MSI-X capabilities, the MSI-X
    /// table and PBA, the INTx pin), where config space beyond the header could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupts: Option<super::intr::IrqCaps>,
    pub warnings: Vec<String>,
    /// A device that is a model in another process, reached over vfio-user: what its server said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served: Option<Served>,
    /// A simulated card's DMA engine datapath (its model's rate: what bounds its DMA rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datapath: Option<DatapathInfo>,
}

/// A simulated card's engine datapath (`sim::datapath::Datapath`) as `info` and reports show it:
/// its rate in each direction, the bytes of each descriptor fetched over it, and what it stands
/// for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatapathInfo {
    pub mbps: f64,
    pub desc_bytes: u64,
    pub basis: String,
}

impl DatapathInfo {
    /// The most transfers of `size` bytes (one descriptor each) move at, MB/s: the datapath's
    /// rate less the share its descriptor fetches take.
    pub fn limit_mbps(&self, size: u64) -> f64 {
        self.mbps * size as f64 / (size + self.desc_bytes).max(1) as f64
    }

    /// "sim card model: 2,000 MB/s per direction".
    pub fn header(&self) -> String {
        format!("sim card model: {} MB/s per direction", crate::units::group_thousands(self.mbps.round() as u64))
    }
}

/// What a vfio-user server said about itself and the device it serves (`info` shows it).
#[derive(Debug, Clone, Serialize)]
pub struct Served {
    /// The server's UNIX socket.
    pub socket: String,
    /// The protocol version it speaks, `0.1`.
    pub protocol: String,
    /// Its capabilities, the JSON of its VERSION reply.
    pub capabilities: String,
    /// The pcibench simulated card it serves (`pcibench serve`), when that is established by
    /// more than its word: the process at the other end is this very pcibench executable (its
    /// SO_PEERCRED pid's /proc/PID/exe), run by this user or root, and serves that card's ids and
    /// BARs. Only then is it treated as the simulated card (no consent flags needed).
    pub pcibench_card: Option<String>,
    /// A claim to be pcibench's own card that was not taken, and why (`info` says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_refused: Option<String>,
    /// BARs it maps in part: the BAR and its mapped areas (offset, size); the rest are messages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partly_mapped: Vec<(u8, Vec<(u64, u64)>)>,
    /// BARs whose descriptor was not used, and why (not sealed against shrinking, too short).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmapped: Vec<(u8, String)>,
    /// Whether it can reset the device (DEVICE_GET_INFO's reset flag).
    pub resettable: bool,
    /// The BARs it lets this process map (the rest go through region read/write messages).
    pub mapped_bars: Vec<u8>,
    /// Interrupts it offers, as (kind, vectors): ("MSI", 1).
    pub interrupts: Vec<(String, u32)>,
}

impl DeviceInfo {
    pub fn bar(&self, index: u8) -> Option<&Bar> {
        self.bars.iter().find(|b| b.index == index)
    }

    /// `10ee:7024`.
    pub fn ids(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor_id, self.device_id)
    }

    pub fn vendor_label(&self) -> String {
        self.vendor_name.clone().unwrap_or_else(|| format!("Vendor {:04x}", self.vendor_id))
    }

    pub fn device_label(&self) -> String {
        self.device_name.clone().unwrap_or_else(|| format!("Device {:04x}", self.device_id))
    }

    /// The PCIe link that bounds this device's throughput, for the link model's limits; or why
    /// no link does (a simulated card is host memory; conventional PCI and some emulated devices
    /// report no link), in words.
    pub fn bounding_link(&self) -> std::result::Result<Link, String> {
        if self.simulated {
            return Err(format!(
                "no link limit or efficiency: {} is a simulated card (host memory, which no PCIe link bounds)",
                self.address
            ));
        }
        let Some(link) = &self.link else {
            return Err(format!(
                "no link limit or efficiency: {} reports no PCIe link (conventional PCI, or an emulated device without one)",
                self.address
            ));
        };
        match (link.current_gen, link.current_width.filter(|w| *w > 0)) {
            (Some(gen), Some(width)) => {
                Ok(Link { gen, width, mps: link.mps.unwrap_or(128), mrrs: link.mrrs.unwrap_or(512) })
            }
            _ => Err(format!(
                "no link limit or efficiency: {} reports no usable current link speed and width",
                self.address
            )),
        }
    }

    pub(crate) fn fill_model(&mut self) {
        let Some(link) = &self.link else { return };
        let Some(l) = link.model_link() else { return };
        // Large-transfer limits: a transfer of at least one MRRS and one MPS.
        let big = 1 << 20;
        self.model = Some(ModelSummary {
            link: l,
            raw_mbps: l.raw_bps() / 1e6,
            write_mbps: l.write_bps(big) / 1e6,
            read_mbps: l.read_bps(big) / 1e6,
            assumed_payload_sizes: link.mps.is_none() || link.mrrs.is_none(),
        });
    }
}
