//! The sim QDMA's register and error layouts per IP variant, as the vendor's headers define them
//! (Xilinx/dma_ip_drivers, QDMA/linux-kernel/driver/libqdma/qdma_access/): the soft IP 3.x
//! (`qdma_soft_reg.h`), EQDMA 4.0/5.0 (`eqdma_soft_reg.h`), Versal CPM5 (`eqdma_cpm5_reg.h`,
//! `eqdma_cpm5_access.c`) and Versal CPM4 (`qdma_cpm4_reg.h`, `qdma_cpm4_access.c`). Written
//! from those headers, apart from the driver's own constants, so the two can disagree.
//!
//! Where a header names a register but none of its fields (soft 3.x's descriptor-error logs and
//! target-access log) the model fills it in the CPM4 layout, the same IP generation; soft 3.x's
//! MM error code and info registers stay zero, and an MM data error is reported the only way
//! the vendor's 3.x code could learn of it: the descriptor engine's "DMA engine error" bit.

use crate::direction::Direction;

/// The IP variant, from GLBL2_MISC_CAP: device type [31:28], IP type [23:20].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ip {
    /// QDMA soft IP 3.x (also a Versal's soft IP and any unknown type: the vendor's default).
    Soft3,
    /// EQDMA 4.0/5.0 soft IP.
    Eqdma,
    /// Versal CPM4 hard IP.
    Cpm4,
    /// Versal CPM5 hard IP.
    Cpm5,
}

/// A PF's queue doorbells on the soft IP, EQDMA and CPM5 (`QDMA_OFFSET_DMAP_SEL_*`).
pub(crate) const DOORBELLS: u32 = 0x18000;
/// CPM4's (`QDMA_CPM4_OFFSET_DMAP_SEL_*`).
pub(crate) const CPM4_DOORBELLS: u32 = 0x6400;
/// CPM4's direct FMAP registers, one per function (`QDMA_CPM4_TRQ_SEL_FMAP_*`).
pub(crate) const CPM4_FMAP: u32 = 0x400;
pub(crate) const CPM4_FUNCTIONS: u32 = 256;

/// The longest descriptor (exclusive): EQDMA 5.0 moves under 64 KiB per descriptor
/// (libqdma's `SOFT_EQDMA_DESC_MAX_LEN`), the others anything the 28-bit length field holds.
pub fn desc_len_limit(misc_cap: u32) -> u64 {
    if misc_cap >> 28 == 0 && (misc_cap >> 20) & 0xf == 2 {
        1 << 16
    } else {
        1 << 28
    }
}

/// The variants a served `sim-qdma` can be built as (`pcibench serve --qdma-ip`), by name, with the
/// GLBL2_MISC_CAP each reads: device type [31:28] (0 soft, 1 CPM4, 2 CPM5), IP type [23:20] (EQDMA 4.0: 1,
/// 5.0: 2), the Vivado release [27:24] the default card carries.
pub const NAMED: &[(&str, u32)] = &[
    ("soft3", 0x0200_0000),
    ("eqdma4", 0x0110_0000),
    ("eqdma5", 0x0220_0000),
    ("cpm4", 0x1000_0000),
    ("cpm5", 0x2000_0000),
];

/// GLBL2_MISC_CAP of the variant named `name` (one of `NAMED`).
pub fn misc_cap_named(name: &str) -> Option<u32> {
    NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name.trim())).map(|&(_, v)| v)
}

impl Ip {
    pub fn from_misc_cap(v: u32) -> Ip {
        match (v >> 28, (v >> 20) & 0xf) {
            (0, 1 | 2) => Ip::Eqdma,
            (1, 0) => Ip::Cpm4,
            (2, 0) => Ip::Cpm5,
            _ => Ip::Soft3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Ip::Soft3 => "the QDMA soft IP 3.x",
            Ip::Eqdma => "EQDMA",
            Ip::Cpm4 => "Versal CPM4",
            Ip::Cpm5 => "Versal CPM5",
        }
    }

    /// Indirect context registers: (data, mask, command, words). CPM4 has four data and four
    /// mask words and its command at 0x824 (`QDMA_CPM4_IND_CTXT_*_ADDR`).
    pub fn indirect(self) -> (u32, u32, u32, u32) {
        match self {
            Ip::Cpm4 => (0x804, 0x814, 0x824, 4),
            _ => (0x804, 0x824, 0x844, 8),
        }
    }

    /// The context command's queue id field from bit 7: [18:7] on the soft IP (`union
    /// qdma_ind_ctxt_cmd`), [17:7] on CPM4, [19:7] on EQDMA and CPM5 (`IND_CTXT_CMD_QID_MASK`).
    pub fn qid_mask(self) -> u32 {
        match self {
            Ip::Soft3 => 0xfff,
            Ip::Cpm4 => 0x7ff,
            Ip::Eqdma | Ip::Cpm5 => 0x1fff,
        }
    }

    /// Whether context select `sel` exists: 0-8 queue contexts, 9/10 PASID (EQDMA, CPM5), 11
    /// timer, 12 FMAP (QID2VEC on CPM4); 13-15 are nothing.
    pub fn select_exists(self, sel: u32) -> bool {
        match self {
            Ip::Soft3 | Ip::Cpm4 => matches!(sel, 0..=8 | 11 | 12),
            Ip::Eqdma | Ip::Cpm5 => sel <= 12,
        }
    }

    /// The FMAP context's (first queue, queue count) field masks; CPM4's are in a direct register.
    pub fn fmap_fields(self) -> (u32, u32) {
        match self {
            Ip::Cpm5 => (0xfff, 0x1fff),
            _ => (0x7ff, 0xfff),
        }
    }

    pub fn doorbells(self) -> u32 {
        match self {
            Ip::Cpm4 => CPM4_DOORBELLS,
            _ => DOORBELLS,
        }
    }

    /// GLBL_ERR_STAT / _MASK bits the header defines.
    pub fn glbl_defined(self) -> u32 {
        match self {
            Ip::Soft3 => 0x90f,
            Ip::Cpm4 => 0xfff,
            Ip::Eqdma | Ip::Cpm5 => 0x3_ffff,
        }
    }

    /// GLBL_ERR_STAT bit of the MM engine channel 0 of `dir`; none on soft 3.x.
    pub fn glbl_mm(self, dir: Direction) -> u32 {
        match (self, dir) {
            (Ip::Soft3, _) => 0,
            (_, Direction::H2c) => 1 << 4,
            (_, Direction::C2h) => 1 << 6,
        }
    }

    /// GLBL_ERR_STAT's context command error bit; none on soft 3.x.
    pub fn glbl_ind_ctxt_cmd(self) -> u32 {
        match self {
            Ip::Soft3 => 0,
            _ => 1 << 9,
        }
    }

    /// GLBL_DSC_ERR_STS bits the header defines (`QDMA_GLBL_DSC_ERR_*_MASK`; EQDMA's
    /// `GLBL_DSC_ERR_STS_*_MASK` add the port id error, bit 25, which the vendor does not enable).
    pub fn dsc_defined(self) -> u32 {
        match self {
            Ip::Soft3 | Ip::Cpm4 => 0x01f9_023f,
            Ip::Eqdma | Ip::Cpm5 => 0x03f9_037e,
        }
    }

    /// Descriptor errors the model raises: unsupported request / completer abort on a fetch,
    /// parameter error, DMA engine error.
    pub fn dsc_ur_ca(self) -> u32 {
        if self.eq_layout() {
            1 << 2
        } else {
            1 << 1
        }
    }

    pub fn dsc_param(self) -> u32 {
        if self.eq_layout() {
            1 << 4
        } else {
            1 << 2
        }
    }

    pub fn dsc_dma(self) -> u32 {
        1 << 20
    }

    /// GLBL_TRQ_ERR_STS bits the header defines (`QDMA_GLBL_TRQ_ERR_*_MASK`; EQDMA's
    /// `GLBL_TRQ_ERR_STS_*_MASK`, of which the vendor enables all but the CSR timeout, bit 3).
    pub fn trq_defined(self) -> u32 {
        if self.eq_layout() {
            0xbb
        } else {
            0xf
        }
    }

    /// A doorbell for a queue outside the function's FMAP.
    pub fn trq_qid_range(self) -> u32 {
        if self.eq_layout() {
            1 << 5
        } else {
            1 << 1
        }
    }

    /// A doorbell for an engine the IP does not have.
    pub fn trq_unmapped(self) -> u32 {
        if self.eq_layout() {
            1 << 4
        } else {
            1 << 0
        }
    }

    fn eq_layout(self) -> bool {
        matches!(self, Ip::Eqdma | Ip::Cpm5)
    }

    /// GLBL_DSC_ERR_LOG0 and LOG1 of a first descriptor error (`err` its status bit).
    pub fn dsc_logs(self, dir: Direction, qid: u32, cidx: u32, err: u32) -> (u32, u32) {
        let c2h = (dir == Direction::C2h) as u32;
        let kind = err.trailing_zeros() & 0x1f;
        if self.eq_layout() {
            // LOG0: valid 31, sel 30, qid [12:0]; LOG1: cidx [27:12], error type [4:0].
            (1 << 31 | c2h << 30 | (qid & 0x1fff), (cidx & 0xffff) << 12 | kind)
        } else {
            // LOG0: valid 31, qid [28:17], sel 16, cidx [15:0]; LOG1: error type [4:0].
            (1 << 31 | (qid & 0xfff) << 17 | c2h << 16 | (cidx & 0xffff), kind)
        }
    }

    /// GLBL_TRQ_ERR_LOG of a register access to `addr` by function `func`.
    pub fn trq_log(self, func: u32, addr: u32) -> u32 {
        match self {
            Ip::Soft3 => addr,
            Ip::Cpm4 => (func & 0xff) << 16 | (addr & 0xffff),
            Ip::Eqdma | Ip::Cpm5 => (func & 0x3ff) << 17 | (addr & 0x1_ffff),
        }
    }

    /// Performance setting registers the model keeps (outside the 0x000-0x2fc words it keeps
    /// anyway) and does not act on: those the vendor's `eqdma_set_perf_opt` and
    /// `eqdma_cpm5_set_perf_opt` write for MM queues, at their header offsets (CFG_BLK_MISC_CTL;
    /// EQDMA's GLBL2_RRQ_{BRG,PCIE,AXIMM}_THROT; CPM5's H2C_REQ_THROT_{PCIE,AXIMM} and
    /// H2C_MM_DATA_THROTTLE).
    pub fn perf_regs(self) -> &'static [u32] {
        match self {
            Ip::Eqdma => &[0x4c, 0x158, 0x15c, 0x160, 0xe24, 0xe2c, 0x12ec],
            Ip::Cpm5 => &[0x4c, 0xe24, 0xe2c, 0x12ec],
            Ip::Soft3 | Ip::Cpm4 => &[],
        }
    }

    /// Whether the MM errors' leaf status is MM_STATUS (`eqdma_err_info[]` and
    /// `eqdma_cpm5_err_info[]`); CPM4's `qdma_cpm4_err_info[]` has no MM leaf, soft 3.x no MM log.
    pub fn mm_leaf_in_status(self) -> bool {
        matches!(self, Ip::Eqdma | Ip::Cpm5)
    }

    /// MM engine ERR_CODE_ENABLE_MASK bits the header defines; none on soft 3.x.
    pub fn mm_enable_defined(self, dir: Direction) -> u32 {
        match (self, dir) {
            (Ip::Soft3, _) => 0,
            (_, Direction::H2c) => 0x3041_013e,
            (_, Direction::C2h) => 0x7000_0003,
        }
    }

    /// MM ERR_CODE and ERR_INFO of a data error (`code` the enable bit's number), or None where
    /// the header defines no fields (soft 3.x).
    pub fn mm_logs(self, dir: Direction, write: bool, code: u32, qid: u32, cidx: u32) -> Option<(u32, u32)> {
        let c2h = (dir == Direction::C2h) as u32;
        match self {
            Ip::Soft3 => None,
            // ERR_CODE: valid 17, rdwr 16, code [4:0]; ERR_INFO: qid [28:17], dir 16, cidx [15:0].
            Ip::Cpm4 => {
                Some((1 << 17 | (write as u32) << 16 | code, (qid & 0xfff) << 17 | c2h << 16 | (cidx & 0xffff)))
            }
            // ERR_CODE: cidx [27:12], code [4:0]; ERR_INFO: valid 31, sel 30, qid [23:0]. The
            // headers name bit 30 SEL without saying what it selects: set for C2H here, and
            // the driver does not rely on it.
            Ip::Eqdma | Ip::Cpm5 => Some(((cidx & 0xffff) << 12 | code, 1 << 31 | c2h << 30 | (qid & 0xff_ffff))),
        }
    }
}
