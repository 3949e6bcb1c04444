//! QDMA context RAM through the indirect context registers (PG302; vendor
//! `qdma_indirect_reg_*`): eight data words at 0x804, eight mask words at 0x824, the command at
//! 0x844 (busy [0], select [4:1], op [6:5], queue or function id from bit 7). A write loads all
//! data and mask words (masks 0xffffffff) then the command; every command is followed by polling
//! busy until it clears (the vendor polls every 10 µs for up to 500 ms). A read is the command,
//! the poll, then the data words. (Versal CPM4 has four data and mask words and its command at
//! 0x824: it is refused before any of this runs.)
//!
//! Also the layouts of the contexts the MM driver programs and reads back: the software context
//! (`QDMA_SW_CTXT_W*`), the hardware context (`QDMA_HW_CTXT_W*`), the credit context and the
//! function map (FMAP: first queue in word 0, queue count in word 1, wider on CPM5).

use super::ip::IpKind;
use super::regs::*;
use crate::access::BarRegion;
use crate::direction::Direction;
use crate::{Error, Result};
use serde::Serialize;
use std::fmt;
use std::time::{Duration, Instant};

/// Context selects (`enum ind_ctxt_cmd_sel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sel {
    Sw(Direction),
    Hw(Direction),
    Credit(Direction),
    /// A C2H ST queue's completion ring context (select 6).
    Cmpt,
    /// A C2H ST queue's prefetch context (select 7).
    Prefetch,
    /// An interrupt aggregation ring's context (select 8), by ring index.
    IntCoal,
    Fmap,
}

impl Sel {
    fn code(self) -> u32 {
        let h2c = |dir: Direction| dir == Direction::H2c;
        match self {
            Sel::Sw(dir) => {
                if h2c(dir) {
                    SEL_SW_H2C
                } else {
                    SEL_SW_C2H
                }
            }
            Sel::Hw(dir) => {
                if h2c(dir) {
                    SEL_HW_H2C
                } else {
                    SEL_HW_C2H
                }
            }
            Sel::Credit(dir) => {
                if h2c(dir) {
                    SEL_CR_H2C
                } else {
                    SEL_CR_C2H
                }
            }
            Sel::Cmpt => SEL_CMPT,
            Sel::Prefetch => SEL_PFTCH,
            Sel::IntCoal => SEL_INT_COAL,
            Sel::Fmap => SEL_FMAP,
        }
    }

    fn name(self) -> String {
        match self {
            Sel::Sw(d) => format!("{d} software context"),
            Sel::Hw(d) => format!("{d} hardware context"),
            Sel::Credit(d) => format!("{d} credit context"),
            Sel::Cmpt => "completion (CMPT) context".into(),
            Sel::Prefetch => "C2H prefetch context".into(),
            Sel::IntCoal => "interrupt (aggregation ring) context".into(),
            Sel::Fmap => "function map (FMAP)".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Clear,
    Write,
    Read,
    Invalidate,
}

impl Op {
    fn code(self) -> u32 {
        match self {
            Op::Clear => OP_CLR,
            Op::Write => OP_WR,
            Op::Read => OP_RD,
            Op::Invalidate => OP_INV,
        }
    }
}

/// The indirect context registers of one config BAR.
pub struct ContextAccess<'a> {
    pub bar: &'a dyn BarRegion,
    /// Width of the command's id field (12, or 13 on EQDMA).
    pub qid_bits: u32,
    /// How long a command may stay busy (the vendor's 500 ms).
    pub timeout: Duration,
}

impl ContextAccess<'_> {
    fn command(&self, sel: Sel, op: Op, id: u32) -> Result<()> {
        if id >= 1 << self.qid_bits {
            return Err(Error::usage(format!(
                "queue or function id {id} does not fit the {}-bit context id field",
                self.qid_bits
            )));
        }
        let cmd = sel.code() << IND_CMD_SEL_SHIFT | op.code() << IND_CMD_OP_SHIFT | id << IND_CMD_QID_SHIFT;
        wr(self.bar, R_IND_CMD, cmd)?;
        self.wait(sel, op, id)
    }

    /// Poll busy: at once a few times (a command takes a few register clocks), then every 10 µs.
    fn wait(&self, sel: Sel, op: Op, id: u32) -> Result<()> {
        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            let v = rd(self.bar, R_IND_CMD)?;
            if v & IND_CMD_BUSY == 0 {
                return Ok(());
            }
            polls += 1;
            if start.elapsed() >= self.timeout {
                return Err(Error::Device(format!(
                    "QDMA context command ({op:?} {} of id {id}) still busy after {:?} (0x844 reads {v:#010x}): \
                     the context RAM is not answering; {} and try again",
                    sel.name(),
                    self.timeout,
                    crate::dma::engines::reset_the_card(self.bar)
                )));
            }
            if polls > 8 {
                std::thread::sleep(IND_POLL_INTERVAL);
            }
        }
    }

    pub fn clear(&self, sel: Sel, id: u32) -> Result<()> {
        self.command(sel, Op::Clear, id)
    }

    pub fn invalidate(&self, sel: Sel, id: u32) -> Result<()> {
        self.command(sel, Op::Invalidate, id)
    }

    /// Write all eight data words (`words` then zeros) with every mask bit set, then the command.
    pub fn write(&self, sel: Sel, id: u32, words: &[u32]) -> Result<()> {
        for i in 0..IND_WORDS {
            wr(self.bar, R_IND_DATA + 4 * i, words.get(i as usize).copied().unwrap_or(0))?;
        }
        for i in 0..IND_WORDS {
            wr(self.bar, R_IND_MASK + 4 * i, u32::MAX)?;
        }
        self.command(sel, Op::Write, id)
    }

    pub fn read(&self, sel: Sel, id: u32) -> Result<[u32; 8]> {
        self.command(sel, Op::Read, id)?;
        let mut w = [0u32; 8];
        for (i, x) in w.iter_mut().enumerate() {
            *x = rd(self.bar, R_IND_DATA + 4 * i as u64)?;
        }
        Ok(w)
    }

    /// Refuse hardware queue `qid` in `dir` when its software context is enabled: a driver (of this
    /// function or another whose FMAP overlaps) may be running it, and starting a queue clears its
    /// contexts. Linux's qdma driver refuses the same (`qdma_check_queue_status`: "queue %d already
    /// in use", -EBUSY) before it clears anything; libqdma never meets it, as its resource manager
    /// gives each function its own range. Reads only.
    pub fn refuse_in_use(&self, func: u32, qid: u32, dir: Direction) -> Result<()> {
        let sw = SwCtx::from_words(&self.read(Sel::Sw(dir), qid)?);
        if !sw.enabled {
            return Ok(());
        }
        let whose = if u32::from(sw.func) == func {
            format!("this function ({func}), by a driver or program before this one")
        } else {
            format!("function {}", sw.func)
        };
        Err(Error::Device(format!(
            "QDMA hardware queue {qid} ({dir}) is already in use: its software context is enabled for {whose}; pcibench \
             clears no queue another driver may be running. Stop what drives it (unload qdma-pf, close the program), or if \
             a program died holding it, reset the function (its sysfs reset file, or reload the FPGA image); or use fewer \
             --queues"
        )))
    }
}

/// The function map entry of one function: its queues are `qbase .. qbase + qmax`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fmap {
    pub qbase: u32,
    pub qmax: u32,
}

impl Fmap {
    /// The context words on `ip` (CPM5's fields are a bit wider: `eqdma_cpm5_fmap_write`).
    pub fn words(&self, ip: IpKind) -> [u32; 2] {
        let (base, max) = ip.fmap_fields();
        [self.qbase & base, self.qmax & max]
    }

    pub fn from_words(w: &[u32], ip: IpKind) -> Fmap {
        let (base, max) = ip.fmap_fields();
        Fmap { qbase: w[0] & base, qmax: w[1] & max }
    }
}

/// A software context (words 0-4 of `QDMA_SW_CTXT_W*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SwCtx {
    pub pidx: u16,
    pub irq_arm: bool,
    pub func: u16,
    pub enabled: bool,
    pub fetch_credit: bool,
    /// Status writeback when the queue's pending descriptors reach zero.
    pub wbi_chk: bool,
    /// Status writeback at the global writeback interval.
    pub wbi_intvl: bool,
    pub fetch_max: u8,
    pub ring_idx: u8,
    /// 0: 8 B, 1: 16 B, 2: 32 B, 3: 64 B descriptors.
    pub desc_size: u8,
    pub bypass: bool,
    pub mm_channel: u8,
    pub writeback: bool,
    pub irq: bool,
    /// Error field [27:26]: non-zero once the engine stopped the queue on an error.
    pub error: u8,
    pub error_wb_sent: bool,
    pub marker_disable: bool,
    pub is_mm: bool,
    pub ring_base: u64,
    /// Direct interrupt mode: the MSI-X vector the queue signals on (word 4).
    pub vec: u16,
    /// Interrupt aggregation (libqdma's indirect mode): `vec` is then an interrupt ring index.
    pub intr_aggr: bool,
}

impl SwCtx {
    pub fn words(&self) -> [u32; 5] {
        let b = |on: bool, mask: u32| if on { mask } else { 0 };
        let w0 = self.pidx as u32 & SW_W0_PIDX
            | b(self.irq_arm, SW_W0_IRQ_ARM)
            | (self.func as u32 & SW_W0_FUNC) << SW_W0_FUNC_SHIFT;
        let w1 = b(self.enabled, SW_W1_QEN)
            | b(self.fetch_credit, SW_W1_FCRD_EN)
            | b(self.wbi_chk, SW_W1_WBI_CHK)
            | b(self.wbi_intvl, SW_W1_WBI_INTVL)
            | (self.fetch_max as u32 & SW_W1_FETCH_MAX) << SW_W1_FETCH_MAX_SHIFT
            | (self.ring_idx as u32 & SW_W1_RNG_SZ) << SW_W1_RNG_SZ_SHIFT
            | (self.desc_size as u32 & SW_W1_DSC_SZ) << SW_W1_DSC_SZ_SHIFT
            | b(self.bypass, SW_W1_BYPASS)
            | b(self.mm_channel != 0, SW_W1_MM_CHN)
            | b(self.writeback, SW_W1_WBK_EN)
            | b(self.irq, SW_W1_IRQ_EN)
            | (self.error as u32 & SW_W1_ERR) << SW_W1_ERR_SHIFT
            | b(self.error_wb_sent, SW_W1_ERR_WB_SENT)
            | b(self.marker_disable, SW_W1_MRKR_DIS)
            | b(self.is_mm, SW_W1_IS_MM);
        let w4 = self.vec as u32 & SW_W4_VEC | b(self.intr_aggr, SW_W4_INTR_AGGR);
        [w0, w1, self.ring_base as u32, (self.ring_base >> 32) as u32, w4]
    }

    pub fn from_words(w: &[u32; 8]) -> SwCtx {
        let (w0, w1) = (w[0], w[1]);
        let f = |v: u32, shift: u32, mask: u32| ((v >> shift) & mask) as u8;
        SwCtx {
            pidx: (w0 & SW_W0_PIDX) as u16,
            irq_arm: w0 & SW_W0_IRQ_ARM != 0,
            func: ((w0 >> SW_W0_FUNC_SHIFT) & SW_W0_FUNC) as u16,
            enabled: w1 & SW_W1_QEN != 0,
            fetch_credit: w1 & SW_W1_FCRD_EN != 0,
            wbi_chk: w1 & SW_W1_WBI_CHK != 0,
            wbi_intvl: w1 & SW_W1_WBI_INTVL != 0,
            fetch_max: f(w1, SW_W1_FETCH_MAX_SHIFT, SW_W1_FETCH_MAX),
            ring_idx: f(w1, SW_W1_RNG_SZ_SHIFT, SW_W1_RNG_SZ),
            desc_size: f(w1, SW_W1_DSC_SZ_SHIFT, SW_W1_DSC_SZ),
            bypass: w1 & SW_W1_BYPASS != 0,
            mm_channel: (w1 & SW_W1_MM_CHN != 0) as u8,
            writeback: w1 & SW_W1_WBK_EN != 0,
            irq: w1 & SW_W1_IRQ_EN != 0,
            error: f(w1, SW_W1_ERR_SHIFT, SW_W1_ERR),
            error_wb_sent: w1 & SW_W1_ERR_WB_SENT != 0,
            marker_disable: w1 & SW_W1_MRKR_DIS != 0,
            is_mm: w1 & SW_W1_IS_MM != 0,
            ring_base: (w[3] as u64) << 32 | w[2] as u64,
            vec: (w[4] & SW_W4_VEC) as u16,
            intr_aggr: w[4] & SW_W4_INTR_AGGR != 0,
        }
    }

    /// The fields a read-back must match after a write (the engine updates pidx and the error
    /// bits itself).
    pub fn same_settings(&self, other: &SwCtx) -> bool {
        let strip = |c: &SwCtx| SwCtx { pidx: 0, error: 0, error_wb_sent: false, ..*c };
        strip(self) == strip(other)
    }
}

impl fmt::Display for SwCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = [8, 16, 32, 64][self.desc_size as usize & 3];
        write!(
            f,
            "{}, {}, ring base {:#x} (ring-size index {}), {size}-byte descriptors, pidx {}, function {}, \
             writeback {}{}{}",
            if self.enabled { "enabled" } else { "disabled" },
            if self.is_mm { "memory-mapped" } else { "stream" },
            self.ring_base,
            self.ring_idx,
            self.pidx,
            self.func,
            if self.writeback { "on" } else { "off" },
            if self.bypass { ", descriptor bypass" } else { "" },
            if self.mm_channel != 0 { ", MM channel 1" } else { "" },
        )?;
        match self.error {
            0 => Ok(()),
            e => write!(
                f,
                ", ERROR {e} (the engine stopped the queue{})",
                if self.error_wb_sent { "; error status written back" } else { "" }
            ),
        }
    }
}

/// An interrupt aggregation ring's context (select 8): what libqdma's `make_intr_context`
/// writes through the IP's `*_indirect_intr_context_write`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IntrCtx {
    pub valid: bool,
    /// The MSI-X vector the ring raises.
    pub vec: u16,
    /// Interrupt state (the hardware's; written 0).
    pub int_st: bool,
    /// The colour the next entry is written with (libqdma starts at 1).
    pub color: bool,
    /// Ring base, 4 KiB aligned.
    pub base: u64,
    /// Ring size code: (code + 1) pages of 512 entries.
    pub page_size: u8,
    /// The hardware's producer index (read back; written 0).
    pub pidx: u16,
    /// The owning function: word 3 on EQDMA and CPM5; soft 3.x's context has no such field.
    pub func: u16,
}

impl IntrCtx {
    pub fn words(&self, ip: IpKind) -> [u32; 4] {
        let b = |on: bool, mask: u32| if on { mask } else { 0 };
        let lo = ((self.base >> IC_BADDR_LOW_BIT) as u32) & ((1 << (IC_BADDR_MID_BIT - IC_BADDR_LOW_BIT)) - 1);
        let w0 = b(self.valid, IC_W0_VALID)
            | (self.vec as u32 & IC_W0_VEC) << IC_W0_VEC_SHIFT
            | b(self.int_st, IC_W0_INT_ST)
            | b(self.color, IC_W0_COLOR)
            | lo << IC_W0_BADDR_SHIFT;
        let w1 = (self.base >> IC_BADDR_MID_BIT) as u32;
        let w2 = (self.base >> IC_BADDR_HIGH_BIT) as u32 & IC_W2_BADDR_H
            | (self.page_size as u32 & IC_W2_PAGE_SIZE) << IC_W2_PAGE_SIZE_SHIFT
            | (self.pidx as u32 & IC_W2_PIDX) << IC_W2_PIDX_SHIFT;
        let w3 = if ip.eq_layout() { (self.func as u32 & EQ_IC_W3_FUNC) << EQ_IC_W3_FUNC_SHIFT } else { 0 };
        [w0, w1, w2, w3]
    }

    pub fn from_words(w: &[u32; 8], ip: IpKind) -> IntrCtx {
        let lo = (w[0] >> IC_W0_BADDR_SHIFT) as u64;
        IntrCtx {
            valid: w[0] & IC_W0_VALID != 0,
            vec: ((w[0] >> IC_W0_VEC_SHIFT) & IC_W0_VEC) as u16,
            int_st: w[0] & IC_W0_INT_ST != 0,
            color: w[0] & IC_W0_COLOR != 0,
            base: lo << IC_BADDR_LOW_BIT
                | (w[1] as u64) << IC_BADDR_MID_BIT
                | ((w[2] & IC_W2_BADDR_H) as u64) << IC_BADDR_HIGH_BIT,
            page_size: ((w[2] >> IC_W2_PAGE_SIZE_SHIFT) & IC_W2_PAGE_SIZE) as u8,
            pidx: ((w[2] >> IC_W2_PIDX_SHIFT) & IC_W2_PIDX) as u16,
            func: if ip.eq_layout() { ((w[3] >> EQ_IC_W3_FUNC_SHIFT) & EQ_IC_W3_FUNC) as u16 } else { 0 },
        }
    }
}

/// A hardware context (`QDMA_HW_CTXT_W*`): the engine's own view of the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HwCtx {
    pub cidx: u16,
    pub credits_used: u16,
    pub desc_pending: bool,
    /// The queue is invalid (stopped) with no descriptor pending: nothing of it is in flight.
    pub idle_stopped: bool,
    pub event_pending: bool,
    pub fetch_pending: u8,
}

impl HwCtx {
    pub fn from_words(w: &[u32; 8]) -> HwCtx {
        HwCtx {
            cidx: (w[0] & HW_W0_CIDX) as u16,
            credits_used: (w[0] >> HW_W0_CRD_USE_SHIFT) as u16,
            desc_pending: w[1] & HW_W1_DSC_PND != 0,
            idle_stopped: w[1] & HW_W1_IDL_STP_B != 0,
            event_pending: w[1] & HW_W1_EVT_PND != 0,
            fetch_pending: ((w[1] >> HW_W1_FETCH_PND_SHIFT) & HW_W1_FETCH_PND) as u8,
        }
    }
}

impl fmt::Display for HwCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cidx {}, {}{}, {} fetches pending, credits used {}",
            self.cidx,
            if self.desc_pending { "descriptors pending" } else { "no descriptors pending" },
            if self.idle_stopped { ", stopped with nothing in flight" } else { "" },
            self.fetch_pending,
            self.credits_used
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_context_round_trips_through_words() {
        let c = SwCtx {
            pidx: 0x1234,
            func: 3,
            enabled: true,
            wbi_chk: true,
            wbi_intvl: true,
            fetch_max: 7,
            ring_idx: 9,
            desc_size: 2,
            writeback: true,
            marker_disable: true,
            is_mm: true,
            ring_base: 0x1_2345_6000,
            ..Default::default()
        };
        let w = c.words();
        // Vendor masks: pidx [15:0], func [24:17]; qen 0, wbi_chk 2, wbi_intvl 3, fetch_max
        // [7:5], ring size [15:12], desc size [17:16], wbk_en 20, mrkr_dis 30, is_mm 31.
        assert_eq!(w[0], 0x1234 | 3 << 17);
        assert_eq!(w[1], 1 | 1 << 2 | 1 << 3 | 7 << 5 | 9 << 12 | 2 << 16 | 1 << 20 | 1 << 30 | 1 << 31);
        assert_eq!((w[2], w[3]), (0x2345_6000, 1));
        let mut all = [0u32; 8];
        all[..5].copy_from_slice(&w);
        all[1] |= 1 << 26 | 1 << 28;
        let back = SwCtx::from_words(&all);
        assert!(back.same_settings(&c));
        assert_eq!((back.error, back.error_wb_sent), (1, true));
        let text = back.to_string();
        assert!(text.starts_with("enabled, memory-mapped, ring base 0x123456000"), "{text}");
        assert!(text.contains("ERROR 1"), "{text}");
        let hw = HwCtx::from_words(&[0x0002_0007, 1 << 8 | 3 << 11, 0, 0, 0, 0, 0, 0]);
        assert_eq!((hw.cidx, hw.credits_used, hw.desc_pending, hw.fetch_pending), (7, 2, true, 3));
        let f = Fmap { qbase: 16, qmax: 8 };
        assert_eq!(Fmap::from_words(&f.words(IpKind::QdmaSoft), IpKind::QdmaSoft), f);
        // CPM5's FMAP: first queue [11:0], count [12:0] (the soft IP's [10:0] and [11:0] lose them).
        let wide = Fmap { qbase: 2048, qmax: 4096 };
        assert_eq!(Fmap::from_words(&wide.words(IpKind::VersalCpm5), IpKind::VersalCpm5), wide);
        assert_eq!(wide.words(IpKind::Eqdma), [0, 0]);
    }

    #[test]
    fn interrupt_context_words_follow_each_ips_layout() {
        let c = IntrCtx {
            valid: true,
            vec: 0x5a5,
            color: true,
            base: 0xe000_0001_2345_6000,
            page_size: 2,
            pidx: 0x123,
            func: 0xabc,
            ..Default::default()
        };
        // qdma_soft_reg.h QDMA_INTR_CTXT_W*: valid 0, vector [11:1], colour 14, base [28:12] in
        // W0 [31:15], [60:29] in W1, [63:61] in W2 [2:0]; page size W2 [5:3], pidx W2 [17:6].
        let w = c.words(IpKind::QdmaSoft);
        assert_eq!(w[0], 1 | 0x5a5 << 1 | 1 << 14 | (0x2_3456 & 0x1_ffff) << 15);
        assert_eq!(w[1], (0xe000_0001_2345_6000u64 >> 29) as u32);
        assert_eq!(w[2], 7 | 2 << 3 | 0x123 << 6);
        assert_eq!(w[3], 0, "soft 3.x has no function field");
        // EQDMA / CPM5 (INTR_CTXT_DATA_W3_FUNC_MASK [29:18]): the function in word 3.
        assert_eq!(c.words(IpKind::Eqdma)[3], 0xabc << 18);
        let mut all = [0u32; 8];
        all[..4].copy_from_slice(&c.words(IpKind::VersalCpm5));
        assert_eq!(IntrCtx::from_words(&all, IpKind::VersalCpm5), c);
        all[..4].copy_from_slice(&w);
        assert_eq!(IntrCtx::from_words(&all, IpKind::QdmaSoft), IntrCtx { func: 0, ..c });
    }
}
