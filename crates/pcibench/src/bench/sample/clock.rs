//! The clock every runner times with: `crate::clock`, where the simulated cards' models read
//! the same time (they sit below `bench` in the layers).

pub use crate::clock::*;
