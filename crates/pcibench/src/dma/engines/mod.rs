//! Drivers for card DMA engines, one folder per engine behind `dma::Engine` (`edu/`, `xdma/`,
//! `qdma/`, `umem/`), and the registry that finds them on a device (`detect`), names their
//! register BARs (which PIO must never fill with test patterns) and opens them. A new engine is
//! one folder implementing `EngineDriver` and one line in `DRIVERS` (`toy/`, compiled for tests
//! only, is the whole change for one); nothing outside this module knows which engines exist.

pub mod edu;
pub(crate) mod freshest;
pub mod probe_bar;
#[cfg(test)]
mod progress_tests;
pub mod qdma;
#[cfg(test)]
mod stepped_tests;
#[cfg(test)]
mod time_tests;
#[cfg(test)]
mod toy;
#[cfg(test)]
mod trace_tests;
pub mod umem;
pub mod xdma;

use super::{DmaAllocator, Engine};
use crate::access::DeviceAccess;
use crate::pci::DeviceInfo;
use crate::{Error, Result};
use serde::Serialize;

/// Every engine pcibench drives.
pub static DRIVERS: &[&dyn EngineDriver] = &[
    &edu::EduDriver,
    &xdma::XdmaDriver,
    &qdma::driver::QdmaDriver,
    &umem::UmemDriver,
    #[cfg(test)]
    &toy::ToyDriver,
];

/// Engine settings from the command line; `None` means the engine's default. An engine refuses
/// a setting it has no use for (`EngineDriver::check_options`) rather than ignoring it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Card address of the engine's memory window (`--card-addr`).
    pub card_addr: Option<u64>,
    /// Bytes of card memory in the window (`--card-size`).
    pub card_size: Option<u64>,
    /// Channel (`--channel`).
    pub channel: Option<u8>,
    /// Queues to open (`--queues`, the largest count asked for).
    pub queues: Option<u16>,
    /// Descriptors per ring (`--ring-size`), for engines with descriptor rings.
    pub ring_size: Option<u32>,
    /// QDMA's interrupt mode (`--qdma-intr`).
    pub qdma_intr: Option<qdma::QdmaIntr>,
    /// QDMA's engines to drive where it has both (`--mode mm|st`).
    pub qdma_mode: Option<qdma::st::Mode>,
    /// The far end the user asserts behind stream queues (`--design qdma-example`).
    pub design: Option<qdma::st::Design>,
    /// When QDMA stream queues' completion rings report (`--cmpt-trigger`).
    pub cmpt_trigger: Option<qdma::CmptTrigger>,
}

impl EngineOptions {
    /// Refuse the queue and ring settings on an engine that has neither (one line each).
    pub fn refuse_queues(&self, engine: &str) -> Result<()> {
        if self.queues.is_some_and(|q| q > 1) {
            return Err(Error::usage(format!(
                "--queues applies to engines with queues (qdma); {engine} runs one transfer at a time: drop --queues"
            )));
        }
        if self.ring_size.is_some() {
            return Err(Error::usage(format!(
                "--ring-size applies to engines with descriptor rings (qdma), not {engine}: drop it"
            )));
        }
        if self.qdma_intr.is_some() {
            return Err(Error::usage(format!("--qdma-intr applies to the qdma engine, not {engine}: drop it")));
        }
        if self.qdma_mode.is_some() {
            return Err(Error::usage(format!(
                "--mode applies to the qdma engine (MM or stream queues), not {engine}: drop it"
            )));
        }
        if self.design.is_some() {
            return Err(Error::usage(format!(
                "--design qdma-example names the far end of QDMA stream queues, not {engine}'s: drop it"
            )));
        }
        if self.cmpt_trigger.is_some() {
            return Err(Error::usage(format!(
                "--cmpt-trigger applies to QDMA stream queues' completion rings; {engine} has none: drop it"
            )));
        }
        Ok(())
    }
}

/// An engine found on a device.
#[derive(Debug, Clone, Serialize)]
pub struct Detected {
    pub engine: &'static str,
    /// BARs holding its registers.
    pub register_bars: Vec<u8>,
    /// What `pcibench info` shows about it (lines; the first names the engine and its BAR).
    pub summary: String,
    /// The same, as data for JSON.
    pub details: serde_json::Value,
}

/// An engine opened on a device.
pub struct Opened {
    pub engine: Box<dyn Engine>,
    /// Where `Transfer::card_addr` 0 lies in the engine's card window (an offset into it).
    pub card_offset: u64,
}

/// One kind of DMA engine.
pub trait EngineDriver: Sync {
    /// The `--engine` name.
    fn name(&self) -> &'static str;
    /// One line for help and messages.
    fn about(&self) -> &'static str;
    /// Address bits the device drives unless told otherwise (`--dma-bits`).
    fn default_dma_bits(&self) -> u32 {
        64
    }
    /// Settings this engine has no use for are refused with the reason (by default the queue
    /// and ring settings, which only engines with queues use).
    fn check_options(&self, opts: &EngineOptions) -> Result<()> {
        opts.refuse_queues(self.name())
    }
    /// The access widths its register BAR decodes (XDMA and QDMA: 32-bit only, PG195's and
    /// PG302's AXI4-Lite register spaces); PIO reads that BAR at these widths only.
    fn register_widths(&self) -> &'static [crate::mmio::Width] {
        &[crate::mmio::Width::B32]
    }
    /// Look for the engine on `dev`. Reads registers only on devices where that is harmless
    /// (known vendor or device ids first); Ok(None) when it is not there.
    fn detect(&self, info: &DeviceInfo, dev: &dyn DeviceAccess) -> Result<Option<Detected>>;
    /// Open the engine `detect` found on the device `info` describes, with its descriptor memory
    /// from `alloc`. What it needs of the device comes typed from `found` and `info`.
    fn open(
        &self,
        found: &Detected,
        info: &DeviceInfo,
        dev: &dyn DeviceAccess,
        alloc: &dyn DmaAllocator,
        opts: &EngineOptions,
    ) -> Result<Opened>;
}

pub fn by_name(name: &str) -> Option<&'static dyn EngineDriver> {
    DRIVERS.iter().copied().find(|d| d.name() == name)
}

/// The engine names, for messages: "edu, xdma".
pub fn names() -> String {
    DRIVERS.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

/// Every engine found on the device. An engine whose probe fails (a BAR that cannot be read)
/// is reported as that error, so callers can show why.
pub fn detect(info: &DeviceInfo, dev: &dyn DeviceAccess) -> Vec<Result<Detected>> {
    DRIVERS.iter().filter_map(|d| d.detect(info, dev).transpose()).collect()
}

/// BARs holding any engine's registers, which PIO must not fill with patterns.
pub fn register_bars(info: &DeviceInfo, dev: &dyn DeviceAccess) -> Vec<u8> {
    let mut v: Vec<u8> = register_blocks(info, dev).into_iter().map(|r| r.bar).collect();
    v.dedup();
    v
}

/// A BAR holding an engine's registers: PIO reads it only, at the widths it decodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBar {
    pub bar: u8,
    pub engine: &'static str,
    pub widths: &'static [crate::mmio::Width],
}

impl RegisterBar {
    /// `32-bit`, `8, 16 or 32-bit`.
    pub fn widths_words(&self) -> String {
        let bits: Vec<String> = self.widths.iter().map(|w| (w.bytes() * 8).to_string()).collect();
        match bits.split_last() {
            Some((last, [])) => format!("{last}-bit"),
            Some((last, rest)) => format!("{} or {last}-bit", rest.join(", ")),
            None => "no".into(),
        }
    }
}

/// Every engine's register BARs found on the device, by BAR.
pub fn register_blocks(info: &DeviceInfo, dev: &dyn DeviceAccess) -> Vec<RegisterBar> {
    let mut v: Vec<RegisterBar> = detect(info, dev)
        .into_iter()
        .flatten()
        .flat_map(|d| {
            let widths = by_name(d.engine).map_or(&[crate::mmio::Width::B32][..], |e| e.register_widths());
            d.register_bars.into_iter().map(move |bar| RegisterBar { bar, engine: d.engine, widths })
        })
        .collect();
    v.sort_by_key(|r| r.bar);
    v
}

/// The engine to drive: the one named (`sim` meaning a simulated card's own engine), or the
/// only one found when none is named. The result is the engine's driver and what detect found.
pub fn resolve(
    name: Option<&str>,
    info: &DeviceInfo,
    dev: &dyn DeviceAccess,
) -> Result<(&'static dyn EngineDriver, Detected)> {
    let found = detect(info, dev);
    let first_err = found.iter().find_map(|r| r.as_ref().err().map(|e| e.to_string()));
    let found: Vec<Detected> = found.into_iter().flatten().collect();
    let known = {
        let list: Vec<&str> = found.iter().map(|d| d.engine).collect();
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    };
    let wanted = match name {
        Some("sim") if !info.simulated => {
            return Err(Error::usage(format!(
                "--engine sim drives a simulated card's engine: use it with `sim`, or name the engine of {} ({})",
                info.address,
                names()
            )))
        }
        Some("sim") | None => match found.as_slice() {
            [one] => one.engine,
            [] => {
                let why = first_err.map(|e| format!(": {e}")).unwrap_or_default();
                return Err(Error::Unsupported(format!(
                    "no DMA engine pcibench drives ({}) was found on {} ({}){why}",
                    names(),
                    info.address,
                    info.ids()
                )));
            }
            _ => {
                return Err(Error::usage(format!(
                    "{} has several DMA engines ({}): choose one with --engine",
                    info.address, known
                )))
            }
        },
        Some(n) => n,
    };
    let driver = by_name(wanted)
        .ok_or_else(|| Error::usage(format!("unknown engine '{wanted}': pcibench drives {}", names())))?;
    match found.into_iter().find(|d| d.engine == driver.name()) {
        Some(d) => Ok((driver, d)),
        None => {
            let why = first_err.map(|e| format!(" ({e})")).unwrap_or_default();
            Err(Error::usage(format!(
                "{} ({}) has no {} engine{why}: engines found there: {}; choose the engine that matches the card",
                info.address,
                info.ids(),
                driver.name(),
                known
            )))
        }
    }
}

/// What ends a hung engine's error: reset the card, with the command that does it where the BAR
/// knows its device (`pcibench reset`: the kernel's reset, or a bus reset of its port).
pub(crate) fn reset_the_card(bar: &dyn crate::access::BarRegion) -> String {
    match bar.device() {
        Some(a) => format!("reset the card (sudo pcibench reset {a} --allow-reset, or reload its FPGA image)"),
        None => "reset the card (reload its FPGA image)".to_string(),
    }
}

/// `--card-addr` + the transfer's card offset, and its end, without wrapping past 2^64.
pub(crate) fn card_address(base: u64, t: &crate::dma::Transfer) -> Result<u64> {
    base.checked_add(t.card_addr).filter(|a| a.checked_add(t.len).is_some()).ok_or_else(|| {
        Error::usage(format!(
            "card address {base:#x} + {:#x} + {} bytes passes the end of the 64-bit address space: give a smaller --card-addr or --size",
            t.card_addr, t.len
        ))
    })
}

#[cfg(test)]
mod tests {
    /// Issue 56: a hung engine's error names the command that resets its card, where the BAR knows it.
    #[test]
    fn a_hung_engine_names_the_reset_of_its_card() {
        use crate::access::{mapped::MappedBar, Mapping, Via};
        let m = crate::os::mmap::Mmap::anonymous(crate::os::mmap::page_size(), false).unwrap();
        let bar = MappedBar::new(m, 0, 4096, Mapping::Uc, Via::Sysfs);
        assert_eq!(super::reset_the_card(&bar), "reset the card (reload its FPGA image)");
        let bar = bar.guarded(&"0000:03:00.0".parse().unwrap(), None);
        assert_eq!(
            super::reset_the_card(&bar),
            "reset the card (sudo pcibench reset 0000:03:00.0 --allow-reset, or reload its FPGA image)"
        );
    }

    /// The drivers own their default windows; the simulated cards are built with as much card
    /// memory, so `dma sim` and `dma sim-qdma` cover the whole card by default.
    #[test]
    fn the_simulated_cards_match_the_drivers_default_windows() {
        assert_eq!(super::xdma::DEFAULT_CARD_SIZE, crate::sim::xdma::model::CARD_MEMORY_SIZE);
        assert_eq!(super::qdma::DEFAULT_CARD_SIZE, crate::sim::qdma::model::CARD_MEMORY_SIZE);
    }
}
