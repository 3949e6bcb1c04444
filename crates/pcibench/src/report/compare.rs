//! `pcibench compare`'s output: a table (context differences first, the questionable ones
//! marked `!!`, then B/A per row with its range and verdict, then a summary), JSON (the
//! comparison and its counts) or CSV (one row per matched configuration).

use super::csv::line;
use crate::results::compare::{Comparison, ContextDiff, EngineSide, Verdict};
use crate::Result;
use serde::Serialize;
use std::fmt::Write;

/// The context differences that make the comparison questionable, as one warning line (for
/// stderr when the output is CSV or JSON), or None.
pub fn questionable_line(c: &Comparison) -> Option<String> {
    let names: Vec<&str> = c.context.iter().filter(|d| d.questionable).map(|d| d.what.as_str()).collect();
    if names.is_empty() {
        return None;
    }
    Some(format!("QUESTIONABLE: the runs differ in {}: the rows do not compare like for like", names.join(", ")))
}

fn context(s: &mut String, c: &Comparison) {
    if c.context.is_empty() {
        s.push_str("context: the same device, link, access path, IOMMU mode, CPU, kernel and pcibench version\n");
        return;
    }
    s.push_str("context that differs (A -> B):\n");
    for d in &c.context {
        let ContextDiff { what, a, b, questionable, why } = d;
        let mark = if *questionable { "!!" } else { "  " };
        let why = why.as_deref().map(|w| format!(": {w}")).unwrap_or_default();
        let _ = writeln!(s, "{mark} {what:<14} {a} -> {b}{why}");
    }
    if let Some(q) = questionable_line(c) {
        let _ = writeln!(s, "{q} (marked !!)");
    }
}

fn f2(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".into()
    }
}

fn f3(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "-".into()
    }
}

/// The most configurations an "only in A" (B, not compared) line names.
const LISTED: usize = 20;

/// The engine's own figures of a compared row, A -> B, where either side has them: a host
/// figure that moved while the engine's did not points at the host, and the other way round.
fn engine_line(a: Option<&EngineSide>, b: Option<&EngineSide>) -> Option<String> {
    if a.is_none() && b.is_none() {
        return None;
    }
    let side = |e: Option<&EngineSide>| match e {
        None => "no counters".to_string(),
        Some(e) => {
            let mbps = e.engine_mbps.map(|m| format!("{m:.0} MB/s")).unwrap_or_else(|| "- MB/s".into());
            let busy = e.busy_pct.map(|b| format!(", busy {b:.0}%")).unwrap_or_default();
            let maxed = if e.maxed { " (maxed)" } else { "" };
            format!("{mbps}{busy}{maxed}")
        }
    };
    Some(format!("A {} -> B {}", side(a), side(b)))
}

/// The readable comparison.
pub fn table(c: &Comparison) -> String {
    let mut s = format!("pcibench compare: B = {} against A = {}\n", c.b.file, c.a.file);
    for (name, side) in [("A", &c.a), ("B", &c.b)] {
        let _ = writeln!(
            s,
            "{name}  {}: pcibench {} on {}, {}, pcibench {}",
            side.file,
            side.command,
            side.device.as_deref().unwrap_or("no device"),
            side.time.as_deref().unwrap_or("time unknown"),
            side.pcibench_version.as_deref().unwrap_or("?")
        );
    }
    context(&mut s, c);
    s.push('\n');
    let w = c.rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(13).clamp(13, 48);
    let _ = writeln!(
        s,
        "{:<w$} {:>11} {:>6} {:>11} {:>6} {:>7} {:>15}  verdict",
        "configuration", "A med MB/s", "±%", "B med MB/s", "±%", "B/A", "B/A range"
    );
    for r in &c.rows {
        let range = format!("{}..{}", f3(r.ratio_low), f3(r.ratio_high));
        let _ = writeln!(
            s,
            "{:<w$} {:>11} {:>6.1} {:>11} {:>6.1} {:>7} {:>15}  {}",
            r.label,
            f2(r.a.median_mbps),
            r.a.spread_pct(),
            f2(r.b.median_mbps),
            r.b.spread_pct(),
            f3(r.ratio),
            range,
            r.verdict.word()
        );
        if !r.caveats.is_empty() {
            let _ = writeln!(s, "      caveat: {}", r.caveats.join("; "));
        }
        if let Some(e) = engine_line(r.engine_a.as_ref(), r.engine_b.as_ref()) {
            let _ = writeln!(s, "      engine: {e}");
        }
    }
    for (what, list) in [
        ("only in A", &c.only_a),
        ("only in B", &c.only_b),
        ("not compared (skipped, or no throughput figures, in A or B)", &c.unmeasured),
    ] {
        // Named up to a screenful; the JSON output lists them all.
        if !list.is_empty() {
            let shown: Vec<&str> = list.iter().take(LISTED).map(String::as_str).collect();
            let more = match list.len().saturating_sub(LISTED) {
                0 => String::new(),
                n => format!(" (and {n} more: --format json lists them all)"),
            };
            let _ = writeln!(s, "{what}: {}{more}", shown.join(", "));
        }
    }
    let _ = writeln!(
        s,
        "summary: {} slower, {} faster, {} within noise, {} with too few samples to judge; a change is flagged when the p5..p95 bands do not overlap and the medians differ by {}% or more",
        c.count(Verdict::Slower),
        c.count(Verdict::Faster),
        c.count(Verdict::Same),
        c.count(Verdict::FewSamples),
        super::plot::axis::number(c.threshold_pct)
    );
    s
}

#[derive(Serialize)]
struct Counts {
    slower: usize,
    faster: usize,
    same: usize,
    few_samples: usize,
    questionable: bool,
}

#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    comparison: &'a Comparison,
    summary: Counts,
}

/// One JSON document: the comparison and its counts.
pub fn json(c: &Comparison) -> Result<String> {
    super::json::to_json(&Document {
        comparison: c,
        summary: Counts {
            slower: c.count(Verdict::Slower),
            faster: c.count(Verdict::Faster),
            same: c.count(Verdict::Same),
            few_samples: c.count(Verdict::FewSamples),
            questionable: c.questionable(),
        },
    })
}

pub const CSV_COLUMNS: &[&str] = &[
    "configuration",
    "kind",
    "dir",
    "size_bytes",
    "a_median_mbps",
    "a_p5_mbps",
    "a_p95_mbps",
    "a_samples",
    "b_median_mbps",
    "b_p5_mbps",
    "b_p95_mbps",
    "b_samples",
    "ratio",
    "ratio_low",
    "ratio_high",
    "verdict",
    "caveats",
];

/// One header row, then one row per matched configuration.
pub fn csv(c: &Comparison) -> String {
    let mut s = line(&CSV_COLUMNS.iter().map(|c| c.to_string()).collect::<Vec<_>>());
    for r in &c.rows {
        let verdict = crate::results::config::serde_name(&r.verdict).unwrap_or_default();
        s.push_str(&line(&[
            r.label.clone(),
            r.config.kind.name().to_string(),
            r.config.dir.to_string(),
            r.config.size.to_string(),
            r.a.median_mbps.to_string(),
            r.a.p5_mbps.to_string(),
            r.a.p95_mbps.to_string(),
            r.a.samples.to_string(),
            r.b.median_mbps.to_string(),
            r.b.p5_mbps.to_string(),
            r.b.p95_mbps.to_string(),
            r.b.samples.to_string(),
            r.ratio.to_string(),
            r.ratio_low.to_string(),
            r.ratio_high.to_string(),
            verdict,
            r.caveats.join("; "),
        ]));
    }
    s
}
