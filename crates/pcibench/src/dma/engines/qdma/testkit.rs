//! What the QDMA model and driver tests share: the `sim-qdma` card built with a chosen model,
//! register access, buffers and patterns.

use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::DmaBuffer;
use crate::mmio::Width;
use crate::sim::qdma::card::{self, QdmaCard, QDMA_CONFIG_BAR};
use crate::sim::qdma::model::{QdmaModel, QdmaModelConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const LONG: Duration = Duration::from_secs(20);

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
        let (card, model) = card::build(cfg).unwrap();
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
