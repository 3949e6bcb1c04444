//! The sim QDMA model per IP variant, driven by hand: CPM4's own FMAP, context registers and
//! doorbells, and what each variant flags as a protocol violation (what the real IP would not
//! accept, or what no driver may do): registers and context selects it does not have, error
//! enables its vendor header does not define, a context changed under descriptors in flight.

use super::testkit::*;
use super::SwCtx;
use crate::access::BarRegion;
use crate::dma::{Direction, DmaAllocator};
use crate::sim::qdma::model::QdmaModelConfig;
use Direction::H2c;

fn card(misc: u32) -> Card {
    Card::new(QdmaModelConfig { misc_cap: misc, ..Default::default() })
}

/// A context command on CPM4: four data and four mask words, the command at 0x824.
fn cpm4_ctx_write(bar: &dyn BarRegion, sel: u32, id: u32, words: &[u32]) {
    for i in 0..4 {
        w(bar, 0x804 + 4 * i as u64, words.get(i).copied().unwrap_or(0));
        w(bar, 0x814 + 4 * i as u64, u32::MAX);
    }
    w(bar, 0x824, sel << 1 | 1 << 5 | id << 7);
    until("the CPM4 context command", || r(bar, 0x824) & 1 == 0);
}

#[test]
fn the_cpm4_model_keeps_its_own_fmap_context_registers_and_doorbells() {
    let card = card(CPM4);
    let bar = &*card.bar();
    // The FMAP is a direct register per function: first queue [10:0], count [22:11].
    w(bar, 0x400, 4 | 8 << 11);
    assert_eq!(card.model.fmap(), (4, 8));
    // Select 12 is QID2VEC on CPM4: writing it leaves the FMAP alone.
    cpm4_ctx_write(bar, 12, 0, &[0, 2]);
    assert_eq!(card.model.fmap(), (4, 8), "select 12 is not the FMAP on CPM4");
    // A software context through CPM4's registers, and a doorbell at 0x6404 for the function's
    // queue 0 (hardware queue 4), reach the queue.
    let sw = SwCtx { enabled: true, is_mm: true, desc_size: 2, ring_idx: 1, ..Default::default() };
    cpm4_ctx_write(bar, 1, 4, &sw.words());
    assert_eq!(SwCtx::from_words(&card.model.contexts(H2c, 4).unwrap().0).ring_idx, 1);
    w(bar, 0x6404, 3);
    assert_eq!(card.model.contexts(H2c, 4).unwrap().0[0] & 0xffff, 3, "the doorbell's producer index");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
    // The soft IP's registers are not there: its context command and its doorbells are flagged.
    w(bar, 0x844, 12 << 1 | 2 << 5);
    w(bar, 0x18004, 1);
    let v = card.model.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].contains("register 0x844 written, which Versal CPM4 does not have"), "{v:?}");
    assert!(v[1].contains("register 0x18004") && v[1].contains("doorbells at 0x6400"), "{v:?}");
    assert_eq!(card.model.contexts(H2c, 0).unwrap().0, [0; 8], "nothing reached queue 0");
}

#[test]
fn a_cpm4_cards_pending_errors_are_shown_in_its_own_layout() {
    let card = card(CPM4);
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    // Function 0's queues from 4, H2C MM errors logged, the H2C engine running.
    w(bar, 0x400, 4 | 8 << 11);
    w(bar, 0x24c, 1 << 4);
    w(bar, 0x1254, 1 << 2);
    w(bar, 0x1204, 1);
    let sw = SwCtx {
        enabled: true,
        is_mm: true,
        desc_size: 2,
        ring_idx: 1,
        writeback: true,
        ring_base: bus(&*ring, 0),
        ..Default::default()
    };
    cpm4_ctx_write(bar, 1, 4, &sw.words());
    // One descriptor reading host memory that is not the card's to read.
    bytes(&*ring)[..32].copy_from_slice(&desc(0x1000, 0, 64, true));
    w(bar, 0x6404, 1);
    until("the queue to stop", || card.model.last_fault(H2c).is_some());
    drop(data);
    // CPM4's MM error: valid ERR_CODE [17], queue ERR_INFO [28:17].
    let info = super::probe_info(bar).unwrap();
    let pending = info.pending_errors.unwrap_or_default();
    assert!(
        pending.contains(
            "h2c MM error: host read: unsupported request or completer abort (the host buffer is not mapped for the \
             card) (read side, code 2); hardware queue 4, descriptor 0"
        ),
        "{pending}"
    );
    assert!(pending.starts_with("GLBL_ERR_STAT 0x10: H2C MM channel 0 error"), "{pending}");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn each_variant_flags_enables_and_selects_it_does_not_have() {
    // Soft 3.x: GLBL_ERR_MASK defines bits 0-3, 8 and 11 only, and no MM engine error enable
    // bit; no PASID contexts (selects 9, 10). EQDMA and CPM5: TRQ bit 2 is reserved.
    let cases: [(u32, u64, u32, Option<&str>); 8] = [
        (SOFT3, 0x24c, 1 << 2 | 1 << 3 | 1 << 8 | 1 << 11, None),
        (SOFT3, 0x24c, 1 << 4, Some("GLBL_ERR_MASK written 0x10: bits 0x10 are not defined for the QDMA soft IP 3.x")),
        (SOFT3, 0x1254, 1 << 2, Some("h2c MM ERR_CODE_ENABLE_MASK written 0x4")),
        (SOFT3, 0x268, 0xf, None),
        (EQDMA, 0x24c, 1 << 4 | 1 << 6 | 1 << 9, None),
        (EQDMA, 0x268, 0xf, Some("GLBL_TRQ_ERR_MSK written 0xf: bits 0x4 are not defined for EQDMA")),
        (CPM5, 0x268, 0xb3, None),
        (CPM5, 0x1054, 0x7000_0003, None),
    ];
    for (misc, reg, value, flagged) in cases {
        let card = card(misc);
        w(&*card.bar(), reg, value);
        let v = card.model.violations();
        match flagged {
            None => assert!(v.is_empty(), "{misc:#x} {reg:#x} {value:#x}: {v:?}"),
            Some(words) => assert!(v.len() == 1 && v[0].contains(words), "{misc:#x} {reg:#x}: {v:?}"),
        }
    }
    for (misc, sel, exists) in [(SOFT3, 9, false), (SOFT3, 13, false), (EQDMA, 9, true), (CPM5, 15, false)] {
        let card = card(misc);
        cmd(&*card.bar(), sel, 2, 0);
        let v = card.model.violations();
        assert_eq!(v.is_empty(), exists, "{misc:#x} select {sel}: {v:?}");
    }
}

#[test]
fn a_context_changed_under_descriptors_in_flight_is_flagged() {
    let card = card(SOFT3);
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    take(bar, 1);
    start(bar, H2c, 0, bus(&*ring, 0));
    bytes(&*ring)[..32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    card.model.hold_in_flight(H2c, 0, true);
    ring_doorbell(bar, H2c, 0, 1);
    until("the descriptor in flight", || card.model.in_flight(H2c, 0) == 1);
    let reads = card.model.hw_context_reads(H2c, 0);
    // Reading the hardware context is what a driver waiting for the queue does: allowed.
    let hw = ctx_read(bar, 3, 0);
    assert_eq!(hw[1] & (1 << 8 | 1 << 9), 1 << 8, "descriptors pending, queue valid");
    assert_eq!(card.model.hw_context_reads(H2c, 0), reads + 1);
    assert!(card.model.violations().is_empty());
    // Invalidating it while the descriptor is in flight is not.
    cmd(bar, 1, 3, 0);
    card.model.hold_in_flight(H2c, 0, false);
    until("the engine to let go", || card.model.in_flight(H2c, 0) == 0);
    let v = card.model.violations();
    assert!(
        v.len() == 1 && v[0].contains("h2c queue 0: invalidate of its software context with 1 descriptors in flight"),
        "{v:?}"
    );
    assert_eq!(status(&*ring), (0, 0), "no writeback into a ring the driver gave up");
}
