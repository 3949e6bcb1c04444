//! PCI functions: addresses, sysfs enumeration, config space and capabilities, names, link model.

pub mod address;
pub mod aer;
pub mod config;
pub mod device;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixture;
pub mod health;
pub mod intr;
pub mod link;
pub mod names;
pub mod partner;
pub mod resource;
pub mod rom;
pub mod slot;
pub mod sysfs;

pub use address::PciAddress;
pub use device::DeviceInfo;
pub use resource::{Bar, BarKind};

use crate::host::Host;
use crate::{Error, Result};

/// A `-d VID[:DID]` filter as lspci takes it (hex; either part may be empty or `*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdFilter {
    pub vendor: Option<u16>,
    pub device: Option<u16>,
}

impl std::str::FromStr for IdFilter {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            crate::Error::usage(format!(
                "invalid id filter '{s}': use VID or VID:DID in hex, e.g. -d 10ee or -d 10ee:7024"
            ))
        };
        let (v, d) = s.split_once(':').unwrap_or((s, ""));
        let part = |p: &str| -> Result<Option<u16>> {
            if p.is_empty() || p == "*" {
                return Ok(None);
            }
            if p.len() > 4 {
                return Err(bad());
            }
            u16::from_str_radix(p, 16).map(Some).map_err(|_| bad())
        };
        let f = IdFilter { vendor: part(v)?, device: part(d)? };
        if s.is_empty() {
            return Err(bad());
        }
        Ok(f)
    }
}

impl IdFilter {
    pub fn matches(&self, info: &DeviceInfo) -> bool {
        self.vendor.is_none_or(|v| v == info.vendor_id) && self.device.is_none_or(|d| d == info.device_id)
    }
}

/// Every PCI device in sysfs, filtered as lspci's -d and -s (see `device::list` for the
/// simulated cards too), and a line for each entry that could not be read (a device being
/// removed leaves a dangling link): one bad entry never hides the others.
pub fn list(
    host: &Host,
    ids: Option<IdFilter>,
    slot: Option<&PciAddress>,
    detail: sysfs::Detail,
) -> Result<(Vec<DeviceInfo>, Vec<String>)> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for a in list_addrs_or_empty(host)? {
        if slot.is_some_and(|s| *s != a) {
            continue;
        }
        match sysfs::read_device_at(host, &a, detail) {
            Ok(d) => out.push(d),
            Err(Error::NoDevice(_)) => problems.push(format!(
                "{a} is listed in {} but its directory is gone (a device being removed?): skipped",
                host.pci_devices_dir().display()
            )),
            Err(e) => problems.push(format!("{a}: {e}: skipped")),
        }
    }
    if let Some(f) = ids {
        out.retain(|d| f.matches(d));
    }
    Ok((out, problems))
}

fn list_addrs_or_empty(host: &Host) -> Result<Vec<PciAddress>> {
    // A machine without PCI (some containers) has no /sys/bus/pci at all: list just the sim card.
    if !host.path("/sys/bus/pci").exists() {
        return Ok(Vec::new());
    }
    sysfs::list_addresses(host)
}

#[cfg(test)]
mod tests;
