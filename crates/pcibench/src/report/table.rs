//! The default readable table: a header naming the device and path, one row per configuration,
//! notes under their row, then warnings. PIO and DMA reports have their own columns.

use super::notes::{flags, grouped, verify_text};
use super::{dma_heading, simulated_label, Exporter};
use crate::bench::result::{Kind, Report, Row};
use crate::dma::Addressing;
use crate::measure::SuiteReport;
use crate::units::human_size;
use crate::Result;
use std::fmt::Write;

pub struct Table {
    /// Also print per-transfer latency percentiles (PIO).
    pub latency: bool,
}

impl Table {
    /// One report; `notes`: its notes follow its rows (a suite prints them once for all parts).
    fn part(&self, r: &Report, notes: bool) -> String {
        let mut s = match r.kind {
            Kind::Pio => pio(r, notes),
            Kind::Dma if super::rate::has_rates(r) => super::rate::dma_table(r),
            Kind::Dma => dma(r, notes),
            Kind::Buffers => super::buffers::table(r),
            Kind::Latency => super::latency::table(r),
        };
        if self.latency && r.kind == Kind::Pio {
            s.push_str(&latency(r));
        }
        s
    }
}

impl Exporter for Table {
    fn report(&self, r: &Report) -> Result<String> {
        Ok(self.part(r, true))
    }

    /// `== info`, `== PIO`, `== DMA` sections, then `== notes`: each kind of note of both parts
    /// once, with the rows it applies to.
    fn suite(&self, x: &SuiteReport) -> Result<String> {
        let mut s = String::from("== info\n");
        s.push_str(&super::info::info_text(&x.info));
        s.push_str(&super::info::engines_text(&x.engines));
        s.push_str("\n== PIO\n");
        for n in x.notes.iter().filter(|n| n.starts_with("PIO")) {
            let _ = writeln!(s, "({n})");
        }
        if let Some(p) = &x.pio {
            s.push_str(&self.part(p, false));
        }
        s.push_str("\n== DMA\n");
        for n in x.notes.iter().filter(|n| n.starts_with("DMA")) {
            let _ = writeln!(s, "{n}");
        }
        if let Some(d) = &x.dma {
            s.push_str(&self.part(d, false));
        }
        let rows: Vec<Row> = x.parts().flat_map(|r| r.results.iter().cloned()).collect();
        let notes = grouped(&rows, |r| {
            if r.bar.is_some() {
                format!("PIO {}", pio_label(r))
            } else {
                format!("DMA {}", dma_label(r))
            }
        });
        if !notes.is_empty() {
            s.push_str("\n== notes\n");
            for n in notes {
                let _ = writeln!(s, "note: {n}");
            }
        }
        Ok(s)
    }
}

fn f2(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

fn cv(r: &Row) -> String {
    r.stats.as_ref().map(|s| format!("{:.1}", s.cv_pct)).unwrap_or_else(|| "-".into())
}

fn limit(r: &Row) -> String {
    r.limit_mbps.map(|l| format!("{l:.1}")).unwrap_or_else(|| "-".into())
}

fn eff(r: &Row) -> String {
    r.efficiency_pct.map(|e| format!("{e:.1}%")).unwrap_or_else(|| "-".into())
}

/// xfers, min, mean, median, max.
fn throughput(r: &Row) -> [String; 5] {
    let st = r.stats.as_ref();
    [
        st.map(|s| s.transfers.to_string()).unwrap_or_else(|| "-".into()),
        f2(st.map(|s| s.min_mbps)),
        f2(st.map(|s| s.mean_mbps)),
        f2(st.map(|s| s.median_mbps)),
        f2(st.map(|s| s.max_mbps)),
    ]
}

/// The rows, then each kind of note once with the rows it applies to (`label` names a row
/// there), then the warnings.
fn notes_and_warnings(
    s: &mut String,
    rows: &[Row],
    r: &Report,
    each: impl Fn(&Row) -> String,
    label: Option<fn(&Row) -> String>,
) {
    for x in rows {
        let _ = writeln!(s, "{}", each(x));
    }
    for n in label.map(|l| grouped(rows, l)).unwrap_or_default() {
        let _ = writeln!(s, "note: {n}");
    }
    if let Some(n) = label.and_then(|l| super::counters::note(r, rows, &l)) {
        let _ = writeln!(s, "note: {n}");
    }
    super::notes::tail(s, r);
}

/// A PIO row as the notes name it: "BAR0 uc h2c 64 1 MiB".
fn pio_label(x: &Row) -> String {
    let io = if x.io == Some(crate::access::IoMode::Syscall) { "-sys" } else { "" };
    format!(
        "BAR{} {}{io} {} {} {}",
        x.bar.map_or("-".into(), |b| b.to_string()),
        x.map.map_or("-", |m| m.name()),
        x.dir,
        x.width.map_or("-".into(), |w| w.to_string()),
        if x.size == 0 { "-".into() } else { human_size(x.size) }
    )
}

/// A DMA row as the notes name it: "64 KiB h2c" (with its queues and pattern where it has them).
fn dma_label(x: &Row) -> String {
    let mut l = format!("{} {}{}", human_size(x.size), x.dir, if x.concurrent { " (bidir)" } else { "" });
    if let Some(c) = x.completion {
        let _ = write!(l, " {}", c.name());
    }
    if let Some(q) = x.queues {
        let _ = write!(l, " q{q}");
    }
    if let Some(w) = x.window {
        let _ = write!(l, " random in {}", human_size(w));
    }
    l
}

fn pio(r: &Report, notes: bool) -> String {
    let mut s = format!(
        "pcibench pio {} via {}{}; timer overhead {:.0} ns; MB = 10^6 bytes\n",
        r.device,
        r.via,
        simulated_label(r.simulated),
        r.timer_overhead_ns
    );
    super::notes::context_lines(&mut s, r);
    if let Some(line) = memory_line(r) {
        let _ = writeln!(s, "  {line}");
    }
    let _ = writeln!(
        s,
        "{:>3} {:<8} {:<3} {:<9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>5} {:>10} {:>6}  verify",
        "BAR",
        "map",
        "dir",
        "width",
        "size",
        "xfers",
        "min MB/s",
        "mean MB/s",
        "med MB/s",
        "max MB/s",
        "cv%",
        "limit MB/s",
        "eff"
    );
    notes_and_warnings(
        &mut s,
        &r.results,
        r,
        |x| {
            let io = if x.io == Some(crate::access::IoMode::Syscall) { "-sys" } else { "" };
            let map = format!("{}{io}", x.map.map_or("-", |m| m.name()));
            let [xfers, min, mean, med, max] = throughput(x);
            let size = if x.size == 0 { "-".into() } else { human_size(x.size) };
            format!(
                "{:>3} {:<8} {:<3} {:<9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>5} {:>10} {:>6}  {}{}",
                x.bar.map_or("-".into(), |b| b.to_string()),
                map,
                x.dir,
                x.width.map_or("-".into(), |w| w.to_string()),
                size,
                xfers,
                min,
                mean,
                med,
                max,
                cv(x),
                limit(x),
                eff(x),
                verify_text(&x.verify),
                flags(x)
            )
        },
        notes.then_some(pio_label as fn(&Row) -> String),
    );
    s
}

/// Where the memory behind the mappings is not what `--map` names (the sim card's BARs are
/// write-back host memory), one line saying so and which loads the reads used; each row carries
/// its memory type in JSON and CSV (`mem`). On a real BAR the map column says it all.
fn memory_line(r: &Report) -> Option<String> {
    let mut other: Vec<crate::mmio::MemType> = Vec::new();
    for x in &r.results {
        if let (Some(map), Some(mem)) = (x.map, x.mem) {
            if map.mapping().mem_type() != mem && !other.contains(&mem) {
                other.push(mem);
            }
        }
    }
    let words = |m: &crate::mmio::MemType| match m {
        crate::mmio::MemType::Wb => "write-back (host memory)",
        crate::mmio::MemType::Wc => "write-combining",
        crate::mmio::MemType::Uc => "uncached",
    };
    match &other[..] {
        [] => None,
        [m] => Some(format!(
            "memory: {} behind every mapping, whatever --map names; vector reads use {}",
            words(m),
            m.vector_loads()
        )),
        ms => Some(format!(
            "memory: {} behind the mappings (each row's mem in --json/--csv)",
            ms.iter().map(words).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn dma(r: &Report, notes: bool) -> String {
    if let Some(k) = &r.soak {
        return super::soak::table(r, k);
    }
    if let Some(t) = &r.memtest {
        return super::memtest::table(r, t);
    }
    let addressing = match r.addressing {
        Some(Addressing::Iova) => "IOVA (IOMMU-mapped)",
        Some(Addressing::Physical) => "physical",
        Some(Addressing::Sim) => "sim-card",
        None => "unknown",
    };
    let mut s = format!(
        "{}; the card was given {addressing} addresses; timer overhead {:.0} ns; MB = 10^6 bytes\n",
        dma_heading(r),
        r.timer_overhead_ns
    );
    super::notes::context_lines(&mut s, r);
    if super::queues::queued(r) {
        let _ = writeln!(s, "{}", super::queues::HEADER);
        notes_and_warnings(
            &mut s,
            &r.results,
            r,
            super::queues::row_line,
            notes.then_some(dma_label as fn(&Row) -> String),
        );
        s.push_str(&super::queues::summary(r));
        return s;
    }
    // `--completion`: the way each row saw completion, first (rows side by side with `both`).
    let by = r.results.iter().any(|x| x.completion.is_some());
    let by_col = |x: Option<&str>| if by { format!("{:<4} ", x.unwrap_or("-")) } else { String::new() };
    // Stream rows (one packet per transfer) give packets per second beside MB/s.
    let packets = r.results.iter().any(|x| x.packets_per_s.is_some());
    let pkt = |v: &str| if packets { format!(" {v:>9}") } else { String::new() };
    let _ = writeln!(
        s,
        "{}{:<3} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10}{} {:>5} {:>10} {:>6} {:>9} {:>9}  verify",
        by_col(Some("by")),
        "dir",
        "size",
        "xfers",
        "min MB/s",
        "mean MB/s",
        "med MB/s",
        "max MB/s",
        pkt("Mpkt/s"),
        "cv%",
        "limit MB/s",
        "eff",
        "p50 µs",
        "p99 µs"
    );
    notes_and_warnings(
        &mut s,
        &r.results,
        r,
        |x| {
            let [xfers, min, mean, med, max] = throughput(x);
            let st = x.stats.as_ref();
            format!(
                "{}{:<3} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10}{} {:>5} {:>10} {:>6} {:>9} {:>9}  {}{}",
                by_col(x.completion.map(|c| c.name())),
                x.dir.to_string(),
                human_size(x.size),
                xfers,
                min,
                mean,
                med,
                max,
                pkt(&x.packets_per_s.map_or("-".into(), |p| format!("{:.3}", p / 1e6))),
                cv(x),
                limit(x),
                eff(x),
                f2(st.map(|s| s.latency.p50_us)),
                f2(st.map(|s| s.latency.p99_us)),
                verify_text(&x.verify),
                flags(x)
            )
        },
        notes.then_some(dma_label as fn(&Row) -> String),
    );
    s
}

/// Latency per transfer, one row per measured PIO configuration.
fn latency(r: &Report) -> String {
    let mut s = String::from("latency per transfer (µs):\n");
    let _ = writeln!(
        s,
        "{:>3} {:<8} {:<3} {:<9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "BAR", "map", "dir", "width", "size", "min", "p50", "p90", "p99", "p99.9", "max"
    );
    for x in &r.results {
        let Some(st) = &x.stats else { continue };
        let l = &st.latency;
        let _ = writeln!(
            s,
            "{:>3} {:<8} {:<3} {:<9} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            x.bar.map_or("-".into(), |b| b.to_string()),
            x.map.map_or("-", |m| m.name()),
            x.dir,
            x.width.map_or("-".into(), |w| w.to_string()),
            human_size(x.size),
            l.min_us,
            l.p50_us,
            l.p90_us,
            l.p99_us,
            l.p999_us,
            l.max_us
        );
    }
    s
}
