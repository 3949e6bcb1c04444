//! The latency panel: for each row with a latency histogram, its CDF (the fraction of accesses
//! at or below each latency) on a log10 latency axis, the fraction on a tail scale so that 90%,
//! 99% and 99.9% are equally spaced and the tail is visible.

use super::axis::Axis;
use super::bandwidth::{MAX_CURVES, MAX_POINTS};
use super::legend::Entry;
use super::panel::Panel;
use super::svg::{self, points, values};
use super::{Input, Styles, LEFT, RIGHT};
use crate::results::config::Config;
use std::fmt::Write;

#[derive(Debug, Clone)]
pub struct LatencyCurve {
    pub file: usize,
    /// The row's configuration in words (with its size).
    pub key: String,
    /// (latency ns, fraction at or below), increasing.
    pub points: Vec<(f64, f64)>,
}

/// Rows with a latency CDF, in order, at most `bandwidth::MAX_CURVES` (the second value counts
/// the rows left out).
pub fn curves(inputs: &[Input]) -> (Vec<LatencyCurve>, usize) {
    let mut out = Vec::new();
    let mut left_out = 0;
    for (file, input) in inputs.iter().enumerate() {
        for (r, x) in input.run.rows() {
            // Open-loop rows are curves of their own (`rate`), not one CDF each.
            let Some(l) = x.latency.as_ref().filter(|_| x.rate.is_none()) else { continue };
            if out.len() >= MAX_CURVES {
                left_out += 1;
                continue;
            }
            let pts: Vec<(f64, f64)> = l
                .cdf
                .iter()
                .map(|p| (p[0], p[1]))
                .filter(|(ns, f)| ns.is_finite() && *ns > 0.0 && f.is_finite())
                .collect();
            if !pts.is_empty() {
                let key = crate::text::clip(&Config::of(r, x).label(), 200).into_owned();
                out.push(LatencyCurve { file, key, points: pts });
            }
        }
    }
    (out, left_out)
}

/// At most two points per pixel column of `x` (the first and last there: a CDF only rises, so
/// they are the column's lowest and highest fraction). Short curves are left alone.
pub fn thin(points: &[(f64, f64)], x: &Axis) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(2 * (RIGHT - LEFT) as usize + 2);
    let mut last_column = f64::NAN;
    for (i, p) in points.iter().enumerate() {
        let column = x.px(p.0).round();
        let next_same = points.get(i + 1).is_some_and(|n| x.px(n.0).round() == column);
        if column != last_column || !next_same {
            out.push(*p);
        }
        last_column = column;
    }
    out
}

/// Draw the panel from `top`; returns the y below it (after its legend). `left_out` counts the
/// rows not drawn (past `MAX_CURVES`).
pub fn draw(
    out: &mut String,
    inputs: &[Input],
    curves: &[LatencyCurve],
    left_out: usize,
    styles: &mut Styles,
    top: f64,
) -> f64 {
    let panel = Panel::at(top);
    let (plot_top, bottom) = (panel.plot_top, panel.bottom);
    let all = curves.iter().flat_map(|c| c.points.iter());
    let (lo, hi) = all.clone().fold((f64::MAX, 0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let x = Axis::log10(lo, hi, LEFT, RIGHT);
    // Down to the deepest fraction below 1 the data reaches: 99% at least, 99.9999% at most.
    let deepest = all.map(|p| p.1).filter(|f| *f < 1.0).map(|f| -(1.0 - f).log10()).fold(2.0f64, f64::max);
    let y = Axis::tail(1.0 - 10f64.powi(-((deepest - 1e-9).ceil().min(6.0) as i32)), bottom, plot_top);
    panel.begin(
        out,
        "latency",
        "Latency per access: fraction of accesses at or below (CDF, tail scale)",
        &x,
        &y,
        ("latency (ns)", "fraction at or below"),
    );
    let mut entries = Vec::new();
    for c in curves {
        let label = format!("{}: {}", inputs[c.file].label, c.key);
        let color = styles.color(&c.key);
        let dash = Styles::dash(c.file);
        let _ = writeln!(out, r#"<g class="cdf" data-file="{}" data-label="{}">"#, c.file, svg::esc(&label));
        let pts = thin(&c.points, &x);
        let mut s = String::with_capacity(16 * pts.len());
        points(&mut s, pts.iter().map(|(ns, f)| (x.px(*ns), y.px(f.min(y.max)))));
        let _ = writeln!(
            out,
            r#"<polyline class="cdf" fill="none" stroke="{color}" stroke-width="1.8"{dash} points="{s}" data-ns="{}" data-fraction="{}"/>"#,
            values(pts.iter().map(|p| p.0)),
            values(pts.iter().map(|p| p.1))
        );
        out.push_str("</g>\n");
        entries.push(Entry { color: color.into(), dash, width: 1.8, label });
    }
    if left_out > 0 {
        let note =
            format!("{left_out} more latency rows not drawn: a plot shows at most {MAX_CURVES}; plot fewer at once");
        panel.note(out, "left-out", 0, &note);
    }
    panel.end(out, &entries)
}
