//! pcibench: find a PCIe card, reach its BARs and DMA engine by every path Linux offers,
//! measure programmed I/O and DMA with verified data, and say why when access fails.
//!
//! Data flows one way (see ARCHITECTURE.md):
//! device (`device`, `pci`) → access path (`access`) → mapping / buffer → transfer (`mmio`,
//! `dma`) → samples → statistics (`bench`) → report (`report`). `measure` is the one entry point
//! of every measurement: a `measure::Request` in, a report out.

/// Serialize a type as the text the command line takes (`Display`), and read it back with
/// `FromStr`: devices, buffer sources and kinds in requests and saved runs read as typed.
macro_rules! serde_as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<$t, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub mod access;
pub mod bench;
pub mod clock;
pub mod device;
pub mod direction;
pub mod dma;
pub mod doctor;
pub mod error;
pub mod file;
pub mod health;
pub mod host;
pub mod linkctl;
pub mod measure;
pub mod mmio;
pub mod model;
pub mod os;
pub mod outcome;
pub mod pci;
pub mod report;
pub mod reset;
pub mod results;
pub mod session;
pub mod setup;
pub mod sim;
pub mod text;
pub mod trace;
pub mod units;

pub use error::{Error, Result};

#[cfg(test)]
pub(crate) mod testing;
