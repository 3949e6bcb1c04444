//! Self-timed benchmark of the XDMA driver against the sim card's XDMA model
//! (`cargo bench -p pcibench --bench xdma`). All figures are "simulated card" figures: the
//! card's memory and engine are host memory and a host thread.
//!
//! What it measures:
//! 1. Host-side submission: `XdmaEngine::submit` alone (stop, clear status, writeback address,
//!    chain address, control, flushing read) on a chain prepared once, for chains of 1..4096
//!    descriptors. Its cost does not depend on the chain length; per descriptor it is the run
//!    cost divided by the chain length. The timer's own overhead is measured and subtracted.
//! 2. End to end per descriptor: `run` (submit + engine + poll) on chains of N 64-byte
//!    descriptors, divided by N: host submission amortised plus the model's per-descriptor work
//!    (fetch, checks, a 64-byte copy, completion), the data movement being negligible.
//! 3. `prepare` (building and writing a chain) per descriptor.
//! 4. Throughput of 0x128000-byte transfers (seed 000's size) both ways, contiguous and
//!    scattered-page buffers, verified afterwards.

use pcibench::access::sim::SimDevice;
use pcibench::access::{DeviceAccess, IoMode, Mapping};
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::xdma::{XdmaEngine, XdmaOptions};
use pcibench::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use pcibench::sim::xdma::card::SIM_DMA_BAR;
use pcibench::sim::xdma::model::{XdmaModelConfig, CARD_MEMORY_SIZE};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::{median, timer_overhead};

const TIMEOUT: Duration = Duration::from_secs(10);

fn sim(card: u64) -> (SimDevice, XdmaOptions) {
    let (built, _model) =
        pcibench::sim::xdma::card::build(XdmaModelConfig { card_size: card, ..Default::default() }).expect("sim card");
    let dev = SimDevice::from_card("sim", &pcibench::sim::CardSpec::info(&pcibench::sim::xdma::card::XdmaCard), built);
    pcibench::access::set_bus_master(&dev, true).expect("bus master");
    (dev, XdmaOptions { card_size: card, ..Default::default() })
}

fn engine(dev: &SimDevice, alloc: &dyn DmaAllocator, opts: XdmaOptions) -> XdmaEngine {
    let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).expect("BAR4");
    XdmaEngine::new(bar, alloc, opts).expect("engine")
}

fn submission(timer: f64) {
    println!("1. host-side submission (XdmaEngine::submit alone; timer overhead {timer:.0} ns subtracted)");
    let (dev, opts) = sim(16 << 20);
    let alloc = SimAllocator::new(dev.host_map().clone());
    common::submission(
        &alloc,
        timer,
        |_| (500, 20_000),
        |view, t| {
            let mut eng = engine(&dev, &alloc, opts);
            eng.prepare(view, &t).expect("prepare");
            assert_eq!(eng.chain().map(|c| c.descriptors.len() as u64), Some(t.len / common::PIECE));
            eng
        },
        |e| e.submit().expect("submit"),
        |e| e.wait(TIMEOUT).expect("wait"),
    );
}

fn fill(buf: &dyn DmaBuffer, seed: u8) {
    // SAFETY: the buffer is `len` bytes owned by `buf`; no transfer is running.
    let b = unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), buf.len()) };
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(31).wrapping_add(seed ^ (i >> 12) as u8);
    }
}

fn same(a: &dyn DmaBuffer, b: &dyn DmaBuffer, len: usize) -> bool {
    // SAFETY: both buffers are at least `len` bytes; no transfer is running.
    unsafe { std::slice::from_raw_parts(a.as_ptr(), len) == std::slice::from_raw_parts(b.as_ptr(), len) }
}

fn throughput() {
    println!("4. throughput, {CARD_MEMORY_SIZE:#x}-byte transfers (MB/s, MB = 10^6 B; min is the slowest sample)");
    println!(
        "   {:<10} {:<4} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "buffer", "dir", "samples", "min", "median", "mean", "max"
    );
    let len = CARD_MEMORY_SIZE;
    for scattered in [false, true] {
        let (dev, opts) = sim(CARD_MEMORY_SIZE);
        let alloc = if scattered {
            SimAllocator::scattered(dev.host_map().clone())
        } else {
            SimAllocator::new(dev.host_map().clone())
        };
        let src = alloc.alloc(len as usize).expect("buffer");
        let dst = alloc.alloc(len as usize).expect("buffer");
        fill(&*src, 0x5a);
        let mut eng = engine(&dev, &alloc, opts);
        for (dir, buf) in [(Direction::H2c, &src), (Direction::C2h, &dst)] {
            eng.prepare(&**buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len }).expect("prepare");
            eng.run(TIMEOUT).expect("warm-up run");
            let samples = 64;
            let mut secs: Vec<f64> = (0..samples)
                .map(|_| {
                    let t0 = Instant::now();
                    eng.run(TIMEOUT).expect("run");
                    t0.elapsed().as_secs_f64()
                })
                .collect();
            let mbps = |s: f64| len as f64 / s / 1e6;
            let mean = secs.iter().sum::<f64>() / samples as f64;
            let (slow, fast) =
                (secs.iter().cloned().fold(0.0, f64::max), secs.iter().cloned().fold(f64::MAX, f64::min));
            let med = median(&mut secs);
            let kind = if scattered { "scattered" } else { "contiguous" };
            println!(
                "   {kind:<10} {dir:<4} {samples:>8} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
                mbps(slow),
                mbps(med),
                mbps(mean),
                mbps(fast)
            );
        }
        assert!(same(&*src, &*dst, len as usize), "data did not survive h2c then c2h");
    }
    println!("   (verified: every byte written h2c read back c2h)");
}

fn main() {
    // `cargo bench` passes --bench; a filter argument is not supported, everything runs.
    println!("XDMA driver against the sim card's XDMA model (simulated card: host memory figures)");
    let timer = timer_overhead();
    submission(timer);
    let (dev, opts) = sim(16 << 20);
    let alloc = SimAllocator::new(dev.host_map().clone());
    common::end_to_end(&alloc, TIMEOUT, || engine(&dev, &alloc, opts));
    common::prepare_cost(&alloc, engine(&dev, &alloc, opts));
    throughput();
}
