//! The bandwidth panel: median MB/s by transfer size (log2 x axis), the p5..p95 band, and the
//! link model's ceiling where rows carry one (the row's `limit_mbps`: the same figure the table's
//! `limit` column shows, for the direction, size and payload of that row).

use super::axis::Axis;
use super::legend::Entry;
use super::panel::Panel;
use super::svg::{self, points, px, values};
use super::{Input, Styles, CEILING_DASH, LEFT, RIGHT};
use crate::direction::Direction;
use crate::results::config::Config;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub size: u64,
    pub median: f64,
    pub p5: f64,
    pub p95: f64,
    pub limit: Option<f64>,
}

/// One configuration of one file across sizes.
#[derive(Debug, Clone)]
pub struct Curve {
    pub file: usize,
    /// The configuration without size, in words (the same in every file).
    pub key: String,
    pub dir: Direction,
    pub points: Vec<Point>,
}

/// A ceiling line: the link model's limit over the sizes of one or more curves of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceiling {
    pub file: usize,
    pub dir: Direction,
    pub points: Vec<(u64, f64)>,
    /// The curves it bounds (their keys), the first giving its colour.
    pub curves: Vec<String>,
}

fn good(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// The most curves a panel draws (a colour each, a legend line each); the others are counted in
/// a note, so a run of a million configurations cannot make a plot of a million curves.
pub const MAX_CURVES: usize = 64;
/// A curve of more points than this is thinned to at most two per pixel column (`thin`).
pub const MAX_POINTS: usize = 2000;

/// The curves of every file: measured throughput rows (with a size), in the order their
/// configurations first appear, at most `MAX_CURVES` (the second value counts those left out);
/// points sorted by size.
pub fn curves(inputs: &[Input]) -> (Vec<Curve>, usize) {
    let mut out: Vec<Curve> = Vec::new();
    let mut left_out: std::collections::HashSet<(usize, Config)> = std::collections::HashSet::new();
    for (file, input) in inputs.iter().enumerate() {
        let mut index: std::collections::HashMap<Config, usize> = std::collections::HashMap::new();
        for (r, x) in input.run.rows() {
            let Some(st) = x.stats.as_ref().filter(|s| x.size > 0 && good(s.median_mbps)) else { continue };
            let series = Config::of(r, x).series();
            let point = Point {
                size: x.size,
                median: st.median_mbps,
                p5: st.p5_mbps,
                p95: st.p95_mbps,
                limit: x.limit_mbps.filter(|l| good(*l)),
            };
            match index.get(&series) {
                Some(i) => out[*i].points.push(point),
                None if out.len() >= MAX_CURVES => {
                    left_out.insert((file, series));
                }
                None => {
                    let key = crate::text::clip(&series.label(), 200).into_owned();
                    index.insert(series, out.len());
                    out.push(Curve { file, key, dir: x.dir, points: vec![point] });
                }
            }
        }
    }
    for c in &mut out {
        c.points.sort_by_key(|p| p.size);
    }
    (out, left_out.len())
}

/// At most two points per pixel column of `x` (the lowest and the highest median there, in size
/// order) with the column's whole band (its lowest p5, its highest p95) and ceiling: what a
/// screen can show of a curve of any length, its envelope kept. Short curves are left alone.
pub fn thin(points: &[Point], x: &Axis) -> Vec<Point> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let mut out = Vec::with_capacity(2 * (RIGHT - LEFT) as usize + 2);
    let mut start = 0;
    while start < points.len() {
        let column = x.px(points[start].size as f64).round();
        let end = start + points[start..].iter().take_while(|p| x.px(p.size as f64).round() == column).count().max(1);
        let group = &points[start..end];
        let (p5, p95) = group.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.p5), b.max(p.p95)));
        let limits = group.iter().filter_map(|p| p.limit);
        let (llo, lhi) = limits.fold((None, None), |(a, b): (Option<f64>, Option<f64>), l| {
            (Some(a.map_or(l, |a| a.min(l))), Some(b.map_or(l, |b| b.max(l))))
        });
        let lo = group.iter().enumerate().min_by(|a, b| a.1.median.total_cmp(&b.1.median)).map_or(0, |m| m.0);
        let hi = group.iter().enumerate().max_by(|a, b| a.1.median.total_cmp(&b.1.median)).map_or(0, |m| m.0);
        let mut keep = vec![(lo, llo), (hi, lhi)];
        keep.sort_by_key(|k| k.0);
        keep.dedup_by_key(|k| k.0);
        for (i, limit) in keep {
            out.push(Point { size: group[i].size, median: group[i].median, p5, p95, limit: limit.or(group[i].limit) });
        }
        start = end;
    }
    out
}

/// The distinct ceilings of the curves (curves with the same limits share one line).
pub fn ceilings(curves: &[Curve]) -> Vec<Ceiling> {
    let mut out: Vec<Ceiling> = Vec::new();
    for c in curves {
        let pts: Vec<(u64, f64)> = c.points.iter().filter_map(|p| Some((p.size, p.limit?))).collect();
        if pts.is_empty() {
            continue;
        }
        match out.iter_mut().find(|x| x.file == c.file && x.dir == c.dir && x.points == pts) {
            Some(x) => x.curves.push(c.key.clone()),
            None => out.push(Ceiling { file: c.file, dir: c.dir, points: pts, curves: vec![c.key.clone()] }),
        }
    }
    out
}

/// The y axis: linear from 0, or log10 when the medians and ceilings span more than 50x. The
/// bands widen the range by at most 4x each way, so one wild sample cannot flatten the curves.
fn y_axis(curves: &[Curve], ceilings: &[Ceiling], bottom: f64, top: f64) -> Axis {
    let core = curves.iter().flat_map(|c| c.points.iter().map(|p| p.median));
    let core: Vec<f64> = core.chain(ceilings.iter().flat_map(|c| c.points.iter().map(|p| p.1))).collect();
    let (lo, hi) = core.iter().fold((f64::MAX, 0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    let bands = curves.iter().flat_map(|c| c.points.iter().flat_map(|p| [p.p5, p.p95])).filter(|v| good(*v));
    let (blo, bhi) = bands.fold((lo, hi), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = (blo.max(lo / 4.0), bhi.min(hi * 4.0));
    if hi / lo > 50.0 {
        Axis::log10(lo, hi, bottom, top)
    } else {
        Axis::linear(0.0, hi, bottom, top)
    }
}

fn draw_curve(out: &mut String, c: &Curve, label: &str, color: &str, x: &Axis, y: &Axis) {
    let dash = Styles::dash(c.file);
    // max/min, not clamp: an axis is never inverted or NaN, but a plot must not panic if one were.
    let clamp = |v: f64| v.max(y.min).min(y.max);
    let _ = writeln!(
        out,
        r#"<g class="series" data-file="{}" data-dir="{}" data-label="{}">"#,
        c.file,
        c.dir,
        svg::esc(label)
    );
    // The band: p95 left to right, then p5 back; a lone point gets a band 8 px wide.
    let mut band: Vec<(f64, f64)> = Vec::with_capacity(2 * c.points.len() + 2);
    let xs: Vec<f64> = c.points.iter().map(|p| x.px(p.size as f64)).collect();
    let w = if c.points.len() == 1 { 4.0 } else { 0.0 };
    for (p, px_) in c.points.iter().zip(&xs) {
        band.push((px_ - w, y.px(clamp(p.p95.max(p.median)))));
        if w > 0.0 {
            band.push((px_ + w, y.px(clamp(p.p95.max(p.median)))));
        }
    }
    for (p, px_) in c.points.iter().zip(&xs).rev() {
        if w > 0.0 {
            band.push((px_ + w, y.px(clamp(p.p5.min(p.median)))));
        }
        band.push((px_ - w, y.px(clamp(p.p5.min(p.median)))));
    }
    let mut s = String::with_capacity(16 * band.len());
    points(&mut s, band);
    let _ = writeln!(
        out,
        r#"<polygon class="band" fill="{color}" fill-opacity="0.15" stroke="none" points="{s}" data-p5="{}" data-p95="{}"/>"#,
        values(c.points.iter().map(|p| p.p5)),
        values(c.points.iter().map(|p| p.p95))
    );
    let mut s = String::with_capacity(16 * xs.len());
    points(&mut s, c.points.iter().zip(&xs).map(|(p, px_)| (*px_, y.px(p.median))));
    let _ = writeln!(
        out,
        r#"<polyline class="median" fill="none" stroke="{color}" stroke-width="1.8"{dash} points="{s}" data-sizes="{}" data-mbps="{}"/>"#,
        values(c.points.iter().map(|p| p.size as f64)),
        values(c.points.iter().map(|p| p.median))
    );
    // Markers only where they stay readable.
    if c.points.len() <= 64 {
        for (p, px_) in c.points.iter().zip(&xs) {
            let _ = writeln!(out, r#"<circle cx="{}" cy="{}" r="2.5" fill="{color}"/>"#, px(*px_), px(y.px(p.median)));
        }
    }
    out.push_str("</g>\n");
}

fn draw_ceiling(out: &mut String, c: &Ceiling, label: &str, color: &str, x: &Axis, y: &Axis) {
    let _ = writeln!(
        out,
        r#"<g class="ceiling" data-file="{}" data-dir="{}" data-label="{}">"#,
        c.file,
        c.dir,
        svg::esc(label)
    );
    // One size: the limit holds across the axis (PIO's limit does not depend on the size).
    let pts: Vec<(f64, f64)> = if c.points.len() == 1 {
        vec![(x.px0, y.px(c.points[0].1)), (x.px1, y.px(c.points[0].1))]
    } else {
        c.points.iter().map(|(s, l)| (x.px(*s as f64), y.px(*l))).collect()
    };
    let mut s = String::new();
    points(&mut s, pts.iter().copied());
    let _ = writeln!(
        out,
        r#"<polyline class="ceiling" fill="none" stroke="{color}" stroke-width="1.2" stroke-dasharray="{CEILING_DASH}" points="{s}" data-sizes="{}" data-mbps="{}"/>"#,
        values(c.points.iter().map(|p| p.0 as f64)),
        values(c.points.iter().map(|p| p.1))
    );
    out.push_str("</g>\n");
}

/// "6711 MB/s", or "5513..6711 MB/s" where the limit varies with the size.
fn ceiling_range(c: &Ceiling) -> String {
    let (lo, hi) = c.points.iter().fold((f64::MAX, 0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if hi - lo < 0.5 {
        format!("{hi:.0} MB/s")
    } else {
        format!("{lo:.0}..{hi:.0} MB/s")
    }
}

/// Draw the panel from `top`; returns the y below it (after its legend). `left_out` counts the
/// configurations not drawn (past `MAX_CURVES`).
pub fn draw(
    out: &mut String,
    inputs: &[Input],
    curves: &[Curve],
    left_out: usize,
    styles: &mut Styles,
    top: f64,
) -> f64 {
    let panel = Panel::at(top);
    let (plot_top, bottom) = (panel.plot_top, panel.bottom);
    let lo = curves.iter().flat_map(|c| c.points.iter().map(|p| p.size)).min().unwrap_or(1) as f64;
    let hi = curves.iter().flat_map(|c| c.points.iter().map(|p| p.size)).max().unwrap_or(1) as f64;
    let x = Axis::log2(lo, hi, LEFT, RIGHT);
    let thinned: Vec<Curve> = curves.iter().map(|c| Curve { points: thin(&c.points, &x), ..c.clone() }).collect();
    let curves = &thinned[..];
    let ceilings = ceilings(curves);
    let y = y_axis(curves, &ceilings, bottom, plot_top);
    panel.begin(
        out,
        "bandwidth",
        "Bandwidth by transfer size: median, p5..p95 band; dash-dot: the link model's ceiling",
        &x,
        &y,
        ("transfer size", "MB/s (10^6 bytes/s)"),
    );
    let mut entries = Vec::new();
    for c in curves {
        let label = format!("{}: {}", inputs[c.file].label, c.key);
        let color = styles.color(&c.key);
        draw_curve(out, c, &label, color, &x, &y);
        entries.push(Entry { color: color.into(), dash: Styles::dash(c.file), width: 1.8, label });
    }
    for c in &ceilings {
        let label =
            format!("{}: link model ceiling {}, {}", inputs[c.file].label, ceiling_range(c), c.curves.join("; "));
        let color = styles.color(&c.curves[0]);
        draw_ceiling(out, c, &label, color, &x, &y);
        entries.push(Entry {
            color: color.into(),
            dash: format!(r#" stroke-dasharray="{CEILING_DASH}""#),
            width: 1.2,
            label,
        });
    }
    if ceilings.is_empty() {
        let why = inputs.iter().find_map(|i| i.run.reports.iter().find_map(|r| r.limit_note.clone()));
        let note = why.unwrap_or_else(|| "no link model ceiling: the rows carry no link limit".into());
        panel.note(out, "no-ceiling", 0, &note);
    }
    if left_out > 0 {
        let note = format!(
            "{left_out} more configuration{} not drawn: a plot shows at most {MAX_CURVES}; plot fewer runs or rows at once",
            if left_out == 1 { "" } else { "s" }
        );
        panel.note(out, "left-out", 1, &note);
    }
    panel.end(out, &entries)
}
