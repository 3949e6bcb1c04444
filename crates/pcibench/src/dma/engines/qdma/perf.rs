//! The performance settings the vendor writes at every device init on EQDMA 5.0
//! (`eqdma_set_perf_opt`, eqdma_soft_access.c, called from `eqdma_set_default_global_csr` for
//! IP version 5 only) and Versal CPM5 (`eqdma_cpm5_set_perf_opt`): outstanding descriptor
//! limits, writeback accumulation, read-request tags and metering, and read-request throttles.
//! Measured with reset values, a card's figures are not comparable with the vendor stack's, so
//! the driver writes the same values when it takes the device and puts the found ones back on
//! exit; `info` shows both. Written: the registers whose values the vendor code fixes for the
//! descriptor engine and the H2C and read-request paths, MM and stream queues alike (EQDMA 5.0
//! SET_1, SET_3 and SET_4: the H2C request and data throttles too). Not written: the C2H
//! prefetch and credit-coalescing settings (SET_1's PFCH_CFG*, SET_2), which serve C2H stream
//! queues through the prefetch engine and depend on the prefetch cache depth read from the card;
//! pcibench's stream queues run with prefetch off (libqdma's default), where they do not apply.
//! EQDMA 4.0 and the soft IP 3.x get none (the vendor writes none: "Need to add the QDMA4.0
//! settings").

use super::ip::IpKind;
use super::regs::*;
use crate::access::BarRegion;
use crate::Result;
use serde::Serialize;

/// One setting: the register's name in the vendor header, its offset, the vendor's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub offset: u64,
    pub vendor: u32,
}

const EQDMA5: &[Setting] = &[
    Setting { name: "GLBL_DSC_CFG", offset: R_GLBL_DSC_CFG, vendor: EQ5_GLBL_DSC_CFG },
    Setting { name: "CFG_BLK_MISC_CTL", offset: R_CFG_BLK_MISC_CTL, vendor: EQ5_CFG_BLK_MISC_CTL },
    Setting { name: "GLBL2_RRQ_PCIE_THROT", offset: EQ_R_RRQ_PCIE_THROT, vendor: EQ5_RRQ_PCIE_THROT },
    Setting { name: "GLBL2_RRQ_AXIMM_THROT", offset: EQ_R_RRQ_AXIMM_THROT, vendor: EQ5_RRQ_AXIMM_THROT },
    // The vendor copies the PCIe throttle's data threshold read back; written after it, so
    // that is the value above.
    Setting { name: "GLBL2_RRQ_BRG_THROT", offset: EQ_R_RRQ_BRG_THROT, vendor: EQ5_RRQ_BRG_THROT },
    // SET_4: the H2C throttles (issue 50 item 7).
    Setting { name: "H2C_REQ_THROT_PCIE", offset: EQ_R_H2C_REQ_THROT_PCIE, vendor: EQ5_H2C_REQ_THROT_PCIE },
    Setting { name: "H2C_REQ_THROT_AXIMM", offset: EQ_R_H2C_REQ_THROT_AXIMM, vendor: EQ5_H2C_REQ_THROT_AXIMM },
    Setting { name: "H2C_MM_DATA_THROTTLE", offset: EQ_R_H2C_MM_DATA_THROTTLE, vendor: EQ5_H2C_MM_DATA_THROTTLE },
];

const CPM5: &[Setting] = &[
    Setting { name: "GLBL_DSC_CFG", offset: R_GLBL_DSC_CFG, vendor: C5_GLBL_DSC_CFG },
    Setting { name: "CFG_BLK_MISC_CTL", offset: R_CFG_BLK_MISC_CTL, vendor: C5_CFG_BLK_MISC_CTL },
    Setting { name: "H2C_REQ_THROT_PCIE", offset: EQ_R_H2C_REQ_THROT_PCIE, vendor: C5_H2C_REQ_THROT_PCIE },
    Setting { name: "H2C_REQ_THROT_AXIMM", offset: EQ_R_H2C_REQ_THROT_AXIMM, vendor: C5_H2C_REQ_THROT_AXIMM },
    Setting { name: "H2C_MM_DATA_THROTTLE", offset: EQ_R_H2C_MM_DATA_THROTTLE, vendor: C5_H2C_MM_DATA_THROTTLE },
];

/// The settings the vendor writes for this IP (`misc` is GLBL2_MISC_CAP): none but on EQDMA
/// 5.0 and CPM5.
pub fn vendor_settings(ip: IpKind, misc: u32) -> &'static [Setting] {
    match ip {
        IpKind::Eqdma if (misc >> MISC_IP_SHIFT) & MISC_FIELD == IP_EQDMA5 => EQDMA5,
        IpKind::VersalCpm5 => CPM5,
        _ => &[],
    }
}

/// A performance setting as found on the card, beside the vendor's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfReg {
    pub name: &'static str,
    pub offset: u64,
    pub found: u32,
    pub vendor: u32,
}

/// Read the settings the vendor would write for this IP (reads only).
pub fn read(bar: &dyn BarRegion, ip: IpKind, misc: u32) -> Result<Vec<PerfReg>> {
    vendor_settings(ip, misc)
        .iter()
        .map(|s| Ok(PerfReg { name: s.name, offset: s.offset, found: rd(bar, s.offset)?, vendor: s.vendor }))
        .collect()
}

/// Write the vendor's settings; the values found, to put back.
pub fn program(bar: &dyn BarRegion, ip: IpKind, misc: u32) -> Result<Vec<(u64, u32)>> {
    let mut found = Vec::new();
    for s in vendor_settings(ip, misc) {
        found.push((s.offset, rd(bar, s.offset)?));
        wr(bar, s.offset, s.vendor)?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value from (field value, low bit) pairs, as the vendor's FIELD_SET builds it.
    fn fields(f: &[(u32, u32)]) -> u32 {
        f.iter().fold(0, |a, (v, shift)| a | v << shift)
    }

    #[test]
    fn the_vendors_values_rebuilt_from_their_fields() {
        // eqdma_set_perf_opt: C2H/H2C outstanding descriptor limits 5 [29:20] and 8 [19:10],
        // max fetch 2 [5:3], writeback accumulation 5 [2:0].
        assert_eq!(EQ5_GLBL_DSC_CFG, fields(&[(5, 20), (8, 10), (2, 3), (5, 0)]));
        // 256 tags [19:8], metering multiplier 9 [4:0] (31 on CPM5).
        assert_eq!(EQ5_CFG_BLK_MISC_CTL, fields(&[(256, 8), (9, 0)]));
        assert_eq!(C5_CFG_BLK_MISC_CTL, fields(&[(256, 8), (31, 0)]));
        // PCIe read-request throttle: requests off, 192 [30:19], data on [18], 20480 [17:0];
        // the bridge's: requests on [31], the same threshold and data.
        assert_eq!(EQ5_RRQ_PCIE_THROT, fields(&[(192, 19), (1, 18), (20480, 0)]));
        assert_eq!(EQ5_RRQ_BRG_THROT, fields(&[(1, 31), (192, 19), (1, 18), (20480, 0)]));
        assert_eq!(EQ5_RRQ_AXIMM_THROT, 0);
        // SET_4: H2C PCIe requests on at 192, data on at 24576; AXI-MM requests on at 64, data on
        // at 16384; MM data on at the PCIe throttle's default 20480.
        assert_eq!(EQ5_H2C_REQ_THROT_PCIE, fields(&[(1, 31), (192, 19), (1, 18), (24576, 0)]));
        assert_eq!(EQ5_H2C_REQ_THROT_AXIMM, fields(&[(1, 31), (64, 19), (1, 18), (16384, 0)]));
        assert_eq!(EQ5_H2C_MM_DATA_THROTTLE, fields(&[(1, 16), (20480, 0)]));
        // eqdma_cpm5_set_perf_opt: max fetch 2, accumulation 5 (no outstanding limits on CPM5).
        assert_eq!(C5_GLBL_DSC_CFG, fields(&[(2, 3), (5, 0)]));
        assert_eq!(C5_H2C_REQ_THROT_PCIE, fields(&[(1, 31), (192, 19), (1, 18), (57344, 0)]));
        assert_eq!(C5_H2C_REQ_THROT_AXIMM, fields(&[(192, 19), (65536, 0)]));
        assert_eq!(C5_H2C_MM_DATA_THROTTLE, fields(&[(1, 16), (57344, 0)]));
    }

    #[test]
    fn only_eqdma_5_and_cpm5_get_settings() {
        assert_eq!(vendor_settings(IpKind::Eqdma, IP_EQDMA5 << MISC_IP_SHIFT).len(), 8);
        assert!(vendor_settings(IpKind::Eqdma, IP_EQDMA4 << MISC_IP_SHIFT).is_empty());
        assert_eq!(vendor_settings(IpKind::VersalCpm5, DEVICE_CPM5 << MISC_DEVICE_SHIFT).len(), 5);
        assert!(vendor_settings(IpKind::QdmaSoft, 0).is_empty());
    }
}
