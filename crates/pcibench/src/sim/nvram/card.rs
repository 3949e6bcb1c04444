//! `sim-nvram`, the third simulated card: shaped like seed 001's Micro Memory MM-5425CN
//! battery-backed NVRAM card (1332:5425, subsystem 1332:5453, 1 GiB): BAR0 the CSR block with a
//! register model of the card's DMA engine (`model.rs`), BAR2 the memory window in host
//! memory (plain memory here: the model does not page it through WINDOWMAP_WINNUM). The real
//! card is PCI 64/66; the sim reports the Gen1 x1 link of the fixture modelled on seed 001.

use super::super::mem::Pages;
use super::super::{card_info, CardShape, CardSpec, SimBar, SimCard};
use super::model::{NvramModel, NvramModelConfig, CSR_BAR_LEN};
use crate::pci::DeviceInfo;
use crate::Result;
use std::sync::Arc;

/// The BAR holding the CSR registers (fpga_sio's NVRAM_CSR_BAR_INDEX).
pub const NVRAM_CSR_BAR: u8 = 0;
/// The memory window BAR (fpga_sio's NVRAM_MEMORY_WINDOW_BAR_INDEX; 16 MiB, seed 001's PIO size).
pub const NVRAM_WINDOW_BAR: u8 = 2;

pub const SHAPE: CardShape = CardShape {
    name: "sim-nvram",
    vendor: 0x1332,
    device: 0x5425,
    device_name: "simulated card (MM-5425CN NVRAM shape: CSR BAR0, memory window BAR2 in host memory)",
    subsystem: (0x1332, 0x5453),
    class: (0x058000, "Memory controller"),
    bars: &[(NVRAM_CSR_BAR, CSR_BAR_LEN), (NVRAM_WINDOW_BAR, 16 << 20)],
    link: (1, 1),
    mps: 128,
    mps_supported: 128,
    mrrs: 512,
    irq: Some(super::super::irq::Offers::LEGACY_INTX),
    datapath: Some(super::state::DATAPATH),
};

pub struct NvramCard;

impl CardSpec for NvramCard {
    fn name(&self) -> &'static str {
        SHAPE.name
    }
    fn info(&self) -> DeviceInfo {
        card_info(&SHAPE)
    }
    fn build(&self) -> Result<SimCard> {
        build(NvramModelConfig::default()).map(|(card, _)| card)
    }
}

/// The `sim-nvram` card built from `cfg`; the model is returned too, for tests that inject
/// faults and look at card memory directly.
pub fn build(cfg: NvramModelConfig) -> Result<(SimCard, Arc<NvramModel>)> {
    build_on(cfg, super::super::host_map::HostMap::new())
}

/// The same card seeing the host memory `host` (a fresh card beside one already holding DMA
/// buffers: a trace's replay).
pub fn build_on(
    cfg: NvramModelConfig,
    host: Arc<super::super::host_map::HostMap>,
) -> Result<(SimCard, Arc<NvramModel>)> {
    build_with(cfg, host, super::super::datapath::ModelClock::real())
}

/// The card on `clock`'s time (a test's fake clock).
pub fn build_with(
    cfg: NvramModelConfig,
    host: Arc<super::super::host_map::HostMap>,
    clock: super::super::datapath::ModelClock,
) -> Result<(SimCard, Arc<NvramModel>)> {
    let model = Arc::new(NvramModel::with_clock(cfg, Arc::clone(&host), clock)?);
    let window = SHAPE.bars.iter().find(|b| b.0 == NVRAM_WINDOW_BAR).map_or(0, |b| b.1 as usize);
    let bars = vec![
        (NVRAM_CSR_BAR, SimBar::Registers(model.clone())),
        (NVRAM_WINDOW_BAR, SimBar::Memory(Arc::new(Pages::shared("BAR2", window)?))),
    ];
    Ok((SimCard { bars, host, irq: Some(Arc::clone(model.irq())) }, model))
}
