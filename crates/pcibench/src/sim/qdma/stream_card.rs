//! `sim-qdma-st`: the QDMA card with stream queues and the vendor's example design behind them
//! (`stream.rs`): the same QDMA model as `sim-qdma` (config BAR0) with no MM engine, and BAR2,
//! the user BAR, holding the example design's C2H traffic generator and H2C checker registers.

use super::super::datapath::ModelClock;
use super::super::{card_info, CardShape, CardSpec, RegisterModel, SimBar, SimCard};
use super::card::{QDMA_CONFIG_BAR, QDMA_USER_BAR};
use super::model::{QdmaModel, QdmaModelConfig, QDMA_BAR_LEN};
use crate::mmio::Width;
use crate::pci::DeviceInfo;
use crate::{Error, Result};
use std::sync::Arc;

/// The user BAR's size: the example design decodes its registers in the first 4 KiB.
const USER_BAR_LEN: u64 = 4 << 10;

/// `sim-qdma`'s identity, link and engine; its own name and user BAR.
pub const SHAPE: CardShape = CardShape {
    name: "sim-qdma-st",
    device_name: "simulated card (QDMA stream queues with the vendor's example design in user BAR2)",
    bars: &[(QDMA_CONFIG_BAR, QDMA_BAR_LEN), (QDMA_USER_BAR, USER_BAR_LEN)],
    ..super::card::SHAPE
};

pub struct QdmaStreamCard;

impl CardSpec for QdmaStreamCard {
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

/// The stream card with its engine built from `cfg` (its MM engines off, stream on).
pub fn build(cfg: QdmaModelConfig) -> Result<(SimCard, Arc<QdmaModel>)> {
    build_with(cfg, ModelClock::real())
}

/// The same on `clock`'s time (a test's fake clock).
pub fn build_with(cfg: QdmaModelConfig, clock: ModelClock) -> Result<(SimCard, Arc<QdmaModel>)> {
    let cfg = QdmaModelConfig { mm_h2c: false, mm_c2h: false, stream: true, ..cfg };
    // The model's interrupts as on sim-qdma, the example design's registers in the user BAR.
    super::card::assemble(cfg, super::super::host_map::HostMap::new(), clock, |m| {
        Ok(SimBar::Registers(Arc::new(ExampleBar(m.clone()))))
    })
}

/// The example design's registers, 32-bit.
struct ExampleBar(Arc<QdmaModel>);

impl RegisterModel for ExampleBar {
    fn size(&self) -> u64 {
        USER_BAR_LEN
    }
    fn check_width(&self, index: u8, width: Width) -> Result<()> {
        if width == Width::B32 {
            return Ok(());
        }
        Err(Error::usage(format!(
            "BAR{index} of sim-qdma-st holds the example design's 32-bit registers: use --width 32"
        )))
    }
    fn read(&self, offset: u64, _width: Width) -> u64 {
        self.0.example_read(offset as u32) as u64
    }
    fn write(&self, offset: u64, _width: Width, value: u64) -> Result<()> {
        self.0.example_write(offset as u32, value as u32);
        Ok(())
    }
    fn set_bus_master(&self, on: bool) {
        let _ = on; // the config BAR's model holds Bus Master for the whole card
    }
}
