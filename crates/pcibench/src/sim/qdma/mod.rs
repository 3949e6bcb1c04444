//! The QDMA engine of `sim-qdma` (PG302, the U280 of seed 004): `card`, `model` (the config BAR:
//! FMAP, doorbells, errors), `context` (the indirect context registers and context RAM),
//! `engine` (the MM engines, each serving its queues in time), `intr` (interrupt aggregation rings and the error interrupt),
//! `state`, and `layout` (what differs per IP variant); and
//! `sim-qdma-st` (`stream_card`): the same model with stream queues and the vendor's example
//! design (`stream`, its state in `st_state`, its completion rings' triggers in `trigger`).

mod burst;
pub mod card;
mod context;
pub(super) mod engine;
mod intr;
pub mod layout;
pub mod model;
mod rules;
mod st_fetch;
mod st_state;
pub(super) mod state;
mod stream;
pub mod stream_card;
mod trigger;
