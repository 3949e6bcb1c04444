//! The direction of a transfer, shared by PIO, DMA and the simulated engines.

use serde::{Deserialize, Serialize};
use std::fmt;

/// `h2c`: host to card; `c2h`: card to host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    H2c,
    C2h,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::H2c => "h2c",
            Direction::C2h => "c2h",
        })
    }
}

impl Direction {
    /// The seeds' wording: "host-to-card", "card-to-host".
    pub fn long_name(&self) -> &'static str {
        match self {
            Direction::H2c => "host-to-card",
            Direction::C2h => "card-to-host",
        }
    }
}
