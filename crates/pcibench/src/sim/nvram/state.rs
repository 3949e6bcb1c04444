//! The sim NVRAM card's registers and state, shared by the register front end
//! (`model.rs`) and the DMA engine (`engine.rs`). Offsets and bits are the old Linux
//! `umem` driver's (drivers/block/umem.h, removed in 5.x; v4.18 has it): the CSR block in BAR0.

use super::super::card_memory::CardMemory;
use super::super::datapath::{Datapath, Due, ModelClock};
use super::super::host_map::HostMap;
use super::super::irq::SimIrq;
use super::super::shake::Shaker;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The MM-5425CN's DMA datapath: 880 MB/s per direction, the card-to-host rate seed 001 measured
/// with 1 GiB transfers on a Xeon W-2123 (host-to-card: 840 MB/s; its "PCI 64/66" name would allow
/// 533 MB/s, which the measurement shows its bus exceeds), each 48-byte descriptor (umem.h
/// `struct mm_dma_desc`) fetched over it.
pub const DATAPATH: Datapath = Datapath {
    bytes_per_s: 880_000_000,
    desc_bytes: 48,
    basis: "MM-5425CN: the card-to-host rate seed 001 measured with 1 GiB transfers",
};

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
pub(crate) const DMA_COMP_EN: u32 = 0x20;
pub(crate) const CHAIN_COMP_EN: u32 = 0x40;
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
/// Status bits 11-19.
pub(crate) const STATUS_BITS: u32 = 0x000f_f800;
/// The only status bits writing 1 to DMA_STATUS_CTRL clears: umem.c mm_interrupt clears
/// completion there and every error elsewhere, which the model takes as how the card works.
pub(crate) const COMPLETION_BITS: u32 = DMA_COMPLETE | CHAIN_COMPLETE;
/// umem.h DMASCR_ERROR_MASK: what ERR_INT_EN interrupts on.
pub(crate) const ERROR_MASK: u32 = MASTER_ABT | TARGET_ABT | SYSTEM_ERR_SIG | PARITY_ERR_DET | MBE_ERR | ANY_ERR;
/// The memory error log's status bits, latched until software writes 0 to ERROR_COUNT.
pub(crate) const MEMORY_ERRORS: u32 = ANY_ERR | MBE_ERR;
/// The write command bits (27:24) and Memory Write and Invalidate.
pub(crate) const WRITE_CMD_SHIFT: u32 = 24;
pub(crate) const PCI_WRITE_INVALIDATE: u32 = 0xf;
/// The longest chain umem.c builds (DESC_PER_PAGE: two pages of 64-byte descriptors).
pub(crate) const MAX_CHAIN: usize = 128;

/// The status bits that mirror PCI_STATUS error bits, beside their PCI_STATUS bit (PCI Local Bus
/// 3.0 §6.2.3). umem.c clears these by writing PCI_STATUS back, never in DMA_STATUS_CTRL, and
/// its interrupt handler would loop forever if that left them set: so the model keeps them in
/// PCI_STATUS alone and shows them in DMA_STATUS_CTRL from there.
pub(crate) const PCI_MIRROR: [(u32, u16); 5] = [
    (PARITY_ERR_REP, 0x0100), // master data parity error
    (PARITY_ERR_DET, 0x8000), // detected parity error
    (SYSTEM_ERR_SIG, 0x4000), // signaled system error
    (TARGET_ABT, 0x1000),     // received target abort
    (MASTER_ABT, 0x2000),     // received master abort
];
/// PCI_COMMAND bits the model acts on.
pub(crate) const CMD_MWI: u16 = 0x10;
pub(crate) const CMD_INTX_DISABLE: u16 = 0x400;

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
/// both batteries enabled and good, on PCI Express (fpga_sio: MWI "N/A to PCIe").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvramModelConfig {
    /// Card memory: 128 MiB, 256 MiB, 512 MiB, 1 GiB or 2 GiB (the size codes umem.h knows).
    pub card_size: u64,
    pub magic: u8,
    pub battery: u8,
    /// A conventional PCI card: PCI_COMMAND's MWI Enable and the latency timer are writable
    /// (PCI Express hardwires both to 0).
    pub conventional_pci: bool,
    /// Stepped (deterministic) mode for tests (issue #34): every due time is now, so the engine
    /// runs a whole chain inside the driver's GO write (or a test's `step`) and the order of
    /// events is the test's alone. Otherwise it progresses with time at `DATAPATH` whenever the
    /// host looks (`datapath.rs`).
    pub stepped: bool,
}

impl Default for NvramModelConfig {
    fn default() -> Self {
        NvramModelConfig { card_size: 1 << 30, magic: 0x5c, battery: 0, conventional_pci: false, stepped: false }
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
    /// Status bits the next descriptor detects while it still completes: its data arrives with
    /// one byte wrong and its semaphore carries the bits beside DMA_COMPLETE.
    pub completion_error: Option<u32>,
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
    pub start: Start,
    /// The run being served (`engine.rs`); None: idle.
    pub cursor: Option<super::chain::Cursor>,
}

pub(crate) struct Shared {
    pub cfg: NvramModelConfig,
    pub card: CardMemory,
    pub host: std::sync::Arc<HostMap>,
    pub bus_master: AtomicBool,
    /// The byte registers (everything but the DMA status/control word).
    pub regs: Mutex<[u8; CSR_LEN]>,
    /// DMA status/control (0x68): control bits as written, GO while the engine runs, and the
    /// completion bits; the error bits are read from `pci_status` and `memory_errors`.
    pub scr: AtomicU32,
    /// PCI_STATUS error bits the card latched (write-1-to-clear in config space).
    pub pci_status: AtomicU16,
    /// ANY_ERR and MBE_ERR, latched until software writes 0 to ERROR_COUNT.
    pub memory_errors: AtomicU32,
    /// The command register and latency timer as config space last had them.
    pub command: AtomicU16,
    pub latency_timer: AtomicU8,
    /// The interrupt enables of the descriptor (or direct transfer) the engine last ran.
    pub irq_enables: AtomicU32,
    /// What a driver made the card do that umem.c never does and the card is not known to take.
    pub violations: Mutex<Vec<String>>,
    /// The overrun fault (`sim::overrun`): each descriptor also writes one byte past its end.
    pub overrun: crate::sim::overrun::Overrun,
    /// The card's INTx (umem.c `request_irq(dev->irq, mm_interrupt, IRQF_SHARED)`: the line, no MSI).
    pub irq_out: Arc<SimIrq>,
    pub run: Mutex<RunState>,
    /// When the engine next completes a descriptor (model time).
    pub due: Due,
    pub clock: ModelClock,
    pub shaker: Shaker,
    pub faults: Mutex<Faults>,
    pub last_fault: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the state itself stays consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Model time now; stepped, every due time has come.
    pub fn now(&self) -> u64 {
        if self.cfg.stepped {
            u64::MAX
        } else {
            self.clock.now()
        }
    }
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
    /// Record a protocol violation (the list stops growing at 100: enough to show the pattern).
    pub fn violation(&self, what: String) {
        let mut v = lock(&self.violations);
        if v.len() < 100 {
            v.push(what);
        }
    }
    /// DMA_STATUS_CTRL as software reads it.
    pub fn dmascr(&self) -> u32 {
        let pci = self.pci_status.load(Ordering::Acquire);
        let mirrored = PCI_MIRROR.iter().filter(|(_, p)| pci & p != 0).fold(0, |a, (d, _)| a | d);
        self.scr.load(Ordering::Acquire) | self.memory_errors.load(Ordering::Acquire) | mirrored
    }
    /// The engine saw these status bits: latch each where the card keeps it.
    pub fn latch(&self, bits: u32) {
        self.memory_errors.fetch_or(bits & MEMORY_ERRORS, Ordering::AcqRel);
        let pci = PCI_MIRROR.iter().filter(|(d, _)| bits & d != 0).fold(0, |a, (_, p)| a | p);
        self.pci_status.fetch_or(pci, Ordering::AcqRel);
        self.scr.fetch_or(bits & COMPLETION_BITS, Ordering::AcqRel);
        self.check_interrupt();
    }
    /// The card asserts INTx while a latched status bit meets its interrupt enable (umem.h
    /// DMASCR_ERROR_MASK with ERR_INT_EN, parity with PARITY_INT_EN, CHAIN_COMPLETE with
    /// CHAIN_COMP_EN, DMA_COMPLETE with DMA_COMP_EN), until the handler clears the bit as umem.c's
    /// `mm_interrupt` does (completion written to DMA_STATUS_CTRL, ERROR_COUNT written 0, PCI_STATUS
    /// written back). Called whenever one of those changes. With nothing routed, an asserted line
    /// is a protocol violation (`SimIrq`): on a host, an interrupt no driver claims (a shared line
    /// gets disabled by the kernel as "nobody cared", taking its other devices' interrupts with
    /// it). PCI_COMMAND's Interrupt Disable does not make it safe: it masks INTx only on a PCI 2.3
    /// INTx-maskable function, and vfio-pci relies on it only there (`vfio_pci_intrs.c`,
    /// `pci_2_3`); this card is not known to be one, so the model asserts the line regardless.
    pub fn check_interrupt(&self) {
        let (s, en) = (self.dmascr(), self.irq_enables.load(Ordering::Acquire));
        let why = [
            (s & ERROR_MASK != 0 && en & ERR_INT_EN != 0, "an error with ERR_INT_EN"),
            (
                s & (PARITY_ERR_REP | PARITY_ERR_DET) != 0 && en & PARITY_INT_EN != 0,
                "a parity error with PARITY_INT_EN",
            ),
            (s & CHAIN_COMPLETE != 0 && en & CHAIN_COMP_EN != 0, "chain complete with CHAIN_COMP_EN"),
            (s & DMA_COMPLETE != 0 && en & DMA_COMP_EN != 0, "DMA complete with DMA_COMP_EN"),
        ];
        let what = why.iter().find(|(on, _)| *on).map(|(_, w)| *w);
        let masked = if self.command.load(Ordering::Acquire) & CMD_INTX_DISABLE != 0 {
            " (PCI_COMMAND Interrupt Disable is set, which masks INTx only on a PCI 2.3 INTx-maskable function)"
        } else {
            ""
        };
        self.irq_out.set(0, 0, what.is_some(), || {
            format!("the card asserted its interrupt ({}; status {s:#x}){masked}", what.unwrap_or_default())
        });
    }
}

/// A little-endian 64-bit register out of the byte file.
pub(crate) fn reg64(regs: &[u8; CSR_LEN], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&regs[at..at + 8]);
    u64::from_le_bytes(b)
}
