//! Figures read from a saved run are data, not trust: every number `plot` and `compare` compute
//! with (throughputs, limits, latencies, CDF points) is checked when the file is read, before
//! any axis, ratio or allocation is computed from it. A figure no measurement gives (negative,
//! subnormal such as 5e-324, non-finite, or beyond any device: a throughput above 10^12 MB/s)
//! refuses the file in one line naming the report, the row and the field. The same goes for every
//! other figure a row or report carries (engine counters, packets a second, a held load's rate,
//! the figures in notes), since `compare`, `plot` and `export` print them.

use crate::bench::result::{Note, Report, Row};
use crate::{Error, Result};

/// What a figure of each unit may be: 0, or within [lo, hi].
#[derive(Clone, Copy)]
struct Range {
    lo: f64,
    hi: f64,
    unit: &'static str,
}

/// MB/s: from a byte a millennium to a thousand times any link there is.
const MBPS: Range = Range { lo: 1e-9, hi: 1e12, unit: "MB/s" };
/// Percent (spread, efficiency).
const PCT: Range = Range { lo: 1e-12, hi: 1e12, unit: "%" };
/// Latency in microseconds or nanoseconds: up to some 30 years in ns.
const TIME: Range = Range { lo: 1e-9, hi: 1e18, unit: "" };
/// A CDF fraction.
const FRACTION: Range = Range { lo: 1e-12, hi: 1.0, unit: "" };
/// Things a second (transfers, packets): the range MB/s has.
const RATE: Range = Range { lo: 1e-9, hi: 1e12, unit: "a second" };
/// Seconds of wall time: a picosecond to some 300 years.
const SECS: Range = Range { lo: 1e-12, hi: 1e10, unit: "s" };
/// An engine's clock: a hertz to a terahertz.
const MHZ: Range = Range { lo: 1e-6, hi: 1e6, unit: "MHz" };
const HZ: Range = Range { lo: 1.0, hi: 1e12, unit: "Hz" };
/// A ratio of two figures (slowest sample to the median).
const RATIO: Range = Range { lo: 1e-12, hi: 1e12, unit: "" };

fn ok(v: f64, r: Range) -> bool {
    v == 0.0 || (v >= r.lo && v <= r.hi)
}

/// Refuse the reports of a saved run (read from `name`) when a figure is not one a measurement gives.
pub fn check(name: &str, reports: &[Report]) -> Result<()> {
    for (i, report) in reports.iter().enumerate() {
        check_report(name, i, report)?;
        for (j, row) in report.results.iter().enumerate() {
            check_row(name, i, j, row)?;
        }
    }
    Ok(())
}

/// The figures of report `i` (from 0) itself, not its rows'.
pub fn check_report(name: &str, i: usize, report: &Report) -> Result<()> {
    report_figures(report).map_err(|bad| refusal(name, &format!("report {}", i + 1), bad))
}

/// The figures of row `j` of report `i` (from 0).
pub fn check_row(name: &str, i: usize, j: usize, row: &Row) -> Result<()> {
    row_figures(row).map_err(|bad| refusal(name, &format!("report {}, row {}", i + 1, j + 1), bad))
}

fn refusal(name: &str, at: &str, (field, v, r): Bad) -> Error {
    let range = match r.unit {
        "" => format!("0, or {:e} to {:e}", r.lo, r.hi),
        u => format!("0, or {:e} to {:e} {u}", r.lo, r.hi),
    };
    Error::usage(format!("{name} is damaged: {at}: {field} is {v:e}, which no measurement gives ({range}): not read"))
}

/// The report's own figures: the timer's cost, the interrupt wake's.
fn report_figures(r: &Report) -> std::result::Result<(), Bad> {
    each(&[("timer_overhead_ns", r.timer_overhead_ns)], TIME)?;
    if let Some(w) = &r.irq_wake {
        each(&[("irq_wake min_ns", w.min_ns), ("irq_wake p50_ns", w.p50_ns), ("irq_wake max_ns", w.max_ns)], TIME)?;
    }
    Ok(())
}

/// A note's figures (`compare` and the table print them).
fn note_figures(n: &Note) -> std::result::Result<(), Bad> {
    match n {
        Note::Batched { timer_overhead_ns, .. } => each(&[("a note's timer_overhead_ns", *timer_overhead_ns)], TIME),
        Note::Noisy { cv_pct, min_vs_median } => {
            each(&[("a note's cv_pct", *cv_pct)], PCT)?;
            each(&[("a note's min_vs_median", *min_vs_median)], RATIO)
        }
        Note::AboveLinkModel { efficiency_pct } => each(&[("a note's efficiency_pct", *efficiency_pct)], PCT),
        Note::EngineCounters { counters, elapsed_s, .. } => {
            each(&[("a note's elapsed_s", *elapsed_s)], SECS)?;
            each(&[("a note's counters clock_hz", counters.clock_hz.unwrap_or(0.0))], HZ)
        }
        Note::Tracing { ns_per_event, share_pct, .. } => {
            each(&[("a note's ns_per_event", *ns_per_event)], TIME)?;
            each(&[("a note's share_pct", *share_pct)], PCT)
        }
        Note::SyncCost { ns_per_access, share_pct } => {
            each(&[("a note's ns_per_access", *ns_per_access)], TIME)?;
            each(&[("a note's share_pct", *share_pct)], PCT)
        }
        Note::Skipped { .. }
        | Note::AllOnes
        | Note::Interrupted { .. }
        | Note::FewSamples { .. }
        | Note::LinkHealth { .. }
        | Note::InFlight { .. }
        | Note::PartialSync { .. } => Ok(()),
    }
}

type Bad = (&'static str, f64, Range);

fn each(figures: &[(&'static str, f64)], r: Range) -> std::result::Result<(), Bad> {
    match figures.iter().find(|(_, v)| !ok(*v, r)) {
        Some((f, v)) => Err((f, *v, r)),
        None => Ok(()),
    }
}

fn row_figures(x: &Row) -> std::result::Result<(), Bad> {
    if let Some(s) = &x.stats {
        each(
            &[
                ("min_mbps", s.min_mbps),
                ("mean_mbps", s.mean_mbps),
                ("median_mbps", s.median_mbps),
                ("max_mbps", s.max_mbps),
                ("p5_mbps", s.p5_mbps),
                ("p95_mbps", s.p95_mbps),
            ],
            MBPS,
        )?;
        each(&[("cv_pct", s.cv_pct)], PCT)?;
        let l = &s.latency;
        each(
            &[
                ("min_us", l.min_us),
                ("p50_us", l.p50_us),
                ("p90_us", l.p90_us),
                ("p99_us", l.p99_us),
                ("p999_us", l.p999_us),
                ("max_us", l.max_us),
            ],
            TIME,
        )?;
    }
    each(&[("limit_mbps", x.limit_mbps.unwrap_or(0.0))], MBPS)?;
    each(&[("efficiency_pct", x.efficiency_pct.unwrap_or(0.0))], PCT)?;
    if let Some(l) = &x.load {
        let mbps = [
            ("load h2c_mbps", l.h2c_mbps.unwrap_or(0.0)),
            ("load c2h_mbps", l.c2h_mbps.unwrap_or(0.0)),
            ("load held_mbps", l.held_mbps.unwrap_or(0.0)),
        ];
        each(&mbps, MBPS)?;
        each(&[("load elapsed_s", l.elapsed_s)], SECS)?;
    }
    if let Some(e) = &x.engine {
        each(&[("engine wall_s", e.wall_s)], SECS)?;
        each(
            &[("engine implied_clock_mhz", e.implied_clock_mhz), ("engine clock_mhz", e.clock_mhz.unwrap_or(0.0))],
            MHZ,
        )?;
        each(&[("engine engine_mbps", e.engine_mbps.unwrap_or(0.0))], MBPS)?;
        each(&[("engine busy_pct", e.busy_pct.unwrap_or(0.0))], PCT)?;
    }
    each(&[("packets_per_s", x.packets_per_s.unwrap_or(0.0))], RATE)?;
    if let Some(p) = &x.parts {
        let parts = [
            ("parts sync_for_cpu_us", p.sync_for_cpu_us),
            ("parts main_us", p.main_us),
            ("parts sync_for_device_us", p.sync_for_device_us),
            ("parts total_us", p.total_us),
        ];
        each(&parts, TIME)?;
    }
    for n in &x.notes {
        note_figures(n)?;
    }
    if let Some(f) = &x.rate {
        // Transfers a second: the same range as MB/s serves (a transfer a millennium to 10^12 a second).
        each(&[("rate offered_ops", f.offered_ops), ("rate achieved_ops", f.achieved_ops)], RATE)?;
        each(&[("rate achieved_mbps", f.achieved_mbps)], MBPS)?;
        each(&[("rate loop_ns", f.loop_ns), ("rate worst_lag_ns", f.worst_lag_ns)], TIME)?;
    }
    if let Some(l) = &x.latency {
        each(
            &[
                ("overhead_ns", l.overhead_ns),
                ("min_ns", l.min_ns),
                ("mean_ns", l.mean_ns),
                ("p50_ns", l.p50_ns),
                ("p90_ns", l.p90_ns),
                ("p99_ns", l.p99_ns),
                ("p999_ns", l.p999_ns),
                ("p9999_ns", l.p9999_ns),
                ("max_ns", l.max_ns),
            ],
            TIME,
        )?;
        for [ns, f] in &l.cdf {
            each(&[("a CDF latency", *ns)], TIME)?;
            each(&[("a CDF fraction", *f)], FRACTION)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::saved::SavedRun;

    fn card() -> SavedRun {
        let text = include_str!("../../tests/fixtures/results/card.json");
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn figures_no_measurement_gives_are_refused_by_name() {
        assert!(check("card.json", &card().reports).is_ok());
        for (set, field) in [
            (
                Box::new(|r: &mut Row| r.stats.as_mut().unwrap().median_mbps = 5e-324) as Box<dyn Fn(&mut Row)>,
                "median_mbps is 5e-324",
            ),
            (Box::new(|r: &mut Row| r.limit_mbps = Some(5e-324)), "limit_mbps is 5e-324"),
            (Box::new(|r: &mut Row| r.stats.as_mut().unwrap().p5_mbps = -1.0), "p5_mbps is -1e0"),
            (Box::new(|r: &mut Row| r.stats.as_mut().unwrap().p95_mbps = 1e300), "p95_mbps is 1e300"),
            (Box::new(|r: &mut Row| r.stats.as_mut().unwrap().max_mbps = f64::NAN), "max_mbps is NaN"),
            (Box::new(|r: &mut Row| r.efficiency_pct = Some(f64::INFINITY)), "efficiency_pct is inf"),
            (
                Box::new(|r: &mut Row| {
                    r.rate = Some(crate::bench::result::RateFigures { achieved_mbps: f64::NAN, ..Default::default() })
                }),
                "rate achieved_mbps is NaN",
            ),
        ] {
            let mut run = card();
            set(&mut run.reports[1].results[2]);
            let e = check("card.json", &run.reports).unwrap_err().to_string();
            assert!(e.contains("report 2, row 3") && e.contains(field), "{e}");
        }
    }

    #[test]
    fn cdf_points_are_checked() {
        let text = include_str!("../../tests/fixtures/results/latency.json");
        let mut run: SavedRun = serde_json::from_str(text).unwrap();
        assert!(check("latency.json", &run.reports).is_ok());
        run.reports[0].results[0].latency.as_mut().unwrap().cdf[2] = [5e-324, 0.5];
        assert!(check("l", &run.reports).unwrap_err().to_string().contains("a CDF latency is 5e-324"));
        run.reports[0].results[0].latency.as_mut().unwrap().cdf[2] = [1000.0, 1.5];
        assert!(check("l", &run.reports).unwrap_err().to_string().contains("a CDF fraction is 1.5e0"));
    }
}
