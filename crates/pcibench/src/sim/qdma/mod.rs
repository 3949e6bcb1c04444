//! The QDMA engine of `sim-qdma` (PG302, the U280 of seed 004): `card`, `model` (the config BAR:
//! FMAP, indirect contexts, doorbells, errors), `engine` (the queues' worker), `state`.

pub mod card;
pub(super) mod engine;
pub mod model;
pub(super) mod state;
