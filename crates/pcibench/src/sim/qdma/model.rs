//! The sim card `sim-qdma`'s DMA engine: a register model of the AMD/Xilinx QDMA subsystem
//! (PG302, soft IP, physical function) with memory-mapped queues, written from the register
//! layouts the vendor's open QDMA access code uses (see `state.rs`).
//!
//! What it models: the identifier and capability registers; the global ring-size table; the
//! indirect context registers (data, mask, command) with busy semantics over a context RAM of
//! software, hardware and credit contexts per queue and direction plus the function map (FMAP);
//! the PF queue doorbells (producer index per queue, mapped through the FMAP); the MM engines'
//! run control, completed count, error code and performance monitor; the global, descriptor and
//! target-access error registers (write 1 to clear, logged only where enabled). The engines
//! themselves (descriptor fetch, data movement, status writeback) run on one worker thread per
//! direction: `engine.rs`. ST queues, interrupts and completion rings are not modelled.

use super::super::card_memory::CardMemory;
use super::super::host_map::HostMap;
use super::super::mem::Pages;
use super::state::*;
pub use super::state::{QdmaModelConfig, CARD_MEMORY_SIZE, QDMA_BAR_LEN, VENDOR_RING_SIZES};
use crate::direction::Direction;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// The QDMA register block and engines of one sim card.
pub struct QdmaModel {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// Bits of a write-1-to-clear register after writing `v`.
fn w1c(reg: &std::sync::atomic::AtomicU32, v: u32) -> u32 {
    reg.fetch_and(!v, Ordering::AcqRel) & !v
}

impl QdmaModel {
    pub fn new(cfg: QdmaModelConfig, host: Arc<HostMap>) -> Result<QdmaModel> {
        if cfg.max_queues == 0 || cfg.max_queues > 4095 {
            return Err(Error::usage(format!(
                "a QDMA has 1 to 4095 queues (a 12-bit capability field), not {}",
                cfg.max_queues
            )));
        }
        let len = usize::try_from(cfg.card_size)
            .map_err(|_| Error::usage(format!("card memory of {:#x} bytes is too large", cfg.card_size)))?;
        let card = CardMemory::new(Pages::new("card memory", len)?, cfg.card_size);
        Ok(QdmaModel { shared: Arc::new(Shared::new(cfg, card, host)), workers: Mutex::new(Vec::new()) })
    }

    pub fn config(&self) -> &QdmaModelConfig {
        &self.shared.cfg
    }

    /// The command register's queue id field: 12 bits from bit 7, 13 on EQDMA (IP type 1 or 2
    /// in GLBL2_MISC_CAP of a soft IP).
    fn qid_mask(&self) -> u32 {
        let m = self.shared.cfg.misc_cap;
        let eqdma = m >> 28 == 0 && matches!((m >> 20) & 0xf, 1 | 2);
        if eqdma {
            0x1fff
        } else {
            0xfff
        }
    }

    /// A 32-bit register read at `offset` (bounds and alignment are the BAR's job).
    pub fn read32(&self, offset: u64) -> u32 {
        let off = offset as u32;
        let s = &*self.shared;
        let mdma = |on: bool, bit: u32| if on { 1 << bit } else { 0 };
        match off {
            R_ID => 0x1fd3_0000,
            R_BARLITE_EXT => 0x04 << (6 * (s.cfg.func_id as u32 % 4)),
            R_CHANNEL_MDMA => mdma(s.cfg.mm_h2c, 0) | mdma(s.cfg.mm_c2h, 8) | 1 << 16 | 1 << 17,
            R_QDMA_CAP => s.cfg.max_queues as u32,
            R_FUNC_RET => s.cfg.func_id as u32,
            R_MISC_CAP => s.cfg.misc_cap,
            0x200..=0x2fc => s.glbl(off).load(Ordering::Acquire),
            R_IND_DATA..=0x820 => self.ind().data[((off - R_IND_DATA) / 4) as usize],
            R_IND_MASK..=0x840 => self.ind().mask[((off - R_IND_MASK) / 4) as usize],
            R_IND_CMD => self.read_cmd(),
            0x1000..=0x10fc => self.read_mm(&s.c2h, off - R_MM_C2H),
            0x1200..=0x12fc => self.read_mm(&s.h2c, off - R_MM_H2C),
            _ => 0,
        }
    }

    fn ind(&self) -> std::sync::MutexGuard<'_, Indirect> {
        self.shared.ind.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_mm(&self, mm: &Mm, reg: u32) -> u32 {
        if !mm.present {
            return 0;
        }
        match reg {
            0x04 | 0x08 | 0x0c => mm.control.load(Ordering::Acquire),
            0x40 => mm.control.load(Ordering::Acquire) & 1,
            0x48 => mm.completed.load(Ordering::Acquire),
            0x54 => mm.err_enable.load(Ordering::Acquire),
            0x58 => mm.err_code.load(Ordering::Acquire),
            0x5c => mm.err_info.load(Ordering::Acquire),
            0xc0 => mm.perf_ctl.load(Ordering::Acquire),
            0xc4 => mm.perf_cycles() as u32,
            0xc8 => (mm.perf_cycles() >> 32) as u32 & 0x3ff,
            0xcc => mm.perf_beats.load(Ordering::Acquire) as u32,
            0xd0 => (mm.perf_beats.load(Ordering::Acquire) >> 32) as u32 & 0x3ff,
            _ => 0,
        }
    }

    /// The command register: busy for `ctxt_busy_reads` reads after a command, which then runs.
    fn read_cmd(&self) -> u32 {
        let mut ind = self.ind();
        if self.shared.ctxt_stuck.load(Ordering::Acquire) {
            return ind.cmd | 1;
        }
        if ind.busy_reads_left > 0 {
            ind.busy_reads_left -= 1;
            return ind.cmd | 1;
        }
        if ind.cmd & 1 != 0 {
            let cmd = ind.cmd;
            self.execute(&mut ind, cmd);
            ind.cmd &= !1;
        }
        ind.cmd
    }

    /// A 32-bit register write at `offset`. Fails only if an engine worker cannot start.
    pub fn write32(&self, offset: u64, value: u32) -> Result<()> {
        let off = offset as u32;
        let s = &*self.shared;
        match off {
            R_RNG_SZ..=0x240 | 0x244 | 0x250 => s.glbl(off).store(value, Ordering::Release),
            R_GLBL_ERR_STAT | R_TRQ_ERR_STS => {
                w1c(s.glbl(off), value);
            }
            R_DSC_ERR_STS => self.clear_dsc_errors(value),
            R_GLBL_ERR_MASK | R_DSC_ERR_MSK | R_TRQ_ERR_MSK => s.glbl(off).store(value, Ordering::Release),
            R_IND_DATA..=0x840 | R_IND_CMD => self.write_indirect(off, value),
            0x1000..=0x10fc => return self.write_mm(Direction::C2h, off - R_MM_C2H, value),
            0x1200..=0x12fc => return self.write_mm(Direction::H2c, off - R_MM_H2C, value),
            _ if off >= R_DOORBELLS => return self.doorbell(off, value),
            _ => {}
        }
        Ok(())
    }

    /// Write 1 to clear; the first-error logs go with the last status bit.
    fn clear_dsc_errors(&self, value: u32) {
        let s = &*self.shared;
        if w1c(s.glbl(R_DSC_ERR_STS), value) == 0 {
            s.glbl(R_DSC_ERR_LOG0).store(0, Ordering::Release);
            s.glbl(R_DSC_ERR_LOG1).store(0, Ordering::Release);
        }
    }

    fn write_indirect(&self, off: u32, value: u32) {
        let mut ind = self.ind();
        let busy = ind.busy_reads_left > 0 || ind.cmd & 1 != 0;
        if busy {
            // Hardware ignores context register writes while a command runs; the model also
            // flags them, as a driver that does this did not wait for busy to clear.
            drop(ind);
            self.shared.global_error(GE_IND_CTXT_CMD);
            return;
        }
        match off {
            R_IND_CMD => {
                ind.cmd = value | 1;
                ind.busy_reads_left = self.shared.cfg.ctxt_busy_reads;
                if ind.busy_reads_left == 0 && !self.shared.ctxt_stuck.load(Ordering::Acquire) {
                    self.execute(&mut ind, value);
                    ind.cmd &= !1;
                }
            }
            R_IND_MASK..=0x840 => ind.mask[((off - R_IND_MASK) / 4) as usize] = value,
            _ => ind.data[((off - R_IND_DATA) / 4) as usize] = value,
        }
    }

    /// Run a context command: select [4:1] (0/1 software C2H/H2C, 2/3 hardware, 4/5 credit,
    /// 6-11 others, 12 FMAP), op [6:5] (0 clear, 1 write, 2 read, 3 invalidate), id from bit 7.
    fn execute(&self, ind: &mut Indirect, cmd: u32) {
        let (sel, op, id) = ((cmd >> 1) & 0xf, (cmd >> 5) & 3, (cmd >> 7) & self.qid_mask());
        let s = &*self.shared;
        let apply = |words: &mut [u32; 8], ind: &mut Indirect| match op {
            OP_CLR => *words = [0; 8],
            OP_WR => {
                for ((w, d), m) in words.iter_mut().zip(ind.data).zip(ind.mask) {
                    *w = (*w & !m) | (d & m);
                }
            }
            OP_RD => ind.data = *words,
            _ => *words = [0; 8],
        };
        match sel {
            SEL_SW_C2H..=SEL_CR_H2C => {
                let dir = if sel % 2 == 0 { Direction::C2h } else { Direction::H2c };
                let Some(q) = s.queue(dir, id as usize) else {
                    return s.global_error(GE_IND_CTXT_CMD);
                };
                let mut c = q.lock();
                c.gen += 1;
                match sel / 2 {
                    0 if op == 3 => c.sw[1] &= !SW1_QEN,
                    0 => apply(&mut c.sw, ind),
                    1 => apply(&mut c.hw, ind),
                    _ => apply(&mut c.cr, ind),
                }
                if sel / 2 == 0 && op != OP_RD {
                    c.fetched.clear();
                }
            }
            SEL_FMAP if op == 3 => s.global_error(GE_IND_CTXT_CMD),
            6..=SEL_FMAP => {
                let mut other = s.other_ctx.lock().unwrap_or_else(|e| e.into_inner());
                let words = other.entry((sel, id)).or_insert([0; 8]);
                apply(words, ind);
                if sel == SEL_FMAP && id == s.cfg.func_id as u32 {
                    *s.fmap.lock().unwrap_or_else(|e| e.into_inner()) = (words[0] & 0x7ff, words[1] & 0xfff);
                }
            }
            _ => s.global_error(GE_IND_CTXT_CMD),
        }
    }

    fn write_mm(&self, dir: Direction, reg: u32, value: u32) -> Result<()> {
        let mm = self.shared.mm(dir);
        if !mm.present {
            return Ok(());
        }
        match reg {
            0x04 => mm.control.store(value & 1, Ordering::Release),
            0x08 => {
                mm.control.fetch_or(value & 1, Ordering::AcqRel);
            }
            0x0c => {
                mm.control.fetch_and(!value, Ordering::AcqRel);
            }
            0x54 => mm.err_enable.store(value, Ordering::Release),
            0x58 | 0x5c => {
                mm.err_code.store(0, Ordering::Release);
                mm.err_info.store(0, Ordering::Release);
            }
            0xc0 => self.perf_control(mm, value),
            _ => return Ok(()),
        }
        if mm.running() {
            // Queues rung while the engine was off start now.
            self.ensure_worker(dir)?;
            mm.wake_worker();
        }
        Ok(())
    }

    /// Performance monitor control: bit 1 clears the counters now, bit 3 counts while set
    /// (the model's cycle is a nanosecond; a data beat is 64 bytes, a 512-bit datapath).
    fn perf_control(&self, mm: &Mm, value: u32) {
        let mut p = mm.perf.lock().unwrap_or_else(|e| e.into_inner());
        let was = mm.perf_ctl.swap(value & 0xd, Ordering::AcqRel) & (1 << 3) != 0;
        let now = value & (1 << 3) != 0;
        if value & (1 << 1) != 0 {
            *p = (0, None);
            mm.perf_beats.store(0, Ordering::Release);
        }
        match (was || p.1.is_some(), now) {
            (false, true) => p.1 = Some(Instant::now()),
            (true, false) => {
                p.0 += p.1.take().map_or(0, |t| t.elapsed().as_nanos() as u64);
            }
            (true, true) if p.1.is_none() => p.1 = Some(Instant::now()),
            _ => {}
        }
    }

    /// A PF doorbell: 0x18000 + 16 × (function-relative queue), +0x4 H2C pidx, +0x8 C2H pidx.
    /// The queue must lie inside this function's FMAP (else a target-access error).
    fn doorbell(&self, off: u32, value: u32) -> Result<()> {
        let s = &*self.shared;
        let (rel, reg) = ((off - R_DOORBELLS) / 16, off % 16);
        let dir = match reg {
            4 => Direction::H2c,
            8 => Direction::C2h,
            _ => return Ok(()), // interrupt and completion-ring CIDX: nothing to model
        };
        let (qbase, qmax) = *s.fmap.lock().unwrap_or_else(|e| e.into_inner());
        let qid = qbase + rel;
        if rel >= qmax || qid >= s.cfg.max_queues as u32 {
            s.trq_error(TRQ_QID_RANGE, off);
            return Ok(());
        }
        if !s.mm(dir).present {
            s.trq_error(TRQ_UNMAPPED, off);
            return Ok(());
        }
        let Some(q) = s.queue(dir, qid as usize) else { return Ok(()) };
        {
            let mut c = q.lock();
            let old = c.pidx();
            c.sw[0] = (c.sw[0] & !0xffff) | (value & 0xffff);
            if s.cfg.fetch_on_doorbell && c.enabled() {
                super::engine::fetch_at_doorbell(s, &mut c, old);
            }
        }
        self.ensure_worker(dir)?;
        s.mm(dir).kick(qid as usize);
        Ok(())
    }

    fn ensure_worker(&self, dir: Direction) -> Result<()> {
        let mm = self.shared.mm(dir);
        if mm.worker_started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name(format!("sim-qdma-{dir}"))
            .spawn(move || super::engine::worker(shared, dir))
            .map_err(|e| {
                mm.worker_started.store(false, Ordering::Release);
                Error::Unsupported(format!("could not start the sim card's QDMA engine thread: {e}"))
            })?;
        self.workers.lock().unwrap_or_else(|e| e.into_inner()).push(handle);
        Ok(())
    }

    /// Read card (AXI) memory directly, as an independent check of what H2C wrote.
    pub fn card_read(&self, addr: u64, out: &mut [u8]) -> Result<()> {
        self.shared.card.read(addr, out)
    }

    pub fn card_write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.shared.card.write(addr, data)
    }

    /// Test hook: a stalled engine accepts doorbells but moves nothing (a hung queue).
    pub fn set_stalled(&self, dir: Direction, stalled: bool) {
        self.shared.mm(dir).stalled.store(stalled, Ordering::Release);
        self.shared.mm(dir).wake_worker();
    }

    /// Test hook: context commands never finish (the busy bit stays set).
    pub fn set_context_stuck(&self, stuck: bool) {
        self.shared.ctxt_stuck.store(stuck, Ordering::Release);
    }

    /// Why the engine last stopped a queue, in the model's words.
    pub fn last_fault(&self, dir: Direction) -> Option<String> {
        self.shared.mm(dir).last_fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The software and hardware context words of hardware queue `qid` (an independent view of
    /// what the driver programmed).
    pub fn contexts(&self, dir: Direction, qid: u16) -> Option<([u32; 8], [u32; 8])> {
        self.shared.queue(dir, qid as usize).map(|q| {
            let c = q.lock();
            (c.sw, c.hw)
        })
    }

    /// This function's FMAP: (first queue, queue count).
    pub fn fmap(&self) -> (u32, u32) {
        *self.shared.fmap.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the MM engine of `dir` has its run bit set.
    pub fn engine_running(&self, dir: Direction) -> bool {
        self.shared.mm(dir).running()
    }

    pub fn set_bus_master(&self, on: bool) {
        self.shared.bus_master.store(on, Ordering::Release);
    }
}

impl Drop for QdmaModel {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        for mm in [&self.shared.h2c, &self.shared.c2h] {
            let _guard = mm.parked.lock().unwrap_or_else(|e| e.into_inner());
            mm.wake.notify_all();
        }
        for h in self.workers.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = h.join();
        }
    }
}

impl super::super::RegisterModel for QdmaModel {
    fn populate_card(&self, addr: u64, len: u64) {
        self.shared.card.populate(addr, len);
    }

    fn size(&self) -> u64 {
        QDMA_BAR_LEN
    }

    fn check_width(&self, index: u8, width: crate::mmio::Width) -> Result<()> {
        if width == crate::mmio::Width::B32 {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "QDMA registers are 32-bit only: BAR{index} of the sim card refuses {width}-wide access (use --width 32)"
        )))
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
}
