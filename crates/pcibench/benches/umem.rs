//! Self-timed benchmark of the umem driver (Micro Memory MM-5425CN) against the sim NVRAM card
//! (`cargo bench -p pcibench --bench umem`). Every figure is a "simulated card" figure: the
//! card's memory and engine are host memory and a host thread.
//!
//! What it measures:
//! 1. Host-side submission: `UmemEngine::submit` alone (zero the direct-mode registers, clear
//!    every descriptor's semaphore and the status, write the first chain's address, set GO) on
//!    a transfer prepared once, for 1..4096 descriptors. Clearing the semaphores is the part
//!    that grows with the transfer (beyond 128 descriptors the later chains start in `wait`).
//!    The timer's own overhead is measured and subtracted.
//! 2. End to end per descriptor: `run` (submit + engine + poll) on N 64-byte pieces (chains of
//!    at most 128, umem.c's longest, started one after another), divided by N: the model's
//!    per-descriptor work (fetch, a 64-byte copy, semaphore) plus the host's, the data movement
//!    being negligible.
//! 3. `prepare` (building and writing a chain) per descriptor.
//! 4. Throughput both ways at 1 MiB..256 MiB in one descriptor, verified afterwards.

use pcibench::access::sim::SimDevice;
use pcibench::access::{DeviceAccess, IoMode, Mapping};
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::umem::{UmemEngine, UmemOptions};
use pcibench::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use pcibench::sim::nvram::card::{self, NVRAM_CSR_BAR};
use pcibench::sim::nvram::model::NvramModelConfig;
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::timer_overhead;

const TIMEOUT: Duration = Duration::from_secs(30);

fn card() -> SimDevice {
    let (built, _model) = card::build(NvramModelConfig::default()).expect("sim-nvram");
    let dev = SimDevice::from_card("sim-nvram", &pcibench::sim::CardSpec::info(&card::NvramCard), built);
    pcibench::access::set_bus_master(&dev, true).expect("bus master");
    dev
}

fn engine(dev: &SimDevice, alloc: &dyn DmaAllocator) -> UmemEngine {
    let bar = dev.open_bar(NVRAM_CSR_BAR, Mapping::Uc, IoMode::Mmap).expect("BAR0");
    let config = dev.config_port().expect("config space");
    UmemEngine::new(bar, config, 0x5425, alloc, UmemOptions::default()).expect("engine")
}

fn t(dir: Direction, len: u64) -> Transfer {
    Transfer { dir, buf_offset: 0, card_addr: 0, len }
}

fn submission(dev: &SimDevice, timer: f64) {
    println!("1. host-side submission (UmemEngine::submit alone; timer overhead {timer:.0} ns subtracted)");
    let alloc = SimAllocator::new(dev.host_map().clone());
    common::submission(
        &alloc,
        timer,
        |n| (200, (400_000 / n).clamp(500, 20_000) as usize),
        |view, t| {
            let mut eng = engine(dev, &alloc);
            eng.prepare(view, &t).expect("prepare");
            eng
        },
        |e| e.submit().expect("submit"),
        |e| e.wait(TIMEOUT).expect("wait"),
    );
}

fn throughput(dev: &SimDevice) {
    println!("4. throughput, one descriptor per transfer, verified (MB = 10^6 bytes)");
    println!("   {:>10} {:>12} {:>12}  verify", "size", "h2c MB/s", "c2h MB/s");
    let alloc = SimAllocator::new(dev.host_map().clone());
    for size in [1u64 << 20, 16 << 20, 256 << 20] {
        let src = alloc.alloc(size as usize).expect("src");
        let dst = alloc.alloc(size as usize).expect("dst");
        // SAFETY: both buffers are `size` bytes they own; no transfer runs while these views live.
        let (s, d) = unsafe {
            (
                std::slice::from_raw_parts_mut(src.as_ptr(), size as usize),
                std::slice::from_raw_parts_mut(dst.as_ptr(), size as usize),
            )
        };
        s.iter_mut().enumerate().for_each(|(i, b)| *b = (i as u8).wrapping_mul(31) ^ (i >> 12) as u8);
        let mut eng = engine(dev, &alloc);
        let reps = ((1u64 << 30) / size).clamp(4, 64);
        let mut rate = |buf: &dyn DmaBuffer, dir| {
            eng.prepare(buf, &t(dir, size)).expect("prepare");
            let t0 = Instant::now();
            for _ in 0..reps {
                eng.run(TIMEOUT).expect("run");
            }
            (size * reps) as f64 / t0.elapsed().as_secs_f64() / 1e6
        };
        let h = rate(&*src, Direction::H2c);
        let c = rate(&*dst, Direction::C2h);
        let ok = if s == d { "ok" } else { "MISMATCH" };
        println!("   {:>7} MiB {h:>12.0} {c:>12.0}  {ok}", size >> 20);
    }
}

fn main() {
    let timer = timer_overhead();
    let dev = card();
    println!("umem driver on the sim-nvram card (simulated card: host-memory figures)");
    submission(&dev, timer);
    let alloc = SimAllocator::new(dev.host_map().clone());
    common::end_to_end(&alloc, TIMEOUT, || engine(&dev, &alloc));
    common::prepare_cost(&alloc, engine(&dev, &alloc));
    throughput(&dev);
}
