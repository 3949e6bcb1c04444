//! What every panel (bandwidth, offered load, latency CDF) lays out the same way: its title, its
//! plot area of `PANEL` height with the axes drawn, grey notes at the plot area's top right, and
//! its legend under it, all inside one `<g class="panel ...">`.

use super::axis::{self, Axis};
use super::legend::{self, Entry};
use super::svg;
use super::{PANEL, RIGHT};
use std::fmt::Write;

/// A panel's vertical layout from where it starts.
pub struct Panel {
    /// The plot area's top edge (y axis's high end).
    pub plot_top: f64,
    /// The plot area's bottom edge (y axis's low end, x axis's ticks below it).
    pub bottom: f64,
    top: f64,
}

impl Panel {
    /// The panel starting at `top`: its title, then the plot area 22 px below.
    pub fn at(top: f64) -> Panel {
        let plot_top = top + 22.0;
        Panel { plot_top, bottom: plot_top + PANEL, top }
    }

    /// Open the panel's group (`class`) and draw its title, frame, grid, ticks and axis titles
    /// (x, y).
    pub fn begin(&self, out: &mut String, class: &str, title: &str, x: &Axis, y: &Axis, titles: (&str, &str)) {
        let _ = writeln!(out, "<g class=\"panel {class}\">");
        let bold = r#" font-size="13" font-weight="bold""#;
        svg::text(out, "panel-title", x.px0, self.top + 12.0, "start", bold, title);
        axis::draw(out, x, y, titles.0, titles.1);
    }

    /// A grey note (`class`) right-aligned in the plot area's top right corner, on its `line`th
    /// line (0 first, 14 px apart).
    pub fn note(&self, out: &mut String, class: &str, line: u32, note: &str) {
        let y = self.plot_top + (16.0 + 14.0 * f64::from(line));
        svg::text(out, class, RIGHT - 6.0, y, "end", r##" font-size="10" fill="#555555""##, note);
    }

    /// The legend under the plot area and the panel's group closed; returns the y below it.
    pub fn end(&self, out: &mut String, entries: &[Entry]) -> f64 {
        let end = legend::draw(out, entries, self.bottom + 60.0);
        out.push_str("</g>\n");
        end
    }
}
