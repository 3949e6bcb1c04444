//! Self-timed benchmark of `pcibench plot` (`cargo bench -p pcibench --bench plot`): how long the
//! SVG takes for 100,000 points, as bandwidth curves (10 curves of 10,000 sizes; 100 of 1,000;
//! each point with its band and the link model's ceiling) and as one latency CDF of 100,000
//! points. Synthetic saved runs, built in memory: what is timed is the drawing alone (the
//! issue's bar: well under a second).

use pcibench::access::Via;
use pcibench::bench::result::{Kind, LatencyFigures, Report, Row, Verify};
use pcibench::bench::sample::stats::Samples;
use pcibench::direction::Direction;
use pcibench::host::Host;
use pcibench::report::plot::{self, Input};
use pcibench::results::saved::SavedRun;
use std::time::Instant;

/// A saved run of `reports` as the library makes one (no device; a host with no kernel state).
fn run_of(reports: Vec<Report>) -> SavedRun {
    SavedRun::new(&Host::with_root("/nonexistent-root"), "dma", None, reports, Vec::new())
}

/// `curves` DMA curves (queue counts tell them apart) of `points` sizes each.
fn bandwidth(curves: u16, points: u64) -> SavedRun {
    let mut r = Report::new(Kind::Dma, "bench", false, Via::Vfio, 20.0);
    r.engine = Some("qdma".into());
    for q in 1..=curves {
        for i in 0..points {
            let size = 64 + i * 61;
            let mut row = Row::new(if q % 2 == 0 { Direction::C2h } else { Direction::H2c }, size);
            row.queues = Some(q);
            // 16 samples around a curve that rises with the size.
            let secs: Vec<f64> = (0..16)
                .map(|k| size as f64 / (1e9 * (1.0 + (size as f64).ln() / 10.0)) * (1.0 + k as f64 / 200.0))
                .collect();
            row.stats = Samples { size, batch: 1, secs, extra: 0 }.stats();
            row.limit_mbps = Some(6000.0 + (size as f64).ln());
            row.verify = Some(Verify::Ok);
            r.results.push(row);
        }
    }
    run_of(vec![r])
}

fn latency(points: usize) -> SavedRun {
    let mut r = Report::new(Kind::Dma, "bench", false, Via::Vfio, 20.0);
    let mut row = Row::new(Direction::H2c, 64);
    let cdf: Vec<[f64; 2]> = (1..=points).map(|i| [900.0 + i as f64 * 0.37, i as f64 / points as f64]).collect();
    row.latency = Some(LatencyFigures { samples: points as u64, cdf, ..LatencyFigures::default() });
    r.results.push(row);
    run_of(vec![r])
}

fn time(name: &str, run: &SavedRun) {
    let inputs = [Input { label: "bench".into(), run }];
    let points: usize = run.rows().map(|(_, x)| x.latency.as_ref().map_or(1, |l| l.cdf.len())).sum();
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..7 {
        let t = Instant::now();
        let svg = plot::svg(&inputs, None).expect("plot");
        times.push(t.elapsed().as_secs_f64());
        bytes = std::hint::black_box(svg).len();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{name:<34} {points:>8} points  median {:>7.1} ms  (min {:.1}, max {:.1})  {:>6.1} MiB of SVG",
        times[3] * 1e3,
        times[0] * 1e3,
        times[6] * 1e3,
        bytes as f64 / (1 << 20) as f64
    );
}

fn main() {
    time("bandwidth, 10 curves x 10,000", &bandwidth(10, 10_000));
    time("bandwidth, 100 curves x 1,000", &bandwidth(100, 1_000));
    time("latency CDF, 1 curve x 100,000", &latency(100_000));
}
