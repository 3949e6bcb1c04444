//! The Micro Memory MM-5415/5425/6155 NVRAM cards' CSR block (BAR0) as the old Linux `umem`
//! driver knows it (drivers/block/umem.c and umem.h, last in v5.9; fpga_sio's
//! micromemory_5425_nvram programs drive the 5425 the same way): identity, memory size, battery
//! and error-correction state for `pcibench info`, and the DMA status bits in words.

use crate::access::BarRegion;
use crate::mmio::Width;
use crate::units::human_size;
use crate::Result;
use serde::Serialize;
use std::fmt;

pub const VENDOR: u16 = 0x1332;
/// The CSR BAR (fpga_sio: NVRAM_CSR_BAR_INDEX).
pub const CSR_BAR: u8 = 0;

pub(crate) const MAGIC: u64 = 0x00;
pub(crate) const BATTERY: u64 = 0x04;
pub(crate) const MEMORY: u64 = 0x07;
pub(crate) const ERRCTRL: u64 = 0x0c;
pub(crate) const ERRSTATUS: u64 = 0x0e;
pub(crate) const ERROR_DATA_LOG: u64 = 0x20;
pub(crate) const ERROR_ADDR_LOG: u64 = 0x28;
pub(crate) const ERROR_COUNT: u64 = 0x3d;
pub(crate) const DMA_PCI_ADDR: u64 = 0x40;
pub(crate) const DMA_LOCAL_ADDR: u64 = 0x48;
pub(crate) const DMA_TRANSFER_SIZE: u64 = 0x50;
pub(crate) const DMA_DESCRIPTOR_ADDR: u64 = 0x58;
pub(crate) const DMA_SEMAPHORE_ADDR: u64 = 0x60;
pub(crate) const DMA_STATUS_CTRL: u64 = 0x68;

/// Error correction: store check bits and correct on read (umem.c writes it at probe; fpga_sio
/// writes it every time, as without it a warm-rebooted card's DMA did not complete).
pub(crate) const EDC_STORE_CORRECT: u8 = 3;

pub(crate) const GO: u32 = 0x1;
/// Set for block writes in umem.c (`bio_op == REQ_OP_WRITE`, mapped DMA_TO_DEVICE): the card
/// reads host memory, so host to card. (fpga_sio sets it for DMA_READ_FROM_HOST, the same.)
pub(crate) const TRANSFER_READ: u32 = 0x2;
pub(crate) const CHAIN_EN: u32 = 0x4;
pub(crate) const SEM_EN: u32 = 0x10;
pub(crate) const ANY_ERR: u32 = 0x800;
pub(crate) const DMA_COMPLETE: u32 = 0x4_0000;
/// umem.h DMASCR_HARD_ERROR: master/target abort, system error, parity detected, multi-bit ECC.
pub(crate) const HARD_ERROR: u32 = 0x2_0000 | 0x1_0000 | 0x8000 | 0x4000 | 0x1000;
/// Status bits 11-19, cleared by writing 1.
pub(crate) const STATUS_BITS: u32 = 0x000f_f800;
/// PCI commands in bits 31:24: read multiple (0xC) for reads, memory write and invalidate (0xF)
/// for writes: umem.c's defaults, and fpga_sio's (NVRAM_PCI_CMDS).
pub(crate) const PCI_CMDS: u32 = 0xc << 28 | 0xf << 24;

const STATUS_WORDS: &[(u32, &str)] = &[
    (0x800, "any error (memory access error logged)"),
    (0x1000, "multi-bit ECC error"),
    (0x2000, "parity error reported"),
    (0x4000, "parity error detected"),
    (0x8000, "system error signalled"),
    (0x1_0000, "target abort"),
    (0x2_0000, "master abort (nothing answered a host address)"),
    (0x4_0000, "DMA complete"),
    (0x8_0000, "chain complete"),
];

/// The DMA status/control word in words: "0x30000 (target abort, master abort ...)".
pub fn decode_status(v: u32) -> String {
    let words: Vec<&str> = STATUS_WORDS.iter().filter(|(b, _)| v & b != 0).map(|(_, w)| *w).collect();
    let go = if v & GO != 0 { "running" } else { "idle" };
    if words.is_empty() {
        format!("{v:#x} ({go}, no status bits)")
    } else {
        format!("{v:#x} ({go}; {})", words.join(", "))
    }
}

/// The magic bytes umem.c accepts per device id (0x5e: newer 5425 boards, from a 2016 patch to
/// umem.c that Debian users carried; the mainline driver knew 0x5c only).
pub fn expected_magic(device: u16) -> Option<(&'static str, &'static [u8])> {
    match device {
        0x5415 => Some(("MM-5415CN", &[0x59])),
        0x5425 => Some(("MM-5425CN", &[0x5c, 0x5e])),
        0x6155 => Some(("MM-6155", &[0x99])),
        _ => None,
    }
}

/// Bytes of card memory for a MEMCTRLSTATUS_MEMORY code (umem.h MEM_*).
pub fn memory_bytes(code: u8) -> Option<u64> {
    Some(match code {
        0xfe => 128 << 20,
        0xfc => 256 << 20,
        0xf8 => 512 << 20,
        0xf0 => 1 << 30,
        0xe0 => 2 << 30,
        _ => return None,
    })
}

fn ecc_words(v: u8) -> &'static str {
    match v {
        0 => "off (power-on default)",
        1 => "off",
        2 => "check bits stored, errors reported on read",
        3 => "check bits stored, errors corrected",
        _ => "unknown mode",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Battery {
    pub enabled: bool,
    pub failed: bool,
}

/// What the CSR block says, read without side effects (byte reads of status registers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UmemInfo {
    pub bar: u8,
    pub model: &'static str,
    pub magic: u8,
    /// Whether the magic byte is one umem.c accepts for this device id.
    pub magic_ok: bool,
    pub expected_magic: Vec<u8>,
    pub memory_code: u8,
    /// Card memory in bytes; None for a size code umem.h does not know.
    pub memory: Option<u64>,
    /// Battery 1 and 2 (none on the 6155, which umem.c flags UM_FLAG_NO_BATT).
    pub batteries: Vec<Battery>,
    pub ecc: u8,
    pub dma_status: u32,
}

fn rd8(bar: &dyn BarRegion, off: u64) -> Result<u8> {
    Ok(bar.read(off, Width::B8)? as u8)
}

/// Read the CSR block of a device whose id `device` is one of the family's.
pub fn probe(bar: &dyn BarRegion, device: u16) -> Result<UmemInfo> {
    let (model, magics) = expected_magic(device).unwrap_or(("unknown Micro Memory card", &[]));
    let magic = rd8(bar, MAGIC)?;
    let code = rd8(bar, MEMORY)?;
    let batt = rd8(bar, BATTERY)?;
    let batteries = if device == 0x6155 {
        Vec::new()
    } else {
        (0..2).map(|i| Battery { enabled: batt >> (2 * i) & 1 == 0, failed: batt >> (2 * i + 1) & 1 != 0 }).collect()
    };
    Ok(UmemInfo {
        bar: bar.index(),
        model,
        magic,
        magic_ok: magics.contains(&magic),
        expected_magic: magics.to_vec(),
        memory_code: code,
        memory: memory_bytes(code),
        batteries,
        ecc: rd8(bar, ERRCTRL)?,
        dma_status: bar.read(DMA_STATUS_CTRL, Width::B32)? as u32,
    })
}

impl UmemInfo {
    fn magic_list(&self) -> String {
        self.expected_magic.iter().map(|m| format!("{m:#04x}")).collect::<Vec<_>>().join(" or ")
    }

    /// Why the driver will not touch this card, if it will not.
    pub fn refusal(&self) -> Option<String> {
        if !self.magic_ok {
            return Some(format!(
                "BAR{} of the {} reads magic byte {:#04x} at offset 0, not {} ({}, umem.c): not this card's CSR block, \
                 or the card is not answering (all-ones: Memory Space off or the link down); nothing was written",
                self.bar,
                self.model,
                self.magic,
                self.magic_list(),
                self.model
            ));
        }
        if self.memory.is_none() {
            return Some(format!(
                "memory size code {:#04x} (BAR{}+0x07) is not one umem.h knows (0xfe 128 MiB .. 0xe0 2 GiB); nothing was written",
                self.memory_code, self.bar
            ));
        }
        None
    }
}

impl fmt::Display for UmemInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "umem: {} NVRAM DMA engine in BAR{}, magic {:#04x}", self.model, self.bar, self.magic)?;
        if !self.magic_ok {
            write!(f, " (expected {}: not driven)", self.magic_list())?;
        }
        match self.memory {
            Some(m) => write!(f, "\n  memory:  {} (size code {:#04x})", human_size(m), self.memory_code)?,
            None => write!(f, "\n  memory:  unknown size code {:#04x}", self.memory_code)?,
        }
        for (i, b) in self.batteries.iter().enumerate() {
            let state = if b.failed { "FAILED" } else { "OK" };
            let en = if b.enabled { "enabled" } else { "disabled" };
            write!(f, "\n  battery {}: {en}, {state}", i + 1)?;
        }
        write!(f, "\n  ECC:     {} (error control {:#04x})", ecc_words(self.ecc), self.ecc)?;
        write!(f, "\n  DMA:     {}", decode_status(self.dma_status))
    }
}
