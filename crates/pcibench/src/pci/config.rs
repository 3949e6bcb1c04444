//! Configuration space: the header fields pcibench needs and defensive walks of the
//! capability list (PCI Local Bus 3.0 §6.7) and the extended capability list (PCIe Base §7.6).
//! A loop, a pointer out of range or a truncated file yields a warning and partial output.

use serde::Serialize;
use std::collections::HashSet;

pub const COMMAND: usize = 0x04;
pub const CMD_IO: u16 = 1 << 0;
pub const CMD_MEMORY: u16 = 1 << 1;
pub const CMD_BUS_MASTER: u16 = 1 << 2;
/// Interrupt Disable (PCI Local Bus 3.0 §6.2.2, bit 10): the function may not assert INTx.
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
const STATUS: usize = 0x06;
const STATUS_CAP_LIST: u16 = 1 << 4;
const HEADER_TYPE: usize = 0x0e;
const CAP_PTR: usize = 0x34;
const EXT_START: usize = 0x100;
const CAP_ID_PCIE: u8 = 0x10;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub id: u16,
    pub offset: u16,
    pub name: &'static str,
    /// Extended capabilities carry a version nibble.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u8>,
}

/// What the PCI Express capability says about the link and payload sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PcieCap {
    pub offset: u16,
    pub port_type: &'static str,
    pub mps_supported: u32,
    pub mps: u32,
    pub mrrs: u32,
    /// Link generation 1.. from Link Capabilities / Link Status (speed field).
    pub max_gen: Option<u8>,
    pub max_width: u8,
    pub cur_gen: Option<u8>,
    pub cur_width: u8,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ConfigInfo {
    /// How many bytes of config space could be read (64, 256 or 4096 typically).
    pub length: usize,
    pub command: Option<u16>,
    pub status: Option<u16>,
    pub header_type: Option<u8>,
    pub capabilities: Vec<Capability>,
    pub extended_capabilities: Vec<Capability>,
    pub pcie: Option<PcieCap>,
    #[serde(skip)]
    pub warnings: Vec<String>,
}

fn rd16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn rd32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Parse whatever part of config space could be read.
pub fn parse(bytes: &[u8]) -> ConfigInfo {
    let mut info = ConfigInfo { length: bytes.len(), ..Default::default() };
    if bytes.len() < 64 {
        info.warnings.push(format!(
            "config space is truncated ({} bytes, the header needs 64): header fields are missing",
            bytes.len()
        ));
    }
    info.command = rd16(bytes, COMMAND);
    info.status = rd16(bytes, STATUS);
    info.header_type = bytes.get(HEADER_TYPE).map(|h| h & 0x7f);
    if info.status.is_some_and(|s| s & STATUS_CAP_LIST != 0) {
        walk_caps(bytes, &mut info);
    }
    if bytes.len() > EXT_START {
        walk_ext_caps(bytes, &mut info);
    }
    info
}

fn walk_caps(b: &[u8], info: &mut ConfigInfo) {
    let Some(&first) = b.get(CAP_PTR) else {
        info.warnings.push("capability pointer at 0x34 is beyond the readable config space".into());
        return;
    };
    let mut ptr = (first & 0xfc) as usize;
    let mut seen = HashSet::new();
    // 48 is the most capabilities that fit in 0x40..0x100 (4 bytes each): a longer walk is a loop.
    while ptr != 0 {
        if !(0x40..0x100).contains(&ptr) {
            info.warnings.push(format!("capability pointer {ptr:#x} is outside 0x40-0xff: list cut short"));
            return;
        }
        if !seen.insert(ptr) || seen.len() > 48 {
            info.warnings.push(format!("capability list loops back to {ptr:#x}: list cut short"));
            return;
        }
        let (Some(&id), Some(&next)) = (b.get(ptr), b.get(ptr + 1)) else {
            info.warnings
                .push(format!("capability at {ptr:#x} is beyond the {} readable bytes: list cut short", b.len()));
            return;
        };
        info.capabilities.push(Capability { id: id as u16, offset: ptr as u16, name: cap_name(id), version: None });
        if id == CAP_ID_PCIE {
            info.pcie = parse_pcie(b, ptr, &mut info.warnings);
        }
        ptr = (next & 0xfc) as usize;
    }
}

fn walk_ext_caps(b: &[u8], info: &mut ConfigInfo) {
    let mut ptr = EXT_START;
    let mut seen = HashSet::new();
    loop {
        let Some(hdr) = rd32(b, ptr) else {
            info.warnings.push(format!("extended capability at {ptr:#x} is beyond the readable config space"));
            return;
        };
        // An all-zero header at 0x100 means no extended capabilities; all-ones: not readable.
        if hdr == 0 || hdr == 0xffff_ffff {
            return;
        }
        if !seen.insert(ptr) || seen.len() > 960 {
            info.warnings.push(format!("extended capability list loops back to {ptr:#x}: list cut short"));
            return;
        }
        let id = (hdr & 0xffff) as u16;
        info.extended_capabilities.push(Capability {
            id,
            offset: ptr as u16,
            name: ext_cap_name(id),
            version: Some(((hdr >> 16) & 0xf) as u8),
        });
        let next = ((hdr >> 20) & 0xffc) as usize;
        if next == 0 {
            return;
        }
        if next < EXT_START {
            info.warnings.push(format!("extended capability pointer {next:#x} is below 0x100: list cut short"));
            return;
        }
        ptr = next;
    }
}

fn parse_pcie(b: &[u8], off: usize, warnings: &mut Vec<String>) -> Option<PcieCap> {
    let (Some(caps), Some(devcap), Some(devctl), Some(linkcap), Some(linksta)) =
        (rd16(b, off + 2), rd32(b, off + 4), rd16(b, off + 8), rd32(b, off + 0x0c), rd16(b, off + 0x12))
    else {
        warnings.push(format!("PCI Express capability at {off:#x} is truncated"));
        return None;
    };
    // Speed codes 1-6 are 2.5 to 64 GT/s (PCIe 6.0 §7.5.3.6); anything else is not a link pcibench
    // can model, said once rather than shown as a generation with a zero limit.
    let mut unknown = Vec::new();
    let mut gen = |code: u32| {
        if (1..=6).contains(&code) {
            Some(code as u8)
        } else {
            if code != 0 {
                unknown.push(code);
            }
            None
        }
    };
    let (max_gen, cur_gen) = (gen(linkcap & 0xf), gen(linksta as u32 & 0xf));
    for code in unknown {
        warnings.push(format!(
            "link speed code {code} at {off:#x} is not one the PCIe spec defines (1-6): link limits unknown"
        ));
    }
    Some(PcieCap {
        offset: off as u16,
        port_type: port_type_name(((caps >> 4) & 0xf) as u8),
        mps_supported: 128 << (devcap & 0x7).min(5),
        mps: 128 << ((devctl >> 5) & 0x7).min(5),
        mrrs: 128 << ((devctl >> 12) & 0x7).min(5),
        max_gen,
        max_width: ((linkcap >> 4) & 0x3f) as u8,
        cur_gen,
        cur_width: ((linksta >> 4) & 0x3f) as u8,
    })
}

fn port_type_name(t: u8) -> &'static str {
    match t {
        0 => "Endpoint",
        1 => "Legacy Endpoint",
        4 => "Root Port",
        5 => "Upstream Port",
        6 => "Downstream Port",
        7 => "PCIe-to-PCI Bridge",
        8 => "PCI-to-PCIe Bridge",
        9 => "Root Complex Integrated Endpoint",
        10 => "Root Complex Event Collector",
        _ => "Unknown",
    }
}

/// Capability IDs, PCI Code and ID Assignment Specification §2.
pub fn cap_name(id: u8) -> &'static str {
    match id {
        0x01 => "Power Management",
        0x02 => "AGP",
        0x03 => "VPD",
        0x04 => "Slot ID",
        0x05 => "MSI",
        0x06 => "CompactPCI Hot Swap",
        0x07 => "PCI-X",
        0x08 => "HyperTransport",
        0x09 => "Vendor Specific",
        0x0a => "Debug port",
        0x0b => "CompactPCI Central Resource Control",
        0x0c => "PCI Hot-Plug",
        0x0d => "Bridge Subsystem Vendor ID",
        0x0e => "AGP 8x",
        0x0f => "Secure Device",
        0x10 => "PCI Express",
        0x11 => "MSI-X",
        0x12 => "SATA",
        0x13 => "Advanced Features",
        0x14 => "Enhanced Allocation",
        0x15 => "Flattening Portal Bridge",
        _ => "Unknown",
    }
}

/// Extended capability IDs, PCI Code and ID Assignment Specification §3.
pub fn ext_cap_name(id: u16) -> &'static str {
    match id {
        0x0001 => "Advanced Error Reporting",
        0x0002 | 0x0009 => "Virtual Channel",
        0x0003 => "Device Serial Number",
        0x0004 => "Power Budgeting",
        0x0005 => "Root Complex Link Declaration",
        0x000b => "Vendor Specific",
        0x000d => "Access Control Services",
        0x000e => "Alternative Routing-ID",
        0x000f => "Address Translation Services",
        0x0010 => "SR-IOV",
        0x0013 => "Page Request",
        0x0015 => "Resizable BAR",
        0x0017 => "TPH Requester",
        0x0018 => "Latency Tolerance Reporting",
        0x0019 => "Secondary PCI Express",
        0x001b => "PASID",
        0x001d => "Downstream Port Containment",
        0x001e => "L1 PM Substates",
        0x001f => "Precision Time Measurement",
        0x0023 => "Designated Vendor Specific",
        0x0025 => "Data Link Feature",
        0x0026 => "Physical Layer 16.0 GT/s",
        0x0027 => "Lane Margining at the Receiver",
        0x002a => "Physical Layer 32.0 GT/s",
        0x0031 => "Physical Layer 64.0 GT/s",
        _ => "Unknown",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 4 KiB endpoint: PM at 0x40, MSI at 0x48, PCIe at 0x70 (Gen2 x4, MPS 256, MRRS 512),
    /// AER at 0x100 and a Secondary PCIe capability at 0x1c0.
    pub(crate) fn endpoint_config() -> Vec<u8> {
        crate::pci::fixture::endpoint_config(0x10ee, 0x7024, CMD_MEMORY, 2, 4, 256, 512, 4096)
    }

    #[test]
    fn walks_both_lists() {
        let info = parse(&endpoint_config());
        assert!(info.warnings.is_empty(), "{:?}", info.warnings);
        assert_eq!(info.command, Some(CMD_MEMORY));
        let ids: Vec<u16> = info.capabilities.iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![0x01, 0x05, 0x10]);
        let ext: Vec<(u16, u16)> = info.extended_capabilities.iter().map(|c| (c.id, c.offset)).collect();
        assert_eq!(ext, vec![(0x0001, 0x100), (0x0019, 0x1c0)]);
        let p = info.pcie.unwrap();
        assert_eq!((p.mps, p.mrrs, p.mps_supported), (256, 512, 512));
        assert_eq!((p.max_gen, p.max_width, p.cur_gen, p.cur_width), (Some(2), 4, Some(2), 4));
        assert_eq!(p.port_type, "Endpoint");
    }

    #[test]
    fn loop_is_cut_with_warning() {
        let mut c = endpoint_config();
        c[0x71] = 0x40; // PCIe cap points back to PM
        c[0x1c2] = 0x00;
        c[0x1c3] = 0x10; // ext cap at 0x1c0 points back to 0x100
        let info = parse(&c);
        assert_eq!(info.capabilities.len(), 3);
        assert_eq!(info.extended_capabilities.len(), 2);
        assert_eq!(info.warnings.len(), 2, "{:?}", info.warnings);
        assert!(info.warnings.iter().all(|w| w.contains("loops")));
    }

    #[test]
    fn out_of_range_and_truncated() {
        let mut c = endpoint_config();
        c[0x49] = 0x20; // MSI points into the header
        let info = parse(&c);
        assert_eq!(info.capabilities.len(), 2);
        assert!(info.warnings[0].contains("outside"));

        // Unprivileged readers get 64 bytes (or 256): no panic, partial output.
        for len in [0usize, 3, 10, 64, 0x4a, 0x76, 256] {
            let info = parse(&endpoint_config()[..len]);
            assert_eq!(info.length, len);
            if len >= 0x84 {
                assert!(info.pcie.is_some());
            }
            if (0x35..0x84).contains(&len) {
                assert!(!info.warnings.is_empty(), "len {len}");
            }
        }
    }
}
