//! The driver against the model of each IP variant, one test per finding of the comparison with
//! the vendor's sources (issue #23): Versal CPM4 refused untouched, soft 3.x MM errors learned
//! as the vendor learns them with nothing undefined enabled, EQDMA/CPM5 error registers read in
//! their own layout (a doorbell outside the FMAP reported, MM errors found by their valid bit and
//! the right queue named), CPM5's wider FMAP, stopping that waits for descriptors in flight,
//! and the vendor's ring-size table always written and put back.

use super::testkit::*;
use super::{probe_info, IpKind, QdmaEngine, QdmaOptions, SwCtx, VENDOR_RING_SIZES};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::sim::qdma::model::{QdmaModelConfig, CARD_MEMORY_SIZE};
use Direction::{C2h, H2c};

fn card(misc: u32) -> Card {
    Card::new(QdmaModelConfig { misc_cap: misc, ..Default::default() })
}

/// The card in stepped mode (every due time is now: the engine serves a queue inside the
/// driver's doorbell write), for the tests that assert exact progress: their order is theirs, not
/// the clock's (issues #34, #52).
fn stepped(misc: u32) -> Card {
    Card::new(QdmaModelConfig { misc_cap: misc, stepped: true, ..Default::default() })
}

fn queues(n: u16) -> QdmaOptions {
    QdmaOptions { queues: n, ..Default::default() }
}

fn one(buf: &dyn DmaBuffer, dir: Direction, queue: u16, card_addr: u64, len: u64) -> Work<'_> {
    Work { buf, t: Transfer { dir, buf_offset: 0, card_addr, len }, queue }
}

fn ring_table(card: &Card) -> Vec<u32> {
    (0..16).map(|i| r(&*card.bar(), 0x204 + 4 * i)).collect()
}

/// 4 KiB to the card at `at` on queue `q` and back; the bytes must match.
fn round_trip(card: &Card, eng: &mut QdmaEngine, q: u16, at: u64) {
    let alloc = card.alloc();
    let (src, dst) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    pattern(at + 1, bytes(&*src));
    for (dir, buf) in [(H2c, &src), (C2h, &dst)] {
        eng.prepare_batch(&[one(&**buf, dir, q, at, 4096)]).unwrap();
        eng.run(LONG).unwrap();
    }
    assert!(bytes(&*src)[..] == bytes(&*dst)[..], "queue {q} at {at:#x}");
}

#[test]
fn versal_cpm4_is_refused_before_any_register_is_written() {
    let card = card(CPM4);
    let e = QdmaEngine::new(card.bar(), &card.alloc(), queues(1)).err().unwrap().to_string();
    assert!(e.starts_with("QDMA on Versal CPM4 (GLBL2_MISC_CAP 0x10000000) is not supported"), "{e}");
    assert!(e.contains("context command sits at 0x824") && !e.contains('\n'), "{e}");
    assert_eq!(card.model.register_writes(), 0, "nothing written, not even a context read command");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
    // `info` still describes it (reads only), and says why it is not driven.
    let info = probe_info(&*card.bar()).unwrap();
    assert_eq!((info.ip, info.release), (IpKind::VersalCpm4, "2019.2"));
    let text = info.to_string();
    assert!(
        text.contains("MM H2C, MM C2H (not driven: below)") && text.contains("not driven: QDMA on Versal CPM4"),
        "{text}"
    );
    assert_eq!(card.model.register_writes(), 0);
}

#[test]
fn soft_3x_mm_errors_come_through_the_descriptor_engine_with_nothing_undefined_enabled() {
    let card = card(SOFT3);
    let alloc = card.alloc();
    let opts = QdmaOptions { card_addr: CARD_MEMORY_SIZE - 4096, ..Default::default() };
    let mut eng = QdmaEngine::new(card.bar(), &alloc, opts).unwrap();
    eng.start().unwrap();
    // qdma_soft_reg.h defines no MM engine bit in GLBL_ERR_MASK and no bit of the MM engines'
    // error enables: only the descriptor engine and register access leaves are enabled.
    let bar = card.bar();
    assert_eq!((r(&*bar, 0x24c), r(&*bar, 0x258), r(&*bar, 0x268)), (0xc, 0x01f9_023f, 0xf));
    assert_eq!((r(&*bar, 0x1254), r(&*bar, 0x1054)), (0, 0));
    // An AXI decode error (the window runs past card memory) is the descriptor engine's "DMA
    // engine error" there, found through GLBL_ERR_STAT bit 2 as the vendor's error monitor does.
    let buf = alloc.alloc(8192).unwrap();
    eng.prepare(&*buf, &Transfer { dir: H2c, buf_offset: 0, card_addr: 0, len: 8192 }).unwrap();
    let e = eng.run(LONG).unwrap_err().to_string();
    assert!(e.starts_with("QDMA stopped on an error: h2c queue 0: 0 of 1 descriptors completed"), "{e}");
    assert!(e.contains("GLBL_DSC_ERR_STS 0x100000: DMA engine error") && e.contains("ERROR 2"), "{e}");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn an_eqdma_doorbell_outside_the_fmap_is_reported_not_a_timeout() {
    let card = stepped(EQDMA);
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(2)).unwrap();
    eng.start().unwrap();
    assert_eq!(r(&*card.bar(), 0x268), 0xb3, "EQDMA's register-access errors, queue range (bit 5) among them");
    // Something shrinks the function's FMAP under the driver: queue 1 is no longer its own.
    ctx_write(&*card.bar(), 12, 0, &[0, 1]);
    let buf = alloc.alloc(8192).unwrap();
    eng.prepare_batch(&[one(&*buf, H2c, 0, 0, 4096), one(&*buf, H2c, 1, 4096, 4096)]).unwrap();
    let e = eng.run(LONG).unwrap_err().to_string();
    // Stepped: queue 0's descriptor moved in its own doorbell write, before queue 1's doorbell
    // raised the error, so queue 1 is the one queue listed.
    assert!(e.starts_with("QDMA stopped on an error: h2c queue 1: 0 of 1 descriptors completed;"), "{e}");
    assert!(!e.contains("h2c queue 0:"), "{e}");
    assert!(
        e.contains(
            "GLBL_TRQ_ERR_STS 0x20: queue id outside this function's FMAP range (a doorbell for a queue the function \
             does not own) (function 0, address 0x18014)"
        ),
        "{e}"
    );
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn an_eqdma_mm_error_is_found_by_its_info_word_and_names_the_right_queue() {
    let card = stepped(EQDMA);
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(4)).unwrap();
    let mut bufs: Vec<_> = (0..4).map(|_| alloc.alloc(4096).unwrap()).collect();
    let work: Vec<Work> = (0..4).map(|q| one(&*bufs[q], H2c, q as u16, q as u64 * 4096, 4096)).collect();
    eng.prepare_batch(&work).unwrap();
    drop(work);
    bufs.pop(); // queue 3's host buffer goes: its host read fails
    let e = eng.run(LONG).unwrap_err().to_string();
    // ERR_CODE [27:12] holds descriptor 0 here, so its bit 17 (CPM4's valid bit) is clear; the
    // valid bit is ERR_INFO [31] and the queue ERR_INFO [23:0].
    assert!(e.starts_with("QDMA stopped on an error: h2c queue 3: 0 of 1 descriptors completed"), "{e}");
    assert!(
        e.contains(
            "h2c MM error: host read: unsupported request or completer abort (the host buffer is not mapped for the \
             card) (code 2); hardware queue 3, descriptor 0"
        ),
        "{e}"
    );
}

#[test]
fn an_eqdma_mm_errors_descriptor_index_is_never_read_as_its_valid_bit() {
    // Stepped (issue #34): under qemu-user the threaded model's worker raised the error before the
    // driver reaped the writeback of descriptor 31, and the report said 0 of 40 in 3 of 6 runs.
    let card = stepped(EQDMA);
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(2)).unwrap();
    // 40 transfers on queue 1, the 33rd from a buffer that is gone: the error is at descriptor
    // 32, so ERR_CODE [27:12] sets bit 17, where CPM4 keeps its valid bit.
    let mut bufs: Vec<_> = (0..40).map(|_| alloc.alloc(4096).unwrap()).collect();
    let work: Vec<Work> = (0..40).map(|i| one(&*bufs[i], H2c, 1, i as u64 * 64, 64)).collect();
    eng.prepare_batch(&work).unwrap();
    drop(work);
    drop(bufs.remove(32));
    let e = eng.run(LONG).unwrap_err().to_string();
    assert!(e.contains("h2c MM error: host read: unsupported request"), "{e}");
    assert!(e.contains("(code 2); hardware queue 1, descriptor 32"), "{e}");
    assert!(e.starts_with("QDMA stopped on an error: h2c queue 1: 32 of 40 descriptors completed;"), "{e}");
}

#[test]
fn a_report_names_the_hardware_contexts_progress_when_the_writeback_lags() {
    // Stepped: 32 descriptors move in the first doorbell write with their status writeback
    // withheld (not come yet), then descriptor 32's host read fails in the second.
    let card = stepped(EQDMA);
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(2)).unwrap();
    let mut bufs: Vec<_> = (0..40).map(|_| alloc.alloc(4096).unwrap()).collect();
    let work: Vec<Work> = (0..40).map(|i| one(&*bufs[i], H2c, 1, i as u64 * 64, 64)).collect();
    eng.prepare_batch(&work).unwrap();
    drop(work);
    drop(bufs.remove(32));
    card.model.withhold_writebacks(H2c, true);
    let e = eng.run(LONG).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "QDMA stopped on an error: h2c queue 1: 32 of 40 descriptors completed by the hardware context; the last \
             status writeback said 0; software context ["
        ),
        "{e}"
    );
    assert!(e.contains("hardware context [cidx 32,"), "{e}");
    assert!(e.contains("(code 2); hardware queue 1, descriptor 32"), "{e}");
    // The writeback, once it comes, says the same: the next run starts from a clean ring.
    card.model.withhold_writebacks(H2c, false);
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare_batch(&[one(&*buf, H2c, 1, 0, 4096)]).unwrap();
    eng.run(LONG).unwrap();
}

#[test]
fn an_eqdma_descriptor_error_names_its_queue_from_log0_and_its_descriptor_from_log1() {
    let card = stepped(EQDMA);
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(2)).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare_batch(&[one(&*buf, H2c, 1, 0, 4096)]).unwrap();
    eng.start().unwrap();
    // Bus Master off: the engine's descriptor fetch for queue 1 fails.
    card.model.set_bus_master(false);
    let e = eng.run(LONG).unwrap_err().to_string();
    card.model.set_bus_master(true);
    assert!(e.starts_with("QDMA stopped on an error: h2c queue 1: 0 of 1 descriptors completed;"), "{e}");
    // LOG0: valid 31, select 30, queue [12:0]; LOG1: descriptor [27:12], error type [4:0].
    assert!(
        e.contains(
            "GLBL_DSC_ERR_STS 0x4: unsupported request or completer abort on a descriptor fetch (the ring's bus \
             address is not reachable) (first error: hardware queue 1, select 0, descriptor 0, error type 2, sub type 0)"
        ),
        "{e}"
    );
}

#[test]
fn a_versal_soft_ip_is_driven_as_the_soft_3x() {
    // Device type CPM4 with IP type 1: the soft IP in a Versal's fabric, which the vendor drives
    // with its soft 3.x code (`qdma_hw_access_init` overrides only the hard CPM4 and CPM5).
    let card = card(0x1010_0000);
    let mut eng = QdmaEngine::new(card.bar(), &card.alloc(), queues(2)).unwrap();
    assert_eq!((eng.info().ip, eng.info().release), (IpKind::VersalSoft, "2019.2"));
    round_trip(&card, &mut eng, 1, 0x2000);
    assert_eq!(r(&*card.bar(), 0x24c), 0xc, "the soft 3.x error enables");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn eqdma5_descriptors_stay_under_its_64k_limit() {
    let card = card(0x0020_0000);
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(1)).unwrap();
    let buf = alloc.alloc(256 << 10).unwrap();
    eng.prepare(&*buf, &Transfer { dir: H2c, buf_offset: 0, card_addr: 0, len: 256 << 10 }).unwrap();
    eng.run(LONG).unwrap();
    assert_eq!(r(&*card.bar(), 0x1248), 8, "32 KiB descriptors (SOFT_EQDMA_DESC_BLEN_MAX)");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn cpm5_fmap_fields_are_12_and_13_bits_wide() {
    // A function whose queues start at 2048, past the soft IP's 11-bit first-queue field.
    let cfg = |fmap| QdmaModelConfig { misc_cap: CPM5, max_queues: 4096, fmap_at_reset: fmap, ..Default::default() };
    let card = Card::new(cfg((2048, 8)));
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(2)).unwrap();
    assert_eq!((eng.qbase(), eng.info().max_queues), (2048, 4096), "CPM5's 0xfff queues are 4096");
    eng.start().unwrap();
    assert_eq!(card.model.fmap(), (2048, 2));
    for qid in [2048, 2049] {
        assert!(SwCtx::from_words(&card.model.contexts(H2c, qid).unwrap().0).enabled, "hardware queue {qid}");
    }
    round_trip(&card, &mut eng, 1, 0x3000);
    drop(eng);
    assert_eq!(card.model.fmap(), (2048, 8), "FMAP as found");
    // A function owning all 4096 queues, a count past the soft IP's 12-bit field.
    let card = Card::new(cfg((0, 4096)));
    let mut eng = QdmaEngine::new(card.bar(), &card.alloc(), queues(2)).unwrap();
    eng.start().unwrap();
    assert_eq!(card.model.fmap(), (0, 2));
    drop(eng);
    assert_eq!(card.model.fmap(), (0, 4096), "FMAP as found");
    assert!(card.model.violations().is_empty(), "{:?}", card.model.violations());
}

#[test]
fn stopping_waits_for_descriptors_in_flight_before_clearing_contexts() {
    let card = card(SOFT3);
    let alloc = card.alloc();
    let opts = QdmaOptions { queues: 2, drain_timeout: LONG, ..Default::default() };
    let mut eng = QdmaEngine::new(card.bar(), &alloc, opts).unwrap();
    let (lost, kept) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    pattern(7, bytes(&*kept));
    eng.prepare_batch(&[one(&*lost, H2c, 0, 0, 4096), one(&*kept, H2c, 1, 4096, 4096)]).unwrap();
    drop(lost); // queue 0 fails on its host read
                // Queue 1's descriptor, once fetched, stays in flight until released.
    card.model.hold_in_flight(H2c, 1, true);
    let reads = card.model.hw_context_reads(H2c, 1);
    let result = std::thread::scope(|s| {
        let run = s.spawn(|| eng.run(LONG));
        // Until the driver has either given up (clearing at once) or is polling queue 1's
        // hardware context while it waits; then queue 1's transfer may finish.
        until("the driver to return or drain", || {
            run.is_finished() || card.model.hw_context_reads(H2c, 1) >= reads + 3
        });
        card.model.hold_in_flight(H2c, 1, false);
        run.join().unwrap()
    });
    let e = result.unwrap_err().to_string();
    assert!(e.starts_with("QDMA stopped on an error"), "{e}");
    assert!(e.ends_with("queues stopped and cleared") && !e.contains("still pending"), "{e}");
    let v = card.model.violations();
    assert!(v.iter().all(|v| !v.contains("in flight")), "contexts cleared under a transfer: {v:?}");
    // Queue 1's transfer completed before its queue was given up.
    let mut got = vec![0u8; 4096];
    card.model.card_read(4096, &mut got).unwrap();
    assert!(got[..] == bytes(&*kept)[..]);
}

#[test]
fn the_vendor_ring_size_table_is_always_written_and_put_back() {
    // A table another driver left, without the vendor's 2049-entry ring at index 0.
    let mut other = VENDOR_RING_SIZES;
    (other[0], other[1]) = (1025, 4097);
    let card = Card::new(QdmaModelConfig { ring_sizes: other, ..Default::default() });
    let alloc = card.alloc();
    let mut eng = QdmaEngine::new(card.bar(), &alloc, queues(1)).unwrap();
    assert_eq!(eng.ring_size(), 2048, "the default ring is the vendor table's first");
    assert_eq!(ring_table(&card), other, "nothing written before the first run");
    eng.start().unwrap();
    assert_eq!(ring_table(&card), VENDOR_RING_SIZES);
    assert!(eng.notes().join("; ").contains("held other sizes: loaded the vendor driver's default table"));
    assert_eq!(SwCtx::from_words(&card.model.contexts(H2c, 0).unwrap().0).ring_idx, 0);
    round_trip(&card, &mut eng, 0, 0);
    drop(eng);
    assert_eq!(ring_table(&card), other, "put back as found");
}
