//! Names from the PCI ID Repository (pci.ids, vendored by the `pci-ids` crate).
//! Unknown ids are never an error: callers print the hex id instead.

use pci_ids::FromId;

pub fn vendor(vid: u16) -> Option<&'static str> {
    pci_ids::Vendor::from_id(vid).map(|v| v.name())
}

pub fn device(vid: u16, did: u16) -> Option<&'static str> {
    pci_ids::Device::from_vid_pid(vid, did).map(|d| d.name())
}

pub fn subsystem(vid: u16, did: u16, svid: u16, sdid: u16) -> Option<&'static str> {
    pci_ids::Device::from_vid_pid(vid, did)?
        .subsystems()
        .find(|s| s.subvendor() == svid && s.subdevice() == sdid)
        .map(|s| s.name())
}

/// The subsystem in lspci -v's words (pciutils lib/names.c): the subsystem vendor's name, then
/// the subsystem's own name from pci.ids, or the device's name where the subsystem ids are the
/// device's; "Red Hat, Inc. Device 1100" where pci.ids knows the vendor only, "Device 0002:0001"
/// where it knows no vendor.
pub fn subsystem_phrase(vid: u16, did: u16, svid: u16, sdid: u16) -> String {
    let name =
        subsystem(vid, did, svid, sdid).or_else(|| (svid == vid && sdid == did).then(|| device(vid, did)).flatten());
    match (vendor(svid), name) {
        (Some(v), Some(d)) => format!("{v} {d}"),
        (Some(v), None) => format!("{v} Device {sdid:04x}"),
        (None, _) => format!("Device {svid:04x}:{sdid:04x}"),
    }
}

/// The class name lspci would print for a 24-bit class code: the subclass name when known,
/// else the class name, else `Class XXXX`.
pub fn class(code: u32) -> String {
    let (cls, sub) = ((code >> 16) as u8, (code >> 8) as u8);
    if let Some(s) = pci_ids::Subclass::from_cid_sid(cls, sub) {
        return s.name().to_string();
    }
    if let Some(c) = pci_ids::Class::from_id(cls) {
        return c.name().to_string();
    }
    format!("Class {:04x}", code >> 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown() {
        assert_eq!(vendor(0x10ee), Some("Xilinx Corporation"));
        assert!(device(0x1332, 0x5425).unwrap().contains("MM-5425CN"));
        assert_eq!(vendor(0x0bad), None);
        assert_eq!(class(0x058000), "Memory controller");
        assert_eq!(class(0x020000), "Ethernet controller");
        assert_eq!(class(0xee0000), "Class ee00");
    }
}
