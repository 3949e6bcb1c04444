//! The QDMA driver against the sim card's model: what open programs (FMAP, contexts, engines)
//! and puts back, transfers over 1 to 16 queues verified byte by byte against card memory,
//! ring wrap-around, doorbell ordering, error paths, a hung queue stopped by its timeout, and
//! the refusals that must leave the device untouched.

use super::testkit::*;
use super::{QdmaEngine, QdmaOptions, SwCtx};
use crate::access::DeviceAccess;
use crate::dma::{Direction, DmaAllocator, Engine, Transfer, Work};
use crate::sim::qdma::model::{QdmaModelConfig, CARD_MEMORY_SIZE};
use std::time::Duration;
use Direction::{C2h, H2c};

fn engine(card: &Card, alloc: &dyn DmaAllocator, opts: QdmaOptions) -> crate::Result<QdmaEngine> {
    QdmaEngine::new(card.bar(), alloc, opts)
}

fn queues(n: u16) -> QdmaOptions {
    QdmaOptions { queues: n, ..Default::default() }
}

/// H2C `count` × `len` over `n` queues, check card memory, C2H it back, compare.
fn round_trip(card: &Card, eng: &mut QdmaEngine, count: u64, len: u64, n: u16, seed: u64) {
    let alloc = card.alloc();
    let total = (count * len) as usize;
    let (src, dst) = (alloc.alloc(total).unwrap(), alloc.alloc(total).unwrap());
    pattern(seed, bytes(&*src));
    eng.prepare_batch(&spread(&*src, H2c, count, len, n)).unwrap();
    eng.run(LONG).unwrap();
    let mut on_card = vec![0u8; total];
    card.model.card_read(0, &mut on_card).unwrap();
    assert!(on_card[..] == bytes(&*src)[..total], "card memory after h2c of {count} x {len} on {n} queues");
    eng.prepare_batch(&spread(&*dst, C2h, count, len, n)).unwrap();
    eng.run(LONG).unwrap();
    let (a, b) = (&bytes(&*src)[..total], &bytes(&*dst)[..total]);
    if let Some(i) = (0..total).find(|&i| a[i] != b[i]) {
        panic!("{count} x {len} on {n} queues: first mismatch at {i:#x}");
    }
}

#[test]
fn open_programs_fmap_contexts_and_engines_then_drop_puts_them_back() {
    let card = Card::new(QdmaModelConfig::default());
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(4)).unwrap();
    assert_eq!(card.model.fmap(), (0, 0), "opening writes nothing");
    assert!(!card.model.engine_running(H2c));
    eng.start().unwrap();
    assert_eq!(card.model.fmap(), (0, 4));
    assert!(card.model.engine_running(H2c) && card.model.engine_running(C2h));
    assert_eq!(eng.ring_size(), 2048);
    for q in 0..4u16 {
        for dir in [H2c, C2h] {
            let (sw, hw) = card.model.contexts(dir, q).unwrap();
            let c = SwCtx::from_words(&sw);
            assert!(c.enabled && c.is_mm && c.writeback && c.wbi_chk, "{dir} {q}: {c}");
            assert_eq!((c.desc_size, c.ring_idx, c.func, c.mm_channel, c.bypass), (2, 0, 0, 0, false), "{c}");
            assert_eq!(c.ring_base % 4096, 0);
            assert_eq!(hw[0] & 0xffff, 0, "fresh hardware context");
            let (back, _) = eng.queue_contexts(q, dir).unwrap();
            assert_eq!(back, c, "the driver reads back what the model holds");
        }
    }
    assert_eq!(card.model.contexts(H2c, 4).unwrap().0, [0; 8], "queue 4 untouched");
    drop(eng);
    assert_eq!(card.model.fmap(), (0, 0), "FMAP as found");
    assert!(!card.model.engine_running(H2c) && !card.model.engine_running(C2h), "engines as found");
    for q in 0..4u16 {
        assert_eq!(card.model.contexts(H2c, q).unwrap(), ([0; 8], [0; 8]), "queue {q} stopped and cleared");
    }
    assert!(card.dev.host_map().is_empty(), "ring memory released");
    // Opened and dropped without a run: the device is as it was, error enables included.
    let eng = engine(&card, &alloc, queues(2)).unwrap();
    drop(eng);
    assert_eq!((r(&*card.bar(), 0x24c), r(&*card.bar(), 0x1254), card.model.fmap()), (0, 0, (0, 0)));
}

#[test]
fn transfers_over_1_to_16_queues_verify_against_card_memory() {
    let card = Card::new(QdmaModelConfig::default());
    let alloc = card.alloc();
    for (i, n) in [1u16, 2, 4, 8, 16].into_iter().enumerate() {
        let mut eng = engine(&card, &alloc, queues(n)).unwrap();
        round_trip(&card, &mut eng, 64, 4096, n, i as u64 + 1);
        round_trip(&card, &mut eng, 1000, 64, n, i as u64 + 10);
        round_trip(&card, &mut eng, n as u64, 1 << 20, n, i as u64 + 20);
    }
}

#[test]
fn rings_wrap_around_and_runs_repeat() {
    let card = Card::new(QdmaModelConfig::default());
    let alloc = card.alloc();
    // 64-descriptor rings (63 outstanding at most): 200 descriptors wrap each ring three times.
    let mut eng = engine(&card, &alloc, QdmaOptions { queues: 2, ring_size: Some(64), ..Default::default() }).unwrap();
    assert_eq!(eng.ring_size(), 64);
    for seed in 0..3 {
        round_trip(&card, &mut eng, 400, 256, 2, seed + 1);
    }
    // The hardware consumer index went round: 3 runs × 2 directions × 200 descriptors per ring.
    let (_, hw) = eng.queue_contexts(1, H2c).unwrap();
    assert_eq!(hw.cidx as u32, (3 * 200) % 64);
}

#[test]
fn doorbells_follow_their_descriptors() {
    // The model reads descriptors when the doorbell is written: a doorbell ahead of its
    // descriptors would run stale ones (data from an earlier lap of the ring, or zeros).
    let card = Card::new(QdmaModelConfig { fetch_on_doorbell: true, ..Default::default() });
    let alloc = card.alloc();
    for batch in [1, 7, 64] {
        let mut eng =
            engine(&card, &alloc, QdmaOptions { queues: 4, ring_size: Some(128), ..Default::default() }).unwrap();
        eng.set_doorbell_batch(batch);
        for seed in 0..4 {
            round_trip(&card, &mut eng, 600, 512, 4, seed * 10 + batch as u64);
        }
    }
}

#[test]
fn both_directions_at_once_on_many_queues() {
    let card = Card::new(QdmaModelConfig::default());
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(8)).unwrap();
    let half = CARD_MEMORY_SIZE / 2;
    let (src, dst) = (alloc.alloc(half as usize).unwrap(), alloc.alloc(half as usize).unwrap());
    pattern(3, bytes(&*src));
    let seeded: Vec<u8> = (0..half).map(|i| (i * 7 + 1) as u8).collect();
    card.model.card_write(half, &seeded).unwrap();
    let len = half / 64;
    let mut work = spread(&*src, H2c, 64, len, 8);
    work.extend((0..64).map(|i| Work {
        buf: &*dst,
        t: Transfer { dir: C2h, buf_offset: i * len, card_addr: half + i * len, len },
        queue: (i % 8) as u16,
    }));
    eng.prepare_batch(&work).unwrap();
    for _ in 0..3 {
        eng.run(LONG).unwrap();
    }
    assert!(bytes(&*dst)[..] == seeded[..]);
    let mut on_card = vec![0u8; half as usize];
    card.model.card_read(0, &mut on_card).unwrap();
    assert!(on_card[..] == bytes(&*src)[..]);
}

#[test]
fn scattered_buffers_need_small_rings_and_then_work() {
    let card = Card::new(QdmaModelConfig::default());
    let scattered = crate::dma::buffers::sim::SimAllocator::scattered(card.dev.host_map().clone());
    let e = engine(&card, &scattered, queues(1)).err().unwrap().to_string();
    assert!(e.contains("needs 65568 bytes of bus-contiguous memory") && e.contains("hugepage"), "{e}");
    assert_eq!(card.model.fmap(), (0, 0), "refused before touching the device");
    let mut eng =
        engine(&card, &scattered, QdmaOptions { ring_size: Some(64), queues: 2, ..Default::default() }).unwrap();
    let (src, dst) = (scattered.alloc(3 << 20).unwrap(), scattered.alloc(3 << 20).unwrap());
    pattern(9, bytes(&*src));
    for (dir, buf) in [(H2c, &src), (C2h, &dst)] {
        eng.prepare_batch(&spread(&**buf, dir, 3, 1 << 20, 2)).unwrap();
        eng.run(LONG).unwrap();
    }
    assert!(bytes(&*src)[..] == bytes(&*dst)[..], "one descriptor per scattered page, both ways");
}

#[test]
fn a_freed_buffer_is_named_as_a_host_read_error_and_the_engine_recovers() {
    let card = Card::new(QdmaModelConfig::default());
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(2)).unwrap();
    let buf = alloc.alloc(8192).unwrap();
    eng.prepare_batch(&spread(&*buf, H2c, 2, 4096, 2)).unwrap();
    drop(buf);
    let e = eng.run(LONG).unwrap_err().to_string();
    // The soft IP 3.x reports an MM data error through the descriptor engine (see
    // conformance_tests for EQDMA's MM error registers).
    assert!(e.contains("GLBL_DSC_ERR_STS 0x100000: DMA engine error (a data transfer failed"), "{e}");
    assert!(e.contains("ERROR 2"), "the software context read back shows the error: {e}");
    assert!(e.ends_with("queues stopped and cleared"), "{e}");
    assert_eq!(card.model.contexts(H2c, 0).unwrap().0, [0; 8], "stopped and cleared");
    // The next run starts the queues afresh.
    round_trip(&card, &mut eng, 8, 4096, 2, 4);
}

#[test]
fn a_window_past_card_memory_is_an_axi_error() {
    let card = Card::new(QdmaModelConfig { misc_cap: EQDMA, ..Default::default() });
    let alloc = card.alloc();
    let opts = QdmaOptions { card_addr: CARD_MEMORY_SIZE - 4096, ..Default::default() };
    let mut eng = engine(&card, &alloc, opts).unwrap();
    let buf = alloc.alloc(8192).unwrap();
    eng.prepare(&*buf, &Transfer { dir: H2c, buf_offset: 0, card_addr: 0, len: 8192 }).unwrap();
    let e = eng.run(LONG).unwrap_err().to_string();
    assert!(e.contains("card write: AXI decode error"), "{e}");
}

#[test]
fn a_hung_queue_is_stopped_by_its_timeout() {
    // Stepped: the stall holds from the first doorbell, and what moves after it is released is
    // the test's step, not a worker's whim after a sleep.
    let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(2)).unwrap();
    let buf = alloc.alloc(8192).unwrap();
    pattern(1, bytes(&*buf));
    eng.prepare_batch(&spread(&*buf, H2c, 2, 4096, 2)).unwrap();
    card.model.set_stalled(H2c, true);
    let e = eng.run(Duration::from_millis(30)).unwrap_err().to_string();
    assert!(e.starts_with("QDMA no progress for 30 ms: h2c queue 0: 0 of 1 descriptors completed"), "{e}");
    assert!(e.contains("hardware context [cidx 0"), "{e}");
    assert!(e.contains("MM h2c engine running"), "{e}");
    assert!(e.ends_with("queues stopped and cleared"), "{e}");
    // Released and stepped, the engine finds the queues cleared: nothing moves.
    card.model.set_stalled(H2c, false);
    assert!(!card.model.step(H2c), "the stopped queues' doorbells are void");
    let mut on_card = vec![0u8; 8192];
    card.model.card_read(0, &mut on_card).unwrap();
    assert!(on_card.iter().all(|b| *b == 0), "the stopped queues' descriptors did not run");
    eng.run(LONG).unwrap();
    card.model.card_read(0, &mut on_card).unwrap();
    assert!(on_card[..] == bytes(&*buf)[..]);
    let status = eng.stop().unwrap();
    assert_eq!(status, "h2c and c2h queues 0-1 stopped and cleared");
}

/// A card that falls off the bus mid-run is named as such, not as an engine error or a timeout:
/// its identifier and version registers read all-ones, which they never do on a live card; and
/// stopping it does not wait out a context command per queue.
#[test]
fn a_card_that_falls_off_the_bus_is_named_not_timed_out() {
    let card = Card::new(QdmaModelConfig { stepped: true, ..Default::default() });
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(2)).unwrap();
    let buf = alloc.alloc(8192).unwrap();
    eng.prepare_batch(&spread(&*buf, H2c, 2, 4096, 2)).unwrap();
    eng.run(LONG).unwrap();
    eng.prepare_batch(&spread(&*buf, H2c, 2, 4096, 2)).unwrap();
    card.dev.fall_off_bus();
    let e = eng.run(LONG).unwrap_err();
    assert!(matches!(e, crate::Error::Gone(_)), "{e}");
    assert!(e.to_string().contains("identifier (0x0, 0x1fd3 in its top bits) and version"), "{e}");
    let stopped = eng.stop().unwrap();
    assert!(stopped.starts_with("queues not stopped: "), "{stopped}");
}

#[test]
fn a_stuck_context_ram_times_out_before_anything_changes() {
    let card = Card::new(QdmaModelConfig::default());
    card.model.set_context_stuck(true);
    let opts = QdmaOptions { context_timeout: Duration::from_millis(20), ..Default::default() };
    let e = engine(&card, &card.alloc(), opts).err().unwrap().to_string();
    assert!(e.contains("context command (Read function map (FMAP) of id 0) still busy after 20ms"), "{e}");
    assert!(!card.model.engine_running(H2c));
}

#[test]
fn bad_input_is_refused_with_one_line_and_nothing_started() {
    let card = Card::new(QdmaModelConfig { max_queues: 8, ..Default::default() });
    let alloc = card.alloc();
    let cases: [(QdmaOptions, &str); 3] = [
        (queues(9), "--queues 9 is more than function 0 has: the QDMA has 8 queues and this function's start at 0 (FMAP), so at most 8"),
        (QdmaOptions { ring_size: Some(1000), ..Default::default() }, "--ring-size 1000 is not in the card's global ring-size table as pcibench loads it (the vendor driver's, 0x204-0x240): use one of 2048, 64, 128"),
        (QdmaOptions { card_size: 0, ..Default::default() }, "card window 0x0 + 0x0 is empty"),
    ];
    for (opts, want) in cases {
        let e = engine(&card, &alloc, opts).err().unwrap().to_string();
        assert!(e.starts_with(want) && !e.contains('\n'), "{e}");
        assert_eq!(card.model.fmap(), (0, 0));
        assert!(!card.model.engine_running(H2c) && !card.model.engine_running(C2h));
        assert_eq!(card.model.contexts(H2c, 0).unwrap().0, [0; 8]);
    }
    let user = card.dev.open_bar(2, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    let e = QdmaEngine::new(user, &alloc, queues(1)).err().unwrap().to_string();
    assert!(e.starts_with("BAR2 is not a QDMA config BAR"), "{e}");
    // Transfers the opened engine cannot take.
    let no_c2h = Card::new(QdmaModelConfig { mm_c2h: false, ..Default::default() });
    let alloc2 = no_c2h.alloc();
    let mut eng = engine(&no_c2h, &alloc2, queues(2)).unwrap();
    let buf = alloc2.alloc(4096).unwrap();
    let t = |dir, queue| [Work { buf: &*buf, t: Transfer { dir, buf_offset: 0, card_addr: 0, len: 64 }, queue }];
    let e = eng.prepare_batch(&t(C2h, 0)).unwrap_err().to_string();
    assert!(e.contains("no MM c2h engine"), "{e}");
    let e = eng.prepare_batch(&t(H2c, 2)).unwrap_err().to_string();
    assert!(e.contains("queue 2 is not one of the 2 queues opened"), "{e}");
    // Lengths and offsets near 2^64 are refused, never wrapped.
    for (len, card_addr, buf_offset) in [(u64::MAX - 1, 2, 0), (8, u64::MAX - 7, 0), (8, 0, u64::MAX - 7)] {
        let huge = [Work { buf: &*buf, t: Transfer { dir: H2c, buf_offset, card_addr, len }, queue: 0 }];
        assert!(eng.prepare_batch(&huge).is_err(), "{len:#x} {card_addr:#x} {buf_offset:#x}");
    }
    assert!(eng.run(LONG).is_err(), "nothing prepared after a refused prepare");
}

#[test]
fn an_empty_ring_table_is_loaded_then_put_back_and_stale_errors_cleared() {
    let card = Card::new(QdmaModelConfig { ring_sizes: [0; 16], ..Default::default() });
    let bar = card.bar();
    w(&*bar, 0x24c, 1 << 3);
    w(&*bar, 0x268, 0xf);
    w(&*bar, 0x18004, 1); // a doorbell outside any FMAP: a stale register-access error
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(1)).unwrap();
    assert_eq!(r(&*bar, 0x204), 0, "not before the engine is started");
    eng.start().unwrap();
    assert_eq!(r(&*bar, 0x204), 2049);
    let notes = eng.notes().join("; ");
    assert!(notes.contains("loaded the vendor driver's default table"), "{notes}");
    assert!(notes.contains("cleared errors left from before: GLBL_ERR_STAT 0x8"), "{notes}");
    round_trip(&card, &mut eng, 4, 4096, 1, 2);
    drop(eng);
    assert_eq!(r(&*bar, 0x204), 0, "table put back");
    assert_eq!(r(&*bar, 0x24c), 1 << 3, "error enables put back");
}

#[test]
fn performance_counters_count_the_bytes_moved() {
    let card = Card::new(QdmaModelConfig::default());
    let alloc = card.alloc();
    let mut eng = engine(&card, &alloc, queues(4)).unwrap();
    let buf = alloc.alloc(1 << 20).unwrap();
    eng.prepare_batch(&spread(&*buf, H2c, 256, 4096, 4)).unwrap();
    eng.counters_start().unwrap();
    for _ in 0..3 {
        eng.run(LONG).unwrap();
    }
    let c = eng.counters_read().unwrap();
    assert_eq!(c.iter().map(|c| c.dir).collect::<Vec<_>>(), [H2c, C2h]);
    assert_eq!(c[0].beats, 3 * (1 << 20) / 64, "64-byte beats");
    assert!(c[0].cycles > 0);
    assert_eq!(c[1].beats, 0);
}
