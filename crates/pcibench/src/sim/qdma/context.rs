//! The sim QDMA's indirect context registers and context RAM: data and mask words, the command
//! register with its busy bit, and what a command does to the software, hardware and credit
//! contexts of a queue, the FMAP (QID2VEC on CPM4) and the contexts the model only stores. The
//! register positions, the queue id width and the selects that exist are per variant
//! (`layout::Ip`); a command the IP would refuse is flagged (`Shared::context_error`), and so is
//! changing a queue's context while descriptors it fetched are still in flight.

use super::layout::Ip;
use super::model::QdmaModel;
use super::state::*;
use crate::direction::Direction;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

fn op_name(op: u32) -> &'static str {
    ["clear", "write", "read", "invalidate"][op as usize & 3]
}

impl QdmaModel {
    pub(super) fn ind(&self) -> MutexGuard<'_, Indirect> {
        self.shared.ind.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The command register: busy for `ctxt_busy_reads` reads after a command, which then runs.
    pub(super) fn read_cmd(&self) -> u32 {
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

    /// A read of the indirect registers at `off`, if `off` is one on this variant.
    pub(super) fn read_indirect(&self, off: u32) -> Option<u32> {
        let (data, mask, cmd, words) = self.shared.ip.indirect();
        if off == cmd {
            Some(self.read_cmd())
        } else if (data..data + 4 * words).contains(&off) {
            Some(self.ind().data[((off - data) / 4) as usize])
        } else if (mask..mask + 4 * words).contains(&off) {
            Some(self.ind().mask[((off - mask) / 4) as usize])
        } else {
            None
        }
    }

    /// A write to the indirect registers; false if `off` is none of them on this variant.
    pub(super) fn write_indirect(&self, off: u32, value: u32) -> bool {
        let s = &*self.shared;
        let (data, mask, cmd, words) = s.ip.indirect();
        let is_data = (data..data + 4 * words).contains(&off);
        let is_mask = (mask..mask + 4 * words).contains(&off);
        if off != cmd && !is_data && !is_mask {
            return false;
        }
        let mut ind = self.ind();
        if ind.busy_reads_left > 0 || ind.cmd & 1 != 0 {
            // Hardware ignores context register writes while a command runs: a driver that
            // does this did not wait for busy to clear.
            drop(ind);
            s.context_error(format!("context register {off:#x} written while a context command was busy"));
            return true;
        }
        if off == cmd {
            ind.cmd = value | 1;
            ind.busy_reads_left = s.cfg.ctxt_busy_reads;
            if ind.busy_reads_left == 0 && !s.ctxt_stuck.load(Ordering::Acquire) {
                self.execute(&mut ind, value);
                ind.cmd &= !1;
            }
        } else if is_mask {
            ind.mask[((off - mask) / 4) as usize] = value;
        } else {
            ind.data[((off - data) / 4) as usize] = value;
        }
        true
    }

    /// Run a context command: select [4:1] (0/1 software C2H/H2C, 2/3 hardware, 4/5 credit,
    /// 6-11 others, 12 FMAP or CPM4's QID2VEC), op [6:5] (0 clear, 1 write, 2 read, 3
    /// invalidate), id from bit 7 (`Ip::qid_mask` wide).
    fn execute(&self, ind: &mut Indirect, cmd: u32) {
        let s = &*self.shared;
        let (sel, op, id) = ((cmd >> 1) & 0xf, (cmd >> 5) & 3, (cmd >> 7) & s.ip.qid_mask());
        let words = s.ip.indirect().3 as usize;
        let apply = |ctx: &mut [u32; 8], ind: &mut Indirect| match op {
            OP_CLR => *ctx = [0; 8],
            OP_WR => {
                for ((c, d), m) in ctx.iter_mut().zip(ind.data).zip(ind.mask).take(words) {
                    *c = (*c & !m) | (d & m);
                }
            }
            OP_RD => ind.data = *ctx,
            _ => *ctx = [0; 8],
        };
        if !s.ip.select_exists(sel) {
            return s.context_error(format!("context command with select {sel}, which {} does not have", s.ip.name()));
        }
        match sel {
            SEL_SW_C2H..=SEL_CR_H2C => {
                let dir = if sel % 2 == 0 { Direction::C2h } else { Direction::H2c };
                let Some(q) = s.queue(dir, id as usize) else {
                    return s.context_error(format!(
                        "context command for queue {id}, past the IP's {} queues",
                        s.cfg.max_queues
                    ));
                };
                let mut c = q.lock();
                let kind = ["software", "hardware", "credit"][(sel / 2) as usize];
                if op != OP_RD {
                    c.gen += 1;
                    if c.in_flight > 0 {
                        s.violation(format!(
                            "{dir} queue {id}: {} of its {kind} context with {} descriptors in flight (fetched \
                             by the engine, not completed): their data can still land after the queue is given up",
                            op_name(op),
                            c.in_flight
                        ));
                    }
                } else if sel / 2 == 1 {
                    c.hw_reads += 1;
                }
                match sel / 2 {
                    0 if op == OP_INV => c.sw[1] &= !SW1_QEN,
                    0 => apply(&mut c.sw, ind),
                    1 => apply(&mut c.hw, ind),
                    _ => apply(&mut c.cr, ind),
                }
                if sel / 2 == 0 && op != OP_RD {
                    c.fetched.clear();
                }
            }
            SEL_FMAP if s.ip == Ip::Cpm4 => {
                // QID2VEC on CPM4: stored, not a function map (CPM4's FMAP is a register).
                let mut other = s.other_ctx.lock().unwrap_or_else(|e| e.into_inner());
                apply(other.entry((sel, id)).or_insert([0; 8]), ind);
            }
            SEL_FMAP if op == OP_INV => {
                s.context_error("the FMAP context invalidated (the vendor's *_fmap_conf refuses it)".into())
            }
            _ => {
                if sel == super::intr::SEL_INT_COAL && op != OP_RD {
                    s.intr_ctx_changed(id);
                }
                let mut other = s.other_ctx.lock().unwrap_or_else(|e| e.into_inner());
                let ctx = other.entry((sel, id)).or_insert([0; 8]);
                apply(ctx, ind);
                if sel == SEL_FMAP && id == s.cfg.func_id as u32 {
                    let (base, max) = s.ip.fmap_fields();
                    *s.fmap.lock().unwrap_or_else(|e| e.into_inner()) = (ctx[0] & base, ctx[1] & max);
                }
            }
        }
    }
}
