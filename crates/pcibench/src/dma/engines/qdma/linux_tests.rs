//! The sim card's QDMA model driven as Linux's own QDMA driver drives a CPM5 (`drivers/dma/amd/qdma/qdma.c`,
//! `qdma-comm-regs.c`, Linux 6.12), register by register, from what that source writes: one test per
//! disagreement the lab's `vendor_qdma` scenario found between that driver and the model (issue 49). The
//! register offsets and fields are the driver's `qdma_regos_default` and `qdma_regfs_default`.

use super::testkit::*;
use crate::access::{DeviceAccess, IrqKind, IrqRequest};
use crate::dma::{Direction, DmaAllocator, DmaBuffer};
use crate::sim::qdma::model::QdmaModelConfig;
use Direction::{C2h, H2c};

/// `QDMA_DEFAULT_RING_SIZE`: 1024 descriptors and the status slot, global ring-size entry 0.
const RING: u32 = 1025;
/// `QDMA_INTR_RING_SIZE`: an 8 KiB interrupt ring (1024 entries; context size code 1).
const INTR_RING: usize = 8192;

/// What `amd_qdma_probe` writes before any queue: FMAP (queues 0..4 for two channels a direction), the
/// ring-size entry 0, both MM engines running (`qdma_device_setup`), the error interrupt armed on vector 0
/// (`qdma_arm_err_intr`).
fn probe(bar: &dyn crate::access::BarRegion) {
    cmd(bar, 12, 0, 0);
    ctx_write(bar, 12, 0, &[0, 4]);
    w(bar, 0x204, RING);
    w(bar, 0x1004, 1);
    w(bar, 0x1204, 1);
    w(bar, 0xb04, 1 << 24);
}

/// `qdmam_alloc_qintr_rings`: interrupt ring `idx` on MSI-X vector idx + 1, valid, colour 1, its base's 4 KiB
/// page number at [66:15], size code 1 at [69:67].
fn intr_ring(bar: &dyn crate::access::BarRegion, idx: u32, base: u64) {
    let page = base >> 12;
    cmd(bar, 8, 0, idx);
    let w0 = 1 | (idx + 1) << 1 | 1 << 14 | ((page as u32) & 0x1_ffff) << 15;
    ctx_write(bar, 8, idx, &[w0, (page >> 17) as u32, ((page >> 49) as u32 & 7) | 1 << 3]);
}

/// `qdma_alloc_queue_resources`: the queue's contexts cleared (software, hardware, credit, prefetch), then its
/// software context: interrupt armed, enabled, writeback check and interval, 32-byte descriptors on ring 0,
/// writeback and interrupt enabled, marker disabled, memory-mapped, the ring's base, aggregation on ring `vec`.
fn queue(bar: &dyn crate::access::BarRegion, dir: Direction, qid: u32, base: u64, vec: u32) {
    let s = sw_sel(dir);
    for sel in [s, 2 + s, 4 + s, 7] {
        cmd(bar, sel, 0, qid);
    }
    let w1 = 1 | 1 << 2 | 1 << 3 | 2 << 16 | 1 << 20 | 1 << 21 | 1 << 30 | 1 << 31;
    ctx_write(bar, s, qid, &[1 << 16, w1, base as u32, (base >> 32) as u32, vec | 1 << 11]);
}

/// `qdma_hw_enqueue`'s descriptor: source, length, destination, nothing else.
fn linux_desc(src: u64, dst: u64, len: u32) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..8].copy_from_slice(&src.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[16..24].copy_from_slice(&dst.to_le_bytes());
    b
}

fn put(ring: &dyn DmaBuffer, slot: usize, d: [u8; 32]) {
    bytes(ring)[slot * 32..slot * 32 + 32].copy_from_slice(&d);
}

fn status(ring: &dyn DmaBuffer) -> u32 {
    let at = (RING as usize - 1) * 32;
    u32::from_le_bytes(bytes(ring)[at..at + 4].try_into().unwrap())
}

/// PG302 (5.0) "AXI Memory Mapped Descriptor for H2C and C2H": source [63:0], length [91:64], bits [127:92]
/// reserved. Linux's driver writes exactly that (`struct qdma_mm_desc`: `len`, `reserved1`); libqdma sets its
/// own DV/SOP/EOP flags in the reserved bits, which the IP does not need. The model refused a descriptor without
/// DV as invalid, so every transfer of Linux's driver stopped its queue on its first descriptor.
#[test]
fn mm_descriptors_without_the_valid_bit_move_as_linux_amd_qdma_writes_them() {
    let card = Card::new(QdmaModelConfig { misc_cap: CPM5, stepped: true, ..Default::default() });
    let bar = card.bar();
    probe(&*bar);
    let alloc = card.alloc();
    let (ring, src, back) =
        (alloc.alloc(RING as usize * 32).unwrap(), alloc.alloc(8192).unwrap(), alloc.alloc(8192).unwrap());
    pattern(49, bytes(&*src));
    let rb = bus(&*ring, 0);
    // Polled here (no interrupt enable): the finding is the descriptor, not the interrupt.
    for sel in [1, 3, 5, 7] {
        cmd(&*bar, sel, 0, 0);
    }
    let w1 = 1 | 1 << 2 | 1 << 3 | 2 << 16 | 1 << 20 | 1 << 30 | 1 << 31;
    ctx_write(&*bar, 1, 0, &[0, w1, rb as u32, (rb >> 32) as u32]);
    put(&*ring, 0, linux_desc(bus(&*src, 0), 0x1000, 4096));
    put(&*ring, 1, linux_desc(bus(&*src, 4096), 0x2000, 4096));
    w(&*bar, 0x18004, 2);
    assert_eq!(
        status(&*ring) >> 16,
        2,
        "both descriptors completed: {}",
        card.model.last_fault(H2c).unwrap_or_default()
    );
    let mut card_mem = vec![0u8; 8192];
    card.model.card_read(0x1000, &mut card_mem).unwrap();
    assert!(card_mem[..] == bytes(&*src)[..], "the card holds what the descriptors moved");
    // And back, C2H queue 0 on its own ring.
    let ring2 = alloc.alloc(RING as usize * 32).unwrap();
    let rb2 = bus(&*ring2, 0);
    for sel in [0, 2, 4, 7] {
        cmd(&*bar, sel, 0, 0);
    }
    ctx_write(&*bar, 0, 0, &[0, w1, rb2 as u32, (rb2 >> 32) as u32]);
    put(&*ring2, 0, linux_desc(0x1000, bus(&*back, 0), 8192));
    w(&*bar, 0x18008, 1);
    assert_eq!(status(&*ring2) >> 16, 1, "{}", card.model.last_fault(C2h).unwrap_or_default());
    assert!(bytes(&*back)[..] == bytes(&*src)[..]);
    assert_eq!(r(&*bar, 0x248), 0, "no global error");
    let v = card.model.violations();
    assert!(v.is_empty(), "{v:?}");
}

/// An interrupt aggregation ring entry (`union qdma_intr_ring` in libqdma's qdma_intr.h; Linux's
/// `QDMA_INTR_MASK_*`): the queue's producer index [15:0] and consumer index [31:16], the descriptor colour 32,
/// interrupt state [34:33], error [36:35], type 38, queue [62:39], colour 63, all written by the IP. Linux's
/// `qdma_queue_isr` completes `(cidx - its last cidx) & mask` descriptors from the entry's cidx (libqdma reads the
/// queue's status writeback instead); the model wrote the queue and colour only, so Linux's driver saw every entry
/// complete nothing and no transfer ever finished.
#[test]
fn interrupt_ring_entries_carry_the_queues_pidx_and_cidx_linux_amd_qdma_reads() {
    let card = Card::new(QdmaModelConfig { misc_cap: CPM5, stepped: true, ..Default::default() });
    let bar = card.bar();
    probe(&*bar);
    let irq = card.dev.interrupts(IrqRequest::only(IrqKind::MsiX, 3)).unwrap();
    let alloc = card.alloc();
    let intr = alloc.alloc(INTR_RING).unwrap();
    intr_ring(&*bar, 0, bus(&*intr, 0));
    let (h2c_ring, c2h_ring) = (alloc.alloc(RING as usize * 32).unwrap(), alloc.alloc(RING as usize * 32).unwrap());
    let data = alloc.alloc(3 * 4096).unwrap();
    pattern(7, bytes(&*data));
    queue(&*bar, H2c, 1, bus(&*h2c_ring, 0), 0);
    queue(&*bar, C2h, 1, bus(&*c2h_ring, 0), 0);
    // Three descriptors (valid bit set, so only the entry is on trial here), the doorbell with the arm bit.
    for k in 0..3u64 {
        let mut d = linux_desc(bus(&*data, k * 4096), k * 4096, 4096);
        d[11] |= 0x10;
        put(&*h2c_ring, k as usize, d);
    }
    w(&*bar, 0x18000 + 16 + 4, 3 | 1 << 16);
    let entry = |i: usize| u64::from_le_bytes(bytes(&*intr)[i * 8..i * 8 + 8].try_into().unwrap());
    let e = entry(0);
    assert_eq!(e >> 63, 1, "colour 1, the context's: {e:#x}");
    assert_eq!(((e >> 39) & 0xff_ffff, (e >> 38) & 1), (1, 0), "H2C queue 1: {e:#x}");
    assert_eq!((e & 0xffff, (e >> 16) & 0xffff), (3, 3), "the queue's pidx and cidx after its 3 descriptors: {e:#x}");
    // qdma_queue_isr's CIDX update (ring 0, one entry consumed) at the queue's doorbells, then C2H.
    w(&*bar, 0x18000 + 16, 1);
    let mut d = linux_desc(0x1000, bus(&*data, 0), 4096);
    d[11] |= 0x10;
    put(&*c2h_ring, 0, d);
    w(&*bar, 0x18000 + 16 + 8, 1 | 1 << 16);
    let e = entry(1);
    assert_eq!(((e >> 39) & 0xff_ffff, (e >> 38) & 1, e >> 63), (1, 1, 1), "C2H queue 1: {e:#x}");
    assert_eq!((e & 0xffff, (e >> 16) & 0xffff), (1, 1), "{e:#x}");
    w(&*bar, 0x18000 + 16, 2);
    let sent = card.model.irq().sent();
    assert_eq!(sent[..3], [0, 2, 0], "ring 0's vector once an entry, no error interrupt");
    drop(irq);
    let v = card.model.violations();
    assert!(v.is_empty(), "{v:?}");
}
