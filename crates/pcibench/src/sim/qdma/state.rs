//! The sim QDMA's registers and state, shared by the register front end (`model.rs`) and
//! the MM engines (`engine.rs`). Offsets and fields common to every variant are those of
//! the QDMA soft IP (PG302) as the vendor's open access code names them (`qdma_soft_reg.h`,
//! `qdma_access_common.h` in Xilinx/dma_ip_drivers); what differs per variant is in `layout.rs`.

use super::super::card_memory::CardMemory;
use super::super::datapath::{Datapath, Due, ModelClock};
use super::super::host_map::HostMap;
use super::super::shake::Shaker;
use super::super::xdma::state::CacheLine;
use super::layout::{Ip, CPM4_FUNCTIONS};
use crate::direction::Direction;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The DMA (AXI) clock: the completion timer's cycles are of it too (`trigger.rs`).
pub(crate) const AXI_CLOCK_HZ: u64 = 250_000_000;
/// Bytes per counted data beat: a 512-bit datapath.
pub const PERF_BEAT_BYTES: u32 = 64;
/// The QDMA engine's datapath on the U280 (Gen3 x16): 512-bit AXI at 250 MHz (PG302 "Clocking":
/// axi_aclk 250 MHz at Gen3 x16; its AXI data width 512 bits), 16,000 MB/s per direction, each
/// 32-byte MM descriptor fetched over it too.
pub const DATAPATH: Datapath = Datapath {
    bytes_per_s: AXI_CLOCK_HZ * PERF_BEAT_BYTES as u64,
    desc_bytes: 32,
    basis: "QDMA (PG302): a 512-bit AXI datapath at 250 MHz, the U280's Gen3 x16 configuration's",
};

/// Length of the QDMA config BAR the model decodes (queue doorbells end at 0x18000 + 4096 × 16).
pub const QDMA_BAR_LEN: u64 = 256 << 10;
/// Card (AXI-MM) memory behind the sim card's QDMA engine.
pub const CARD_MEMORY_SIZE: u64 = 32 << 20;
/// The vendor driver's default global ring-size table (`qdma_set_default_global_csr`): each entry
/// counts the ring's descriptors plus the status writeback slot.
pub const VENDOR_RING_SIZES: [u32; 16] =
    [2049, 65, 129, 193, 257, 385, 513, 769, 1025, 1537, 3073, 4097, 6145, 8193, 12289, 16385];

// Global registers.
pub(crate) const R_ID: u32 = 0x000;
pub(crate) const R_BARLITE_EXT: u32 = 0x10c;
pub(crate) const R_CHANNEL_MDMA: u32 = 0x118;
pub(crate) const R_QDMA_CAP: u32 = 0x120;
pub(crate) const R_FUNC_RET: u32 = 0x12c;
pub(crate) const R_MISC_CAP: u32 = 0x134;
pub(crate) const R_RNG_SZ: u32 = 0x204;
pub(crate) const R_GLBL_ERR_STAT: u32 = 0x248;
pub(crate) const R_GLBL_ERR_MASK: u32 = 0x24c;
pub(crate) const R_DSC_ERR_STS: u32 = 0x254;
pub(crate) const R_DSC_ERR_MSK: u32 = 0x258;
pub(crate) const R_DSC_ERR_LOG0: u32 = 0x25c;
pub(crate) const R_DSC_ERR_LOG1: u32 = 0x260;
pub(crate) const R_TRQ_ERR_STS: u32 = 0x264;
pub(crate) const R_TRQ_ERR_MSK: u32 = 0x268;
pub(crate) const R_TRQ_ERR_LOG: u32 = 0x26c;
/// MM engine blocks: C2H at 0x1000, H2C at 0x1200 (channel 0).
pub(crate) const R_MM_C2H: u32 = 0x1000;
pub(crate) const R_MM_H2C: u32 = 0x1200;
/// MM_STATUS (0x40 in an MM engine's block): `eqdma_soft_reg.h` names only RUN [0] and leaves
/// [31:1] reserved, yet `eqdma_err_info[]` gives it as the MM errors' leaf status register, which
/// `eqdma_hw_error_process` reads and writes back before GLBL_ERR_STAT. The model shows its
/// latched MM error at bit 1 of the reserved field.
pub(crate) const MM_STATUS_LEAF: u32 = 1 << 1;

// GLBL_ERR_STAT bits every variant has.
pub(crate) const GE_DSC: u32 = 1 << 2;
pub(crate) const GE_TRQ: u32 = 1 << 3;
// MM error codes: the bit number of the matching ERR_CODE_ENABLE_MASK bit (vendor headers).
pub(crate) const MM_RD_UR_CA: u32 = 2;
pub(crate) const MM_C2H_RD_SLV: u32 = 1;
pub(crate) const MM_H2C_WR_DEC: u32 = 28;
pub(crate) const MM_C2H_WR_UR: u32 = 29;

// Indirect context command: busy [0], select [4:1], op [6:5], queue id from bit 7.
pub(crate) const SEL_SW_C2H: u32 = 0;
pub(crate) const SEL_CR_H2C: u32 = 5;
pub(crate) const SEL_FMAP: u32 = 12;
pub(crate) const OP_CLR: u32 = 0;
pub(crate) const OP_WR: u32 = 1;
pub(crate) const OP_RD: u32 = 2;
pub(crate) const OP_INV: u32 = 3;

// Hardware context word 1: descriptors pending, queue invalid with nothing pending.
pub(crate) const HW1_DSC_PND: u32 = 1 << 8;
pub(crate) const HW1_IDL_STP_B: u32 = 1 << 9;

// Software context word 1.
pub(crate) const SW1_QEN: u32 = 1 << 0;
pub(crate) const SW1_WBI_CHK: u32 = 1 << 2;
pub(crate) const SW1_WBI_INTVL: u32 = 1 << 3;
pub(crate) const SW1_BYPASS: u32 = 1 << 18;
pub(crate) const SW1_MM_CHN: u32 = 1 << 19;
pub(crate) const SW1_WBK_EN: u32 = 1 << 20;
pub(crate) const SW1_ERR_SHIFT: u32 = 26;
pub(crate) const SW1_ERR_WB_SENT: u32 = 1 << 28;
pub(crate) const SW1_IS_MM: u32 = 1 << 31;

/// The QDMA PF's interrupts: MSI-X only (a PF has up to 2048 vectors in the IP; the sim card's
/// table has 32), the table and PBA in the config BAR (qdma_soft_reg.h QDMA_TRQ_MSIX_TABLE, _PBA).
pub const IRQ: super::super::irq::Offers = super::super::irq::Offers {
    msix: 32,
    msi: 0,
    intx: false,
    pin: 0,
    intx_maskable: true,
    msix_table: 0x10000,
    msix_pba: 0x14000,
};

/// What the model is built with. Defaults: a QDMA soft IP (3.x register map, Vivado 2019.2),
/// MM and ST engines present, 2048 queues, function 0 with an empty FMAP, the vendor's ring-size
/// table already programmed, every error enable cleared (as after reset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdmaModelConfig {
    pub max_queues: u16,
    pub mm_h2c: bool,
    pub mm_c2h: bool,
    pub card_size: u64,
    pub func_id: u8,
    /// The global ring-size table at reset (zeros: an IP no driver has initialised).
    pub ring_sizes: [u32; 16],
    /// GLBL2_MISC_CAP (0x134): device type [31:28], Vivado release [27:24], IP type [23:20],
    /// RTL version [19:16]. It picks the variant (`layout::Ip`).
    pub misc_cap: u32,
    /// This function's FMAP at reset: (first queue, queue count).
    pub fmap_at_reset: (u32, u32),
    /// Reads of the context command register that still show busy after a command.
    pub ctxt_busy_reads: u32,
    /// Fetch descriptors in the doorbell write itself, so a driver that rings before its
    /// descriptors are in memory fetches stale ones (tests of doorbell ordering).
    pub fetch_on_doorbell: bool,
    /// Stepped (deterministic) mode for tests (issue #34): every due time is now, so the engines
    /// serve the queues inside the driver's doorbell and run-bit writes (or a test's `step`) and
    /// the order of events is the test's alone. Otherwise they progress with time at `DATAPATH`
    /// whenever the host looks (`datapath.rs`).
    pub stepped: bool,
    /// Stream queues with the vendor's example design behind them (`stream.rs`): ST doorbells
    /// are served, the user BAR is the design's registers.
    pub stream: bool,
    /// Benchmarks of the host's stream path: the far end moves no data (H2C packets are
    /// consumed unread, C2H packets write only their completion entries), so the card costs
    /// next to nothing. Data is then not verifiable.
    pub stream_no_data: bool,
}

impl Default for QdmaModelConfig {
    fn default() -> Self {
        QdmaModelConfig {
            max_queues: 2048,
            mm_h2c: true,
            mm_c2h: true,
            card_size: CARD_MEMORY_SIZE,
            func_id: 0,
            ring_sizes: VENDOR_RING_SIZES,
            misc_cap: 0x0200_0000,
            fmap_at_reset: (0, 0),
            ctxt_busy_reads: 1,
            fetch_on_doorbell: false,
            stepped: false,
            stream: false,
            stream_no_data: false,
        }
    }
}

/// One queue's context RAM entries (software, hardware, credit) in one direction.
#[derive(Debug, Clone, Default)]
pub(crate) struct QCtx {
    pub sw: [u32; 8],
    pub hw: [u32; 8],
    pub cr: [u32; 8],
    /// Bumped on every context command that changes this queue: an engine burst that began
    /// under an older generation must not write back into a ring the driver has since taken away.
    pub gen: u64,
    /// Descriptors the engine has fetched and not completed: their data may still move.
    pub in_flight: u32,
    /// Hardware context reads (a driver waiting for the queue to drain polls it).
    pub hw_reads: u64,
    /// Descriptors fetched at doorbell time (`fetch_on_doorbell`), in ring order (None: the
    /// fetch failed).
    pub fetched: std::collections::VecDeque<Option<[u8; 32]>>,
    /// A status writeback came while the queue's interrupt was enabled but not armed: the
    /// interrupt is raised when a PIDX update arms it (valid for the context generation held).
    pub irq_pending: Option<u64>,
    /// Model time of its last doorbell: its work is not there before.
    pub rung_at: u64,
}

impl QCtx {
    pub fn pidx(&self) -> u32 {
        self.sw[0] & 0xffff
    }
    pub fn cidx(&self) -> u32 {
        self.hw[0] & 0xffff
    }
    pub fn enabled(&self) -> bool {
        self.sw[1] & SW1_QEN != 0 && (self.sw[1] >> SW1_ERR_SHIFT) & 3 == 0
    }
    pub fn ring_base(&self) -> u64 {
        (self.sw[3] as u64) << 32 | self.sw[2] as u64
    }
    pub fn ring_idx(&self) -> usize {
        ((self.sw[1] >> 12) & 0xf) as usize
    }
}

/// One queue in one direction.
pub(crate) struct Queue {
    pub ctx: Mutex<QCtx>,
}

impl Queue {
    fn new() -> Queue {
        Queue { ctx: Mutex::new(QCtx::default()) }
    }

    pub fn lock(&self) -> MutexGuard<'_, QCtx> {
        self.ctx.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One direction's MM engine (channel 0): control, status, error code, performance monitor,
/// the doorbells waiting for it, and where it is in time.
pub(crate) struct Mm {
    pub present: bool,
    pub control: AtomicU32,
    pub completed: AtomicU32,
    pub err_enable: AtomicU32,
    pub err_code: AtomicU32,
    pub err_info: AtomicU32,
    /// The MM leaf's error status (EQDMA, CPM5): set with the error log, cleared only by a
    /// write back to MM_STATUS, as the vendor's `eqdma_hw_error_process` clears it; while set,
    /// the engine's GLBL_ERR_STAT bit cannot be cleared.
    pub leaf: AtomicU32,
    pub perf_ctl: AtomicU32,
    /// Cycles counted before the current counting period, and when it started (model time;
    /// 1 ns = 1 cycle).
    pub perf: Mutex<(u64, Option<u64>)>,
    pub perf_beats: AtomicU64,
    /// One bit per queue with doorbells the engine has not served.
    pub pending: Vec<AtomicU64>,
    /// Where the engine is in time (`engine.rs`).
    pub eng: Mutex<super::burst::EngState>,
    /// When it next completes a descriptor (model time).
    pub due: Due,
    /// A hands-off thread (`datapath::set_hands_off`) made the engine due while it may have been
    /// serving: it stays due when that serve ends.
    pub poked: AtomicBool,
    /// The run bit's rising edge a hands-off thread could not give the engine (its lock was held):
    /// model time, 0 for none.
    pub started_at: AtomicU64,
    /// Holds completions back under `PCIBENCH_SIM_SHAKE`.
    pub shaker: Shaker,
    /// Test hook: the engine accepts doorbells but moves nothing (a hung engine).
    pub stalled: AtomicBool,
    pub last_fault: Mutex<Option<String>>,
    /// Test hook, per queue: the engine holds fetched descriptors in flight until released.
    pub held: Vec<AtomicBool>,
    /// Test hook: the engine writes no status back (the consumer index in the hardware context
    /// still moves), as when a writeback is still on its way or its interval has not come.
    pub withhold: AtomicBool,
}

impl Mm {
    fn new(present: bool, queues: usize, name: &str, unshaken: bool) -> Mm {
        Mm {
            present,
            control: AtomicU32::new(0),
            completed: AtomicU32::new(0),
            err_enable: AtomicU32::new(0),
            err_code: AtomicU32::new(0),
            err_info: AtomicU32::new(0),
            leaf: AtomicU32::new(0),
            perf_ctl: AtomicU32::new(0),
            perf: Mutex::new((0, None)),
            perf_beats: AtomicU64::new(0),
            pending: (0..queues.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            eng: Mutex::new(Default::default()),
            due: Due::default(),
            poked: AtomicBool::new(false),
            started_at: AtomicU64::new(0),
            shaker: Shaker::new(name, unshaken),
            stalled: AtomicBool::new(false),
            last_fault: Mutex::new(None),
            held: (0..queues).map(|_| AtomicBool::new(false)).collect(),
            withhold: AtomicBool::new(false),
        }
    }

    pub fn running(&self) -> bool {
        self.present && self.control.load(Ordering::Acquire) & 1 != 0
    }

    pub fn set_fault(&self, why: String) {
        *self.last_fault.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    pub fn counting(&self) -> bool {
        self.perf_ctl.load(Ordering::Acquire) & (1 << 3) != 0
    }

    /// Cycles counted by model time `now` (nanoseconds of counting time).
    pub fn perf_cycles(&self, now: u64) -> u64 {
        let p = self.perf.lock().unwrap_or_else(|e| e.into_inner());
        p.0 + p.1.map_or(0, |t| now.saturating_sub(t))
    }

    /// Mark queue `qid` as having work.
    pub fn kick(&self, qid: usize) {
        self.pending[qid / 64].fetch_or(1 << (qid % 64), Ordering::AcqRel);
    }
}

/// The indirect context access registers.
#[derive(Debug, Default)]
pub(crate) struct Indirect {
    pub data: [u32; 8],
    pub mask: [u32; 8],
    pub cmd: u32,
    pub busy_reads_left: u32,
}

/// An interrupt ring entry left for the clock thread: the queue's direction, the queue, the
/// ring, and the queue's (pidx, cidx).
pub(crate) type LaterEntry = (Direction, usize, u32, (u32, u32));

/// State shared by the register front end and the engines.
pub(crate) struct Shared {
    pub cfg: QdmaModelConfig,
    pub ip: Ip,
    pub h2c: Mm,
    pub c2h: Mm,
    pub q_h2c: Vec<Queue>,
    pub q_c2h: Vec<Queue>,
    pub card: CardMemory,
    pub host: Arc<HostMap>,
    pub bus_master: AtomicBool,
    /// The time the engines progress by.
    pub clock: ModelClock,
    /// Global registers 0x000-0x2fc as words (ring sizes, scratch, error status and masks).
    pub glbl: Vec<AtomicU32>,
    pub ind: Mutex<Indirect>,
    /// Test hook: context commands never finish (busy stays set).
    pub ctxt_stuck: AtomicBool,
    /// Context RAM the model stores but does not act on (prefetch, completion, interrupt,
    /// timer, FMAP of other functions), by (select, index).
    pub other_ctx: Mutex<HashMap<(u32, u32), [u32; 8]>>,
    /// This function's FMAP: first queue and queue count.
    pub fmap: Mutex<(u32, u32)>,
    /// The performance setting registers of `Ip::perf_regs`, by offset (0 at reset).
    pub perf_regs: Mutex<HashMap<u32, u32>>,
    /// CPM4's direct FMAP registers, one per function.
    pub direct_fmap: Vec<AtomicU32>,
    /// What the driver did that the real IP would not accept, in words.
    pub violations: Mutex<Vec<String>>,
    /// The overrun fault (`sim::overrun`): each descriptor also writes one byte past its end.
    pub overrun: crate::sim::overrun::Overrun,
    /// Test hooks: GLBL_ERR_STAT reads so far, and descriptor-engine error bits to log with the
    /// next status writeback (an error in a run's last moment).
    pub err_stat_reads: std::sync::atomic::AtomicU64,
    pub error_at_writeback: AtomicU32,
    /// The function's MSI-X vectors (QDMA signals queues and errors by MSI-X only).
    pub irq_out: Arc<super::super::irq::SimIrq>,
    /// Register writes the driver made, on a line of its own: the driver's doorbell writes
    /// bump it, and a second host thread driving the card must not pay for that (false sharing).
    pub writes: CacheLine<AtomicU64>,
    /// Stream queues and the example design (`stream.rs`).
    pub st: Mutex<super::st_state::StState>,
    /// GLBL_ERR_INT (0xB04): the error interrupt's function, vector and arm (`intr.rs`).
    pub err_int: AtomicU32,
    /// Each interrupt ring's consumer index as the driver last wrote it (`intr.rs`).
    pub int_cidx: Mutex<HashMap<u32, u32>>,
    /// Interrupt ring entries a hands-off access raised (`intr.rs` aggregate); the clock thread
    /// writes them.
    pub aggregate_later: Mutex<Vec<LaterEntry>>,
}

impl Shared {
    pub fn new(cfg: QdmaModelConfig, card: CardMemory, host: Arc<HostMap>, clock: ModelClock) -> Shared {
        let n = cfg.max_queues as usize;
        let glbl: Vec<AtomicU32> = (0..0x300 / 4).map(|_| AtomicU32::new(0)).collect();
        for (i, v) in cfg.ring_sizes.iter().enumerate() {
            glbl[(R_RNG_SZ as usize) / 4 + i].store(v & 0xffff, Ordering::Relaxed);
        }
        let ip = Ip::from_misc_cap(cfg.misc_cap);
        let unshaken = cfg.stepped || clock.set_by_test();
        let fmap = cfg.fmap_at_reset;
        let (base, max) = fmap;
        let direct_fmap: Vec<AtomicU32> = (0..CPM4_FUNCTIONS).map(|_| AtomicU32::new(0)).collect();
        let mut other = HashMap::new();
        if ip == Ip::Cpm4 {
            // QDMA_CPM4_TRQ_SEL_FMAP_*: qbase [10:0], qmax [22:11].
            direct_fmap[cfg.func_id as usize].store((base & 0x7ff) | (max & 0xfff) << 11, Ordering::Relaxed);
        } else {
            let (bm, mm) = ip.fmap_fields();
            let mut w = [0; 8];
            (w[0], w[1]) = (base & bm, max & mm);
            other.insert((SEL_FMAP, cfg.func_id as u32), w);
        }
        Shared {
            ip,
            h2c: Mm::new(cfg.mm_h2c, n, "sim-qdma-h2c", unshaken),
            c2h: Mm::new(cfg.mm_c2h, n, "sim-qdma-c2h", unshaken),
            q_h2c: (0..n).map(|_| Queue::new()).collect(),
            q_c2h: (0..n).map(|_| Queue::new()).collect(),
            cfg,
            card,
            host,
            bus_master: AtomicBool::new(false),
            clock,
            glbl,
            ind: Mutex::new(Indirect::default()),
            ctxt_stuck: AtomicBool::new(false),
            other_ctx: Mutex::new(other),
            fmap: Mutex::new(fmap),
            perf_regs: Mutex::new(ip.perf_regs().iter().map(|r| (*r, 0)).collect()),
            direct_fmap,
            violations: Mutex::new(Vec::new()),
            overrun: Default::default(),
            err_stat_reads: Default::default(),
            error_at_writeback: AtomicU32::new(0),
            irq_out: Arc::new(super::super::irq::SimIrq::new("QDMA", IRQ)),
            writes: CacheLine(AtomicU64::new(0)),
            st: Mutex::new(super::st_state::StState::default()),
            err_int: AtomicU32::new(0),
            int_cidx: Mutex::new(HashMap::new()),
            aggregate_later: Mutex::new(Vec::new()),
        }
    }

    /// Model time now; stepped, every due time has come.
    pub fn now(&self) -> u64 {
        if self.cfg.stepped {
            u64::MAX
        } else {
            self.clock.now()
        }
    }

    pub fn mm(&self, dir: Direction) -> &Mm {
        match dir {
            Direction::H2c => &self.h2c,
            Direction::C2h => &self.c2h,
        }
    }

    pub fn queue(&self, dir: Direction, qid: usize) -> Option<&Queue> {
        match dir {
            Direction::H2c => self.q_h2c.get(qid),
            Direction::C2h => self.q_c2h.get(qid),
        }
    }

    pub fn glbl(&self, reg: u32) -> &AtomicU32 {
        &self.glbl[(reg / 4) as usize]
    }

    /// Ring entries (descriptors plus the status slot) for ring-size index `idx`.
    pub fn ring_entries(&self, idx: usize) -> u32 {
        self.glbl(R_RNG_SZ + 4 * idx as u32).load(Ordering::Relaxed) & 0xffff
    }

    /// Note something the real IP would not accept.
    pub fn violation(&self, what: String) {
        self.violations.lock().unwrap_or_else(|e| e.into_inner()).push(what);
    }

    /// Log a descriptor-engine error for `qid`: the leaf bits where enabled, the first error's
    /// logs (`Ip::dsc_logs`), and the global DSC bit where enabled.
    pub fn dsc_error(&self, dir: Direction, qid: u32, cidx: u32, bits: u32) {
        let logged = bits & self.glbl(R_DSC_ERR_MSK).load(Ordering::Acquire);
        if logged == 0 {
            return;
        }
        let sts = self.glbl(R_DSC_ERR_STS).fetch_or(logged, Ordering::AcqRel);
        if sts == 0 {
            let (log0, log1) = self.ip.dsc_logs(dir, qid, cidx, logged);
            self.glbl(R_DSC_ERR_LOG0).store(log0, Ordering::Release);
            self.glbl(R_DSC_ERR_LOG1).store(log1, Ordering::Release);
        }
        self.global_error(GE_DSC);
    }

    /// Log a target-access (register) error: an unmapped address or a queue outside the FMAP.
    pub fn trq_error(&self, bits: u32, addr: u32) {
        let logged = bits & self.glbl(R_TRQ_ERR_MSK).load(Ordering::Acquire);
        if logged == 0 {
            return;
        }
        if self.glbl(R_TRQ_ERR_STS).fetch_or(logged, Ordering::AcqRel) == 0 {
            self.glbl(R_TRQ_ERR_LOG).store(self.ip.trq_log(self.cfg.func_id as u32, addr), Ordering::Release);
        }
        self.global_error(GE_TRQ);
    }

    /// Log an MM engine data error (`code` the number of its ERR_CODE_ENABLE bit) where the IP's
    /// header defines the MM error registers; soft 3.x reports it as the descriptor engine's
    /// "DMA engine error" instead, the one leaf the vendor's 3.x error handling reads.
    pub fn mm_error(&self, dir: Direction, write: bool, code: u32, qid: u32, cidx: u32) {
        let Some((err_code, info)) = self.ip.mm_logs(dir, write, code, qid, cidx) else {
            return self.dsc_error(dir, qid, cidx, self.ip.dsc_dma());
        };
        let mm = self.mm(dir);
        if mm.err_enable.load(Ordering::Acquire) & (1 << code) == 0 {
            return;
        }
        let valid = |c: u32, i: u32| if self.ip == Ip::Cpm4 { c & 1 << 17 != 0 } else { i & 1 << 31 != 0 };
        if !valid(mm.err_code.load(Ordering::Acquire), mm.err_info.load(Ordering::Acquire)) {
            mm.err_code.store(err_code, Ordering::Release);
            mm.err_info.store(info, Ordering::Release);
        }
        if self.ip.mm_leaf_in_status() {
            mm.leaf.store(MM_STATUS_LEAF, Ordering::Release);
        }
        self.global_error(self.ip.glbl_mm(dir));
    }

    /// A context command the IP refuses: flagged, and logged where the IP has a bit for it.
    pub fn context_error(&self, what: String) {
        self.violation(what);
        self.global_error(self.ip.glbl_ind_ctxt_cmd());
    }

    pub fn global_error(&self, bit: u32) {
        let enabled = bit & self.glbl(R_GLBL_ERR_MASK).load(Ordering::Acquire);
        self.glbl(R_GLBL_ERR_STAT).fetch_or(enabled, Ordering::AcqRel);
        if enabled != 0 {
            self.error_interrupt();
        }
    }

    /// GLBL_ERR_STAT written 1-to-clear: a bit whose leaf still holds an error comes straight
    /// back (the global register aggregates its leaves; an MM leaf is cleared through MM_STATUS).
    pub fn clear_global(&self, value: u32) {
        self.glbl(R_GLBL_ERR_STAT).fetch_and(!value, Ordering::AcqRel);
        for dir in [Direction::H2c, Direction::C2h] {
            if self.mm(dir).leaf.load(Ordering::Acquire) != 0 {
                self.global_error(self.ip.glbl_mm(dir));
            }
        }
        if self.st.lock().unwrap_or_else(|e| e.into_inner()).c2h_err != 0 {
            self.global_error(super::st_state::GE_C2H_ST);
        }
    }
}
