//! The sim NVRAM card's CSR block (BAR0): a register model of the Micro Memory MM-5425CN as the
//! old Linux `umem` driver describes it (drivers/block/umem.h): identity and status bytes, the
//! error-correction control and logs, and the DMA engine's registers. The engine itself (chained
//! descriptors, data movement, semaphores, status) progresses with time at the card's datapath,
//! whenever the host looks (`engine.rs`; `datapath.rs` says why).
//!
//! Byte registers take 8/16/32-bit accesses; 64-bit DMA registers are written as two 32-bit
//! halves, as umem.c does. The DMA status/control word at 0x68 takes 32-bit writes only: on the
//! 5425 umem.c writes it whole (UM_FLAG_NO_BYTE_STATUS).

use super::super::card_memory::CardMemory;
use super::super::datapath::{self, Due, ModelClock};
use super::super::host_map::HostMap;
use super::super::irq::{Offers, SimIrq};
use super::super::mem::Pages;
use super::state::*;
pub use super::state::{size_code, NvramModelConfig};
use crate::mmio::Width;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Length of the CSR BAR.
pub const CSR_BAR_LEN: u64 = 4096;

/// The CSR block and DMA engine of one sim NVRAM card.
pub struct NvramModel {
    shared: Arc<Shared>,
}

/// Offsets software may write in the byte file: LEDs, error control and count, the error
/// counter umem.c clears, the DMA address registers and the memory window number.
fn writable(off: usize) -> bool {
    matches!(off, LEDCTRL | ERRCTRL | ERRCNT | ERROR_COUNT | WINDOWMAP_WINNUM)
        || (DMA_PCI_ADDR..DMA_STATUS_CTRL).contains(&off)
}

impl NvramModel {
    pub fn new(cfg: NvramModelConfig, host: Arc<HostMap>) -> Result<NvramModel> {
        NvramModel::with_clock(cfg, host, ModelClock::real())
    }

    /// The model on `clock`'s time (a test's fake clock).
    pub fn with_clock(cfg: NvramModelConfig, host: Arc<HostMap>, clock: ModelClock) -> Result<NvramModel> {
        let code = size_code(cfg.card_size).ok_or_else(|| {
            Error::usage(format!(
                "an MM-54xx card has 128 MiB, 256 MiB, 512 MiB, 1 GiB or 2 GiB of memory, not {:#x} bytes",
                cfg.card_size
            ))
        })?;
        let mut regs = [0u8; CSR_LEN];
        regs[MAGIC] = cfg.magic;
        regs[BATTERY] = cfg.battery;
        regs[MEMORY] = code;
        // Card memory is an uncharged anonymous mapping: pages cost RAM only once touched, so a
        // 1 GiB card costs what its transfers write (and fits a 512 MiB lab guest).
        let pages = Pages::sparse("NVRAM", cfg.card_size as usize)?;
        let shaker = super::super::shake::Shaker::new("sim-nvram-dma", cfg.stepped || clock.set_by_test());
        let shared = Shared {
            cfg,
            card: CardMemory::new(pages, cfg.card_size),
            host,
            bus_master: AtomicBool::new(false),
            regs: Mutex::new(regs),
            scr: AtomicU32::new(0),
            pci_status: AtomicU16::new(0),
            memory_errors: AtomicU32::new(0),
            command: AtomicU16::new(0),
            latency_timer: AtomicU8::new(0),
            irq_enables: AtomicU32::new(0),
            violations: Mutex::new(Vec::new()),
            overrun: Default::default(),
            irq_out: Arc::new(SimIrq::new("MM-5425CN", Offers::LEGACY_INTX)),
            run: Mutex::new(RunState::default()),
            due: Due::default(),
            clock,
            shaker,
            faults: Mutex::new(Faults::default()),
            last_fault: Mutex::new(None),
        };
        Ok(NvramModel { shared: Arc::new(shared) })
    }

    pub fn config(&self) -> &NvramModelConfig {
        &self.shared.cfg
    }

    /// Bring the engine to model time now: what is due completes, in this thread.
    pub fn advance(&self) {
        if datapath::hands_off() {
            return;
        }
        let s = &*self.shared;
        let now = s.now();
        if s.due.by(now) {
            super::engine::serve(s, &mut s.run(), now, false);
        }
    }

    /// How long until the engine next completes a descriptor (None: nothing under way).
    pub fn due_in(&self) -> Option<Duration> {
        datapath::wait_for(self.shared.clock.now(), [self.shared.due.get()])
    }

    /// A read of `bytes` (1, 2 or 4) at `off` (aligned; the BAR checks bounds).
    fn read_n(&self, off: usize, bytes: usize) -> u64 {
        self.advance();
        if (off..off + bytes).contains(&BATTERY) && self.shared.scr.load(Ordering::Acquire) & GO != 0 {
            self.shared.violation(format!(
                "read the battery register (BAR0+{BATTERY:#x}) while a transfer runs: umem.c never does \
                 (check_batteries: during bus-to-card DMA the card can hang until reset)"
            ));
        }
        let regs = self.shared.regs();
        let scr = self.shared.dmascr().to_le_bytes();
        let mut v = 0u64;
        for i in (0..bytes).rev() {
            let o = off + i;
            let b = match o {
                DMA_STATUS_CTRL..=0x6b => scr[o - DMA_STATUS_CTRL],
                o if o < CSR_LEN => regs[o],
                _ => 0,
            };
            v = v << 8 | b as u64;
        }
        v
    }

    fn write_n(&self, off: usize, bytes: usize, value: u64) -> Result<()> {
        self.advance();
        if (DMA_STATUS_CTRL..DMA_STATUS_CTRL + 4).contains(&off) {
            if off != DMA_STATUS_CTRL || bytes != 4 {
                return Err(Error::Refused(format!(
                    "the MM-5425's DMA status/control register takes 32-bit writes at 0x68 only (umem.c: \
                     UM_FLAG_NO_BYTE_STATUS); refused a {}-bit write at {off:#x}",
                    bytes * 8
                )));
            }
            return self.write_scr(value as u32);
        }
        let mut regs = self.shared.regs();
        for i in 0..bytes {
            let o = off + i;
            if o < CSR_LEN && writable(o) {
                regs[o] = (value >> (8 * i)) as u8;
            }
        }
        if (off..off + bytes).contains(&ERROR_COUNT) && regs[ERROR_COUNT] == 0 {
            // umem.c mm_interrupt: writing 0 to the count clears the memory error log's status.
            self.shared.memory_errors.store(0, Ordering::Release);
            drop(regs);
            self.shared.check_interrupt();
        }
        Ok(())
    }

    /// The status/control word: the completion bits are write-1-to-clear (the error bits clear
    /// elsewhere: writing 1s to them changes nothing and is flagged); GO starts the engine when it
    /// is idle (latching the DMA registers) and clearing GO asks a running engine to stop after
    /// the piece in flight.
    fn write_scr(&self, value: u32) -> Result<()> {
        let r = self.write_scr_now(value);
        // Completion bits cleared (or a run started): the line follows.
        self.shared.check_interrupt();
        r
    }

    fn write_scr_now(&self, value: u32) -> Result<()> {
        let s = &self.shared;
        let errors = value & STATUS_BITS & !COMPLETION_BITS;
        if errors != 0 {
            s.violation(format!(
                "wrote error bits {errors:#x} to DMA_STATUS_CTRL: umem.c clears only DMA_COMPLETE|CHAIN_COMPLETE there \
                 (parity, system error and aborts through PCI_STATUS, ANY_ERR and MBE_ERR by writing 0 to ERROR_COUNT)"
            ));
        }
        let mut run = s.run();
        let old = s.scr.load(Ordering::Acquire);
        let status = old & COMPLETION_BITS & !value;
        let running = old & GO != 0;
        let control = value & !STATUS_BITS;
        if control & GO != 0 && !running {
            let regs = s.regs();
            run.start = Start {
                control,
                desc: reg64(&regs, DMA_DESCRIPTOR_ADDR),
                pci: reg64(&regs, DMA_PCI_ADDR),
                local: reg64(&regs, DMA_LOCAL_ADDR),
                size: reg64(&regs, DMA_TRANSFER_SIZE),
                sem: reg64(&regs, DMA_SEMAPHORE_ADDR),
            };
            drop(regs);
            s.scr.store(control | status, Ordering::Release);
            // GO starts the engine at model time now; stepped, the whole chain runs before the
            // write returns (unless the engine is stalled).
            super::engine::start(s, &mut run, s.clock.now());
            super::engine::serve(s, &mut run, s.now(), false);
            return Ok(());
        }
        // Writes while running keep GO as the engine has it unless they clear it.
        let go = if control & GO == 0 { 0 } else { old & GO };
        s.scr.store((control & !GO) | go | status, Ordering::Release);
        if running && go == 0 {
            // GO cleared: the engine stops now (after the piece in flight, which the model's
            // descriptors complete whole or not at all).
            super::engine::serve(s, &mut run, s.now(), false);
        }
        Ok(())
    }

    /// Read card memory directly, as an independent check of what a host-to-card DMA wrote.
    pub fn card_read(&self, addr: u64, out: &mut [u8]) -> Result<()> {
        self.shared.card.read(addr, out)
    }

    pub fn card_write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.shared.card.write(addr, data)
    }

    /// Test step (stepped mode): run the pending GO edge (one a stall held back) now; whether
    /// there was one.
    pub fn step(&self) -> bool {
        super::engine::serve(&self.shared, &mut self.shared.run(), u64::MAX, true)
    }

    /// Test hook: a hung engine accepts GO but moves nothing until GO is cleared.
    pub fn set_stalled(&self, stalled: bool) {
        self.shared.faults().stalled = stalled;
        if !stalled {
            // Released: the run moves on from now, when the host next looks.
            self.shared.due.set(0);
        }
    }

    /// Test hook: the next descriptor stops the chain with these status bits (e.g. a target
    /// abort 0x10000, a parity error 0x4000); they latch as the card latches them (PCI_STATUS,
    /// the memory error log).
    pub fn inject_status(&self, bits: u32) {
        self.shared.faults().next_status = Some(bits & STATUS_BITS);
    }

    /// Test hook: the next descriptor detects these status bits (e.g. a detected parity error
    /// 0x4000) but still completes: one byte of what it moved is wrong, the bits latch, and its
    /// semaphore carries them beside DMA_COMPLETE.
    pub fn inject_completion_error(&self, bits: u32) {
        self.shared.faults().completion_error = Some(bits & STATUS_BITS & !COMPLETION_BITS);
    }

    /// Test hook: each descriptor also writes one byte past its end (`sim::overrun`).
    pub fn set_overrun(&self, on: bool) {
        self.shared.overrun.set(on);
    }

    /// What a driver made the card do that umem.c never does and the card is not known to take
    /// (an MWI without MWI Enable, a chain longer than umem.c builds, the battery read during a
    /// transfer, errors cleared through the wrong register, an interrupt nothing services).
    pub fn violations(&self) -> Vec<String> {
        super::super::served::violations(&self.shared.violations, &self.shared.irq_out)
    }

    /// The card's interrupt (what the access path routes).
    pub fn irq(&self) -> &Arc<SimIrq> {
        &self.shared.irq_out
    }

    /// Test hook: the 64-bit word at card address `addr` holds a multi-bit error until it is
    /// written again. With error correction on, reading it stops the DMA with MBE_ERR; with it
    /// off, the corrupted data goes to the host unnoticed (why umem.c turns ECC on).
    pub fn poison(&self, addr: u64) {
        self.shared.faults().poisoned.insert(addr & !7);
    }

    /// Why the engine last stopped on an error, in the model's own words.
    pub fn last_fault(&self) -> Option<String> {
        self.shared.last_fault()
    }
}

impl super::super::RegisterModel for NvramModel {
    fn violations(&self) -> Vec<String> {
        NvramModel::violations(self)
    }

    fn populate_card(&self, addr: u64, len: u64) {
        self.shared.card.populate(addr, len);
    }

    fn size(&self) -> u64 {
        CSR_BAR_LEN
    }

    fn check_width(&self, index: u8, width: Width) -> Result<()> {
        match width {
            Width::B8 | Width::B16 | Width::B32 => Ok(()),
            _ => Err(Error::Refused(format!(
                "the MM-5425's CSR registers take 8, 16 and 32-bit accesses (umem.c uses readb/readl): BAR{index} of \
                 the sim NVRAM card refuses {width}-wide access (use --width 32)"
            ))),
        }
    }

    fn read(&self, offset: u64, width: Width) -> u64 {
        self.read_n(offset as usize, width.bytes())
    }

    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        self.write_n(offset as usize, width.bytes(), value)
    }

    fn set_bus_master(&self, on: bool) {
        self.shared.bus_master.store(on, Ordering::Release);
    }

    fn conventional_pci(&self) -> bool {
        self.shared.cfg.conventional_pci
    }

    fn config_written(&self, command: u16, latency_timer: u8) {
        self.shared.command.store(command, Ordering::Release);
        self.shared.latency_timer.store(latency_timer, Ordering::Release);
    }

    fn pci_status(&self) -> u16 {
        self.shared.pci_status.load(Ordering::Acquire)
    }

    fn clear_pci_status(&self, bits: u16) {
        self.shared.pci_status.fetch_and(!bits, Ordering::AcqRel);
        self.shared.check_interrupt();
    }

    fn advance(&self) {
        NvramModel::advance(self)
    }

    fn due_in(&self) -> Option<Duration> {
        NvramModel::due_in(self)
    }
}
