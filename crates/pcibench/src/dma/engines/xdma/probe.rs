//! Finding an XDMA engine (PG195): the register BAR by its identifiers, its channels and
//! capabilities, for `pcibench info` and for the driver (`mod.rs`).

use super::regs::*;
use crate::access::{BarRegion, DeviceAccess};
use crate::direction::Direction;
use crate::mmio::Width;
use crate::{Error, Result};
use serde::Serialize;
use std::fmt;

fn rd(bar: &dyn BarRegion, off: u64) -> Result<u32> {
    Ok(bar.read(off, Width::B32)? as u32)
}

fn is_xdma_id(id: u32, target: u32, ch: u8) -> bool {
    id & ID_SUBSYSTEM_MASK == ID_SUBSYSTEM && (id >> 16) & 0xf == target && (id >> 8) & 0xf == ch as u32
}

/// Whether `bar` holds XDMA registers (REFERENCE.md's rule: at least 0x8000 long, the IRQ block
/// identifier at 0x2000 and the config block identifier at 0x3000).
pub fn is_dma_bar(bar: &dyn BarRegion) -> Result<bool> {
    if bar.len() < MIN_DMA_BAR_LEN {
        return Ok(false);
    }
    let (irq, cfg) = (rd(bar, reg(T_IRQ, 0, CH_ID))?, rd(bar, reg(T_CONFIG, 0, CH_ID))?);
    Ok(irq & ID_TARGET_MASK == IRQ_BLOCK_ID && cfg & ID_TARGET_MASK == CONFIG_BLOCK_ID)
}

/// The first of `bars` that is an XDMA register BAR (see `probe_bar::find`).
pub fn find_dma_bar(dev: &dyn DeviceAccess, bars: &[u8]) -> Result<Option<u8>> {
    super::super::probe_bar::find(dev, bars, is_dma_bar)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interface {
    MemoryMapped,
    Stream,
}

/// One DMA channel found by `probe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct XdmaChannel {
    pub index: u8,
    pub interface: Interface,
    pub version: u8,
    /// Alignments register (+0x4C): byte alignment of source and destination addresses.
    pub addr_align: u32,
    /// Minimum granularity of a transfer length, in bytes.
    pub len_granularity: u32,
    /// Address bits the engine drives.
    pub addr_bits: u32,
}

/// What `probe` learns from an XDMA register BAR (for `pcibench info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct XdmaInfo {
    pub bar: u8,
    /// The identifier's version byte (config block).
    pub version: u8,
    /// The Vivado release(s) PG195 gives for that version byte.
    pub release: &'static str,
    pub h2c: Vec<XdmaChannel>,
    pub c2h: Vec<XdmaChannel>,
    /// Config block: PCIe max payload and max read request the engine uses, data path width.
    pub max_payload: u32,
    pub max_read_request: u32,
    pub data_width_bits: u32,
    pub warnings: Vec<String>,
    /// The far end pcibench takes for the AXI4-Stream channels (the loopback example design:
    /// H2C N back on C2H N), in words; `None` without stream channels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub far_end: Option<String>,
}

impl XdmaInfo {
    /// Say what is behind the stream channel pairs: on a simulated card the loopback example
    /// design it models; on a card, what `dma` assumes (no register names the user design).
    pub fn with_far_end(mut self, simulated: bool) -> Self {
        let pairs: Vec<String> = self
            .h2c
            .iter()
            .filter(|h| h.interface == Interface::Stream)
            .filter(|h| self.c2h.iter().any(|c| c.index == h.index && c.interface == Interface::Stream))
            .map(|h| format!("h2c {0} -> c2h {0}", h.index))
            .collect();
        if !pairs.is_empty() {
            self.far_end = Some(if simulated {
                format!("AXI4-Stream loopback example design: {}", pairs.join(", "))
            } else {
                format!(
                    "AXI4-Stream channels: dma runs them as the vendor's loopback example design ({}); no register names                      the design, and another one times out with nothing received",
                    pairs.join(", ")
                )
            });
        }
        self
    }

    pub fn channel(&self, dir: Direction, index: u8) -> Option<&XdmaChannel> {
        let list = match dir {
            Direction::H2c => &self.h2c,
            Direction::C2h => &self.c2h,
        };
        list.iter().find(|c| c.index == index)
    }
}

fn release(version: u8) -> &'static str {
    // PG195 identifier register, version field.
    match version {
        1 => "2015.3 or 2015.4",
        2 => "2016.1",
        3 => "2016.2",
        4 => "2016.3",
        5 => "2016.4",
        6 => "2017.1 or later",
        _ => "unknown",
    }
}

impl fmt::Display for XdmaInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "XDMA (DMA/Bridge Subsystem for PCIe) registers in BAR{}", self.bar)?;
        writeln!(f, "  IP version {:#04x} ({})", self.version, self.release)?;
        for (name, list) in [("H2C", &self.h2c), ("C2H", &self.c2h)] {
            if list.is_empty() {
                writeln!(f, "  {name} channels: none")?;
            }
            for c in list {
                let kind = match c.interface {
                    Interface::MemoryMapped => "memory-mapped",
                    Interface::Stream => "stream",
                };
                writeln!(
                    f,
                    "  {name} channel {}: {kind}, address alignment {}, length granularity {}, {} address bits",
                    c.index, c.addr_align, c.len_granularity, c.addr_bits
                )?;
            }
        }
        write!(
            f,
            "  PCIe max payload {} B, max read request {} B, {}-bit data path",
            self.max_payload, self.max_read_request, self.data_width_bits
        )?;
        if let Some(far) = &self.far_end {
            write!(f, "\n  {far}")?;
        }
        for w in &self.warnings {
            write!(f, "\n  warning: {w}")?;
        }
        Ok(())
    }
}

/// Read the identifiers and capabilities of the XDMA engine behind `bar`.
pub fn probe(bar: &dyn BarRegion) -> Result<XdmaInfo> {
    let index = bar.index();
    if bar.len() < MIN_DMA_BAR_LEN {
        return Err(Error::Device(format!(
            "BAR{index} is {:#x} bytes, too small for XDMA registers (at least {MIN_DMA_BAR_LEN:#x})",
            bar.len()
        )));
    }
    let (irq, cfg) = (rd(bar, reg(T_IRQ, 0, CH_ID))?, rd(bar, reg(T_CONFIG, 0, CH_ID))?);
    if irq & ID_TARGET_MASK != IRQ_BLOCK_ID || cfg & ID_TARGET_MASK != CONFIG_BLOCK_ID {
        let hint = if irq == u32::MAX && cfg == u32::MAX {
            ": all-ones reads mean Memory Space is disabled or the card is not responding"
        } else {
            ""
        };
        return Err(Error::Device(format!(
            "BAR{index} is not an XDMA register BAR: 0x2000 reads {irq:#010x} and 0x3000 reads {cfg:#010x} \
             (an XDMA IRQ block reads 0x1fc2xxxx, its config block 0x1fc3xxxx){hint}"
        )));
    }
    let version = (cfg & ID_VERSION_MASK) as u8;
    let mut info = XdmaInfo {
        bar: index,
        version,
        release: release(version),
        h2c: Vec::new(),
        c2h: Vec::new(),
        max_payload: 128 << (rd(bar, reg(T_CONFIG, 0, CFG_MAX_PAYLOAD))? & 0x7).min(5),
        max_read_request: 128 << (rd(bar, reg(T_CONFIG, 0, CFG_MAX_READ))? & 0x7).min(5),
        data_width_bits: 64 << (rd(bar, reg(T_CONFIG, 0, CFG_DATA_WIDTH))? & 0x7).min(3),
        warnings: Vec::new(),
        far_end: None,
    };
    for (dir, target) in [(Direction::H2c, T_H2C), (Direction::C2h, T_C2H)] {
        for ch in 0..4u8 {
            let id = rd(bar, reg(target, ch, CH_ID))?;
            if !is_xdma_id(id, target, ch) {
                continue;
            }
            let sg_target = T_SGDMA + target;
            if !is_xdma_id(rd(bar, reg(sg_target, ch, CH_ID))?, sg_target, ch) {
                info.warnings
                    .push(format!("{dir} channel {ch} has no SGDMA block identifier at {:#x}", reg(sg_target, ch, 0)));
            }
            let a = rd(bar, reg(target, ch, CH_ALIGNMENTS))?;
            let (addr_align, len_granularity, addr_bits) = if a == 0 {
                // An IP that leaves the register 0 states no constraints: the vendor driver
                // then assumes none (libxdma.c engine_alignments), where taking the fields
                // literally would leave no address the engine can reach.
                info.warnings.push(format!(
                    "{dir} channel {ch}'s alignments register (+0x4C) reads 0: using the vendor driver's defaults \
                     (address alignment {DEFAULT_ADDR_ALIGN}, length granularity {DEFAULT_LEN_GRANULARITY}, \
                     {DEFAULT_ADDR_BITS} address bits)"
                ));
                (DEFAULT_ADDR_ALIGN, DEFAULT_LEN_GRANULARITY, DEFAULT_ADDR_BITS)
            } else {
                ((a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff)
            };
            let c = XdmaChannel {
                index: ch,
                interface: if id & ID_STREAM != 0 { Interface::Stream } else { Interface::MemoryMapped },
                version: (id & ID_VERSION_MASK) as u8,
                addr_align,
                len_granularity,
                addr_bits,
            };
            match dir {
                Direction::H2c => info.h2c.push(c),
                Direction::C2h => info.c2h.push(c),
            }
        }
    }
    Ok(info)
}
