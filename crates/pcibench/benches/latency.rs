//! Self-timed benchmark of the latency loop itself (`cargo bench -p pcibench --bench latency`):
//! what one single-access sample costs beyond the access (the clock reading that ends it and
//! starts the next, the cost-model hook, the stop-flag check, the histogram insert), per clock,
//! so the tool's own share of a 500 ns MMIO read is known (target: under 30 ns a sample; the
//! shell, the part inside a sample's window, is measured and subtracted from every sample).
//! Also the histogram insert alone and an 8-byte read of host memory (the sim card's BAR) in
//! the loop, all medians of 5 runs of 2 million samples.

use pcibench::bench::sample::clock::{Clock, MonotonicClock};
use pcibench::bench::sample::histogram::LatencyHistogram;
use pcibench::bench::sample::sampler::Sampling;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

const SAMPLES: u64 = 2_000_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Wall time per sample of `Sampling::single` around `op`, ns (median of 5 runs).
fn per_sample(clock: &dyn Clock, mut op: impl FnMut()) -> (f64, u64) {
    let stop = AtomicBool::new(false);
    let mut none = |_: u64| {};
    let mut s = Sampling::new(clock, &stop, &mut none, None);
    let mut shell = 0;
    let runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let r = s
                .single(0, SAMPLES, 8, || {
                    op();
                    Ok(())
                })
                .expect("samples");
            shell = r.overhead_ns;
            std::hint::black_box(r.hist.len());
            t.elapsed().as_secs_f64() * 1e9 / SAMPLES as f64
        })
        .collect();
    (median(runs), shell)
}

/// The invariant-TSC clock, where there is one (x86-64).
fn tsc() -> Option<Box<dyn Clock>> {
    #[cfg(target_arch = "x86_64")]
    if let Some(c) = pcibench::bench::sample::tsc::TscClock::calibrate() {
        return Some(Box::new(c));
    }
    None
}

fn main() {
    let clocks: Vec<Box<dyn Clock>> =
        std::iter::once(Box::new(MonotonicClock) as Box<dyn Clock>).chain(tsc()).collect();
    println!("{:<72} {:>10} {:>10}", "clock", "ns/sample", "shell ns");
    for c in &clocks {
        let (ns, shell) = per_sample(c.as_ref(), || {});
        println!("{:<72} {:>10.1} {:>10}", c.name(), ns, shell);
    }
    // The histogram insert alone, over values spread like latencies (100 ns to 100 us).
    let mut h = LatencyHistogram::new();
    let runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut v = 100u64;
            for _ in 0..SAMPLES {
                v = v.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                h.record(100 + (v >> 47));
            }
            t.elapsed().as_secs_f64() * 1e9 / SAMPLES as f64
        })
        .collect();
    println!("{:<72} {:>10.1}", "histogram insert alone", median(runs));
    // A whole sample of an 8-byte volatile read of host memory (what `latency sim` times).
    let word = Box::new(0u64);
    let p: *const u64 = &*word;
    for c in &clocks {
        // SAFETY: `p` points at a live, aligned u64.
        let (ns, _) = per_sample(c.as_ref(), || unsafe {
            std::hint::black_box(std::ptr::read_volatile(p));
        });
        println!("{:<72} {:>10.1}", format!("8-byte read of host memory, {}", c.name()), ns);
    }
}
