//! The sim card's XDMA engine (PG195): `card` (the card `sim`: its identity and BARs), `model` (the
//! register block a driver talks to), `engine` (the channels moving data), `perf` (each channel's
//! performance monitor), `state` (registers and constants the others share), `stream` (AXI4-Stream channels and the
//! loopback example design behind them, on `sim-xdma-st`).

pub mod card;
mod chain;
pub(super) mod engine;
mod intx;
pub mod model;
pub mod perf;
pub(super) mod rules;
pub(super) mod state;
pub mod stream;
