//! `--format csv`: one header row, then one row per result with the fields of JSON's rows
//! (flattened, units in the column names), the same columns for every command so files of
//! different runs stack. `run` writes its PIO and DMA rows under one header (`kind` tells them
//! apart). Numbers are written in full (Rust's shortest round-trip form); fields that do not
//! apply are empty. RFC 4180 quoting.

use super::notes::{lines, text};
use super::Exporter;
use crate::bench::result::{Report, Row, Verify};
use crate::bench::sample::stats::Stats;
use crate::measure::SuiteReport;
use crate::results::config::serde_name;
use crate::Result;

pub struct Csv;

/// The columns, in order.
pub const COLUMNS: &[&str] = &[
    "kind",
    "device",
    "via",
    "engine",
    "bar",
    "bar_size_bytes",
    "map",
    "mem",
    "io",
    "dir",
    "width",
    "size_bytes",
    "offset_bytes",
    "queues",
    "window_bytes",
    "concurrent",
    "completion",
    "buffer",
    "access",
    "sync",
    "memory",
    "transfers",
    "samples",
    "batch",
    "bytes",
    "min_mbps",
    "mean_mbps",
    "median_mbps",
    "max_mbps",
    "p5_mbps",
    "p95_mbps",
    "cv_pct",
    "transfer_min_us",
    "transfer_p50_us",
    "transfer_p90_us",
    "transfer_p99_us",
    "transfer_p999_us",
    "transfer_max_us",
    "limit_mbps",
    "efficiency_pct",
    "latency_samples",
    "latency_warmup",
    "latency_overhead_ns",
    "latency_clock",
    "latency_min_ns",
    "latency_mean_ns",
    "latency_p50_ns",
    "latency_p90_ns",
    "latency_p99_ns",
    "latency_p999_ns",
    "latency_p9999_ns",
    "latency_max_ns",
    "latency_outliers",
    "sync_for_cpu_us",
    "main_us",
    "sync_for_device_us",
    "total_us",
    "verify",
    "mismatch_offset",
    "mismatch_expected",
    "mismatch_found",
    "mismatch_count",
    "engine_mbps",
    "engine_busy_pct",
    "engine_clock_mhz",
    "engine_cycles",
    "engine_beats",
    "engine_beat_bytes",
    "engine_maxed",
    "pattern_sha256",
    "flags",
    "notes",
];

/// A field, quoted when it holds a comma, a quote or a line break (RFC 4180).
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One line of fields.
pub fn line(fields: &[String]) -> String {
    let mut s = fields.iter().map(|f| field(f)).collect::<Vec<_>>().join(",");
    s.push('\n');
    s
}

fn o<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn stats_fields(st: Option<&Stats>) -> Vec<String> {
    let f = |g: fn(&Stats) -> f64| o(st.map(g));
    vec![
        o(st.map(|s| s.transfers)),
        o(st.map(|s| s.samples)),
        o(st.map(|s| s.batch)),
        o(st.map(|s| s.bytes)),
        f(|s| s.min_mbps),
        f(|s| s.mean_mbps),
        f(|s| s.median_mbps),
        f(|s| s.max_mbps),
        f(|s| s.p5_mbps),
        f(|s| s.p95_mbps),
        f(|s| s.cv_pct),
        f(|s| s.latency.min_us),
        f(|s| s.latency.p50_us),
        f(|s| s.latency.p90_us),
        f(|s| s.latency.p99_us),
        f(|s| s.latency.p999_us),
        f(|s| s.latency.max_us),
    ]
}

fn latency_fields(x: &Row) -> Vec<String> {
    let l = x.latency.as_ref();
    vec![
        o(l.map(|l| l.samples)),
        o(l.map(|l| l.warmup)),
        o(l.map(|l| l.overhead_ns)),
        o(l.map(|l| l.clock.clone())),
        o(l.map(|l| l.min_ns)),
        o(l.map(|l| l.mean_ns)),
        o(l.map(|l| l.p50_ns)),
        o(l.map(|l| l.p90_ns)),
        o(l.map(|l| l.p99_ns)),
        o(l.map(|l| l.p999_ns)),
        o(l.map(|l| l.p9999_ns)),
        o(l.map(|l| l.max_ns)),
        o(l.map(|l| l.outliers)),
    ]
}

fn verify_fields(x: &Row) -> Vec<String> {
    let status = match &x.verify {
        None => "",
        Some(Verify::Ok) => "ok",
        Some(Verify::Mismatch { .. }) => "mismatch",
        Some(Verify::Unverified { .. }) => "unverified",
        Some(Verify::Rejected { .. }) => "rejected",
    };
    let m = x.mismatch();
    vec![
        status.to_string(),
        o(m.map(|m| m.offset)),
        o(m.map(|m| m.expected)),
        o(m.map(|m| m.found)),
        o(m.map(|m| m.count)),
    ]
}

/// One result row's fields, in `COLUMNS` order.
pub fn row_fields(r: &Report, x: &Row) -> Vec<String> {
    let mut v = vec![
        r.kind.name().to_string(),
        r.device.clone(),
        r.via.to_string(),
        o(r.engine.clone()),
        o(x.bar),
        o(x.bar_size),
        o(x.map.map(|m| m.name())),
        o(x.mem.map(|m| m.name())),
        o(x.io.and_then(|i| serde_name(&i))),
        x.dir.to_string(),
        o(x.width),
        x.size.to_string(),
        o(x.offset),
        o(x.queues),
        o(x.window),
        x.concurrent.to_string(),
        o(x.completion.map(|c| c.name())),
        o(x.buffer.clone()),
        o(x.access.map(|a| a.name())),
        o(x.sync.and_then(|s| serde_name(&s))),
        o(x.memory.clone()),
    ];
    v.extend(stats_fields(x.stats.as_ref()));
    v.push(o(x.limit_mbps));
    v.push(o(x.efficiency_pct));
    v.extend(latency_fields(x));
    let p = x.parts.as_ref();
    v.extend([
        o(p.map(|p| p.sync_for_cpu_us)),
        o(p.map(|p| p.main_us)),
        o(p.map(|p| p.sync_for_device_us)),
        o(p.map(|p| p.total_us)),
    ]);
    v.extend(verify_fields(x));
    let e = x.engine.as_ref();
    v.extend([
        o(e.and_then(|e| e.engine_mbps)),
        o(e.and_then(|e| e.busy_pct)),
        o(e.and_then(|e| e.clock_mhz)),
        o(e.map(|e| e.cycles)),
        o(e.map(|e| e.beats)),
        o(e.and_then(|e| e.beat_bytes)),
        o(e.map(|e| e.maxed)),
    ]);
    v.push(o(x.pattern_sha256.clone()));
    v.push(super::notes::flags(x).split_whitespace().map(|f| f.trim_start_matches('!')).collect::<Vec<_>>().join(" "));
    let mut notes: Vec<String> = x.notes.iter().map(text).collect();
    // The unverified reason, as the table's note lines show it.
    notes.extend(lines(x).into_iter().skip(x.notes.len()));
    v.push(notes.join("; "));
    v
}

/// The header, then every row of every report in order.
/// Stream rows add `packets_per_s` and open-loop rows (`--rate`) `rate::CSV_COLUMNS` at the end,
/// after `notes`: files without them keep the common columns alone, and readers of older files'
/// columns by position still line up.
pub fn document<'a>(reports: impl IntoIterator<Item = &'a Report>) -> String {
    let reports: Vec<&Report> = reports.into_iter().collect();
    let rates = reports.iter().any(|r| super::rate::has_rates(r));
    let packets = reports.iter().any(|r| r.results.iter().any(|x| x.packets_per_s.is_some()));
    let mut head: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    if packets {
        head.push("packets_per_s".into());
    }
    if rates {
        head.extend(super::rate::CSV_COLUMNS.iter().map(|c| c.to_string()));
    }
    let mut s = line(&head);
    for r in reports {
        for x in &r.results {
            let mut v = row_fields(r, x);
            if packets {
                v.push(o(x.packets_per_s));
            }
            if rates {
                v.extend(super::rate::csv_fields(x));
            }
            s.push_str(&line(&v));
        }
    }
    s
}

impl Exporter for Csv {
    fn report(&self, r: &Report) -> Result<String> {
        Ok(document([r]))
    }

    fn suite(&self, x: &SuiteReport) -> Result<String> {
        Ok(document(x.parts()))
    }
}
