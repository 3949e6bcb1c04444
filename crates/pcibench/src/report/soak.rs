//! A soak (`dma --duration`) in words: its interval rows as they come (a table row, fpga_sio's
//! per-stream line, or a JSON line each), and at the end a row per stream over the whole run,
//! each direction's aggregate against what bounds it, the fairness between streams and every
//! error with its time.

use super::notes::{flags, verify_text};
use super::Format;
use crate::bench::result::Report;
use crate::bench::soak::figures::{Interval, Soak};
use crate::units::human_size;
use std::fmt::Write;

/// The interval rows' header (table).
pub const INTERVAL_HEADER: &str = "    from      to  stream                       xfers   MB/s        verify  errors";

/// One interval's rows as `format` shows them while the run goes on (`first`: the header too);
/// None where the format keeps everything for the end (CSV).
pub fn interval_text(rows: &[Interval], format: Format, first: bool) -> Option<String> {
    let mut s = String::new();
    match format {
        Format::Csv => return None,
        Format::Json => {
            for r in rows {
                let line = serde_json::json!({ "interval": r });
                let _ = writeln!(s, "{line}");
            }
        }
        Format::Seed => {
            // fpga_sio's parallel-streams lines: "  DEVICE H2C -> C2H N Mbytes/sec (B bytes in T secs)".
            for r in rows {
                let _ = writeln!(
                    s,
                    "  {} {:.3} Mbytes/sec ({} bytes in {:.6} secs)",
                    r.label,
                    r.mbps,
                    r.bytes,
                    r.to_s - r.from_s
                );
            }
        }
        Format::Table => {
            if first {
                let _ = writeln!(s, "{INTERVAL_HEADER}");
            }
            for r in rows {
                let verify = match (r.verified, &r.mismatch) {
                    (_, Some(m)) => format!("MISMATCH: {m}"),
                    (Some(true), None) => "ok".into(),
                    _ => "-".into(),
                };
                let _ = writeln!(
                    s,
                    "{:>7.1}s {:>6.1}s  {:<26} {:>7} {:>9.2}  {:>10}  {:>6}{}",
                    r.from_s,
                    r.to_s,
                    r.label,
                    r.transfers,
                    r.mbps,
                    verify,
                    r.errors,
                    if r.partial { "  (partial)" } else { "" }
                );
            }
        }
    }
    Some(s)
}

/// The whole run, after the interval rows (table).
pub fn table(r: &Report, k: &Soak) -> String {
    let mut s = format!(
        "{}\n  {} stream{} at once for {:.1} s ({:.1} s asked), a row per stream every {:.1} s; MB = 10^6 bytes\n",
        super::dma_heading(r),
        k.streams.len(),
        if k.streams.len() == 1 { "" } else { "s" },
        k.ran_s,
        k.duration_s,
        k.every_s
    );
    super::notes::context_lines(&mut s, r);
    let _ = writeln!(
        s,
        "{:<26} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}  verify",
        "stream", "size", "xfers", "min MB/s", "mean MB/s", "med MB/s", "max MB/s", "limit MB/s", "eff"
    );
    for x in &r.results {
        let st = x.stats.as_ref();
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{:<26} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}  {}{}",
            x.stream.as_deref().unwrap_or("-"),
            human_size(x.size),
            st.map_or("-".into(), |s| s.transfers.to_string()),
            f(st.map(|s| s.min_mbps)),
            f(st.map(|s| s.mean_mbps)),
            f(st.map(|s| s.median_mbps)),
            f(st.map(|s| s.max_mbps)),
            f(x.limit_mbps),
            x.efficiency_pct.map_or("-".into(), |e| format!("{e:.1}%")),
            verify_text(&x.verify),
            flags(x)
        );
    }
    let _ = writeln!(s, "(min, med and max: the stream's slowest, middle and fastest interval; mean: all its bytes over the run's time)");
    for a in &k.aggregates {
        let limit = match (a.limit_mbps, a.efficiency_pct) {
            (Some(l), Some(e)) => format!(" of {l:.2} MB/s ({e:.1}%)"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "aggregate {} {}: {} stream{} {:.2} MB/s{limit}",
            a.device,
            a.dir,
            a.streams,
            if a.streams == 1 { "" } else { "s" },
            a.mbps
        );
    }
    for f in &k.fairness {
        let _ = writeln!(
            s,
            "fairness {} {}: slowest/fastest {:.3}, Jain's index {:.3} over {} streams",
            f.device, f.dir, f.slowest_over_fastest, f.jain, f.streams
        );
    }
    if k.errors.is_empty() {
        let _ = writeln!(s, "errors: none");
    } else {
        let _ = writeln!(s, "errors: {}", k.errors.len());
        for e in &k.errors {
            let who = e.stream.and_then(|i| k.streams.get(i)).map_or("engine".to_string(), |st| st.label());
            let _ = writeln!(s, "  at {:.3} s, {who}: {}", e.at_s, e.what);
        }
    }
    super::notes::tail(&mut s, r);
    s
}

/// The whole run as fpga_sio's parallel-streams test ends it: each stream's overall line.
pub fn seed(k: &Soak) -> String {
    let mut s = String::from("Overall:\n");
    for (i, st) in k.streams.iter().enumerate() {
        let ivs = k.intervals.iter().filter(|v| v.stream == i);
        let (bytes, secs) = ivs.fold((0u64, 0.0f64), |(b, t), v| (b + v.bytes, t + (v.to_s - v.from_s)));
        if bytes == 0 {
            let _ = writeln!(s, "  {} No completed transfers", st.label());
        } else {
            let _ = writeln!(
                s,
                "  {} {:.3} Mbytes/sec ({bytes} bytes in {secs:.6} secs)",
                st.label(),
                bytes as f64 / secs.max(1e-9) / 1e6
            );
        }
    }
    s
}
