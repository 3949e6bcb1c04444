//! Notes on rows, in words.

use crate::bench::context::Context;
use crate::bench::result::{Note, Row, Verify};
use std::fmt::Write;

pub fn text(n: &Note) -> String {
    match n {
        Note::Skipped { reason } => format!("skipped: {reason}"),
        Note::Batched { transfers, timer_overhead_ns } => format!(
            "batched {transfers} transfers per sample: one transfer is too short to time alone (timer overhead {timer_overhead_ns:.0} ns)"
        ),
        Note::AllOnes => "the BAR reads all-ones end to end: the device may be gone, or Memory Space is disabled \
             (check `pcibench info`: Control Mem-)"
            .into(),
        Note::Interrupted { engine: Some(status) } => format!("interrupted: engine stopped ({status})"),
        Note::Interrupted { engine: None } => "interrupted: the figures cover the samples before the stop".into(),
        Note::FewSamples { samples } => format!(
            "few samples: {samples} sample{} cannot show the spread: raise --total for a figure to trust",
            if *samples == 1 { "" } else { "s" }
        ),
        Note::Noisy { cv_pct, min_vs_median } => format!(
            "noisy: the samples vary (CV {cv_pct:.1}%, slowest at {min_vs_median:.2}x the median): for a cleaner figure raise --total, pin a CPU (--cpu N) and stop other load"
        ),
        Note::AboveLinkModel { efficiency_pct } => format!(
            "above the link model ({efficiency_pct:.0}% of its limit): the figure is not what it seems (cached, emulated, or the link's MPS/MRRS/width are not what the model was told)"
        ),
        Note::LinkHealth { changes } => format!("suspect: {} during this row", changes.join("; ")),
        Note::InFlight { transfers, queues } => format!(
            "each run kept {transfers} transfers in flight over {queues} queue{}",
            if *queues == 1 { "" } else { "s" }
        ),
        Note::EngineCounters { counters: c, bytes, elapsed_s } => counters_text(c, *bytes, *elapsed_s),
        Note::PartialSync { offset, size, error: None } => format!(
            "partial sync of [{offset:#x}, +{size:#x}): the interface took that region (checked where it reports one back)"
        ),
        Note::PartialSync { offset, size, error: Some(e) } => {
            format!("partial sync of [{offset:#x}, +{size:#x}) FAILED: {e}")
        }
    }
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

/// Short markers for flagged rows, after the verify column: `!few !noisy !model !suspect`.
pub fn flags(r: &Row) -> String {
    let mut out = String::new();
    for n in &r.notes {
        let f = match n {
            Note::FewSamples { .. } => "!few",
            Note::Noisy { .. } => "!noisy",
            Note::AboveLinkModel { .. } => "!model",
            Note::LinkHealth { .. } => "!suspect",
            _ => continue,
        };
        out.push(' ');
        out.push_str(f);
    }
    out
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
    out
}
