//! The sim card's QDMA model at register level, driven by hand as the vendor's access code does
//! it: identifiers, the indirect context registers and their busy bit, hand-made rings and
//! doorbells, status writeback, and every error the model logs.

use super::testkit::*;
use super::{self as qdma, SwCtx};
use crate::access::BarRegion;
use crate::access::DeviceAccess;
use crate::dma::{Direction, DmaAllocator};
use crate::sim::qdma::model::{QdmaModelConfig, CARD_MEMORY_SIZE};
use Direction::{C2h, H2c};

fn cmd(bar: &dyn BarRegion, sel: u32, op: u32, id: u32) {
    w(bar, 0x844, sel << 1 | op << 5 | id << 7);
    until("the context command", || r(bar, 0x844) & 1 == 0);
}

fn ctx_write(bar: &dyn BarRegion, sel: u32, id: u32, words: &[u32]) {
    for i in 0..8 {
        w(bar, 0x804 + 4 * i as u64, words.get(i).copied().unwrap_or(0));
        w(bar, 0x824 + 4 * i as u64, u32::MAX);
    }
    cmd(bar, sel, 1, id);
}

fn ctx_read(bar: &dyn BarRegion, sel: u32, id: u32) -> [u32; 8] {
    cmd(bar, sel, 2, id);
    std::array::from_fn(|i| r(bar, 0x804 + 4 * i as u64))
}

fn sw_sel(dir: Direction) -> u32 {
    if dir == H2c {
        1
    } else {
        0
    }
}

/// FMAP for function 0 (queues 0..n), every error logged, both MM engines running.
fn take(bar: &dyn BarRegion, n: u32) {
    ctx_write(bar, 12, 0, &[0, n]);
    w(bar, 0x24c, u32::MAX);
    w(bar, 0x258, u32::MAX);
    w(bar, 0x268, u32::MAX);
    w(bar, 0x1054, u32::MAX);
    w(bar, 0x1254, u32::MAX);
    w(bar, 0x1004, 1);
    w(bar, 0x1204, 1);
}

/// Start queue `qid` with a ring of 64 descriptors (table index 1: 65 entries) at `ring`.
fn start(bar: &dyn BarRegion, dir: Direction, qid: u32, ring: u64) {
    for sel in [sw_sel(dir), 2 + sw_sel(dir), 4 + sw_sel(dir)] {
        cmd(bar, sel, 0, qid);
    }
    let sw = SwCtx {
        enabled: true,
        wbi_chk: true,
        wbi_intvl: true,
        fetch_max: 7,
        ring_idx: 1,
        desc_size: 2,
        writeback: true,
        is_mm: true,
        ring_base: ring,
        ..Default::default()
    };
    ctx_write(bar, sw_sel(dir), qid, &sw.words());
}

fn desc(src: u64, dst: u64, len: u32, dv: bool) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..8].copy_from_slice(&src.to_le_bytes());
    b[8..12].copy_from_slice(&(len | if dv { 1 << 28 } else { 0 } | 3 << 29).to_le_bytes());
    b[16..24].copy_from_slice(&dst.to_le_bytes());
    b
}

fn ring_doorbell(bar: &dyn BarRegion, dir: Direction, q: u64, pidx: u32) {
    w(bar, 0x18000 + 16 * q + if dir == H2c { 4 } else { 8 }, pidx);
}

/// The status writeback word of a 64-descriptor ring: (pidx, cidx).
fn status(ring: &dyn crate::dma::DmaBuffer) -> (u32, u32) {
    let v = u32::from_le_bytes(bytes(ring)[64 * 32..64 * 32 + 4].try_into().unwrap());
    (v & 0xffff, v >> 16)
}

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
        let t: crate::target::Target = name.parse().unwrap();
        let info = crate::target::describe(&host, &t).unwrap();
        let dev = crate::target::open(&host, &t, &info, None).unwrap();
        let found: Vec<&str> =
            super::super::detect(&info, dev.as_ref()).into_iter().flatten().map(|d| d.engine).collect();
        assert_eq!(found, [engine], "{name}");
    }
}

#[test]
fn context_commands_are_busy_then_done_and_bad_ones_are_logged() {
    let card = Card::new(QdmaModelConfig { ctxt_busy_reads: 3, max_queues: 16, ..Default::default() });
    let bar = &*card.bar();
    w(bar, 0x24c, 1 << 9);
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
    assert_eq!(r(bar, 0x248), 0, "no command errors so far");
    // Writing while busy is dropped and flagged; so are a queue past the IP's and a bad select.
    w(bar, 0x844, 1 << 1 | 2 << 5 | 5 << 7);
    w(bar, 0x804, 0xdead);
    assert_eq!(r(bar, 0x248), 1 << 9);
    until("busy", || r(bar, 0x844) & 1 == 0);
    w(bar, 0x248, 1 << 9);
    cmd(bar, 1, 2, 16);
    assert_eq!(r(bar, 0x248), 1 << 9, "queue 16 of 16");
    w(bar, 0x248, 1 << 9);
    cmd(bar, 14, 2, 0);
    assert_eq!(r(bar, 0x248), 1 << 9, "select 14");
    w(bar, 0x248, 1 << 9);
    cmd(bar, 12, 3, 0);
    assert_eq!(r(bar, 0x248), 1 << 9, "FMAP cannot be invalidated");
    // Clear, and the FMAP of this function.
    cmd(bar, 1, 0, 5);
    assert_eq!(ctx_read(bar, 1, 5), [0; 8]);
    ctx_write(bar, 12, 0, &[4, 8]);
    assert_eq!(card.model.fmap(), (4, 8));
    // A stuck context RAM never clears busy.
    card.model.set_context_stuck(true);
    w(bar, 0x844, 12 << 1 | 2 << 5);
    assert!((0..100).all(|_| r(bar, 0x844) & 1 == 1));
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
    until("status writeback", || status(&*ring) == (3, 3));
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
    until("status writeback", || status(&*ring2) == (1, 1));
    assert!(bytes(&*back)[..4000] == bytes(&*data)[100..4100]);
    assert_eq!(r(bar, 0x248), 0, "no errors");
}

/// One hand-made descriptor on queue 0 of `dir`; returns (GLBL_ERR_STAT, DSC_ERR_STS, MM error
/// code of `dir`, software context error field, the model's words).
fn bad(dir: Direction, d: impl Fn(u64, u64) -> [u8; 32], ring_at: Option<u64>) -> (u32, u32, u32, u32, String) {
    let card = Card::new(QdmaModelConfig::default());
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    take(bar, 1);
    start(bar, dir, 0, ring_at.unwrap_or(bus(&*ring, 0)));
    bytes(&*ring)[..32].copy_from_slice(&d(bus(&*data, 0), 0));
    ring_doorbell(bar, dir, 0, 1);
    until("the queue to stop", || card.model.last_fault(dir).is_some());
    let mm = if dir == H2c { 0x1258 } else { 0x1058 };
    let (sw, _) = card.model.contexts(dir, 0).unwrap();
    let fault = card.model.last_fault(dir).unwrap();
    // A stopped queue ignores further doorbells.
    ring_doorbell(bar, dir, 0, 2);
    (r(bar, 0x248), r(bar, 0x254), r(bar, mm), (sw[1] >> 26) & 3, fault)
}

#[test]
fn bad_descriptors_are_logged_and_stop_the_queue() {
    let unmapped = 0x1000u64; // page 1: never a registered buffer
    type MakeDesc = Box<dyn Fn(u64, u64) -> [u8; 32]>;
    type Case = (&'static str, Direction, MakeDesc, (u32, u32, u32, u32), &'static str);
    let cases: [Case; 7] = [
        ("DV clear", H2c, Box::new(|h, c| desc(h, c, 64, false)), (1 << 2, 1 << 21, 0, 1), "DV"),
        ("zero length", C2h, Box::new(|h, c| desc(c, h, 0, true)), (1 << 2, 1 << 2, 0, 1), "length is 0"),
        (
            "host source unmapped",
            H2c,
            Box::new(move |_, c| desc(unmapped, c, 64, true)),
            (1 << 4, 0, 1 << 17 | 2, 2),
            "host read failed",
        ),
        (
            "card past the end",
            H2c,
            Box::new(|h, _| desc(h, CARD_MEMORY_SIZE - 8, 64, true)),
            (1 << 4, 0, 1 << 17 | 1 << 16 | 28, 2),
            "past card memory",
        ),
        (
            "card read past the end",
            C2h,
            Box::new(|h, _| desc(CARD_MEMORY_SIZE, h, 8, true)),
            (1 << 6, 0, 1 << 17 | 1, 2),
            "past card memory",
        ),
        (
            "host destination unmapped",
            C2h,
            Box::new(move |_, c| desc(c, unmapped, 8, true)),
            (1 << 6, 0, 1 << 17 | 1 << 16 | 29, 2),
            "host write failed",
        ),
        (
            "descriptor unreachable",
            H2c,
            Box::new(|h, c| desc(h, c, 8, true)),
            (1 << 2, 1 << 1, 0, 1),
            "descriptor fetch failed",
        ),
    ];
    for (i, (name, dir, d, want, words)) in cases.into_iter().enumerate() {
        let ring_at = (i == 6).then_some(unmapped);
        let (glbl, dsc, code, field, fault) = bad(dir, d, ring_at);
        assert_eq!((glbl, dsc, code, field), want, "{name}: {fault}");
        assert!(fault.contains(words), "{name}: {fault}");
    }
}

#[test]
fn errors_log_only_where_enabled_and_doorbells_respect_the_fmap() {
    let card = Card::new(QdmaModelConfig::default());
    let bar = &*card.bar();
    let alloc = card.alloc();
    let ring = alloc.alloc(4096).unwrap();
    ctx_write(bar, 12, 0, &[0, 2]);
    w(bar, 0x1204, 1);
    start(bar, H2c, 0, bus(&*ring, 0));
    ring_doorbell(bar, H2c, 0, 1); // slot 0 is zeros: DV clear
    until("the queue to stop", || card.model.last_fault(H2c).is_some());
    assert_eq!((r(bar, 0x248), r(bar, 0x254)), (0, 0), "nothing logged without the enables");
    // A doorbell for queue 2 of a function that owns 2 queues is a target-access error.
    w(bar, 0x24c, 1 << 3);
    w(bar, 0x268, 0xf);
    ring_doorbell(bar, H2c, 2, 1);
    assert_eq!((r(bar, 0x248), r(bar, 0x264), r(bar, 0x26c)), (1 << 3, 1 << 1, 0x18024));
    w(bar, 0x264, 1 << 1);
    w(bar, 0x248, 1 << 3);
    assert_eq!((r(bar, 0x248), r(bar, 0x264)), (0, 0), "write 1 to clear");
}

#[test]
fn a_doorbell_rung_before_its_descriptors_fetches_stale_ones() {
    // With fetch_on_doorbell the engine reads the ring when the doorbell is written, so ringing
    // first and writing the descriptor after is caught (DV clear in a fresh ring).
    let card = Card::new(QdmaModelConfig { fetch_on_doorbell: true, ..Default::default() });
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    take(bar, 1);
    start(bar, H2c, 0, bus(&*ring, 0));
    ring_doorbell(bar, H2c, 0, 1);
    bytes(&*ring)[..32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    until("the queue to stop", || card.model.last_fault(H2c).is_some());
    assert_eq!(r(bar, 0x254), 1 << 21, "{:?}", card.model.last_fault(H2c));
    // In order (descriptor, then doorbell) the same ring works.
    start(bar, H2c, 0, bus(&*ring, 0));
    bytes(&*ring)[..32].copy_from_slice(&desc(bus(&*data, 0), 0, 64, true));
    ring_doorbell(bar, H2c, 0, 1);
    until("status writeback", || status(&*ring) == (1, 1));
}
