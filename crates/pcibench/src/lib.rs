//! pcibench: find a PCIe card, reach its BARs and DMA engine by every path Linux offers,
//! measure programmed I/O and DMA with verified data, and say why when access fails.
//!
//! Data flows one way (see DESIGN.md):
//! target (`pci`) → access path (`access`) → mapping / buffer → transfer (`mmio`, `dma`)
//! → samples → statistics (`bench`) → report (`report`).

pub mod access;
pub mod bench;
pub mod direction;
pub mod dma;
pub mod doctor;
pub mod error;
pub mod host;
pub mod mmio;
pub mod os;
pub mod outcome;
pub mod pci;
pub mod report;
pub mod results;
pub mod session;
pub mod setup;
pub mod sim;
pub mod suite;
pub mod target;
pub mod units;

pub use error::{Error, Result};

#[cfg(test)]
pub(crate) mod testing;
