//! The engine's own figures (`bench::counters::EngineFigures`) in words, beside the host's: one
//! note for a table's rows, with each row's figures and what a gap between the two views means.

use crate::bench::counters::EngineFigures;
use crate::bench::result::{Report, Row};
use std::fmt::Write;

/// Idle shares at or above this are named as the host not keeping the engine busy.
const IDLE_PCT: f64 = 10.0;

/// The note on the engine's counters for `rows` (each named by `label`), or why a report has
/// none: said once.
pub fn note(r: &Report, rows: &[Row], label: &dyn Fn(&Row) -> String) -> Option<String> {
    if r.engine_counters == Some(false) {
        return Some(format!(
            "the {} engine has no performance counters: the figures are the host's alone",
            r.engine.as_deref().unwrap_or("DMA")
        ));
    }
    let with: Vec<(&Row, &EngineFigures)> = rows.iter().filter_map(|x| x.engine.as_ref().map(|e| (x, e))).collect();
    let (_, first) = with.first()?;
    let mut s = String::from(if first.last_run {
        "the engine's own counters (over each row's median sample: its last run, counting only while the engine ran), \
         beside the host's figures over the same run:"
    } else {
        "the engine's own counters (over each row's median sample, counting throughout), beside the host's figures:"
    });
    for (x, e) in &with {
        let name = label(x);
        let name = if with.len() > 1 || rows.len() > 1 { format!("{name}: ") } else { String::new() };
        let _ = write!(s, "\n      {name}{}", row_text(x, e));
    }
    Some(s)
}

/// One row's figures, then the gap in words.
pub fn row_text(x: &Row, e: &EngineFigures) -> String {
    let mut parts = Vec::new();
    if let Some(m) = e.engine_mbps {
        parts.push(format!("engine {m:.0} MB/s over its counted time"));
    }
    if let Some(h) = e.host_mbps().or(x.stats.as_ref().map(|s| s.median_mbps)) {
        parts.push(format!("host {h:.0} MB/s"));
    }
    if let Some(b) = e.busy_pct {
        parts.push(format!("busy {b:.0}% of the wall time"));
    }
    parts.push(match e.clock_mhz {
        Some(c) if e.last_run || (c - e.implied_clock_mhz).abs() > 1e-9 => format!("clock {c:.0} MHz"),
        Some(c) => format!("clock {c:.0} MHz (cycles over wall time)"),
        None => format!(
            "{:.0} MHz of cycles over wall time (the card's clock is unknown: no busy share)",
            e.implied_clock_mhz
        ),
    });
    let width = e.beat_bytes.map(|w| format!(" of {w} bytes")).unwrap_or_default();
    parts.push(format!("{} cycles, {} data beats{width}", e.cycles, e.beats));
    let mut s = parts.join(", ");
    for g in gap(e) {
        let _ = write!(s, ". {g}");
    }
    s
}

/// What the two views disagreeing means, in words.
pub fn gap(e: &EngineFigures) -> Vec<String> {
    let mut out = Vec::new();
    if e.maxed {
        out.push(
            "MAXED: a counter saturated, so its figures are lower bounds (a shorter --total keeps them in range)"
                .into(),
        );
    }
    if let Some(busy) = e.busy_pct {
        let idle = 100.0 - busy;
        out.push(if idle >= IDLE_PCT {
            format!(
                "The engine was idle {idle:.0}% of the time: the host did not post descriptors fast enough \
                 (each run's submission, completion polling and restart lie between the engine's runs; \
                 larger transfers keep it busier)"
            )
        } else {
            format!("The engine ran {busy:.0}% of the time: the host kept it busy, so its own rate is the limit")
        });
    }
    if let Some(eb) = e.engine_bytes() {
        let hb = e.host_bytes;
        // Beats round each descriptor up to the datapath width: allow one beat per 4 KiB.
        let slack = (hb / 4096 + 1) * e.beat_bytes.unwrap_or(1) as u64;
        if eb.abs_diff(hb) > slack && !e.maxed {
            out.push(format!("The engine counted {eb} bytes where pcibench moved {hb}"));
        }
    }
    out
}
