//! Tests of the sim NVRAM card's model at register level (hand-made descriptors, every error
//! path) and of the umem driver against it (round trips verified byte by byte, chains of 1..N
//! descriptors, 1 GiB, faults, a hung engine).

use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::umem::desc::{self, Piece};
use crate::dma::engines::umem::regs::MAX_DESC_LEN;
use crate::dma::engines::umem::{UmemEngine, UmemOptions};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Segment, Transfer};
use crate::mmio::Width;
use crate::sim::nvram::card::{self, NVRAM_CSR_BAR};
use crate::sim::nvram::model::{NvramModel, NvramModelConfig};
use crate::sim::CardSpec;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) const LONG: Duration = Duration::from_secs(20);
pub(super) const GO: u32 = 1;
pub(super) const READ: u32 = 2;
pub(super) const CHAIN: u32 = 4;
pub(super) const SEM: u32 = 0x10;
pub(super) const COMPLETE: u32 = 0x4_0000;
/// The interrupt enables umem.c puts in descriptors: error and parity on each, chain complete
/// on the last.
pub(super) const ERR_PAR: u32 = 0x80 | 0x100;
pub(super) const CHAIN_COMP: u32 = 0x40;

pub(super) struct Card {
    pub(super) dev: SimDevice,
    pub(super) model: Arc<NvramModel>,
    pub(super) bar: Box<dyn BarRegion>,
}

pub(super) fn card_with(cfg: NvramModelConfig) -> Card {
    let (card, model) = card::build(cfg).unwrap();
    let dev = SimDevice::from_card("sim-nvram", &card::NvramCard.info(), card);
    crate::access::set_bus_master(&dev, true).unwrap();
    let bar = dev.open_bar(NVRAM_CSR_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    Card { dev, model, bar }
}

pub(super) fn card() -> Card {
    card_with(NvramModelConfig::default())
}

impl Card {
    pub(super) fn alloc(&self) -> SimAllocator {
        SimAllocator::new(self.dev.host_map().clone())
    }
    pub(super) fn r8(&self, off: u64) -> u8 {
        self.bar.read(off, Width::B8).unwrap() as u8
    }
    pub(super) fn r32(&self, off: u64) -> u32 {
        self.bar.read(off, Width::B32).unwrap() as u32
    }
    pub(super) fn w32(&self, off: u64, v: u32) {
        self.bar.write(off, Width::B32, v as u64).unwrap()
    }
    pub(super) fn try_engine(&self, alloc: &dyn DmaAllocator, o: UmemOptions) -> crate::Result<UmemEngine> {
        let bar = self.dev.open_bar(NVRAM_CSR_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
        UmemEngine::new(bar, self.dev.config_port().unwrap(), 0x5425, alloc, o)
    }
    pub(super) fn engine(&self, alloc: &dyn DmaAllocator) -> UmemEngine {
        self.try_engine(alloc, UmemOptions::default()).unwrap()
    }
    /// Clear what the card latched as umem.c does: completion in the status register, the
    /// memory error log through ERROR_COUNT, the rest by writing PCI_STATUS back.
    pub(super) fn clear(&self) {
        self.w32(0x68, 0x000c_0000);
        self.bar.write(0x3d, Width::B8, 0).unwrap();
        let mut st = [0u8; 2];
        self.dev.config_read(6, &mut st).unwrap();
        self.dev.config_write(6, &st).unwrap();
    }
    /// Start a hand-made chain at `first` and wait for GO to clear.
    pub(super) fn run_chain(&self, first: u64) -> u32 {
        self.w32(0x58, first as u32);
        self.w32(0x5c, (first >> 32) as u32);
        self.w32(0x68, GO | CHAIN);
        self.wait_idle()
    }
    pub(super) fn wait_idle(&self) -> u32 {
        let t = Instant::now();
        loop {
            let s = self.r32(0x68);
            if s & GO == 0 {
                return s;
            }
            assert!(t.elapsed() < LONG, "engine still running: {s:#x}");
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

// DMA buffers are shared with the device by nature (see xdma/tests.rs).
#[allow(clippy::mut_from_ref)]
pub(super) fn bytes(buf: &dyn DmaBuffer) -> &mut [u8] {
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

/// A 64-byte descriptor as umem.h lays it out.
pub(super) fn desc(pci: u64, local: u64, size: u32, next: u64, sem: u64, control: u32) -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..8].copy_from_slice(&pci.to_le_bytes());
    d[8..16].copy_from_slice(&local.to_le_bytes());
    d[16..20].copy_from_slice(&size.to_le_bytes());
    d[24..32].copy_from_slice(&next.to_le_bytes());
    d[32..40].copy_from_slice(&sem.to_le_bytes());
    d[40..44].copy_from_slice(&control.to_le_bytes());
    d
}

pub(super) fn sem_of(mem: &dyn DmaBuffer, i: usize) -> u32 {
    let b = &bytes(mem)[i * 64 + 0x38..i * 64 + 0x3c];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[test]
fn identity_error_control_and_access_widths() {
    let c = card();
    assert_eq!((c.r8(0x00), c.r8(0x07), c.r8(0x04), c.r8(0x0c)), (0x5c, 0xf0, 0, 0));
    c.bar.write(0x0c, Width::B8, 3).unwrap();
    c.bar.write(0x00, Width::B8, 0x12).unwrap();
    assert_eq!((c.r8(0x0c), c.r8(0x00)), (3, 0x5c), "error control is writable, the magic byte is not");
    assert_eq!(c.r32(0x04) >> 24, 0xf0, "byte 7 in the 32-bit word at 4");
    let e = c.bar.write(0x6a, Width::B8, 0xc).unwrap_err().to_string();
    assert!(e.contains("32-bit writes") && e.contains("UM_FLAG_NO_BYTE_STATUS"), "{e}");
    let e = c.dev.open_bar(0, Mapping::Uc, IoMode::Mmap).unwrap().read(0x40, Width::B64).unwrap_err().to_string();
    assert!(e.contains("8, 16 and 32-bit"), "{e}");
    let small = card_with(NvramModelConfig { card_size: 128 << 20, battery: 0b1010, ..Default::default() });
    assert_eq!((small.r8(0x07), small.r8(0x04)), (0xfe, 0b1010));
    assert!(NvramModel::new(NvramModelConfig { card_size: 3 << 20, ..Default::default() }, Default::default()).is_err());
}

#[test]
fn chains_of_one_to_n_descriptors_move_data_and_write_semaphores() {
    let c = card();
    let a = c.alloc();
    for n in [1usize, 2, 7] {
        let data = a.alloc(n * 8192).unwrap();
        let back = a.alloc(n * 8192).unwrap();
        let mem = a.alloc(n * 64).unwrap();
        pattern(n as u64, bytes(&*data));
        let chain = |src: &dyn DmaBuffer, control: u32| {
            for i in 0..n {
                let at = i as u64 * 64;
                let next = if i + 1 < n { bus(&*mem, at + 64) } else { 0 };
                let chain = if i + 1 < n { CHAIN } else { 0 };
                let d = desc(
                    bus(src, i as u64 * 8192),
                    0x10000 + i as u64 * 8192,
                    8192,
                    next,
                    bus(&*mem, at + 0x38),
                    control | chain,
                );
                bytes(&*mem)[at as usize..at as usize + 64].copy_from_slice(&d);
            }
        };
        chain(&*data, GO | SEM | READ);
        let s = c.run_chain(bus(&*mem, 0));
        assert_eq!(s & 0xc_0000, 0xc_0000, "DMA and chain complete: {s:#x}");
        assert!((0..n).all(|i| sem_of(&*mem, i) == GO | SEM | READ | COMPLETE | if i + 1 < n { CHAIN } else { 0 }));
        let mut card = vec![0u8; n * 8192];
        c.model.card_read(0x10000, &mut card).unwrap();
        assert_eq!(card, bytes(&*data)[..n * 8192], "h2c with {n} descriptors");
        c.w32(0x68, 0x000c_0000);
        assert_eq!(c.r32(0x68) & 0x000f_f800, 0, "completion bits are write-1-to-clear");
        chain(&*back, GO | SEM);
        c.run_chain(bus(&*mem, 0));
        assert_eq!(bytes(&*back)[..n * 8192], bytes(&*data)[..n * 8192], "c2h with {n} descriptors");
    }
}

#[test]
fn direct_mode_takes_one_transfer_from_the_registers() {
    let c = card();
    let a = c.alloc();
    let data = a.alloc(4096).unwrap();
    pattern(9, bytes(&*data));
    let sem = a.alloc(64).unwrap();
    for (off, v) in [(0x40, bus(&*data, 0)), (0x48, 0x2000), (0x50, 4096), (0x60, bus(&*sem, 0x38))] {
        c.w32(off, v as u32);
        c.w32(off + 4, (v >> 32) as u32);
    }
    c.w32(0x68, GO | READ | SEM);
    let s = c.wait_idle();
    assert_eq!(s & 0xc_0000, COMPLETE, "no chain: DMA complete only ({s:#x}) {:?}", c.model.last_fault());
    assert_eq!(sem_of(&*sem, 0), GO | READ | SEM | COMPLETE);
    let mut out = vec![0u8; 4096];
    c.model.card_read(0x2000, &mut out).unwrap();
    assert_eq!(out, bytes(&*data)[..4096]);
}

/// Run one hand-made h2c or c2h descriptor and return the status and the model's diagnosis.
pub(super) fn one(c: &Card, pci: u64, local: u64, size: u32, control: u32, mem: &dyn DmaBuffer) -> (u32, String) {
    bytes(mem)[..64].copy_from_slice(&desc(pci, local, size, 0, bus(mem, 0x38), control));
    let s = c.run_chain(bus(mem, 0));
    c.clear();
    (s, c.model.last_fault().unwrap_or_default())
}

#[test]
fn error_paths_set_the_status_bits_umem_decodes() {
    let c = card();
    let a = c.alloc();
    let data = a.alloc(8192).unwrap();
    let mem = a.alloc(64).unwrap();
    // A descriptor address nothing answers: master abort on the fetch.
    let s = c.run_chain(0x10);
    assert_eq!(s & 0x2_0000, 0x2_0000, "{s:#x}");
    assert!(c.model.last_fault().unwrap().contains("descriptor fetch at 0x10"));
    c.clear();
    // A host data address no buffer covers (not just past `data`: the allocator may place `mem`
    // right after it, as it does under qemu-user).
    let (s, why) = one(&c, bus(&*data, 0) + (1 << 40), 0, 4096, GO | SEM | READ, &*mem);
    assert_eq!(s & 0x2_0000, 0x2_0000, "{s:#x} {why}");
    assert_eq!(sem_of(&*mem, 0), 0, "no semaphore for a failed descriptor");
    // Past card memory: a memory access error with the address logged.
    let (s, why) = one(&c, bus(&*data, 0), (1 << 30) - 8, 16, GO | SEM | READ, &*mem);
    assert_eq!(s & 0x800, 0x800, "{s:#x} {why}");
    assert_eq!((c.r8(0x0e) & 1, c.r32(0x28)), (1, (1 << 30) - 8));
    // An injected target abort, then parity.
    c.model.inject_status(0x1_0000);
    let (s, _) = one(&c, bus(&*data, 0), 0, 4096, GO | SEM | READ, &*mem);
    assert_eq!(s & 0x1_0000, 0x1_0000);
    // Bus Master off: the card cannot reach host memory.
    crate::access::set_bus_master(&c.dev, false).unwrap();
    let (s, why) = one(&c, bus(&*data, 0), 0, 4096, GO | SEM | READ, &*mem);
    assert!(s & 0x2_0000 != 0 && why.contains("Bus Master"), "{s:#x} {why}");
}

#[test]
fn a_multi_bit_error_stops_the_dma_with_ecc_on_and_corrupts_silently_without() {
    let c = card();
    let a = c.alloc();
    let data = a.alloc(4096).unwrap();
    let mem = a.alloc(64).unwrap();
    c.model.poison(0x1008);
    let (s, why) = one(&c, bus(&*data, 0), 0x1000, 4096, GO | SEM, &*mem);
    assert_eq!(s & 0x1800, 0, "ECC off: no error ({s:#x} {why})");
    assert_eq!(bytes(&*data)[8], 0x11, "the bad word reached the host unnoticed");
    c.bar.write(0x0c, Width::B8, 3).unwrap();
    let (s, _) = one(&c, bus(&*data, 0), 0x1000, 4096, GO | SEM, &*mem);
    assert_eq!(s & 0x1800, 0x1800, "ECC on: MBE_ERR and ANY_ERR ({s:#x})");
    assert_eq!((c.r8(0x0e) & 2, c.r32(0x28), c.r8(0x3d)), (2, 0x1008, 0), "logged; the count cleared by `one`");
    // Rewriting the word clears the error.
    one(&c, bus(&*data, 0), 0x1000, 4096, GO | SEM | READ, &*mem);
    let (s, _) = one(&c, bus(&*data, 0), 0x1000, 4096, GO | SEM, &*mem);
    assert_eq!(s & 0x1800, 0, "{s:#x}");
}

#[test]
fn clearing_go_stops_an_endless_chain() {
    let c = card();
    let a = c.alloc();
    let data = a.alloc(1 << 20).unwrap();
    let mem = a.alloc(64).unwrap();
    let me = bus(&*mem, 0);
    bytes(&*mem)[..64].copy_from_slice(&desc(bus(&*data, 0), 0, 1 << 20, me, me + 0x38, GO | SEM | READ | CHAIN));
    c.w32(0x58, me as u32);
    c.w32(0x5c, (me >> 32) as u32);
    c.w32(0x68, GO | CHAIN);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.r32(0x68) & GO, GO, "a chain pointing at itself runs until stopped");
    c.w32(0x68, 0);
    let s = c.wait_idle();
    assert_eq!(s & 0x8_0000, 0, "stopped, not complete: {s:#x}");
}

pub(super) fn t(dir: Direction, len: u64, card_addr: u64) -> Transfer {
    Transfer { dir, buf_offset: 0, card_addr, len }
}

/// H2C `len` bytes from a fresh pattern to the card at `card_off`, check the card, C2H them back.
fn round_trip(c: &Card, alloc: &dyn DmaAllocator, len: u64, card_off: u64, seed: u64) -> usize {
    let mut e = c.engine(alloc);
    let src = alloc.alloc(len as usize).unwrap();
    let dst = alloc.alloc(len as usize).unwrap();
    pattern(seed, &mut bytes(&*src)[..len as usize]);
    e.prepare(&*src, &t(Direction::H2c, len, card_off)).unwrap();
    let descriptors = e.chain().unwrap().pieces.len();
    e.run(LONG).unwrap();
    let mut card = vec![0u8; len as usize];
    c.model.card_read(card_off, &mut card).unwrap();
    assert!(card == bytes(&*src)[..len as usize], "card memory after h2c of {len} bytes");
    e.prepare(&*dst, &t(Direction::C2h, len, card_off)).unwrap();
    e.run(LONG).unwrap();
    assert!(bytes(&*dst)[..len as usize] == bytes(&*src)[..len as usize], "host after c2h of {len} bytes");
    descriptors
}

#[test]
fn driver_round_trips_contiguous_and_scattered_buffers() {
    let c = card();
    for (len, off, n) in [(8, 0, 1), (4096, 0x1000, 1), ((1 << 20) + 8, 0x3ff0_0000 - (1 << 20), 2)] {
        assert_eq!(round_trip(&c, &c.alloc(), len, off, len), n, "a descriptor per MiB on a contiguous buffer");
    }
    let scattered = SimAllocator::scattered(c.dev.host_map().clone());
    assert_eq!(round_trip(&c, &scattered, 5 * 4096, 0x4000, 5), 5, "one descriptor per scattered page");
    let mut e = c.engine(&c.alloc());
    let buf = c.alloc().alloc(4096).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
    for _ in 0..3 {
        e.run(LONG).unwrap();
    }
    assert_eq!(c.r8(0x0c), 3, "open turned error correction on (EDC store + correct)");
}

#[test]
fn pieces_stop_at_max_desc_len_and_descriptors_chain_in_order() {
    let segs = [Segment { offset: 0, bus: 0x1_0000_0000, len: 5 << 19 }];
    let p = desc::split(&segs, 0, 5 << 19, 0x100, MAX_DESC_LEN).unwrap();
    assert_eq!(p.iter().map(|p| p.len).collect::<Vec<_>>(), [1 << 20, 1 << 20, 1 << 19]);
    assert_eq!((p[1].host, p[1].card), (0x1_0010_0000, 0x100 + (1 << 20)));
    let holes = [Segment { offset: 0, bus: 0, len: 4096 }, Segment { offset: 8192, bus: 0, len: 4096 }];
    assert!(desc::split(&holes, 0, 12288, 0, MAX_DESC_LEN).is_err(), "a gap in the segments");
    let c = card();
    let mem = c.alloc().alloc(3 * 64).unwrap();
    let pieces = vec![
        Piece { host: 0x1000, card: 0, len: 8 },
        Piece { host: 0x2000, card: 8, len: 8 },
        Piece { host: 0x3000, card: 16, len: 8 },
    ];
    let chain = desc::write_chain(&*mem, Direction::C2h, pieces, 0xc7 << 24).unwrap();
    let b = bytes(&*mem);
    let word = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    assert_eq!(chain.first, bus(&*mem, 0));
    assert_eq!((word(0x18), word(64 + 0x18), word(128 + 0x18)), (bus(&*mem, 64), bus(&*mem, 128), 0));
    assert_eq!(word(64 + 0x20), bus(&*mem, 64 + 0x38), "each semaphore is its own +0x38");
    let ctl = |i: usize| u32::from_le_bytes(b[i * 64 + 0x28..i * 64 + 0x2c].try_into().unwrap());
    assert_eq!(
        (ctl(0) & 0x1ff, ctl(2) & 0x1ff),
        (GO | SEM | CHAIN, GO | SEM),
        "the last ends the chain; no interrupt enables; c2h has no TRANSFER_READ"
    );
}

#[test]
fn one_gib_in_1024_descriptors_of_1_mib_in_chains_of_128_both_ways() {
    let c = card();
    let a = c.alloc();
    let len = 1u64 << 30;
    let mut e = c.engine(&a);
    let buf = a.alloc(len as usize).unwrap();
    let v = bytes(&*buf);
    for (i, w) in v.chunks_exact_mut(8).enumerate().step_by(512) {
        w.copy_from_slice(&(i as u64 ^ 0x5a5a).to_le_bytes());
    }
    e.prepare(&*buf, &t(Direction::H2c, len, 0)).unwrap();
    assert_eq!(e.chain().unwrap().pieces.len(), 1024);
    assert_eq!(e.chain().unwrap().parts.len(), 8);
    e.run(LONG).unwrap();
    v.fill(0);
    e.prepare(&*buf, &t(Direction::C2h, len, 0)).unwrap();
    e.run(LONG).unwrap();
    let bad = v.chunks_exact(8).enumerate().step_by(512).find(|(i, w)| *w != (*i as u64 ^ 0x5a5a).to_le_bytes());
    assert_eq!(bad.map(|(i, _)| i), None, "every sampled word came back");
}

#[test]
fn driver_reports_aborts_bad_descriptors_and_ecc_errors_in_words() {
    let c = card();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let buf = a.alloc(16384).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 16384, 0)).unwrap();
    c.model.inject_status(0x1_0000);
    let err = e.run(LONG).unwrap_err().to_string();
    assert!(err.contains("stopped after 0 of 1 descriptors") && err.contains("target abort"), "{err}");
    // A descriptor whose next pointer leads nowhere.
    let scattered = SimAllocator::scattered(c.dev.host_map().clone());
    let sbuf = scattered.alloc(3 * 4096).unwrap();
    e.prepare(&*sbuf, &t(Direction::H2c, 3 * 4096, 0)).unwrap();
    bytes(e.descriptor_memory())[0x18..0x20].copy_from_slice(&0x40u64.to_le_bytes());
    let err = e.run(LONG).unwrap_err().to_string();
    assert!(err.contains("stopped after 1 of 3") && err.contains("master abort"), "{err}");
    // A multi-bit error in card memory, with error correction on (open turned it on).
    c.model.poison(0x2000);
    e.prepare(&*buf, &t(Direction::C2h, 16384, 0)).unwrap();
    let err = e.run(LONG).unwrap_err().to_string();
    assert!(err.contains("multi-bit ECC error at card address 0x2000") && err.contains("count 1"), "{err}");
    assert_eq!(c.r8(0x3d), 0, "the error count is cleared after it is reported");
    e.prepare(&*buf, &t(Direction::H2c, 16384, 0)).unwrap();
    e.run(LONG).unwrap();
}

#[test]
fn driver_times_out_on_a_hung_engine_then_recovers() {
    let c = card();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let buf = a.alloc(8192).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 8192, 0)).unwrap();
    c.model.set_stalled(true);
    let err = e.run(Duration::from_millis(50)).unwrap_err().to_string();
    assert!(err.contains("no progress for 50 ms") && err.contains("cleared GO"), "{err}");
    assert_eq!(c.r32(0x68) & GO, 0, "the engine was stopped");
    c.model.set_stalled(false);
    e.run(LONG).unwrap();
    assert!(e.stop().unwrap().contains("idle"));
}

/// A card that falls off the bus mid-run is named as such, not as a hung engine: its status
/// and its magic byte read all-ones, which the magic byte never does on a live card.
#[test]
fn a_card_that_falls_off_the_bus_is_named_not_hung() {
    let c = card();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let buf = a.alloc(8192).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 8192, 0)).unwrap();
    e.run(LONG).unwrap();
    c.dev.fall_off_bus();
    let err = e.run(LONG).unwrap_err();
    assert!(matches!(err, crate::Error::Gone(_)), "{err}");
    assert!(err.to_string().contains("status register and its magic byte (0x00, 0x5c on a live card)"), "{err}");
    assert!(matches!(e.stop(), Err(crate::Error::Gone(_))), "stopping names it too, without waiting for GO");
}

#[test]
fn open_refuses_a_wrong_magic_and_prepare_what_the_card_cannot_do() {
    let c = card_with(NvramModelConfig { magic: 0x00, ..Default::default() });
    let err = c.try_engine(&c.alloc(), UmemOptions::default()).err().unwrap().to_string();
    assert!(err.contains("magic byte 0x00") && err.contains("0x5c") && err.contains("nothing was written"), "{err}");
    assert_eq!(c.r8(0x0c), 0, "error control untouched");
    let c = card();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let buf = a.alloc(8192).unwrap();
    let err = e.prepare(&*buf, &t(Direction::H2c, 12, 0)).unwrap_err().to_string();
    assert!(err.contains("multiple of 8"), "{err}");
    let err = e.prepare(&*buf, &t(Direction::H2c, 4096, (1 << 30) - 8)).unwrap_err().to_string();
    assert!(err.contains("does not fit the 1 GiB card window"), "{err}");
    // Lengths and offsets near 2^64 are refused, never wrapped.
    for (len, card, at) in [(u64::MAX - 7, 8, 0), (8, u64::MAX - 7, 0), (8, 0, u64::MAX - 7)] {
        let huge = Transfer { dir: Direction::H2c, buf_offset: at, card_addr: card, len };
        assert!(e.prepare(&*buf, &huge).is_err(), "{huge:?}");
    }
    let o = UmemOptions { card_addr: 0, card_size: Some(2 << 30) };
    assert!(c.try_engine(&a, o).err().unwrap().to_string().contains("not inside"));
}

#[test]
fn detect_shows_memory_batteries_and_ecc() {
    let c = card();
    let info = card::NvramCard.info();
    let found = crate::dma::engines::detect(&info, &c.dev);
    let d = found.into_iter().flatten().find(|d| d.engine == "umem").unwrap();
    assert_eq!(d.register_bars, vec![0]);
    for want in
        ["MM-5425CN NVRAM DMA engine in BAR0, magic 0x5c", "memory:  1 GiB", "battery 2: enabled, OK", "ECC:     off"]
    {
        assert!(d.summary.contains(want), "{want} in {}", d.summary);
    }
    let bad = card_with(NvramModelConfig { magic: 0x59, battery: 0b0010, ..Default::default() });
    let d = crate::dma::engines::detect(&info, &bad.dev).into_iter().flatten().find(|d| d.engine == "umem").unwrap();
    assert!(
        d.summary.contains("expected 0x5c: not driven") && d.summary.contains("battery 1: enabled, FAILED"),
        "{}",
        d.summary
    );
}
