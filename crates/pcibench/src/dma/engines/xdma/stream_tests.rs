//! Stream mode (issue 40): the sim XDMA's AXI4-Stream channels and loopback example design at
//! register level (hand-made descriptors, stepped: the order of events is the test's), then the
//! stream driver against it. Each test breaks if the stream rule it names is broken.

use super::regs::{C2H_BUF, RESULT_EOP, RESULT_MAGIC};
use super::stream::XdmaStreamEngine;
use super::tests::{bus, bytes, ch, desc, dev_with, pattern, r, w, Card};
use crate::access::{BarRegion, DeviceAccess};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::sim::xdma::model::XdmaModelConfig;
use std::time::Duration;

const STOP: u32 = 1;
const COMPLETED: u32 = 2;
const EOP: u32 = 1 << 4;
const LAST: u32 = STOP | COMPLETED | EOP;
/// Run, poll-mode writeback and the error enables, as the driver writes it.
const CONTROL: u32 = super::regs::CONTROL_POLL;
const FIFO: usize = crate::sim::xdma::stream::FIFO_BYTES;

fn stepped() -> (Card, Box<dyn BarRegion>, SimAllocator) {
    let (dev, bar) = dev_with(XdmaModelConfig { stepped: true, stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    (dev, bar, alloc)
}

/// Start a chain at `first` on channel 0 of `dir`, writeback word at `wb` (no waiting: stepped,
/// the run moves inside the control write as far as the loopback lets it).
fn start(bar: &dyn BarRegion, dir: Direction, first: u64, wb: u64) {
    let sg = if dir == Direction::H2c { 0x4000 } else { 0x5000 };
    w(bar, ch(dir, 0x0c), 1);
    w(bar, ch(dir, 0x88), wb as u32);
    w(bar, ch(dir, 0x8c), (wb >> 32) as u32);
    w(bar, sg + 0x80, first as u32);
    w(bar, sg + 0x84, (first >> 32) as u32);
    w(bar, sg + 0x88, 0);
    w(bar, ch(dir, 0x04), CONTROL);
}

fn put_desc(mem: &dyn DmaBuffer, i: usize, d: [u8; 32]) {
    bytes(mem)[i * 32..i * 32 + 32].copy_from_slice(&d);
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// (status, length) of writeback record `i` at `recs`.
fn record(recs: &dyn DmaBuffer, i: usize) -> (u32, u32) {
    let b = bytes(recs);
    (le32(b, i * 32), le32(b, i * 32 + 4))
}

/// A C2H chain of `lens.len()` buffers in `data` (each `C2H_BUF` apart), records in `recs`.
fn c2h_chain(descs: &dyn DmaBuffer, data: &dyn DmaBuffer, recs: &dyn DmaBuffer, lens: &[u32]) {
    for (i, &len) in lens.iter().enumerate() {
        let last = i + 1 == lens.len();
        let next = if last { 0 } else { bus(descs, (i as u64 + 1) * 32) };
        let rec = bus(recs, i as u64 * 32);
        put_desc(descs, i, desc(if last { LAST } else { 0 }, 0, len, rec, bus(data, i as u64 * C2H_BUF), next));
    }
}

struct Bufs {
    h2c_desc: Box<dyn DmaBuffer>,
    c2h_desc: Box<dyn DmaBuffer>,
    src: Box<dyn DmaBuffer>,
    dst: Box<dyn DmaBuffer>,
    recs: Box<dyn DmaBuffer>,
    wb: Box<dyn DmaBuffer>,
}

fn bufs(alloc: &SimAllocator, data: usize) -> Bufs {
    let a = |n| alloc.alloc(n).unwrap();
    Bufs { h2c_desc: a(4096), c2h_desc: a(4096), src: a(data), dst: a(data), recs: a(4096), wb: a(4096) }
}

impl Bufs {
    fn wb_word(&self, dir: Direction) -> u32 {
        le32(bytes(&*self.wb), if dir == Direction::H2c { 0 } else { 64 })
    }
    fn wb_bus(&self, dir: Direction) -> u64 {
        bus(&*self.wb, if dir == Direction::H2c { 0 } else { 64 })
    }
}

#[test]
fn stream_channels_carry_identifier_bit_15_and_probe_as_stream() {
    let (_d, bar, _a) = stepped();
    for off in [0x0000u64, 0x1000] {
        assert_eq!(r(&*bar, off) & (1 << 15), 1 << 15, "channel identifier at {off:#x}");
    }
    assert_eq!(r(&*bar, 0x4000) & (1 << 15), 0, "SGDMA identifiers say nothing of the interface");
    let info = super::probe(&*bar).unwrap().with_far_end(true);
    assert!(info.h2c.iter().chain(&info.c2h).all(|c| c.interface == super::Interface::Stream));
    assert_eq!(info.far_end.as_deref(), Some("AXI4-Stream loopback example design: h2c 0 -> c2h 0"));
    let (_m, mm) = dev_with(XdmaModelConfig::default());
    assert_eq!(r(&*mm, 0) & (1 << 15), 0, "memory-mapped channels leave bit 15 clear");
}

/// One 10000-byte H2C packet into three 4 KiB C2H buffers: 4096, 4096, then 1808 with EOP (a
/// short last buffer: the packet ended before the buffer did), records with the magic.
#[test]
fn a_packet_spanning_three_c2h_buffers_is_reassembled_by_eop() {
    let (d, bar, alloc) = stepped();
    let b = bufs(&alloc, 3 * C2H_BUF as usize);
    pattern(7, &mut bytes(&*b.src)[..10000]);
    c2h_chain(&*b.c2h_desc, &*b.dst, &*b.recs, &[4096, 4096, 4096]);
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    assert_eq!(r(&*bar, 0x1040) & 1, 1, "C2H waits for data, busy");
    assert_eq!(record(&*b.recs, 0), (0, 0), "nothing received yet");
    put_desc(&*b.h2c_desc, 0, desc(LAST, 0, 10000, bus(&*b.src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    let magic = RESULT_MAGIC << 16;
    assert_eq!(record(&*b.recs, 0), (magic, 4096));
    assert_eq!(record(&*b.recs, 1), (magic, 4096), "no EOP before the packet's last buffer");
    assert_eq!(record(&*b.recs, 2), (magic | RESULT_EOP, 1808), "EOP and the short length in the last");
    assert_eq!(b.wb_word(Direction::H2c), 1);
    assert_eq!(b.wb_word(Direction::C2h), 3, "all three C2H descriptors completed");
    assert_eq!(r(&*bar, 0x1040) & 1, 0, "C2H stopped on its STOP descriptor");
    let (s, t) = (&bytes(&*b.src)[..10000], &bytes(&*b.dst)[..10000]);
    assert!(s == t, "the packet came back byte for byte");
    assert!(d.xdma_model().violations().is_empty(), "{:?}", d.xdma_model().violations());
}

/// Two packets (100 and 200 bytes, EOP on each) land in two buffers: the second packet starts in
/// a fresh buffer, never after the first in the same one.
#[test]
fn each_packet_starts_in_a_new_buffer_and_short_packets_say_their_length() {
    let (_d, bar, alloc) = stepped();
    let b = bufs(&alloc, 2 * C2H_BUF as usize);
    pattern(3, &mut bytes(&*b.src)[..300]);
    put_desc(&*b.h2c_desc, 0, desc(EOP, 0, 100, bus(&*b.src, 0), 0, bus(&*b.h2c_desc, 32)));
    put_desc(&*b.h2c_desc, 1, desc(LAST, 0, 200, bus(&*b.src, 100), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    assert_eq!(b.wb_word(Direction::H2c), 2, "300 bytes fit the FIFO: H2C completes alone");
    c2h_chain(&*b.c2h_desc, &*b.dst, &*b.recs, &[4096, 4096]);
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    let eop = RESULT_MAGIC << 16 | RESULT_EOP;
    assert_eq!((record(&*b.recs, 0), record(&*b.recs, 1)), ((eop, 100), (eop, 200)));
    let (src, dst) = (bytes(&*b.src), bytes(&*b.dst));
    assert!(dst[..100] == src[..100] && dst[4096..4296] == src[100..300]);
}

/// With no C2H buffer posted the loopback fills and H2C stalls (busy, nothing completed, nothing
/// dropped); posting buffers drains it and both finish with every byte.
#[test]
fn h2c_stalls_without_c2h_buffers_and_resumes_when_they_come() {
    let (d, bar, alloc) = stepped();
    let len = 10 * C2H_BUF as usize;
    assert!(len > FIFO);
    let b = bufs(&alloc, len);
    pattern(11, &mut bytes(&*b.src)[..len]);
    put_desc(&*b.h2c_desc, 0, desc(LAST, 0, len as u32, bus(&*b.src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    let model = d.xdma_model();
    assert_eq!(r(&*bar, 0x0040) & 1, 1, "H2C busy: back-pressure");
    assert_eq!((r(&*bar, 0x0048), b.wb_word(Direction::H2c)), (0, 0), "no descriptor completed");
    assert_eq!(model.loopback_queued(0), Some(FIFO), "the FIFO is full and holds on to its bytes");
    model.pump(0);
    assert_eq!(model.loopback_queued(0), Some(FIFO), "no progress without C2H buffers");
    c2h_chain(&*b.c2h_desc, &*b.dst, &*b.recs, &[C2H_BUF as u32; 10]);
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    assert_eq!((b.wb_word(Direction::H2c), b.wb_word(Direction::C2h)), (1, 10));
    assert_eq!(model.loopback_queued(0), Some(0));
    assert!(bytes(&*b.src)[..len] == bytes(&*b.dst)[..len]);
    assert_eq!(record(&*b.recs, 9), (RESULT_MAGIC << 16 | RESULT_EOP, C2H_BUF as u32));
}

/// A zero-length packet cannot be sent: an H2C descriptor of length 0 stops the engine with
/// invalid_length and an error writeback (bit 31), and nothing reaches C2H.
#[test]
fn a_zero_length_packet_is_an_invalid_length_error_writeback() {
    let (d, bar, alloc) = stepped();
    let b = bufs(&alloc, 4096);
    c2h_chain(&*b.c2h_desc, &*b.dst, &*b.recs, &[4096]);
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    put_desc(&*b.h2c_desc, 0, desc(LAST, 0, 0, bus(&*b.src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    let status = r(&*bar, 0x0040);
    assert_eq!(status & 1, 0, "H2C stopped");
    assert_ne!(status & (1 << 5), 0, "invalid_length logged: {status:#x}");
    assert_eq!(b.wb_word(Direction::H2c), 1 << 31, "error writeback, no descriptor completed");
    assert!(d.xdma_model().last_fault(Direction::H2c, 0).unwrap().contains("length 0x0"));
    assert_eq!(record(&*b.recs, 0), (0, 0), "C2H got nothing");
    assert_eq!(r(&*bar, 0x1040) & 1, 1, "C2H still waits");
    w(&*bar, ch(Direction::C2h, 0x0c), 1);
    assert_eq!(r(&*bar, 0x1040) & 1, 0, "a waiting C2H stops at once when run is cleared");
}

/// A C2H writeback record the engine cannot write (an unmapped address) stops C2H with a
/// write error and an error writeback.
#[test]
fn an_unwritable_record_is_a_c2h_write_error() {
    let (_d, bar, alloc) = stepped();
    let b = bufs(&alloc, 4096);
    put_desc(&*b.c2h_desc, 0, desc(LAST, 0, 4096, 0x10, bus(&*b.dst, 0), 0));
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    put_desc(&*b.h2c_desc, 0, desc(LAST, 0, 64, bus(&*b.src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    let status = r(&*bar, 0x1040);
    assert_eq!(status & 1, 0);
    assert_ne!(status & (1 << 14), 0, "write_error logged: {status:#x}");
    assert_eq!(b.wb_word(Direction::C2h), 1 << 31);
}

/// An H2C chain that stops without EOP leaves its packet open: the model flags it.
#[test]
fn a_chain_ending_without_eop_is_flagged() {
    let (d, bar, alloc) = stepped();
    let b = bufs(&alloc, 4096);
    put_desc(&*b.h2c_desc, 0, desc(STOP | COMPLETED, 0, 64, bus(&*b.src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    let v = d.xdma_model().violations();
    assert!(v.len() == 1 && v[0].contains("without EOP"), "{v:?}");
}

/// A record address off the 32-byte grid the vendor lays records on: written, and flagged.
#[test]
fn a_misaligned_record_address_is_flagged() {
    let (d, bar, alloc) = stepped();
    let b = bufs(&alloc, 4096);
    put_desc(&*b.c2h_desc, 0, desc(LAST, 0, 4096, bus(&*b.recs, 8), bus(&*b.dst, 0), 0));
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    put_desc(&*b.h2c_desc, 0, desc(LAST, 0, 64, bus(&*b.src, 0), 0, 0));
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    assert_eq!(le32(bytes(&*b.recs), 12), 64, "the record is written where the descriptor says");
    let v = d.xdma_model().violations();
    assert!(v.len() == 1 && v[0].contains("not 32-byte aligned"), "{v:?}");
}

fn engine(dev: &Card, alloc: &SimAllocator, window: u64) -> XdmaStreamEngine {
    let bar = dev.open_bar(4, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    XdmaStreamEngine::new(bar, alloc, 0, window).unwrap()
}

/// The driver against both model modes: h2c sends the caller's buffer and receives into the
/// window; c2h sends the window back into another buffer; the bytes survive both trips, for a
/// one-buffer packet, a many-buffer one and one larger than the loopback's FIFO.
#[test]
fn the_driver_sends_and_receives_packets_through_the_loopback() {
    for stepped in [true, false] {
        let (dev, _bar) = dev_with(XdmaModelConfig { stepped, stream: true, ..Default::default() });
        let alloc = SimAllocator::new(dev.host_map().clone());
        let mut e = engine(&dev, &alloc, 1 << 20);
        let (src, dst) = (alloc.alloc(1 << 17).unwrap(), alloc.alloc(1 << 17).unwrap());
        for len in [64u64, 1, 4097, 100_000] {
            pattern(len, &mut bytes(&*src)[..len as usize]);
            bytes(&*dst).fill(0);
            e.prepare(&*src, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0x40, len }).unwrap();
            e.run(super::tests::LONG).unwrap();
            e.prepare(&*dst, &Transfer { dir: Direction::C2h, buf_offset: 0, card_addr: 0x40, len }).unwrap();
            e.run(super::tests::LONG).unwrap();
            let n = len as usize;
            assert!(bytes(&*src)[..n] == bytes(&*dst)[..n], "{len} bytes (stepped {stepped})");
            assert!(dev.xdma_model().violations().is_empty(), "{:?}", dev.xdma_model().violations());
        }
        assert!(e.packets());
    }
}

/// Opening the stream pair puts it in poll mode as the memory-mapped driver does: the vendor's
/// error-only interrupt mask on both channels, their IRQ-block enables cleared.
#[test]
fn opening_a_stream_pair_sets_poll_mode() {
    let (dev, bar) = dev_with(XdmaModelConfig { stepped: true, stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    w(&*bar, 0x2014, 0x3);
    assert_eq!(r(&*bar, 0x2010), 0x3);
    let _e = engine(&dev, &alloc, 1 << 16);
    assert_eq!(r(&*bar, 0x2010), 0, "channel interrupt enables cleared");
    for off in [0x0090, 0x1090] {
        assert_eq!(r(&*bar, off), super::regs::IE_MASK_POLL, "interrupt enable mask at {off:#x}");
    }
}

/// A loopback that returns nothing (C2H stalled) fails the run within its timeout, the engine
/// stopped, and the error names what the writeback records said.
#[test]
fn nothing_coming_back_fails_the_run_with_the_records() {
    let (dev, _bar) = dev_with(XdmaModelConfig { stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut e = engine(&dev, &alloc, 1 << 16);
    let buf = alloc.alloc(4096).unwrap();
    dev.xdma_model().set_stalled(Direction::C2h, 0, true).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 4096 }).unwrap();
    let err = e.run(Duration::from_millis(50)).unwrap_err().to_string();
    assert!(err.contains("loopback example design"), "{err}");
    assert!(err.contains("C2H writeback records: #0 not written"), "{err}");
    assert!(!dev.xdma_model().busy(Direction::C2h, 0).unwrap(), "the engine was stopped");
}

/// Records that do not match what was sent fail the run, naming the record: wrong magic, EOP
/// missing, a length short of the buffer.
#[test]
fn records_are_checked_for_magic_eop_and_length() {
    let (dev, _bar) = dev_with(XdmaModelConfig { stepped: true, stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut e = engine(&dev, &alloc, 1 << 16);
    let buf = alloc.alloc(8192).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 8192 }).unwrap();
    e.run(super::tests::LONG).unwrap();
    e.check_records().unwrap();
    let magic = RESULT_MAGIC << 16;
    for (rec, status, len, words) in [
        (0, 0x1234 << 16, 4096, "magic 0x1234"),
        (1, magic, 4096, "no EOP on the packet's last buffer"),
        (0, magic | RESULT_EOP, 4096, "EOP after 4096 bytes"),
        (0, magic, 4000, "length 4000 in a 4096-byte buffer"),
    ] {
        e.run(super::tests::LONG).unwrap();
        let m = e.records_mem();
        bytes(m)[rec * 32..rec * 32 + 4].copy_from_slice(&u32::to_le_bytes(status));
        bytes(m)[rec * 32 + 4..rec * 32 + 8].copy_from_slice(&u32::to_le_bytes(len));
        let err = e.check_records().unwrap_err().to_string();
        assert!(err.contains(&format!("record {rec} of 2 has {words}")), "{err}");
    }
}

/// A C2H chain of buffers `from..from + n` of `data` (each `C2H_BUF` apart, records beside them
/// in `recs`), its descriptors from slot `from` of `descs`, STOP on its last.
fn c2h_buffers(descs: &dyn DmaBuffer, data: &dyn DmaBuffer, recs: &dyn DmaBuffer, from: usize, n: usize) {
    for i in from..from + n {
        let last = i + 1 == from + n;
        let next = if last { 0 } else { bus(descs, (i as u64 + 1) * 32) };
        let (rec, dst) = (bus(recs, i as u64 * 32), bus(data, i as u64 * C2H_BUF));
        put_desc(descs, i, desc(if last { LAST } else { 0 }, 0, C2H_BUF as u32, rec, dst, next));
    }
}

/// One H2C chain of eight 4 KiB packets (EOP on each) against two posted C2H buffers: the first
/// two packets land, the FIFO fills with the next four and H2C stalls mid-chain (busy, six
/// descriptors completed, nothing dropped); posting the other six buffers lets the rest through,
/// every packet in its own buffer with an EOP record.
#[test]
fn a_multi_packet_chain_is_back_pressured_mid_batch_and_resumes() {
    let (d, bar, alloc) = stepped();
    let (packets, len) = (8usize, C2H_BUF as usize);
    assert_eq!(FIFO / len, 4, "the FIFO holds four of these packets");
    let b = bufs(&alloc, packets * len);
    pattern(21, &mut bytes(&*b.src)[..packets * len]);
    c2h_buffers(&*b.c2h_desc, &*b.dst, &*b.recs, 0, 2);
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 0), b.wb_bus(Direction::C2h));
    for i in 0..packets {
        let last = i + 1 == packets;
        let next = if last { 0 } else { bus(&*b.h2c_desc, (i as u64 + 1) * 32) };
        let src = bus(&*b.src, (i * len) as u64);
        put_desc(&*b.h2c_desc, i, desc(if last { LAST } else { EOP }, 0, len as u32, src, 0, next));
    }
    start(&*bar, Direction::H2c, bus(&*b.h2c_desc, 0), b.wb_bus(Direction::H2c));
    let model = d.xdma_model();
    assert_eq!(b.wb_word(Direction::C2h), 2, "the two posted buffers took packets 0 and 1");
    assert_eq!(r(&*bar, 0x0040) & 1, 1, "H2C busy: back-pressure in the middle of its chain");
    assert_eq!(r(&*bar, 0x0048), 6, "packets 0..5 left H2C; 6 and 7 wait");
    assert_eq!(model.loopback_queued(0), Some(FIFO), "packets 2..5 fill the FIFO");
    model.pump(0);
    assert_eq!(r(&*bar, 0x0048), 6, "no progress without C2H buffers");
    c2h_buffers(&*b.c2h_desc, &*b.dst, &*b.recs, 2, 6);
    start(&*bar, Direction::C2h, bus(&*b.c2h_desc, 2 * 32), b.wb_bus(Direction::C2h));
    assert_eq!((b.wb_word(Direction::H2c), b.wb_word(Direction::C2h)), (8, 6));
    assert_eq!(model.loopback_queued(0), Some(0));
    for i in 0..packets {
        assert_eq!(record(&*b.recs, i), (RESULT_MAGIC << 16 | RESULT_EOP, len as u32), "packet {i}'s record");
    }
    assert!(bytes(&*b.src)[..packets * len] == bytes(&*b.dst)[..packets * len], "every packet, in order");
    assert!(d.xdma_model().violations().is_empty(), "{:?}", d.xdma_model().violations());
}

fn work<'a>(buf: &'a dyn DmaBuffer, dir: Direction, packets: &[(u64, u64, u64)]) -> Vec<crate::dma::Work<'a>> {
    packets
        .iter()
        .map(|&(buf_offset, card_addr, len)| crate::dma::Work {
            buf,
            t: Transfer { dir, buf_offset, card_addr, len },
            queue: 0,
        })
        .collect()
}

/// Packets of one batch: a short one, one spanning two C2H buffers (5000 bytes from offset 100),
/// a 1-byte one and one larger than the FIFO; each `(host offset, window offset, length)`.
const BATCH: [(u64, u64, u64); 4] = [(0, 0, 64), (100, 64, 5000), (6000, 6000, 1), (8192, 8192, 40_000)];

/// The driver moves a whole batch in one run: one H2C chain (EOP per packet), one C2H chain (each
/// packet in its own buffers), one start of each channel; the window then holds every packet
/// and a c2h batch brings them all back byte for byte. Both model modes.
#[test]
fn a_batch_of_packets_moves_in_one_run_and_every_packet_comes_back() {
    for stepped in [true, false] {
        let (dev, bar) = dev_with(XdmaModelConfig { stepped, stream: true, ..Default::default() });
        let alloc = SimAllocator::new(dev.host_map().clone());
        let mut e = engine(&dev, &alloc, 1 << 20);
        assert!(e.max_batch() >= BATCH.len());
        let (src, dst) = (alloc.alloc(1 << 16).unwrap(), alloc.alloc(1 << 16).unwrap());
        pattern(5, &mut bytes(&*src)[..1 << 16]);
        e.prepare_batch(&work(&*src, Direction::H2c, &BATCH)).unwrap();
        e.run(super::tests::LONG).unwrap();
        // Poll-mode writebacks count whole chains: every piece of every packet on H2C, and on
        // C2H one buffer for 64 B, two for the 5000 B packet, one for 1 B, ten for 40000 B.
        assert_eq!(r(&*bar, 0x1048), 1 + 2 + 1 + 10, "C2H buffers completed (stepped {stepped})");
        e.prepare_batch(&work(&*dst, Direction::C2h, &BATCH)).unwrap();
        e.run(super::tests::LONG).unwrap();
        for (off, _, len) in BATCH {
            let r = off as usize..(off + len) as usize;
            assert!(bytes(&*src)[r.clone()] == bytes(&*dst)[r], "packet at {off} (stepped {stepped})");
        }
        assert!(dev.xdma_model().violations().is_empty(), "{:?}", dev.xdma_model().violations());
    }
}

/// `--dir bidir`: h2c and c2h packets in one batch, through the one loopback, each landing where
/// its direction says.
#[test]
fn a_batch_mixes_directions() {
    let (dev, _bar) = dev_with(XdmaModelConfig { stepped: true, stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut e = engine(&dev, &alloc, 1 << 16);
    let (src, dst, back) = (alloc.alloc(8192).unwrap(), alloc.alloc(8192).unwrap(), alloc.alloc(8192).unwrap());
    pattern(9, &mut bytes(&*src)[..8192]);
    // Seed window bytes 0..4096, then send 4096 more to 4096.. while reading 0..4096 back.
    e.prepare(&*src, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 4096 }).unwrap();
    e.run(super::tests::LONG).unwrap();
    let mut mixed = work(&*src, Direction::H2c, &[(4096, 4096, 4096)]);
    mixed.extend(work(&*dst, Direction::C2h, &[(0, 0, 4096)]));
    e.prepare_batch(&mixed).unwrap();
    e.run(super::tests::LONG).unwrap();
    assert!(bytes(&*dst)[..4096] == bytes(&*src)[..4096], "the c2h packet read the window");
    e.prepare(&*back, &Transfer { dir: Direction::C2h, buf_offset: 0, card_addr: 4096, len: 4096 }).unwrap();
    e.run(super::tests::LONG).unwrap();
    assert!(bytes(&*back)[..4096] == bytes(&*src)[4096..], "the h2c packet reached the window");
}

/// A bad record in one packet of a batch fails the run naming that packet, its record and what
/// is wrong with it; an empty or oversized batch is refused in one line.
#[test]
fn a_bad_record_names_its_packet_in_the_batch() {
    let (dev, _bar) = dev_with(XdmaModelConfig { stepped: true, stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut e = engine(&dev, &alloc, 1 << 20);
    let buf = alloc.alloc(1 << 16).unwrap();
    e.prepare_batch(&work(&*buf, Direction::H2c, &BATCH)).unwrap();
    e.run(super::tests::LONG).unwrap();
    // Record 2 is the 5000-byte packet's second buffer (its EOP): clear EOP there.
    bytes(e.records_mem())[2 * 32..2 * 32 + 4].copy_from_slice(&u32::to_le_bytes(RESULT_MAGIC << 16));
    let err = e.check_records().unwrap_err().to_string();
    assert!(err.contains("packet 1 of 4: writeback record 2 of 14 has no EOP on the packet's last buffer"), "{err}");
    assert!(err.contains("the 5000-byte packet"), "{err}");
    assert!(e.prepare_batch(&[]).unwrap_err().to_string().contains("1 to 2048 packets"));
    let many = vec![(0u64, 0u64, 1u64); super::stream::MAX_BATCH + 1];
    assert!(e.prepare_batch(&work(&*buf, Direction::H2c, &many)).is_err());
}
