//! Self-timed benchmark of the open loop's own cost (`cargo bench -p pcibench --bench
//! open_loop`), the figure `--rate` rows report as "the loop's own cost":
//! 1. ns per transfer on a card that completes at once, one in flight (post, reap, two clock
//!    readings, a histogram record), on the latency clock (the invariant TSC on x86-64; this
//!    bench assumes the host's is, as `pcibench latency` checks /proc/cpuinfo for) and on
//!    CLOCK_MONOTONIC; median of 7 runs of 1M transfers.
//! 2. Whether one core keeps a schedule of 64 B transfers at 10, 20, 40 and 80 M/s on such a
//!    card that never fills: the fraction posted over 1 µs late (the bar: 40 M/s, under 1%).
//!
//! Run it idle and with CPU hogs beside it (`for i in 1 2; do (while :; do :; done) & done`):
//! what a loaded host does to the schedule is the point of the late count.

use pcibench::bench::latency::row::latency_clock;
use pcibench::bench::rate::open_loop::{self, NullSubmit, Schedule};
use pcibench::bench::sample::clock::{Clock, MonotonicClock};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let tsc = latency_clock(Some(true));
    let mono = MonotonicClock;
    println!("1. the open loop's own cost per transfer (null card, one in flight), median of 7 x 1M");
    for (name, clock) in [(tsc.name(), tsc.as_ref() as &dyn Clock), (mono.name(), &mono as &dyn Clock)] {
        let runs: Vec<f64> = (0..7).map(|_| open_loop::loop_cost_ns(clock, 1_000_000).expect("loop")).collect();
        println!("   {name:<60} {:>7.1} ns a transfer ({:.1} M/s at most)", median(runs.clone()), 1e3 / median(runs));
    }
    println!("2. a schedule of 64 B transfers on one core (a null card that never fills, 0.5 s each), {}", tsc.name());
    println!("   {:>8} {:>10} {:>10} {:>8} {:>12}", "offered", "achieved", "posted", "late %", "worst lag");
    let stop = AtomicBool::new(false);
    for mops in [10.0, 20.0, 40.0, 80.0] {
        let count = (mops * 1e6 * 0.5) as u64;
        let s = Schedule { count, interval_ns: 1e3 / mops, budget_ns: 2_000_000_000, timeout: Duration::from_secs(1) };
        let r = open_loop::run(&mut NullSubmit::deep(u32::MAX), tsc.as_ref(), &s, &stop).expect("loop");
        println!(
            "   {:>6} M {:>8.2} M {:>10} {:>8.3} {:>9.1} µs",
            mops,
            r.achieved_ops() / 1e6,
            r.posted,
            r.late as f64 * 100.0 / r.posted.max(1) as f64,
            r.worst_lag_ns as f64 / 1e3
        );
    }
}
