//! Self-timed benchmark of the host's side of QDMA stream queues
//! (`cargo bench -p pcibench --bench qdma_stream`), against `sim-qdma-st` built with
//! `stream_no_data`: its far end moves no data (H2C packets are consumed unread, C2H packets
//! write only their 8-byte completion entries), so what is timed is the driver's path per
//! packet plus the model's doorbell handling (a register call, a lock, one entry store per C2H
//! packet), which a real card does in hardware: an upper bound of the host's cost.
//!
//! 1. C2H: per run 4096 packets of 64 B on one queue with a 2048-descriptor ring, so the run
//!    refills the ring: completion ring reap (status descriptor index, colour, error, length), buffers given back by the
//!    C2H PIDX doorbell (every 32), entries by the CMPT CIDX doorbell (every reap pass), the
//!    generator started once.
//! 2. H2C: per run 4096 packets of 64 B: descriptor writes, PIDX doorbells (every 32), status
//!    writeback polled.
//!
//! Each is measured idle and with two CPU hogs spinning on other threads. Target (issue #40):
//! at least 80 M packets/s of 64 B on one core, 12.5 ns per packet.

use pcibench::access::sim::SimDevice;
use pcibench::access::{DeviceAccess, IoMode, Mapping};
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::qdma::st::Packets;
use pcibench::dma::engines::qdma::{QdmaEngine, QdmaOptions};
use pcibench::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use pcibench::sim::qdma::model::{QdmaModel, QdmaModelConfig};
use pcibench::sim::qdma::stream_card::{self, QdmaStreamCard};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::median;

const TIMEOUT: Duration = Duration::from_secs(10);
const PACKETS: u64 = 4096;
const SIZE: u64 = 64;

fn engine() -> (SimDevice, QdmaEngine, Arc<QdmaModel>) {
    let cfg = QdmaModelConfig { stream_no_data: true, ..Default::default() };
    let (built, model) = stream_card::build(cfg).expect("sim card");
    let dev = SimDevice::from_card("sim-qdma-st", &pcibench::sim::CardSpec::info(&QdmaStreamCard), built);
    pcibench::access::set_bus_master(&dev, true).expect("bus master");
    let alloc = SimAllocator::new(dev.host_map().clone());
    let bar = dev.open_bar(0, Mapping::Uc, IoMode::Mmap).expect("BAR0");
    let user = dev.open_bar(2, Mapping::Uc, IoMode::Mmap).expect("BAR2");
    let mut e =
        QdmaEngine::new_stream(bar, user, &alloc, QdmaOptions { queues: 1, ..Default::default() }).expect("engine");
    e.start().expect("start");
    (dev, e, model)
}

/// Median ns per packet over `runs` runs of the prepared batch.
fn per_packet(eng: &mut QdmaEngine, runs: usize) -> f64 {
    eng.run(TIMEOUT).expect("warm-up");
    let mut v: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            eng.run(TIMEOUT).expect("run");
            t0.elapsed().as_nanos() as f64 / PACKETS as f64
        })
        .collect();
    median(&mut v)
}

fn measure(dir: Direction) -> f64 {
    let (dev, mut eng, _model) = engine();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let stride = if dir == Direction::C2h { Packets::of(SIZE).stride() } else { SIZE };
    let buf: Box<dyn DmaBuffer> = alloc.alloc((PACKETS * stride) as usize).expect("buffer");
    let work: Vec<Work> = (0..PACKETS)
        .map(|k| Work { buf: &*buf, t: Transfer { dir, buf_offset: k * stride, card_addr: 0, len: SIZE }, queue: 0 })
        .collect();
    eng.prepare_batch(&work).expect("prepare");
    per_packet(&mut eng, 200)
}

/// The model's own share of the C2H figure: its generator writing 2047 completion entries
/// into credits the driver posted (one register write, no driver work), per packet.
fn model_share() -> f64 {
    let mut v: Vec<f64> = (0..50)
        .map(|_| {
            let (dev, mut eng, model) = engine();
            let alloc = SimAllocator::new(dev.host_map().clone());
            let n = eng.ring_size() as u64 - 1;
            let stride = Packets::of(SIZE).stride();
            let buf = alloc.alloc((n * stride) as usize).expect("buffer");
            let work: Vec<Work> = (0..n)
                .map(|k| Work {
                    buf: &*buf,
                    t: Transfer { dir: Direction::C2h, buf_offset: k * stride, card_addr: 0, len: SIZE },
                    queue: 0,
                })
                .collect();
            eng.prepare_batch(&work).expect("prepare");
            eng.submit().expect("post the buffers");
            let qid = eng.qbase();
            model.example_write(0x0, qid);
            model.example_write(0x4, SIZE as u32);
            model.example_write(0x20, n as u32);
            let t0 = Instant::now();
            model.example_write(0x8, 2);
            let ns = t0.elapsed().as_nanos() as f64 / n as f64;
            assert_eq!(model.stream_counts().2, n, "every packet written");
            ns
        })
        .collect();
    median(&mut v)
}

fn row(what: &str, ns: f64) {
    let verdict = if ns <= 12.5 { "met" } else { "NOT met" };
    println!("   {what:<28} {ns:>8.1} ns/packet {:>8.1} M packets/s  (target >= 80: {verdict})", 1e3 / ns);
}

fn main() {
    println!("QDMA stream queues: the host's path per 64 B packet against sim-qdma-st moving no data");
    println!("(simulated card: the model's doorbell handling runs on the measuring core and is included)");
    for hogs in [0, 2] {
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..hogs)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        println!(" with {hogs} CPU hogs:");
        let c2h = measure(Direction::C2h);
        row("C2H (reap, refill, doorbells)", c2h);
        let model = model_share();
        println!("   {:<28} {model:>8.1} ns/packet of that is the model writing entries", "");
        row("C2H, the driver's share", (c2h - model).max(0.0));
        row("H2C (post, doorbells, reap)", measure(Direction::H2c));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().for_each(|t| t.join().expect("hog"));
    }
}
