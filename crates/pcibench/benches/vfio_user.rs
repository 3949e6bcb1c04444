//! Self-timed benchmark of the vfio-user path (`cargo bench -p pcibench --bench vfio_user`):
//! `pcibench serve`'s server on a thread of this process, its client across a UNIX socket.
//!
//! 1. The message path's cost per register access: a 32-bit read and write of the XDMA
//!    identifier register (BAR4) as REGION_READ/REGION_WRITE round trips, against the same access
//!    to the in-process sim card's register model.
//! 2. DMA throughput through shared memory: the XDMA driver moving 0x128000-byte transfers both
//!    ways between memfd buffers DMA_MAP'd to the served card, against the in-process card (the
//!    ratio is the cost of the protocol: each transfer's register writes and status reads are
//!    messages, the data itself moves with no copy). Verified afterwards.
//!
//! All figures are simulated-card figures (host memory and host threads).

use pcibench::access::sim::SimDevice;
use pcibench::access::vfio_user::server::{bind, serve, ServeOptions};
use pcibench::access::vfio_user::VfioUserDevice;
use pcibench::access::{DeviceAccess, DmaPath, IoMode, Mapping};
use pcibench::dma::buffers::shared::SharedAllocator;
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::xdma::{XdmaEngine, XdmaOptions};
use pcibench::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use pcibench::mmio::Width;
use pcibench::sim::xdma::card::SIM_DMA_BAR;
use pcibench::sim::xdma::model::CARD_MEMORY_SIZE;
use pcibench::sim::SimId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::{median, per_call};

const TIMEOUT: Duration = Duration::from_secs(10);

fn fill(buf: &dyn DmaBuffer) {
    // SAFETY: the buffer is `len` bytes owned by `buf`; no transfer is running.
    let b = unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), buf.len()) };
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(31) ^ (i >> 12) as u8;
    }
}

/// Median MB/s of 32 transfers each way through `dev`'s XDMA engine, buffers from `alloc`.
fn throughput(dev: &dyn DeviceAccess, alloc: &dyn DmaAllocator) -> [f64; 2] {
    pcibench::access::set_bus_master(dev, true).expect("bus master");
    let len = CARD_MEMORY_SIZE;
    let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).expect("BAR4");
    let mut eng = XdmaEngine::new(bar, alloc, XdmaOptions { card_size: len, ..Default::default() }).expect("engine");
    let (src, dst) = (alloc.alloc(len as usize).expect("buffer"), alloc.alloc(len as usize).expect("buffer"));
    fill(&*src);
    let mut out = [0.0; 2];
    for (i, (dir, buf)) in [(Direction::H2c, &src), (Direction::C2h, &dst)].into_iter().enumerate() {
        eng.prepare(&**buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len }).expect("prepare");
        eng.run(TIMEOUT).expect("warm-up run");
        let mut mbps: Vec<f64> = (0..32)
            .map(|_| {
                let t = Instant::now();
                eng.run(TIMEOUT).expect("run");
                len as f64 / t.elapsed().as_secs_f64() / 1e6
            })
            .collect();
        out[i] = median(&mut mbps);
    }
    // SAFETY: both buffers are `len` bytes; no transfer is running.
    let same = unsafe {
        std::slice::from_raw_parts(src.as_ptr(), len as usize) == std::slice::from_raw_parts(dst.as_ptr(), len as usize)
    };
    assert!(same, "data did not survive h2c then c2h");
    out
}

fn main() {
    println!("vfio-user: pcibench serve's server on a thread, its client over a UNIX socket (simulated card)");
    let dir = tempfile::tempdir().expect("temporary directory");
    let socket = dir.path().join("bench.sock");
    let listener = bind(&socket).expect("listen");
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&listener, SimId::DEFAULT, ServeOptions::default(), &stop, &|_| {}));
        let remote = VfioUserDevice::open(&socket).expect("connect");
        let local = SimDevice::new().expect("sim card");

        println!("1. one 32-bit register access (XDMA BAR4 identifier), ns (median of 5 runs)");
        println!("   {:<28} {:>10} {:>10}", "", "read", "write");
        for (name, dev) in [("in-process sim", &local as &dyn DeviceAccess), ("vfio-user message", &remote)] {
            let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).expect("BAR4");
            let n = if name.starts_with("vfio") { 20_000 } else { 2_000_000 };
            let read = per_call(n, || {
                std::hint::black_box(bar.read(0, Width::B32).expect("read"));
            });
            // The H2C channel's control register W1S alias with nothing set: a write with no effect.
            let write = per_call(n, || bar.write(0x0008, Width::B32, 0).expect("write"));
            println!("   {name:<28} {read:>10.0} {write:>10.0}");
        }

        println!("2. XDMA {CARD_MEMORY_SIZE:#x}-byte transfers, median MB/s of 32 (MB = 10^6 B), verified");
        let sim_alloc = SimAllocator::new(local.host_map().clone());
        let a = throughput(&local, &sim_alloc);
        let DmaPath::Shared(map) = remote.dma_path().expect("dma path") else {
            unreachable!("vfio-user shares memory")
        };
        let b = throughput(&remote, &SharedAllocator::new(map, 64));
        println!("   {:<28} {:>10} {:>10}", "", "h2c", "c2h");
        println!("   {:<28} {:>10.0} {:>10.0}", "in-process sim", a[0], a[1]);
        println!("   {:<28} {:>10.0} {:>10.0}", "vfio-user (memfd, DMA_MAP)", b[0], b[1]);
        println!("   {:<28} {:>10.2} {:>10.2}", "ratio vfio-user / in-process", b[0] / a[0], b[1] / a[1]);
        drop(remote);
        stop.store(true, Ordering::Relaxed);
        server.join().expect("server thread").expect("server");
    });
}
