//! Which QDMA the config BAR belongs to, and what follows from it: the vendor's
//! `qdma_hw_access_init` (qdma_access_common.c) picks an access layer by GLBL2_MISC_CAP's device
//! type and IP type, and so does the driver: register layouts of the FMAP and the error
//! registers, the error enables the vendor's `*_hw_error_enable` writes, and what is refused.

use super::regs::*;
use crate::direction::Direction;
use serde::Serialize;

/// Which register map the IP has (GLBL2_MISC_CAP, 0x134: device type [31:28], IP type [23:20]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IpKind {
    /// QDMA soft IP 3.x (Vivado 2018.3-2019.2).
    QdmaSoft,
    /// EQDMA 4.0 or 5.0 soft IP (Vivado 2020.1 on).
    Eqdma,
    /// Versal CPM4 hard IP: refused (its FMAP, context registers and doorbells differ).
    VersalCpm4,
    /// Versal CPM5 hard IP.
    VersalCpm5,
    /// The QDMA soft IP in a Versal's fabric: the vendor drives it with the soft 3.x code.
    VersalSoft,
    Unknown,
}

/// The error registers' bit and field layout, by the vendor header that defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrLayout {
    /// `qdma_soft_reg.h`: status bits only; no MM engine bits, no log fields.
    Soft3,
    /// `qdma_cpm4_reg.h`: the soft bit positions plus MM bits and log fields.
    Cpm4,
    /// `eqdma_soft_reg.h` and `eqdma_cpm5_reg.h`.
    Eqdma,
}

impl IpKind {
    pub fn from_misc_cap(v: u32) -> IpKind {
        let (device, ip) = ((v >> MISC_DEVICE_SHIFT) & MISC_FIELD, (v >> MISC_IP_SHIFT) & MISC_FIELD);
        match (device, ip) {
            (DEVICE_SOFT, IP_QDMA3) => IpKind::QdmaSoft,
            (DEVICE_SOFT, IP_EQDMA4 | IP_EQDMA5) => IpKind::Eqdma,
            (DEVICE_CPM4, IP_VERSAL_HARD) => IpKind::VersalCpm4,
            (DEVICE_CPM5, IP_VERSAL_HARD) => IpKind::VersalCpm5,
            (DEVICE_CPM4 | DEVICE_CPM5, IP_VERSAL_SOFT) => IpKind::VersalSoft,
            _ => IpKind::Unknown,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            IpKind::QdmaSoft => "QDMA soft IP (3.x)",
            IpKind::Eqdma => "EQDMA soft IP (QDMA 4.0/5.0)",
            IpKind::VersalCpm4 => "Versal CPM4 hard IP",
            IpKind::VersalCpm5 => "Versal CPM5 hard IP",
            IpKind::VersalSoft => "Versal soft IP (QDMA 3.x register map)",
            IpKind::Unknown => "unknown QDMA variant",
        }
    }

    /// The context command's queue id field: 12 bits, 13 on EQDMA and CPM5.
    pub fn qid_bits(&self) -> u32 {
        match self {
            IpKind::Eqdma | IpKind::VersalCpm5 => EQ_IND_QID_BITS,
            _ => IND_QID_BITS,
        }
    }

    /// The Vivado release GLBL2_MISC_CAP names (`qdma_fetch_version_details`).
    pub fn release(&self, misc: u32) -> &'static str {
        let id = (misc >> MISC_RELEASE_SHIFT) & MISC_FIELD;
        let cpm5 = (misc >> MISC_DEVICE_SHIFT) & MISC_FIELD == DEVICE_CPM5;
        match (self, id) {
            (IpKind::QdmaSoft, 0) => "2018.3",
            (IpKind::QdmaSoft, 1) => "2019.1",
            (IpKind::QdmaSoft, 2) => "2019.2",
            (IpKind::Eqdma, 0) => "2020.1",
            (IpKind::Eqdma, 1) => "2020.2",
            (IpKind::Eqdma, 2) => "2022.1",
            (IpKind::VersalCpm5 | IpKind::VersalSoft, 0) if cpm5 => "2021.1",
            (IpKind::VersalCpm5 | IpKind::VersalSoft, 1) if cpm5 => "2022.1",
            (IpKind::VersalCpm4 | IpKind::VersalSoft, 0) => "2019.2",
            _ => "unknown",
        }
    }

    pub fn err_layout(&self) -> ErrLayout {
        match self {
            IpKind::Eqdma | IpKind::VersalCpm5 => ErrLayout::Eqdma,
            IpKind::VersalCpm4 => ErrLayout::Cpm4,
            IpKind::QdmaSoft | IpKind::VersalSoft | IpKind::Unknown => ErrLayout::Soft3,
        }
    }

    /// The EQDMA register layouts (EQDMA 4.0/5.0 and CPM5 share `eqdma_soft_reg.h`'s fields).
    pub fn eq_layout(&self) -> bool {
        self.err_layout() == ErrLayout::Eqdma
    }

    /// GLBL_ERR_INT's function field: [7:0] on soft 3.x, [11:0] on EQDMA and CPM5.
    pub fn err_int_func(&self) -> u32 {
        if self.eq_layout() {
            EQ_IC_W3_FUNC
        } else {
            ERR_INT_FUNC
        }
    }

    /// Queues in the IP from GLBL2_CHANNEL_QDMA_CAP (CPM5 reads 0xfff for its 4096).
    pub fn max_queues(&self, cap: u32) -> u32 {
        let n = cap & QDMA_CAP_MULTIQ_MAX;
        if *self == IpKind::VersalCpm5 && n == QDMA_CAP_MULTIQ_MAX {
            C5_QUEUES_AT_MAX
        } else {
            n
        }
    }

    /// The FMAP context's first-queue and queue-count fields (CPM5's are a bit wider).
    pub fn fmap_fields(&self) -> (u32, u32) {
        match self {
            IpKind::VersalCpm5 => (C5_FMAP_QBASE, C5_FMAP_QMAX),
            _ => (FMAP_QBASE, FMAP_QMAX),
        }
    }

    /// Why the driver will not touch this IP, if it will not.
    pub fn refusal(&self, misc: u32) -> Option<String> {
        match self {
            IpKind::VersalCpm4 => Some(format!(
                "QDMA on Versal CPM4 (GLBL2_MISC_CAP {misc:#010x}) is not supported: its FMAP is a direct register at \
                 {C4_R_FMAP:#x} + 4 x function, its indirect context command sits at {C4_R_IND_CMD:#x} (select 12 is \
                 QID2VEC there) and its doorbells at {C4_R_DOORBELLS:#x}, so the soft IP's layout would write the wrong \
                 registers; see docs/engines/qdma.md"
            )),
            IpKind::Unknown => Some(format!(
                "the QDMA variant in GLBL2_MISC_CAP {misc:#010x} (device type {}, IP type {}) is unknown: pcibench drives \
                 the QDMA soft IP 3.x, EQDMA 4.0/5.0 and Versal CPM5 register maps only",
                (misc >> MISC_DEVICE_SHIFT) & MISC_FIELD,
                (misc >> MISC_IP_SHIFT) & MISC_FIELD
            )),
            _ => None,
        }
    }

    /// GLBL_ERR_MASK bits to set: the leaves the vendor enables that the driver watches. Soft
    /// 3.x defines no MM engine bit: its MM errors come through the descriptor engine (DSC_DMA).
    pub fn glbl_enables(&self) -> u32 {
        match self.err_layout() {
            ErrLayout::Soft3 => GLBL_DSC | GLBL_TRQ,
            ErrLayout::Cpm4 | ErrLayout::Eqdma => GLBL_DSC | GLBL_TRQ | GLBL_H2C_MM0 | GLBL_C2H_MM0,
        }
    }

    /// The vendor's `*_GLBL_DSC_ERR_ALL_MASK` and `*_GLBL_TRQ_ERR_ALL_MASK`.
    pub fn dsc_trq_enables(&self) -> (u32, u32) {
        match self.err_layout() {
            ErrLayout::Eqdma => (EQ_DSC_ALL, EQ_TRQ_ALL),
            ErrLayout::Soft3 | ErrLayout::Cpm4 => (S3_DSC_ALL, S3_TRQ_ALL),
        }
    }

    /// The MM engine error enables (`EQDMA_MM_*_ERR_ALL_MASK`); None where the vendor header
    /// defines no bits for the register (soft 3.x): it is left as found.
    pub fn mm_enables(&self, dir: Direction) -> Option<u32> {
        match (self.err_layout(), dir) {
            (ErrLayout::Eqdma | ErrLayout::Cpm4, Direction::H2c) => Some(EQ_MM_H2C_ALL),
            (ErrLayout::Eqdma | ErrLayout::Cpm4, Direction::C2h) => Some(EQ_MM_C2H_ALL),
            (ErrLayout::Soft3, _) => None,
        }
    }

    /// Longest descriptor the IP takes.
    pub fn max_desc(&self, misc: u32) -> u64 {
        if *self == IpKind::Eqdma && (misc >> MISC_IP_SHIFT) & MISC_FIELD == IP_EQDMA5 {
            EQ5_MAX_DESC_LEN
        } else {
            MAX_DESC_LEN
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_follow_the_vendors_device_and_ip_type() {
        assert_eq!(IpKind::from_misc_cap(0x0200_0000), IpKind::QdmaSoft);
        assert_eq!(IpKind::from_misc_cap(0x0010_0000), IpKind::Eqdma);
        assert_eq!(IpKind::from_misc_cap(0x0020_0000), IpKind::Eqdma);
        assert_eq!(IpKind::from_misc_cap(0x1000_0000), IpKind::VersalCpm4);
        assert_eq!(IpKind::from_misc_cap(0x2000_0000), IpKind::VersalCpm5);
        // A Versal with the soft IP in its fabric is driven as the soft 3.x (qdma_hw_access_init
        // overrides only the hard CPM4 and CPM5).
        assert_eq!(IpKind::from_misc_cap(0x1010_0000), IpKind::VersalSoft);
        assert_eq!(IpKind::from_misc_cap(0x3000_0000), IpKind::Unknown);
        assert_eq!(IpKind::QdmaSoft.release(0x0200_0000), "2019.2");
        assert_eq!(IpKind::Eqdma.release(0x0110_0000), "2020.2");
        assert_eq!(IpKind::VersalCpm5.release(0x2100_0000), "2022.1");
        assert_eq!(IpKind::VersalSoft.release(0x1010_0000), "2019.2");
        assert_eq!((IpKind::QdmaSoft.qid_bits(), IpKind::Eqdma.qid_bits()), (12, 13));
        assert_eq!(IpKind::VersalCpm5.max_queues(0xfff), 4096);
        assert_eq!(IpKind::Eqdma.max_queues(0xfff), 0xfff);
        assert_eq!(IpKind::VersalCpm5.fmap_fields(), (0xfff, 0x1fff));
        assert!(IpKind::VersalCpm4.refusal(0x1000_0000).unwrap().contains("0x824"));
        assert!(IpKind::VersalSoft.refusal(0).is_none());
    }
}
