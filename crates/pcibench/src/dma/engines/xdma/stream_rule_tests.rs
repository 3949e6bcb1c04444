//! Issue 50 items 1 and 4 on the stricter stream model: the PG195 length rules of AXI4-Stream
//! channels (C2H buffers whole multiples of 64 bytes, H2C descriptors of a packet broken only at
//! a beat) and a channel still busy never reprogrammed. Each test failed on the driver before
//! the fix: its C2H buffers were cut at 4 KiB bus boundaries from the packet's own offset (a
//! 1500-byte packet at offset 3008 gave buffers of 1088 and 412 bytes: invalid_length), its H2C
//! pieces could end mid-beat (the far end got a partial beat inside the packet), and `start`
//! went on after `settle` said the channel was still busy.

use super::stream::XdmaStreamEngine;
use super::tests::{bus, bytes, ch, desc, dev_with, pattern, r, w, Card, LONG};
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::sim::xdma::model::XdmaModelConfig;

const LAST: u32 = 1 | 2 | 1 << 4;

/// A batch of `(host offset, window offset, length)` packets in `dir`.
fn work<'a>(buf: &'a dyn DmaBuffer, dir: Direction, batch: &[(u64, u64, u64)]) -> Vec<Work<'a>> {
    batch
        .iter()
        .map(|&(buf_offset, card_addr, len)| Work { buf, t: Transfer { dir, buf_offset, card_addr, len }, queue: 0 })
        .collect()
}

fn stream_card(stepped: bool) -> (Card, Box<dyn BarRegion>) {
    dev_with(XdmaModelConfig { stepped, stream: true, ..Default::default() })
}

fn engine(dev: &Card, alloc: &dyn DmaAllocator, window: u64) -> XdmaStreamEngine {
    let bar = dev.open_bar(4, Mapping::Uc, IoMode::Mmap).unwrap();
    XdmaStreamEngine::new(bar, alloc, 0, window).unwrap()
}

fn start(bar: &dyn BarRegion, dir: Direction, first: u64, wb: u64) {
    let sg = if dir == Direction::H2c { 0x4000 } else { 0x5000 };
    w(bar, ch(dir, 0x0c), 1);
    w(bar, ch(dir, 0x88), wb as u32);
    w(bar, ch(dir, 0x8c), (wb >> 32) as u32);
    w(bar, sg + 0x80, first as u32);
    w(bar, sg + 0x84, (first >> 32) as u32);
    w(bar, sg + 0x88, 0);
    w(bar, ch(dir, 0x04), super::regs::CONTROL_POLL);
}

/// The model (PG195 "Length Granularity", footnote 1): a C2H stream descriptor whose length is
/// not a multiple of 64 stops the channel with invalid_length and an error writeback; 64 bytes
/// or any multiple of them passes, the packet's last buffer only partly filled.
#[test]
fn item1_model_c2h_stream_buffers_are_multiples_of_64_bytes() {
    let (d, bar) = stream_card(true);
    let alloc = SimAllocator::new(d.host_map().clone());
    let a = |n| alloc.alloc(n).unwrap();
    let (h2c, c2h, src, dst, recs, wb) = (a(4096), a(4096), a(8192), a(8192), a(4096), a(4096));
    pattern(3, &mut bytes(&*src)[..1500]);
    bytes(&*c2h)[..32].copy_from_slice(&desc(LAST, 0, 1000, bus(&*recs, 0), bus(&*dst, 0), 0));
    start(&*bar, Direction::C2h, bus(&*c2h, 0), bus(&*wb, 64));
    let status = r(&*bar, 0x1040);
    assert_ne!(status & 1 << 5, 0, "invalid_length logged: {status:#x}");
    let fault = d.xdma_model().last_fault(Direction::C2h, 0).unwrap();
    assert!(fault.contains("not a multiple of 64") && fault.contains("Length Granularity"), "{fault}");
    // 1536 bytes (24 × 64) for a 1500-byte packet: the record says 1500, EOP.
    bytes(&*c2h)[..32].copy_from_slice(&desc(LAST, 0, 1536, bus(&*recs, 0), bus(&*dst, 0), 0));
    start(&*bar, Direction::C2h, bus(&*c2h, 0), bus(&*wb, 64));
    bytes(&*h2c)[..32].copy_from_slice(&desc(LAST, 0, 1500, bus(&*src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*h2c, 0), bus(&*wb, 0));
    let rec = u32::from_le_bytes(bytes(&*recs)[4..8].try_into().unwrap());
    assert_eq!(rec, 1500);
    assert!(bytes(&*src)[..1500] == bytes(&*dst)[..1500]);
    assert!(d.xdma_model().violations().is_empty(), "{:?}", d.xdma_model().violations());
}

/// The model (PG195 "DMA H2C Stream": no packing across descriptors): an H2C descriptor without
/// EOP that ends mid-beat of the 8-byte datapath puts a partial beat inside the packet; the far
/// end takes the beat whole, so the packet comes back longer, and the model says why.
#[test]
fn item1_model_h2c_stream_descriptors_inside_a_packet_end_on_a_beat() {
    let (d, bar) = stream_card(true);
    let alloc = SimAllocator::new(d.host_map().clone());
    let a = |n| alloc.alloc(n).unwrap();
    let (h2c, c2h, src, dst, recs, wb) = (a(4096), a(4096), a(8192), a(8192), a(4096), a(4096));
    pattern(5, &mut bytes(&*src)[..200]);
    bytes(&*c2h)[..32].copy_from_slice(&desc(LAST, 0, 256, bus(&*recs, 0), bus(&*dst, 0), 0));
    start(&*bar, Direction::C2h, bus(&*c2h, 0), bus(&*wb, 64));
    bytes(&*h2c)[..32].copy_from_slice(&desc(0, 0, 101, bus(&*src, 0), 0, bus(&*h2c, 32)));
    bytes(&*h2c)[32..64].copy_from_slice(&desc(LAST, 0, 99, bus(&*src, 101), 0, 0));
    start(&*bar, Direction::H2c, bus(&*h2c, 0), bus(&*wb, 0));
    let rec = u32::from_le_bytes(bytes(&*recs)[4..8].try_into().unwrap());
    assert_eq!(rec, 203, "101 bytes padded to 13 beats, then 99");
    let v = d.xdma_model().violations();
    assert!(v.len() == 1 && v[0].contains("ends mid-beat"), "{v:?}");
}

/// The driver against both rules on scattered pages (one bus segment per 4 KiB page, in reverse
/// order): a 1500-byte packet at offset 3008 crosses a page 1088 bytes in. Its C2H buffers are
/// 1088 and 448 bytes (a multiple of 64, the record saying 412), its H2C pieces 1088 and 412 (the
/// break a whole beat); a batch of such packets goes out and comes back byte for byte. A packet
/// that cannot be laid out so (a page break 1092 bytes in) is refused in one line, before
/// anything runs.
#[test]
fn item1_packets_on_scattered_pages_follow_the_pg195_length_rules() {
    for stepped in [true, false] {
        let (d, _bar) = stream_card(stepped);
        let scattered = SimAllocator::scattered(d.host_map().clone());
        let mut e = engine(&d, &scattered, 1 << 16);
        let (src, dst) = (scattered.alloc(1 << 15).unwrap(), scattered.alloc(1 << 15).unwrap());
        pattern(9, &mut bytes(&*src)[..1 << 15]);
        let batch = [(3008u64, 3008u64, 1500u64), (8192 + 4032, 8192 + 4032, 100), (16384, 16384, 4097)];
        e.prepare_batch(&work(&*src, Direction::H2c, &batch)).unwrap();
        e.run(LONG).unwrap();
        e.prepare_batch(&work(&*dst, Direction::C2h, &batch)).unwrap();
        e.run(LONG).unwrap();
        for (off, _, len) in batch {
            let r = off as usize..(off + len) as usize;
            assert!(bytes(&*src)[r.clone()] == bytes(&*dst)[r], "packet at {off} (stepped {stepped})");
        }
        assert!(d.xdma_model().violations().is_empty(), "{:?}", d.xdma_model().violations());
        let off = 3004;
        let h2c = Transfer { dir: Direction::H2c, buf_offset: off, card_addr: 0, len: 1500 };
        let err = e.prepare(&*src, &h2c).unwrap_err().to_string();
        assert!(err.contains("not a whole 8-byte beat") && !err.contains('\n'), "{err}");
        let c2h = Transfer { dir: Direction::C2h, buf_offset: off, card_addr: 0, len: 1500 };
        let err = e.prepare(&*dst, &c2h).unwrap_err().to_string();
        assert!(err.contains("not a multiple of 64") && !err.contains('\n'), "{err}");
    }
}

/// Item 4: a stream channel that stays busy after run is cleared is not reprogrammed: the run
/// fails with the memory-mapped path's "still busy ... reset the card" line, and the model (which
/// flags a writeback or descriptor address written to a busy channel) saw no such write.
#[test]
fn item4_a_stream_channel_still_busy_is_not_reprogrammed() {
    let (d, _bar) = stream_card(true);
    let alloc = SimAllocator::new(d.host_map().clone());
    let mut e = engine(&d, &alloc, 1 << 16);
    let buf = alloc.alloc(4096).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 64 }).unwrap();
    d.xdma_model().set_linger(Direction::C2h, 0, u32::MAX).unwrap();
    let err = e.run(LONG).unwrap_err().to_string();
    assert!(err.contains("still busy") && err.contains("reset the card"), "{err}");
    assert!(d.xdma_model().violations().is_empty(), "{:?}", d.xdma_model().violations());
}
