//! The sim NVRAM card's registers and state, shared by the register front end
//! (`model.rs`) and the DMA worker (`engine.rs`). Offsets and bits are the old Linux
//! `umem` driver's (drivers/block/umem.h, removed in 5.x; v4.18 has it): the CSR block in BAR0.

use super::super::card_memory::CardMemory;
use super::super::host_map::HostMap;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Condvar, Mutex, MutexGuard};

// CSR byte offsets (umem.h).
pub(crate) const MAGIC: usize = 0x00;
pub(crate) const BATTERY: usize = 0x04;
pub(crate) const MEMORY: usize = 0x07;
pub(crate) const LEDCTRL: usize = 0x08;
pub(crate) const ERRCTRL: usize = 0x0c;
pub(crate) const ERRCNT: usize = 0x0d;
pub(crate) const ERRSTATUS: usize = 0x0e;
pub(crate) const ERROR_DATA_LOG: usize = 0x20;
pub(crate) const ERROR_ADDR_LOG: usize = 0x28;
pub(crate) const ERROR_COUNT: usize = 0x3d;
pub(crate) const DMA_PCI_ADDR: usize = 0x40;
pub(crate) const DMA_LOCAL_ADDR: usize = 0x48;
pub(crate) const DMA_TRANSFER_SIZE: usize = 0x50;
pub(crate) const DMA_DESCRIPTOR_ADDR: usize = 0x58;
pub(crate) const DMA_SEMAPHORE_ADDR: usize = 0x60;
pub(crate) const DMA_STATUS_CTRL: usize = 0x68;
pub(crate) const WINDOWMAP_WINNUM: usize = 0x7b;
/// Bytes of the CSR block the model decodes; the rest of the BAR reads 0.
pub(crate) const CSR_LEN: usize = 0x80;

// DMA status/control bits (umem.h DMASCR_*).
pub(crate) const GO: u32 = 0x1;
/// The card reads host memory: host to card (umem.c sets it for block writes).
pub(crate) const TRANSFER_READ: u32 = 0x2;
pub(crate) const CHAIN_EN: u32 = 0x4;
pub(crate) const SEM_EN: u32 = 0x10;
pub(crate) const ANY_ERR: u32 = 0x800;
pub(crate) const MBE_ERR: u32 = 0x1000;
pub(crate) const MASTER_ABT: u32 = 0x2_0000;
pub(crate) const DMA_COMPLETE: u32 = 0x4_0000;
pub(crate) const CHAIN_COMPLETE: u32 = 0x8_0000;
/// Status bits 11-19: set by the engine, cleared by writing 1 (the model's reading of umem.c,
/// which clears completion by writing DMA_COMPLETE|CHAIN_COMPLETE to the register).
pub(crate) const STATUS_BITS: u32 = 0x000f_f800;

// Error status (MEMCTRLCMD_ERRSTATUS) bits as umem.c's interrupt handler prints them.
pub(crate) const ERRSTATUS_ACCESS: u8 = 0x01;
pub(crate) const ERRSTATUS_MULTI_BIT: u8 = 0x02;

/// Error correction modes (MEMCTRLCMD_ERRCTRL): 2 stores check bits and reports on read,
/// 3 also corrects; 0 and 1 do neither.
pub(crate) fn ecc_on(errctrl: u8) -> bool {
    matches!(errctrl, 2 | 3)
}

/// Memory size codes (MEMCTRLSTATUS_MEMORY).
pub fn size_code(bytes: u64) -> Option<u8> {
    Some(match bytes {
        0x0800_0000 => 0xfe,
        0x1000_0000 => 0xfc,
        0x2000_0000 => 0xf8,
        0x4000_0000 => 0xf0,
        0x8000_0000 => 0xe0,
        _ => return None,
    })
}

/// What the model is built with. Defaults: seed 001's card, an MM-5425CN with 1 GiB, magic 0x5c,
/// both batteries enabled and good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvramModelConfig {
    /// Card memory: 128 MiB, 256 MiB, 512 MiB, 1 GiB or 2 GiB (the size codes umem.h knows).
    pub card_size: u64,
    pub magic: u8,
    pub battery: u8,
}

impl Default for NvramModelConfig {
    fn default() -> Self {
        NvramModelConfig { card_size: 1 << 30, magic: 0x5c, battery: 0 }
    }
}

/// Faults a test can make the engine meet.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// Status bits raised (and the chain stopped) at the start of the next descriptor.
    pub next_status: Option<u32>,
    /// Card addresses whose 64-bit word has a multi-bit error until rewritten.
    pub poisoned: BTreeSet<u64>,
    /// A hung engine: accepts GO, moves nothing until GO is cleared.
    pub stalled: bool,
}

/// What the engine latches when GO is set.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Start {
    pub control: u32,
    pub desc: u64,
    pub pci: u64,
    pub local: u64,
    pub size: u64,
    pub sem: u64,
}

#[derive(Default)]
pub(crate) struct RunState {
    /// GO rising edges so far; the worker serves each one once.
    pub gen: u64,
    pub start: Start,
}

pub(crate) struct Shared {
    pub cfg: NvramModelConfig,
    pub card: CardMemory,
    pub host: std::sync::Arc<HostMap>,
    pub bus_master: AtomicBool,
    /// The byte registers (everything but the DMA status/control word).
    pub regs: Mutex<[u8; CSR_LEN]>,
    /// DMA status/control (0x68): control bits as written, GO while the engine runs, status bits.
    pub scr: AtomicU32,
    pub run: Mutex<RunState>,
    /// `run.gen` for lock-free checks: the worker spins on it briefly before sleeping.
    pub gen_hint: AtomicU64,
    pub wake: Condvar,
    pub faults: Mutex<Faults>,
    pub last_fault: Mutex<Option<String>>,
    pub shutdown: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the state itself stays consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub fn regs(&self) -> MutexGuard<'_, [u8; CSR_LEN]> {
        lock(&self.regs)
    }
    pub fn run(&self) -> MutexGuard<'_, RunState> {
        lock(&self.run)
    }
    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        lock(&self.faults)
    }
    pub fn set_fault(&self, why: String) {
        *lock(&self.last_fault) = Some(why);
    }
    pub fn last_fault(&self) -> Option<String> {
        lock(&self.last_fault).clone()
    }
}

/// A little-endian 64-bit register out of the byte file.
pub(crate) fn reg64(regs: &[u8; CSR_LEN], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&regs[at..at + 8]);
    u64::from_le_bytes(b)
}
