//! XDMA in the engine registry: detect by identifiers and the channel registers, the register BAR,
//! and open the memory-mapped driver or, for an AXI4-Stream channel pair, the stream one.

use super::{find_dma_bar, Interface};
use super::{probe, stream, XdmaEngine, XdmaOptions, DEFAULT_CARD_SIZE, XILINX_VENDOR};
use crate::access::{DeviceAccess, IoMode, Mapping};
use crate::dma::engines::{Detected, EngineDriver, EngineOptions, Opened};
use crate::dma::{Direction, DmaAllocator};
use crate::pci::DeviceInfo;
use crate::{Error, Result};

/// The interface of channel `ch` in `dir` as detect found it (its details are an `XdmaInfo`).
fn found_interface(found: &Detected, dir: Direction, ch: u8) -> Option<Interface> {
    let list = found.details.get(if dir == Direction::H2c { "h2c" } else { "c2h" })?.as_array()?;
    let c = list.iter().find(|c| c.get("index").and_then(|i| i.as_u64()) == Some(u64::from(ch)))?;
    Some(if c.get("interface")?.as_str()? == "stream" { Interface::Stream } else { Interface::MemoryMapped })
}

/// XDMA in the engine registry.
pub struct XdmaDriver;

impl EngineDriver for XdmaDriver {
    fn name(&self) -> &'static str {
        "xdma"
    }

    fn about(&self) -> &'static str {
        "Xilinx/AMD DMA/Bridge Subsystem (PG195), SGDMA channels, memory-mapped or AXI4-Stream, completed by polling or interrupt"
    }

    fn detect(&self, info: &DeviceInfo, dev: &dyn DeviceAccess) -> Result<Option<Detected>> {
        if !(info.simulated || info.vendor_id == XILINX_VENDOR) {
            return Ok(None);
        }
        let Some(bar) = find_dma_bar(dev, &crate::dma::engines::probe_bar::memory_bars(info))? else { return Ok(None) };
        let simulated = info.simulated;
        crate::dma::engines::probe_bar::detected(self.name(), dev, bar, |b| probe(b).map(|i| i.with_far_end(simulated)))
            .map(Some)
    }

    fn open(
        &self,
        found: &Detected,
        info: &crate::pci::DeviceInfo,
        dev: &dyn DeviceAccess,
        alloc: &dyn DmaAllocator,
        opts: &EngineOptions,
    ) -> Result<Opened> {
        let bar = found.register_bars[0];
        let channel = opts.channel.unwrap_or(0);
        // The INTx pin, for interrupt mode's vector fields (libxdma.c irq_legacy_setup).
        let mut pin = [0u8];
        dev.config_read(crate::pci::intr::INTERRUPT_PIN as u64, &mut pin)?;
        let stream = |dir| found_interface(found, dir, channel) == Some(Interface::Stream);
        if stream(Direction::H2c) || stream(Direction::C2h) {
            if opts.card_addr.is_some() {
                return Err(Error::usage(format!(
                    "XDMA channel {channel} is AXI4-Stream: a stream has no card address; drop --card-addr"
                )));
            }
            let window = opts.card_size.unwrap_or(DEFAULT_CARD_SIZE);
            let mut engine =
                stream::XdmaStreamEngine::new(dev.open_bar(bar, Mapping::Uc, IoMode::Mmap)?, alloc, channel, window)?;
            engine.set_intx_pin(pin[0]);
            return Ok(Opened { engine: Box::new(engine), card_offset: 0 });
        }
        let o = XdmaOptions {
            channel: opts.channel.unwrap_or(0),
            card_addr: opts.card_addr.unwrap_or(0),
            card_size: opts.card_size.unwrap_or(DEFAULT_CARD_SIZE),
        };
        let mut engine = XdmaEngine::new(dev.open_bar(bar, Mapping::Uc, IoMode::Mmap)?, alloc, o)?;
        engine.set_user_clock(info.simulated.then_some(crate::sim::xdma::perf::CLOCK_HZ));
        engine.set_intx_pin(pin[0]);
        Ok(Opened { engine: Box::new(engine), card_offset: 0 })
    }
}
