//! Notes on rows, in words: per row (`lines`, for CSV), or once per kind for a table
//! (`grouped`), each with the rows it applies to.

use crate::bench::context::Context;
use crate::bench::result::{Note, Row, Verify};
use std::fmt::Write;

pub fn text(n: &Note) -> String {
    match n {
        Note::Skipped { reason } => format!("skipped: {reason}"),
        Note::Batched { transfers, timer_overhead_ns } => {
            batched(&transfers.to_string(), &format!("{timer_overhead_ns:.0}"))
        }
        Note::AllOnes => "the BAR reads all-ones end to end: the device may be gone, or Memory Space is disabled \
             (check `pcibench info`: Control Mem-)"
            .into(),
        Note::Interrupted { engine: Some(status) } => format!("interrupted: engine stopped ({status})"),
        Note::Interrupted { engine: None } => "interrupted: the figures cover the samples before the stop".into(),
        Note::FewSamples { samples } => few(&samples.to_string(), *samples == 1),
        Note::Noisy { cv_pct, min_vs_median } => noisy(&format!("{cv_pct:.1}"), &format!("{min_vs_median:.2}")),
        Note::AboveLinkModel { efficiency_pct } => above_model(&format!("{efficiency_pct:.0}")),
        Note::LinkHealth { changes } => format!("suspect: {} during this row", changes.join("; ")),
        Note::InFlight { transfers, queues } => in_flight(&transfers.to_string(), *queues),
        Note::EngineCounters { counters: c, bytes, elapsed_s } => counters_text(c, *bytes, *elapsed_s),
        Note::PartialSync { offset, size, error: None } => format!(
            "partial sync of [{offset:#x}, +{size:#x}): the interface took that region (checked where it reports one back)"
        ),
        Note::PartialSync { offset, size, error: Some(e) } => {
            format!("partial sync of [{offset:#x}, +{size:#x}) FAILED: {e}")
        }
        Note::SyncCost { ns_per_access, share_pct } => format!(
            "sync cost about {:.1} µs per access (for the CPU, then for the device; measured when the buffer was opened), {share_pct:.1}% of this row",
            ns_per_access / 1000.0
        ),
        Note::Tracing { events, ns_per_event, share_pct } => format!(
            "tracing cost about {ns_per_event:.0} ns per access, {share_pct:.1}% of this row ({events} traced events in its timed samples; measured writing to a file beside the trace)"
        ),
    }
}

fn batched(transfers: &str, overhead_ns: &str) -> String {
    format!(
        "batched {transfers} transfers per sample: one transfer is too short to time alone (timer overhead {overhead_ns} ns)"
    )
}

fn few(samples: &str, one: bool) -> String {
    format!(
        "few samples: {samples} sample{} cannot show the spread: raise --total for a figure to trust",
        if one { "" } else { "s" }
    )
}

fn noisy(cv: &str, slowest: &str) -> String {
    format!(
        "noisy: the samples vary (CV {cv}%, slowest at {slowest}x the median): for a cleaner figure raise --total, pin a CPU (--cpu N) and stop other load"
    )
}

fn above_model(pct: &str) -> String {
    format!(
        "above the link model ({pct}% of its limit): the figure is not what it seems (cached, emulated, or the link's MPS/MRRS/width are not what the model was told)"
    )
}

fn in_flight(transfers: &str, queues: u16) -> String {
    format!("each run kept {transfers} transfers in flight over {queues} queue{}", if queues == 1 { "" } else { "s" })
}

/// What groups a note with the same note of other rows: its kind, and the words that are not
/// figures (a skip's reason, an unverified read's, a link-health change).
#[derive(PartialEq)]
enum Kind {
    Batched,
    FewSamples,
    Noisy,
    AboveLinkModel,
    InFlight(u16),
    /// The engine's counters: per-row figures under one heading.
    Counters,
    /// Notes grouped by their whole text (the same words on every row they apply to).
    Text(String),
}

fn kind(n: &Note) -> Kind {
    match n {
        Note::Batched { .. } => Kind::Batched,
        Note::FewSamples { .. } => Kind::FewSamples,
        Note::Noisy { .. } => Kind::Noisy,
        Note::AboveLinkModel { .. } => Kind::AboveLinkModel,
        Note::InFlight { queues, .. } => Kind::InFlight(*queues),
        Note::EngineCounters { .. } => Kind::Counters,
        other => Kind::Text(text(other)),
    }
}

/// `a` or `a-b`: the range of `values` as `fmt` writes them.
fn range(values: impl Iterator<Item = f64>, fmt: impl Fn(f64) -> String) -> String {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    let (a, b) = (fmt(lo), fmt(hi));
    if a == b {
        a
    } else {
        format!("{a}-{b}")
    }
}

/// One group's words: the note as one row has it, with each figure that varies from row to row
/// as its range.
fn group_text(k: &Kind, notes: &[&Note]) -> String {
    let figures = |f: fn(&Note) -> Option<f64>| notes.iter().filter_map(|n| f(n)).collect::<Vec<f64>>();
    let int = |v: f64| format!("{v:.0}");
    match k {
        Kind::Batched => {
            let t = figures(|n| match n {
                Note::Batched { transfers, .. } => Some(*transfers as f64),
                _ => None,
            });
            let ns = figures(|n| match n {
                Note::Batched { timer_overhead_ns, .. } => Some(*timer_overhead_ns),
                _ => None,
            });
            batched(&range(t.into_iter(), int), &range(ns.into_iter(), int))
        }
        Kind::FewSamples => {
            let v = figures(|n| match n {
                Note::FewSamples { samples } => Some(*samples as f64),
                _ => None,
            });
            let one = v.iter().all(|s| *s == 1.0);
            few(&range(v.into_iter(), int), one)
        }
        Kind::Noisy => {
            let cv = figures(|n| match n {
                Note::Noisy { cv_pct, .. } => Some(*cv_pct),
                _ => None,
            });
            let slow = figures(|n| match n {
                Note::Noisy { min_vs_median, .. } => Some(*min_vs_median),
                _ => None,
            });
            noisy(&range(cv.into_iter(), |v| format!("{v:.1}")), &range(slow.into_iter(), |v| format!("{v:.2}")))
        }
        Kind::AboveLinkModel => {
            let e = figures(|n| match n {
                Note::AboveLinkModel { efficiency_pct } => Some(*efficiency_pct),
                _ => None,
            });
            above_model(&range(e.into_iter(), int))
        }
        Kind::InFlight(q) => {
            let t = figures(|n| match n {
                Note::InFlight { transfers, .. } => Some(*transfers as f64),
                _ => None,
            });
            in_flight(&range(t.into_iter(), int), *q)
        }
        Kind::Counters | Kind::Text(_) => match notes.first() {
            Some(n) => text(n),
            None => String::new(),
        },
    }
}

/// The engine counters of several rows: what they are once, then each row's figures.
fn counters_group(v: &[(usize, &Note)], label: &dyn Fn(usize) -> String) -> String {
    let mut s = String::from(
        "engine counters, beside the bytes pcibench moved (bytes per beat is the datapath width if the engine saw every byte; cycles over the row's time, its clock):",
    );
    for (i, n) in v {
        if let Note::EngineCounters { counters: c, bytes, elapsed_s } = n {
            let figures = if c.beats == 0 {
                "no data beats counted: this engine has no performance monitor, or it did not count".to_string()
            } else {
                let clock = if *elapsed_s > 0.0 {
                    format!(", an implied {:.0} MHz clock", c.cycles as f64 / elapsed_s / 1e6)
                } else {
                    String::new()
                };
                format!(
                    "{} data beats in {} cycles for {bytes} bytes: {:.1} bytes per beat{clock}",
                    c.beats,
                    c.cycles,
                    *bytes as f64 / c.beats as f64
                )
            };
            let _ = write!(s, "\n      {}: {figures}", label(*i));
        }
    }
    s
}

/// The flag that marks a note's rows in the table, if it has one.
fn flag_of(n: &Note) -> Option<&'static str> {
    match n {
        Note::FewSamples { .. } => Some("!few"),
        Note::Noisy { .. } => Some("!noisy"),
        Note::AboveLinkModel { .. } => Some("!model"),
        Note::LinkHealth { .. } => Some("!suspect"),
        _ => None,
    }
}

/// Rows a note names one by one at most; past that, the rows it leaves out, or how many.
const MAX_NAMED: usize = 8;

/// The notes of a table's rows, each kind once (in the order the kinds first appear), with the
/// rows it applies to: every row, those its flag marks, or each by `label` (what sets the row
/// apart in the table: "BAR0 uc h2c 64 1 MiB"). A table of one row needs no row named. Figures
/// that differ from row to row become ranges ("CV 10.2-31.0%"); `lines` keeps each row's own.
pub fn grouped(rows: &[Row], label: impl Fn(&Row) -> String) -> Vec<String> {
    let mut groups: Vec<(Kind, Vec<(usize, &Note)>)> = Vec::new();
    let mut unverified: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for n in &r.notes {
            let k = kind(n);
            match groups.iter_mut().find(|(g, _)| *g == k) {
                Some((_, v)) => v.push((i, n)),
                None => groups.push((k, vec![(i, n)])),
            }
        }
        if let Some(Verify::Unverified { reason }) = &r.verify {
            match unverified.iter_mut().find(|(t, _)| t == reason) {
                Some((_, v)) => v.push(i),
                None => unverified.push((reason.clone(), vec![i])),
            }
        }
    }
    // Rows the table itself marks: flagged, skipped (a row of dashes), unverified.
    let skipped: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].skipped()).collect();
    let unread: Vec<usize> =
        (0..rows.len()).filter(|&i| matches!(rows[i].verify, Some(Verify::Unverified { .. }))).collect();
    let which = |idx: &[usize], marked: Option<&str>, all_marked: &[usize]| -> String {
        if rows.len() <= 1 {
            return String::new();
        }
        if idx.len() == rows.len() {
            return " [every row]".into();
        }
        let count = format!("{} row{}", idx.len(), if idx.len() == 1 { "" } else { "s" });
        let named = |v: &[usize]| v.iter().map(|&i| label(&rows[i])).collect::<Vec<_>>().join("; ");
        let others: Vec<usize> = (0..rows.len()).filter(|i| !idx.contains(i)).collect();
        match marked {
            Some(m) if m.starts_with('!') => format!(" [{count}, marked {m}]"),
            // A skipped row is a row of dashes, and the reason names what is missing.
            Some("skipped") => format!(" [{count}, skipped]"),
            Some(m) if idx == all_marked => format!(" [{count}, {m}]"),
            _ if idx.len() <= MAX_NAMED => format!(" [{}]", named(idx)),
            _ if others.len() <= MAX_NAMED => format!(" [every row but {}]", named(&others)),
            _ => format!(" [{count} of {}]", rows.len()),
        }
    };
    let mut out: Vec<String> = groups
        .iter()
        .map(|(k, v)| {
            let notes: Vec<&Note> = v.iter().map(|(_, n)| *n).collect();
            let idx: Vec<usize> = v.iter().map(|(i, _)| *i).collect();
            if *k == Kind::Counters {
                return counters_group(v, &|i| label(&rows[i]));
            }
            let marked = match notes[0] {
                Note::Skipped { .. } => Some("skipped"),
                n => flag_of(n),
            };
            format!("{}{}", group_text(k, &notes), which(&idx, marked, &skipped))
        })
        .collect();
    out.extend(unverified.iter().map(|(t, idx)| format!("{t}{}", which(idx, Some("unverified"), &unread))));
    out
}

/// The engine's own count beside pcibench's: bytes per data beat is the datapath width when
/// the engine counted every byte pcibench moved; cycles over the row's wall time is its clock.
fn counters_text(c: &crate::dma::EngineCounters, bytes: u64, elapsed_s: f64) -> String {
    if c.beats == 0 {
        return format!(
            "engine counters ({}): no data beats counted for {} moved: this engine has no performance monitor, or it did not count",
            c.dir,
            crate::units::human_size(bytes)
        );
    }
    let clock = if elapsed_s > 0.0 {
        format!(", an implied {:.0} MHz clock", c.cycles as f64 / elapsed_s / 1e6)
    } else {
        String::new()
    };
    format!(
        "engine counters ({}): {} data beats in {} cycles for {} bytes pcibench moved: {:.1} bytes per beat (the datapath width if the engine saw every byte){clock}",
        c.dir,
        c.beats,
        c.cycles,
        bytes,
        bytes as f64 / c.beats as f64
    )
}

/// Short markers for flagged rows, after the verify column: `!few !noisy !model !suspect`, and `!maxed` where the engine's counters saturated.
pub fn flags(r: &Row) -> String {
    let maxed = r.engine.as_ref().is_some_and(|e| e.maxed).then_some("!maxed");
    r.notes.iter().filter_map(flag_of).chain(maxed).map(|f| format!(" {f}")).collect()
}

/// Every note of a row, plus why it is unverified, one per line.
pub fn lines(r: &Row) -> Vec<String> {
    let mut v: Vec<String> = r.notes.iter().map(text).collect();
    if let Some(Verify::Unverified { reason }) = &r.verify {
        v.push(reason.clone());
    }
    v
}

/// The lines that close every report: the interruption, if any, then the warnings of where it
/// ran and of the run.
pub fn tail(s: &mut String, r: &crate::bench::result::Report) {
    if r.gone.is_some() {
        let _ = writeln!(s, "stopped: the card stopped answering; the rows above were measured before it did");
    }
    if r.interrupted {
        let _ = writeln!(s, "interrupted: the figures above cover the samples gathered before the stop");
    }
    for w in r.context.iter().flat_map(|c| &c.warnings).chain(&r.warnings) {
        let _ = writeln!(s, "warning: {w}");
    }
}

/// The verify column.
pub fn verify_text(v: &Option<Verify>) -> String {
    match v {
        None => "-".into(),
        Some(Verify::Ok) => "ok".into(),
        Some(Verify::Mismatch { mismatch }) => format!("MISMATCH: {mismatch}"),
        Some(Verify::Unverified { .. }) => "unverified".into(),
        Some(Verify::Rejected { reason }) => format!("REJECTED: {reason}"),
    }
}

/// "ran on CPU 3 (pinned; NUMA node 0, device on node 0), Intel Xeon ...; governor performance;
/// CLOCK_MONOTONIC (vDSO), invariant TSC".
pub fn where_it_ran(c: &Context) -> String {
    let cpu = match c.cpu {
        Some(n) => format!("CPU {n}{}", if c.pinned { " (pinned" } else { " (not pinned" }),
        None => "an unknown CPU (".into(),
    };
    let node = |n: Option<i32>| n.map_or("unknown".to_string(), |n| n.to_string());
    let mut out =
        format!("ran on {cpu}; NUMA node {}, device on node {})", node(c.cpu_numa_node), node(c.device_numa_node));
    if let Some(m) = &c.cpu_model {
        let _ = write!(out, ", {m}");
    }
    if let Some(g) = &c.governor {
        let _ = write!(out, "; governor {g}");
    }
    let tsc = match c.tsc_invariant {
        Some(true) => ", invariant TSC",
        Some(false) => ", TSC not invariant",
        None => "",
    };
    let _ = write!(out, "; {}{tsc}", c.clock);
    if let Some(b) = &c.dma_buffers {
        let _ = write!(out, "; {}", b.words());
    }
    out
}

/// Where it ran and why there is no link limit: the lines under a report's title.
pub(super) fn context_lines(s: &mut String, r: &crate::bench::result::Report) {
    if let Some(c) = &r.context {
        let _ = writeln!(s, "  {}", where_it_ran(c));
    }
    if let Some(n) = &r.limit_note {
        let _ = writeln!(s, "  {n}");
    }
    if let Some(i) = &r.interrupts {
        let _ = writeln!(s, "  completion by interrupt: {i}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::IoMode;
    use crate::bench::pio::{self, MapMode, PioPlan};
    use crate::bench::sample::clock::FakeClock;
    use crate::bench::sample::sampler::Sampling;
    use crate::direction::Direction;
    use crate::mmio::Width;
    use crate::report::Exporter;
    use std::sync::atomic::AtomicBool;

    /// Issue #26: a table prints each kind of note once, after its rows, naming the rows it
    /// applies to, however many rows have it. A fake clock makes every 5th sample 50 µs slow
    /// (every row noisy) and every transfer short (every row batched); a width this card cannot
    /// run at one size (a skip) and a read-only BAR's rows (unverified) add kinds of their own.
    #[test]
    fn each_kind_of_note_is_printed_once_with_its_rows() {
        let host = crate::host::Host::with_root("/nonexistent-root");
        let session = crate::session::Session::open(&host, &"sim".parse().unwrap(), None).unwrap();
        let clock = FakeClock::new(20, 100, 10_000).slow_every(5, 50_000).with_floor(10_000);
        let plan = PioPlan {
            bars: vec![0, 2],
            maps: vec![MapMode::Uc, MapMode::Wc],
            dirs: vec![Direction::H2c, Direction::C2h],
            widths: vec![Width::B32, Width::B64],
            sizes: vec![4096, 256 << 10],
            total: 4 << 20,
            budget_ns: None,
            offset: 0,
            io: IoMode::Mmap,
            allow_write: true,
            strict_map: true,
            strict_width: true,
            registers: Vec::new(),
        };
        let stop = AtomicBool::new(false);
        let mut progress = |_: u64| {};
        let mut s = Sampling::new(&clock, &stop, &mut progress, None);
        let report = pio::run(session.dev.as_ref(), &session.device, &plan, &mut s).unwrap();
        let noisy_rows = report.results.iter().filter(|r| flags(r).contains("!noisy")).count();
        assert!(noisy_rows > 1, "the fake clock makes rows noisy: {noisy_rows}");
        let table = crate::report::table::Table { latency: false }.report(&report).unwrap();
        let notes: Vec<&str> = table.lines().filter(|l| l.starts_with("note: ")).collect();
        for kind in ["note: noisy:", "note: batched ", "note: skipped: "] {
            assert_eq!(notes.iter().filter(|l| l.starts_with(kind)).count(), 1, "{kind} once:\n{table}");
        }
        assert_eq!(table.lines().filter(|l| l.contains("note:")).count(), notes.len(), "no note under a row");
        let noisy = notes.iter().find(|l| l.starts_with("note: noisy:")).unwrap();
        assert!(noisy.ends_with(&format!("[{noisy_rows} rows, marked !noisy]")), "{noisy}");
        // BAR2 is 128 KiB: its 256 KiB rows are skipped, and named as such.
        let skipped = notes.iter().find(|l| l.starts_with("note: skipped: ")).unwrap();
        let skips = report.results.iter().filter(|r| r.skipped()).count();
        assert_eq!(skips, 4);
        assert!(skipped.contains("past the end of BAR2") && skipped.ends_with("[4 rows, skipped]"), "{skipped}");
        // Each row keeps its own notes for JSON and CSV: several were batched, one note says so.
        let batched = report.results.iter().filter(|r| lines(r).iter().any(|l| l.starts_with("batched"))).count();
        assert!(batched > 1, "{table}");
        let note = notes.iter().find(|l| l.starts_with("note: batched ")).unwrap();
        let total = report.results.len();
        if batched <= MAX_NAMED {
            assert_eq!(note.matches("BAR").count(), batched, "the rows named: {note}");
        } else if total - batched > MAX_NAMED {
            assert!(note.ends_with(&format!("[{batched} rows of {total}]")), "too many to name: {note}");
        }
    }
}
