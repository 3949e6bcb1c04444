//! The sim card's XDMA engine (PG195): `card` (the card `sim`: its identity and BARs), `model` (the
//! register block a driver talks to), `engine` (the channels moving data), `perf` (each channel's
//! performance monitor), `state` (registers and constants the others share).

pub mod card;
pub(super) mod engine;
pub mod model;
pub mod perf;
pub(super) mod state;
