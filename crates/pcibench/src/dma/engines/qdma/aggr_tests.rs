//! QDMA's indirect interrupt mode (the interrupt aggregation ring) and the error interrupt
//! against the sim-qdma model: queues complete through the ring's one vector, the ring's colour
//! flips across a wrap, an error raises the error interrupt in either mode and fails the run at
//! once, an interrupt that never comes is ended by the watchdog, and stopping clears the ring's
//! context and GLBL_ERR_INT.

use super::ctx::IntrCtx;
use super::testkit::*;
use super::{IpKind, QdmaEngine, QdmaIntr, QdmaOptions, SwCtx};
use crate::access::{DeviceAccess, IrqKind, IrqRequest};
use crate::dma::{Direction, DmaAllocator, Engine, Transfer};
use crate::sim::qdma::model::{QdmaModelConfig, CARD_MEMORY_SIZE};
use std::time::Duration;
use Direction::{C2h, H2c};

fn aggregated(n: u16) -> QdmaOptions {
    QdmaOptions { queues: n, intr: QdmaIntr::Aggregated, ..Default::default() }
}

/// The interrupt ring's context (select 8) of ring `idx`, read through the driver's registers.
fn intr_ctx(card: &Card, idx: u32, ip: IpKind) -> IntrCtx {
    IntrCtx::from_words(&ctx_read(&*card.bar(), 8, idx), ip)
}

#[test]
fn queues_complete_through_the_interrupt_ring_in_aggregated_mode() {
    for (stepped, misc_cap, ip) in
        [(true, SOFT3, IpKind::QdmaSoft), (false, SOFT3, IpKind::QdmaSoft), (true, EQDMA, IpKind::Eqdma)]
    {
        let card = Card::new(QdmaModelConfig { stepped, misc_cap, ..Default::default() });
        let alloc = card.alloc();
        let mut eng = QdmaEngine::new(card.bar(), &alloc, aggregated(4)).unwrap();
        let req = eng.irq_request();
        assert_eq!(req, IrqRequest::only(IrqKind::MsiX, 2), "the error vector and the ring's");
        let irq = card.dev.interrupts(req).unwrap();
        let (src, dst) = (alloc.alloc(64 << 10).unwrap(), alloc.alloc(64 << 10).unwrap());
        pattern(11, bytes(&*src));
        for _ in 0..2 {
            eng.prepare_batch(&spread(&*src, H2c, 16, 4096, 4)).unwrap();
            eng.run_interrupt(&*irq, LONG).unwrap();
            eng.prepare_batch(&spread(&*dst, C2h, 16, 4096, 4)).unwrap();
            eng.run_interrupt(&*irq, LONG).unwrap();
        }
        assert!(bytes(&*src)[..] == bytes(&*dst)[..]);
        let sent = card.model.irq().sent();
        assert!(sent[1] > 0 && sent[0] == 0 && sent[2..].iter().all(|n| *n == 0), "only the ring's vector: {sent:?}");
        // What libqdma's indirect mode writes: the queue names ring 0 (function 0) with
        // aggregation on; the ring's context is valid, on vector 1, at the ring's base, and on
        // EQDMA names the function.
        let sw = SwCtx::from_words(&ctx_read(&*card.bar(), sw_sel(C2h), 3));
        assert!(sw.irq && sw.intr_aggr && sw.vec == 0, "{sw:?}");
        let ring = eng.aggr.as_ref().unwrap();
        let ic = intr_ctx(&card, 0, ip);
        assert!(ic.valid && ic.vec == 1 && ic.base == ring.bus && ic.page_size == 0, "{ic:?}");
        assert_eq!(ic.base % 4096, 0);
        // The driver consumed everything the engine wrote.
        assert_eq!(ic.pidx as u32, ring.cidx, "{ic:?}");
        // Polling again: the queues lose their interrupt fields, the ring its context.
        eng.prepare_batch(&spread(&*src, H2c, 4, 4096, 4)).unwrap();
        eng.run(LONG).unwrap();
        assert!(!intr_ctx(&card, 0, ip).valid);
        assert_eq!(r(&*card.bar(), 0xb04), 0, "GLBL_ERR_INT put back as found");
        drop(eng);
        drop(irq);
        let v = card.model.violations();
        assert!(v.is_empty(), "{v:?}");
    }
}

#[test]
fn the_interrupt_ring_colour_flips_across_a_wrap() {
    let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, aggregated(1)).unwrap();
    let irq = card.dev.interrupts(eng.irq_request()).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    // One transfer per run, one status writeback and so one ring entry each: past 512 entries
    // the ring wraps and the engine writes the other colour.
    let mut wrapped = false;
    for i in 0..600 {
        eng.prepare_batch(&spread(&*buf, H2c, 1, 64, 1)).unwrap();
        eng.run_interrupt(&*irq, LONG).unwrap();
        let ring = eng.aggr.as_ref().unwrap();
        wrapped |= !ring.color;
        assert_eq!(ring.cidx, intr_ctx(&card, 0, IpKind::QdmaSoft).pidx as u32, "run {i}");
    }
    assert!(wrapped, "600 entries wrap a ring of 512");
    let ic = intr_ctx(&card, 0, IpKind::QdmaSoft);
    assert!(!ic.color, "the context's colour flipped at the wrap: {ic:?}");
    drop(eng);
    drop(irq);
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn an_error_raises_the_error_interrupt_and_fails_the_run_in_either_mode() {
    for intr in [QdmaIntr::Direct, QdmaIntr::Aggregated] {
        let card = Card::new(QdmaModelConfig { stepped: true, misc_cap: EQDMA, ..Default::default() });
        let alloc = card.alloc();
        // A window running past card memory: the engine's AXI write fails (an MM error leaf).
        let opts = QdmaOptions { card_addr: CARD_MEMORY_SIZE - 4096, intr, ..Default::default() };
        let mut eng = QdmaEngine::new(card.bar(), &alloc, opts).unwrap();
        let irq = card.dev.interrupts(eng.irq_request()).unwrap();
        let buf = alloc.alloc(8192).unwrap();
        eng.prepare(&*buf, &Transfer { dir: H2c, buf_offset: 0, card_addr: 0, len: 8192 }).unwrap();
        let e = eng.run_interrupt(&*irq, LONG).unwrap_err().to_string();
        assert!(e.contains("the error interrupt (GLBL_ERR_INT, MSI-X vector 0) fired"), "{intr:?}: {e}");
        assert!(e.contains("card write: AXI decode error"), "{intr:?}: {e}");
        assert_eq!(card.model.irq().sent()[0], 1, "{intr:?}: the error vector fired once");
        // The handler read and cleared the status: nothing is left set.
        assert_eq!(r(&*card.bar(), 0x248), 0, "{intr:?}");
        drop(eng);
        assert_eq!(r(&*card.bar(), 0xb04), 0, "{intr:?}: GLBL_ERR_INT put back as found");
    }
}

#[test]
fn an_aggregated_interrupt_that_never_comes_is_stopped_by_the_watchdog() {
    let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, aggregated(1)).unwrap();
    let irq = card.dev.interrupts(eng.irq_request()).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare_batch(&spread(&*buf, H2c, 1, 4096, 1)).unwrap();
    card.model.set_stalled(H2c, true);
    let e = eng.run_interrupt(&*irq, Duration::from_millis(40)).unwrap_err().to_string();
    assert!(e.contains("no interrupt came") && e.contains("queues stopped and cleared"), "{e}");
    assert!(!intr_ctx(&card, 0, IpKind::QdmaSoft).valid, "the ring's context cleared with the queues");
    card.model.set_stalled(H2c, false);
}

#[test]
fn the_model_flags_a_ring_without_a_context_and_a_cidx_past_its_entries() {
    let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
    let bar = card.bar();
    let alloc = card.alloc();
    take(&*bar, 1);
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    start(&*bar, H2c, 0, bus(&*ring, 0));
    // Interrupts on, armed, aggregated into ring 5, which has no context.
    let mut sw = SwCtx::from_words(&ctx_read(&*bar, sw_sel(H2c), 0));
    (sw.irq, sw.irq_arm, sw.intr_aggr, sw.vec) = (true, true, true, 5);
    ctx_write(&*bar, sw_sel(H2c), 0, &sw.words());
    bytes(&*ring)[..32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    ring_doorbell(&*bar, H2c, 0, 1);
    // A CIDX for ring 0, which has no context either.
    w(&*bar, 0x18000, 3);
    let v = card.model.violations();
    assert!(v.iter().any(|x| x.contains("naming interrupt ring 5") && x.contains("not valid")), "{v:?}");
    assert!(v.iter().any(|x| x.contains("interrupt CIDX 3 written for interrupt ring 0")), "{v:?}");
}

#[test]
fn the_model_flags_an_interrupt_ring_the_driver_lets_overflow() {
    let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
    let bar = card.bar();
    let alloc = card.alloc();
    take(&*bar, 1);
    let _irq = card.dev.interrupts(IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
    let (ring, data, iring) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap(), alloc.alloc(8192).unwrap());
    let base = bus(&*iring, 0).next_multiple_of(4096);
    let ic = IntrCtx { valid: true, vec: 1, color: true, base, ..Default::default() };
    ctx_write(&*bar, 8, 0, &ic.words(IpKind::QdmaSoft));
    start(&*bar, H2c, 0, bus(&*ring, 0));
    let mut sw = SwCtx::from_words(&ctx_read(&*bar, sw_sel(H2c), 0));
    (sw.irq, sw.irq_arm, sw.intr_aggr, sw.vec) = (true, true, true, 0);
    ctx_write(&*bar, sw_sel(H2c), 0, &sw.words());
    for slot in 0..64 {
        bytes(&*ring)[slot * 32..slot * 32 + 32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    }
    // One descriptor per doorbell, each re-arming the queue: an entry per writeback, and the
    // driver never writes the ring's CIDX. 511 entries fill a ring of 512; the next overflows.
    for i in 1..=511u32 {
        w(&*bar, 0x18004, (i % 64) | 1 << 16);
    }
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
    // Producer index 512 % 64 = 0, armed.
    w(&*bar, 0x18004, 1 << 16);
    let v = card.model.violations();
    assert!(v.iter().any(|x| x.contains("interrupt ring 0 overflowed")), "{v:?}");
}
