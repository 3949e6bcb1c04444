//! Helpers the self-timed engine benchmarks share (`#[path = "common/mod.rs"] mod common;`).

#![allow(dead_code)] // each benchmark uses its own subset

use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::{Addressing, Direction, DmaAllocator, DmaBuffer, Engine, Segment, Transfer};
use std::time::{Duration, Instant};

/// The median of `v` (upper median for an even count); sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// ns per call of `op`, median of 5 runs of `n` calls (calls too short to time alone).
pub fn per_call(n: u32, mut op: impl FnMut()) -> f64 {
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                op();
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .collect();
    median(&mut runs)
}

/// Nanoseconds one `Instant::now()` pair costs (subtracted from single-call timings).
pub fn timer_overhead() -> f64 {
    let mut v: Vec<f64> = (0..200_000)
        .map(|_| {
            let t = Instant::now();
            t.elapsed().as_nanos() as f64
        })
        .collect();
    median(&mut v)
}

/// A view of a buffer that reports one bus segment per `piece` bytes, so a driver builds one
/// descriptor per piece (bus-contiguous pieces, but drivers do not merge segments).
pub struct Pieces<'a> {
    inner: &'a dyn DmaBuffer,
    segs: Vec<Segment>,
}

impl<'a> Pieces<'a> {
    pub fn new(inner: &'a dyn DmaBuffer, piece: u64, count: u64) -> Self {
        let base = inner.segments()[0].bus;
        let segs = (0..count).map(|i| Segment { offset: i * piece, bus: base + i * piece, len: piece }).collect();
        Pieces { inner, segs }
    }
}

impl DmaBuffer for Pieces<'_> {
    fn as_ptr(&self) -> *mut u8 {
        self.inner.as_ptr()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn segments(&self) -> &[Segment] {
        &self.segs
    }
    fn addressing(&self) -> Addressing {
        self.inner.addressing()
    }
    fn describe(&self) -> String {
        format!("{} in pieces", self.inner.describe())
    }
}

/// The median of `iters` timings (ns) of `timed(e)`, each round followed by `after(e)` untimed,
/// the first `warmup` rounds discarded and the timer's own cost `timer` subtracted (at least 0).
pub fn median_timed<E>(
    e: &mut E,
    warmup: usize,
    iters: usize,
    timer: f64,
    mut timed: impl FnMut(&mut E),
    mut after: impl FnMut(&mut E),
) -> f64 {
    let mut v = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let t0 = Instant::now();
        timed(e);
        let dt = t0.elapsed().as_nanos() as f64 - timer;
        after(e);
        if i >= warmup {
            v.push(dt.max(0.0));
        }
    }
    median(&mut v)
}

/// The descriptor-chain engines' (XDMA, umem) pieces: 64 bytes each, so a run's cost is the
/// per-descriptor work, the data movement being negligible.
pub const PIECE: u64 = 64;

fn transfer(dir: Direction, len: u64) -> Transfer {
    Transfer { dir, buf_offset: 0, card_addr: 0, len }
}

/// Section 1 of a chain engine's benchmark: host-side submission alone. For each chain length,
/// `prepared` gives an engine with an H2C chain of that many `PIECE`s prepared once on the
/// pieces it is handed; `submit` is timed alone (the timer's cost `timer` subtracted) and
/// `wait` runs untimed after it; `rounds(n)` is (warm-up rounds, timed rounds).
pub fn submission<E>(
    alloc: &SimAllocator,
    timer: f64,
    rounds: impl Fn(u64) -> (usize, usize),
    mut prepared: impl FnMut(&Pieces, Transfer) -> E,
    submit: impl Fn(&mut E),
    wait: impl Fn(&mut E),
) {
    println!("   {:>12} {:>14} {:>18}", "descriptors", "ns per run", "ns per descriptor");
    let buf = alloc.alloc((4096 * PIECE) as usize).expect("buffer");
    for n in [1u64, 8, 64, 512, 4096] {
        let view = Pieces::new(&*buf, PIECE, n);
        let mut eng = prepared(&view, transfer(Direction::H2c, n * PIECE));
        let (warmup, iters) = rounds(n);
        let m = median_timed(&mut eng, warmup, iters, timer, &submit, &wait);
        println!("   {n:>12} {m:>14.0} {:>18.1}", m / n as f64);
    }
}

/// Section 2: end to end per descriptor: `run` (submit + the model + polling) on C2H chains of
/// `PIECE`s, divided by the chain length.
pub fn end_to_end<E: Engine>(alloc: &SimAllocator, timeout: Duration, mut engine: impl FnMut() -> E) {
    println!("2. end to end per descriptor (run on chains of 64-byte pieces: submit + model + poll)");
    println!("   {:>12} {:>14} {:>18}", "descriptors", "us per run", "ns per descriptor");
    let buf = alloc.alloc((4096 * PIECE) as usize).expect("buffer");
    for n in [1u64, 16, 256, 4096] {
        let view = Pieces::new(&*buf, PIECE, n);
        let mut eng = engine();
        eng.prepare(&view, &transfer(Direction::C2h, n * PIECE)).expect("prepare");
        let iters = (200_000 / n).clamp(200, 20_000) as usize;
        let m = median_timed(&mut eng, 0, iters, 0.0, |e| e.run(timeout).expect("run"), |_| {});
        println!("   {n:>12} {:>14.2} {:>18.1}", m / 1000.0, m / n as f64);
    }
}

/// Section 3: `prepare` (building and writing a chain of 4096 `PIECE`s) per descriptor.
pub fn prepare_cost<E: Engine>(alloc: &SimAllocator, mut eng: E) {
    let buf = alloc.alloc((4096 * PIECE) as usize).expect("buffer");
    let n = 4096u64;
    let view = Pieces::new(&*buf, PIECE, n);
    let t = transfer(Direction::H2c, n * PIECE);
    let m = median_timed(&mut eng, 0, 200, 0.0, |e| e.prepare(&view, &t).expect("prepare"), |_| {});
    println!(
        "3. prepare (build + write the chain once): {:.1} ns per descriptor ({n} descriptors, {:.0} us)",
        m / n as f64,
        m / 1000.0
    );
}
