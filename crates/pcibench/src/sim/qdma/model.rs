//! The sim card `sim-qdma`'s DMA engine: a register model of the AMD/Xilinx QDMA subsystem
//! (PG302, physical function) with memory-mapped queues, written from the register layouts the
//! vendor's open QDMA access code uses, per IP variant (`layout.rs`: the soft IP 3.x by default,
//! EQDMA, Versal CPM5, and a Versal CPM4 a driver must refuse or drive by its own layout).
//!
//! What it models: the identifier and capability registers; the global ring-size table; the
//! indirect context registers (data, mask, command) with busy semantics over a context RAM of
//! software, hardware and credit contexts per queue and direction plus the function map (FMAP;
//! a direct register on CPM4): `context.rs`; the PF queue doorbells (producer index per queue,
//! mapped through the FMAP); the MM engines' run control, completed count, error code and
//! performance monitor; the global, descriptor and target-access error registers (write 1 to
//! clear, logged only where enabled, in the variant's layout). The engines themselves
//! (descriptor fetch, data movement, status writeback) progress with time at the IP's datapath,
//! whenever the host looks (`engine.rs`; `datapath.rs` says why): every register access brings
//! them to now first. Interrupts (`intr.rs`): each queue's MSI-X vector at a status writeback while
//! armed, the interrupt aggregation rings, the error interrupt. Stream queues, their completion
//! rings and the example design: `stream.rs` (the `sim-qdma-st` card).
//!
//! What the real IP would not accept is recorded as a protocol violation (`violations`): a
//! register the variant does not have, a context select it does not have, error enables its
//! header does not define, a context command while one is busy, and a queue's context changed
//! while descriptors it fetched are in flight.

use super::super::card_memory::CardMemory;
use super::super::datapath::{self, ModelClock};
use super::super::host_map::HostMap;
use super::super::mem::Pages;
use super::layout::{Ip, CPM4_FMAP, CPM4_FUNCTIONS, DOORBELLS};
use super::state::*;
pub use super::state::{QdmaModelConfig, CARD_MEMORY_SIZE, QDMA_BAR_LEN, VENDOR_RING_SIZES};
use crate::direction::Direction;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The performance monitor's clock: one cycle per nanosecond of counting time.
pub const PERF_CLOCK_HZ: f64 = 1e9;
// The data beat lives with the engine state (state.rs), which the engine counts in.
pub use super::state::PERF_BEAT_BYTES;

/// The QDMA register block and engines of one sim card.
pub struct QdmaModel {
    pub(super) shared: Arc<Shared>,
}

/// Bits of a write-1-to-clear register after writing `v`.
fn w1c(reg: &std::sync::atomic::AtomicU32, v: u32) -> u32 {
    reg.fetch_and(!v, Ordering::AcqRel) & !v
}

impl QdmaModel {
    pub fn new(cfg: QdmaModelConfig, host: Arc<HostMap>) -> Result<QdmaModel> {
        QdmaModel::with_clock(cfg, host, ModelClock::real())
    }

    /// The model on `clock`'s time (a test's fake clock).
    pub fn with_clock(cfg: QdmaModelConfig, host: Arc<HostMap>, clock: ModelClock) -> Result<QdmaModel> {
        // A 12-bit capability field; CPM5's 4096 queues read as 0xfff.
        let most = if Ip::from_misc_cap(cfg.misc_cap) == Ip::Cpm5 { 4096 } else { 4095 };
        if cfg.max_queues == 0 || cfg.max_queues > most {
            return Err(Error::usage(format!("this QDMA has 1 to {most} queues, not {}", cfg.max_queues)));
        }
        let len = usize::try_from(cfg.card_size)
            .map_err(|_| Error::usage(format!("card memory of {:#x} bytes is too large", cfg.card_size)))?;
        let card = CardMemory::new(Pages::new("card memory", len)?, cfg.card_size);
        Ok(QdmaModel { shared: Arc::new(Shared::new(cfg, card, host, clock)) })
    }

    pub fn config(&self) -> &QdmaModelConfig {
        &self.shared.cfg
    }

    /// Bring both engines to model time now: what is due completes, in this thread (the host
    /// looked). A poll's whole cost when nothing is due: a clock read and two atomics.
    pub fn advance(&self) {
        if datapath::hands_off() {
            return;
        }
        let s = &*self.shared;
        if crate::sim::stage::clock_thread() {
            // What hands-off accesses left for this thread (only serve's clock thread has any).
            s.aggregate_now();
        }
        let now = s.now();
        for dir in [Direction::H2c, Direction::C2h] {
            if !s.mm(dir).due.by(now) {
                continue;
            }
            if s.cfg.stream {
                s.st_advance(dir, now);
            } else {
                super::engine::serve(s, dir, now, false);
            }
        }
        if crate::sim::stage::clock_thread() {
            // Interrupt ring entries raised under a queue's lock, sent now that none is held.
            s.send_staged(crate::sim::stage::take_afterwards());
        }
    }

    /// How long until an engine next completes something (None: nothing under way).
    pub fn due_in(&self) -> Option<Duration> {
        let s = &*self.shared;
        datapath::wait_for(s.clock.now(), [s.h2c.due.get(), s.c2h.due.get()])
    }

    /// A 32-bit register read at `offset` (bounds and alignment are the BAR's job).
    pub fn read32(&self, offset: u64) -> u32 {
        self.advance();
        let off = offset as u32;
        let s = &*self.shared;
        let mdma = |on: bool, bit: u32| if on { 1 << bit } else { 0 };
        if let Some(v) = self.read_indirect(off) {
            return v;
        }
        if let Some(f) = self.cpm4_fmap_index(off) {
            return s.direct_fmap[f].load(Ordering::Acquire);
        }
        if let Some(v) = s.perf_regs.lock().unwrap_or_else(|e| e.into_inner()).get(&off) {
            return *v;
        }
        if let Some(v) = s.st_read(off) {
            return v;
        }
        match off {
            R_ID => 0x1fd3_0000,
            R_BARLITE_EXT => 0x04 << (6 * (s.cfg.func_id as u32 % 4)),
            R_CHANNEL_MDMA => mdma(s.cfg.mm_h2c, 0) | mdma(s.cfg.mm_c2h, 8) | 1 << 16 | 1 << 17,
            R_QDMA_CAP => (s.cfg.max_queues as u32).min(0xfff),
            R_FUNC_RET => s.cfg.func_id as u32,
            R_MISC_CAP => s.cfg.misc_cap,
            super::intr::R_GLBL_ERR_INT => s.err_int.load(Ordering::Acquire),
            R_GLBL_ERR_STAT => {
                s.err_stat_reads.fetch_add(1, Ordering::AcqRel);
                s.glbl(off).load(Ordering::Acquire)
            }
            0x200..=0x2fc => s.glbl(off).load(Ordering::Acquire),
            0x1000..=0x10fc => self.read_mm(&s.c2h, off - R_MM_C2H),
            0x1200..=0x12fc => self.read_mm(&s.h2c, off - R_MM_H2C),
            _ => 0,
        }
    }

    /// CPM4's direct FMAP register at `off`, as a function number.
    fn cpm4_fmap_index(&self, off: u32) -> Option<usize> {
        let on = self.shared.ip == Ip::Cpm4 && (CPM4_FMAP..CPM4_FMAP + 4 * CPM4_FUNCTIONS).contains(&off);
        on.then(|| ((off - CPM4_FMAP) / 4) as usize)
    }

    fn read_mm(&self, mm: &Mm, reg: u32) -> u32 {
        if !mm.present {
            return 0;
        }
        match reg {
            0x04 | 0x08 | 0x0c => mm.control.load(Ordering::Acquire),
            0x40 => mm.control.load(Ordering::Acquire) & 1 | mm.leaf.load(Ordering::Acquire),
            0x48 => mm.completed.load(Ordering::Acquire),
            0x54 => mm.err_enable.load(Ordering::Acquire),
            0x58 => mm.err_code.load(Ordering::Acquire),
            0x5c => mm.err_info.load(Ordering::Acquire),
            0xc0 => mm.perf_ctl.load(Ordering::Acquire),
            0xc4 => mm.perf_cycles(self.shared.clock.now()) as u32,
            0xc8 => (mm.perf_cycles(self.shared.clock.now()) >> 32) as u32 & 0x3ff,
            0xcc => mm.perf_beats.load(Ordering::Acquire) as u32,
            0xd0 => (mm.perf_beats.load(Ordering::Acquire) >> 32) as u32 & 0x3ff,
            _ => 0,
        }
    }

    /// A 32-bit register write at `offset`.
    pub fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.advance();
        let off = offset as u32;
        let s = &*self.shared;
        s.writes.fetch_add(1, Ordering::Relaxed);
        if self.write_indirect(off, value) {
            return Ok(());
        }
        if let Some(f) = self.cpm4_fmap_index(off) {
            s.direct_fmap[f].store(value, Ordering::Release);
            if f == s.cfg.func_id as usize {
                // QDMA_CPM4_TRQ_SEL_FMAP_*: qbase [10:0], qmax [22:11].
                *s.fmap.lock().unwrap_or_else(|e| e.into_inner()) = (value & 0x7ff, (value >> 11) & 0xfff);
            }
            return Ok(());
        }
        if let Some(v) = s.perf_regs.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&off) {
            *v = value;
            return Ok(());
        }
        let db = s.ip.doorbells();
        match off {
            R_RNG_SZ..=0x240 | 0x244 | 0x250 => s.glbl(off).store(value, Ordering::Release),
            R_GLBL_ERR_STAT => s.clear_global(value),
            R_TRQ_ERR_STS => {
                w1c(s.glbl(off), value);
            }
            R_DSC_ERR_STS => self.clear_dsc_errors(value),
            super::intr::R_GLBL_ERR_INT => s.err_int_write(value),
            _ if s.st_write(off, value) => {}
            R_GLBL_ERR_MASK => self.enable(off, value, s.ip.glbl_defined(), "GLBL_ERR_MASK"),
            R_DSC_ERR_MSK => self.enable(off, value, s.ip.dsc_defined(), "GLBL_DSC_ERR_MSK"),
            R_TRQ_ERR_MSK => self.enable(off, value, s.ip.trq_defined(), "GLBL_TRQ_ERR_MSK"),
            0x800..=0x8fc | DOORBELLS.. if s.ip == Ip::Cpm4 => s.violation(format!(
                "register {off:#x} written, which Versal CPM4 does not have (its context command is at 0x824, its \
                 doorbells at {db:#x})"
            )),
            0x1000..=0x10fc => return self.write_mm(Direction::C2h, off - R_MM_C2H, value),
            0x1200..=0x12fc => return self.write_mm(Direction::H2c, off - R_MM_H2C, value),
            _ if off >= db && off < db + 16 * s.cfg.max_queues as u32 => return self.doorbell(off, value),
            _ => {}
        }
        Ok(())
    }

    /// An error mask register: bits the variant's header does not define are flagged and dropped.
    fn enable(&self, off: u32, value: u32, defined: u32, name: &str) {
        let s = &*self.shared;
        if value & !defined != 0 {
            s.violation(format!(
                "{name} written {value:#x}: bits {:#x} are not defined for {} by its vendor header",
                value & !defined,
                s.ip.name()
            ));
        }
        s.glbl(off).store(value & defined, Ordering::Release);
    }

    /// Write 1 to clear; the first-error logs go with the last status bit.
    fn clear_dsc_errors(&self, value: u32) {
        let s = &*self.shared;
        if w1c(s.glbl(R_DSC_ERR_STS), value) == 0 {
            s.glbl(R_DSC_ERR_LOG0).store(0, Ordering::Release);
            s.glbl(R_DSC_ERR_LOG1).store(0, Ordering::Release);
        }
    }

    fn write_mm(&self, dir: Direction, reg: u32, value: u32) -> Result<()> {
        let mm = self.shared.mm(dir);
        if !mm.present {
            return Ok(());
        }
        let was = mm.running();
        match reg {
            0x04 => mm.control.store(value & 1, Ordering::Release),
            0x08 => {
                mm.control.fetch_or(value & 1, Ordering::AcqRel);
            }
            0x0c => {
                mm.control.fetch_and(!value, Ordering::AcqRel);
            }
            0x54 => {
                let defined = self.shared.ip.mm_enable_defined(dir);
                if value & !defined != 0 {
                    self.shared.violation(format!(
                        "{dir} MM ERR_CODE_ENABLE_MASK written {value:#x}: bits {:#x} are not defined for {} by its \
                         vendor header",
                        value & !defined,
                        self.shared.ip.name()
                    ));
                }
                mm.err_enable.store(value & defined, Ordering::Release)
            }
            // MM_STATUS written back clears the leaf (1s clear; RUN is read-only), and its log
            // with it, as the descriptor engine's logs go with its last status bit.
            0x40 if value & MM_STATUS_LEAF != 0 && mm.leaf.fetch_and(!value, Ordering::AcqRel) != 0 => {
                mm.err_code.store(0, Ordering::Release);
                mm.err_info.store(0, Ordering::Release);
            }
            // CPM4 has no MM leaf (`qdma_cpm4_err_info[]`) and no vendor code that clears its log:
            // the model takes a write back of the log as clearing it. EQDMA and CPM5 logs are
            // read-only: they go with the leaf.
            0x58 | 0x5c if !self.shared.ip.mm_leaf_in_status() => {
                mm.err_code.store(0, Ordering::Release);
                mm.err_info.store(0, Ordering::Release);
            }
            0xc0 => self.perf_control(mm, value),
            _ => return Ok(()),
        }
        if mm.running() {
            // Queues rung while the engine was off start now.
            if !was {
                super::engine::started(&self.shared, dir, self.shared.clock.now());
            }
            super::engine::advance(&self.shared, dir);
        }
        Ok(())
    }

    /// Performance monitor control: bit 1 clears the counters now, bit 3 counts while set
    /// (the model's cycle is a nanosecond, `PERF_CLOCK_HZ`; a data beat is `PERF_BEAT_BYTES`).
    fn perf_control(&self, mm: &Mm, value: u32) {
        let t = self.shared.clock.now();
        let mut p = mm.perf.lock().unwrap_or_else(|e| e.into_inner());
        let was = mm.perf_ctl.swap(value & 0xd, Ordering::AcqRel) & (1 << 3) != 0;
        let now = value & (1 << 3) != 0;
        if value & (1 << 1) != 0 {
            *p = (0, None);
            mm.perf_beats.store(0, Ordering::Release);
        }
        match (was || p.1.is_some(), now) {
            (false, true) => p.1 = Some(t),
            (true, false) => {
                p.0 += p.1.take().map_or(0, |since| t.saturating_sub(since));
            }
            (true, true) if p.1.is_none() => p.1 = Some(t),
            _ => {}
        }
    }

    /// A PF doorbell: base (0x18000; 0x6400 on CPM4) + 16 × (function-relative queue), +0x4 H2C
    /// pidx, +0x8 C2H pidx. The queue must lie inside this function's FMAP (else a
    /// target-access error).
    fn doorbell(&self, off: u32, value: u32) -> Result<()> {
        let s = &*self.shared;
        let (rel, reg) = ((off - s.ip.doorbells()) / 16, off % 16);
        let dir = match reg {
            4 => Direction::H2c,
            8 => Direction::C2h,
            // Completion-ring CIDX: the stream card's; the interrupt ring's CIDX (`intr.rs`).
            0xc if s.cfg.stream => Direction::C2h,
            0 => Direction::H2c,
            _ => return Ok(()),
        };
        let (qbase, qmax) = *s.fmap.lock().unwrap_or_else(|e| e.into_inner());
        let qid = qbase + rel;
        if rel >= qmax || qid >= s.cfg.max_queues as u32 {
            s.trq_error(s.ip.trq_qid_range(), off);
            return Ok(());
        }
        if reg == 0 {
            s.int_cidx_update(qid, value);
            return Ok(());
        }
        if s.cfg.stream {
            s.st_doorbell(reg, qid, value);
            return Ok(());
        }
        if !s.mm(dir).present {
            s.trq_error(s.ip.trq_unmapped(), off);
            return Ok(());
        }
        let Some(q) = s.queue(dir, qid as usize) else { return Ok(()) };
        {
            let mut c = q.lock();
            let old = c.pidx();
            c.sw[0] = (c.sw[0] & !0xffff) | (value & 0xffff);
            c.rung_at = s.clock.now();
            // QDMA_DMA_SEL_IRQ_EN_MASK: the update arms the queue's interrupt; one a writeback
            // left pending while disarmed is raised now.
            if value & super::engine::DB_IRQ_ARM != 0 {
                c.sw[0] |= super::engine::SW0_IRQ_ARM;
                if c.irq_pending == Some(c.gen) {
                    super::engine::raise(s, dir, qid as usize, &mut c);
                }
            }
            if c.enabled() && c.pidx() != c.cidx() {
                c.hw[1] = HW1_DSC_PND;
            }
            if s.cfg.fetch_on_doorbell && c.enabled() {
                super::engine::fetch_at_doorbell(s, &mut c, old);
            }
        }
        s.mm(dir).kick(qid as usize);
        // The engine starts on what the doorbell rang now (stepped: serves it all before the
        // write returns).
        super::engine::advance(s, dir);
        Ok(())
    }

    /// Read card (AXI) memory directly, as an independent check of what H2C wrote.
    pub fn card_read(&self, addr: u64, out: &mut [u8]) -> Result<()> {
        self.shared.card.read(addr, out)
    }

    pub fn card_write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.shared.card.write(addr, data)
    }

    /// Test hook: the IP logs errors now that stop no queue (a RAM ECC event, a descriptor
    /// error a queue survives): descriptor engine bits `dsc` where enabled (with the global DSC
    /// bit), then GLBL_ERR_STAT bits `glbl` where enabled.
    /// Test hook: descriptor-engine error bits `dsc` logged with the next status writeback.
    pub fn error_at_writeback(&self, dsc: u32) {
        self.shared.error_at_writeback.store(dsc, Ordering::Release);
    }

    /// How often GLBL_ERR_STAT has been read.
    pub fn err_stat_reads(&self) -> u64 {
        self.shared.err_stat_reads.load(Ordering::Acquire)
    }

    pub fn raise_errors(&self, glbl: u32, dsc: u32) {
        if dsc != 0 {
            self.shared.dsc_error(Direction::H2c, 0, 0, dsc);
        }
        self.shared.global_error(glbl);
    }

    /// The stream card's example design (its user BAR registers).
    pub fn example_read(&self, off: u32) -> u32 {
        self.advance();
        self.shared.example_read(off)
    }

    pub fn example_write(&self, off: u32, value: u32) {
        self.advance();
        self.shared.example_write(off, value)
    }

    /// For tests of the stream card: (packets the checker saw, all matched, completion entries
    /// written, packets dropped, packets the generator still owes).
    pub fn stream_counts(&self) -> (u64, bool, u64, u64, u32) {
        self.advance();
        self.shared.st_counts()
    }

    /// Test hook: while set, every stream packet's first byte is flipped in flight (the
    /// generator's C2H packets and the H2C packets the checker sees).
    pub fn corrupt_stream(&self, on: bool) {
        self.shared.st_corrupt(on)
    }

    /// Test hook: the next completion entry the generator writes carries the error bit.
    pub fn error_record_next(&self) {
        self.shared.st_error_next()
    }

    /// Test hook: a stalled engine accepts doorbells but moves nothing (a hung queue); on the
    /// stream card a stalled C2H holds the example design's generator.
    pub fn set_stalled(&self, dir: Direction, stalled: bool) {
        let mm = self.shared.mm(dir);
        mm.stalled.store(stalled, Ordering::Release);
        if !stalled {
            // Released: the engine moves on from now, when the host next looks.
            mm.due.set(0);
        }
    }

    /// Test step (stepped mode): serve the queues of `dir` with pending doorbells, stalled or
    /// not, once each (up to a burst of descriptors per queue); whether any descriptor moved.
    pub fn step(&self, dir: Direction) -> bool {
        let mm = self.shared.mm(dir);
        mm.running() && super::engine::serve(&self.shared, dir, u64::MAX, true)
    }

    /// Test hook: the engine writes no status back (error writebacks included) while set; its
    /// hardware contexts' consumer indexes still move. A writeback that has not come yet.
    pub fn withhold_writebacks(&self, dir: Direction, withhold: bool) {
        self.shared.mm(dir).withhold.store(withhold, Ordering::Release);
    }

    /// Test hook: context commands never finish (the busy bit stays set).
    pub fn set_context_stuck(&self, stuck: bool) {
        self.shared.ctxt_stuck.store(stuck, Ordering::Release);
    }

    /// Why the engine last stopped a queue, in the model's words.
    pub fn last_fault(&self, dir: Direction) -> Option<String> {
        self.advance();
        self.shared.mm(dir).last_fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The software and hardware context words of hardware queue `qid` (an independent view of
    /// what the driver programmed).
    pub fn contexts(&self, dir: Direction, qid: u16) -> Option<([u32; 8], [u32; 8])> {
        self.advance();
        self.shared.queue(dir, qid as usize).map(|q| {
            let c = q.lock();
            (c.sw, c.hw)
        })
    }

    /// This function's FMAP: (first queue, queue count).
    pub fn fmap(&self) -> (u32, u32) {
        *self.shared.fmap.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Test hook: each descriptor also writes one byte past its end (`sim::overrun`).
    pub fn set_overrun(&self, on: bool) {
        self.shared.overrun.set(on);
    }

    /// What the driver did that the real IP would not accept, in words, oldest first.
    pub fn violations(&self) -> Vec<String> {
        super::super::served::violations(&self.shared.violations, &self.shared.irq_out)
    }

    /// The function's interrupts (what the access path routes).
    pub fn irq(&self) -> &Arc<super::super::irq::SimIrq> {
        &self.shared.irq_out
    }

    /// Register writes made so far.
    pub fn register_writes(&self) -> u64 {
        self.shared.writes.load(Ordering::Acquire)
    }

    /// Test hook: hold (or release) descriptors the engine fetches for hardware queue `qid`
    /// in flight: fetched, not yet moved or completed.
    pub fn hold_in_flight(&self, dir: Direction, qid: u16, hold: bool) {
        if let Some(h) = self.shared.mm(dir).held.get(qid as usize) {
            h.store(hold, Ordering::Release);
            if !hold {
                self.shared.mm(dir).due.set(0);
            }
        }
    }

    /// How often hardware queue `qid`'s hardware context has been read.
    pub fn hw_context_reads(&self, dir: Direction, qid: u16) -> u64 {
        self.shared.queue(dir, qid as usize).map_or(0, |q| q.lock().hw_reads)
    }

    /// Descriptors of hardware queue `qid` fetched and not completed.
    pub fn in_flight(&self, dir: Direction, qid: u16) -> u32 {
        self.advance();
        self.shared.queue(dir, qid as usize).map_or(0, |q| q.lock().in_flight)
    }

    /// Whether the MM engine of `dir` has its run bit set.
    pub fn engine_running(&self, dir: Direction) -> bool {
        self.shared.mm(dir).running()
    }

    pub fn set_bus_master(&self, on: bool) {
        self.shared.bus_master.store(on, Ordering::Release);
    }
}

impl super::super::RegisterModel for QdmaModel {
    fn violations(&self) -> Vec<String> {
        QdmaModel::violations(self)
    }

    fn populate_card(&self, addr: u64, len: u64) {
        self.shared.card.populate(addr, len);
    }

    fn size(&self) -> u64 {
        QDMA_BAR_LEN
    }

    fn check_width(&self, index: u8, width: crate::mmio::Width) -> Result<()> {
        super::super::served::only_32bit("QDMA", index, width)
    }

    fn read(&self, offset: u64, _width: crate::mmio::Width) -> u64 {
        self.read32(offset) as u64
    }

    fn write(&self, offset: u64, _width: crate::mmio::Width, value: u64) -> Result<()> {
        self.write32(offset, value as u32)
    }

    fn set_bus_master(&self, on: bool) {
        self.shared.bus_master.store(on, Ordering::Release);
    }

    fn advance(&self) {
        QdmaModel::advance(self)
    }

    fn due_in(&self) -> Option<Duration> {
        QdmaModel::due_in(self)
    }
}
