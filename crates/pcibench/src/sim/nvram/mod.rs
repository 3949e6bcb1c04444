//! The Micro Memory MM-5425CN NVRAM card (`sim-nvram`, seed 001): `card`, `model` (the CSR block),
//! `engine` (descriptor chains and semaphores), `state`.

pub mod card;
mod chain;
pub(super) mod engine;
pub mod model;
pub(super) mod state;
