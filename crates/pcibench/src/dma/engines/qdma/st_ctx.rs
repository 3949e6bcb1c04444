//! The contexts a C2H stream queue has beyond the software, hardware and credit contexts: the
//! prefetch context (select 7) and the completion (CMPT) ring context (select 6), built as the
//! vendor's `make_prefetch_context` and `make_cmpt_context` (libqdma qdma_context.c) fill them and
//! laid out as each IP's `*_pfetch_context_write` / `*_cmpt_context_write` pack them
//! (qdma_soft_access.c, eqdma_soft_access.c, eqdma_cpm5_access.c). Where the layouts differ (the
//! ring's base address: 4 KiB granular on the soft 3.x IP, 4-byte on EQDMA and CPM5, which also
//! carry a C2H direction bit) the IP decides.

use super::ip::IpKind;
use super::regs::*;

/// A prefetch context: C2H buffer size index, prefetch on or off, valid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchCtx {
    pub bypass: bool,
    pub buf_sz_idx: u8,
    pub pfch_en: bool,
    pub err: bool,
    pub valid: bool,
}

impl PrefetchCtx {
    pub fn words(&self) -> [u32; 2] {
        let b = |on: bool, m: u32| if on { m } else { 0 };
        [
            b(self.bypass, PF_W0_BYPASS)
                | (self.buf_sz_idx as u32 & PF_W0_BUF_SZ) << PF_W0_BUF_SZ_SHIFT
                | b(self.err, PF_W0_ERR)
                | b(self.pfch_en, PF_W0_PFCH_EN),
            b(self.valid, PF_W1_VALID),
        ]
    }

    pub fn from_words(w: &[u32]) -> PrefetchCtx {
        PrefetchCtx {
            bypass: w[0] & PF_W0_BYPASS != 0,
            buf_sz_idx: ((w[0] >> PF_W0_BUF_SZ_SHIFT) & PF_W0_BUF_SZ) as u8,
            pfch_en: w[0] & PF_W0_PFCH_EN != 0,
            err: w[0] & PF_W0_ERR != 0,
            valid: w[1] & PF_W1_VALID != 0,
        }
    }
}

/// A completion ring context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmptCtx {
    pub en_stat_desc: bool,
    pub en_int: bool,
    pub trig_mode: u8,
    pub func: u16,
    pub counter_idx: u8,
    pub timer_idx: u8,
    /// The colour the engine writes into the next entry (the vendor starts at 1).
    pub color: bool,
    pub ring_idx: u8,
    pub base: u64,
    /// 0-3: 8, 16, 32, 64-byte entries.
    pub desc_size: u8,
    pub cidx: u16,
    pub valid: bool,
    pub err: u8,
    pub ovf_chk_dis: bool,
    /// The interrupt vector, or the interrupt ring's index when `int_aggr` (word 4).
    pub vec: u16,
    pub int_aggr: bool,
}

impl CmptCtx {
    /// The context words as `ip` packs them.
    pub fn words(&self, ip: IpKind) -> [u32; 6] {
        let b = |on: bool, m: u32| if on { m } else { 0 };
        let w0 = b(self.en_stat_desc, CM_W0_EN_STAT_DESC)
            | b(self.en_int, CM_W0_EN_INT)
            | (self.trig_mode as u32 & CM_W0_TRIG) << CM_W0_TRIG_SHIFT
            | (self.func as u32 & CM_W0_FNC) << CM_W0_FNC_SHIFT
            | (self.counter_idx as u32 & CM_W0_IDX) << CM_W0_CNT_IDX_SHIFT
            | (self.timer_idx as u32 & CM_W0_IDX) << CM_W0_TMR_IDX_SHIFT
            | b(self.color, CM_W0_COLOR)
            | (self.ring_idx as u32 & 0xf) << CM_W0_RNG_SZ_SHIFT;
        let high = ((self.base >> CM_BADDR_HIGH_BIT) as u32) & CM_W2_BADDR_H;
        let w2 = high | (self.desc_size as u32 & 3) << CM_W2_DESC_SZ_SHIFT;
        let w3 = (self.cidx as u32) << CM_W3_CIDX_SHIFT
            | b(self.valid, CM_W3_VALID)
            | (self.err as u32 & 3) << CM_W3_ERR_SHIFT;
        let w4 = b(self.ovf_chk_dis, CM_W4_OVF_CHK_DIS)
            | (self.vec as u32 & CM_W4_VEC) << CM_W4_VEC_SHIFT
            | b(self.int_aggr, CM_W4_INT_AGGR);
        if eqdma(ip) {
            let w1 = (self.base >> EQ_CM_BADDR_LOW_BIT) as u32;
            let w5 = (((self.base >> 2) & 0xf) as u32) << EQ_CM_W5_BADDR_LOW_SHIFT;
            [w0, w1, w2, w3, w4 | EQ_CM_W4_DIR_C2H, w5]
        } else {
            let w1 = (((self.base >> S3_CM_BADDR_LOW_BIT) as u32) & 0x03ff_ffff) << S3_CM_W1_BADDR_SHIFT;
            [w0, w1, w2, w3, w4, 0]
        }
    }

    pub fn from_words(w: &[u32], ip: IpKind) -> CmptCtx {
        let f = |v: u32, shift: u32, m: u32| ((v >> shift) & m) as u8;
        let high = ((w[2] & CM_W2_BADDR_H) as u64) << CM_BADDR_HIGH_BIT;
        let base = if eqdma(ip) {
            high | (w[1] as u64) << EQ_CM_BADDR_LOW_BIT | (((w[5] >> EQ_CM_W5_BADDR_LOW_SHIFT) & 0xf) as u64) << 2
        } else {
            high | ((w[1] >> S3_CM_W1_BADDR_SHIFT) as u64) << S3_CM_BADDR_LOW_BIT
        };
        CmptCtx {
            en_stat_desc: w[0] & CM_W0_EN_STAT_DESC != 0,
            en_int: w[0] & CM_W0_EN_INT != 0,
            trig_mode: f(w[0], CM_W0_TRIG_SHIFT, CM_W0_TRIG),
            func: ((w[0] >> CM_W0_FNC_SHIFT) & CM_W0_FNC) as u16,
            counter_idx: f(w[0], CM_W0_CNT_IDX_SHIFT, CM_W0_IDX),
            timer_idx: f(w[0], CM_W0_TMR_IDX_SHIFT, CM_W0_IDX),
            color: w[0] & CM_W0_COLOR != 0,
            ring_idx: (w[0] >> CM_W0_RNG_SZ_SHIFT) as u8,
            base,
            desc_size: f(w[2], CM_W2_DESC_SZ_SHIFT, 3),
            cidx: (w[3] >> CM_W3_CIDX_SHIFT) as u16,
            valid: w[3] & CM_W3_VALID != 0,
            err: f(w[3], CM_W3_ERR_SHIFT, 3),
            ovf_chk_dis: w[4] & CM_W4_OVF_CHK_DIS != 0,
            vec: ((w[4] >> CM_W4_VEC_SHIFT) & CM_W4_VEC) as u16,
            int_aggr: w[4] & CM_W4_INT_AGGR != 0,
        }
    }

    /// The settings a read-back must keep (the engine moves the indexes, colour and error).
    pub fn same_settings(&self, other: &CmptCtx) -> bool {
        let strip = |c: &CmptCtx| CmptCtx { cidx: 0, color: false, err: 0, ..*c };
        strip(self) == strip(other)
    }
}

fn eqdma(ip: IpKind) -> bool {
    matches!(ip, IpKind::Eqdma | IpKind::VersalCpm5)
}

/// Where a completion ring may start on `ip`: 4 KiB on the soft 3.x IP, whose context keeps
/// only address bits 37:12; 64 bytes elsewhere (one entry of the widest size).
pub fn cmpt_align(ip: IpKind) -> u64 {
    if eqdma(ip) {
        64
    } else {
        1 << S3_CM_BADDR_LOW_BIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_contexts_follow_each_ips_layout() {
        let p = PrefetchCtx { buf_sz_idx: 13, pfch_en: true, valid: true, ..Default::default() };
        // BUF_SIZE_IDX [4:1], PFETCH_EN 27; VALID is word 1 bit 13.
        assert_eq!(p.words(), [13 << 1 | 1 << 27, 1 << 13]);
        assert_eq!(PrefetchCtx::from_words(&p.words()), p);
        let c = CmptCtx {
            en_stat_desc: true,
            trig_mode: TRIG_EVERY as u8,
            func: 2,
            color: true,
            ring_idx: 9,
            base: 0x12_3456_7000,
            valid: true,
            ..Default::default()
        };
        let soft = c.words(IpKind::QdmaSoft);
        // EN_STAT_DESC 0, TRIG_MODE [4:2], FNC_ID [12:5], COLOR 27, RING_SZ [31:28].
        assert_eq!(soft[0], 1 | 1 << 2 | 2 << 5 | 1 << 27 | 9 << 28);
        // Soft 3.x: word 1 [31:6] = address [37:12].
        assert_eq!(soft[1], ((0x12_3456_7000u64 >> 12) as u32 & 0x03ff_ffff) << 6);
        assert_eq!(soft[3], 1 << 28);
        assert_eq!(CmptCtx::from_words(&soft, IpKind::QdmaSoft), c);
        // EQDMA keeps the low address bits: word 1 = address [37:6], word 5 [17:14] = [5:2].
        let odd = CmptCtx { base: 0x1_0000_0040, ..c };
        let eq = odd.words(IpKind::Eqdma);
        assert_eq!((eq[1], eq[2] & CM_W2_BADDR_H), ((0x1_0000_0040u64 >> 6) as u32, 0));
        assert_eq!(eq[4] & EQ_CM_W4_DIR_C2H, EQ_CM_W4_DIR_C2H);
        assert_eq!(CmptCtx::from_words(&eq, IpKind::VersalCpm5).base, 0x1_0000_0040);
        assert_eq!((cmpt_align(IpKind::QdmaSoft), cmpt_align(IpKind::Eqdma)), (4096, 64));
    }
}
