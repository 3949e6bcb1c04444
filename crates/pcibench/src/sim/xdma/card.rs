//! `sim`, the default simulated card: shaped like seed 000's memmapped_blkram (10ee:7024,
//! BAR0 1 MiB and BAR2 128 KiB of memory, all BARs 64-bit prefetchable, Gen2 x4, MPS 256,
//! MRRS 512), with an XDMA register block in BAR4 driving 0x128000 bytes of card memory; and
//! `sim-xdma-st`, the same card built with AXI4-Stream channels and the vendor's loopback
//! example design behind them (`stream.rs`); `sim-xdma4`, the same card with four
//! memory-mapped channel pairs.

use super::super::datapath::ModelClock;
use super::super::mem::Pages;
use super::super::{card_info, CardShape, CardSpec, SimBar, SimCard};
use super::model::{XdmaModel, XdmaModelConfig};
use crate::pci::DeviceInfo;
use crate::Result;
use std::sync::Arc;

/// The BAR holding the sim card's XDMA registers.
pub const SIM_DMA_BAR: u8 = 4;

pub const SHAPE: CardShape = CardShape {
    name: "sim",
    vendor: 0x10ee,
    device: 0x7024,
    device_name: "simulated card (XDMA-shaped FPGA card, BARs in host memory)",
    subsystem: (0x0002, 0x0001),
    class: (0x058000, "Memory controller"),
    bars: &[(0, 1 << 20), (2, 128 << 10), (SIM_DMA_BAR, 64 << 10)],
    link: (2, 4),
    mps: 256,
    mps_supported: 512,
    mrrs: 512,
    irq: Some(super::model::IRQ),
    datapath: Some(super::state::DATAPATH),
};

/// `sim-xdma-st`: the `sim` card's shape with AXI4-Stream channels (the example design's device id
/// 0x7024 kept: the identifiers, not the id, say stream).
pub const SHAPE_ST: CardShape = CardShape {
    name: "sim-xdma-st",
    device_name: "simulated card (XDMA AXI4-Stream channels, loopback example design)",
    ..SHAPE
};

/// `sim-xdma4`: the `sim` card's shape and card memory with four memory-mapped channel pairs (the
/// most PG195 allows), for several channels at once (`dma --duration`): they share each
/// direction's datapath as the IP's channels do.
pub const SHAPE_4: CardShape = CardShape {
    name: "sim-xdma4",
    device_name: "simulated card (XDMA with four memory-mapped channel pairs, BARs in host memory)",
    ..SHAPE
};

pub struct XdmaCard;

/// The four-channel card.
pub struct XdmaQuadCard;

impl CardSpec for XdmaQuadCard {
    fn name(&self) -> &'static str {
        SHAPE_4.name
    }
    fn info(&self) -> DeviceInfo {
        card_info(&SHAPE_4)
    }
    fn build(&self) -> Result<SimCard> {
        build(XdmaModelConfig { h2c_channels: 4, c2h_channels: 4, ..Default::default() }).map(|(card, _)| card)
    }
}

/// The stream card.
pub struct XdmaStreamCard;

impl CardSpec for XdmaStreamCard {
    fn name(&self) -> &'static str {
        SHAPE_ST.name
    }
    fn info(&self) -> DeviceInfo {
        card_info(&SHAPE_ST)
    }
    fn build(&self) -> Result<SimCard> {
        build(XdmaModelConfig { stream: true, ..Default::default() }).map(|(card, _)| card)
    }
}

impl CardSpec for XdmaCard {
    fn name(&self) -> &'static str {
        SHAPE.name
    }
    fn info(&self) -> DeviceInfo {
        card_info(&SHAPE)
    }
    fn build(&self) -> Result<SimCard> {
        build(XdmaModelConfig::default()).map(|(card, _)| card)
    }
}

/// The `sim` card with its DMA engine built from `cfg` (channel counts, card memory, alignment);
/// the model is returned too, for tests that look at card memory directly.
pub fn build(cfg: XdmaModelConfig) -> Result<(SimCard, Arc<XdmaModel>)> {
    build_on(cfg, super::super::host_map::HostMap::new())
}

/// The same card seeing the host memory `host` (a fresh card beside one already holding DMA
/// buffers: a trace's replay).
pub fn build_on(cfg: XdmaModelConfig, host: Arc<super::super::host_map::HostMap>) -> Result<(SimCard, Arc<XdmaModel>)> {
    build_with(cfg, host, ModelClock::real())
}

/// The card on `clock`'s time (a test's fake clock).
pub fn build_with(
    cfg: XdmaModelConfig,
    host: Arc<super::super::host_map::HostMap>,
    clock: ModelClock,
) -> Result<(SimCard, Arc<XdmaModel>)> {
    let model = Arc::new(XdmaModel::with_clock(cfg, Arc::clone(&host), clock)?);
    let size = |i: u8| SHAPE.bars.iter().find(|b| b.0 == i).map_or(0, |b| b.1 as usize);
    let bars = vec![
        (0, SimBar::Memory(Arc::new(Pages::shared("BAR0", size(0))?))),
        (2, SimBar::Memory(Arc::new(Pages::shared("BAR2", size(2))?))),
        (SIM_DMA_BAR, SimBar::Registers(model.clone())),
    ];
    Ok((SimCard { bars, host, irq: Some(Arc::clone(model.irq())) }, model))
}
