//! `pcibench plot`: saved runs drawn as one self-contained SVG (no fonts, libraries or clock
//! needed to make it; the same files give the same bytes). A bandwidth panel: median MB/s by
//! transfer size on a log2 axis, one curve per configuration without its size (direction,
//! mapping, width, engine, queues, ...), the p5..p95 spread across samples as a band, and the
//! link model's ceiling for that direction where one bounds the rows. A latency panel where rows
//! carry latency histograms: their CDF on a tail scale. An offered-load panel where rows were
//! measured open loop (`--rate`): latency percentiles against the throughput achieved. Several files overlay: one dash pattern
//! per file, one colour per configuration, every curve labelled by its file's label.

pub mod axis;
pub mod bandwidth;
pub mod cdf;
mod legend;
mod panel;
pub mod rate;
pub mod svg;

use crate::results::saved::SavedRun;
use crate::{Error, Result};

/// One file to draw and the label its curves carry.
pub struct Input<'a> {
    pub label: String,
    pub run: &'a SavedRun,
}

pub const WIDTH: f64 = 960.0;
/// The plot area's left and right edges.
pub const LEFT: f64 = 90.0;
pub const RIGHT: f64 = WIDTH - 30.0;
/// The plot area's height.
pub const PANEL: f64 = 380.0;

/// Tableau 10: distinct, and readable on white.
const PALETTE: [&str; 10] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
/// One per file, in order (then again); the ceiling's dash-dot is none of these.
const DASHES: [&str; 4] = ["", "7 4", "2 3", "14 4"];
/// The link model's ceilings: dash-dot, thinner than the curves, in their curve's colour.
pub const CEILING_DASH: &str = "10 3 2 3";

/// Colours by configuration, in order of first appearance.
pub struct Styles {
    keys: Vec<String>,
}

impl Styles {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Styles {
        Styles { keys: Vec::new() }
    }

    pub fn color(&mut self, key: &str) -> &'static str {
        let i = self.keys.iter().position(|k| k == key).unwrap_or_else(|| {
            self.keys.push(key.to_string());
            self.keys.len() - 1
        });
        PALETTE[i % PALETTE.len()]
    }

    /// A `stroke-dasharray` attribute for file `file`, or nothing for solid.
    pub fn dash(file: usize) -> String {
        match DASHES[file % DASHES.len()] {
            "" => String::new(),
            d => format!(r#" stroke-dasharray="{d}""#),
        }
    }
}

/// The lines under the title: per file, the device, its link (generation, width, MPS, MRRS:
/// what bounds the figures), the access path and IOMMU mode; long ones wrapped.
fn subtitles(inputs: &[Input]) -> Vec<String> {
    let mut out = Vec::new();
    for i in inputs {
        let r = i.run;
        let dev = match &r.device {
            Some(d) if d.simulated => {
                format!("{} [{}:{}], a simulated card (host memory, no PCIe link)", d.address, d.vendor_id, d.device_id)
            }
            Some(d) => format!("{} [{}:{}], {}", d.address, d.vendor_id, d.device_id, d.link_words()),
            None => "no device".into(),
        };
        let iommu = r.iommu.as_ref().map(|_| format!("; IOMMU {}", r.iommu_words())).unwrap_or_default();
        let line = format!("{}: pcibench {} on {dev}; via {}{iommu}", i.label, r.command, r.path_words());
        // What a file says is clipped: a subtitle is a line or two, whatever the file holds.
        out.extend(wrap(&crate::text::clip(&line, 400), 140));
    }
    out
}

/// Split at spaces into lines of at most `width` characters (a longer word stays whole).
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for w in s.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
            cur.push_str("    ");
        } else if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    lines.push(cur);
    lines
}

/// The command and device (one file) or the number of runs, and the link that bounds them
/// when every file has the same one (generation, width, MPS, MRRS).
fn default_title(inputs: &[Input]) -> String {
    let mut t = match inputs {
        [one] => crate::text::clip(
            &format!(
                "pcibench {} {}",
                one.run.command,
                one.run.device.as_ref().map_or("(no device)", |d| d.address.as_str())
            ),
            200,
        )
        .into_owned(),
        _ => format!("pcibench: {} runs", inputs.len()),
    };
    let links: Vec<Option<String>> = inputs
        .iter()
        .map(|i| i.run.device.as_ref().filter(|d| !d.simulated).and_then(|d| d.link.as_ref()).map(|l| l.describe()))
        .collect();
    if let Some(Some(first)) = links.first() {
        if links.iter().all(|l| l.as_ref() == Some(first)) {
            t.push_str(&format!(", {first}"));
        }
    }
    t
}

/// The SVG document for `inputs`; `title` replaces the default title line.
pub fn svg(inputs: &[Input], title: Option<&str>) -> Result<String> {
    let (curves, curves_left_out) = bandwidth::curves(inputs);
    let (lat, lat_left_out) = cdf::curves(inputs);
    let (rated, rated_left_out) = rate::curves(inputs);
    if curves.is_empty() && lat.is_empty() && rated.is_empty() {
        let names: Vec<&str> = inputs.iter().map(|i| i.label.as_str()).collect();
        return Err(Error::NothingToMeasure(format!(
            "nothing to plot: {} hold{} no measured rows",
            names.join(", "),
            if names.len() == 1 { "s" } else { "" }
        )));
    }
    let mut body = String::new();
    let title = title.map(String::from).unwrap_or_else(|| default_title(inputs));
    svg::text(&mut body, "title", WIDTH / 2.0, 24.0, "middle", r#" font-size="16" font-weight="bold""#, &title);
    let mut y = 44.0;
    for s in subtitles(inputs) {
        svg::text(&mut body, "subtitle", WIDTH / 2.0, y, "middle", r#" font-size="11""#, &s);
        y += 15.0;
    }
    let mut styles = Styles::new();
    if !curves.is_empty() {
        y = bandwidth::draw(&mut body, inputs, &curves, curves_left_out, &mut styles, y + 16.0);
    }
    if !rated.is_empty() {
        y = rate::draw(&mut body, inputs, &rated, rated_left_out, &mut styles, y + 16.0);
    }
    if !lat.is_empty() {
        y = cdf::draw(&mut body, inputs, &lat, lat_left_out, &mut styles, y + 16.0);
    }
    Ok(svg::document(WIDTH, y + 12.0, &body))
}
