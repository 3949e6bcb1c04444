//! The sim card's QDMA model at register level, driven by hand as the vendor's access code does
//! it: identifiers, the indirect context registers and their busy bit, hand-made rings and
//! doorbells, status writeback, and every error the model logs.

use super::testkit::*;
use super::{self as qdma};
use crate::access::DeviceAccess;
use crate::dma::{Direction, DmaAllocator};
use crate::sim::qdma::model::{QdmaModelConfig, CARD_MEMORY_SIZE};
use Direction::{C2h, H2c};

#[test]
fn identifier_capabilities_and_the_registry() {
    let card = Card::new(QdmaModelConfig::default());
    let bar = card.bar();
    assert_eq!(r(&*bar, 0) >> 16, 0x1fd3);
    let info = qdma::probe_info(&*bar).unwrap();
    assert_eq!(
        (info.bar, info.ip, info.release, info.max_queues, info.func),
        (0, qdma::IpKind::QdmaSoft, "2019.2", 2048, 0)
    );
    assert_eq!((info.mm_h2c, info.mm_c2h, info.st_h2c, info.st_c2h, info.user_bar), (true, true, true, true, Some(2)));
    assert_eq!(info.ring_sizes()[..3], [2048, 64, 128]);
    assert_eq!(info.mm_running, [false, false]);
    let text = info.to_string();
    assert!(text.contains("QDMA soft IP (3.x), Vivado 2019.2, RTL base; PCI function 0; user BAR BAR2"), "{text}");
    assert!(text.contains("MM H2C, MM C2H (pcibench drives these); ST H2C, ST C2H (stream: not driven)"), "{text}");
    assert!(text.contains("ring sizes (descriptors): 2048, 64, 128, 192"), "{text}");
    // The identifier, not the vendor id, decides: the user BAR and the XDMA card are not QDMA.
    let user = card.dev.open_bar(2, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    assert!(!qdma::is_config_bar(&*user).unwrap());
    let e = qdma::probe_info(&*user).unwrap_err().to_string();
    assert!(e.contains("BAR2 is not a QDMA config BAR: register 0x0 reads 0x00000000"), "{e}");
    assert_eq!(qdma::find_config_bar(&card.dev, &[2, 0]).unwrap(), Some(0));
    let host = crate::host::Host::with_root("/nonexistent");
    for (name, engine) in [("sim-qdma", "qdma"), ("sim", "xdma")] {
        let t: crate::device::Target = name.parse().unwrap();
        let info = crate::device::describe(&host, &t).unwrap();
        let dev = crate::device::open(&host, &t, &info, None).unwrap();
        let found: Vec<&str> =
            super::super::detect(&info, dev.as_ref()).into_iter().flatten().map(|d| d.engine).collect();
        assert_eq!(found, [engine], "{name}");
    }
}

#[test]
fn context_commands_are_busy_then_done_and_bad_ones_are_flagged() {
    let card = Card::new(QdmaModelConfig { ctxt_busy_reads: 3, max_queues: 16, ..Default::default() });
    let bar = &*card.bar();
    // A write: data, masks, command; busy for three reads, then done.
    for i in 0..8 {
        w(bar, 0x804 + 4 * i, 0x1111_0000 + i as u32);
        w(bar, 0x824 + 4 * i, u32::MAX);
    }
    w(bar, 0x844, 1 << 1 | 1 << 5 | 5 << 7);
    assert_eq!([r(bar, 0x844) & 1, r(bar, 0x844) & 1, r(bar, 0x844) & 1, r(bar, 0x844) & 1], [1, 1, 1, 0]);
    assert_eq!(ctx_read(bar, 1, 5)[..3], [0x1111_0000, 0x1111_0001, 0x1111_0002]);
    // Masked write: only the bits under the mask change.
    w(bar, 0x804, 0xffff_ffff);
    w(bar, 0x824, 0x0000_ff00);
    for i in 1..8 {
        w(bar, 0x824 + 4 * i, 0);
    }
    cmd(bar, 1, 1, 5);
    assert_eq!(ctx_read(bar, 1, 5)[0], 0x1111_ff00);
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
    // Clear, and the FMAP of this function.
    cmd(bar, 1, 0, 5);
    assert_eq!(ctx_read(bar, 1, 5), [0; 8]);
    ctx_write(bar, 12, 0, &[4, 8]);
    assert_eq!(card.model.fmap(), (4, 8));
    // A stuck context RAM never clears busy.
    card.model.set_context_stuck(true);
    w(bar, 0x844, 12 << 1 | 2 << 5);
    assert!((0..100).all(|_| r(bar, 0x844) & 1 == 1));
    // Writing while busy is dropped, and so is a queue past the IP's, a select the IP does not
    // have, and an FMAP invalidate: each flagged, and logged in GLBL_ERR_STAT where the IP's
    // header has a bit for it (bit 9 on EQDMA, none on the soft IP 3.x).
    for (misc, logged) in [(SOFT3, 0), (EQDMA, 1 << 9)] {
        let card =
            Card::new(QdmaModelConfig { ctxt_busy_reads: 3, max_queues: 16, misc_cap: misc, ..Default::default() });
        let bar = &*card.bar();
        w(bar, 0x24c, logged);
        w(bar, 0x844, 1 << 1 | 2 << 5 | 5 << 7);
        w(bar, 0x804, 0xdead);
        assert_eq!(r(bar, 0x248), logged);
        until("busy", || r(bar, 0x844) & 1 == 0);
        for (sel, op, id, what) in
            [(1, 2, 16, "queue 16 of 16"), (14, 2, 0, "select 14"), (12, 3, 0, "FMAP invalidate")]
        {
            w(bar, 0x248, logged);
            cmd(bar, sel, op, id);
            assert_eq!(r(bar, 0x248), logged, "{what}");
        }
        let v = card.model.violations();
        assert_eq!(v.len(), 4, "{v:?}");
        assert!(v[0].contains("written while a context command was busy") && v[2].contains("select 14"), "{v:?}");
    }
}

#[test]
fn hand_made_rings_move_data_and_write_back_status() {
    let card = Card::new(QdmaModelConfig::default());
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data, back) = (alloc.alloc(4096).unwrap(), alloc.alloc(8192).unwrap(), alloc.alloc(8192).unwrap());
    pattern(5, bytes(&*data));
    take(bar, 4);
    start(bar, H2c, 3, bus(&*ring, 0));
    // Three descriptors, the second at card 0x1000; queue 3 of the function.
    for (i, (off, card_at, len)) in
        [(0u64, 0u64, 100u32), (100, 0x1000, 4000), (4100, 0x2000, 4092)].into_iter().enumerate()
    {
        bytes(&*ring)[i * 32..i * 32 + 32].copy_from_slice(&desc(bus(&*data, off), card_at, len, true));
    }
    ring_doorbell(bar, H2c, 3, 3);
    until("status writeback", || {
        card.model.advance();
        status(&*ring) == (3, 3)
    });
    let mut got = vec![0u8; 4000];
    card.model.card_read(0x1000, &mut got).unwrap();
    assert!(got[..] == bytes(&*data)[100..4100]);
    assert_eq!(r(bar, 0x1248), 3, "H2C completed descriptor count");
    let (_, hw) = card.model.contexts(H2c, 3).unwrap();
    assert_eq!(hw[0] & 0xffff, 3, "hardware context cidx");
    assert_eq!(ctx_read(bar, 1, 3)[0] & 0xffff, 3, "the doorbell's pidx is in the software context");
    // C2H the same bytes back, through a ring of queue 0.
    let ring2 = alloc.alloc(4096).unwrap();
    start(bar, C2h, 0, bus(&*ring2, 0));
    bytes(&*ring2)[..32].copy_from_slice(&desc(0x1000, bus(&*back, 0), 4000, true));
    ring_doorbell(bar, C2h, 0, 1);
    until("status writeback", || {
        card.model.advance();
        status(&*ring2) == (1, 1)
    });
    assert!(bytes(&*back)[..4000] == bytes(&*data)[100..4100]);
    assert_eq!(r(bar, 0x248), 0, "no errors");
}

/// What one bad descriptor left in the registers.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    glbl: u32,
    dsc: u32,
    log0: u32,
    log1: u32,
    /// The MM engine's ERR_CODE and ERR_INFO of the descriptor's direction.
    code: u32,
    info: u32,
    /// The software context's error field.
    field: u32,
}

/// Two good descriptors, then a bad one, on hardware queue 5 of `dir` on the IP `misc`; with
/// `ring_at`, the ring is put there (unreachable) and the bad descriptor alone.
fn bad(misc: u32, dir: Direction, d: &dyn Fn(u64, u64) -> [u8; 32], ring_at: Option<u64>) -> (Seen, String) {
    let card = Card::new(QdmaModelConfig { misc_cap: misc, ..Default::default() });
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    take(bar, 8);
    start(bar, dir, 5, ring_at.unwrap_or(bus(&*ring, 0)));
    let good = if ring_at.is_some() { 0 } else { 2 };
    for i in 0..good {
        let (h, c) = (bus(&*data, 64 * i as u64), 64 * i as u64);
        let g = if dir == H2c { desc(h, c, 64, true) } else { desc(c, h, 64, true) };
        bytes(&*ring)[32 * i..32 * i + 32].copy_from_slice(&g);
    }
    bytes(&*ring)[32 * good..32 * good + 32].copy_from_slice(&d(bus(&*data, 0), 0));
    ring_doorbell(bar, dir, 5, good as u32 + 1);
    until("the queue to stop", || card.model.last_fault(dir).is_some());
    let mm = if dir == H2c { 0x1258 } else { 0x1058 };
    let (sw, _) = card.model.contexts(dir, 5).unwrap();
    let fault = card.model.last_fault(dir).unwrap();
    // A stopped queue ignores further doorbells.
    ring_doorbell(bar, dir, 5, good as u32 + 2);
    let seen = Seen {
        glbl: r(bar, 0x248),
        dsc: r(bar, 0x254),
        log0: r(bar, 0x25c),
        log1: r(bar, 0x260),
        code: r(bar, mm),
        info: r(bar, mm + 4),
        field: (sw[1] >> 26) & 3,
    };
    (seen, fault)
}

#[test]
fn bad_descriptors_stop_the_queue_and_are_logged_in_each_variants_layout() {
    let unmapped = 0x1000u64; // page 1: never a registered buffer
    type MakeDesc = Box<dyn Fn(u64, u64) -> [u8; 32]>;
    let cases: [(&str, Direction, MakeDesc, &str); 6] = [
        ("zero length", C2h, Box::new(|h, c| desc(c, h, 0, true)), "length is 0"),
        ("host source unmapped", H2c, Box::new(move |_, c| desc(unmapped, c, 64, true)), "host read failed"),
        ("card past the end", H2c, Box::new(|h, _| desc(h, CARD_MEMORY_SIZE - 8, 64, true)), "past card memory"),
        ("card read past the end", C2h, Box::new(|h, _| desc(CARD_MEMORY_SIZE, h, 8, true)), "past card memory"),
        ("host destination unmapped", C2h, Box::new(move |_, c| desc(c, unmapped, 8, true)), "host write failed"),
        ("descriptor unreachable", H2c, Box::new(|h, c| desc(h, c, 8, true)), "descriptor fetch failed"),
    ];
    // Per case: (GLBL_ERR_STAT, DSC_ERR_STS, error type in LOG1, MM code, context error field).
    // Soft 3.x: an MM data error is the descriptor engine's "DMA engine error" (bit 20), the
    // MM error registers stay clear; its logs are kept in the CPM4 layout.
    let soft3 = [
        (1 << 2, 1 << 2, 2, 0, 1),
        (1 << 2, 1 << 20, 20, 0, 2),
        (1 << 2, 1 << 20, 20, 0, 2),
        (1 << 2, 1 << 20, 20, 0, 2),
        (1 << 2, 1 << 20, 20, 0, 2),
        (1 << 2, 1 << 1, 1, 0, 1),
    ];
    // EQDMA and CPM5: the low descriptor bits moved up by one (parameter 4, UR/CA 2), MM errors
    // in GLBL bits 4/6 and the MM error code (the enable bit's number).
    let eq = [
        (1 << 2, 1 << 4, 4, 0, 1),
        (1 << 4, 0, 0, 2, 2),
        (1 << 4, 0, 0, 28, 2),
        (1 << 6, 0, 0, 1, 2),
        (1 << 6, 0, 0, 29, 2),
        (1 << 2, 1 << 2, 2, 0, 1),
    ];
    for (misc, want) in [(SOFT3, soft3), (EQDMA, eq), (CPM5, eq)] {
        let eq_layout = misc != SOFT3;
        for (i, ((name, dir, d, words), (glbl, dsc, kind, code, field))) in cases.iter().zip(want).enumerate() {
            let unreachable = i == 5;
            let (seen, fault) = bad(misc, *dir, d, unreachable.then_some(unmapped));
            let cidx = if unreachable { 0 } else { 2 };
            let c2h = (*dir == C2h) as u32;
            // Descriptor logs: soft 3.x/CPM4 valid 31, qid [28:17], sel 16, cidx [15:0] and the
            // type in LOG1; EQDMA/CPM5 valid 31, sel 30, qid [12:0], cidx in LOG1 [27:12].
            let (log0, log1) = match (dsc, eq_layout) {
                (0, _) => (0, 0),
                (_, false) => (1 << 31 | 5 << 17 | c2h << 16 | cidx, kind),
                (_, true) => (1 << 31 | c2h << 30 | 5, cidx << 12 | kind),
            };
            // MM logs (EQDMA/CPM5): the descriptor in ERR_CODE [27:12], valid 31 and the queue in
            // ERR_INFO.
            let (code, info) = if code == 0 { (0, 0) } else { (cidx << 12 | code, 1 << 31 | c2h << 30 | 5) };
            let want = Seen { glbl, dsc, log0, log1, code, info, field };
            assert_eq!(seen, want, "{misc:#x} {name}: {fault}");
            assert!(fault.contains(words), "{name}: {fault}");
        }
    }
}

#[test]
fn errors_log_only_where_enabled_and_doorbells_respect_the_fmap() {
    // (IP, its TRQ all-errors mask, the queue-range bit, the log of function 0's doorbell at
    // 0x18024: raw on soft 3.x, function [26:17] and address [16:0] on EQDMA/CPM5).
    for (misc, all, range, log) in
        [(SOFT3, 0xf, 1 << 1, 0x18024), (EQDMA, 0xb3, 1 << 5, 0x18024), (CPM5, 0xb3, 1 << 5, 0x18024)]
    {
        let card = Card::new(QdmaModelConfig { misc_cap: misc, ..Default::default() });
        let bar = &*card.bar();
        let alloc = card.alloc();
        let ring = alloc.alloc(4096).unwrap();
        ctx_write(bar, 12, 0, &[0, 2]);
        w(bar, 0x1204, 1);
        start(bar, H2c, 0, bus(&*ring, 0));
        ring_doorbell(bar, H2c, 0, 1); // slot 0 is zeros: length 0
        until("the queue to stop", || card.model.last_fault(H2c).is_some());
        assert_eq!((r(bar, 0x248), r(bar, 0x254)), (0, 0), "nothing logged without the enables");
        // A doorbell for queue 2 of a function that owns 2 queues is a target-access error.
        w(bar, 0x24c, 1 << 3);
        w(bar, 0x268, all);
        ring_doorbell(bar, H2c, 2, 1);
        assert_eq!((r(bar, 0x248), r(bar, 0x264), r(bar, 0x26c)), (1 << 3, range, log), "{misc:#x}");
        w(bar, 0x264, range);
        w(bar, 0x248, 1 << 3);
        assert_eq!((r(bar, 0x248), r(bar, 0x264)), (0, 0), "write 1 to clear");
        assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
    }
}

#[test]
fn a_doorbell_rung_before_its_descriptors_fetches_stale_ones() {
    // With fetch_on_doorbell the engine reads the ring when the doorbell is written, so ringing
    // first and writing the descriptor after is caught (a zero length in a fresh ring).
    let card = Card::new(QdmaModelConfig { fetch_on_doorbell: true, ..Default::default() });
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    take(bar, 1);
    start(bar, H2c, 0, bus(&*ring, 0));
    ring_doorbell(bar, H2c, 0, 1);
    bytes(&*ring)[..32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    until("the queue to stop", || card.model.last_fault(H2c).is_some());
    assert_eq!(r(bar, 0x254), 1 << 2, "a parameter error: {:?}", card.model.last_fault(H2c));
    // In order (descriptor, then doorbell) the same ring works.
    start(bar, H2c, 0, bus(&*ring, 0));
    bytes(&*ring)[..32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    ring_doorbell(bar, H2c, 0, 1);
    until("status writeback", || {
        card.model.advance();
        status(&*ring) == (1, 1)
    });
}
