//! Self-timed benchmark of CPU access to DMA buffers (`cargo bench -p pcibench --bench buffers`):
//! 1. The buffer runner's cached mmap access (`pcibench buffers`' own loop: parts timed, sync
//!    calls where the buffer has them) against a bare memcpy loop on the same buffer: the ratio
//!    shows what the measuring costs (target: within 5%).
//! 2. The cost of DMA_BUF_IOCTL_SYNC start+end against buffer size, where this host has
//!    /dev/udmabuf (the lab guest does; most hosts do not load the module).

use pcibench::bench::buffers::{self, BufferPlan};
use pcibench::bench::sample::clock::MonotonicClock;
use pcibench::bench::sample::sampler::Sampling;
use pcibench::direction::Direction;
use pcibench::dma::cpu::{anon::Anon, dmabuf::MemfdDmaBuf, CpuBuffer, Sync};
use pcibench::host::Host;
use pcibench::mmio::Width;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

const SIZE: usize = 16 << 20;
const REPS: usize = 64;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bare_memcpy(buf: &dyn CpuBuffer, dir: Direction) -> f64 {
    let view = buf.open(Sync::Coherent).expect("view");
    let mut host = vec![0x5au8; SIZE];
    let mut rates = Vec::new();
    for _ in 0..REPS {
        let t = Instant::now();
        // SAFETY: the buffer maps SIZE bytes; `host` is SIZE bytes and distinct.
        unsafe {
            match dir {
                Direction::H2c => std::ptr::copy_nonoverlapping(host.as_ptr(), view.ptr(), SIZE),
                Direction::C2h => std::ptr::copy_nonoverlapping(view.ptr(), host.as_mut_ptr(), SIZE),
            }
        }
        rates.push(SIZE as f64 / t.elapsed().as_secs_f64() / 1e6);
        std::hint::black_box(&mut host);
    }
    median(rates)
}

fn main() {
    let heap: Box<dyn CpuBuffer> = Box::new(Anon::new(SIZE as u64, false).expect("heap"));
    let clock = MonotonicClock;
    let stop = AtomicBool::new(false);
    let mut progress = ();
    println!("1. cached mmap access, 16 MiB heap buffer, median MB/s (MB = 10^6 bytes)");
    println!("   {:<6} {:>12} {:>12} {:>8}", "op", "runner", "bare memcpy", "ratio");
    for dir in [Direction::H2c, Direction::C2h] {
        // Interleave so both see the same machine state; best of three rounds each.
        let mut runner = Vec::new();
        let mut bare = Vec::new();
        for _ in 0..3 {
            bare.push(bare_memcpy(heap.as_ref(), dir));
            let mut s = Sampling::new(&clock, &stop, &mut progress, None);
            let plan =
                BufferPlan { widths: vec![Width::Memcpy], size: None, total: (SIZE * REPS) as u64, budget_ns: None };
            let r = buffers::run(std::slice::from_ref(&heap), &[], &plan, &mut s).expect("runner");
            let row = r.results.iter().find(|x| x.dir == dir).expect("row");
            runner.push(row.stats.as_ref().expect("stats").median_mbps);
        }
        let (r, b) = (median(runner), median(bare));
        let op = if dir == Direction::H2c { "write" } else { "read" };
        println!("   {op:<6} {r:>12.1} {b:>12.1} {:>8.3}", r / b);
    }
    println!("2. DMA_BUF_IOCTL_SYNC (start + end), /dev/udmabuf, median µs");
    let host = Host::with_root("/");
    for size in [64u64 << 10, 1 << 20, 16 << 20, 64 << 20] {
        match MemfdDmaBuf::new(&host, size) {
            Ok(b) => {
                let mut v = b.open(Sync::Explicit).expect("view");
                let mut t = Vec::new();
                for _ in 0..200 {
                    let t0 = Instant::now();
                    v.sync_for_cpu(0, size, Direction::H2c).expect("sync");
                    v.sync_for_device(0, size, Direction::H2c).expect("sync");
                    t.push(t0.elapsed().as_secs_f64() * 1e6);
                }
                println!("   {:>8} KiB {:>10.2}", size >> 10, median(t));
            }
            Err(e) => {
                println!("   not measured on this host: {e}");
                break;
            }
        }
    }
}
