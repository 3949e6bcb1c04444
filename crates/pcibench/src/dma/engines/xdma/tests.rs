//! Tests of the sim card's XDMA model at register level (hand-made descriptors, every error
//! path) and of the XDMA driver against it (full H2C then C2H round trips, verified byte by byte).

use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::xdma::{self, Interface, XdmaEngine, XdmaOptions};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::mmio::Width;
use crate::sim::xdma::card::SIM_DMA_BAR;
use crate::sim::xdma::model::{XdmaModel, XdmaModelConfig, CARD_MEMORY_SIZE};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const LONG: Duration = Duration::from_secs(20);
/// Control: run, every ie_* status enable, poll-mode writeback.
pub(super) const CTRL_ALL: u32 = 1 | 0x7e | 0x1f << 9 | 0x1f << 14 | 0x1f << 19 | 1 << 26;

/// The sim card opened with a custom XDMA model, keeping the model for direct card-memory checks.
pub(crate) struct Card {
    dev: SimDevice,
    model: Arc<XdmaModel>,
}

impl Card {
    fn with_xdma(cfg: XdmaModelConfig) -> crate::Result<Card> {
        Card::with_xdma_on(cfg, crate::sim::datapath::ModelClock::real())
    }

    /// The card on `clock`'s time (a fake clock: the engine moves only as the test advances it).
    pub(crate) fn with_xdma_on(cfg: XdmaModelConfig, clock: crate::sim::datapath::ModelClock) -> crate::Result<Card> {
        let (card, model) = crate::sim::xdma::card::build_with(cfg, crate::sim::host_map::HostMap::new(), clock)?;
        let dev = SimDevice::from_card("sim", &crate::sim::CardSpec::info(&crate::sim::xdma::card::XdmaCard), card);
        Ok(Card { dev, model })
    }

    pub(crate) fn xdma_model(&self) -> &XdmaModel {
        &self.model
    }
}

impl std::ops::Deref for Card {
    type Target = SimDevice;
    fn deref(&self) -> &SimDevice {
        &self.dev
    }
}

pub(crate) fn dev_with(cfg: XdmaModelConfig) -> (Card, Box<dyn BarRegion>) {
    let dev = Card::with_xdma(cfg).unwrap();
    crate::access::set_bus_master(&dev.dev, true).unwrap();
    let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    (dev, bar)
}

pub(super) fn dev() -> (Card, Box<dyn BarRegion>) {
    dev_with(XdmaModelConfig::default())
}

pub(crate) fn r(bar: &dyn BarRegion, off: u64) -> u32 {
    bar.read(off, Width::B32).unwrap() as u32
}

pub(crate) fn w(bar: &dyn BarRegion, off: u64, v: u32) {
    bar.write(off, Width::B32, v as u64).unwrap()
}

pub(crate) fn desc(ctrl: u32, adj: u32, len: u32, src: u64, dst: u64, next: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..4].copy_from_slice(&(0xad4b_0000 | adj << 8 | ctrl).to_le_bytes());
    b[4..8].copy_from_slice(&len.to_le_bytes());
    b[8..16].copy_from_slice(&src.to_le_bytes());
    b[16..24].copy_from_slice(&dst.to_le_bytes());
    b[24..32].copy_from_slice(&next.to_le_bytes());
    b
}

// DMA buffers are shared with the device by nature: a mutable view from a shared handle is the
// point (the engine writes through its own pointer meanwhile, never while a test holds a view).
#[allow(clippy::mut_from_ref)]
pub(crate) fn bytes(buf: &dyn DmaBuffer) -> &mut [u8] {
    // SAFETY: the buffer is `len` bytes of memory owned by `buf`; tests use one view at a time.
    unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), buf.len()) }
}

pub(super) fn bus(buf: &dyn DmaBuffer, off: u64) -> u64 {
    buf.bus_range(off, 1).unwrap()
}

pub(super) fn pattern(seed: u64, out: &mut [u8]) {
    let mut x = seed | 1;
    for b in out {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
}

/// Channel register offset for `dir` channel 0.
pub(crate) fn ch(dir: Direction, reg: u64) -> u64 {
    if dir == Direction::H2c {
        reg
    } else {
        0x1000 + reg
    }
}

/// Start a raw chain on channel 0 of `dir` and wait (guarded, not timed) until it is idle.
pub(super) fn run_raw(bar: &dyn BarRegion, dir: Direction, first: u64, adj: u32, wb: u64, control: u32) -> u32 {
    let sg = if dir == Direction::H2c { 0x4000 } else { 0x5000 };
    w(bar, ch(dir, 0x0c), 1);
    w(bar, ch(dir, 0x88), wb as u32);
    w(bar, ch(dir, 0x8c), (wb >> 32) as u32);
    w(bar, sg + 0x80, first as u32);
    w(bar, sg + 0x84, (first >> 32) as u32);
    w(bar, sg + 0x88, adj);
    w(bar, ch(dir, 0x04), control);
    let deadline = Instant::now() + LONG;
    loop {
        let st = r(bar, ch(dir, 0x40));
        if st & 1 == 0 {
            return st;
        }
        assert!(Instant::now() < deadline, "engine still busy");
        std::thread::yield_now();
    }
}

#[test]
fn identifiers_and_absent_channels() {
    let (_d, bar) = dev();
    let bar = &*bar;
    for (off, id) in [
        (0x0000, 0x1fc0_0006),
        (0x1000, 0x1fc1_0006),
        (0x2000, 0x1fc2_0006),
        (0x3000, 0x1fc3_0006),
        (0x4000, 0x1fc4_0006),
        (0x5000, 0x1fc5_0006),
        (0x6000, 0x1fc6_0006),
    ] {
        assert_eq!(r(bar, off), id, "identifier at {off:#x}");
    }
    for absent in [0x0100, 0x1100, 0x4300, 0x5100, 0x2100, 0x8000] {
        assert_eq!(r(bar, absent), 0, "absent target at {absent:#x} reads 0");
    }
    assert_eq!(r(bar, 0x004c), 0x0001_0140, "align 1, granularity 1, 64 address bits");
    assert_eq!(r(bar, 0x3010), 0xff01, "system id");

    let (_d, bar4) = dev_with(XdmaModelConfig { h2c_channels: 4, c2h_channels: 2, ..Default::default() });
    assert_eq!(r(&*bar4, 0x0300), 0x1fc0_0306);
    assert_eq!(r(&*bar4, 0x1100), 0x1fc1_0106);
    assert_eq!(r(&*bar4, 0x1200), 0);
    let info = xdma::probe(&*bar4).unwrap();
    assert_eq!(info.h2c.iter().map(|c| c.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(info.c2h.len(), 2);
    assert!(Card::with_xdma(XdmaModelConfig { h2c_channels: 5, ..Default::default() }).is_err());
}

#[test]
fn probe_and_find_dma_bar_follow_the_identifier_rule() {
    let (dev, bar) = dev();
    assert_eq!(xdma::find_dma_bar(&dev.dev, &[0, 2, 4]).unwrap(), Some(4));
    assert_eq!(xdma::find_dma_bar(&dev.dev, &[0, 2]).unwrap(), None);
    assert!(xdma::find_dma_bar(&dev.dev, &[3]).is_err(), "a BAR that cannot be opened is reported");
    let info = xdma::probe(&*bar).unwrap();
    assert_eq!((info.bar, info.version, info.release), (4, 6, "2017.1 or later"));
    assert_eq!((info.max_payload, info.max_read_request, info.data_width_bits), (256, 512, 64));
    let c = &info.h2c[0];
    assert_eq!(
        (c.index, c.interface, c.addr_align, c.len_granularity, c.addr_bits),
        (0, Interface::MemoryMapped, 1, 1, 64)
    );
    assert_eq!(info.c2h.len(), 1);
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["h2c"][0]["interface"], "memory-mapped");
    assert!(info.to_string().contains("H2C channel 0: memory-mapped"));
    let bar0 = dev.open_bar(0, Mapping::Uc, IoMode::Mmap).unwrap();
    let e = xdma::probe(&*bar0).unwrap_err().to_string();
    assert!(e.contains("not an XDMA register BAR"), "{e}");
}

#[test]
fn control_w1s_w1c_status_rw1c_and_read_to_clear() {
    let (dev, bar) = dev();
    let bar = &*bar;
    w(bar, 0x04, 0x0000_0006);
    w(bar, 0x08, 0x0400_0010);
    assert_eq!(r(bar, 0x04), 0x0400_0016, "W1S sets");
    w(bar, 0x0c, 0x0000_0012);
    assert_eq!(r(bar, 0x04), 0x0400_0004, "W1C clears");
    w(bar, 0x04, 0xffff_ffff);
    assert_eq!(r(bar, 0x04) & 0xf000_0000, 0, "reserved bits stay 0");
    w(bar, 0x0c, 0xffff_ffff);

    // A finished chain leaves descriptor_stopped | descriptor_completed.
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mem = alloc.alloc(4096).unwrap();
    let d = desc(0x13, 0, 16, bus(&*mem, 512), 0, 0);
    bytes(&*mem)[..32].copy_from_slice(&d);
    let st = run_raw(bar, Direction::H2c, bus(&*mem, 0), 0, bus(&*mem, 1024), CTRL_ALL);
    assert_eq!(st, 0x6);
    w(bar, 0x40, 0x2); // RW1C: clear descriptor_stopped only
    assert_eq!(r(bar, 0x40), 0x4);
    assert_eq!(r(bar, 0x44), 0x4, "read-to-clear returns the bits");
    assert_eq!(r(bar, 0x40), 0, "and clears them");
    assert_eq!(r(bar, 0x48), 1, "completed descriptor count");

    // Interrupt enable mask and its aliases; IRQ block and SGDMA common masks likewise.
    w(bar, 0x90, 0x6);
    w(bar, 0x94, 0x10);
    w(bar, 0x98, 0x2);
    assert_eq!(r(bar, 0x90), 0x14);
    w(bar, 0x2010, 0x1);
    w(bar, 0x2014, 0x2);
    w(bar, 0x2018, 0x1);
    assert_eq!(r(bar, 0x2010), 0x2);
    w(bar, 0x6024, 0xffff_ffff);
    assert_eq!(r(bar, 0x6020), 0x0001_0001, "credit mode bits only for present channels");
    w(bar, 0x6028, 0x1);
    assert_eq!(r(bar, 0x6020), 0x0001_0000);
    assert_eq!(r(bar, 0x4088), 0, "adjacent count written by run_raw");
    w(bar, 0x4088, 0xff);
    assert_eq!(r(bar, 0x4088), 0x3f, "adjacent count is 6 bits");
}

#[test]
fn adjacent_blocks_next_pointers_and_writeback() {
    let (dev, bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mem = alloc.alloc(8192).unwrap();
    let data = alloc.alloc(4096).unwrap();
    pattern(7, bytes(&*data));
    let (m, b) = (bus(&*mem, 0), bus(&*data, 0));
    // Block 1: descriptors 0,1 adjacent at 0; descriptor 1 points to block 2 at 0x1000 (2 descriptors).
    let descs = [
        (0, desc(0, 0, 100, b, 0, m + 32)),
        (32, desc(0, 1, 100, b + 100, 100, m + 0x1000)),
        (0x1000, desc(0, 0, 100, b + 200, 200, m + 0x1020)),
        (0x1020, desc(0x13, 0, 56, b + 300, 300, 0)),
    ];
    for (off, d) in descs {
        bytes(&*mem)[off..off + 32].copy_from_slice(&d);
    }
    let wb = bus(&*mem, 0x1800);
    let st = run_raw(&*bar, Direction::H2c, m, 1, wb, CTRL_ALL);
    assert_eq!(st & !0x6, 0, "status {st:#x}");
    assert_eq!(u32::from_le_bytes(bytes(&*mem)[0x1800..0x1804].try_into().unwrap()), 4, "writeback count");
    assert_eq!(r(&*bar, 0x48), 4);
    let mut card = vec![0u8; 356];
    dev.xdma_model().card_read(0, &mut card).unwrap();
    assert_eq!(&card[..], &bytes(&*data)[..356]);
}

/// Run one bad descriptor on `dir` and return (status, writeback word, model's fault text).
fn bad_descriptor(dir: Direction, d: impl Fn(u64) -> [u8; 32]) -> (u32, u32, String) {
    let (dev, bar) = dev();
    let mem = SimAllocator::new(dev.host_map().clone()).alloc(4096).unwrap();
    let buf_bus = bus(&*mem, 2048);
    bytes(&*mem)[..32].copy_from_slice(&d(buf_bus));
    let st = run_raw(&*bar, dir, bus(&*mem, 0), 0, bus(&*mem, 1024), CTRL_ALL);
    let wb = u32::from_le_bytes(bytes(&*mem)[1024..1028].try_into().unwrap());
    (st, wb, dev.xdma_model().last_fault(dir, 0).unwrap_or_default())
}

#[test]
fn error_paths_set_the_documented_status_bits() {
    use Direction::{C2h, H2c};
    let unmapped = 0x1000; // page 1 of the address space: never a registered buffer
    type MakeDesc = Box<dyn Fn(u64) -> [u8; 32]>;
    let cases: [(&str, Direction, MakeDesc, u32, &str); 8] = [
        (
            "bad magic",
            H2c,
            Box::new(|b| {
                let mut d = desc(0x13, 0, 8, b, 0, 0);
                d[2] = 0;
                d
            }),
            1 << 4,
            "magic",
        ),
        ("zero length", H2c, Box::new(|b| desc(0x13, 0, 0, b, 0, 0)), 1 << 5, "length"),
        ("length over 28 bits", C2h, Box::new(|b| desc(0x13, 0, 0x1000_0000, 0, b, 0)), 1 << 5, "length"),
        (
            "card address past the end (h2c)",
            H2c,
            Box::new(|b| desc(0x13, 0, 8, b, CARD_MEMORY_SIZE - 4, 0)),
            1 << 14,
            "past card memory",
        ),
        (
            "card address past the end (c2h)",
            C2h,
            Box::new(|b| desc(0x13, 0, 8, CARD_MEMORY_SIZE, b, 0)),
            1 << 9,
            "past card memory",
        ),
        (
            "host source unmapped",
            H2c,
            Box::new(move |_| desc(0x13, 0, 8, unmapped, 0, 0)),
            1 << 9,
            "not inside any registered buffer",
        ),
        (
            "host destination unmapped",
            C2h,
            Box::new(move |_| desc(0x13, 0, 8, 0, unmapped, 0)),
            1 << 14,
            "not inside any registered buffer",
        ),
        (
            "host range runs off its buffer",
            H2c,
            Box::new(|b| desc(0x13, 0, 4096, b, 0, 0)),
            1 << 9,
            "not inside any registered buffer",
        ),
    ];
    for (name, dir, d, bit, words) in cases {
        let (st, wb, fault) = bad_descriptor(dir, d);
        assert_eq!(st, bit, "{name}: status {st:#x}");
        assert_eq!(wb, 1 << 31, "{name}: writeback carries the error bit and count 0");
        assert!(fault.contains(words), "{name}: {fault}");
    }
}

#[test]
fn descriptor_fetch_faults_alignment_and_bus_master() {
    let (dev, bar) = dev();
    let bar = &*bar;
    let mem = SimAllocator::new(dev.host_map().clone()).alloc(8192).unwrap();
    let wb = bus(&*mem, 4096);
    // Descriptor memory not registered: desc_error (unsupported request).
    assert_eq!(run_raw(bar, Direction::H2c, 0x2000, 0, wb, CTRL_ALL), 1 << 19);
    // A block of 3 adjacent descriptors starting 64 bytes before a page end crosses 4 KiB.
    assert_eq!(run_raw(bar, Direction::H2c, bus(&*mem, 4096 - 64), 2, wb, CTRL_ALL), 1 << 3);
    // A misaligned descriptor address.
    assert_eq!(run_raw(bar, Direction::C2h, bus(&*mem, 16), 0, wb, CTRL_ALL), 1 << 3);
    // Errors log only where enabled, but the engine stops anyway.
    let quiet = CTRL_ALL & !(0x1f << 19);
    assert_eq!(run_raw(bar, Direction::H2c, 0x2000, 0, wb, quiet), 0);
    // Bus Master off: the fetch itself fails.
    let d = desc(0x13, 0, 8, bus(&*mem, 512), 0, 0);
    bytes(&*mem)[..32].copy_from_slice(&d);
    dev.config_write(4, &0x0002u16.to_le_bytes()).unwrap();
    assert_eq!(run_raw(bar, Direction::H2c, bus(&*mem, 0), 0, wb, CTRL_ALL), 1 << 19);
    assert!(dev.xdma_model().last_fault(Direction::H2c, 0).unwrap().contains("Bus Master"));
    crate::access::set_bus_master(&dev.dev, true).unwrap();
    assert_eq!(run_raw(bar, Direction::H2c, bus(&*mem, 0), 0, wb, CTRL_ALL), 0x6);
}

#[test]
fn clearing_run_stops_an_endless_chain() {
    let (dev, bar) = dev();
    let bar = &*bar;
    let mem = SimAllocator::new(dev.host_map().clone()).alloc(4096).unwrap();
    let m = bus(&*mem, 0);
    // One descriptor pointing at itself, no STOP: the engine loops until run is cleared.
    bytes(&*mem)[..32].copy_from_slice(&desc(0, 0, 64, bus(&*mem, 1024), 0, m));
    w(bar, 0x4080, m as u32);
    w(bar, 0x4084, (m >> 32) as u32);
    w(bar, 0x4088, 0);
    w(bar, 0x04, CTRL_ALL & !(1 << 26));
    let deadline = Instant::now() + LONG;
    while r(bar, 0x48) < 10 {
        assert!(Instant::now() < deadline, "engine never progressed");
        std::thread::yield_now();
    }
    assert_eq!(r(bar, 0x40) & 1, 1, "busy while looping");
    w(bar, 0x0c, 1);
    while r(bar, 0x40) & 1 != 0 {
        assert!(Instant::now() < deadline, "engine did not stop after run was cleared");
        std::thread::yield_now();
    }
    assert_eq!(r(bar, 0x40), 1 << 6, "idle_stopped");
    let count = r(bar, 0x48);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(r(bar, 0x48), count, "nothing moves after the stop");
}

pub(crate) fn engine(dev: &Card, alloc: &dyn DmaAllocator, opts: XdmaOptions) -> XdmaEngine {
    let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    XdmaEngine::new(bar, alloc, opts).unwrap()
}

pub(crate) fn transfer(dir: Direction, len: u64, card_addr: u64) -> Transfer {
    Transfer { dir, buf_offset: 0, card_addr, len }
}

/// H2C from one buffer, C2H into another, and compare every byte (and card memory directly).
fn round_trip(dev: &Card, alloc: &dyn DmaAllocator, opts: XdmaOptions, len: u64, card_off: u64, seed: u64) {
    let mut eng = engine(dev, alloc, opts);
    let src = alloc.alloc(len as usize).unwrap();
    let dst = alloc.alloc(len as usize).unwrap();
    pattern(seed, bytes(&*src));
    eng.prepare(&*src, &transfer(Direction::H2c, len, card_off)).unwrap();
    eng.run(LONG).unwrap();
    let mut card = vec![0u8; len as usize];
    dev.xdma_model().card_read(opts.card_addr + card_off, &mut card).unwrap();
    assert!(card == bytes(&*src)[..len as usize], "card memory after h2c of {len} bytes");
    eng.prepare(&*dst, &transfer(Direction::C2h, len, card_off)).unwrap();
    eng.run(LONG).unwrap();
    let (a, b) = (&bytes(&*src)[..len as usize], &bytes(&*dst)[..len as usize]);
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!("{len} bytes: first mismatch at {i:#x}: wrote {:#04x}, read {:#04x}", a[i], b[i]);
    }
    assert!(bytes(&*dst)[len as usize..].iter().all(|&x| x == 0), "nothing written past the transfer");
}

#[test]
fn round_trips_every_size_contiguous_and_scattered() {
    let (dev, _bar) = dev();
    let plain = SimAllocator::new(dev.host_map().clone());
    let scattered = SimAllocator::scattered(dev.host_map().clone());
    for (i, len) in [4u64, 5, 64, 4095, 4096, 4097, 65536, 0x10_0000, CARD_MEMORY_SIZE].into_iter().enumerate() {
        round_trip(&dev, &plain, XdmaOptions::default(), len, 0, i as u64 + 1);
        round_trip(&dev, &scattered, XdmaOptions::default(), len, 0, i as u64 + 100);
    }
    assert!(dev.host_map().is_empty(), "every buffer unregistered on drop");
}

#[test]
fn round_trip_at_an_offset_card_address() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let opts = XdmaOptions { channel: 0, card_addr: 0x2_0000, card_size: 0x10_0000 };
    round_trip(&dev, &alloc, opts, 0x1_2345, 0x345, 9);
    // Bytes outside the window were not touched.
    let mut before = [0u8; 16];
    dev.xdma_model().card_read(0x2_0000 + 0x345 - 16, &mut before).unwrap();
    assert_eq!(before, [0; 16]);
}

#[test]
fn prepared_chain_is_reused_and_scattered_chains_respect_4k() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::scattered(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(CARD_MEMORY_SIZE as usize).unwrap();
    pattern(3, bytes(&*buf));
    eng.prepare(&*buf, &transfer(Direction::H2c, CARD_MEMORY_SIZE, 0)).unwrap();
    let chain = eng.chain().unwrap().clone();
    assert_eq!(chain.descriptors.len(), (CARD_MEMORY_SIZE / 4096) as usize, "one descriptor per scattered page");
    for _ in 0..3 {
        eng.run(LONG).unwrap();
    }
    assert_eq!(eng.chain().unwrap().descriptors, chain.descriptors, "run does not rebuild the chain");
    let mut card = vec![0u8; CARD_MEMORY_SIZE as usize];
    dev.xdma_model().card_read(0, &mut card).unwrap();
    assert!(card == bytes(&*buf)[..]);
}

#[test]
fn driver_names_magic_stopped_when_descriptors_are_corrupted() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096, 0)).unwrap();
    bytes(eng.descriptor_memory())[2] = 0x00; // magic 0xAD4B -> 0xAD00
    let e = eng.run(LONG).unwrap_err().to_string();
    assert!(e.contains("magic_stopped: descriptor magic was not 0xAD4B"), "{e}");
    assert!(e.contains("after 0 of 1 descriptors"), "{e}");
    // Prepare again rewrites the chain and the engine recovers.
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096, 0)).unwrap();
    eng.run(LONG).unwrap();
}

#[test]
fn driver_reports_a_freed_buffer_as_a_host_read_error() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(8192).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 8192, 0)).unwrap();
    drop(buf); // the chain now points at memory the card may not touch
    let e = eng.run(LONG).unwrap_err().to_string();
    assert!(e.contains("read_error (host memory read over PCIe): unsupported request"), "{e}");
}

#[test]
fn driver_times_out_on_a_hung_engine_then_recovers() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::C2h, 4096, 0)).unwrap();
    dev.xdma_model().set_stalled(Direction::C2h, 0, true).unwrap();
    let e = eng.run(Duration::from_millis(30)).unwrap_err().to_string();
    assert!(e.contains("no progress for 30 ms (0 of 1 descriptors completed)"), "{e}");
    assert!(e.contains("cleared run"), "{e}");
    let stop = eng.stop().unwrap();
    assert!(stop.starts_with("c2h channel 0: 0x"), "{stop}");
    dev.xdma_model().set_stalled(Direction::C2h, 0, false).unwrap();
    eng.run(LONG).unwrap();
}

#[test]
fn prepare_refuses_what_the_engine_cannot_do() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(0x20_0000).unwrap();
    let too_big = eng.prepare(&*buf, &transfer(Direction::H2c, CARD_MEMORY_SIZE + 1, 0)).unwrap_err();
    assert!(too_big.to_string().contains("--card-size"), "{too_big}");
    assert!(eng.prepare(&*buf, &transfer(Direction::H2c, 0, 0)).is_err());
    assert!(eng
        .prepare(&*buf, &Transfer { dir: Direction::C2h, buf_offset: 0x20_0000 - 4, card_addr: 0, len: 8 })
        .is_err());
    // Lengths and offsets near 2^64 are refused, never wrapped.
    for (len, card, at) in [(u64::MAX - 1, 2, 0), (8, u64::MAX - 7, 0), (8, 0, u64::MAX - 7)] {
        let huge = Transfer { dir: Direction::H2c, buf_offset: at, card_addr: card, len };
        assert!(eng.prepare(&*buf, &huge).is_err(), "{huge:?}");
    }
    assert!(eng.run(LONG).is_err(), "nothing prepared after a refused prepare");
    let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    let e = XdmaEngine::new(bar, &alloc, XdmaOptions { channel: 1, ..Default::default() }).err().unwrap();
    assert!(e.to_string().contains("no channel 1"), "{e}");
    // An engine with only a C2H channel refuses H2C with words, not a hang.
    let (dev2, _b) = dev_with(XdmaModelConfig { h2c_channels: 0, ..Default::default() });
    let alloc2 = SimAllocator::new(dev2.host_map().clone());
    let mut eng2 = engine(&dev2, &alloc2, XdmaOptions::default());
    let buf2 = alloc2.alloc(64).unwrap();
    let e = eng2.prepare(&*buf2, &transfer(Direction::H2c, 64, 0)).unwrap_err().to_string();
    assert!(e.contains("no h2c channel 0"), "{e}");
    // Alignment rules from the alignments register are checked up front.
    let (dev3, _b) = dev_with(XdmaModelConfig { addr_align: 64, len_granularity: 4, ..Default::default() });
    let alloc3 = SimAllocator::new(dev3.host_map().clone());
    let mut eng3 = engine(&dev3, &alloc3, XdmaOptions::default());
    let buf3 = alloc3.alloc(4096).unwrap();
    let e = eng3.prepare(&*buf3, &transfer(Direction::H2c, 64, 8)).unwrap_err().to_string();
    assert!(e.contains("64-byte aligned"), "{e}");
    eng3.prepare(&*buf3, &transfer(Direction::H2c, 64, 64)).unwrap();
    eng3.run(LONG).unwrap();
}

#[test]
fn h2c_and_c2h_channels_run_at_the_same_time() {
    let (dev, _bar) = dev();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let half = CARD_MEMORY_SIZE / 2;
    let mut up = engine(&dev, &alloc, XdmaOptions::default());
    let mut down = engine(&dev, &alloc, XdmaOptions::default());
    let a = alloc.alloc(half as usize).unwrap();
    let b = alloc.alloc(half as usize).unwrap();
    pattern(11, bytes(&*a));
    let seeded: Vec<u8> = (0..half).map(|i| (i * 7) as u8).collect();
    dev.xdma_model().card_write(half, &seeded).unwrap();
    up.prepare(&*a, &transfer(Direction::H2c, half, 0)).unwrap();
    down.prepare(&*b, &transfer(Direction::C2h, half, half)).unwrap();
    for _ in 0..5 {
        up.submit().unwrap();
        down.submit().unwrap();
        up.wait(LONG).unwrap();
        down.wait(LONG).unwrap();
    }
    assert!(bytes(&*b)[..] == seeded[..]);
    let mut card = vec![0u8; half as usize];
    dev.xdma_model().card_read(0, &mut card).unwrap();
    assert!(card == bytes(&*a)[..]);
}
