//! `--completion irq|both`: the engine's interrupts routed to this process before anything runs,
//! or a one-line refusal saying why they cannot be (an engine that completes by polling only, an
//! access path or function without them).

use crate::access::{Interrupts, IrqKind, IrqRequest};
use crate::dma::Engine;
use crate::session::Session;
use crate::{Error, Result};

/// The vectors `engine` signals on (`Engine::irq_request`), of `kind` (`--irq-kind`) or, with
/// `None`, the best kind the function offers.
pub fn route(session: &Session, engine: &dyn Engine, kind: Option<IrqKind>) -> Result<Box<dyn Interrupts>> {
    if !engine.completes_by_interrupt() {
        return Err(Error::usage(format!(
            "--completion irq: the {} engine completes by polling only (xdma, qdma, umem and edu complete by interrupt): \
             use --completion poll",
            engine.name()
        )));
    }
    session.interrupts(IrqRequest { kind, ..engine.irq_request() })
}

/// The interrupts a report's rows completed by, in words: what the access path routed, and
/// QDMA's interrupt mode when `--qdma-intr` chose the one that is not the default.
pub fn describe(irq: &dyn Interrupts, engine: &crate::session::EngineRequest) -> String {
    match engine.qdma_intr {
        Some(crate::dma::engines::qdma::QdmaIntr::Aggregated) => format!(
            "{}; qdma aggregated (--qdma-intr): every queue through the function's interrupt ring on vector 1, errors \
             on vector 0",
            irq.describe()
        ),
        _ => irq.describe(),
    }
}
