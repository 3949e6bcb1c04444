//! Self-timed benchmark of users' models behind pcibench_model.h (`cargo bench -p pcibench --bench
//! model`), in process, so the figures are the ABI's own cost (the socket of `serve` comes on top,
//! as `benches/vfio_user.rs` measures for the sim card):
//!
//! 1. One 32-bit register read and write: the edu C model through the ABI (a hand-off to the model
//!    thread and back) against the sim card's register model (a function call).
//! 2. DMA: the edu C model's transfer (its dma_read/dma_write callbacks through the host map,
//!    started by one register write) at 64 and 4095 bytes, and the cost per byte from the two;
//!    against the sim card's XDMA engine at the same sizes.
//! 3. The Verilator example (examples/models/edu-rtl) driven by pcibench's edu engine: simulated
//!    clock cycles per second of wall time, cycles per transfer, its register read through the ABI.
//!
//! The models are built with their Makefiles into the bench's target folder (Verilator: where
//! installed). Figures are host figures of a simulation, not of any card.

use pcibench::access::sim::SimDevice;
use pcibench::access::{set_bus_master, BarRegion, DeviceAccess, IoMode, Mapping};
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::edu::EduEngine;
use pcibench::dma::engines::xdma::{XdmaEngine, XdmaOptions};
use pcibench::dma::{Direction, DmaAllocator, Engine, Transfer};
use pcibench::mmio::Width;
use pcibench::model::{Model, ModelSpec};
use pcibench::sim::xdma::card::SIM_DMA_BAR;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::per_call;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Build `file` with the Makefile in `dir` (relative to the repository) into the bench's folder.
fn make(dir: &str, file: &str) -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("models").join(dir.replace('/', "-"));
    let target = out.join(file);
    let ok = Command::new("make")
        .args(["-s", "-C"])
        .arg(repo.join(dir))
        .arg(format!("O={}", out.display()))
        .arg(&target)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(target)
}

fn load(path: &Path, args: &str) -> Arc<Model> {
    let spec: ModelSpec = format!("{}:{args}", path.display()).parse().expect("spec");
    Model::load(&spec, Arc::new(|line: &str| eprintln!("model: {line}")), None).expect("load the model")
}

/// Median ns of one edu DMA of `len` bytes each way: the command register's write alone (the
/// transfer runs inside it, dma_ns=0; the addresses and count stay programmed from one to the next).
fn edu_transfer_ns(bar: &dyn BarRegion, bus: u64, len: u64) -> [f64; 2] {
    let mut out = [0.0; 2];
    for (i, cmd) in [1u64, 3].into_iter().enumerate() {
        let (src, dst) = if cmd == 1 { (bus, 0x40000) } else { (0x40000, bus) };
        bar.write(0x80, Width::B64, src).expect("src");
        bar.write(0x88, Width::B64, dst).expect("dst");
        bar.write(0x90, Width::B64, len).expect("count");
        out[i] = per_call(5000, || bar.write(0x98, Width::B32, cmd).expect("cmd"));
        assert_eq!(bar.read(0x98, Width::B32).expect("cmd") & 1, 0, "the transfer completed");
    }
    out
}

/// Median ns of one XDMA transfer of `len` bytes each way on the in-process sim card.
fn xdma_transfer_ns(dev: &SimDevice, len: u64) -> [f64; 2] {
    set_bus_master(dev, true).expect("bus master");
    let alloc = SimAllocator::new(dev.host_map().clone());
    let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).expect("BAR4");
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).expect("engine");
    let buf = alloc.alloc(4096).expect("buffer");
    let mut out = [0.0; 2];
    for (i, dir) in [Direction::H2c, Direction::C2h].into_iter().enumerate() {
        eng.prepare(&*buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len }).expect("prepare");
        out[i] = per_call(500, || eng.run(TIMEOUT).expect("run"));
    }
    out
}

fn main() {
    println!("users' models (pcibench_model.h), in process: the ABI's own cost; MB = 10^6 B");
    let Some(edu_so) = make("examples/models/edu-c", "edu.so") else {
        println!("   the edu C model did not build (make and a C compiler are needed): nothing measured");
        return;
    };
    let edu = load(&edu_so, "dma_bits=64,dma_ns=0");
    let edu_dev = edu.device();
    let sim = SimDevice::new().expect("sim card");

    println!("1. one 32-bit register access, ns (median of 5 runs)");
    println!("   {:<34} {:>10} {:>10}", "", "read", "write");
    let sim_bar = sim.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).expect("BAR4");
    let edu_bar = edu_dev.open_bar(0, Mapping::Uc, IoMode::Mmap).expect("BAR0");
    let rows: [(&str, &dyn BarRegion, u64, u32); 2] = [
        ("sim card register model", &*sim_bar, 0x0008, 2_000_000),
        ("edu C model through the ABI", &*edu_bar, 0x04, 50_000),
    ];
    let mut figures = Vec::new();
    for (name, bar, write_at, n) in rows {
        let read = per_call(n, || {
            std::hint::black_box(bar.read(0, Width::B32).expect("read"));
        });
        let write = per_call(n, || bar.write(write_at, Width::B32, 0).expect("write"));
        println!("   {name:<34} {read:>10.0} {write:>10.0}");
        figures.push(read);
    }
    println!("   {:<34} {:>10.0}", "ABI cost per access (read)", figures[1] - figures[0]);

    println!("2. one DMA transfer, ns (median); per byte: (4095 B - 64 B) / 4031");
    set_bus_master(&edu_dev, true).expect("bus master");
    let alloc = SimAllocator::new(edu.host_map().clone());
    let buf = alloc.alloc(4096).expect("buffer");
    let bus = buf.segments()[0].bus;
    // The same write with no transfer behind it (the liveness register): the hand-off alone.
    let plain = per_call(5000, || edu_bar.write(0x04, Width::B32, 0).expect("write"));
    let (e64, e4k) = (edu_transfer_ns(&*edu_bar, bus, 64), edu_transfer_ns(&*edu_bar, bus, 4095));
    let (x64, x4k) = (xdma_transfer_ns(&sim, 64), xdma_transfer_ns(&sim, 4095));
    println!(
        "   {:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "", "h2c 64", "h2c 4095", "ns/B", "c2h 64", "c2h 4095", "ns/B"
    );
    for (name, a, b) in [("edu C model: the command's write", e64, e4k), ("sim card XDMA engine: one run", x64, x4k)] {
        let per = |i: usize| (b[i] - a[i]) / 4031.0;
        println!(
            "   {name:<34} {:>9.0} {:>9.0} {:>9.3} {:>9.0} {:>9.0} {:>9.3}",
            a[0],
            b[0],
            per(0),
            a[1],
            b[1],
            per(1)
        );
    }
    println!(
        "   {:<34} {:>9.0}   (a register write with no transfer: the model's figures less this are its DMA)",
        "edu C model: a plain write", plain
    );

    println!("3. the Verilator example driven by pcibench's edu engine (4095-byte transfers, both ways)");
    let Some(rtl_so) = make("examples/models/edu-rtl", "edu_rtl.so") else {
        println!("   not built: install verilator (apt-get install verilator)");
        return;
    };
    let rtl = load(&rtl_so, "dma_bits=64");
    // SAFETY: the example's own counter function, `uint64_t edu_rtl_cycles(void)`; the library
    // is already loaded (dlopen counts references) and never unloaded.
    let cycles: unsafe extern "C" fn() -> u64 = unsafe {
        let lib = libloading::Library::new(&rtl_so).expect("reopen");
        let f = *lib.get::<unsafe extern "C" fn() -> u64>(b"edu_rtl_cycles").expect("edu_rtl_cycles");
        std::mem::forget(lib);
        f
    };
    let dev = rtl.device();
    set_bus_master(&dev, true).expect("bus master");
    let alloc = SimAllocator::new(rtl.host_map().clone());
    let bar0 = dev.open_bar(0, Mapping::Uc, IoMode::Mmap).expect("BAR0");
    let read_ns = per_call(5000, || {
        std::hint::black_box(bar0.read(0, Width::B32).expect("read"));
    });
    let mut eng = EduEngine::new(bar0, 64).expect("edu engine");
    let (src, dst) = (alloc.alloc(4096).expect("buffer"), alloc.alloc(4096).expect("buffer"));
    // SAFETY: 4096 bytes owned by `src`; no transfer runs.
    unsafe { std::slice::from_raw_parts_mut(src.as_ptr(), 4096) }
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8 ^ 0x5a);
    let (c0, t0, n) = (unsafe { cycles() }, Instant::now(), 100);
    for _ in 0..n {
        for (dir, buf) in [(Direction::H2c, &src), (Direction::C2h, &dst)] {
            eng.prepare(&**buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len: 4095 }).expect("prepare");
            eng.run(TIMEOUT).expect("run");
        }
    }
    // SAFETY: as above.
    let (c1, wall) = (unsafe { cycles() }, t0.elapsed().as_secs_f64());
    // SAFETY: both buffers are 4096 bytes; no transfer runs.
    let same =
        unsafe { std::slice::from_raw_parts(src.as_ptr(), 4095) == std::slice::from_raw_parts(dst.as_ptr(), 4095) };
    assert!(same, "data did not survive h2c then c2h through the RTL");
    let simulated = (c1 - c0) as f64;
    println!("   {:<34} {:>12.0}", "simulated cycles per second", simulated / wall);
    println!("   {:<34} {:>12.0}", "cycles per transfer (with polls)", simulated / (2 * n) as f64);
    println!("   {:<34} {:>12.0}", "register read through the ABI, ns", read_ns);
    println!("   {:<34} {:>12.2}", "MB/s through the engine", (2 * n * 4095) as f64 / wall / 1e6);
}
