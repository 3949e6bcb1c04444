//! Finding a QDMA engine (PG302): the config BAR by its identifier (register 0x0 bits [31:16]
//! read 0x1fd3, `qdma_is_config_bar`), and what its capability registers say (engines present,
//! queues, version, ring sizes) for `pcibench info` and the driver. Reading these registers has
//! no side effects.

use super::errors::ErrorRegs;
use super::ip::IpKind;
use super::perf::{self, PerfReg};
use super::regs::*;
use crate::access::{BarRegion, DeviceAccess};
use crate::dma::Direction;
use crate::{Error, Result};
use serde::Serialize;
use std::fmt;

/// Xilinx's PCI vendor id: QDMA is looked for only on its devices (and simulated cards).
pub const XILINX_VENDOR: u16 = 0x10ee;

/// Whether `bar` is a QDMA config BAR: long enough for the PF doorbells, identifier 0x1fd3.
pub fn is_config_bar(bar: &dyn BarRegion) -> Result<bool> {
    if bar.len() < MIN_CONFIG_BAR_LEN {
        return Ok(false);
    }
    Ok(rd(bar, R_ID)? >> ID_SHIFT == ID_MAGIC)
}

/// The first of `bars` that is a QDMA config BAR (see `probe_bar::find`).
pub fn find_config_bar(dev: &dyn DeviceAccess, bars: &[u8]) -> Result<Option<u8>> {
    super::super::probe_bar::find(dev, bars, is_config_bar)
}

/// What `probe` learns from a QDMA config BAR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QdmaInfo {
    pub bar: u8,
    pub ip: IpKind,
    /// The Vivado release the version register names.
    pub release: &'static str,
    /// GLBL2_MISC_CAP (0x134) as read.
    pub misc_cap: u32,
    pub mm_h2c: bool,
    pub mm_c2h: bool,
    pub st_h2c: bool,
    pub st_c2h: bool,
    /// Queues in the IP (GLBL2_CHANNEL_QDMA_CAP [11:0]; 0xfff is 4096 on CPM5).
    pub max_queues: u32,
    /// This PCI function's number as the IP sees it (GLBL2_CHANNEL_FUNC_RET).
    pub func: u8,
    /// The function's user (AXI-Lite master) BAR, if the IP names one.
    pub user_bar: Option<u8>,
    /// The global ring-size table (0x204..0x240): entries, each the descriptors plus one slot
    /// for the status writeback.
    pub ring_entries: Vec<u32>,
    /// MM engine run bits (H2C, C2H).
    pub mm_running: [bool; 2],
    /// Error bits already set, in words.
    pub pending_errors: Option<String>,
    /// The performance settings the vendor writes at init for this IP (EQDMA 5.0, CPM5; none
    /// elsewhere), as found beside the vendor's values.
    pub perf: Vec<PerfReg>,
}

impl QdmaInfo {
    pub fn has(&self, dir: Direction) -> bool {
        match dir {
            Direction::H2c => self.mm_h2c,
            Direction::C2h => self.mm_c2h,
        }
    }

    /// Descriptors per ring for each usable table entry (entry − 1), in table order.
    pub fn ring_sizes(&self) -> Vec<u32> {
        self.ring_entries.iter().filter(|e| **e >= 3).map(|e| e - 1).collect()
    }

    /// Whether the IP has the stream engine of `dir`.
    pub fn has_st(&self, dir: Direction) -> bool {
        match dir {
            Direction::H2c => self.st_h2c,
            Direction::C2h => self.st_c2h,
        }
    }

    pub fn mm_present(&self) -> [bool; 2] {
        [self.mm_h2c, self.mm_c2h]
    }
}

impl fmt::Display for QdmaInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "QDMA (AMD/Xilinx queue DMA, PG302) config registers in BAR{}", self.bar)?;
        let rtl = if (self.misc_cap >> MISC_RTL_SHIFT) & MISC_FIELD == 1 { "RTL patch" } else { "RTL base" };
        let user = self.user_bar.map_or("none named".into(), |b| format!("BAR{b}"));
        writeln!(
            f,
            "  {}, Vivado {}, {rtl}; PCI function {}; user BAR {user}",
            self.ip.name(),
            self.release,
            self.func
        )?;
        let eng = |on: bool, name: &str| on.then(|| name.to_string());
        let mm: Vec<String> = [eng(self.mm_h2c, "MM H2C"), eng(self.mm_c2h, "MM C2H")].into_iter().flatten().collect();
        let st: Vec<String> = [eng(self.st_h2c, "ST H2C"), eng(self.st_c2h, "ST C2H")].into_iter().flatten().collect();
        writeln!(
            f,
            "  engines: {}{}",
            if mm.is_empty() {
                "no MM engine".into()
            } else if self.ip.refusal(self.misc_cap).is_some() {
                format!("{} (not driven: below)", mm.join(", "))
            } else {
                format!("{} (pcibench drives these)", mm.join(", "))
            },
            match (st.is_empty(), mm.is_empty()) {
                (true, _) => String::new(),
                (false, true) => format!("; {} (stream: see the far end)", st.join(", ")),
                (false, false) => format!("; {} (stream: not driven)", st.join(", ")),
            }
        )?;
        writeln!(f, "  queues: {} in the IP ({}-bit context ids)", self.max_queues, self.ip.qid_bits())?;
        // The vector each queue signals on with `--completion irq` (`irq.rs`: errors on vector 0,
        // the rings in the order the driver opens them over the data vectors from 1; `aggr.rs`:
        // one interrupt ring per function, its index the function number).
        let driven = if mm.is_empty() { [self.st_h2c, self.st_c2h] } else { [self.mm_h2c, self.mm_c2h] };
        let per = (driven[0] as u32 + driven[1] as u32).max(1);
        let vectors =
            if per == 2 { "queue q's H2C ring on vector 2q+1, its C2H ring on 2q+2" } else { "queue q on vector q+1" };
        if mm.is_empty() && !st.is_empty() {
            writeln!(
                f,
                "  interrupts (--completion irq): MSI-X, errors on vector 0 (GLBL_ERR_INT); H2C stream queues by their \
                 status writeback, C2H ones by their completion rings; --qdma-intr direct (default): {vectors} \
                 (modulo the vectors routed); aggregated: every queue through interrupt ring {} on vector 1",
                self.func
            )?;
        } else {
            writeln!(
                f,
                "  interrupts (--completion irq): MSI-X, errors on vector 0 (GLBL_ERR_INT); --qdma-intr direct \
                 (default): {vectors} (modulo the vectors routed); aggregated: every queue through interrupt ring {} \
                 on vector 1",
                self.func
            )?;
        }
        let sizes = self.ring_sizes();
        if sizes.is_empty() {
            writeln!(
                f,
                "  ring sizes: table not programmed (pcibench loads the vendor's defaults when it opens queues)"
            )?;
        } else {
            let list: Vec<String> = sizes.iter().map(u32::to_string).collect();
            writeln!(f, "  ring sizes (descriptors): {}", list.join(", "))?;
        }
        let run = |on: bool| if on { "running" } else { "stopped" };
        writeln!(f, "  MM engines: h2c {}, c2h {}", run(self.mm_running[0]), run(self.mm_running[1]))?;
        let counters: Vec<&str> =
            [(self.mm_h2c, "h2c"), (self.mm_c2h, "c2h")].iter().filter_map(|(on, d)| on.then_some(*d)).collect();
        writeln!(
            f,
            "  MM monitor counters: {} (cycles and data beats at +0xC0 of each MM engine, as every variant's header \
             defines them)",
            if counters.is_empty() { "none (no MM engine)".into() } else { counters.join(", ") }
        )?;
        if self.perf.is_empty() {
            write!(f, "  performance settings: none (the vendor's init writes none for this IP)")?;
        } else {
            let regs: Vec<String> = self
                .perf
                .iter()
                .map(|p| {
                    let same = if p.found == p.vendor { " (the vendor's)" } else { "" };
                    format!("{} ({:#x}) {:#010x}{same}, vendor {:#010x}", p.name, p.offset, p.found, p.vendor)
                })
                .collect();
            write!(
                f,
                "  performance settings found (the vendor's init writes them; so does pcibench while it drives the \
                 queues): {}",
                regs.join("; ")
            )?;
        }
        if let Some(e) = &self.pending_errors {
            write!(f, "\n  pending errors: {e}")?;
        }
        if let Some(why) = self.ip.refusal(self.misc_cap) {
            write!(f, "\n  not driven: {why}")?;
        }
        Ok(())
    }
}

/// Read the identifier and capabilities of the QDMA behind `bar` (reads only).
pub fn probe(bar: &dyn BarRegion) -> Result<QdmaInfo> {
    let index = bar.index();
    if bar.len() < MIN_CONFIG_BAR_LEN {
        return Err(Error::Device(format!(
            "BAR{index} is {:#x} bytes, too small for a QDMA config BAR (its queue doorbells start at {R_PF_DOORBELLS:#x})",
            bar.len()
        )));
    }
    let id = rd(bar, R_ID)?;
    if id >> ID_SHIFT != ID_MAGIC {
        let hint = if id == u32::MAX {
            ": all-ones reads mean Memory Space is disabled or the card is not responding"
        } else {
            ""
        };
        return Err(Error::Device(format!(
            "BAR{index} is not a QDMA config BAR: register 0x0 reads {id:#010x} (a QDMA config block reads 0x1fd3xxxx){hint}"
        )));
    }
    let misc = rd(bar, R_MISC_CAP)?;
    let ip = IpKind::from_misc_cap(misc);
    let mdma = rd(bar, R_CHANNEL_MDMA)?;
    let func = (rd(bar, R_FUNC_RET)? & FUNC_RET_FUNC) as u8;
    let per_pf = (1 << BARLITE_BITS) - 1;
    let user = (rd(bar, R_BARLITE_EXT)? >> (BARLITE_BITS * (func as u32 % 4))) & per_pf;
    let mut ring_entries = Vec::with_capacity(RNG_SZ_COUNT);
    for i in 0..RNG_SZ_COUNT as u64 {
        ring_entries.push(rd(bar, R_RNG_SZ + 4 * i)? & RNG_SZ_MASK);
    }
    let (mm_h2c, mm_c2h) = (mdma & MDMA_MM_H2C != 0, mdma & MDMA_MM_C2H != 0);
    let mm_running = [
        mm_h2c && rd(bar, mm(Direction::H2c, MM_CONTROL))? & MM_RUN != 0,
        mm_c2h && rd(bar, mm(Direction::C2h, MM_CONTROL))? & MM_RUN != 0,
    ];
    let errors = ErrorRegs::read(bar, ip, [mm_h2c, mm_c2h])?;
    Ok(QdmaInfo {
        bar: index,
        ip,
        release: ip.release(misc),
        misc_cap: misc,
        mm_h2c,
        mm_c2h,
        st_h2c: mdma & MDMA_ST_H2C != 0,
        st_c2h: mdma & MDMA_ST_C2H != 0,
        max_queues: ip.max_queues(rd(bar, R_QDMA_CAP)?),
        func,
        user_bar: (user != 0).then(|| user.trailing_zeros() as u8),
        ring_entries,
        mm_running,
        pending_errors: errors.any().then(|| errors.describe()),
        perf: perf::read(bar, ip, misc)?,
    })
}
