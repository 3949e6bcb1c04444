//! Latency reports (`pcibench latency`): the table (one row per configuration: percentiles in
//! nanoseconds, the load beside the rows measured under it, then seed 004's "latency under DMA
//! load" shape and poll against MSI), and `--format seed`: seed 004's AXI-Lite and DMA latency
//! tables in Markdown, as its README prints them.

use super::notes::{flags, lines, verify_text, where_it_ran};
use super::simulated_label;
use crate::bench::result::Note;
use crate::bench::result::{Completion, LatencyFigures, Probe, Report, Row};
use crate::direction::Direction;
use crate::dma::Addressing;
use crate::units::human_size;
use crate::{Error, Result};
use std::fmt::Write;

fn ns(v: f64) -> String {
    format!("{v:.0}")
}

fn us(v: f64) -> String {
    format!("{:.3}", v / 1e3)
}

/// "12" or "12-14" for values that differ between rows.
fn span(mut v: Vec<u64>) -> Option<String> {
    v.sort_unstable();
    v.dedup();
    match (v.first(), v.last()) {
        (Some(a), Some(b)) if a == b => Some(a.to_string()),
        (Some(a), Some(b)) => Some(format!("{a}-{b}")),
        _ => None,
    }
}

fn figures(r: &Report) -> impl Iterator<Item = &LatencyFigures> {
    r.results.iter().filter_map(|x| x.latency.as_ref()).filter(|l| l.samples > 0)
}

/// "mmio-read", "write-read", "dma poll", "dma msi".
fn what(x: &Row) -> String {
    match (x.probe, x.completion) {
        (Some(p), Some(c)) => format!("{} {}", p.name(), c.name()),
        (Some(p), None) => p.name().to_string(),
        _ => "-".into(),
    }
}

fn under(x: &Row) -> String {
    x.load.as_ref().map_or("idle".to_string(), |l| l.label())
}

fn header(r: &Report) -> String {
    let mut s = format!("pcibench latency {} via {}{}\n", r.device, r.via, simulated_label(r.simulated));
    let clock = figures(r).next().map(|l| l.clock.clone()).unwrap_or_else(|| "-".into());
    let cost = span(figures(r).map(|l| l.overhead_ns.round() as u64).collect()).unwrap_or_else(|| "-".into());
    let warm = span(figures(r).map(|l| l.warmup).collect()).unwrap_or_else(|| "0".into());
    // The clock is named on the line of where it ran when there is one.
    let clock = if r.context.is_some() { "the clock's".to_string() } else { format!("clock {clock}; its") };
    let _ = writeln!(
        s,
        "  single accesses, never batched; {clock} cost ({cost} ns a sample) subtracted; {warm} warm-up accesses per row run and discarded; latencies in ns"
    );
    if let Some(c) = &r.context {
        let _ = writeln!(s, "  {}", where_it_ran(c));
    }
    if let Some(e) = &r.engine {
        let addressing = match r.addressing {
            Some(Addressing::Iova) => "IOVA (IOMMU-mapped)",
            Some(Addressing::Physical) => "physical",
            Some(Addressing::Sim) => "sim-card",
            None => "-",
        };
        let _ = writeln!(
            s,
            "  engine {e}; buffer: {}; the card was given {addressing} addresses",
            r.buffer.as_deref().unwrap_or("-")
        );
    }
    if let Some(i) = &r.interrupts {
        let _ = writeln!(s, "  completion by interrupt: {i}");
    }
    s
}

const COLUMNS: [&str; 17] = [
    "what", "BAR", "offset", "width", "dir", "size", "under", "samples", "min", "p50", "p90", "p99", "p99.9", "p99.99",
    "max", "mean", ">3xp95",
];

fn line(c: &[String]) -> String {
    format!(
        "{:<10} {:>3} {:>8} {:>5} {:<3} {:>8} {:<5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15], c[16]
    )
}

fn row_line(x: &Row) -> String {
    let l = x.latency.as_ref().filter(|l| l.samples > 0);
    let f = |v: fn(&LatencyFigures) -> f64| l.map_or("-".into(), |l| ns(v(l)));
    let cells = [
        what(x),
        x.bar.map_or("-".into(), |b| b.to_string()),
        x.offset.map_or("-".into(), |o| format!("{o:#x}")),
        x.width.map_or("-".into(), |w| w.to_string()),
        x.dir.to_string(),
        human_size(x.size),
        under(x),
        l.map_or("-".into(), |l| l.samples.to_string()),
        f(|l| l.min_ns),
        f(|l| l.p50_ns),
        f(|l| l.p90_ns),
        f(|l| l.p99_ns),
        f(|l| l.p999_ns),
        f(|l| l.p9999_ns),
        f(|l| l.max_ns),
        f(|l| l.mean_ns),
        l.map_or("-".into(), |l| l.outliers.to_string()),
    ];
    format!("{}  {}{}", line(&cells), verify_text(&x.verify), flags(x))
}

/// Each line of `lines(x)` with the note it came from (the unverified reason comes last, from none).
fn notes_of(x: &Row) -> impl Iterator<Item = Option<&Note>> {
    x.notes.iter().map(Some).chain(std::iter::repeat(None))
}

/// The load under a row, in words.
fn load_note(x: &Row) -> Option<String> {
    let l = x.load.as_ref()?;
    let rate = |d: &str, v: Option<f64>| v.map(|v| format!("{d} {v:.2} MB/s"));
    let mut rates: Vec<String> = [rate("h2c", l.h2c_mbps), rate("c2h", l.c2h_mbps)].into_iter().flatten().collect();
    if let Some(h) = l.held_mbps {
        let reached = [l.h2c_mbps, l.c2h_mbps].into_iter().flatten().fold(f64::MAX, f64::min);
        let short = if reached < 0.95 * h { ": not reached (the engine, or this host, is slower)" } else { "" };
        rates.push(format!("held at {h:.2} MB/s a direction (--load-rate){short}"));
    }
    Some(format!(
        "load: {} streamed {} ({}, {} transfers of {} in {:.3} s{}): {}",
        l.engine,
        l.label(),
        if l.dirs.len() > 1 && l.concurrent {
            "at once"
        } else if l.dirs.len() > 1 {
            "alternating: the engine runs one transfer at a time"
        } else {
            "one direction"
        },
        l.transfers,
        human_size(l.size),
        l.elapsed_s,
        l.cpu.map(|c| format!(", on CPU {c}")).unwrap_or_default(),
        rates.join(", ")
    ))
}

pub fn table(r: &Report) -> String {
    let mut s = header(r);
    let names: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(s, "{}  verify", line(&names));
    // Open-loop rows have their own section (`rate::table`).
    for x in r.results.iter().filter(|x| x.rate.is_none()) {
        let _ = writeln!(s, "{}", row_line(x));
        for n in load_note(x).into_iter().chain(lines(x).into_iter().zip(notes_of(x)).map(|(l, n)| match n {
            // A latency row's samples are counted, not sized by --total.
            Some(Note::FewSamples { samples }) => format!(
                "few samples: {samples} cannot show the spread: raise --{}samples for a figure to trust",
                if x.probe == Some(Probe::Dma) { "dma-" } else { "" }
            ),
            _ => l,
        })) {
            let _ = writeln!(s, "      note: {n}");
        }
    }
    s.push_str(&under_load(r));
    s.push_str(&poll_vs_irq(r));
    s.push_str(&super::rate::table(r));
    super::notes::tail(&mut s, r);
    s
}

/// The idle row and the rows under load for the load's width (seed 004's table shape).
fn load_rows(r: &Report) -> Option<(Vec<&Row>, &Row)> {
    let loaded: Vec<&Row> = r.results.iter().filter(|x| x.load.is_some() && x.latency.is_some()).collect();
    let first = loaded.first()?;
    let idle = r.results.iter().find(|x| {
        x.load.is_none() && x.probe == Some(Probe::MmioRead) && x.width == first.width && x.latency.is_some()
    });
    idle.map(|i| (loaded, i))
}

fn under_load(r: &Report) -> String {
    let Some((loaded, idle)) = load_rows(r) else { return String::new() };
    let mut s = format!(
        "\nMMIO read latency under DMA load (the shape of the QDMA benchmark's AXI-Lite table): BAR{}+{:#x}, {}-bit reads, µs\n",
        idle.bar.unwrap_or(0),
        idle.offset.unwrap_or(0),
        idle.width.map_or("-".into(), |w| w.to_string())
    );
    let _ = writeln!(
        s,
        "{:<6} {:>10} {:>10} {:>10} {:>10}  {:>20} {:>20}",
        "under", "p50", "mean", "p99", "max", "DMA read (h2c) MB/s", "DMA write (c2h) MB/s"
    );
    for x in std::iter::once(idle).chain(loaded) {
        let Some(l) = x.latency.as_ref() else { continue };
        let rate = |v: Option<f64>| v.map_or("0".into(), |v| format!("{v:.2}"));
        let (h, c) = x.load.as_ref().map_or((None, None), |l| (l.h2c_mbps, l.c2h_mbps));
        let _ = writeln!(
            s,
            "{:<6} {:>10} {:>10} {:>10} {:>10}  {:>20} {:>20}",
            under(x),
            us(l.p50_ns),
            us(l.mean_ns),
            us(l.p99_ns),
            us(l.max_ns),
            rate(h),
            rate(c)
        );
    }
    s
}

/// Poll and interrupt rows of the same direction and size, side by side.
fn pairs(r: &Report) -> Vec<(&Row, &Row)> {
    let by = |c: Completion| r.results.iter().filter(move |x| x.completion == Some(c) && x.latency.is_some());
    by(Completion::Irq)
        .filter_map(|m| by(Completion::Poll).find(|p| p.dir == m.dir && p.size == m.size).map(|p| (p, m)))
        .collect()
}

fn poll_vs_irq(r: &Report) -> String {
    let mut s = String::new();
    for (p, m) in pairs(r) {
        let (Some(pl), Some(ml)) = (&p.latency, &m.latency) else { continue };
        if s.is_empty() {
            s.push_str("\nCompletion by polling and by interrupt, µs (polling sees the completion up to a poll late; the interrupt is raised after the engine completes, then wakes this thread: neither is faster than the engine)\n");
        }
        let _ = writeln!(
            s,
            "{} {:>8}: poll p50 {} min {}; irq p50 {} min {}; irq - poll p50 {:+.3}",
            p.dir,
            human_size(p.size),
            us(pl.p50_ns),
            us(pl.min_ns),
            us(ml.p50_ns),
            us(ml.min_ns),
            (ml.p50_ns - pl.p50_ns) / 1e3
        );
    }
    if let (false, Some(w)) = (s.is_empty(), r.irq_wake) {
        let _ = writeln!(
            s,
            "the interrupt's own cost here: an eventfd signalled from another thread wakes the sleeping one in p50 {} µs \
             (min {}, max {}, {} wakes); that much of each irq row is the wake to user space, the rest the device and kernel",
            us(w.p50_ns),
            us(w.min_ns),
            us(w.max_ns),
            w.samples
        );
    }
    s
}

/// Seed 004's tables: the AXI-Lite latency under DMA load, and DMA latency per direction.
pub fn seed(r: &Report) -> Result<String> {
    let mut s = String::new();
    if r.simulated {
        let _ = writeln!(s, "Simulated card {}: host-memory figures, not PCIe figures\n", r.device);
    }
    if let Some((loaded, idle)) = load_rows(r) {
        let n = idle.latency.as_ref().map_or(0, |l| l.samples);
        let _ = writeln!(
            s,
            "## MMIO read latency (BAR{}+{:#x}, {}-bit reads)\n",
            idle.bar.unwrap_or(0),
            idle.offset.unwrap_or(0),
            idle.width.map_or("-".into(), |w| w.to_string())
        );
        s.push_str("| MMIO Latency          |             | DMA Bandwidth  |             |\n");
        s.push_str("|-----------------------|-------------|----------------|-------------|\n");
        s.push_str("| mmio read(yes/no)     | latency(us) | read(GBps)     | write(GBps) |\n");
        for x in std::iter::once(idle).chain(loaded) {
            let Some(l) = &x.latency else { continue };
            let gb = |v: Option<f64>| v.map_or("0".into(), |v| format!("{:.2}", v / 1e3));
            let (h, c) = x.load.as_ref().map_or((None, None), |l| (l.h2c_mbps, l.c2h_mbps));
            let _ = writeln!(
                s,
                "| {:<21} | {:<11} | {:<14} | {:<11} |",
                "yes",
                format!("{:.2}", l.mean_ns / 1e3),
                gb(h),
                gb(c)
            );
        }
        let _ = writeln!(s, "| {:<21} |             |                |             |", format!("({n} reads' average)"));
    }
    let dma: Vec<&Row> =
        r.results.iter().filter(|x| x.probe == Some(Probe::Dma) && x.latency.is_some() && x.rate.is_none()).collect();
    if !dma.is_empty() {
        let _ = writeln!(s, "\n## DMA latency ({} engine, one transfer at a time)", r.engine.as_deref().unwrap_or("-"));
        for dir in [Direction::H2c, Direction::C2h] {
            let rows: Vec<&&Row> = dma.iter().filter(|x| x.dir == dir).collect();
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(s, "\n### {}\n", dir.to_string().to_uppercase());
            s.push_str("| Packet Size | Completion | Throughput (Mops) | Throughput (GB/s) | Latency (us) |\n");
            s.push_str("|-------------|------------|-------------------|-------------------|--------------|\n");
            for x in rows {
                let Some(l) = &x.latency else { continue };
                let mops = if l.mean_ns > 0.0 { 1e3 / l.mean_ns } else { 0.0 };
                let _ = writeln!(
                    s,
                    "| {:<11} | {:<10} | {:<17} | {:<17} | {:<12} |",
                    human_size(x.size).replace(' ', ""),
                    x.completion.map_or("-", |c| c.name()),
                    format!("{mops:.3}"),
                    format!("{:.3}", mops * x.size as f64 / 1e3),
                    format!("{:.2}", l.mean_ns / 1e3)
                );
            }
        }
    }
    s.push_str(&super::rate::seed(r));
    if s.trim().is_empty() || !s.contains("|") {
        return Err(Error::usage(
            "--format seed prints the QDMA benchmark's latency tables, which need rows under DMA load (--load) or DMA latency (--dma): add one, or use --format table",
        ));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::bench::result::{Kind, LoadFigures, Verify};
    use crate::mmio::Width;

    fn lat(p50: f64, mean: f64) -> LatencyFigures {
        LatencyFigures {
            samples: 1000,
            warmup: 10,
            overhead_ns: 12.0,
            clock: "fake".into(),
            min_ns: p50 / 2.0,
            mean_ns: mean,
            p50_ns: p50,
            p90_ns: p50,
            p99_ns: p50 * 2.0,
            p999_ns: p50 * 3.0,
            p9999_ns: p50 * 4.0,
            max_ns: p50 * 5.0,
            outliers: 2,
            cdf: vec![],
        }
    }

    fn read(load: Option<(&[Direction], f64)>, p50: f64) -> Row {
        let mut r = Row::new(Direction::C2h, 4);
        (r.bar, r.offset, r.width, r.probe) = (Some(0), Some(0x10), Some(Width::B32), Some(Probe::MmioRead));
        r.latency = Some(lat(p50, p50 + 10.0));
        r.verify = Some(Verify::Ok);
        r.load = load.map(|(dirs, mbps)| LoadFigures {
            engine: "qdma".into(),
            dirs: dirs.to_vec(),
            concurrent: dirs.len() > 1,
            size: 1 << 20,
            h2c_mbps: dirs.contains(&Direction::H2c).then_some(mbps),
            c2h_mbps: dirs.contains(&Direction::C2h).then_some(mbps),
            transfers: 100,
            elapsed_s: 0.5,
            cpu: Some(1),
            held_mbps: None,
        });
        r
    }

    fn dma(dir: Direction, c: Completion, p50: f64) -> Row {
        let mut r = Row::new(dir, 64);
        (r.probe, r.completion) = (Some(Probe::Dma), Some(c));
        r.latency = Some(lat(p50, p50));
        r.verify = Some(Verify::Ok);
        r
    }

    fn report() -> Report {
        let mut r = Report::new(Kind::Latency, "0000:01:00.0", false, Via::Vfio, 20.0);
        r.engine = Some("qdma".into());
        r.results = vec![
            read(None, 880.0),
            read(Some((&[Direction::H2c], 12790.0)), 950.0),
            read(Some((&[Direction::C2h], 12980.0)), 1470.0),
            read(Some((&[Direction::H2c, Direction::C2h], 4800.0)), 2950.0),
            dma(Direction::H2c, Completion::Poll, 1000.0),
            dma(Direction::H2c, Completion::Irq, 3500.0),
        ];
        r
    }

    #[test]
    fn the_table_has_every_row_the_load_and_the_comparisons() {
        let mut r = report();
        r.results[4].notes.push(Note::FewSamples { samples: 2 });
        let t = table(&r);
        assert!(
            t.contains("note: few samples: 2 cannot show the spread: raise --dma-samples for a figure to trust"),
            "{t}"
        );
        assert!(t.starts_with("pcibench latency 0000:01:00.0 via vfio\n"), "{t}");
        assert!(t.contains("clock fake; its cost (12 ns a sample) subtracted; 10 warm-up accesses per row"), "{t}");
        assert!(t.contains("engine qdma; buffer: -"), "{t}");
        let row = t.lines().find(|l| l.starts_with("mmio-read") && l.contains(" h2c ")).unwrap();
        assert!(row.contains("     950 ") && row.ends_with("ok"), "{row}");
        assert!(t.contains("note: load: qdma streamed both (at once, 100 transfers of 1 MiB in 0.500 s, on CPU 1): h2c 4800.00 MB/s, c2h 4800.00 MB/s"), "{t}");
        // Seed 004's shape: idle first, then each load with its throughput, in µs.
        let idle = t.lines().find(|l| l.starts_with("idle ")).unwrap();
        assert!(idle.contains("0.880") && idle.ends_with(" 0"), "{idle}");
        let both = t.lines().find(|l| l.starts_with("both ")).unwrap();
        assert!(both.contains("2.950") && both.contains("4800.00"), "{both}");
        assert!(
            t.contains("h2c     64 B: poll p50 1.000 min 0.500; irq p50 3.500 min 1.750; irq - poll p50 +2.500"),
            "{t}"
        );
        assert!(!t.contains("the interrupt's own cost"), "no wake timed, none shown: {t}");
        r.irq_wake =
            Some(crate::bench::result::WakeFigures { samples: 64, min_ns: 2000.0, p50_ns: 4500.0, max_ns: 90000.0 });
        let t = table(&r);
        assert!(t.contains("wakes the sleeping one in p50 4.500 µs (min 2.000, max 90.000, 64 wakes)"), "{t}");
    }

    #[test]
    fn seed_format_prints_seed_004s_tables_or_refuses() {
        let s = seed(&report()).unwrap();
        assert!(s.contains("## MMIO read latency (BAR0+0x10, 32-bit reads)"), "{s}");
        assert!(s.contains("| yes                   | 0.89        | 0              | 0           |"), "{s}");
        assert!(s.contains("| yes                   | 0.96        | 12.79          | 0           |"), "{s}");
        assert!(s.contains("| yes                   | 1.48        | 0              | 12.98       |"), "{s}");
        assert!(s.contains("| (1000 reads' average) |"), "{s}");
        assert!(s.contains("### H2C"), "{s}");
        assert!(
            s.contains("| 64B         | poll       | 1.000             | 0.064             | 1.00         |"),
            "{s}"
        );
        let mut idle_only = report();
        idle_only.results.truncate(1);
        let e = seed(&idle_only).unwrap_err();
        assert!(matches!(e, Error::Usage(_)) && e.to_string().contains("--load"), "{e}");
    }
}
