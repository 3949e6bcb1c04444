//! A user-space poll-mode driver for the AMD/Xilinx QDMA subsystem (PG302) physical function:
//! memory-mapped H2C and C2H queues through any `BarRegion` (VFIO type1 or no-IOMMU, the sim
//! card), with no kernel module. Written from the register layouts of the vendor's open QDMA
//! access code (see `regs.rs`); the sequence follows the vendor drivers:
//!
//! open: check the config BAR, its variant (`ip.rs`: a Versal CPM4 or an unknown variant is
//! refused) and capabilities, refuse what cannot work (before touching anything), write the
//! vendor's ring-size table, enable the error logging the vendor enables for that IP, map the
//! function's queues (FMAP), set the MM engines running, then start each queue: clear its
//! software, hardware and credit contexts, write the software context (MM, 32-byte descriptors,
//! status writeback), read it back and compare. A run posts each queue's descriptors into its
//! ring, rings the queue's PF doorbell every `doorbell_batch` descriptors (after a store fence,
//! the vendor's wmb before a PIDX update), and polls the status writeback for the consumer
//! index; the global error status is read every millisecond (and at the end of a shorter run; only the
//! leaves the driver enabled fail a run, others are notes). Any error, timeout, stop request or
//! drop stops every queue: first waiting (bounded) for what is in flight, as the vendor's
//! `qdma_queue_stop` does, then invalidating and clearing the contexts; drop also puts back the
//! FMAP, engine run bits, error enables and ring-size table as they were found.

mod aggr;
#[cfg(test)]
mod aggr_tests;
#[cfg(test)]
mod conformance_tests;
pub(super) mod ctx;
#[cfg(test)]
mod design_tests;
pub mod driver;
pub(super) mod errors;
#[cfg(test)]
mod finding_tests;
pub(super) mod ip;
mod irq;
#[cfg(test)]
mod irq_tests;
#[cfg(test)]
mod linux_tests;
#[cfg(test)]
mod model_tests;
pub(super) mod perf;
mod posted;
pub mod probe;
mod queues;
pub(super) mod regs;
pub(super) mod ring;
mod run;
pub mod st;
pub(super) mod st_ctx;
#[cfg(test)]
mod st_irq_tests;
mod st_run;
mod st_setup;
#[cfg(test)]
mod st_tests;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;
pub mod trigger;
#[cfg(test)]
mod trigger_tests;
#[cfg(test)]
mod variant_tests;

use self::ctx::{ContextAccess, Sel};
use self::probe::probe;
use self::regs::*;
use self::ring::{Desc, Ring};
use crate::access::BarRegion;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, EngineCounters, Transfer, Work};
use crate::trace::Tracer;
use crate::{Error, Result};
use std::time::Duration;

pub use self::aggr::QdmaIntr;
pub use self::ctx::{Fmap, HwCtx, SwCtx};
pub use self::errors::ErrorRegs;
pub use self::ip::IpKind;
pub use self::probe::{find_config_bar, is_config_bar, probe as probe_info, QdmaInfo, XILINX_VENDOR};
pub use self::regs::{MIN_CONFIG_BAR_LEN, VENDOR_RING_SIZES};
pub use self::trigger::CmptTrigger;

/// The card window when none is given: 32 MiB. The IP has no register that says how much AXI-MM
/// memory sits behind it (the design decides), so a real card's window comes from --card-size;
/// sim-qdma's card is built with this much.
/// The name a row records the writeback interval under (`Engine::settings`).
pub const WRITEBACK_INTERVAL: &str = "writeback interval (GLBL_DSC_CFG[2:0])";
pub const DEFAULT_CARD_SIZE: u64 = 32 << 20;
/// The ring size used unless asked: the vendor's default table entry (2049).
pub const DEFAULT_RING_SIZE: u32 = 2048;
/// Most transfers one batch takes (32 MiB of descriptors at one per transfer).
const MAX_BATCH: usize = 1 << 20;
const ERRORS_EVERY: Duration = Duration::from_millis(1);
/// Between looks at the rings while draining.
const DRAIN_POLL: Duration = Duration::from_micros(100);

/// How the engine is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdmaOptions {
    pub queues: u16,
    /// Descriptors per ring (a global ring-size table entry minus one); None: 2048.
    pub ring_size: Option<u32>,
    /// Card (AXI) address of the window; `Transfer::card_addr` is an offset in it.
    pub card_addr: u64,
    pub card_size: u64,
    /// Descriptors posted per doorbell write.
    pub doorbell_batch: u32,
    /// How long a context command may stay busy (the vendor's 500 ms).
    pub context_timeout: Duration,
    /// How long stopping waits for descriptors in flight (the vendor's 1 s).
    pub drain_timeout: Duration,
    /// The card is the simulated one, whose monitor's clock and beat width are known.
    pub simulated: bool,
    /// How queues signal by interrupt (`--qdma-intr`): libqdma's direct or indirect mode.
    pub intr: QdmaIntr,
    /// When stream queues' completion rings report (`--cmpt-trigger`, `trigger.rs`).
    pub trigger: CmptTrigger,
}

impl Default for QdmaOptions {
    fn default() -> Self {
        QdmaOptions {
            queues: 1,
            ring_size: None,
            card_addr: 0,
            card_size: DEFAULT_CARD_SIZE,
            doorbell_batch: 32,
            context_timeout: IND_BUSY_TIMEOUT,
            drain_timeout: DRAIN_TIMEOUT,
            simulated: false,
            intr: QdmaIntr::Direct,
            trigger: CmptTrigger::default(),
        }
    }
}

/// What open found and changed, put back on drop.
#[derive(Default)]
struct Saved {
    fmap: Option<Fmap>,
    masks: Option<[u32; 3]>,
    mm_err_enable: [Option<u32>; 2],
    mm_control: [Option<u32>; 2],
    ring_table: Option<Vec<u32>>,
    /// Performance settings as found (offset, value), before the vendor's were written.
    perf: Vec<(u64, u32)>,
    /// GLBL_ERR_INT as found, before the error interrupt was routed to this function.
    err_int: Option<u32>,
}

/// Descriptors for each ring, and where a run has got to in them.
#[derive(Default)]
struct Prepared {
    per_ring: Vec<Vec<Desc>>,
    next: Vec<usize>,
    /// Open loop (`posted`): descriptors completed per ring short of a whole transfer.
    carry: Vec<u64>,
}

/// The driver for one QDMA physical function's MM queues.
pub struct QdmaEngine {
    bar: Box<dyn BarRegion>,
    info: QdmaInfo,
    opts: QdmaOptions,
    qbase: u32,
    ring_idx: u8,
    rings: Vec<Ring>,
    dirs: Vec<Direction>,
    /// The FMAP found at open; None once the device is taken (its settings saved in `saved`).
    found_fmap: Option<Fmap>,
    /// The queues are programmed and may run.
    started: bool,
    /// Open-loop reaps since open, to look at the error status every so many.
    reaps: u32,
    saved: Saved,
    prepared: Option<Prepared>,
    notes: Vec<String>,
    /// Errors seen that fail no run (bits pcibench did not enable, corrected ECC), for
    /// `take_notes`; each distinct one once.
    unwatched: Vec<String>,
    /// The GLBL_ERR_STAT bits outside the watched ones last noted.
    unwatched_glbl: u32,
    /// Where descriptors and status writebacks are reported (`--trace`), taken from the BAR.
    trace: Option<Tracer>,
    /// Direct interrupt mode (`irq.rs`): the MSI-X vectors routed, which the queues share.
    irq_vectors: Option<u32>,
    /// Indirect interrupt mode (`aggr.rs`): the function's interrupt ring; None in direct mode.
    aggr: Option<aggr::IntrRing>,
    /// Stream mode (`st.rs`): the example design and the completion rings; None for MM.
    stream: Option<st_run::Stream>,
    saved_st: st_setup::SavedSt,
    /// Owns the ring memory; declared after `rings` so it is dropped after them.
    _ring_mem: Vec<Box<dyn DmaBuffer>>,
}

/// Ring a PF doorbell. The queue is function-relative, as the vendor writes it
/// (`qdma_queue_pidx_update` gets `descq->conf.qidx`), where PG302 speaks of an absolute queue.
fn doorbell(bar: &dyn BarRegion, queue: u16, dir: Direction, pidx: u32, arm: bool) -> Result<()> {
    let reg = if dir == Direction::H2c { DB_H2C_PIDX } else { DB_C2H_PIDX };
    // The descriptors must be in memory before the engine sees the new producer index
    // (`qdma_queue_pidx_update`: qdma_io_wmb(), then the write).
    crate::mmio::store_fence();
    let arm = if arm { DB_IRQ_ARM } else { 0 };
    wr(bar, R_PF_DOORBELLS + queue as u64 * DB_STEP + reg, pidx & DB_PIDX | arm)
}

/// The table index for `want` descriptors per ring, or a one-line refusal naming the sizes.
fn ring_index(entries: &[u32], want: Option<u32>) -> Result<u8> {
    let want = want.unwrap_or(DEFAULT_RING_SIZE);
    if let Some(i) = entries.iter().position(|e| *e >= 3 && e - 1 == want) {
        return Ok(i as u8);
    }
    let sizes: Vec<String> = entries.iter().filter(|e| **e >= 3).map(|e| (e - 1).to_string()).collect();
    Err(Error::usage(format!(
        "--ring-size {want} is not in the card's global ring-size table as pcibench loads it (the vendor driver's, \
         0x204-0x240): use one of {}",
        sizes.join(", ")
    )))
}

impl QdmaEngine {
    /// Probe the QDMA behind `bar`, check `opts` against it and allocate the rings. Nothing is
    /// written to the device (one context read aside): `start`, or the first run, takes it.
    pub fn new(bar: Box<dyn BarRegion>, alloc: &dyn DmaAllocator, opts: QdmaOptions) -> Result<QdmaEngine> {
        Self::open(bar, None, alloc, opts)
    }

    /// The same for ST queues, driven against the vendor's example design behind `user` (the
    /// function's user BAR).
    pub fn new_stream(
        bar: Box<dyn BarRegion>,
        user: Box<dyn BarRegion>,
        alloc: &dyn DmaAllocator,
        opts: QdmaOptions,
    ) -> Result<QdmaEngine> {
        Self::open(bar, Some(st::ExampleDesign { bar: user }), alloc, opts)
    }

    fn open(
        bar: Box<dyn BarRegion>,
        ex: Option<st::ExampleDesign>,
        alloc: &dyn DmaAllocator,
        opts: QdmaOptions,
    ) -> Result<QdmaEngine> {
        let info = probe(&*bar)?;
        if let Some(why) = info.ip.refusal(info.misc_cap) {
            return Err(Error::Unsupported(why));
        }
        let streaming = ex.is_some();
        if streaming && !info.st_h2c && !info.st_c2h {
            return Err(Error::Unsupported(format!(
                "the QDMA in BAR{} has no stream engine (GLBL2_CHANNEL_MDMA {:#x}): it cannot run ST queues",
                info.bar,
                rd(&*bar, R_CHANNEL_MDMA)?
            )));
        }
        if !streaming && !info.mm_h2c && !info.mm_c2h && (info.st_h2c || info.st_c2h) {
            return Err(Error::Unsupported(format!(
                "the QDMA in BAR{} has stream engines only (GLBL2_CHANNEL_MDMA {:#x}); {}",
                info.bar,
                rd(&*bar, R_CHANNEL_MDMA)?,
                st::no_far_end()
            )));
        }
        if !streaming && !info.mm_h2c && !info.mm_c2h {
            return Err(Error::Unsupported(format!(
                "the QDMA in BAR{} has no memory-mapped engine (GLBL2_CHANNEL_MDMA {:#x}); pcibench drives MM queues only",
                info.bar,
                rd(&*bar, R_CHANNEL_MDMA)?
            )));
        }
        if opts.card_size == 0 || opts.card_addr.checked_add(opts.card_size).is_none() {
            return Err(Error::usage(format!(
                "card window {:#x} + {:#x} is empty or overflows: give --card-size (and --card-addr) for the card's memory",
                opts.card_addr, opts.card_size
            )));
        }
        // The vendor always writes its default table (`*_set_default_global_csr` at device init),
        // whatever the card holds; so does `take_device`.
        let ring_idx = ring_index(&VENDOR_RING_SIZES, opts.ring_size)?;
        let slots = VENDOR_RING_SIZES[ring_idx as usize] - 1;
        let ctx = ContextAccess { bar: &*bar, qid_bits: info.ip.qid_bits(), timeout: opts.context_timeout };
        let fmap = Fmap::from_words(&ctx.read(Sel::Fmap, info.func as u32)?, info.ip);
        let qbase = fmap.qbase;
        let room = info.max_queues.saturating_sub(qbase).min((1 << info.ip.qid_bits()) - qbase);
        if opts.queues == 0 || opts.queues as u32 > room {
            return Err(Error::usage(format!(
                "--queues {} is more than function {} has: the QDMA has {} queues and this function's start at {qbase} \
                 (FMAP), so at most {room}",
                opts.queues, info.func, info.max_queues
            )));
        }
        let has = |d: Direction| if streaming { info.has_st(d) } else { info.has(d) };
        let dirs: Vec<Direction> = [Direction::H2c, Direction::C2h].into_iter().filter(|d| has(*d)).collect();
        let wanted: Vec<(u16, Direction)> = (0..opts.queues).flat_map(|q| dirs.iter().map(move |d| (q, *d))).collect();
        for (q, dir) in &wanted {
            ctx.refuse_in_use(info.func as u32, qbase + *q as u32, *dir)?;
        }
        let (mut ring_mem, mut rings) = ring::allocate(alloc, &wanted, slots)?;
        let stream = match ex {
            Some(ex) => Some(st_setup::stream_rings(ex, alloc, &mut rings, &mut ring_mem, slots, info.ip)?),
            None => None,
        };
        let aggr = match opts.intr {
            QdmaIntr::Aggregated => Some(aggr::IntrRing::allocate(alloc, info.func as u32)?),
            QdmaIntr::Direct => None,
        };
        let trace = bar.tracer().cloned();
        Ok(QdmaEngine {
            bar,
            info,
            opts,
            qbase,
            ring_idx,
            rings,
            dirs,
            found_fmap: Some(fmap),
            started: false,
            reaps: 0,
            saved: Saved::default(),
            prepared: None,
            notes: Vec::new(),
            unwatched: Vec::new(),
            unwatched_glbl: 0,
            trace,
            irq_vectors: None,
            aggr,
            stream,
            saved_st: st_setup::SavedSt::default(),
            _ring_mem: ring_mem,
        })
    }

    /// Take the device (ring-size table, error logging, FMAP, MM engines) if not yet done, and
    /// start every queue. A failure leaves what was changed to be put back on drop.
    pub fn start(&mut self) -> Result<()> {
        if let Some(fmap) = self.found_fmap.take() {
            self.take_device(fmap)?;
        }
        if !self.started {
            self.start_queues()?;
        }
        Ok(())
    }

    fn ctx(&self) -> ContextAccess<'_> {
        ContextAccess { bar: &*self.bar, qid_bits: self.info.ip.qid_bits(), timeout: self.opts.context_timeout }
    }

    fn bar(&self) -> &dyn BarRegion {
        &*self.bar
    }

    pub fn info(&self) -> &QdmaInfo {
        &self.info
    }

    /// What open did that the user should know (a table loaded, errors cleared).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Descriptors per ring.
    pub fn ring_size(&self) -> u32 {
        self.rings.first().map_or(0, |r| r.slots)
    }

    /// The function's first hardware queue (FMAP).
    pub fn qbase(&self) -> u32 {
        self.qbase
    }

    pub fn set_doorbell_batch(&mut self, n: u32) {
        self.opts.doorbell_batch = n.max(1);
    }

    /// Software and hardware contexts of the function's queue `q` in `dir`, read back.
    pub fn queue_contexts(&self, q: u16, dir: Direction) -> Result<(SwCtx, HwCtx)> {
        let qid = self.qbase + q as u32;
        Ok((
            SwCtx::from_words(&self.ctx().read(Sel::Sw(dir), qid)?),
            HwCtx::from_words(&self.ctx().read(Sel::Hw(dir), qid)?),
        ))
    }

    fn ring_of(&self, q: u16, dir: Direction) -> Option<usize> {
        let d = self.dirs.iter().position(|x| *x == dir)?;
        let i = q as usize * self.dirs.len() + d;
        (i < self.rings.len()).then_some(i)
    }

    fn max_desc(&self) -> u64 {
        self.info.ip.max_desc(self.info.misc_cap)
    }
}

impl Engine for QdmaEngine {
    fn name(&self) -> &'static str {
        "qdma"
    }

    fn card_size(&self) -> u64 {
        self.opts.card_size
    }

    fn max_transfer(&self) -> u64 {
        self.opts.card_size
    }

    /// The AXI memory behind the engine is the design's: --card-size says how much.
    fn card_size_settable(&self) -> bool {
        true
    }

    fn queues(&self) -> u16 {
        self.opts.queues
    }

    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        self.prepare_batch(&[Work { buf, t: *t, queue: 0 }])
    }

    /// Build every transfer's descriptors (one per bus-contiguous piece of at most 28 bits),
    /// grouped by ring in order. Buffers must stay alive and in place until the last run.
    fn prepare_batch(&mut self, work: &[Work]) -> Result<()> {
        self.prepared = None;
        if work.is_empty() || work.len() > MAX_BATCH {
            return Err(Error::usage(format!("a QDMA batch holds 1 to {MAX_BATCH} transfers, not {}", work.len())));
        }
        let mut per_ring = vec![Vec::new(); self.rings.len()];
        if let Some(s) = self.stream.as_mut() {
            s.want.iter_mut().for_each(|w| *w = 0);
            s.len = None;
            for w in work {
                self.describe_stream(w, &mut per_ring)?;
            }
        }
        for w in work.iter().filter(|_| self.stream.is_none()) {
            self.describe(w, &mut per_ring)?;
        }
        let next = vec![0; per_ring.len()];
        self.prepared = Some(Prepared { per_ring, next, carry: Vec::new() });
        Ok(())
    }

    fn run(&mut self, timeout: Duration) -> Result<()> {
        // Back from interrupt mode: the queues restarted without their interrupt fields.
        self.set_interrupt_mode(None)?;
        self.submit()?;
        self.wait(timeout)
    }

    /// Memory-mapped and stream queues alike (`irq.rs`).
    fn completes_by_interrupt(&self) -> bool {
        true
    }

    /// The error vector, then a vector per ring (direct) or the interrupt ring's (aggregated).
    fn irq_request(&self) -> crate::access::IrqRequest {
        self.irq_wanted()
    }

    fn run_interrupt(&mut self, irq: &dyn crate::access::Interrupts, timeout: Duration) -> Result<()> {
        self.run_irq(irq, timeout)
    }

    fn posts(&self) -> bool {
        true
    }

    fn post(&mut self, queue: u16) -> Result<bool> {
        self.post_again(queue)
    }

    fn reap(&mut self, done: &mut [u32]) -> Result<()> {
        self.reap_posted(done)
    }

    fn stop(&mut self) -> Result<String> {
        if let Some(t) = &self.trace {
            t.stop(self.name());
        }
        if self.found_fmap.is_some() {
            return Ok("no queue was started".into());
        }
        // A card that no longer answers: every context command would wait out its timeout.
        if let Some(gone) = self.gone() {
            return Ok(format!("queues not stopped: {gone}"));
        }
        let errors = ErrorRegs::read(self.bar(), self.info.ip, self.info.mm_present())?;
        let left = self.stop_queues()?;
        let n = self.opts.queues;
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.to_string()).collect();
        let mut pending = if errors.any() { format!("; {}", errors.describe()) } else { String::new() };
        if left > 0 {
            pending.push_str(&format!("; {}", self.undrained(left)));
        }
        Ok(format!("{} queues 0-{} stopped and cleared{pending}", dirs.join(" and "), n - 1))
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.unwatched)
    }

    /// Takes the device first if no run has: the counters count from here.
    fn counters_start(&mut self) -> Result<()> {
        self.start()?;
        if self.stream.is_some() {
            return Ok(());
        }
        for dir in self.dirs.clone() {
            // Clear the counters now, then start them (`*_MM_PERF_MON_CTL`).
            wr(self.bar(), mm(dir, MM_PERF_CTL), PERF_IMM_CLEAR)?;
            wr(self.bar(), mm(dir, MM_PERF_CTL), PERF_IMM_START)?;
        }
        Ok(())
    }

    /// The writeback interval the queues run with (GLBL_DSC_CFG [2:0]): on soft 3.x and EQDMA 4.0
    /// whatever the previous driver left, and part of every open-loop latency (issue 50 item 9).
    fn settings(&mut self) -> Result<std::collections::BTreeMap<String, String>> {
        self.start()?;
        let v = rd(self.bar(), R_GLBL_DSC_CFG)?;
        let mut set: std::collections::BTreeMap<String, String> =
            [(WRITEBACK_INTERVAL.to_string(), (v & DSC_CFG_WB_ACC_INT).to_string())].into();
        if self.stream.is_some() {
            set.insert(trigger::CMPT_TRIGGER.to_string(), self.opts.trigger.describe(self.bar())?);
        }
        Ok(set)
    }

    /// The MM engines' performance monitor; stream queues have none pcibench reads.
    fn has_counters(&self) -> bool {
        self.stream.is_none()
    }

    fn stream_end(&mut self) -> Option<&mut dyn crate::dma::StreamEnd> {
        if self.stream.is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn counters_read(&mut self) -> Result<Vec<EngineCounters>> {
        let mut out = Vec::new();
        for dir in self.dirs.clone() {
            let bar = self.bar();
            let wide =
                |at: u64| -> Result<u64> { Ok(rd(bar, at)? as u64 | ((rd(bar, at + 4)? & PERF_HIGH) as u64) << 32) };
            let (cycles, beats) = (wide(mm(dir, MM_PERF_CYCLES))?, wide(mm(dir, MM_PERF_DATA))?);
            wr(bar, mm(dir, MM_PERF_CTL), 0)?;
            // The sim card's model counts nanoseconds and 64-byte beats (a 512-bit datapath); a
            // real QDMA's clock and width are its design's, which no register here reports.
            let sim = self.opts.simulated;
            out.push(EngineCounters {
                beat_bytes: sim.then_some(crate::sim::qdma::model::PERF_BEAT_BYTES),
                clock_hz: sim.then_some(crate::sim::qdma::model::PERF_CLOCK_HZ),
                ..EngineCounters::counts(dir, cycles, beats)
            });
        }
        Ok(out)
    }
}

impl Drop for QdmaEngine {
    /// Stop and clear the queues, then put the device back as it was found (best effort: there
    /// is no one left to report to).
    fn drop(&mut self) {
        if self.found_fmap.is_some() {
            return; // never taken: nothing was written
        }
        if self.gone().is_some() {
            return; // the card no longer answers: each context command would wait out its timeout
        }
        self.give_back();
    }
}
