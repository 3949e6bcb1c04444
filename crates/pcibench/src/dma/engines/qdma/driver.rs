//! QDMA's entry in the engine registry: detection (Xilinx devices and simulated cards only,
//! then the config BAR by its identifier), the options it takes, and opening the driver.

use super::super::{Detected, EngineDriver, EngineOptions, Opened};
use super::probe::{find_config_bar, probe, XILINX_VENDOR};
use super::st::Mode;
use super::{QdmaEngine, QdmaOptions, DEFAULT_CARD_SIZE};
use crate::access::{DeviceAccess, IoMode, Mapping};
use crate::dma::DmaAllocator;
use crate::pci::DeviceInfo;
use crate::{Error, Result};

/// QDMA in the engine registry.
pub struct QdmaDriver;

impl EngineDriver for QdmaDriver {
    fn name(&self) -> &'static str {
        "qdma"
    }

    fn about(&self) -> &'static str {
        "AMD/Xilinx QDMA (PG302), memory-mapped and stream queues, completed by polling or interrupt (direct or aggregated)"
    }

    fn check_options(&self, opts: &EngineOptions) -> Result<()> {
        if opts.channel.is_some() {
            return Err(Error::usage(
                "--channel does not apply to qdma: it spreads transfers over queues (--queues N)",
            ));
        }
        if opts.queues == Some(0) {
            return Err(Error::usage("--queues needs at least 1 queue"));
        }
        Ok(())
    }

    fn detect(&self, info: &DeviceInfo, dev: &dyn DeviceAccess) -> Result<Option<Detected>> {
        if !(info.simulated || info.vendor_id == XILINX_VENDOR) {
            return Ok(None);
        }
        let Some(bar) = find_config_bar(dev, &super::super::probe_bar::memory_bars(info))? else { return Ok(None) };
        let mut found = super::super::probe_bar::detected(self.name(), dev, bar, probe)?;
        let mdma = &found.details;
        let on = |k: &str| mdma.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
        if !on("mm_h2c") && !on("mm_c2h") && (on("st_h2c") || on("st_c2h")) {
            let (known, line) = if super::st::far_end(info, None) {
                (
                    true,
                    format!(
                        "the vendor's QDMA example design in the user BAR (C2H traffic generator, H2C data checker): \
                         `dma` streams h2c, c2h and both at once over stream queues, every packet's data and length \
                         verified (C2H packets of at most {} bytes)",
                        super::st::MAX_PACKET
                    ),
                )
            } else {
                (false, super::st::no_far_end())
            };
            found.summary = format!("{}\n  far end: {line}", found.summary.trim_end());
            // The example design's registers are registers: PIO must not fill them with patterns.
            let user = found.details.get("user_bar").and_then(|v| v.as_u64());
            if let Some(b) = user.filter(|_| known) {
                found.register_bars.push(b as u8);
            }
            if let Some(map) = found.details.as_object_mut() {
                map.insert("far_end".into(), serde_json::json!({ "example_design": known, "about": line }));
            }
        }
        Ok(Some(found))
    }

    fn open(
        &self,
        found: &Detected,
        info: &crate::pci::DeviceInfo,
        dev: &dyn DeviceAccess,
        alloc: &dyn DmaAllocator,
        opts: &EngineOptions,
    ) -> Result<Opened> {
        let bar = dev.open_bar(found.register_bars[0], Mapping::Uc, IoMode::Mmap)?;
        let o = QdmaOptions {
            queues: opts.queues.unwrap_or(1),
            ring_size: opts.ring_size,
            card_addr: opts.card_addr.unwrap_or(0),
            card_size: opts.card_size.unwrap_or(DEFAULT_CARD_SIZE),
            simulated: info.simulated,
            intr: opts.qdma_intr.unwrap_or_default(),
            trigger: opts.cmpt_trigger.unwrap_or_default(),
            ..Default::default()
        };
        let probed = super::probe::probe(&*bar)?;
        let (has_mm, has_st) = (probed.mm_h2c || probed.mm_c2h, probed.st_h2c || probed.st_c2h);
        // Where the card has both kinds of engine, MM unless `--mode st` asks (issue 50 item 12).
        let mode = match opts.qdma_mode {
            Some(Mode::Mm) if !has_mm => {
                return Err(Error::usage(
                    "--mode mm: this QDMA has no memory-mapped engine: drop --mode or use --mode st",
                ))
            }
            Some(Mode::St) if !has_st => {
                return Err(Error::usage("--mode st: this QDMA has no stream engine: drop --mode or use --mode mm"))
            }
            Some(m) => m,
            None if has_mm || !has_st => Mode::Mm,
            None => Mode::St,
        };
        let engine = match mode {
            Mode::Mm => {
                if opts.design.is_some() {
                    return Err(Error::usage(
                        "--design qdma-example names the far end of stream queues; memory-mapped queues move card memory: add --mode st or drop --design",
                    ));
                }
                if opts.cmpt_trigger.is_some() {
                    // MM queues report by status writeback; there is no completion ring to moderate.
                    return Err(Error::usage(
                        "--cmpt-trigger applies to stream queues' completion rings; this run drives memory-mapped queues, which have none: drop it (or add --mode st where the card has stream engines)",
                    ));
                }
                QdmaEngine::new(bar, alloc, o)?
            }
            Mode::St => {
                if !super::st::far_end(info, opts.design) {
                    return Err(Error::Unsupported(super::st::no_far_end()));
                }
                if opts.card_addr.is_some() {
                    // Accepted and not applied would measure something else than asked.
                    return Err(Error::usage(
                        "QDMA stream queues have no card address (the example design makes and checks the data): drop --card-addr",
                    ));
                }
                let user = probed.user_bar.ok_or_else(|| {
                    Error::Unsupported(
                        "the QDMA example design lives in the user BAR, and this function names none (BARLITE_EXT): \
                         its stream queues have no far end pcibench can reach"
                            .into(),
                    )
                })?;
                // `--design qdma-example` is the consent to write those registers.
                let user = dev.open_bar(user, Mapping::Uc, IoMode::Mmap)?;
                QdmaEngine::new_stream(bar, user, alloc, o)?
            }
        };
        Ok(Opened { engine: Box::new(engine), card_offset: 0 })
    }
}
