//! The QDMA engine of `sim-qdma` (PG302, the U280 of seed 004): `card`, `model` (the config BAR:
//! FMAP, doorbells, errors), `context` (the indirect context registers and context RAM),
//! `engine` (the queues' worker), `intr` (interrupt aggregation rings and the error interrupt),
//! `state`, and `layout` (what differs per IP variant); and
//! `sim-qdma-st` (`stream_card`): the same model with stream queues and the vendor's example
//! design (`stream`, its state in `st_state`).

pub mod card;
mod context;
pub(super) mod engine;
mod intr;
pub mod layout;
pub mod model;
mod st_state;
pub(super) mod state;
mod stream;
pub mod stream_card;
