//! The few SVG elements the plots need, written as text: fixed number formatting (pixels to
//! 0.1, data values in full) so the same input gives byte-identical output, and no fonts,
//! libraries or clock involved.

use std::fmt::Write;

/// Escape text for an XML attribute or element.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => {}
            c => out.push(c),
        }
    }
    out
}

/// A pixel coordinate, to 0.1 px (never "-0"). Integer formatting: a plot of 100,000 points
/// writes a few hundred thousand of these.
pub fn px(v: f64) -> String {
    let mut s = String::with_capacity(8);
    push_px(&mut s, v);
    s
}

fn push_px(out: &mut String, v: f64) {
    let tenths = (v * 10.0).round() as i64;
    if tenths < 0 {
        out.push('-');
    }
    let t = tenths.unsigned_abs();
    let _ = write!(out, "{}", t / 10);
    if t % 10 != 0 {
        out.push('.');
        out.push(char::from(b'0' + (t % 10) as u8));
    }
}

/// Append `x,y` pairs to a points attribute.
pub fn points(out: &mut String, pts: impl IntoIterator<Item = (f64, f64)>) {
    let mut first = true;
    for (x, y) in pts {
        if !first {
            out.push(' ');
        }
        first = false;
        push_px(out, x);
        out.push(',');
        push_px(out, y);
    }
}

/// Data values for a `data-*` attribute: full precision, space-separated.
pub fn values(vals: impl IntoIterator<Item = f64>) -> String {
    let mut s = String::new();
    for (i, v) in vals.into_iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{v}");
    }
    s
}

pub fn line(out: &mut String, class: &str, x1: f64, y1: f64, x2: f64, y2: f64, style: &str) {
    let _ = writeln!(
        out,
        r#"<line class="{class}" x1="{}" y1="{}" x2="{}" y2="{}" {style}/>"#,
        px(x1),
        px(y1),
        px(x2),
        px(y2)
    );
}

/// Text at (x, y); `anchor` is start, middle or end.
pub fn text(out: &mut String, class: &str, x: f64, y: f64, anchor: &str, extra: &str, s: &str) {
    let _ = writeln!(
        out,
        r#"<text class="{class}" x="{}" y="{}" text-anchor="{anchor}"{extra}>{}</text>"#,
        px(x),
        px(y),
        esc(s)
    );
}

/// The document around a body of `height` pixels.
pub fn document(width: f64, height: f64, body: &str) -> String {
    let mut s = String::with_capacity(body.len() + 512);
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#,
        w = px(width),
        h = px(height)
    );
    s.push_str(r##"<rect class="background" width="100%" height="100%" fill="#ffffff"/>"##);
    s.push('\n');
    s.push_str(body);
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_escaping() {
        assert_eq!(px(-0.04), "0");
        assert_eq!(px(-3.26), "-3.3");
        assert_eq!(px(12.0), "12");
        assert_eq!(px(12.345), "12.3");
        assert_eq!(values([1.5, 2.0, 1e-7]), "1.5 2 0.0000001");
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        let mut s = String::new();
        points(&mut s, [(1.0, 2.0), (3.25, 4.0)]);
        assert_eq!(s, "1,2 3.3,4");
    }
}
