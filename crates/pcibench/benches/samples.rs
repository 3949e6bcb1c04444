//! `cargo bench --bench samples [-- RUNS] [--cpu N] [--total BYTES] [--floor NS]`: which samples of `run sim`'s
//! PIO rows are slow, and why (issue #26: most of those rows were flagged `!noisy`).
//!
//! Runs the PIO part of `pcibench run sim` (every BAR, mapping, the 64-bit, widest and memcpy
//! routines, both directions) RUNS times through the real runner, with a clock that logs every
//! reading and a progress hook that marks which timed calls were samples (the warm-up and the
//! batch calibration are not). For each row it finds the samples slower than 1.5x the row's
//! median and prints, over all runs:
//! - where they fall: the sample index (the first samples of a row would mean a warm-up that
//!   is too short; a fixed index, calibration) and the share of rows with a slow sample;
//! - whether they are periodic: the time from each slow sample to the previous one anywhere in
//!   the run (a timer tick shows as multiples of 1/HZ), and the local timer interrupts the
//!   measuring CPU took during the rows (/proc/interrupts LOC) against the slow samples;
//! - how much slower they are (time over the median, µs): a fixed cost (an interrupt) or a
//!   share of the sample (the copy itself slower).
//!
//! Self-timed; figures depend on the host: run it on an idle one, pinned.

use pcibench::bench::pio::{self, PioPlan};
use pcibench::bench::result::MapMode;
use pcibench::bench::sample::clock::{Clock, MonotonicClock};
use pcibench::bench::sample::sampler::{Progress, Sampling};
use pcibench::direction::Direction;
use pcibench::host::Host;
use pcibench::mmio::{self, Width};
use pcibench::session::Session;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy)]
enum Ev {
    Read(u64),
    Did,
    Sample,
}

/// The real clock, every reading and batch logged; `floor` is the shortest sample (the real
/// clock's, or another to compare: `--floor 0` is the rule before issue #26).
struct Logging<'a> {
    log: &'a Mutex<Vec<Ev>>,
    floor: u64,
}

impl Clock for Logging<'_> {
    fn now_ns(&self) -> u64 {
        let t = MonotonicClock.now_ns();
        self.log.lock().unwrap().push(Ev::Read(t));
        t
    }
    fn sample_floor_ns(&self) -> u64 {
        self.floor
    }
    fn did(&self, transfers: u64, _bytes: u64) {
        let _ = transfers;
        self.log.lock().unwrap().push(Ev::Did);
    }
}

struct Marks<'a> {
    log: &'a Mutex<Vec<Ev>>,
}

impl Progress for Marks<'_> {
    fn add(&mut self, _bytes: u64) {
        self.log.lock().unwrap().push(Ev::Sample);
    }
}

/// One timed call: start, end, and whether it was a sample.
#[derive(Debug, Clone, Copy)]
struct Call {
    t0: u64,
    t1: u64,
    sample: bool,
}

/// Timed calls (Read, Did, Read[, Sample]) from the log; the timer-overhead probes (Read, Read
/// with no Did) are skipped.
fn calls(log: &[Ev]) -> Vec<Call> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < log.len() {
        match (log[i], log[i + 1], log[i + 2]) {
            (Ev::Read(t0), Ev::Did, Ev::Read(t1)) => {
                let sample = matches!(log.get(i + 3), Some(Ev::Sample));
                out.push(Call { t0, t1, sample });
                i += if sample { 4 } else { 3 };
            }
            _ => i += 1,
        }
    }
    out
}

/// The rows' samples: runs of sample calls, one per sampled row, in row order.
fn rows(calls: &[Call]) -> Vec<Vec<Call>> {
    let mut rows: Vec<Vec<Call>> = Vec::new();
    let mut in_row = false;
    for c in calls {
        if c.sample {
            if !in_row {
                rows.push(Vec::new());
                in_row = true;
            }
            rows.last_mut().unwrap().push(*c);
        } else {
            in_row = false;
        }
    }
    rows
}

fn local_timer_interrupts(cpu: usize) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("LOC:"))?;
    line.split_whitespace().nth(1 + cpu)?.parse().ok()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut runs, mut cpu, mut total) = (10usize, None, 64u64 << 20);
    let mut floor = MonotonicClock.sample_floor_ns();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cpu" => cpu = args.next().and_then(|v| v.parse::<u32>().ok()),
            "--total" => total = args.next().and_then(|v| pcibench::units::parse_size(&v).ok()).unwrap_or(total),
            "--floor" => floor = args.next().and_then(|v| v.parse().ok()).unwrap_or(floor),
            n => runs = n.parse().unwrap_or(runs),
        }
    }
    if let Some(c) = cpu {
        pcibench::os::cpu::pin_current_thread(c).expect("pin");
    }
    let here = pcibench::os::cpu::current_cpu().unwrap_or(0) as usize;
    let host = Host::default();
    let session = Session::open(&host, &"sim".parse().unwrap(), None).expect("the sim card");
    let widest =
        [Width::V512, Width::V256, Width::V128].into_iter().find(|w| mmio::available(*w).is_ok()).unwrap_or(Width::B64);
    let plan = PioPlan {
        bars: vec![0, 2],
        maps: MapMode::ALL.to_vec(),
        dirs: vec![Direction::H2c, Direction::C2h],
        widths: vec![Width::B64, widest, Width::Memcpy],
        sizes: Vec::new(),
        total,
        budget_ns: None,
        offset: 0,
        io: pcibench::access::IoMode::Mmap,
        allow_write: true,
        strict_map: true,
        strict_width: true,
        registers: Vec::new(),
    };
    println!(
        "run sim's PIO rows, {runs} runs, {} per row, measuring on CPU {here}{}, samples of at least {} µs",
        pcibench::units::human_size(total),
        if cpu.is_some() { " (pinned)" } else { " (not pinned)" },
        floor as f64 / 1e3
    );

    // Per sample index (capped): slow samples and samples seen.
    let mut by_index: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let (mut rows_seen, mut rows_slow, mut slow_total, mut samples_total) = (0u64, 0u64, 0u64, 0u64);
    let (mut ticks_total, mut row_ns_total) = (0u64, 0u64);
    let mut gaps_us: Vec<f64> = Vec::new();
    let mut excess_us: Vec<f64> = Vec::new();
    let mut excess_share: Vec<f64> = Vec::new();
    let mut flagged = 0usize;
    for _ in 0..runs {
        let log = Mutex::new(Vec::with_capacity(1 << 20));
        let clock = Logging { log: &log, floor };
        let mut marks = Marks { log: &log };
        let stop = AtomicBool::new(false);
        let loc0 = local_timer_interrupts(here);
        let mut s = Sampling::new(&clock, &stop, &mut marks, None);
        let report = pio::run(session.dev.as_ref(), &session.device, &plan, &mut s).expect("pio run");
        let loc1 = local_timer_interrupts(here);
        flagged += report.results.iter().filter(|r| r.notes.iter().any(|n| n.is_flag())).count();
        let log = log.into_inner().unwrap();
        let calls = calls(&log);
        let mut last_slow: Option<u64> = None;
        for row in rows(&calls) {
            rows_seen += 1;
            samples_total += row.len() as u64;
            row_ns_total += row.last().unwrap().t1 - row[0].t0;
            let d: Vec<f64> = row.iter().map(|c| (c.t1 - c.t0) as f64).collect();
            let m = median(&mut d.clone());
            let mut any = false;
            for (i, (c, t)) in row.iter().zip(&d).enumerate() {
                let e = by_index.entry(i.min(8)).or_default();
                e.1 += 1;
                if *t > 1.5 * m {
                    e.0 += 1;
                    any = true;
                    slow_total += 1;
                    excess_us.push((t - m) / 1e3);
                    excess_share.push((t - m) / m);
                    if let Some(p) = last_slow {
                        gaps_us.push((c.t0 - p) as f64 / 1e3);
                    }
                    last_slow = Some(c.t0);
                }
            }
            rows_slow += u64::from(any);
        }
        if let (Some(a), Some(b)) = (loc0, loc1) {
            ticks_total += b - a;
        }
    }
    println!(
        "rows: {rows_seen}, flagged by pcibench's rule (!noisy/!few): {flagged}; rows with a sample over 1.5x the median: {rows_slow}"
    );
    println!("samples: {samples_total}, slow: {slow_total} ({:.3}%)", 100.0 * slow_total as f64 / samples_total as f64);
    println!(
        "local timer interrupts on CPU {here} during the runs: {ticks_total} (about {:.0}/s over the rows' {:.1} ms)",
        ticks_total as f64 / (row_ns_total as f64 / 1e9),
        row_ns_total as f64 / 1e6
    );
    println!("slow samples by index in their row (index 8 stands for 8 and later):");
    for (i, (slow, seen)) in &by_index {
        println!("  {i:>2}: {slow:>6} of {seen:>8} ({:.3}%)", 100.0 * *slow as f64 / *seen as f64);
    }
    if !excess_us.is_empty() {
        let q = |v: &mut Vec<f64>, p: f64| {
            v.sort_by(f64::total_cmp);
            v[((v.len() - 1) as f64 * p) as usize]
        };
        println!(
            "time a slow sample took over the median, µs: p10 {:.1}, p50 {:.1}, p90 {:.1}; as a share of the median: p50 {:.2}",
            q(&mut excess_us, 0.1),
            q(&mut excess_us, 0.5),
            q(&mut excess_us, 0.9),
            q(&mut excess_share, 0.5)
        );
    }
    if !gaps_us.is_empty() {
        // Gaps as multiples of a 4 ms tick (HZ=250) and a 1 ms one (HZ=1000).
        let mut hist: BTreeMap<u64, u64> = BTreeMap::new();
        for g in &gaps_us {
            *hist.entry((g / 1000.0).round() as u64).or_default() += 1;
        }
        println!("time between consecutive slow samples, rounded to ms (count):");
        let line: Vec<String> = hist.iter().take(24).map(|(ms, n)| format!("{ms}ms:{n}")).collect();
        println!("  {}", line.join(" "));
    }
}
