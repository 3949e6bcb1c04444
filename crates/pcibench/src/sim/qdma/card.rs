//! `sim-qdma`, the second simulated card: shaped like seed 004's Alveo U280 with a QDMA design
//! (10ee:903f, the vendor's QDMA PF id for a Gen3 x16 endpoint; Gen3 x16, MPS 256, MRRS 512):
//! the QDMA config BAR (BAR0, 256 KiB) with a register model of the engine driving 32 MiB of
//! card memory, and BAR2, the user (AXI-Lite) BAR, in host memory.

use super::super::datapath::ModelClock;
use super::super::mem::Pages;
use super::super::{card_info, CardShape, CardSpec, SimBar, SimCard};
use super::model::{QdmaModel, QdmaModelConfig, QDMA_BAR_LEN};
use crate::pci::DeviceInfo;
use crate::Result;
use std::sync::Arc;

/// The BAR holding the sim card's QDMA config registers.
pub const QDMA_CONFIG_BAR: u8 = 0;
/// The user BAR (AXI-Lite master in QDMA designs): plain memory here.
pub const QDMA_USER_BAR: u8 = 2;

pub const SHAPE: CardShape = CardShape {
    name: "sim-qdma",
    vendor: 0x10ee,
    device: 0x903f,
    device_name: "simulated card (QDMA shape: config BAR0, user BAR2 in host memory)",
    subsystem: (0x10ee, 0x0007),
    class: (0x058000, "Memory controller"),
    bars: &[(QDMA_CONFIG_BAR, QDMA_BAR_LEN), (QDMA_USER_BAR, 256 << 10)],
    link: (3, 16),
    mps: 256,
    mps_supported: 512,
    mrrs: 512,
    irq: Some(super::state::IRQ),
    datapath: Some(super::state::DATAPATH),
};

pub struct QdmaCard;

impl CardSpec for QdmaCard {
    fn name(&self) -> &'static str {
        SHAPE.name
    }
    fn info(&self) -> DeviceInfo {
        card_info(&SHAPE)
    }
    fn build(&self) -> Result<SimCard> {
        build(QdmaModelConfig::default()).map(|(card, _)| card)
    }
}

/// The `sim-qdma` card with its engine built from `cfg`; the model is returned too, for tests
/// that look at card memory and contexts directly.
pub fn build(cfg: QdmaModelConfig) -> Result<(SimCard, Arc<QdmaModel>)> {
    build_on(cfg, super::super::host_map::HostMap::new())
}

/// The same card seeing the host memory `host` (a fresh card beside one already holding DMA
/// buffers: a trace's replay).
pub fn build_on(cfg: QdmaModelConfig, host: Arc<super::super::host_map::HostMap>) -> Result<(SimCard, Arc<QdmaModel>)> {
    build_with(cfg, host, ModelClock::real())
}

/// The card on `clock`'s time (a test's fake clock).
pub fn build_with(
    cfg: QdmaModelConfig,
    host: Arc<super::super::host_map::HostMap>,
    clock: ModelClock,
) -> Result<(SimCard, Arc<QdmaModel>)> {
    let user = SHAPE.bars.iter().find(|b| b.0 == QDMA_USER_BAR).map_or(0, |b| b.1 as usize);
    assemble(cfg, host, clock, |_| Ok(SimBar::Memory(Arc::new(Pages::shared("BAR2", user)?))))
}

/// A QDMA card of either shape: the model on `host` behind the config BAR, `user` (given the
/// model) as the user BAR, and the model's MSI-X vectors as the card's interrupts.
pub(super) fn assemble(
    cfg: QdmaModelConfig,
    host: Arc<super::super::host_map::HostMap>,
    clock: ModelClock,
    user: impl FnOnce(&Arc<QdmaModel>) -> Result<SimBar>,
) -> Result<(SimCard, Arc<QdmaModel>)> {
    let model = Arc::new(QdmaModel::with_clock(cfg, Arc::clone(&host), clock)?);
    let bars = vec![(QDMA_CONFIG_BAR, SimBar::Registers(model.clone())), (QDMA_USER_BAR, user(&model)?)];
    Ok((SimCard { bars, host, irq: Some(Arc::clone(model.irq())) }, model))
}
