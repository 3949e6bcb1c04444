//! A legend under a panel: a line sample in the entry's colour and dash, and its label, in two
//! columns.

use super::svg::{esc, px};
use super::{LEFT, RIGHT};
use std::fmt::Write;

pub struct Entry {
    pub color: String,
    /// A ` stroke-dasharray="..."` attribute, or empty.
    pub dash: String,
    pub width: f64,
    pub label: String,
}

const ROW: f64 = 16.0;
/// About what fits in a column at 11 px.
const MAX_CHARS: usize = 66;

/// Draw the entries from `top`; returns the y below the legend.
pub fn draw(out: &mut String, entries: &[Entry], top: f64) -> f64 {
    let col = (RIGHT - LEFT) / 2.0;
    out.push_str("<g class=\"legend\" font-size=\"11\">\n");
    for (i, e) in entries.iter().enumerate() {
        let x = LEFT + (i % 2) as f64 * col;
        let y = top + (i / 2) as f64 * ROW;
        let _ = writeln!(
            out,
            r#"<line class="swatch" x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{}"{}/>"#,
            px(x),
            px(y - 4.0),
            px(x + 28.0),
            px(y - 4.0),
            e.color,
            e.width,
            e.dash
        );
        let label = if e.label.chars().count() > MAX_CHARS {
            format!("{}…", e.label.chars().take(MAX_CHARS - 1).collect::<String>())
        } else {
            e.label.clone()
        };
        let _ = writeln!(out, r#"<text x="{}" y="{}">{}</text>"#, px(x + 34.0), px(y), esc(&label));
    }
    out.push_str("</g>\n");
    top + entries.len().div_ceil(2) as f64 * ROW
}
