//! Axes: a value-to-pixel mapping on one of four scales, its ticks and labels, and drawing it.
//! Every axis writes its scale and range as `data-*` attributes so a reader (the golden tests)
//! can map pixels back to values.

use super::svg::{line, px, text};
use crate::units::human_size;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Transfer sizes: ticks at powers of two.
    Log2,
    /// Throughput over decades, latency.
    Log10,
    /// Fractions of samples: -log10(1 - F), so 90%, 99%, 99.9% are equally spaced (a tail plot).
    Tail,
}

impl Scale {
    fn name(&self) -> &'static str {
        match self {
            Scale::Linear => "linear",
            Scale::Log2 => "log2",
            Scale::Log10 => "log10",
            Scale::Tail => "tail",
        }
    }

    pub fn t(&self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2 => v.max(f64::MIN_POSITIVE).log2(),
            Scale::Log10 => v.max(f64::MIN_POSITIVE).log10(),
            Scale::Tail => -(1.0 - v.min(1.0)).max(1e-12).log10(),
        }
    }
}

/// `min..max` in data units drawn from pixel `px0` to `px1` (for y, px0 is the bottom).
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub scale: Scale,
    pub min: f64,
    pub max: f64,
    pub px0: f64,
    pub px1: f64,
    /// Linear: the distance between ticks.
    pub step: f64,
}

/// The most ticks an axis has (log2 over 64 octaves is filtered to 12; log10 over 21 decades
/// has 22).
const MAX_TICKS: usize = 200;

/// A tick label for a plain number: no trailing zeros, at most three decimals.
pub fn number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw * (1.0 - 1e-9)).unwrap_or(10.0 * mag)
}

impl Axis {
    pub fn px(&self, v: f64) -> f64 {
        let (a, b) = (self.scale.t(self.min), self.scale.t(self.max));
        let f = if b > a { (self.scale.t(v) - a) / (b - a) } else { 0.5 };
        self.px0 + f.clamp(-0.05, 1.05) * (self.px1 - self.px0)
    }

    /// A linear axis from 0 (or below, for negative data) to a round number above `hi`.
    pub fn linear(lo: f64, hi: f64, px0: f64, px1: f64) -> Axis {
        let lo = lo.min(0.0);
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let step = nice_step((hi - lo) / 6.0);
        Axis { scale: Scale::Linear, min: (lo / step).floor() * step, max: (hi / step).ceil() * step, px0, px1, step }
    }

    /// A log10 axis over whole decades around `lo..hi` (both > 0).
    pub fn log10(lo: f64, hi: f64, px0: f64, px1: f64) -> Axis {
        let a = lo.log10().floor();
        let b = hi.log10().ceil().max(a + 1.0);
        Axis { scale: Scale::Log10, min: 10f64.powf(a), max: 10f64.powf(b), px0, px1, step: 0.0 }
    }

    /// A log2 axis around `lo..hi` with a quarter octave of room each side.
    pub fn log2(lo: f64, hi: f64, px0: f64, px1: f64) -> Axis {
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo / 2.0, hi * 2.0) };
        Axis { scale: Scale::Log2, min: lo / 2f64.powf(0.25), max: hi * 2f64.powf(0.25), px0, px1, step: 0.0 }
    }

    /// A tail axis from 0 up to the fraction `hi` (below 1).
    pub fn tail(hi: f64, px0: f64, px1: f64) -> Axis {
        Axis { scale: Scale::Tail, min: 0.0, max: hi, px0, px1, step: 0.0 }
    }

    /// Ticks as (value, label). However the range came about, there are at most `MAX_TICKS` (a
    /// range from a subnormal to 10^300 must not become 2^31 ticks).
    pub fn ticks(&self) -> Vec<(f64, String)> {
        let mut t = self.all_ticks();
        t.truncate(MAX_TICKS);
        t
    }

    fn all_ticks(&self) -> Vec<(f64, String)> {
        let span = |a: f64, b: f64| a.is_finite() && b.is_finite() && b - a <= MAX_TICKS as f64;
        match self.scale {
            Scale::Linear => {
                let n = ((self.max - self.min) / self.step).round();
                if !(n.is_finite() && (0.0..=MAX_TICKS as f64).contains(&n)) {
                    return Vec::new();
                }
                (0..=n as i64).map(|i| self.min + i as f64 * self.step).map(|v| (v, number(v))).collect()
            }
            Scale::Log2 => {
                let (a, b) = (self.min.log2().ceil(), self.max.log2().floor());
                if !span(a, b) {
                    return Vec::new();
                }
                let (a, b) = (a as i32, b as i32);
                let every = ((b - a + 1) as f64 / 12.0).ceil().max(1.0) as i32;
                (a..=b)
                    .filter(|e| (b - e) % every == 0)
                    .map(|e| 2f64.powi(e))
                    .map(|v| (v, if v >= 1.0 { human_size(v as u64) } else { number(v) }))
                    .collect()
            }
            Scale::Log10 => {
                let (a, b) = (self.min.log10().round(), self.max.log10().round());
                if !span(a, b) {
                    return Vec::new();
                }
                let (a, b) = (a as i32, b as i32);
                let mults: &[f64] = if b - a <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
                let mut t = Vec::new();
                for e in a..=b {
                    for m in mults {
                        let v = m * 10f64.powi(e);
                        if v <= self.max * (1.0 + 1e-9) {
                            t.push((v, number(v)));
                        }
                    }
                }
                t
            }
            Scale::Tail => {
                // t() is at most 12 (1 - F floored at 1e-12).
                let top = self.scale.t(self.max).round().clamp(0.0, 12.0) as i32;
                let mut t = vec![(0.0, "0%".to_string()), (0.5, "50%".to_string())];
                for k in 1..=top {
                    let f = 1.0 - 10f64.powi(-k);
                    t.push((f, format!("{}%", number(f * 100.0))));
                }
                t
            }
        }
    }

    fn attrs(&self, class: &str) -> String {
        format!(
            r#"<g class="axis {class}" data-scale="{}" data-min="{}" data-max="{}" data-px0="{}" data-px1="{}">"#,
            self.scale.name(),
            self.min,
            self.max,
            self.px0,
            self.px1
        )
    }
}

/// The plot area's frame, grid lines, tick labels and axis titles. `x` runs left to right,
/// `y` bottom to top.
pub fn draw(out: &mut String, x: &Axis, y: &Axis, x_title: &str, y_title: &str) {
    let (left, right, bottom, top) = (x.px0, x.px1, y.px0, y.px1);
    let _ = writeln!(
        out,
        r##"<rect class="frame" x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333333"/>"##,
        px(left),
        px(top),
        px(right - left),
        px(bottom - top)
    );
    let grid = r##"stroke="#dddddd" stroke-width="1""##;
    out.push_str(&x.attrs("x"));
    out.push('\n');
    for (v, label) in x.ticks() {
        let p = x.px(v);
        line(out, "grid", p, top, p, bottom, grid);
        text(out, "tick", p, bottom + 16.0, "middle", "", &label);
    }
    text(out, "axis-title", (left + right) / 2.0, bottom + 34.0, "middle", "", x_title);
    out.push_str("</g>\n");
    out.push_str(&y.attrs("y"));
    out.push('\n');
    for (v, label) in y.ticks() {
        let p = y.px(v);
        line(out, "grid", left, p, right, p, grid);
        text(out, "tick", left - 6.0, p + 4.0, "end", "", &label);
    }
    let mid = (top + bottom) / 2.0;
    let rot = format!(r#" transform="rotate(-90 {} {})""#, px(left - 58.0), px(mid));
    text(out, "axis-title", left - 58.0, mid, "middle", &rot, y_title);
    out.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranges no saved run should give (the reader refuses them) still make a few ticks, never
    /// billions or a panic.
    #[test]
    fn absurd_ranges_make_few_ticks() {
        for a in [
            Axis::log10(5e-324, 1e300, 500.0, 100.0),
            Axis::log10(0.0, 1.0, 500.0, 100.0),
            Axis::linear(0.0, 5e-324, 500.0, 100.0),
            Axis::linear(0.0, f64::MAX, 500.0, 100.0),
            Axis::log2(5e-324, 1e300, 100.0, 900.0),
            Axis::tail(f64::NAN, 500.0, 100.0),
        ] {
            assert!(a.ticks().len() <= MAX_TICKS, "{a:?}");
            let _ = a.px(1.0);
        }
    }

    #[test]
    fn scales_and_ticks() {
        let x = Axis::log2(8.0, 1048576.0, 100.0, 900.0);
        let labels: Vec<String> = x.ticks().into_iter().map(|t| t.1).collect();
        // Every other power of two from the largest down: at most 12 labels.
        assert_eq!(labels.first().map(String::as_str), Some("16 B"));
        assert_eq!(labels.last().map(String::as_str), Some("1 MiB"));
        assert!(labels.len() <= 12, "{labels:?}");
        assert!(x.px(8.0) < x.px(16.0) && x.px(1048576.0) < 900.0);
        // Powers of two are equally spaced.
        let d1 = x.px(16.0) - x.px(8.0);
        let d2 = x.px(1048576.0) - x.px(524288.0);
        assert!((d1 - d2).abs() < 1e-9);

        let y = Axis::linear(0.0, 1651.0, 500.0, 100.0);
        assert_eq!((y.min, y.max), (0.0, 2000.0));
        assert_eq!(y.ticks().iter().map(|t| t.1.as_str()).collect::<Vec<_>>(), ["0", "500", "1000", "1500", "2000"]);
        assert_eq!(y.px(0.0), 500.0);
        assert_eq!(y.px(2000.0), 100.0);

        let l = Axis::log10(0.5, 4000.0, 500.0, 100.0);
        assert_eq!((l.min, l.max), (0.1, 10000.0));
        assert_eq!(l.ticks().len(), 6);

        let t = Axis::tail(0.999, 500.0, 100.0);
        let labels: Vec<String> = t.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0%", "50%", "90%", "99%", "99.9%"]);
        assert!((t.px(0.99) - 233.333).abs() < 0.01);
    }
}
