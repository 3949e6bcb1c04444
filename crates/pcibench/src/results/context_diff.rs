//! What differs between two saved runs' contexts, for `compare` to lead with. A difference is
//! questionable when it changes what the figures mean (the link that bounds them, the path and
//! IOMMU translation they went through, the card, the CPU doing PIO, NUMA locality, a link that
//! misbehaved during a run); the others (kernel, pcibench version, host name, slot, governor,
//! buffer) are often the very thing being compared, and are listed plainly.

use super::saved::SavedRun;
use crate::bench::context::Context;
use serde::Serialize;

/// Something that differs between the runs' contexts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextDiff {
    pub what: String,
    pub a: String,
    pub b: String,
    /// It changes what the figures mean: the comparison is not like for like.
    pub questionable: bool,
    /// Why it matters, for the questionable ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

fn ctx<T>(r: &SavedRun, f: impl Fn(&Context) -> T) -> Option<T> {
    r.context.as_ref().map(f)
}

fn show(v: Option<String>) -> String {
    v.unwrap_or_else(|| "unknown".into())
}

/// "CPU 3 (pinned), node 0; device node 0 (local)".
fn placement(c: &Context) -> String {
    let cpu = c.cpu.map_or("an unknown CPU".to_string(), |n| format!("CPU {n}"));
    let pinned = if c.pinned { " (pinned)" } else { "" };
    let node = |n: Option<i32>| n.map_or("?".to_string(), |n| n.to_string());
    format!("{cpu}{pinned}, node {}; device node {}", node(c.cpu_numa_node), node(c.device_numa_node))
}

/// Whether the measuring CPU was on the device's node: Some(true) local, Some(false) remote.
fn local(c: &Context) -> Option<bool> {
    Some(c.cpu_numa_node? == c.device_numa_node?)
}

fn health(r: &SavedRun) -> String {
    match &r.link_health {
        None => "not watched".into(),
        Some(c) if c.is_empty() => "no change".into(),
        Some(c) => c.join("; "),
    }
}

fn engine(r: &SavedRun) -> Option<String> {
    r.reports.iter().find_map(|x| x.engine.clone())
}

/// How completion interrupts were delivered (kind, vectors, QDMA's direct or aggregated mode):
/// only runs that completed by interrupt have it.
fn interrupts(r: &SavedRun) -> Option<String> {
    r.reports.iter().find_map(|x| x.interrupts.clone())
}

/// The engine settings its rows recorded (`Row::engine_settings`), each value once: "writeback
/// interval (GLBL_DSC_CFG[2:0]) 5".
fn engine_settings(r: &SavedRun) -> Option<String> {
    let mut seen: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for row in r.reports.iter().flat_map(|x| &x.results) {
        for (k, v) in &row.engine_settings {
            let vals = seen.entry(k).or_default();
            if !vals.contains(&v.as_str()) {
                vals.push(v);
            }
        }
    }
    (!seen.is_empty()).then(|| seen.iter().map(|(k, v)| format!("{k} {}", v.join(", "))).collect::<Vec<_>>().join("; "))
}

fn buffer(r: &SavedRun) -> Option<String> {
    r.reports.iter().find_map(|x| x.buffer.clone())
}

/// The most characters of a context value shown.
const CLIP: usize = 200;

/// Every difference, the questionable first (in the order listed here).
pub fn diffs(a: &SavedRun, b: &SavedRun) -> Vec<ContextDiff> {
    let mut out = Vec::new();
    let mut add = |what: &str, va: String, vb: String, why: Option<&str>| {
        if va != vb {
            // What a file says is shown clipped: a line of the table, whatever the file holds.
            let clip = |s: String| crate::text::clip(&s, CLIP).into_owned();
            out.push(ContextDiff {
                what: what.into(),
                a: clip(va),
                b: clip(vb),
                questionable: why.is_some(),
                why: why.map(String::from),
            });
        }
    };
    let dev = |r: &SavedRun| r.device.as_ref().map(|d| format!("{} {}", d.ids(), d.name));
    add("device", show(dev(a)), show(dev(b)), Some("different card models: the runs measured different hardware"));
    let link = |r: &SavedRun| r.device.as_ref().map(|d| d.link_words());
    add(
        "link",
        show(link(a)),
        show(link(b)),
        Some("the link bounds the figures: a different link has a different ceiling"),
    );
    add("access path", a.path_words(), b.path_words(), Some("a different access path measures a different way in"));
    add(
        "IOMMU",
        a.iommu_words(),
        b.iommu_words(),
        Some("IOMMU translation (and its invalidation policy) changes DMA costs"),
    );
    add("engine", show(engine(a)), show(engine(b)), Some("a different DMA engine driver"));
    match (interrupts(a), interrupts(b)) {
        (None, None) => {}
        // Both completed by interrupt, another way: their irq rows measured different paths.
        (Some(ia), Some(ib)) => add(
            "interrupts",
            ia,
            ib,
            Some("another interrupt kind, vector layout or QDMA mode (direct, aggregated) changes the irq rows"),
        ),
        // Only one has irq rows, which match nothing on the other side: listed, not questionable.
        (ia, ib) => {
            let polled = || "none (completion by polling)".to_string();
            add("interrupts", ia.unwrap_or_else(polled), ib.unwrap_or_else(polled), None)
        }
    }
    match (engine_settings(a), engine_settings(b)) {
        (None, None) => {}
        (Some(sa), Some(sb)) => add(
            "engine settings",
            sa,
            sb,
            Some("the card ran with other engine settings (QDMA's writeback interval and stream completion trigger decide when completions are seen)"),
        ),
        (sa, sb) => add("engine settings", show(sa), show(sb), None),
    }
    add(
        "CPU model",
        show(ctx(a, |c| c.cpu_model.clone()).flatten()),
        show(ctx(b, |c| c.cpu_model.clone()).flatten()),
        Some("PIO is the CPU's loads and stores: a different CPU changes the figures"),
    );
    let loc = |r: &SavedRun| match ctx(r, local).flatten() {
        Some(true) => "local (the CPU on the device's NUMA node)".to_string(),
        Some(false) => "remote (the CPU on another NUMA node than the device)".to_string(),
        None => "unknown".to_string(),
    };
    add("NUMA", loc(a), loc(b), Some("a remote NUMA node adds latency and can cut bandwidth"));
    let (ha, hb) = (health(a), health(b));
    let sick = |h: &str| h != "no change" && h != "not watched";
    if sick(&ha) || sick(&hb) {
        add("link health", ha, hb, Some("the link's health changed during a run: its rows are suspect"));
    }
    add("kernel", show(ctx(a, |c| c.kernel.clone()).flatten()), show(ctx(b, |c| c.kernel.clone()).flatten()), None);
    add("pcibench", show(ctx(a, |c| c.pcibench_version.clone())), show(ctx(b, |c| c.pcibench_version.clone())), None);
    add("host", show(ctx(a, |c| c.hostname.clone()).flatten()), show(ctx(b, |c| c.hostname.clone()).flatten()), None);
    let addr = |r: &SavedRun| r.device.as_ref().map(|d| d.address.clone());
    add("device address", show(addr(a)), show(addr(b)), None);
    add("CPU", show(ctx(a, placement)), show(ctx(b, placement)), None);
    add(
        "governor",
        show(ctx(a, |c| c.governor.clone()).flatten()),
        show(ctx(b, |c| c.governor.clone()).flatten()),
        None,
    );
    add("buffer", show(buffer(a)), show(buffer(b)), None);
    out
}
