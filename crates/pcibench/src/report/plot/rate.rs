//! The offered-load panel: rows measured open loop (`--rate`) as latency against the throughput
//! they achieved, one curve per configuration (direction, size, queue count, engine) and file,
//! its points in order of offered rate; p50 solid, p99 dashed, p99.9 dotted in the curve's colour,
//! on a log10 latency axis so the flat part and the climb past the knee both show.

use super::axis::Axis;
use super::bandwidth::MAX_CURVES;
use super::legend::Entry;
use super::panel::Panel;
use super::svg::{self, points, values};
use super::{Input, Styles, LEFT, RIGHT};
use crate::bench::result::{LatencyFigures, Row};
use crate::results::config::Config;
use std::fmt::Write;

/// A percentile drawn: its name, where it is in the figures, its stroke width and dash.
type Percentile = (&'static str, fn(&LatencyFigures) -> f64, f64, &'static str);

const PERCENTILES: [Percentile; 3] =
    [("p50", |l| l.p50_ns, 2.2, ""), ("p99", |l| l.p99_ns, 1.5, "7 4"), ("p99.9", |l| l.p999_ns, 1.0, "2 3")];

/// One curve: a configuration's rows of one file, by offered rate.
#[derive(Debug, Clone)]
pub struct RateCurve {
    pub file: usize,
    pub key: String,
    /// (achieved MB/s, latency figures) in order of offered rate.
    pub points: Vec<(f64, LatencyFigures)>,
}

fn usable(x: &Row) -> Option<(f64, f64, &LatencyFigures)> {
    let f = x.rate.as_ref()?;
    let l = x.latency.as_ref().filter(|l| l.samples > 0 && l.p50_ns > 0.0)?;
    let ok = |v: f64| v.is_finite() && v >= 0.0;
    (ok(f.achieved_mbps) && ok(f.offered_ops) && PERCENTILES.iter().all(|p| p.1(l).is_finite())).then_some((
        f.offered_ops,
        f.achieved_mbps,
        l,
    ))
}

/// Open-loop rows grouped into curves, at most `MAX_CURVES` (the second value counts the
/// configurations left out).
pub fn curves(inputs: &[Input]) -> (Vec<RateCurve>, usize) {
    let mut out: Vec<(RateCurve, Vec<f64>)> = Vec::new();
    let mut left_out = 0;
    for (file, input) in inputs.iter().enumerate() {
        for (r, x) in input.run.rows() {
            let Some((offered, mbps, l)) = usable(x) else { continue };
            // One curve across offered rates: the configuration without its rate.
            let key = Config { offered_ops: None, ..Config::of(r, x) }.label();
            let key = crate::text::clip(&key, 200).into_owned();
            let full = out.len() >= MAX_CURVES;
            match out.iter_mut().find(|(c, _)| c.file == file && c.key == key) {
                Some((c, rates)) => {
                    let at = rates.partition_point(|o| *o <= offered);
                    rates.insert(at, offered);
                    c.points.insert(at, (mbps, l.clone()));
                }
                None if full => left_out += 1,
                None => out.push((RateCurve { file, key, points: vec![(mbps, l.clone())] }, vec![offered])),
            }
        }
    }
    (out.into_iter().map(|(c, _)| c).collect(), left_out)
}

/// Draw the panel from `top`; returns the y below its legend.
pub fn draw(
    out: &mut String,
    inputs: &[Input],
    curves: &[RateCurve],
    left_out: usize,
    styles: &mut Styles,
    top: f64,
) -> f64 {
    let panel = Panel::at(top);
    let (plot_top, bottom) = (panel.plot_top, panel.bottom);
    let pts = curves.iter().flat_map(|c| c.points.iter());
    let hi_mbps = pts.clone().map(|p| p.0).fold(0f64, f64::max);
    let lats = pts.flat_map(|p| PERCENTILES.iter().map(move |q| q.1(&p.1))).filter(|v| *v > 0.0);
    let (lo, hi) = lats.fold((f64::MAX, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    let x = Axis::linear(0.0, hi_mbps, LEFT, RIGHT);
    let y = Axis::log10(lo.min(hi), hi.max(lo), bottom, plot_top);
    panel.begin(
        out,
        "rate",
        "Latency under offered load: p50 (solid), p99 (dashed), p99.9 (dotted) against the throughput achieved",
        &x,
        &y,
        ("achieved throughput (MB/s)", "latency from due time (ns)"),
    );
    let mut entries = Vec::new();
    for c in curves {
        let label = format!("{}: {}", inputs[c.file].label, c.key);
        let color = styles.color(&c.key);
        let _ = writeln!(out, r#"<g class="rate" data-file="{}" data-label="{}">"#, c.file, svg::esc(&label));
        for (name, get, width, dash) in PERCENTILES {
            let mut s = String::with_capacity(16 * c.points.len());
            points(&mut s, c.points.iter().map(|(mbps, l)| (x.px(*mbps), y.px(get(l).max(y.min)))));
            let dash = if dash.is_empty() { String::new() } else { format!(r#" stroke-dasharray="{dash}""#) };
            let _ = writeln!(
                out,
                r#"<polyline class="rate" data-percentile="{name}" fill="none" stroke="{color}" stroke-width="{width}"{dash} points="{s}" data-mbps="{}" data-ns="{}"/>"#,
                values(c.points.iter().map(|p| p.0)),
                values(c.points.iter().map(|p| get(&p.1)))
            );
        }
        out.push_str("</g>\n");
        entries.push(Entry { color: color.into(), dash: String::new(), width: 2.2, label });
    }
    if left_out > 0 {
        let note = format!(
            "{left_out} more offered-load curves not drawn: a plot shows at most {MAX_CURVES}; plot fewer at once"
        );
        panel.note(out, "left-out", 0, &note);
    }
    panel.end(out, &entries)
}

#[cfg(test)]
mod tests {
    use super::super::{svg, Input};
    use crate::access::Via;
    use crate::bench::result::{Kind, LatencyFigures, Probe, RateFigures, Report, Row, Verify};
    use crate::direction::Direction;
    use crate::host::Host;
    use crate::results::saved::SavedRun;

    /// A sweep of three rates on 1 and 4 queues, given out of order, and a closed-loop row.
    fn run() -> SavedRun {
        let mut r = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
        r.engine = Some("qdma".into());
        for q in [1u16, 4] {
            for (offered, p50) in [(2e6f64, 9_000.0), (0.5e6, 1_500.0), (1e6, 1_700.0)] {
                let mut x = Row::new(Direction::H2c, 64);
                (x.queues, x.probe, x.verify) = (Some(q), Some(Probe::Dma), Some(Verify::Ok));
                let l = LatencyFigures {
                    samples: 100,
                    p50_ns: p50,
                    p99_ns: 2.0 * p50,
                    p999_ns: 3.0 * p50,
                    ..Default::default()
                };
                x.latency = Some(l);
                let achieved = offered.min(1.2e6) * q as f64;
                x.rate = Some(RateFigures {
                    offered_ops: offered,
                    achieved_ops: achieved,
                    achieved_mbps: achieved * 64.0 / 1e6,
                    ..Default::default()
                });
                r.results.push(x);
            }
        }
        let mut closed = Row::new(Direction::C2h, 64);
        closed.latency =
            Some(LatencyFigures { samples: 10, p50_ns: 1000.0, cdf: vec![[1000.0, 1.0]], ..Default::default() });
        r.results.push(closed);
        SavedRun::of_report(&Host::default(), None, &r)
    }

    #[test]
    fn a_saved_sweep_draws_latency_percentiles_against_achieved_throughput_per_queue_count() {
        let saved = run();
        let doc = svg(&[Input { label: "a".into(), run: &saved }], None).unwrap();
        assert!(doc.contains(r#"<g class="panel rate">"#), "{doc}");
        assert!(doc.contains("achieved throughput (MB/s)") && doc.contains("latency from due time (ns)"));
        // The latency axis is log10 over whole decades around 1.5 µs .. 27 µs.
        assert!(doc.contains(r#"<g class="axis y" data-scale="log10" data-min="1000" data-max="100000""#), "{doc}");
        let lines: Vec<&str> = doc.lines().filter(|l| l.starts_with(r#"<polyline class="rate""#)).collect();
        assert_eq!(lines.len(), 6, "two curves of three percentiles");
        for p in ["p50", "p99", "p99.9"] {
            assert_eq!(lines.iter().filter(|l| l.contains(&format!(r#"data-percentile="{p}""#))).count(), 2);
        }
        // Points by offered rate: 0.5, 1 and 2 M/s, whatever the rows' order.
        assert!(lines[0].contains(r#"data-mbps="32 64 76.8" data-ns="1500 1700 9000""#), "{}", lines[0]);
        assert!(lines[3].contains(r#"data-mbps="128 256 307.2""#), "{}", lines[3]);
        // The closed-loop row keeps its CDF; the open-loop rows have none.
        assert_eq!(doc.matches(r#"<polyline class="cdf""#).count(), 1);
    }
}
