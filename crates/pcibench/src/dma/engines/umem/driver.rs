//! umem's entry in the engine registry: detection (Micro Memory's vendor id and a family device
//! id, then status registers read a byte at a time), the options it takes, and opening the driver.

use super::regs::{expected_magic, probe, CSR_BAR, VENDOR};
use super::{UmemEngine, UmemOptions};
use crate::access::{DeviceAccess, IoMode, Mapping};
use crate::dma::engines::{Detected, EngineDriver, EngineOptions, Opened};
use crate::dma::DmaAllocator;
use crate::pci::DeviceInfo;
use crate::{Error, Result};

/// The umem engine in the registry.
pub struct UmemDriver;

impl EngineDriver for UmemDriver {
    fn name(&self) -> &'static str {
        "umem"
    }

    fn about(&self) -> &'static str {
        "Micro Memory MM-5415/5425/6155 NVRAM cards (the old umem driver's DMA engine), chained descriptors, completed by polling or INTx"
    }

    /// The CSR block: 8, 16 and 32-bit accesses, as the simulated card's takes them (umem.c itself
    /// uses readb/readl and writeb/writel).
    fn register_widths(&self) -> &'static [crate::mmio::Width] {
        &[crate::mmio::Width::B8, crate::mmio::Width::B16, crate::mmio::Width::B32]
    }

    fn check_options(&self, opts: &EngineOptions) -> Result<()> {
        opts.refuse_queues("umem")?;
        if opts.channel.is_some() {
            return Err(Error::usage("--channel does not apply to the umem engine (one DMA engine per card): drop it"));
        }
        Ok(())
    }

    /// Micro Memory's vendor id and a family device id first; then byte reads of status
    /// registers only. A wrong magic byte is shown (and the engine refused at open), not hidden.
    /// umem.c warns that reading the battery register during host-to-card DMA can hang the card:
    /// `probe` reads it only while GO is clear (detect runs on a device pcibench itself opens,
    /// never during its own runs; VFIO lets one process in at a time).
    fn detect(&self, info: &DeviceInfo, dev: &dyn DeviceAccess) -> Result<Option<Detected>> {
        if info.vendor_id != VENDOR || expected_magic(info.device_id).is_none() {
            return Ok(None);
        }
        if !info.bar(CSR_BAR).is_some_and(|b| b.is_memory()) {
            return Ok(None);
        }
        let bar = dev.open_bar_read_only(CSR_BAR, Mapping::Uc, IoMode::Mmap)?;
        let u = probe(&*bar, info.device_id)?;
        let details = serde_json::to_value(&u).unwrap_or_default();
        Ok(Some(Detected { engine: self.name(), register_bars: vec![CSR_BAR], summary: u.to_string(), details }))
    }

    fn open(
        &self,
        found: &Detected,
        info: &DeviceInfo,
        dev: &dyn DeviceAccess,
        alloc: &dyn DmaAllocator,
        opts: &EngineOptions,
    ) -> Result<Opened> {
        // The device id says which card of the family it is (umem.c's magic and flags).
        let device = info.device_id;
        debug_assert_eq!(found.register_bars, [CSR_BAR]);
        let o = UmemOptions { card_addr: opts.card_addr.unwrap_or(0), card_size: opts.card_size };
        let bar = dev.open_bar(CSR_BAR, Mapping::Uc, IoMode::Mmap)?;
        let engine = UmemEngine::new(bar, dev.config_port()?, device, alloc, o)?;
        Ok(Opened { engine: Box::new(engine), card_offset: 0 })
    }
}
