//! PCI function addresses as lspci prints them: `DDDD:BB:DD.F`, or `BB:DD.F` (domain 0).

use crate::{Error, Result};
use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A PCI function address. The domain can exceed 16 bits (e.g. VMD domains `10000:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

/// The accepted address forms, for messages.
pub const FORMS: &str = "use DDDD:BB:DD.F or BB:DD.F in hex as lspci prints them (e.g. 0000:15:00.0 or 15:00.0)";

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.device, self.function)
    }
}

impl Serialize for PciAddress {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for PciAddress {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::usage(format!("invalid device address '{s}': {FORMS}"));
        let t = s.trim();
        let (head, func) = t.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = head.split(':').collect();
        let (dom, bus, dev) = match parts.as_slice() {
            [b, d] => ("0", *b, *d),
            [dom, b, d] => (*dom, *b, *d),
            _ => return Err(bad()),
        };
        let hex = |x: &str, max_len: usize| -> Result<u32> {
            if x.is_empty() || x.len() > max_len || !x.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(x, 16).map_err(|_| bad())
        };
        let domain = hex(dom, 8)?;
        let bus = hex(bus, 2)? as u8;
        let device = hex(dev, 2)?;
        let function = hex(func, 1)?;
        if device > 31 || function > 7 {
            return Err(Error::usage(format!(
                "invalid device address '{s}': device must be 00-1f and function 0-7; {FORMS}"
            )));
        }
        Ok(PciAddress { domain, bus, device: device as u8, function: function as u8 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_short_forms() {
        let a: PciAddress = "0000:15:00.0".parse().unwrap();
        assert_eq!(a, PciAddress { domain: 0, bus: 0x15, device: 0, function: 0 });
        let b: PciAddress = "2d:1f.7".parse().unwrap();
        assert_eq!(b, PciAddress { domain: 0, bus: 0x2d, device: 0x1f, function: 7 });
        assert_eq!(b.to_string(), "0000:2d:1f.7");
        let c: PciAddress = "10000:01:00.0".parse().unwrap();
        assert_eq!(c.to_string(), "10000:01:00.0");
    }

    #[test]
    fn malformed_addresses_name_the_forms() {
        for bad in ["", "15:00", "0000:15:20.0", "15:00.8", "zz:00.0", "1:2:3:4.0", "015:00.0", "sim2", "15:00.0.1"] {
            let e = bad.parse::<PciAddress>().unwrap_err().to_string();
            assert!(e.contains("DDDD:BB:DD.F"), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
    }
}
