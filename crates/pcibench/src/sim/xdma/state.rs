//! The sim XDMA's registers and state, shared by the register front end (`model.rs`) and
//! the channels' engines (`engine.rs`, `stream.rs`): PG195's targets, control and status bits,
//! one channel's registers, and the datapath they move at.

use super::super::card_memory::CardMemory;
use super::super::datapath::{Datapath, Due, ModelClock};
use super::super::host_map::HostMap;
use super::super::irq::SimIrq;
use super::super::shake::Shaker;
use crate::direction::Direction;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Card (AXI) memory behind the sim card's DMA engine: seed 000's dma_blkram size.
pub const CARD_MEMORY_SIZE: u64 = 0x12_8000;
/// Length of the DMA register BAR.
pub const XDMA_BAR_LEN: u64 = 64 << 10;
pub use super::perf::{DATA_WIDTH_BYTES, USER_CLOCK_HZ};
/// The XDMA engine's datapath: a beat a cycle (2,000 MB/s per direction), each 32-byte
/// descriptor fetched over it too (4 beats).
pub const DATAPATH: Datapath = Datapath {
    bytes_per_s: USER_CLOCK_HZ * DATA_WIDTH_BYTES,
    desc_bytes: 32,
    basis: "XDMA (PG195): a 64-bit AXI datapath at 250 MHz, a Gen2 x4 configuration's",
};

// Targets (address bits 15:12).
pub(crate) const T_H2C: u32 = 0;
pub(crate) const T_C2H: u32 = 1;
pub(crate) const T_IRQ: u32 = 2;
pub(crate) const T_CONFIG: u32 = 3;
pub(crate) const T_H2C_SG: u32 = 4;
pub(crate) const T_C2H_SG: u32 = 5;
pub(crate) const T_COMMON: u32 = 6;

// Channel control bits (PG195 "H2C Channel Control (0x04)").
pub(crate) const CTRL_RUN: u32 = 1 << 0;
pub(crate) const CTRL_POLL_WB: u32 = 1 << 26;
/// Bits software can set: 0-6, 9-23 (ie_* and error enables), 25, 26, 27.
pub(crate) const CTRL_WRITABLE: u32 = 0x0eff_fe7f;

// Status bits (PG195 "H2C Channel Status (0x40)"); events log only where the matching control
// ie_* bit is set, which puts every loggable status bit at the same position as its enable.
pub(crate) const ST_BUSY: u32 = 1 << 0;
pub(crate) const ST_DESC_STOPPED: u32 = 1 << 1;
pub(crate) const ST_DESC_COMPLETED: u32 = 1 << 2;
pub(crate) const ST_ALIGN_MISMATCH: u32 = 1 << 3;
pub(crate) const ST_MAGIC_STOPPED: u32 = 1 << 4;
pub(crate) const ST_INVALID_LENGTH: u32 = 1 << 5;
pub(crate) const ST_IDLE_STOPPED: u32 = 1 << 6;
/// read_error[0] / write_error[0] / descr_error[0]: unsupported request (PCIe side) or decode
/// error (AXI side): the address maps to nothing.
pub(crate) const ST_READ_ERROR0: u32 = 1 << 9;
pub(crate) const ST_WRITE_ERROR0: u32 = 1 << 14;
pub(crate) const ST_DESC_ERROR0: u32 = 1 << 19;
/// Every status bit an event can log (1-6, 9-23).
pub(crate) const ST_LOGGABLE: u32 = 0x00ff_fe7e;
/// The bits that count as errors for the writeback's Sts_err bit.
pub(crate) const ST_ERRORS: u32 = 0x00ff_fe38;

/// What the model is built with. Defaults: one H2C and one C2H memory-mapped channel, IP
/// version 0x06 (2017.1 and later releases), no alignment constraints, 64 address bits.
/// `addr_align`, `len_granularity` and `addr_bits` all 0 present an alignments register that
/// reads 0, as some IP configurations do: the engine then has no constraints (libxdma.c
/// engine_alignments assumes 1, 1 and 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdmaModelConfig {
    pub h2c_channels: u8,
    pub c2h_channels: u8,
    pub card_size: u64,
    pub version: u8,
    pub addr_align: u8,
    pub len_granularity: u8,
    pub addr_bits: u8,
    /// Stepped (deterministic) mode for tests (issue #34): every due time is now, so a channel
    /// runs its whole chain inside the driver's run-bit write (or a test's `step`) and the order
    /// of events is the test's alone. Otherwise the channels progress with time at `DATAPATH`,
    /// whenever the host looks (`datapath.rs`).
    pub stepped: bool,
    /// AXI4-Stream channels (identifier bit 15) with the vendor's loopback example design as the
    /// far end (`stream.rs`), instead of memory-mapped channels over card memory.
    pub stream: bool,
    /// The function's INTx pin (config byte 0x3D): 1-4 for INTA-INTD, as the IP's "Legacy
    /// Interrupt Settings" choose.
    pub intx_pin: u8,
}

impl Default for XdmaModelConfig {
    fn default() -> Self {
        XdmaModelConfig {
            h2c_channels: 1,
            c2h_channels: 1,
            card_size: CARD_MEMORY_SIZE,
            version: 0x06,
            addr_align: 1,
            len_granularity: 1,
            addr_bits: 64,
            stepped: false,
            stream: false,
            intx_pin: 1,
        }
    }
}

/// What the engine latches on a rising edge of run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Start {
    pub addr: u64,
    pub adj: u32,
}

#[derive(Default)]
pub(crate) struct RunState {
    /// Rising edges of run so far.
    pub gen: u64,
    pub start: Start,
    /// The memory-mapped chain being served (`engine.rs`); None: idle.
    pub cursor: Option<super::chain::Cursor>,
}

/// A value alone on its cache line (128 bytes covers adjacent-line prefetch on x86-64 and the
/// 128-byte lines of some aarch64 cores).
#[repr(align(128))]
pub(crate) struct CacheLine<T>(pub T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One channel's registers plus its SGDMA block's.
pub(crate) struct Channel {
    pub dir: Direction,
    pub index: u8,
    pub control: AtomicU32,
    pub status: AtomicU32,
    pub completed: AtomicU32,
    pub wb_lo: AtomicU32,
    pub wb_hi: AtomicU32,
    pub ie_mask: AtomicU32,
    pub sg_lo: AtomicU32,
    pub sg_hi: AtomicU32,
    pub sg_adj: AtomicU32,
    pub sg_credits: AtomicU32,
    pub run: Mutex<RunState>,
    /// When the channel next completes something (model time): a poll looks here first.
    pub due: Due,
    /// Holds completions back under `PCIBENCH_SIM_SHAKE`.
    pub shaker: Shaker,
    /// Test hook: the engine accepts a run but moves nothing until released.
    pub stalled: AtomicBool,
    /// Test hook: after run is cleared the channel reads busy for this many more status reads
    /// (a long descriptor in flight finishing, PG195 control bit 0); `u32::MAX` never ends.
    pub linger: AtomicU32,
    /// Test hook: the engine writes no writeback (the completed count at +0x48 still moves).
    pub withhold: AtomicBool,
    pub last_fault: Mutex<Option<String>>,
    /// The performance monitor (+0xC0..+0xD0).
    pub perf: super::perf::Perf,
}

impl Channel {
    /// Channel `index` of `dir`; `unshaken`: a stepped model's, or one on a test's clock.
    pub fn new(dir: Direction, index: u8, unshaken: bool) -> Channel {
        Channel {
            dir,
            index,
            control: AtomicU32::new(0),
            status: AtomicU32::new(0),
            completed: AtomicU32::new(0),
            wb_lo: AtomicU32::new(0),
            wb_hi: AtomicU32::new(0),
            ie_mask: AtomicU32::new(0),
            sg_lo: AtomicU32::new(0),
            sg_hi: AtomicU32::new(0),
            sg_adj: AtomicU32::new(0),
            sg_credits: AtomicU32::new(0),
            run: Mutex::new(RunState::default()),
            due: Due::default(),
            shaker: Shaker::new(&format!("sim-xdma-{dir}{index}"), unshaken),
            stalled: AtomicBool::new(false),
            linger: AtomicU32::new(0),
            withhold: AtomicBool::new(false),
            last_fault: Mutex::new(None),
            perf: Default::default(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, RunState> {
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn wb_addr(&self) -> u64 {
        (self.wb_hi.load(Ordering::Relaxed) as u64) << 32 | self.wb_lo.load(Ordering::Relaxed) as u64
    }

    pub fn set_fault(&self, why: String) {
        *self.last_fault.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

/// State shared by the register front end and the channels' engines.
pub(crate) struct Shared {
    pub cfg: XdmaModelConfig,
    pub h2c: Vec<Channel>,
    pub c2h: Vec<Channel>,
    pub card: CardMemory,
    pub host: Arc<HostMap>,
    pub bus_master: AtomicBool,
    /// The time the channels progress by.
    pub clock: ModelClock,
    pub irq: Vec<AtomicU32>,
    pub config: Vec<AtomicU32>,
    pub common: Vec<AtomicU32>,
    /// The card's interrupts, raised on the vectors the IRQ block programs; what the model saw a
    /// driver do that the real engine would act on badly (an interrupt nothing services, a storm)
    /// is among its violations, which tests assert stay empty.
    pub irq_out: Arc<SimIrq>,
    /// What else the model saw a driver do that the real engine would act on badly, in words.
    pub violations: Mutex<Vec<String>>,
    /// The overrun fault (`sim::overrun`): each descriptor also writes one byte past its end.
    pub overrun: crate::sim::overrun::Overrun,
    /// The user logic's interrupt requests (usr_irq_req[15:0]), a test hook's.
    pub user_req: AtomicU32,
    /// When each direction's datapath is next free (H2C, C2H), in model time: its channels take
    /// turns on it (`Busy::reserve`).
    pub busy: [Busy; 2],
}

/// A datapath several channels share: the model time it is reserved until. A channel reserves
/// one descriptor at a time, when it fetches it, so channels with work take turns on it.
#[derive(Debug, Default)]
pub(crate) struct Busy(AtomicU64);

impl Busy {
    /// Reserve `ns` from `from` or from when the datapath is next free, whichever is later: the
    /// reservation's start.
    pub fn reserve(&self, from: u64, ns: u64) -> u64 {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let begin = from.max(cur);
            match self.0.compare_exchange_weak(cur, begin.saturating_add(ns), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return begin,
                Err(seen) => cur = seen,
            }
        }
    }
}

/// The IRQ block's channel interrupt enable register (0x10), as a word index into `Shared::irq`.
pub(crate) const IRQ_CHANNEL_ENABLE: usize = 0x10 / 4;
/// The IRQ block's first channel vector register (0xA0), as a word index into `Shared::irq`.
pub(crate) const IRQ_CHANNEL_VECTORS: usize = 0xa0 / 4;
/// The IRQ block's user interrupt enable (0x04) and first user vector register (0x80).
pub(crate) const IRQ_USER_ENABLE: usize = 1; // 0x04 / 4
pub(crate) const IRQ_USER_VECTORS: usize = 0x80 / 4;
/// User interrupt n is interrupt source `USER_SOURCE + n` of the card's `SimIrq`.
const USER_SOURCE: u32 = 16;

impl Shared {
    /// The datapath `dir`'s channels share.
    pub fn datapath_free(&self, dir: Direction) -> &Busy {
        &self.busy[usize::from(dir == Direction::C2h)]
    }

    /// The channel's bit in the IRQ block's channel registers: H2C channels first, then C2H
    /// (PG195 "IRQ Block Channel Interrupt Request"; libxdma.c numbers its engines the same way).
    pub fn irq_bit(&self, ch: &Channel) -> u32 {
        match ch.dir {
            Direction::H2c => ch.index as u32,
            Direction::C2h => self.cfg.h2c_channels as u32 + ch.index as u32,
        }
    }

    /// Re-evaluate `ch`'s interrupt request after its status, interrupt enable mask, IRQ block
    /// enable or vector changed. The channel requests while a status bit it logged is in its
    /// interrupt enable mask (PG195 "IRQ Block Channel Interrupt Request"; the request holds
    /// until the status is read-cleared, which is why libxdma's `engine_service` reads status
    /// through the RC alias); the request reaches the function's interrupt where the IRQ block's
    /// channel enable has the channel's bit ("Channel Interrupt Pending"), on the vector number
    /// the IRQ block's channel vector registers give it (0xA0.., five bits a byte). `SimIrq`
    /// signals it as the routed kind does, and flags one that nothing services.
    pub fn update_irq(&self, ch: &Channel) {
        let bit = self.irq_bit(ch);
        let (status, mask) = (ch.status.load(Ordering::Acquire), ch.ie_mask.load(Ordering::Acquire));
        let enabled = self.irq[IRQ_CHANNEL_ENABLE].load(Ordering::Acquire);
        let on = status & mask & ST_LOGGABLE != 0 && enabled & (1 << bit) != 0;
        let vector = self.irq[IRQ_CHANNEL_VECTORS + bit as usize / 4].load(Ordering::Acquire) >> (8 * (bit % 4)) & 0x1f;
        let name = || format!("{} channel {}", ch.dir.to_string().to_uppercase(), ch.index);
        let on = on && self.intx_line(vector, name);
        self.irq_out.set(bit, vector, on, || {
            format!(
                "{} channel {} raised its interrupt (status {:#x} in the interrupt enable mask {mask:#x}, IRQ block \
                 channel enable {enabled:#x})",
                ch.dir.to_string().to_uppercase(),
                ch.index,
                status & mask
            )
        });
    }

    /// Whether an interrupt on `vector` reaches the host (`intx::line`); a violation where not.
    fn intx_line(&self, vector: u32, what: impl FnOnce() -> String) -> bool {
        match super::intx::line(self.irq_out.signals(), self.cfg.intx_pin, vector, what) {
            Ok(()) => true,
            Err(v) => {
                self.violation(v);
                false
            }
        }
    }

    /// `update_irq` for every channel and user interrupt (an IRQ block register changed).
    pub fn update_irqs(&self) {
        self.h2c.iter().chain(&self.c2h).for_each(|c| self.update_irq(c));
        self.update_user_irqs();
    }

    /// The user interrupts: user request n raises its vector (IRQ block user vector registers,
    /// 0x80..) while its enable (0x04) is set, a level for as long as the design requests it
    /// (PG195 "IRQ Block User Interrupt Enable Mask", "User Interrupts").
    pub fn update_user_irqs(&self) {
        let (req, enabled) = (self.user_req.load(Ordering::Acquire), self.irq[IRQ_USER_ENABLE].load(Ordering::Acquire));
        for n in 0..16u32 {
            let word = self.irq[IRQ_USER_VECTORS + n as usize / 4].load(Ordering::Acquire);
            let vector = word >> (8 * (n % 4)) & 0x1f;
            let on = req & enabled & 1 << n != 0 && self.intx_line(vector, || format!("user interrupt {n}"));
            self.irq_out.set(USER_SOURCE + n, vector, on, || {
                format!(
                    "user interrupt {n} raised its interrupt (requested by the design, enabled at 0x2004 {enabled:#x})"
                )
            });
        }
    }

    /// The channels that request now (IRQ block "Channel Interrupt Request", +0x44), by bit.
    pub fn channel_requests(&self) -> u32 {
        self.h2c
            .iter()
            .chain(&self.c2h)
            .filter(|c| c.status.load(Ordering::Acquire) & c.ie_mask.load(Ordering::Acquire) & ST_LOGGABLE != 0)
            .fold(0, |a, c| a | 1 << self.irq_bit(c))
    }

    pub fn violation(&self, what: String) {
        self.violations.lock().unwrap_or_else(|e| e.into_inner()).push(what);
    }

    /// Model time now; stepped, every due time has come.
    pub fn now(&self) -> u64 {
        if self.cfg.stepped {
            u64::MAX
        } else {
            self.clock.now()
        }
    }

    /// Every channel, H2C first.
    pub fn channels(&self) -> impl Iterator<Item = &Channel> {
        self.h2c.iter().chain(&self.c2h)
    }

    pub fn channel(&self, dir: Direction, index: usize) -> Option<&Channel> {
        match dir {
            Direction::H2c => self.h2c.get(index),
            Direction::C2h => self.c2h.get(index),
        }
    }
}
