//! The Micro Memory MM-5415/5425/6155 NVRAM cards' CSR block (BAR0) as the old Linux `umem`
//! driver knows it (drivers/block/umem.c and umem.h, last in v5.9; fpga_sio's
//! micromemory_5425_nvram programs drive the 5425 the same way): every register, field and bit
//! the driver uses (one row each in `docs/engines/umem.md`, kept in step by
//! `tests/conformance.rs`), the card's identity, memory size, battery and error-correction state
//! for `pcibench info`, and the DMA status bits in words.

use crate::access::BarRegion;
use crate::mmio::Width;
use crate::units::human_size;
use crate::Result;
use serde::Serialize;
use std::fmt;

pub const VENDOR: u16 = 0x1332;
/// The CSR BAR (fpga_sio: NVRAM_CSR_BAR_INDEX; umem.c maps BAR0).
pub const CSR_BAR: u8 = 0;
// Device ids and the magic byte umem.c mm_pci_probe expects at MEMCTRLSTATUS_MAGIC for each.
pub(crate) const DEVICE_5415: u16 = 0x5415;
pub(crate) const DEVICE_5425: u16 = 0x5425;
pub(crate) const DEVICE_6155: u16 = 0x6155;
pub(crate) const MAGIC_5415: u8 = 0x59;
pub(crate) const MAGIC_5425: u8 = 0x5c;
pub(crate) const MAGIC_6155: u8 = 0x99;

// CSR byte offsets (umem.h).
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

// Battery status bits (umem.h BATTERY_*): battery 2's are battery 1's shifted left by 2.
pub(crate) const BATTERY_1_DISABLED: u8 = 0x01;
pub(crate) const BATTERY_1_FAILURE: u8 = 0x02;
/// How far battery 2's bits sit above battery 1's.
pub(crate) const BATTERY_2_SHIFT: u8 = 2;

// Memory size codes (umem.h MEM_*).
pub(crate) const MEM_128_MB: u8 = 0xfe;
pub(crate) const MEM_256_MB: u8 = 0xfc;
pub(crate) const MEM_512_MB: u8 = 0xf8;
pub(crate) const MEM_1_GB: u8 = 0xf0;
pub(crate) const MEM_2_GB: u8 = 0xe0;

/// Error correction: store check bits and correct on read (umem.c writes it at probe; fpga_sio
/// writes it every time, as without it a warm-rebooted card's DMA did not complete).
pub(crate) const EDC_STORE_CORRECT: u8 = 3;
// Error status bits (MEMCTRLCMD_ERRSTATUS) as umem.c's interrupt handler reports them.
pub(crate) const ERRSTATUS_ACCESS: u8 = 0x01;
pub(crate) const ERRSTATUS_MULTI_BIT: u8 = 0x02;

// DMA status/control bits (umem.h DMASCR_*).
pub(crate) const GO: u32 = 0x1;
/// Set for block writes in umem.c (`bio_op == REQ_OP_WRITE`, mapped DMA_TO_DEVICE): the card
/// reads host memory, so host to card. (fpga_sio sets it for DMA_READ_FROM_HOST, the same.)
pub(crate) const TRANSFER_READ: u32 = 0x2;
pub(crate) const CHAIN_EN: u32 = 0x4;
pub(crate) const SEM_EN: u32 = 0x10;
/// Raise the card's interrupt at chain completion: umem.c sets it on a chain's last descriptor;
/// pcibench, which services no interrupt, never does (as fpga_sio), and names it when found.
pub(crate) const CHAIN_COMP_EN: u32 = 0x40;
/// Raise the card's interrupt on errors and on parity errors: umem.c sets both on every
/// descriptor; pcibench never does, and names them when found.
pub(crate) const ERR_INT_EN: u32 = 0x80;
pub(crate) const PARITY_INT_EN: u32 = 0x100;
pub(crate) const ANY_ERR: u32 = 0x800;
pub(crate) const MBE_ERR: u32 = 0x1000;
pub(crate) const PARITY_ERR_REP: u32 = 0x2000;
pub(crate) const PARITY_ERR_DET: u32 = 0x4000;
pub(crate) const SYSTEM_ERR_SIG: u32 = 0x8000;
pub(crate) const TARGET_ABT: u32 = 0x1_0000;
pub(crate) const MASTER_ABT: u32 = 0x2_0000;
pub(crate) const DMA_COMPLETE: u32 = 0x4_0000;
pub(crate) const CHAIN_COMPLETE: u32 = 0x8_0000;
/// umem.h DMASCR_HARD_ERROR: in a semaphore or the status register, an I/O error (umem.c
/// process_page fails the request even when DMA_COMPLETE is set beside it).
pub(crate) const HARD_ERROR: u32 = MASTER_ABT | TARGET_ABT | SYSTEM_ERR_SIG | PARITY_ERR_DET | MBE_ERR;
/// umem.h DMASCR_ERROR_MASK: the status bits ERR_INT_EN interrupts on, which `mm_interrupt`
/// takes as its own beside CHAIN_COMPLETE.
pub(crate) const ERROR_MASK: u32 = MASTER_ABT | TARGET_ABT | SYSTEM_ERR_SIG | PARITY_ERR_DET | MBE_ERR | ANY_ERR;
/// What umem.c clears through DMA_STATUS_CTRL, by writing 1s (mm_interrupt): completion only.
pub(crate) const COMPLETION_BITS: u32 = DMA_COMPLETE | CHAIN_COMPLETE;
/// Status bits that mirror the card's PCI_STATUS errors: umem.c clears each by writing
/// PCI_STATUS back in config space (mm_interrupt), never through DMA_STATUS_CTRL.
pub(crate) const PCI_ERRORS: u32 = PARITY_ERR_REP | PARITY_ERR_DET | SYSTEM_ERR_SIG | TARGET_ABT | MASTER_ABT;
/// Status bits of the memory error log: umem.c clears them by writing 0 to ERROR_COUNT.
pub(crate) const MEMORY_ERRORS: u32 = ANY_ERR | MBE_ERR;

// PCI commands the engine uses (status/control bits 31:28 for reads, 27:24 for writes).
pub(crate) const READ_CMD_SHIFT: u32 = 28;
pub(crate) const WRITE_CMD_SHIFT: u32 = 24;
/// Memory Read Multiple: umem.c's default pci_read_cmd (and fpga_sio's DMASCR_READMULTI).
pub(crate) const PCI_READ_MULTIPLE: u32 = 0xc;
/// Memory Write and Invalidate: umem.c's default pci_write_cmd, used with PCI_COMMAND's MWI
/// Enable set (mm_pci_probe sets it whenever the command is 0xF).
pub(crate) const PCI_WRITE_INVALIDATE: u32 = 0xf;
/// Memory Write: what umem.c uses when the write command is not MWI.
pub(crate) const PCI_WRITE: u32 = 0x7;

// The card's config header as umem.c mm_pci_probe and mm_interrupt use it.
pub(crate) const CFG_COMMAND: u64 = 0x04;
pub(crate) const CFG_STATUS: u64 = 0x06;
pub(crate) const CFG_LATENCY_TIMER: u64 = 0x0d;
/// PCI_COMMAND Memory Write and Invalidate Enable: without it a PCI master may not use MWI
/// (PCI Local Bus 3.0 §6.2.2); PCI Express hardwires it to 0.
pub(crate) const CMD_MWI: u16 = 0x10;
/// PCI_COMMAND Interrupt Disable: pcibench polls and installs no handler, so the interrupts
/// umem.c's descriptor bits ask for must not reach the host (vfio-pci follows this bit in
/// hardware while no INTx is set up: vfio_pci_intx_mask).
pub(crate) const CMD_INTX_DISABLE: u16 = 0x400;
/// PCI_STATUS's write-1-to-clear error bits (PCI Local Bus 3.0 §6.2.3).
pub(crate) const STATUS_ERRORS: u16 = 0xf900;
/// The latency timer umem.c mm_pci_probe writes (PCI_LATENCY_TIMER, 0xF8).
pub(crate) const LATENCY_TIMER: u8 = 0xf8;

// Descriptors: umem.h struct mm_dma_desc, little-endian.
pub(crate) const DESC_PCI_ADDR: usize = 0x00;
pub(crate) const DESC_LOCAL_ADDR: usize = 0x08;
pub(crate) const DESC_TRANSFER_SIZE: usize = 0x10;
pub(crate) const DESC_NEXT: usize = 0x18;
pub(crate) const DESC_SEM_ADDR: usize = 0x20;
pub(crate) const DESC_CONTROL: usize = 0x28;
/// sizeof(struct mm_dma_desc) on 64-bit hosts: the fields above, umem.c's DMA handle, and
/// `sem_control_bits` at +0x38, which the card writes (the semaphore).
pub const DESC_BYTES: u64 = 64;
pub const SEM_OFFSET: u64 = 0x38;
/// The most descriptors umem.c puts in one chain: DESC_PER_PAGE, two pages of descriptors.
pub const DESC_PER_CHAIN: usize = 8192 / DESC_BYTES as usize;
/// The longest piece one descriptor moves. The size field is 32 bits and seed 001 (fpga_sio)
/// moved 1 GiB with one descriptor; umem.c's pieces are block-layer segments (a page or so).
/// A semaphore is the only progress the card shows, so pieces stop at 1 MiB: a wait sees the
/// card move every MiB (a slow card is told from a hung one), at 1,024 descriptors (8 chains of
/// 128) per GiB, whose cost beside the data is nil.
pub const MAX_DESC_LEN: u64 = 1 << 20;
/// Host and card addresses and lengths in 8-byte words: the card's data path is 64-bit PCI and
/// its ECC protects 64-bit words (the error data log is 64 bits wide).
pub const ALIGN: u64 = 8;

/// Status bits in words (umem.c dump_dmastat names them).
const STATUS_WORDS: &[(u32, &str)] = &[
    (ANY_ERR, "any error (memory access error logged)"),
    (MBE_ERR, "multi-bit ECC error"),
    (PARITY_ERR_REP, "parity error reported"),
    (PARITY_ERR_DET, "parity error detected"),
    (SYSTEM_ERR_SIG, "system error signalled"),
    (TARGET_ABT, "target abort"),
    (MASTER_ABT, "master abort (nothing answered a host address)"),
    (DMA_COMPLETE, "DMA complete"),
    (CHAIN_COMPLETE, "chain complete"),
    // The word also holds the control bits of the descriptor the card ran last: an interrupt
    // enable there was set by another driver (umem.c), never by pcibench.
    (CHAIN_COMP_EN, "chain-complete interrupt enabled"),
    (ERR_INT_EN, "error interrupt enabled"),
    (PARITY_INT_EN, "parity interrupt enabled"),
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

/// The magic byte umem.c accepts per device id (mm_pci_probe: one per device; any other byte
/// is refused, as the vendor's driver refuses it).
pub fn expected_magic(device: u16) -> Option<(&'static str, &'static [u8])> {
    match device {
        DEVICE_5415 => Some(("MM-5415CN", &[MAGIC_5415])),
        DEVICE_5425 => Some(("MM-5425CN", &[MAGIC_5425])),
        DEVICE_6155 => Some(("MM-6155", &[MAGIC_6155])),
        _ => None,
    }
}

/// Bytes of card memory for a MEMCTRLSTATUS_MEMORY code (umem.h MEM_*).
pub fn memory_bytes(code: u8) -> Option<u64> {
    Some(match code {
        MEM_128_MB => 128 << 20,
        MEM_256_MB => 256 << 20,
        MEM_512_MB => 512 << 20,
        MEM_1_GB => 1 << 30,
        MEM_2_GB => 2 << 30,
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
    /// The PCI device id it was probed as (which magic bytes and batteries apply).
    pub device_id: u16,
    pub model: &'static str,
    pub magic: u8,
    /// Whether the magic byte is one umem.c accepts for this device id.
    pub magic_ok: bool,
    pub expected_magic: Vec<u8>,
    pub memory_code: u8,
    /// Card memory in bytes; None for a size code umem.h does not know.
    pub memory: Option<u64>,
    /// Battery 1 and 2 (none on the 6155, which umem.c flags UM_FLAG_NO_BATT); None when a
    /// transfer was running, when the battery register must not be read (see `probe`).
    pub batteries: Option<Vec<Battery>>,
    pub ecc: u8,
    pub dma_status: u32,
}

fn rd8(bar: &dyn BarRegion, off: u64) -> Result<u8> {
    Ok(bar.read(off, Width::B8)? as u8)
}

/// The battery register in words: reading it while the card runs a bus-to-card transfer can
/// hang the card ("you will need the reset switch", umem.c check_batteries), so umem.c reads it
/// only while no transfer is active, and so do we: only with GO clear in `dma_status`.
pub(crate) fn batteries(bar: &dyn BarRegion, device: u16, dma_status: u32) -> Result<Option<Vec<Battery>>> {
    if dma_status & GO != 0 {
        return Ok(None);
    }
    if device == DEVICE_6155 {
        return Ok(Some(Vec::new()));
    }
    let batt = rd8(bar, BATTERY)?;
    let one = |bits: u8| Battery { enabled: bits & BATTERY_1_DISABLED == 0, failed: bits & BATTERY_1_FAILURE != 0 };
    Ok(Some(vec![one(batt), one(batt >> BATTERY_2_SHIFT)]))
}

/// Read the CSR block of a device whose id `device` is one of the family's: the DMA status
/// first, so the battery register is left alone while a transfer runs.
pub fn probe(bar: &dyn BarRegion, device: u16) -> Result<UmemInfo> {
    let (model, magics) = expected_magic(device).unwrap_or(("unknown Micro Memory card", &[]));
    let dma_status = bar.read(DMA_STATUS_CTRL, Width::B32)? as u32;
    let magic = rd8(bar, MAGIC)?;
    let code = rd8(bar, MEMORY)?;
    let batteries = batteries(bar, device, dma_status)?;
    Ok(UmemInfo {
        bar: bar.index(),
        device_id: device,
        model,
        magic,
        magic_ok: magics.contains(&magic),
        expected_magic: magics.to_vec(),
        memory_code: code,
        memory: memory_bytes(code),
        batteries,
        ecc: rd8(bar, ERRCTRL)?,
        dma_status,
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
        match &self.batteries {
            Some(list) => {
                for (i, b) in list.iter().enumerate() {
                    let state = if b.failed { "FAILED" } else { "OK" };
                    let en = if b.enabled { "enabled" } else { "disabled" };
                    write!(f, "\n  battery {}: {en}, {state}", i + 1)?;
                }
            }
            None => write!(
                f,
                "\n  batteries: not read: a transfer is running (GO set), when reading them can hang the card"
            )?,
        }
        write!(f, "\n  ECC:     {} (error control {:#04x})", ecc_words(self.ecc), self.ecc)?;
        write!(f, "\n  DMA:     {}", decode_status(self.dma_status))
    }
}
