//! Setting up and tearing down stream queues as libqdma does: the C2H ST global tables written
//! at init (`*_set_default_global_csr` with `st_en`), the C2H error leaves enabled
//! (`*_hw_error_enable` enables the C2H ST leaf), and per C2H queue, after its software context,
//! the prefetch and completion contexts (`qdma_descq_context_program`: clear every context,
//! then write them; `qdma_descq_context_clear` invalidates the prefetch and completion contexts
//! of an ST C2H queue beside the others), read back and compared. Everything changed is put back
//! on drop.

use super::ctx::Sel;
use super::regs::*;
use super::st::{self, Cmpt, BUF_SZ_IDX};
use super::st_ctx::{CmptCtx, PrefetchCtx};
use super::trigger::CmptTrigger;
use super::{QdmaEngine, SwCtx};
use crate::dma::Direction;
use crate::{Error, Result};

/// What stream setup found and changed, put back on drop.
#[derive(Default)]
pub(super) struct SavedSt {
    tables: Vec<(u64, u32)>,
    c2h_err_mask: Option<u32>,
    /// The example design's C2H_COMPLETION_SIZE as found, where a trigger other than `every`
    /// needed its user-trigger bit set or clear.
    cmpt_size: Option<u32>,
}

impl QdmaEngine {
    /// The C2H ST tables and error enables (only in stream mode), saving what was there.
    pub(super) fn take_stream_device(&mut self) -> Result<()> {
        if self.stream.is_none() {
            return Ok(());
        }
        let bar = &*self.bar;
        let tables = [
            (R_C2H_TIMER_CNT, &VENDOR_C2H_TIMERS[..]),
            (R_C2H_CNT_TH, &VENDOR_C2H_COUNTERS[..]),
            (R_C2H_BUF_SZ, &VENDOR_C2H_BUF_SIZES[..]),
            // The completion timer's tick, per IP (issue 50 item 13).
            (R_C2H_INT_TIMER_TICK, &[timer_tick(self.info.ip)][..]),
        ];
        for (base, values) in tables {
            for (i, v) in values.iter().enumerate() {
                let at = base + 4 * i as u64;
                self.saved_st.tables.push((at, rd(bar, at)?));
                wr(bar, at, *v)?;
            }
        }
        // The design's user trigger: set for `user`, clear for the timer and count (User_Timer
        // would fire on it); under `every` it changes nothing, and is left as found.
        let t = self.opts.trigger;
        if let Some(ex) = self.stream.as_ref().map(|s| &s.ex).filter(|_| t != CmptTrigger::default()) {
            self.saved_st.cmpt_size = Some(rd(&*ex.bar, EX_C2H_CMPT_SIZE)?);
            wr(&*ex.bar, EX_C2H_CMPT_SIZE, t.cmpt_size())?;
        }
        let mask = rd(bar, R_C2H_ERR_MASK)?;
        self.saved_st.c2h_err_mask = Some(mask);
        wr(bar, R_C2H_ERR_MASK, mask | C2H_ERR_CMPT_INV_Q | C2H_ERR_CMPT_QFULL | C2H_ERR_CMPT_CIDX)?;
        wr(bar, R_GLBL_ERR_MASK, rd(bar, R_GLBL_ERR_MASK)? | GLBL_C2H_ST)
    }

    /// The prefetch and completion contexts of C2H ring `i` (after its software context), and
    /// the completion ring's first CIDX doorbell.
    pub(super) fn start_stream_queue(&mut self, i: usize, qid: u32) -> Result<()> {
        let Some(s) = self.stream.as_mut() else { return Ok(()) };
        let Some(c) = s.cmpt[i].as_mut() else { return Ok(()) };
        c.ring.reset();
        c.color = true;
        let (ip, func, ring_idx, base) = (self.info.ip, self.info.func as u16, self.ring_idx, c.ring.bus);
        let q = self.rings[i].queue;
        // Interrupt mode: the completion ring interrupts (`make_cmpt_context`: `en_int`, and its
        // vector or, aggregated, the interrupt ring's index with `int_aggr`).
        let target = self.irq_target(&self.rings[i]);
        let ctx = self.ctx();
        let pf = PrefetchCtx { bypass: false, buf_sz_idx: BUF_SZ_IDX, pfch_en: false, err: false, valid: true };
        ctx.write(Sel::Prefetch, qid, &pf.words())?;
        let t = self.opts.trigger;
        let cm = CmptCtx {
            en_stat_desc: true,
            trig_mode: t.trig_mode() as u8,
            timer_idx: t.timer_idx,
            counter_idx: t.count_idx,
            func,
            color: true,
            ring_idx,
            base,
            desc_size: CMPT_SZ_8B as u8,
            valid: true,
            en_int: target.is_some(),
            vec: target.map_or(0, |t| t.0),
            int_aggr: target.is_some_and(|t| t.1),
            ..CmptCtx::default()
        };
        ctx.write(Sel::Cmpt, qid, &cm.words(ip))?;
        let back = CmptCtx::from_words(&ctx.read(Sel::Cmpt, qid)?, ip);
        if !back.same_settings(&cm) {
            return Err(Error::Device(format!(
                "QDMA c2h queue {q}: the completion context reads back as {back:?} after writing {cm:?}"
            )));
        }
        let back = PrefetchCtx::from_words(&ctx.read(Sel::Prefetch, qid)?);
        if back.buf_sz_idx != pf.buf_sz_idx || !back.valid {
            return Err(Error::Device(format!(
                "QDMA c2h queue {q}: the prefetch context reads back as {back:?} after writing {pf:?}"
            )));
        }
        let reg = R_PF_DOORBELLS + q as u64 * DB_STEP + DB_CMPT_CIDX;
        wr(&*self.bar, reg, st::cmpt_doorbell(0, target.is_some(), &t))
    }

    /// The software context of an ST queue.
    pub(super) fn st_sw_context(&self, ring: &super::ring::Ring) -> SwCtx {
        // `make_sw_context` for ST: fetch credits on; C2H 8-byte descriptors with no status
        // writeback (its completion ring reports), H2C 16-byte with the marker disabled.
        let c2h = ring.dir == Direction::C2h;
        SwCtx {
            func: self.info.func as u16,
            enabled: true,
            fetch_credit: true,
            wbi_chk: !c2h,
            wbi_intvl: true,
            fetch_max: FETCH_MAX_NUM,
            ring_idx: self.ring_idx,
            desc_size: if c2h { DESC_SZ_8B } else { DESC_SZ_16B },
            writeback: !c2h,
            marker_disable: !c2h,
            is_mm: false,
            ring_base: ring.bus,
            // H2C ST signals as MM queues do; C2H ST through its completion ring's context
            // (`make_sw_context` clears `irq_en` and `irq_arm` for ST C2H).
            irq: !c2h && self.irq_vectors.is_some(),
            irq_arm: !c2h && self.irq_vectors.is_some(),
            vec: if c2h { 0 } else { self.irq_target(ring).map_or(0, |t| t.0) },
            intr_aggr: !c2h && self.irq_target(ring).is_some_and(|t| t.1),
            ..SwCtx::default()
        }
    }

    /// The contexts a stream queue has beyond the MM ones, for clearing and invalidating.
    pub(super) fn stream_sels(&self, dir: Direction) -> &'static [Sel] {
        match (self.stream.is_some(), dir) {
            (true, Direction::C2h) => &[Sel::Prefetch, Sel::Cmpt],
            _ => &[],
        }
    }

    /// Put the C2H ST tables and error enables back as found.
    pub(super) fn restore_stream(&mut self) {
        let bar = &*self.bar;
        if let Some(m) = self.saved_st.c2h_err_mask.take() {
            let _ = wr(bar, R_C2H_ERR_MASK, m);
        }
        for (at, v) in self.saved_st.tables.drain(..) {
            let _ = wr(bar, at, v);
        }
        if let (Some(v), Some(s)) = (self.saved_st.cmpt_size.take(), self.stream.as_ref()) {
            let _ = wr(&*s.ex.bar, EX_C2H_CMPT_SIZE, v);
        }
    }
}

/// The C2H_INT_TIMER_TICK the vendor writes on `ip` (cycles per completion-timer tick).
pub(super) fn timer_tick(ip: super::ip::IpKind) -> u32 {
    match ip {
        super::ip::IpKind::VersalCpm5 => CPM5_C2H_TIMER_TICK,
        _ => VENDOR_C2H_TIMER_TICK,
    }
}

/// Stream mode's rings: descriptor sizes set (16-byte H2C, 8-byte C2H descriptors), a
/// completion ring per C2H ring (its memory joins `mem`).
pub(super) fn stream_rings(
    ex: super::st::ExampleDesign,
    alloc: &dyn crate::dma::DmaAllocator,
    rings: &mut [super::ring::Ring],
    mem: &mut Vec<Box<dyn crate::dma::DmaBuffer>>,
    slots: u32,
    ip: super::ip::IpKind,
) -> Result<super::st_run::Stream> {
    for r in rings.iter_mut() {
        r.desc = if r.dir == Direction::H2c { H2C_ST_DESC_BYTES } else { C2H_ST_DESC_BYTES };
    }
    let (m, cmpt) = cmpt_rings(alloc, rings, slots, ip)?;
    mem.extend(m);
    Ok(super::st_run::Stream { ex, want: vec![0; rings.len()], cmpt, len: None })
}

/// The buffers completion rings live in (which must outlive them), and the rings, one per
/// engine ring (None for H2C rings).
type CmptRings = (Vec<Box<dyn crate::dma::DmaBuffer>>, Vec<Option<Cmpt>>);

/// Completion rings for the C2H rings among `rings` (one each, 8-byte entries).
pub(super) fn cmpt_rings(
    alloc: &dyn crate::dma::DmaAllocator,
    rings: &[super::ring::Ring],
    slots: u32,
    ip: super::ip::IpKind,
) -> Result<CmptRings> {
    let c2h: Vec<(u16, Direction)> =
        rings.iter().filter(|r| r.dir == Direction::C2h).map(|r| (r.queue, r.dir)).collect();
    let (mem, made) = super::ring::allocate(alloc, &c2h, slots)?;
    let mut made = made.into_iter();
    let out = rings
        .iter()
        .map(|r| {
            (r.dir == Direction::C2h).then(|| made.next()).flatten().map(|mut ring| {
                ring.desc = C2H_ST_DESC_BYTES;
                Cmpt { ring, color: true }
            })
        })
        .collect::<Vec<_>>();
    let align = super::st_ctx::cmpt_align(ip);
    if let Some(c) = out.iter().flatten().find(|c| c.ring.bus % align != 0) {
        return Err(Error::Unsupported(format!(
            "a completion ring at bus address {:#x} is not {align}-byte aligned, which this QDMA's completion context \
             needs: use another --buffer",
            c.ring.bus
        )));
    }
    Ok((mem, out))
}
