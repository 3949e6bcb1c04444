//! The QDMA error registers read, cleared and put into words, per the layout the IP's vendor
//! header defines (`ErrLayout`): the global status (the leaf aggregators), the descriptor engine's
//! status and first-error logs, the register-access (TRQ) status and log, and the MM engines'
//! error code and info. Where a vendor header names a register but not its fields (soft 3.x's
//! logs and MM error registers), the words are shown raw and never decoded or relied on.

use super::ip::{ErrLayout, IpKind};
use super::regs::*;
use crate::access::BarRegion;
use crate::direction::Direction;
use crate::Result;
use serde::Serialize;

type Words = &'static [(u32, &'static str)];

const GLBL_S3: Words = &[
    (GLBL_RAM_SBE, "RAM single-bit ECC error"),
    (GLBL_RAM_DBE, "RAM double-bit ECC error"),
    (GLBL_DSC, "descriptor engine error (GLBL_DSC_ERR_STS)"),
    (GLBL_TRQ, "register access error (GLBL_TRQ_ERR_STS)"),
    (GLBL_C2H_ST, "C2H stream error"),
    (S3_GLBL_H2C_ST, "H2C stream error"),
];
const GLBL_C4: Words = &[
    (GLBL_RAM_SBE, "RAM single-bit ECC error"),
    (GLBL_RAM_DBE, "RAM double-bit ECC error"),
    (GLBL_DSC, "descriptor engine error (GLBL_DSC_ERR_STS)"),
    (GLBL_TRQ, "register access error (GLBL_TRQ_ERR_STS)"),
    (GLBL_H2C_MM0, "H2C MM channel 0 error"),
    (GLBL_H2C_MM1, "H2C MM channel 1 error"),
    (GLBL_C2H_MM0, "C2H MM channel 0 error"),
    (GLBL_C2H_MM1, "C2H MM channel 1 error"),
    (GLBL_C2H_ST, "C2H stream error"),
    (C4_GLBL_IND_CTXT_CMD, "context command error (a bad select or queue id, or a command while busy)"),
    (C4_GLBL_BRIDGE, "bridge error"),
    (S3_GLBL_H2C_ST, "H2C stream error"),
];
const GLBL_EQ: Words = &[
    (GLBL_RAM_SBE, "RAM single-bit ECC error"),
    (GLBL_RAM_DBE, "RAM double-bit ECC error"),
    (GLBL_DSC, "descriptor engine error (GLBL_DSC_ERR_STS)"),
    (GLBL_TRQ, "register access error (GLBL_TRQ_ERR_STS)"),
    (GLBL_H2C_MM0, "H2C MM channel 0 error"),
    (GLBL_H2C_MM1, "H2C MM channel 1 error"),
    (GLBL_C2H_MM0, "C2H MM channel 0 error"),
    (GLBL_C2H_MM1, "C2H MM channel 1 error"),
    (GLBL_C2H_ST, "C2H stream error"),
    (EQ_GLBL_IND_CTXT_CMD, "context command error"),
    (EQ_GLBL_BRIDGE, "bridge error"),
    (EQ_GLBL_H2C_ST, "H2C stream error"),
    (EQ_GLBL_FABRIC, "fabric error"),
];

const DSC_DMA_WORDS: &str = "DMA engine error (a data transfer failed: the host buffer is not mapped for the card, or \
                             no card memory at the card address: check --card-addr/--card-size)";
const DSC_UR_CA_WORDS: &str =
    "unsupported request or completer abort on a descriptor fetch (the ring's bus address is not reachable)";
const DSC_PARAM_WORDS: &str = "descriptor parameter error (ring size, producer index, length or queue settings)";
const DSC_DSC_WORDS: &str = "descriptor error (an invalid producer index update)";
const DSC_S3: Words = &[
    (S3_DSC_POISON, "poisoned descriptor completion"),
    (S3_DSC_UR_CA, DSC_UR_CA_WORDS),
    (S3_DSC_PARAM, DSC_PARAM_WORDS),
    (S3_DSC_ADDR, "descriptor address error"),
    (S3_DSC_TAG, "descriptor fetch tag error"),
    (S3_DSC_FLR, "function level reset during a fetch"),
    (DSC_TIMEOUT, "descriptor fetch timeout"),
    (DSC_DAT_POISON, "poisoned data"),
    (DSC_FLR_CANCEL, "fetch cancelled by a function level reset"),
    (DSC_DMA, DSC_DMA_WORDS),
    (DSC_DSC, DSC_DSC_WORDS),
    (DSC_RQ_CANCEL, "request cancelled"),
    (DSC_DBE, "descriptor RAM double-bit error"),
    (DSC_SBE, "descriptor RAM single-bit error"),
];
const DSC_EQ: Words = &[
    (EQ_DSC_POISON, "poisoned descriptor completion"),
    (EQ_DSC_UR_CA, DSC_UR_CA_WORDS),
    (EQ_DSC_BCNT, "descriptor byte count error"),
    (EQ_DSC_PARAM, DSC_PARAM_WORDS),
    (EQ_DSC_ADDR, "descriptor address error"),
    (EQ_DSC_TAG, "descriptor fetch tag error"),
    (EQ_DSC_FLR, "function level reset during a fetch"),
    (DSC_TIMEOUT, "descriptor fetch timeout"),
    (DSC_DAT_POISON, "poisoned data"),
    (DSC_FLR_CANCEL, "fetch cancelled by a function level reset"),
    (DSC_DMA, DSC_DMA_WORDS),
    (DSC_DSC, DSC_DSC_WORDS),
    (DSC_RQ_CANCEL, "request cancelled"),
    (DSC_DBE, "descriptor RAM double-bit error"),
    (DSC_SBE, "descriptor RAM single-bit error"),
    (EQ_DSC_PORT_ID, "port id error"),
];

const TRQ_QID_RANGE_WORDS: &str =
    "queue id outside this function's FMAP range (a doorbell for a queue the function does not own)";
const TRQ_S3: Words = &[
    (S3_TRQ_UNMAPPED, "access to an unmapped register address"),
    (S3_TRQ_QID_RANGE, TRQ_QID_RANGE_WORDS),
    (S3_TRQ_VF_ACCESS, "VF access error"),
    (S3_TRQ_TIMEOUT, "register access timeout"),
];
const TRQ_EQ: Words = &[
    (EQ_TRQ_CSR_UNMAPPED, "access to an unmapped register address"),
    (EQ_TRQ_VF_ACCESS, "VF access error"),
    (EQ_TRQ_CSR_TIMEOUT, "register access timeout"),
    (EQ_TRQ_QSPC_UNMAPPED, "access to an unmapped queue (doorbell) address"),
    (EQ_TRQ_QID_RANGE, TRQ_QID_RANGE_WORDS),
    (EQ_TRQ_QSPC_TIMEOUT, "queue (doorbell) access timeout"),
];

/// GLBL_ERR_STAT bits in words, in `layout`'s names.
pub fn glbl_words(layout: ErrLayout, v: u32) -> String {
    let table = match layout {
        ErrLayout::Soft3 => GLBL_S3,
        ErrLayout::Cpm4 => GLBL_C4,
        ErrLayout::Eqdma => GLBL_EQ,
    };
    bits(v, table)
}

/// Words for the set bits of `v` from a (mask, words) table; unnamed bits by number.
fn bits(v: u32, table: Words) -> String {
    let mut out: Vec<String> = table.iter().filter(|(m, _)| v & m != 0).map(|(_, n)| n.to_string()).collect();
    let known = table.iter().fold(0, |a, (m, _)| a | m);
    for b in (0..32).filter(|b| v & !known & (1 << b) != 0) {
        out.push(format!("bit {b}"));
    }
    out.join(", ")
}

fn field(v: u32, shift: u32, mask: u32) -> u32 {
    (v >> shift) & mask
}

/// The hardware queue an error log names, and its direction where the register tells it (the
/// MM engine's block does; the descriptor log's select bit is not documented as a direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailingQueue {
    pub qid: u32,
    pub dir: Option<Direction>,
}

/// The error registers at one moment, as read (pending bits are left set until `clear`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorRegs {
    pub layout: ErrLayout,
    pub glbl: u32,
    pub dsc: u32,
    pub dsc_log0: u32,
    pub dsc_log1: u32,
    pub trq: u32,
    pub trq_log: u32,
    /// MM engine error code and info, H2C then C2H; not read on soft 3.x, whose header defines
    /// none of their fields (the vendor's 3.x code never reads them but in register dumps).
    pub mm: [(u32, u32); 2],
    /// MM_STATUS, H2C then C2H, on EQDMA and CPM5: the MM errors' leaf status register in the
    /// vendor's `eqdma_err_info[]` (its header names only RUN [0]); not read elsewhere.
    pub mm_status: [u32; 2],
}

const DIRS: [Direction; 2] = [Direction::H2c, Direction::C2h];

impl ErrorRegs {
    pub fn read(bar: &dyn BarRegion, ip: IpKind, mm_present: [bool; 2]) -> Result<ErrorRegs> {
        let layout = ip.err_layout();
        let mut e = ErrorRegs {
            layout,
            glbl: rd(bar, R_GLBL_ERR_STAT)?,
            dsc: rd(bar, R_DSC_ERR_STS)?,
            dsc_log0: rd(bar, R_DSC_ERR_LOG0)?,
            dsc_log1: rd(bar, R_DSC_ERR_LOG1)?,
            trq: rd(bar, R_TRQ_ERR_STS)?,
            trq_log: rd(bar, R_TRQ_ERR_LOG)?,
            mm: [(0, 0); 2],
            mm_status: [0; 2],
        };
        if layout != ErrLayout::Soft3 {
            for (i, dir) in DIRS.into_iter().enumerate() {
                if mm_present[i] {
                    e.mm[i] = (rd(bar, mm(dir, MM_ERR_CODE))?, rd(bar, mm(dir, MM_ERR_INFO))?);
                    if layout == ErrLayout::Eqdma {
                        e.mm_status[i] = rd(bar, mm(dir, MM_STATUS))?;
                    }
                }
            }
        }
        Ok(e)
    }

    /// Whether the MM engine `i` (0 H2C, 1 C2H) logged an error: CPM4's valid bit is in
    /// ERR_CODE [17]; EQDMA/CPM5 have the descriptor's consumer index there ([27:12]) and the
    /// valid bit in ERR_INFO [31].
    fn mm_valid(&self, i: usize) -> bool {
        let (code, info) = self.mm[i];
        match self.layout {
            ErrLayout::Cpm4 => code & C4_MM_CODE_VALID != 0,
            ErrLayout::Eqdma => info & EQ_MM_INFO_VALID != 0,
            ErrLayout::Soft3 => false,
        }
    }

    pub fn any(&self) -> bool {
        self.glbl != 0 || self.dsc != 0 || self.trq != 0 || (0..2).any(|i| self.mm_valid(i))
    }

    /// Clear what was read, leaves before the global status, as the vendor's
    /// `*_hw_error_process` does (each leaf's status register written back as read, then
    /// GLBL_ERR_STAT): a global bit aggregates its leaf, and may stay set while the leaf is.
    /// The MM leaf of EQDMA and CPM5 is MM_STATUS (`eqdma_err_info[]`,
    /// `eqdma_cpm5_err_info[]`), written back as read when not zero; the vendor never writes
    /// the MM error log itself. CPM4's vendor code has no MM leaf and no way to clear its log:
    /// its ERR_CODE is written back as read, and a log is reported only while its valid bit is.
    pub fn clear(&self, bar: &dyn BarRegion, mm_present: [bool; 2]) -> Result<()> {
        for (reg, v) in [(R_DSC_ERR_STS, self.dsc), (R_TRQ_ERR_STS, self.trq)] {
            if v != 0 {
                wr(bar, reg, v)?;
            }
        }
        for (i, dir) in DIRS.into_iter().enumerate() {
            if !mm_present[i] {
                continue;
            }
            match self.layout {
                ErrLayout::Eqdma if self.mm_status[i] != 0 && (self.glbl != 0 || self.mm_valid(i)) => {
                    wr(bar, mm(dir, MM_STATUS), self.mm_status[i])?
                }
                ErrLayout::Cpm4 if self.mm_valid(i) => wr(bar, mm(dir, MM_ERR_CODE), self.mm[i].0)?,
                _ => {}
            }
        }
        if self.glbl != 0 {
            wr(bar, R_GLBL_ERR_STAT, self.glbl)?;
        }
        Ok(())
    }

    /// The hardware queue the descriptor or MM error log names.
    pub fn failing_queue(&self) -> Option<FailingQueue> {
        let l0 = self.dsc_log0;
        let dsc = match self.layout {
            ErrLayout::Cpm4 if l0 & C4_LOG0_VALID != 0 => Some(field(l0, C4_LOG0_QID_SHIFT, C4_LOG0_QID)),
            ErrLayout::Eqdma if l0 & EQ_LOG0_VALID != 0 => Some(l0 & EQ_LOG0_QID),
            _ => None,
        };
        if let Some(qid) = dsc {
            return Some(FailingQueue { qid, dir: None });
        }
        (0..2).find(|i| self.mm_valid(*i)).map(|i| FailingQueue { qid: self.mm_qid_cidx(i).0, dir: Some(DIRS[i]) })
    }

    /// The MM log's hardware queue and descriptor index.
    fn mm_qid_cidx(&self, i: usize) -> (u32, u32) {
        let (code, info) = self.mm[i];
        match self.layout {
            ErrLayout::Eqdma => (info & EQ_MM_INFO_QID, field(code, EQ_MM_CODE_CIDX_SHIFT, EQ_MM_CODE_CIDX)),
            _ => (field(info, C4_MM_INFO_QID_SHIFT, C4_MM_INFO_QID), info & C4_MM_INFO_CIDX),
        }
    }

    fn dsc_first_error(&self) -> String {
        let (l0, l1) = (self.dsc_log0, self.dsc_log1);
        let kind = |l1: u32| {
            format!("error type {}, sub type {}", l1 & LOG1_ERR_TYPE, field(l1, LOG1_SUB_TYPE_SHIFT, LOG1_SUB_TYPE))
        };
        match self.layout {
            ErrLayout::Cpm4 if l0 & C4_LOG0_VALID != 0 => format!(
                " (first error: hardware queue {}, select {}, descriptor {}, {})",
                field(l0, C4_LOG0_QID_SHIFT, C4_LOG0_QID),
                (l0 & C4_LOG0_SEL != 0) as u8,
                l0 & C4_LOG0_CIDX,
                kind(l1)
            ),
            ErrLayout::Eqdma if l0 & EQ_LOG0_VALID != 0 => format!(
                " (first error: hardware queue {}, select {}, descriptor {}, {})",
                l0 & EQ_LOG0_QID,
                (l0 & EQ_LOG0_SEL != 0) as u8,
                field(l1, EQ_LOG1_CIDX_SHIFT, EQ_LOG1_CIDX),
                kind(l1)
            ),
            ErrLayout::Soft3 if l0 != 0 || l1 != 0 => {
                format!(" (logs {l0:#x} {l1:#x}: qdma_soft_reg.h defines no fields for them)")
            }
            _ => String::new(),
        }
    }

    fn trq_log_words(&self) -> String {
        let l = self.trq_log;
        match self.layout {
            ErrLayout::Cpm4 => format!(
                "function {}, address {:#x}",
                field(l, C4_TRQ_LOG_FUNC_SHIFT, C4_TRQ_LOG_FUNC),
                l & C4_TRQ_LOG_ADDR
            ),
            ErrLayout::Eqdma => format!(
                "function {}, address {:#x}",
                field(l, EQ_TRQ_LOG_FUNC_SHIFT, EQ_TRQ_LOG_FUNC),
                l & EQ_TRQ_LOG_ADDR
            ),
            ErrLayout::Soft3 => format!("log {l:#x}"),
        }
    }

    /// Everything set, in words.
    pub fn describe(&self) -> String {
        let (glbl, dsc, trq) = match self.layout {
            ErrLayout::Soft3 => (GLBL_S3, DSC_S3, TRQ_S3),
            ErrLayout::Cpm4 => (GLBL_C4, DSC_S3, TRQ_S3),
            ErrLayout::Eqdma => (GLBL_EQ, DSC_EQ, TRQ_EQ),
        };
        let mut parts = Vec::new();
        if self.glbl != 0 {
            parts.push(format!("GLBL_ERR_STAT {:#x}: {}", self.glbl, bits(self.glbl, glbl)));
        }
        if self.dsc != 0 {
            parts.push(format!("GLBL_DSC_ERR_STS {:#x}: {}{}", self.dsc, bits(self.dsc, dsc), self.dsc_first_error()));
        }
        if self.trq != 0 {
            parts.push(format!("GLBL_TRQ_ERR_STS {:#x}: {} ({})", self.trq, bits(self.trq, trq), self.trq_log_words()));
        }
        for (i, dir) in DIRS.into_iter().enumerate() {
            if !self.mm_valid(i) {
                continue;
            }
            let code = self.mm[i].0;
            let (qid, cidx) = self.mm_qid_cidx(i);
            let how = match self.layout {
                ErrLayout::Cpm4 => format!(
                    "{} side, code {}",
                    if code & C4_MM_CODE_RDWR != 0 { "write" } else { "read" },
                    code & MM_CODE
                ),
                _ => format!("code {}", code & MM_CODE),
            };
            parts.push(format!(
                "{dir} MM error: {} ({how}); hardware queue {qid}, descriptor {cidx}",
                mm_error_words(dir, code & MM_CODE)
            ));
        }
        if parts.is_empty() {
            "no error bits set".into()
        } else {
            parts.join("; ")
        }
    }
}

/// An MM error code in words. The vendor headers name the bits of ERR_CODE_ENABLE_MASK and no
/// values of ERR_CODE's code field; the code is read as the number of its enable bit, so the
/// number is always shown beside the words.
pub fn mm_error_words(dir: Direction, code: u32) -> &'static str {
    match (dir, code) {
        (Direction::H2c, MM_H2C_RD_HDR_POISON) => "host read: poisoned header",
        (Direction::H2c, MM_H2C_RD_UR_CA) => {
            "host read: unsupported request or completer abort (the host buffer is not mapped for the card)"
        }
        (Direction::H2c, MM_H2C_RD_HDR_BYTE) => "host read: byte count error",
        (Direction::H2c, MM_H2C_RD_HDR_PARAM) => "host read: header parameter error",
        (Direction::H2c, MM_H2C_RD_HDR_ADR) => "host read: header address error",
        (Direction::H2c, MM_H2C_RD_FLR) => "host read: function level reset",
        (Direction::H2c, MM_H2C_RD_DAT_POISON) => "host read: poisoned data",
        (Direction::H2c, MM_H2C_RD_RQ_DIS) => "host read: request disabled",
        (Direction::H2c, MM_H2C_WR_DEC) => {
            "card write: AXI decode error (no card memory at that address: check --card-addr/--card-size)"
        }
        (Direction::H2c, MM_H2C_WR_SLV) => "card write: AXI slave error",
        (Direction::C2h, MM_C2H_WR_SLV) => "card write: AXI slave error",
        (Direction::C2h, MM_C2H_RD_SLV) => {
            "card read: AXI slave error (no card memory at that address: check --card-addr/--card-size)"
        }
        (Direction::C2h, MM_C2H_WR_FLR) => "host write: function level reset",
        (Direction::C2h, MM_C2H_WR_UR) => {
            "host write: unsupported request (the host buffer is not mapped for the card)"
        }
        (Direction::C2h, MM_C2H_WR_UC_RAM) => "host write: uncorrectable RAM error",
        _ => "unnamed error code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(layout: ErrLayout) -> ErrorRegs {
        ErrorRegs {
            layout,
            glbl: 0,
            dsc: 0,
            dsc_log0: 0,
            dsc_log1: 0,
            trq: 0,
            trq_log: 0,
            mm: [(0, 0); 2],
            mm_status: [0; 2],
        }
    }

    #[test]
    fn each_layout_decodes_its_own_fields() {
        // CPM4: the descriptor log's queue is [28:17]; the MM valid bit is ERR_CODE [17].
        let c4 = ErrorRegs {
            glbl: GLBL_DSC | GLBL_H2C_MM0,
            dsc: S3_DSC_UR_CA,
            dsc_log0: C4_LOG0_VALID | 5 << 17 | C4_LOG0_SEL | 9,
            dsc_log1: 1,
            mm: [(C4_MM_CODE_VALID | MM_H2C_RD_UR_CA, 5 << 17 | 9), (0, 0)],
            ..regs(ErrLayout::Cpm4)
        };
        assert!(c4.any());
        assert_eq!(c4.failing_queue(), Some(FailingQueue { qid: 5, dir: None }));
        let s = c4.describe();
        assert!(s.contains("completer abort on a descriptor fetch"), "{s}");
        assert!(s.contains("first error: hardware queue 5, select 1, descriptor 9, error type 1"), "{s}");
        assert!(s.contains("h2c MM error: host read: unsupported request"), "{s}");
        // EQDMA: queue [12:0] in LOG0 and the descriptor in LOG1 [27:12]; bit 1 is "poisoned".
        let eq =
            ErrorRegs { dsc: EQ_DSC_POISON, dsc_log0: EQ_LOG0_VALID | 3, dsc_log1: 7 << 12, ..regs(ErrLayout::Eqdma) };
        assert_eq!(eq.failing_queue(), Some(FailingQueue { qid: 3, dir: None }));
        let s = eq.describe();
        assert!(
            s.contains("poisoned descriptor completion") && s.contains("hardware queue 3, select 0, descriptor 7"),
            "{s}"
        );
        // Soft 3.x: the logs are raw words; no MM bits in GLBL_ERR_STAT.
        let s3 = ErrorRegs { glbl: 1 << 4, dsc: DSC_DMA, dsc_log0: 0x8000_1234, ..regs(ErrLayout::Soft3) };
        assert_eq!(s3.failing_queue(), None);
        let s = s3.describe();
        assert!(s.contains("GLBL_ERR_STAT 0x10: bit 4"), "{s}");
        assert!(
            s.contains("DMA engine error") && s.contains("logs 0x80001234 0x0: qdma_soft_reg.h defines no fields"),
            "{s}"
        );
        assert!(regs(ErrLayout::Soft3).describe() == "no error bits set" && !regs(ErrLayout::Eqdma).any());
    }

    #[test]
    fn an_eqdma_mm_log_is_valid_by_its_info_word_never_by_cidx_bits() {
        // ERR_CODE [27:12] is the descriptor index: cidx 32 sets bit 17, the CPM4 valid bit.
        let stale = ErrorRegs { mm: [(32 << 12 | MM_H2C_RD_UR_CA, 0), (0, 0)], ..regs(ErrLayout::Eqdma) };
        assert!(!stale.any(), "a cidx is not an error");
        let real = ErrorRegs { mm: [(0, 0), (MM_C2H_WR_UR, EQ_MM_INFO_VALID | 0x1234)], ..regs(ErrLayout::Eqdma) };
        assert!(real.any());
        assert_eq!(real.failing_queue(), Some(FailingQueue { qid: 0x1234, dir: Some(Direction::C2h) }));
        assert!(real.describe().contains("c2h MM error: host write: unsupported request"), "{}", real.describe());
    }

    #[test]
    fn every_error_bit_and_code_a_layout_defines_decodes_to_its_own_words() {
        // Bits no model path raises (RAM ECC, stream leaves, FLR, poison...) are still named in a
        // report: each entry's bits are its own in the table and read back as its own words.
        for table in [GLBL_S3, GLBL_C4, GLBL_EQ, DSC_S3, DSC_EQ, TRQ_S3, TRQ_EQ] {
            let mut seen = 0u32;
            for (mask, words) in table {
                assert_ne!(*mask, 0, "{words}");
                assert_eq!(seen & mask, 0, "{words}: {mask:#x} overlaps another entry");
                seen |= mask;
                assert_eq!(bits(*mask, table), *words);
            }
        }
        let codes = [
            (Direction::H2c, MM_H2C_RD_HDR_POISON),
            (Direction::H2c, MM_H2C_RD_UR_CA),
            (Direction::H2c, MM_H2C_RD_HDR_BYTE),
            (Direction::H2c, MM_H2C_RD_HDR_PARAM),
            (Direction::H2c, MM_H2C_RD_HDR_ADR),
            (Direction::H2c, MM_H2C_RD_FLR),
            (Direction::H2c, MM_H2C_RD_DAT_POISON),
            (Direction::H2c, MM_H2C_RD_RQ_DIS),
            (Direction::H2c, MM_H2C_WR_DEC),
            (Direction::H2c, MM_H2C_WR_SLV),
            (Direction::C2h, MM_C2H_WR_SLV),
            (Direction::C2h, MM_C2H_RD_SLV),
            (Direction::C2h, MM_C2H_WR_FLR),
            (Direction::C2h, MM_C2H_WR_UR),
            (Direction::C2h, MM_C2H_WR_UC_RAM),
        ];
        let mut words: Vec<&str> = codes.iter().map(|(d, c)| mm_error_words(*d, *c)).collect();
        assert!(!words.contains(&"unnamed error code"), "{words:?}");
        words.sort_unstable();
        words.dedup();
        // H2C and C2H name an AXI slave error alike; every other code has words of its own.
        assert_eq!(words.len(), codes.len() - 1, "{words:?}");
    }
}
