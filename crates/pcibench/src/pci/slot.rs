//! The physical slot a function sits in, as lspci names it ("Physical Slot: 3") and as fpga_sio's
//! display_physical_slots finds it: first the kernel's slot objects (drivers/pci/slot.c makes
//! /sys/bus/pci/slots/NAME with `address` = `DDDD:BB:DD`, the slot's bus and device, for a
//! hot-plug or ACPI slot), else the Slot Capabilities of the nearest port above that implements a
//! slot (PCIe Base 6.0 §7.5.3.2 Slot Implemented, §7.5.3.9 Physical Slot Number, bits 31:19).
//! Reading a port's slot capability needs config space past 64 bytes: as a user only the sysfs
//! slots answer.

use super::config;
use super::PciAddress;
use crate::host::Host;
use serde::Serialize;
use std::path::Path;

/// PCI Express Capabilities register (cap + 0x02), bit 8: Slot Implemented.
const FLAGS_SLOT: u16 = 1 << 8;
/// Slot Capabilities (cap + 0x14).
const SLTCAP: usize = 0x14;
/// How many ports up the walk looks (a switch in a switch is two levels; more is a loop).
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhysicalSlot {
    /// The slot's name: the sysfs slot directory's name, or the port's Physical Slot Number.
    pub name: String,
    /// `sysfs` (/sys/bus/pci/slots/NAME/address) or `slot capability` (of `port`).
    pub source: &'static str,
    /// The port whose Slot Capabilities named it (`slot capability` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
}

impl PhysicalSlot {
    /// "3 (/sys/bus/pci/slots/3)" or "5 (Slot Capabilities of port 0000:00:1c.0)".
    pub fn words(&self) -> String {
        match &self.port {
            Some(p) => format!("{} (Slot Capabilities of port {p})", self.name),
            None => format!("{} (/sys/bus/pci/slots/{})", self.name, self.name),
        }
    }
}

/// The slot `addr` sits in, where sysfs or a port above names one.
pub fn of(host: &Host, addr: &PciAddress) -> Option<PhysicalSlot> {
    from_sysfs(host, addr).or_else(|| from_ports(host, addr))
}

/// The sysfs slot whose address is `addr`'s bus and device (every function of a card shares it).
fn from_sysfs(host: &Host, addr: &PciAddress) -> Option<PhysicalSlot> {
    let want = format!("{:04x}:{:02x}:{:02x}", addr.domain, addr.bus, addr.device);
    let mut names: Vec<String> = std::fs::read_dir(host.path("/sys/bus/pci/slots"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    let dir = host.path("/sys/bus/pci/slots");
    names.into_iter().find(|n| slot_address(&dir.join(n)).as_deref() == Some(want.as_str())).map(|n| PhysicalSlot {
        name: crate::text::one_line(&n),
        source: "sysfs",
        port: None,
    })
}

fn slot_address(dir: &Path) -> Option<String> {
    crate::file::read_trim(&dir.join("address"))
}

/// The Physical Slot Number of the nearest port above `addr` that implements a slot (a number of
/// 0 names no slot: "Slot #0" is a port without one in practice, and fpga_sio skips it too).
fn from_ports(host: &Host, addr: &PciAddress) -> Option<PhysicalSlot> {
    let real = std::fs::canonicalize(crate::host::state::device_dir(host, addr)).ok()?;
    for up in real.ancestors().skip(1).take(MAX_DEPTH) {
        let Some(name) = up.file_name().and_then(|n| n.to_str()) else { break };
        if name.parse::<PciAddress>().is_err() {
            break;
        }
        if let Some(n) = slot_number(&read_config(&up.join("config"))) {
            return Some(PhysicalSlot { name: n.to_string(), source: "slot capability", port: Some(name.to_string()) });
        }
    }
    None
}

fn read_config(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(256);
    if let Ok(f) = crate::file::open_regular(path) {
        let _ = f.take(256).read_to_end(&mut buf);
    }
    buf
}

/// The Physical Slot Number in `cfg` (a port's config space) when it implements a slot.
pub fn slot_number(cfg: &[u8]) -> Option<u32> {
    let pcie = config::parse(cfg).pcie?;
    let off = pcie.offset as usize;
    let flags = u16::from_le_bytes(cfg.get(off + 2..off + 4)?.try_into().ok()?);
    if flags & FLAGS_SLOT == 0 {
        return None;
    }
    let cap = u32::from_le_bytes(cfg.get(off + SLTCAP..off + SLTCAP + 4)?.try_into().ok()?);
    Some(cap >> 19).filter(|n| *n != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::fixture::{pcie_config, Fixture, ENDPOINT, ROOT_PORT};

    fn port_with_slot(psn: u32) -> Vec<u8> {
        let mut c = pcie_config(ROOT_PORT, (3, 4), (3, 4), 0, 0);
        c[0x73] |= 0x01; // Slot Implemented (bit 8 of the capabilities register at 0x72)
        c[0x84..0x88].copy_from_slice(&(psn << 19).to_le_bytes());
        c
    }

    #[test]
    fn the_sysfs_slot_names_every_function_of_the_card() {
        let t = tempfile::tempdir().unwrap();
        let f = Fixture::new(t.path());
        f.device_behind("0000:00:1c.0", "0000:03:00.1").ids(0x10ee, 0x7024, 0, 0);
        std::fs::create_dir_all(t.path().join("sys/bus/pci/slots/7")).unwrap();
        std::fs::write(t.path().join("sys/bus/pci/slots/7/address"), "0000:03:00\n").unwrap();
        std::fs::create_dir_all(t.path().join("sys/bus/pci/slots/8")).unwrap();
        std::fs::write(t.path().join("sys/bus/pci/slots/8/address"), "0000:04:00\n").unwrap();
        let h = Host::with_root(t.path());
        let s = of(&h, &"03:00.1".parse().unwrap()).unwrap();
        assert_eq!((s.name.as_str(), s.source, s.port.as_deref()), ("7", "sysfs", None));
        assert_eq!(s.words(), "7 (/sys/bus/pci/slots/7)");
    }

    #[test]
    fn the_nearest_port_with_a_slot_names_it_where_sysfs_has_none() {
        let t = tempfile::tempdir().unwrap();
        let f = Fixture::new(t.path());
        f.device("0000:00:1c.0").ids(0x8086, 0xa110, 0, 0).class(0x060400).config(&port_with_slot(5));
        f.device_behind("0000:00:1c.0", "0000:03:00.0").ids(0x10ee, 0x7024, 0, 0).config(&pcie_config(
            ENDPOINT,
            (3, 8),
            (3, 8),
            0,
            0,
        ));
        let h = Host::with_root(t.path());
        let s = of(&h, &"03:00.0".parse().unwrap()).unwrap();
        assert_eq!(s.words(), "5 (Slot Capabilities of port 0000:00:1c.0)");
        // The port itself sits in no slot; a port whose number is 0, or without the bit, names none.
        assert_eq!(of(&h, &"00:1c.0".parse().unwrap()), None);
        assert_eq!(slot_number(&port_with_slot(0)), None);
        assert_eq!(slot_number(&pcie_config(ROOT_PORT, (3, 4), (3, 4), 0, 0)), None);
        // A user's 64 bytes hold no capability: nothing, never a guess.
        assert_eq!(slot_number(&port_with_slot(5)[..64]), None);
    }
}
