//! The QDMA (PG302) config BAR as the driver uses it: register offsets, the identifier and
//! version fields, and the error registers read and put into words. Offsets and bit fields are
//! those of the vendor's open access code (Xilinx/dma_ip_drivers, QDMA `qdma_access`:
//! `qdma_soft_reg.h`, `qdma_access_common.h`, `eqdma_soft_reg.h`, `qdma_cpm4_reg.h`); where the
//! QDMA soft IP (3.x, laid out as CPM4) and EQDMA (QDMA 4.0/5.0) differ, both are decoded.

use crate::access::BarRegion;
use crate::direction::Direction;
use crate::mmio::Width;
use crate::Result;
use serde::Serialize;

pub(crate) const ID_MAGIC: u32 = 0x1fd3;
pub(crate) const R_ID: u64 = 0x000;
pub(crate) const R_BARLITE_EXT: u64 = 0x10c;
pub(crate) const R_CHANNEL_MDMA: u64 = 0x118;
pub(crate) const R_QDMA_CAP: u64 = 0x120;
pub(crate) const R_FUNC_RET: u64 = 0x12c;
pub(crate) const R_MISC_CAP: u64 = 0x134;
pub(crate) const R_RNG_SZ: u64 = 0x204;
pub(crate) const R_GLBL_ERR_STAT: u64 = 0x248;
pub(crate) const R_GLBL_ERR_MASK: u64 = 0x24c;
pub(crate) const R_DSC_ERR_STS: u64 = 0x254;
pub(crate) const R_DSC_ERR_MSK: u64 = 0x258;
pub(crate) const R_DSC_ERR_LOG0: u64 = 0x25c;
pub(crate) const R_DSC_ERR_LOG1: u64 = 0x260;
pub(crate) const R_TRQ_ERR_STS: u64 = 0x264;
pub(crate) const R_TRQ_ERR_MSK: u64 = 0x268;
pub(crate) const R_TRQ_ERR_LOG: u64 = 0x26c;
pub(crate) const R_IND_DATA: u64 = 0x804;
pub(crate) const R_IND_MASK: u64 = 0x824;
pub(crate) const R_IND_CMD: u64 = 0x844;
/// PF queue doorbells: +0x4 H2C producer index, +0x8 C2H, per 0x10 (function-relative queue).
pub(crate) const R_PF_DOORBELLS: u64 = 0x18000;
/// The smallest config BAR that reaches the first queue's doorbells.
pub const MIN_CONFIG_BAR_LEN: u64 = R_PF_DOORBELLS + 0x10;
/// The vendor driver's default global ring-size table (`qdma_set_default_global_csr`).
pub const VENDOR_RING_SIZES: [u32; 16] =
    [2049, 65, 129, 193, 257, 385, 513, 769, 1025, 1537, 3073, 4097, 6145, 8193, 12289, 16385];

// MM engine (channel 0) registers, relative to its block.
pub(crate) const MM_CONTROL: u64 = 0x04;
pub(crate) const MM_COMPLETED: u64 = 0x48;
pub(crate) const MM_ERR_ENABLE: u64 = 0x54;
pub(crate) const MM_ERR_CODE: u64 = 0x58;
pub(crate) const MM_ERR_INFO: u64 = 0x5c;
pub(crate) const MM_PERF_CTL: u64 = 0xc0;
pub(crate) const MM_PERF_CYCLES: u64 = 0xc4;
pub(crate) const MM_PERF_DATA: u64 = 0xcc;
/// Every MM error the vendor's EQDMA and CPM4 code enables (`*_MM_*_ERR_ALL_MASK`).
pub(crate) fn mm_error_enables(dir: Direction) -> u32 {
    match dir {
        Direction::H2c => 0x3041_013e,
        Direction::C2h => 0x7000_0003,
    }
}

/// The MM engine block of `dir`: C2H at 0x1000, H2C at 0x1200.
pub(crate) fn mm(dir: Direction, reg: u64) -> u64 {
    match dir {
        Direction::H2c => 0x1200 + reg,
        Direction::C2h => 0x1000 + reg,
    }
}

pub(crate) fn rd(bar: &dyn BarRegion, off: u64) -> Result<u32> {
    Ok(bar.read(off, Width::B32)? as u32)
}

pub(crate) fn wr(bar: &dyn BarRegion, off: u64, v: u32) -> Result<()> {
    bar.write(off, Width::B32, v as u64)
}

/// Which register map the IP has (GLBL2_MISC_CAP, 0x134: device type [31:28], IP type [23:20]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IpKind {
    /// QDMA soft IP 3.x (Vivado 2018.3-2019.2).
    QdmaSoft,
    /// EQDMA 4.0 or 5.0 soft IP (Vivado 2020.1 on).
    Eqdma,
    /// Versal CPM4 hard IP.
    VersalCpm4,
    /// Versal CPM5 hard IP.
    VersalCpm5,
    Unknown,
}

impl IpKind {
    pub fn from_misc_cap(v: u32) -> IpKind {
        match (v >> 28, (v >> 20) & 0xf) {
            (0, 0) => IpKind::QdmaSoft,
            (0, 1 | 2) => IpKind::Eqdma,
            (1, _) => IpKind::VersalCpm4,
            (2, _) => IpKind::VersalCpm5,
            _ => IpKind::Unknown,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            IpKind::QdmaSoft => "QDMA soft IP (3.x)",
            IpKind::Eqdma => "EQDMA soft IP (QDMA 4.0/5.0)",
            IpKind::VersalCpm4 => "Versal CPM4 hard IP",
            IpKind::VersalCpm5 => "Versal CPM5 hard IP",
            IpKind::Unknown => "unknown QDMA variant",
        }
    }

    /// The context command's queue id field: 12 bits, 13 on EQDMA and CPM5.
    pub fn qid_bits(&self) -> u32 {
        match self {
            IpKind::Eqdma | IpKind::VersalCpm5 => 13,
            _ => 12,
        }
    }

    /// The Vivado release the release field names (`qdma_fetch_version_details`).
    pub fn release(&self, id: u32) -> &'static str {
        match (self, id) {
            (IpKind::QdmaSoft, 0) => "2018.3",
            (IpKind::QdmaSoft, 1) => "2019.1",
            (IpKind::QdmaSoft, 2) => "2019.2",
            (IpKind::Eqdma, 0) => "2020.1",
            (IpKind::Eqdma, 1) => "2020.2",
            (IpKind::Eqdma, 2) => "2022.1",
            (IpKind::VersalCpm5, 0) => "2021.1",
            (IpKind::VersalCpm5, 1) => "2022.1",
            (IpKind::VersalCpm4, 0) => "2019.2",
            _ => "unknown",
        }
    }
}

/// Names of the set bits of `v` from a (bit, words) table; unnamed bits by number.
fn bits(v: u32, table: &[(u32, &str)]) -> Vec<String> {
    let mut out: Vec<String> = table.iter().filter(|(b, _)| v & (1 << b) != 0).map(|(_, n)| n.to_string()).collect();
    let known: u32 = table.iter().map(|(b, _)| 1u32 << b).sum();
    for b in (0..32).filter(|b| v & !known & (1 << b) != 0) {
        out.push(format!("bit {b}"));
    }
    out
}

const GLBL_QDMA: [(u32, &str); 12] = [
    (0, "RAM single-bit ECC error"),
    (1, "RAM double-bit ECC error"),
    (2, "descriptor engine error (GLBL_DSC_ERR_STS)"),
    (3, "register access error (GLBL_TRQ_ERR_STS)"),
    (4, "H2C MM channel 0 error"),
    (5, "H2C MM channel 1 error"),
    (6, "C2H MM channel 0 error"),
    (7, "C2H MM channel 1 error"),
    (8, "C2H stream error"),
    (9, "context command error (a bad select or queue id, or a command while busy)"),
    (10, "bridge error"),
    (11, "H2C stream error"),
];
const GLBL_EQDMA: [(u32, &str); 12] = [
    (0, "RAM single-bit ECC error"),
    (1, "RAM double-bit ECC error"),
    (2, "descriptor engine error (GLBL_DSC_ERR_STS)"),
    (3, "register access error (GLBL_TRQ_ERR_STS)"),
    (4, "H2C MM channel 0 error"),
    (5, "H2C MM channel 1 error"),
    (6, "C2H MM channel 0 error"),
    (7, "C2H MM channel 1 error"),
    (8, "C2H stream error"),
    (9, "context command error"),
    (15, "bridge error"),
    (16, "H2C stream error"),
];
const DSC_QDMA: [(u32, &str); 14] = [
    (0, "poisoned descriptor completion"),
    (1, "unsupported request or completer abort on a descriptor fetch (the ring's bus address is not reachable)"),
    (2, "descriptor parameter error (ring size, producer index, length or queue settings)"),
    (3, "descriptor address error"),
    (4, "descriptor fetch tag error"),
    (5, "function level reset during a fetch"),
    (9, "descriptor fetch timeout"),
    (16, "poisoned data"),
    (19, "fetch cancelled by a function level reset"),
    (20, "DMA engine error"),
    (21, "descriptor error (descriptor not valid: DV clear)"),
    (22, "request cancelled"),
    (23, "descriptor RAM double-bit error"),
    (24, "descriptor RAM single-bit error"),
];
const DSC_EQDMA: [(u32, &str); 15] = [
    (1, "poisoned descriptor completion"),
    (2, "unsupported request or completer abort on a descriptor fetch (the ring's bus address is not reachable)"),
    (3, "descriptor byte count error"),
    (4, "descriptor parameter error (ring size, producer index, length or queue settings)"),
    (5, "descriptor address error"),
    (6, "descriptor fetch tag error"),
    (8, "function level reset during a fetch"),
    (9, "descriptor fetch timeout"),
    (16, "poisoned data"),
    (19, "fetch cancelled by a function level reset"),
    (20, "DMA engine error"),
    (21, "descriptor error (descriptor not valid: DV clear)"),
    (22, "request cancelled"),
    (23, "descriptor RAM double-bit error"),
    (24, "descriptor RAM single-bit error"),
];
const TRQ: [(u32, &str); 4] = [
    (0, "access to an unmapped register address"),
    (1, "queue id outside this function's FMAP range (a doorbell for a queue the function does not own)"),
    (2, "VF access error"),
    (3, "register access timeout"),
];

/// The error registers at one moment, as read (pending bits are left set until `clear`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ErrorRegs {
    pub glbl: u32,
    pub dsc: u32,
    pub dsc_log0: u32,
    pub dsc_log1: u32,
    pub trq: u32,
    pub trq_log: u32,
    /// MM engine error code and info, H2C then C2H.
    pub mm: [(u32, u32); 2],
}

impl ErrorRegs {
    pub fn read(bar: &dyn BarRegion, mm_present: [bool; 2]) -> Result<ErrorRegs> {
        let mut e = ErrorRegs {
            glbl: rd(bar, R_GLBL_ERR_STAT)?,
            dsc: rd(bar, R_DSC_ERR_STS)?,
            dsc_log0: rd(bar, R_DSC_ERR_LOG0)?,
            dsc_log1: rd(bar, R_DSC_ERR_LOG1)?,
            trq: rd(bar, R_TRQ_ERR_STS)?,
            trq_log: rd(bar, R_TRQ_ERR_LOG)?,
            mm: [(0, 0); 2],
        };
        for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
            if mm_present[i] {
                e.mm[i] = (rd(bar, mm(dir, MM_ERR_CODE))?, rd(bar, mm(dir, MM_ERR_INFO))?);
            }
        }
        Ok(e)
    }

    pub fn any(&self) -> bool {
        self.glbl != 0 || self.dsc != 0 || self.trq != 0 || self.mm.iter().any(|(c, _)| c & (1 << 17) != 0)
    }

    /// Clear what was read: the status registers are write-1-to-clear; the MM error code clears
    /// on a write.
    pub fn clear(&self, bar: &dyn BarRegion, mm_present: [bool; 2]) -> Result<()> {
        for (reg, v) in [(R_DSC_ERR_STS, self.dsc), (R_TRQ_ERR_STS, self.trq), (R_GLBL_ERR_STAT, self.glbl)] {
            if v != 0 {
                wr(bar, reg, v)?;
            }
        }
        for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
            if mm_present[i] && self.mm[i].0 != 0 {
                wr(bar, mm(dir, MM_ERR_CODE), self.mm[i].0)?;
            }
        }
        Ok(())
    }

    /// The hardware queue the descriptor or MM error log names, with its direction.
    pub fn failing_queue(&self) -> Option<(Direction, u32)> {
        let dir = |b: u32| if b & (1 << 16) != 0 { Direction::C2h } else { Direction::H2c };
        if self.dsc_log0 & (1 << 31) != 0 {
            return Some((dir(self.dsc_log0), (self.dsc_log0 >> 17) & 0xfff));
        }
        self.mm.iter().find(|(c, _)| c & (1 << 17) != 0).map(|(_, info)| (dir(*info), (info >> 17) & 0xfff))
    }

    /// Everything set, in words.
    pub fn describe(&self, ip: IpKind) -> String {
        let eq = ip == IpKind::Eqdma || ip == IpKind::VersalCpm5;
        let mut parts = Vec::new();
        if self.glbl != 0 {
            let t: &[(u32, &str)] = if eq { &GLBL_EQDMA } else { &GLBL_QDMA };
            parts.push(format!("GLBL_ERR_STAT {:#x}: {}", self.glbl, bits(self.glbl, t).join(", ")));
        }
        if self.dsc != 0 {
            let t: &[(u32, &str)] = if eq { &DSC_EQDMA } else { &DSC_QDMA };
            let mut s = format!("GLBL_DSC_ERR_STS {:#x}: {}", self.dsc, bits(self.dsc, t).join(", "));
            if self.dsc_log0 & (1 << 31) != 0 && !eq {
                let l = self.dsc_log0;
                let d = if l & (1 << 16) != 0 { "c2h" } else { "h2c" };
                s.push_str(&format!(
                    " (first error: {d} hardware queue {}, descriptor {}, error type {})",
                    (l >> 17) & 0xfff,
                    l & 0xffff,
                    self.dsc_log1 & 0x1f
                ));
            }
            parts.push(s);
        }
        if self.trq != 0 {
            parts.push(format!(
                "GLBL_TRQ_ERR_STS {:#x}: {} (log {:#x})",
                self.trq,
                bits(self.trq, &TRQ).join(", "),
                self.trq_log
            ));
        }
        for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
            let (code, info) = self.mm[i];
            if code & (1 << 17) != 0 {
                parts.push(format!(
                    "{dir} MM error: {} ({} side, code {}); hardware queue {}, descriptor {}",
                    mm_error_words(dir, code & 0x1f),
                    if code & (1 << 16) != 0 { "write" } else { "read" },
                    code & 0x1f,
                    (info >> 17) & 0xfff,
                    info & 0xffff
                ));
            }
        }
        if parts.is_empty() {
            "no error bits set".into()
        } else {
            parts.join("; ")
        }
    }
}

/// An MM error code in words: the code is the bit of the engine's ERR_CODE_ENABLE_MASK register
/// the vendor headers name (`qdma_cpm4_reg.h`, `eqdma_soft_reg.h`).
pub fn mm_error_words(dir: Direction, code: u32) -> &'static str {
    match (dir, code) {
        (Direction::H2c, 1) => "host read: poisoned header",
        (Direction::H2c, 2) => {
            "host read: unsupported request or completer abort (the host buffer is not mapped for the card)"
        }
        (Direction::H2c, 3) => "host read: byte count error",
        (Direction::H2c, 4) => "host read: header parameter error",
        (Direction::H2c, 5) => "host read: header address error",
        (Direction::H2c, 8) => "host read: function level reset",
        (Direction::H2c, 16) => "host read: poisoned data",
        (Direction::H2c, 22) => "host read: request disabled",
        (Direction::H2c, 28) => {
            "card write: AXI decode error (no card memory at that address: check --card-addr/--card-size)"
        }
        (Direction::H2c, 29) => "card write: AXI slave error",
        (Direction::C2h, 0) => "card write: AXI slave error",
        (Direction::C2h, 1) => {
            "card read: AXI slave error (no card memory at that address: check --card-addr/--card-size)"
        }
        (Direction::C2h, 28) => "host write: function level reset",
        (Direction::C2h, 29) => "host write: unsupported request (the host buffer is not mapped for the card)",
        (Direction::C2h, 30) => "host write: uncorrectable RAM error",
        _ => "unnamed error code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_layouts() {
        assert_eq!(IpKind::from_misc_cap(0x0200_0000), IpKind::QdmaSoft);
        assert_eq!(IpKind::from_misc_cap(0x0010_0000), IpKind::Eqdma);
        assert_eq!(IpKind::from_misc_cap(0x1000_0000), IpKind::VersalCpm4);
        assert_eq!(IpKind::QdmaSoft.release(2), "2019.2");
        assert_eq!(IpKind::Eqdma.release(1), "2020.2");
        assert_eq!((IpKind::QdmaSoft.qid_bits(), IpKind::Eqdma.qid_bits()), (12, 13));
    }

    #[test]
    fn error_registers_in_words() {
        let e = ErrorRegs {
            glbl: 1 << 2 | 1 << 4,
            dsc: 1 << 1,
            dsc_log0: 1 << 31 | 5 << 17 | 1 << 16 | 9,
            dsc_log1: 1,
            mm: [(1 << 17 | 2, 5 << 17 | 9), (0, 0)],
            ..Default::default()
        };
        assert!(e.any());
        assert_eq!(e.failing_queue(), Some((Direction::C2h, 5)));
        let s = e.describe(IpKind::QdmaSoft);
        assert!(s.contains("descriptor engine error"), "{s}");
        assert!(s.contains("completer abort on a descriptor fetch"), "{s}");
        assert!(s.contains("c2h hardware queue 5, descriptor 9"), "{s}");
        assert!(s.contains("h2c MM error: host read: unsupported request"), "{s}");
        // EQDMA moved the descriptor error bits up by one: bit 1 is "poisoned" there.
        assert!(ErrorRegs { dsc: 1 << 1, ..Default::default() }.describe(IpKind::Eqdma).contains("poisoned"));
        assert!(ErrorRegs { trq: 1 << 30, ..Default::default() }.describe(IpKind::QdmaSoft).contains("bit 30"));
        assert_eq!(ErrorRegs::default().describe(IpKind::QdmaSoft), "no error bits set");
        assert!(!ErrorRegs::default().any());
    }
}
