//! Helpers the self-timed engine benchmarks share (`#[path = "common/mod.rs"] mod common;`).

#![allow(dead_code)] // each benchmark uses its own subset

use pcibench::dma::{Addressing, DmaBuffer, Segment};
use std::time::Instant;

/// The median of `v` (upper median for an even count); sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
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
