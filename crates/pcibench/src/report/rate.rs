//! Rows measured open loop at an offered rate (`--rate`): the table of offered against achieved
//! rate and latency from each transfer's due time, the extra CSV columns, and `--format seed`'s
//! DMA-latency shape of seed 004 (packet size, OPS limit, Mops, GB/s, latency).

use super::dma_heading;
use super::notes::{flags, verify_text};
use crate::bench::rate::ops_words;
use crate::bench::result::{RateFigures, Report, Row};
use crate::units::human_size;
use std::fmt::Write;

/// Whether the report holds open-loop rows.
pub fn has_rates(r: &Report) -> bool {
    r.results.iter().any(|x| x.rate.is_some())
}

fn rated(r: &Report) -> impl Iterator<Item = (&Row, &RateFigures)> {
    r.results.iter().filter_map(|x| x.rate.as_ref().map(|f| (x, f)))
}

/// `dma --rate`: the header, then the rate table.
pub fn dma_table(r: &Report) -> String {
    let mut s = format!("{}; MB = 10^6 bytes\n", dma_heading(r));
    if let Some(c) = &r.context {
        let _ = writeln!(s, "  {}", super::notes::where_it_ran(c));
    }
    s.push_str(&table(r));
    super::notes::tail(&mut s, r);
    s
}

const HEAD: [&str; 16] = [
    "dir", "size", "q", "offered", "Mops", "MB/s", "samples", "min", "p50", "p90", "p99", "p99.9", "max", "late",
    "dropped", "verify",
];

fn line(c: &[String]) -> String {
    format!(
        "{:<3} {:>8} {:>3} {:>12} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>7}  {}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]
    )
}

/// The open-loop section: one line per offered rate, then what bounds the figures, in words.
pub fn table(r: &Report) -> String {
    let Some((_, first)) = rated(r).next() else { return String::new() };
    let mut s = String::from(
        "DMA latency under offered load (open loop: transfers submitted on schedule, each one's latency counted from when it was due; ns)\n",
    );
    let _ = writeln!(s, "{}", line(&HEAD.map(String::from)));
    for (x, f) in rated(r) {
        let l = x.latency.as_ref().filter(|l| l.samples > 0);
        let ns = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let cells = [
            x.dir.to_string(),
            human_size(x.size),
            x.queues.unwrap_or(1).to_string(),
            ops_words(f.offered_ops),
            format!("{:.3}", f.achieved_ops / 1e6),
            format!("{:.2}", f.achieved_mbps),
            l.map_or("0".into(), |l| l.samples.to_string()),
            ns(l.map(|l| l.min_ns)),
            ns(l.map(|l| l.p50_ns)),
            ns(l.map(|l| l.p90_ns)),
            ns(l.map(|l| l.p99_ns)),
            ns(l.map(|l| l.p999_ns)),
            ns(l.map(|l| l.max_ns)),
            f.late.to_string(),
            f.dropped.to_string(),
            format!("{}{}{}", verify_text(&x.verify), if f.host_limited() { " !host" } else { "" }, flags(x)),
        ];
        let _ = writeln!(s, "{}", line(&cells));
    }
    let _ = writeln!(
        s,
        "  the loop's own cost: {:.0} ns a transfer on this host (it could schedule at most {}); late: posted over 1 µs behind \
         its time while the card had room (!host: over 1% late, the host is the limit, not the card); dropped: never posted, the \
         row's time ran out",
        first.loop_ns,
        ops_words(if first.loop_ns > 0.0 { 1e9 / first.loop_ns } else { 0.0 })
    );
    if !first.posted_ahead {
        let _ = writeln!(
            s,
            "  each transfer waited for the one before (the engine runs one at a time): the rate kept is bounded by the closed loop"
        );
    }
    s
}

/// The CSV columns of open-loop rows, appended after the common ones where a report has any.
pub const CSV_COLUMNS: [&str; 9] = [
    "offered_ops",
    "achieved_ops",
    "achieved_mbps",
    "scheduled",
    "posted",
    "late",
    "dropped",
    "loop_ns",
    "posted_ahead",
];

/// A row's values for `CSV_COLUMNS` (empty where it has no rate).
pub fn csv_fields(x: &Row) -> Vec<String> {
    match &x.rate {
        None => vec![String::new(); CSV_COLUMNS.len()],
        Some(f) => vec![
            f.offered_ops.to_string(),
            f.achieved_ops.to_string(),
            f.achieved_mbps.to_string(),
            f.scheduled.to_string(),
            f.posted.to_string(),
            f.late.to_string(),
            f.dropped.to_string(),
            f.loop_ns.to_string(),
            f.posted_ahead.to_string(),
        ],
    }
}

/// Seed 004's DMA-latency table shape (its README's Markdown): per direction, a row per offered
/// rate with the packet size, the OPS limit (the rate offered), the throughput reached (Mops,
/// GB/s) and the mean latency in µs, as `latency --format seed` prints the closed loop's.
pub fn seed(r: &Report) -> String {
    let mut s = String::new();
    if !has_rates(r) {
        return s;
    }
    let _ =
        writeln!(s, "\n## DMA latency under offered load ({} engine, open loop)", r.engine.as_deref().unwrap_or("-"));
    for dir in [crate::direction::Direction::H2c, crate::direction::Direction::C2h] {
        let rows: Vec<_> = rated(r).filter(|(x, _)| x.dir == dir).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n### {}\n", dir.to_string().to_uppercase());
        s.push_str(
            "| Packet Size | Queues | OPS limit (Mops) | Throughput (Mops) | Throughput (GB/s) | Latency (us) |\n",
        );
        s.push_str(
            "|-------------|--------|------------------|-------------------|-------------------|--------------|\n",
        );
        for (x, f) in rows {
            let mean = x.latency.as_ref().map_or(0.0, |l| l.mean_ns / 1e3);
            let _ = writeln!(
                s,
                "| {:<11} | {:<6} | {:<16} | {:<17} | {:<17} | {:<12} |",
                human_size(x.size).replace(' ', ""),
                x.queues.unwrap_or(1),
                format!("{:.3}", f.offered_ops / 1e6),
                format!("{:.3}", f.achieved_ops / 1e6),
                format!("{:.3}", f.achieved_mbps / 1e3),
                format!("{mean:.2}")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::bench::result::{Kind, LatencyFigures, Verify};
    use crate::direction::Direction;

    fn report() -> Report {
        let mut r = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
        for (offered, achieved, p50, late) in [(1e6, 1e6, 1500.0, 0), (2e6, 1.2e6, 11_200.0, 40)] {
            let mut x = Row::new(Direction::H2c, 4096);
            x.queues = Some(4);
            x.verify = Some(Verify::Ok);
            x.latency = Some(LatencyFigures {
                samples: 1000,
                p50_ns: p50,
                mean_ns: p50,
                p99_ns: 2.0 * p50,
                ..Default::default()
            });
            x.rate = Some(RateFigures {
                offered_ops: offered,
                achieved_ops: achieved,
                achieved_mbps: achieved * 4096.0 / 1e6,
                posted: 1000,
                late,
                loop_ns: 25.0,
                posted_ahead: true,
                ..Default::default()
            });
            r.results.push(x);
        }
        r
    }

    #[test]
    fn the_table_shows_offered_against_achieved_and_names_the_host_when_it_is_the_limit() {
        let t = dma_table(&report());
        assert!(t.contains("1.000 M/s"), "{t}");
        assert!(t.contains("   1.200   4915.20"), "{t}");
        // 40 of 1000 late: the host, not the card, limited the second row.
        assert_eq!(t.lines().filter(|l| l.ends_with("ok !host")).count(), 1, "{t}");
        assert!(
            t.contains("the loop's own cost: 25 ns a transfer on this host (it could schedule at most 40.000 M/s)"),
            "{t}"
        );
    }

    #[test]
    fn csv_adds_the_rate_columns_only_where_a_report_has_open_loop_rows() {
        let doc = super::super::csv::document([&report()]);
        let head: Vec<&str> = doc.lines().next().unwrap().split(',').collect();
        assert_eq!(head.len(), super::super::csv::COLUMNS.len() + CSV_COLUMNS.len());
        assert_eq!(&head[head.len() - CSV_COLUMNS.len()..], CSV_COLUMNS);
        let second = doc.lines().nth(2).unwrap();
        assert!(second.ends_with(",2000000,1200000,4915.2,0,1000,40,0,25,true"), "{second}");
        let mut plain = report();
        plain.results.iter_mut().for_each(|x| x.rate = None);
        let doc = super::super::csv::document([&plain]);
        assert_eq!(doc.lines().next().unwrap().split(',').count(), super::super::csv::COLUMNS.len());
    }

    #[test]
    fn seed_prints_the_dma_latency_table_shape() {
        let s = seed(&report());
        assert!(s.starts_with("\n## DMA latency under offered load (- engine, open loop)\n\n### H2C\n"), "{s}");
        assert!(s.contains(
            "| Packet Size | Queues | OPS limit (Mops) | Throughput (Mops) | Throughput (GB/s) | Latency (us) |"
        ));
        assert!(
            s.contains(
                "| 4KiB        | 4      | 2.000            | 1.200             | 4.915             | 11.20        |"
            ),
            "{s}"
        );
        assert_eq!(csv_fields(&report().results[1])[5], "40");
        assert_eq!(csv_fields(&Row::new(Direction::C2h, 1)), vec![String::new(); 9]);
    }
}
