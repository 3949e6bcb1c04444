//! DMA reports from engines with queues: a row table with the queue count, access pattern and
//! million transfers per second, and seed 004's summary tables (`qdma_random`'s README): one per
//! access pattern and direction (or both at once), a line per transfer size, a column per queue
//! count, GB/s (10^9 bytes) at the median, and the rate in operations per second.

use super::notes::{flags, verify_text};
use crate::bench::result::{Report, Row, Verify};
use crate::direction::Direction;
use crate::units::human_size;
use std::fmt::Write;

/// Whether the report comes from an engine with queues (rows carry a queue count).
pub fn queued(r: &Report) -> bool {
    r.results.iter().any(|x| x.queues.is_some())
}

/// The direction, with "(bidir)" when both ran at once and the completion mode where the row
/// has one (`--completion`: "h2c irq").
fn dir_label(x: &Row) -> String {
    let mut l = if x.concurrent { format!("{} (bidir)", x.dir) } else { x.dir.to_string() };
    if let Some(c) = x.completion {
        l.push(' ');
        l.push_str(c.name());
    }
    l
}

fn pattern_label(x: &Row) -> String {
    match x.window {
        Some(w) => format!("random in {}", human_size(w)),
        None => "seq".into(),
    }
}

pub const HEADER: &str = "dir          pattern             q      size    xfers   min MB/s  mean MB/s   med MB/s   max MB/s     Mops   cv% limit MB/s    eff  verify";

/// One row of the queued table.
pub fn row_line(x: &Row) -> String {
    let st = x.stats.as_ref();
    let f = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    format!(
        "{:<12} {:<18} {:>2} {:>9} {:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>5} {:>10} {:>6}  {}{}",
        dir_label(x),
        pattern_label(x),
        x.queues.map_or("-".into(), |q| q.to_string()),
        human_size(x.size),
        st.map_or("-".into(), |s| s.transfers.to_string()),
        f(st.map(|s| s.min_mbps)),
        f(st.map(|s| s.mean_mbps)),
        f(st.map(|s| s.median_mbps)),
        f(st.map(|s| s.max_mbps)),
        f(x.ops_mops()),
        st.map_or("-".into(), |s| format!("{:.1}", s.cv_pct)),
        x.limit_mbps.map_or("-".into(), |l| format!("{l:.1}")),
        x.efficiency_pct.map_or("-".into(), |e| format!("{e:.1}%")),
        verify_text(&x.verify),
        flags(x)
    )
}

/// The groups of seed 004's tables: (random window, concurrent, direction when not concurrent).
/// A table of the summary: window, both at once, direction, and the completion mode (each mode
/// its own table with `--completion both`, so its cells never mix).
type Group = (Option<u64>, bool, Option<Direction>, Option<crate::bench::result::Completion>);

fn group(x: &Row) -> Group {
    (x.window, x.concurrent, (!x.concurrent).then_some(x.dir), x.completion)
}

fn cell(x: Option<&Row>) -> String {
    match x {
        Some(r) if r.mismatch().is_some() || r.rejected().is_some() => "MISMATCH".into(),
        Some(Row { stats: Some(s), verify: Some(Verify::Ok), .. }) => format!("{:.2}", s.median_mbps / 1000.0),
        Some(Row { stats: Some(s), .. }) => format!("{:.2} (unverified)", s.median_mbps / 1000.0),
        _ => "x".into(),
    }
}

/// Seed 004's tables, in Markdown as its README has them.
pub fn summary(r: &Report) -> String {
    let mut groups: Vec<Group> = Vec::new();
    for x in r.results.iter().filter(|x| x.queues.is_some()) {
        if !groups.contains(&group(x)) {
            groups.push(group(x));
        }
    }
    let mut out = String::new();
    for g in groups {
        let rows: Vec<&Row> = r.results.iter().filter(|x| x.queues.is_some() && group(x) == g).collect();
        let mut qs: Vec<u16> = rows.iter().filter_map(|x| x.queues).collect();
        qs.sort_unstable();
        qs.dedup();
        let mut sizes: Vec<u64> = rows.iter().map(|x| x.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let what = match g.0 {
            Some(w) => format!("Random access throughput (GB/s), host window {}", human_size(w)),
            None => "Sequential throughput (GB/s)".into(),
        };
        let mut dir = match g {
            (_, true, _, _) => "H2C and C2H at once".to_string(),
            (_, false, Some(d), _) => d.to_string().to_uppercase(),
            _ => String::new(),
        };
        if let Some(c) = g.3 {
            dir.push_str(&format!(", completion by {}", c.name()));
        }
        let _ = writeln!(out, "\n### {what}: {dir}\n");
        let at = |q: u16, size: u64, d: Direction| {
            rows.iter().copied().find(|x| x.queues == Some(q) && x.size == size && x.dir == d && x.completion == g.3)
        };
        if g.1 {
            table_concurrent(&mut out, &qs, &sizes, at);
        } else {
            table_one(&mut out, &qs, &sizes, |q, s| at(q, s, g.2.unwrap_or(Direction::H2c)));
        }
    }
    out
}

fn ops(rows: impl Iterator<Item = Option<f64>>) -> String {
    let best = rows.flatten().fold(0.0f64, f64::max);
    if best >= 10.0 {
        format!("OPS ~ {best:.0}M")
    } else if best >= 0.1 {
        format!("OPS ~ {best:.2}M")
    } else if best > 0.0 {
        format!("OPS ~ {:.1}K", best * 1000.0)
    } else {
        String::new()
    }
}

fn table_one<'a>(out: &mut String, qs: &[u16], sizes: &[u64], at: impl Fn(u16, u64) -> Option<&'a Row>) {
    let head: Vec<String> =
        qs.iter().enumerate().map(|(i, q)| if i == 0 { format!("Qs = {q}") } else { q.to_string() }).collect();
    let _ = writeln!(out, "| package size (Bytes) | {} |  |", head.join(" | "));
    let _ = writeln!(out, "|---|{}---|", "---|".repeat(qs.len()));
    for &size in sizes {
        let cells: Vec<String> = qs.iter().map(|q| cell(at(*q, size))).collect();
        let rate = ops(qs.iter().map(|q| at(*q, size).and_then(|x| x.mops())));
        let _ = writeln!(out, "| {size} | {} | {rate} |", cells.join(" | "));
    }
}

fn table_concurrent<'a>(
    out: &mut String,
    qs: &[u16],
    sizes: &[u64],
    at: impl Fn(u16, u64, Direction) -> Option<&'a Row>,
) {
    let head: Vec<String> =
        qs.iter().enumerate().map(|(i, q)| if i == 0 { format!("Qs={q} |  ") } else { format!("{q} |  ") }).collect();
    let _ = writeln!(out, "| package size (Bytes) | {} |  |", head.join(" | "));
    let _ = writeln!(out, "|---|{}---|", "---|---|".repeat(qs.len()));
    let sub: Vec<&str> = qs.iter().map(|_| "H2C | C2H").collect();
    let _ = writeln!(out, "|  | {} |  |", sub.join(" | "));
    for &size in sizes {
        let cells: Vec<String> = qs
            .iter()
            .map(|q| format!("{} | {}", cell(at(*q, size, Direction::H2c)), cell(at(*q, size, Direction::C2h))))
            .collect();
        let both = |q: u16| -> Option<f64> {
            Some(at(q, size, Direction::H2c)?.mops()? + at(q, size, Direction::C2h)?.mops()?)
        };
        let rate = ops(qs.iter().map(|q| both(*q)));
        let _ = writeln!(out, "| {size} | {} | {rate} |", cells.join(" | "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::stats::Samples;

    /// Issue 50 item 14: a stream row's Mops counts packets at every size: a 64 KiB QDMA ST
    /// transfer is 4 packets of 16 KiB, so 1 GB/s is 0.06 M packets a second, not 0.02 M
    /// transfers (what the column showed before above 28 KiB).
    #[test]
    fn item14_a_stream_rows_mops_counts_packets() {
        let mut row = Row::new(Direction::C2h, 64 << 10);
        // Ten runs of one 64 KiB transfer at 1 GB/s.
        let mut s = Samples::new(64 << 10, 1);
        s.secs = vec![(64 << 10) as f64 / 1e9; 10];
        row.stats = s.stats();
        assert_eq!(row.ops_mops(), row.mops(), "no packets: transfers");
        row.packets_per_s = Some(1e9 / (16 << 10) as f64);
        let line = row_line(&row);
        assert!(line.contains(" 0.06 "), "{line}");
        assert!(!line.contains(" 0.02 "), "{line}");
    }
}
