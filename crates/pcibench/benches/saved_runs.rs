//! Self-timed benchmark of the commands that read saved runs (`cargo bench -p pcibench --bench
//! saved_runs`): `export`, `plot` and `compare` on saved runs of 10^3, 10^4 and 10^5 reports,
//! each read back from a file as the commands do (`saved::read`, its checks included). It prints
//! the time per report, so growth shows: linear work is a flat column (issue 43: export was
//! quadratic, 2.75 s for 10^4 reports and minutes for 10^5).
//!
//! Every report is one DMA row of the same configuration, the case that made export's label
//! search quadratic; every tenth report changes the size, so plot draws real curves.

use pcibench::access::Via;
use pcibench::bench::result::{Kind, Report, Row, Verify};
use pcibench::bench::sample::stats::Samples;
use pcibench::direction::Direction;
use pcibench::host::Host;
use pcibench::report::openmetrics;
use pcibench::report::plot::{self, Input};
use pcibench::results::compare;
use pcibench::results::saved::{self, SavedRun};
use std::path::Path;
use std::time::Instant;

fn run_of(n: usize, scale: f64) -> SavedRun {
    let reports = (0..n)
        .map(|i| {
            let mut r = Report::new(Kind::Dma, "sim", true, Via::Sim, 20.0);
            r.engine = Some("sim".into());
            let size = 4096u64 << (i / 10 % 8);
            let mut row = Row::new(if i % 2 == 0 { Direction::H2c } else { Direction::C2h }, size);
            let secs: Vec<f64> = (0..16).map(|k| size as f64 / 5e9 * scale * (1.0 + k as f64 / 100.0)).collect();
            row.stats = Samples { size, batch: 1, secs, extra: 0 }.stats();
            row.verify = Some(Verify::Ok);
            r.results.push(row);
            r
        })
        .collect();
    // As the library makes one: no device, a host with no kernel state.
    SavedRun::new(&Host::with_root("/nonexistent-root"), "dma", None, reports, Vec::new())
}

/// Seconds `f` takes, the best of `tries` (the least disturbed by the rest of the host).
fn best(tries: usize, mut f: impl FnMut() -> usize) -> f64 {
    (0..tries)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn line(what: &str, n: usize, secs: f64) {
    println!("{what:<8} {n:>7} reports  {:>9.1} ms  {:>7.2} us/report", secs * 1e3, secs / n as f64 * 1e6);
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for n in [1_000, 10_000, 100_000] {
        let (a, b) = (dir.path().join(format!("a{n}.json")), dir.path().join(format!("b{n}.json")));
        for (path, scale) in [(&a, 1.0), (&b, 1.1)] {
            std::fs::write(path, saved::to_json(&run_of(n, scale)).expect("encode")).expect("write");
        }
        let tries = if n >= 100_000 { 1 } else { 3 };
        let read = |p: &Path| saved::read(p).expect("read");
        line("read", n, best(tries, || read(&a).reports.len()));
        line("export", n, best(tries, || openmetrics::saved_run(&read(&a)).len()));
        line(
            "plot",
            n,
            best(tries, || {
                let run = read(&a);
                plot::svg(&[Input { label: "a".into(), run: &run }], None).expect("plot").len()
            }),
        );
        line(
            "compare",
            n,
            best(tries, || {
                let (ra, rb) = (read(&a), read(&b));
                compare::compare(("a", &ra), ("b", &rb), 5.0).expect("compare").rows.len()
            }),
        );
    }
}
