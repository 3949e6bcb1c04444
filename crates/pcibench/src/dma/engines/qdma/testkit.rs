//! What the QDMA model and driver tests share: the `sim-qdma` card built with a chosen model,
//! register access, buffers and patterns.

use super::SwCtx;
use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::direction::Direction;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{DmaBuffer, Transfer, Work};
use crate::mmio::Width;
use crate::sim::qdma::card::{self, QdmaCard, QDMA_CONFIG_BAR};
use crate::sim::qdma::model::{QdmaModel, QdmaModelConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const LONG: Duration = Duration::from_secs(20);

/// `count` transfers of `len` bytes at buffer and card offset i × len, spread over `n` queues.
pub fn spread(buf: &dyn DmaBuffer, dir: Direction, count: u64, len: u64, n: u16) -> Vec<Work<'_>> {
    (0..count)
        .map(|i| Work {
            buf,
            t: Transfer { dir, buf_offset: i * len, card_addr: i * len, len },
            queue: (i % n as u64) as u16,
        })
        .collect()
}

/// GLBL2_MISC_CAP of each IP variant the model knows (device type [31:28], release [27:24],
/// IP type [23:20]): the soft IP 3.x of Vivado 2019.2, EQDMA 4.0 of 2020.2, Versal CPM5 and CPM4.
pub const SOFT3: u32 = 0x0200_0000;
pub const EQDMA: u32 = 0x0110_0000;
pub const CPM5: u32 = 0x2000_0000;
pub const CPM4: u32 = 0x1000_0000;

/// The `sim-qdma` card with a custom model, keeping the model for direct checks.
pub struct Card {
    pub dev: SimDevice,
    pub model: Arc<QdmaModel>,
}

impl Card {
    pub fn new(cfg: QdmaModelConfig) -> Card {
        Card::on(cfg, crate::sim::datapath::ModelClock::real())
    }

    /// The card on `clock`'s time (a fake clock: its engines move only as the test advances it).
    pub fn on(cfg: QdmaModelConfig, clock: crate::sim::datapath::ModelClock) -> Card {
        let (card, model) = card::build_with(cfg, crate::sim::host_map::HostMap::new(), clock).unwrap();
        let dev = SimDevice::from_card("sim-qdma", &crate::sim::CardSpec::info(&QdmaCard), card);
        crate::access::set_bus_master(&dev, true).unwrap();
        Card { dev, model }
    }

    pub fn bar(&self) -> Box<dyn BarRegion> {
        self.dev.open_bar(QDMA_CONFIG_BAR, Mapping::Uc, IoMode::Mmap).unwrap()
    }

    pub fn alloc(&self) -> SimAllocator {
        SimAllocator::new(self.dev.host_map().clone())
    }
}

pub fn r(bar: &dyn BarRegion, off: u64) -> u32 {
    bar.read(off, Width::B32).unwrap() as u32
}

pub fn w(bar: &dyn BarRegion, off: u64, v: u32) {
    bar.write(off, Width::B32, v as u64).unwrap()
}

// DMA buffers are shared with the device by nature: a mutable view from a shared handle is the
// point (the engine writes through its own pointer meanwhile, never while a test holds a view).
#[allow(clippy::mut_from_ref)]
pub fn bytes(buf: &dyn DmaBuffer) -> &mut [u8] {
    // SAFETY: the buffer is `len` bytes of memory owned by `buf`; tests use one view at a time.
    unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), buf.len()) }
}

pub fn bus(buf: &dyn DmaBuffer, off: u64) -> u64 {
    buf.bus_range(off, 1).unwrap()
}

pub fn pattern(seed: u64, out: &mut [u8]) {
    let mut x = seed | 1;
    for b in out {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
}

/// Wait (guarded, not timed) until `f` holds.
pub fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

// Driving the model by hand, as the vendor's access code does on the soft IP, EQDMA and CPM5.

pub fn cmd(bar: &dyn BarRegion, sel: u32, op: u32, id: u32) {
    w(bar, 0x844, sel << 1 | op << 5 | id << 7);
    until("the context command", || r(bar, 0x844) & 1 == 0);
}

pub fn ctx_write(bar: &dyn BarRegion, sel: u32, id: u32, words: &[u32]) {
    for i in 0..8 {
        w(bar, 0x804 + 4 * i as u64, words.get(i).copied().unwrap_or(0));
        w(bar, 0x824 + 4 * i as u64, u32::MAX);
    }
    cmd(bar, sel, 1, id);
}

pub fn ctx_read(bar: &dyn BarRegion, sel: u32, id: u32) -> [u32; 8] {
    cmd(bar, sel, 2, id);
    std::array::from_fn(|i| r(bar, 0x804 + 4 * i as u64))
}

pub fn sw_sel(dir: Direction) -> u32 {
    if dir == Direction::H2c {
        1
    } else {
        0
    }
}

/// FMAP for function 0 (queues 0..n), every error the vendor enables for the IP logged
/// (`*_hw_error_enable`: no MM engine bits on the soft IP 3.x), both MM engines running.
pub fn take(bar: &dyn BarRegion, n: u32) {
    ctx_write(bar, 12, 0, &[0, n]);
    let misc = r(bar, 0x134);
    let eq = (misc >> 28 == 0 && matches!((misc >> 20) & 0xf, 1 | 2)) || misc >> 28 == 2;
    if eq {
        for (reg, v) in
            [(0x24c, 0x5c), (0x258, 0x01f9_037e), (0x268, 0xb3), (0x1054, 0x7000_0003), (0x1254, 0x3041_013e)]
        {
            w(bar, reg, v);
        }
    } else {
        for (reg, v) in [(0x24c, 0xc), (0x258, 0x01f9_023f), (0x268, 0xf)] {
            w(bar, reg, v);
        }
    }
    w(bar, 0x1004, 1);
    w(bar, 0x1204, 1);
}

/// Start queue `qid` with a ring of 64 descriptors (table index 1: 65 entries) at `ring`.
pub fn start(bar: &dyn BarRegion, dir: Direction, qid: u32, ring: u64) {
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

pub fn desc(src: u64, dst: u64, len: u32, dv: bool) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..8].copy_from_slice(&src.to_le_bytes());
    b[8..12].copy_from_slice(&(len | if dv { 1 << 28 } else { 0 } | 3 << 29).to_le_bytes());
    b[16..24].copy_from_slice(&dst.to_le_bytes());
    b
}

pub fn ring_doorbell(bar: &dyn BarRegion, dir: Direction, q: u64, pidx: u32) {
    w(bar, 0x18000 + 16 * q + if dir == Direction::H2c { 4 } else { 8 }, pidx);
}

/// The status writeback word of a 64-descriptor ring: (pidx, cidx).
pub fn status(ring: &dyn crate::dma::DmaBuffer) -> (u32, u32) {
    let v = u32::from_le_bytes(bytes(ring)[64 * 32..64 * 32 + 4].try_into().unwrap());
    (v & 0xffff, v >> 16)
}
