//! `pcibench health` as a table: one line per function (its link against what both ends
//! support, the AER totals, the status bits, the Command register, the verdict), then the findings, the changes since
//! the previous run and the verdict. `--watch` redraws it with the cells that changed since the
//! watch started highlighted.

use crate::health::{gen_width, FunctionHealth, HealthReport, Status};

const HEADER: [&str; 11] =
    ["DEVICE", "SLOT", "IDS", "DRIVER", "TYPE", "LINK", "CAN", "AER C/NF/F", "STATUS BITS", "COMMAND", "LIMITED BY"];
/// HEADER's SLOT column: shown only when some function has a physical slot.
const SLOT: usize = 1;

/// One function's cells, in HEADER's order (without SLOT unless `slots`).
fn cells(f: &FunctionHealth, slots: bool) -> Vec<String> {
    let mut c = all_cells(f);
    if !slots {
        c.remove(SLOT);
    }
    c
}

fn all_cells(f: &FunctionHealth) -> Vec<String> {
    let (link, can, by) = match &f.link {
        None => ("-".to_string(), "-".to_string(), "-".to_string()),
        Some(k) => {
            let now = match (k.up, k.current_gen, k.current_width) {
                (Some(false), _, _) => "DOWN".to_string(),
                (_, None, None) => "-".to_string(),
                (_, g, w) => gen_width(g, w),
            };
            let can = match (k.limit_gen, k.limit_width) {
                (None, None) => format!("max {}", gen_width(k.max_gen, k.max_width)),
                (g, w) => gen_width(g, w),
            };
            let now = if k.degraded { format!("{now} DEGRADED") } else { now };
            let by = match (&k.limited_by, &k.partner) {
                (Some(b), _) => b.clone(),
                (None, None) => "no link partner".to_string(),
                (None, Some(_)) => "-".to_string(),
            };
            (now, can, by)
        }
    };
    let aer = match &f.aer {
        None => "-".to_string(),
        Some(_) => {
            let st: Vec<(String, u64)> = f
                .aer
                .iter()
                .flatten()
                .filter(|c| !c.is_rootport())
                .map(|c| (format!("{}:{}", c.severity, c.kind), c.count))
                .collect();
            if st.is_empty() {
                "root port".to_string()
            } else {
                let t = |s| crate::health::aer_total(&st, s);
                format!("{}/{}/{}", t("correctable"), t("nonfatal"), t("fatal"))
            }
        }
    };
    let bits = match (&f.device_status, &f.link_status) {
        (None, None) => "not readable".to_string(),
        (d, l) => {
            let set: Vec<&str> = d.iter().flatten().chain(l.iter().flatten()).copied().collect();
            if set.is_empty() {
                "-".to_string()
            } else {
                set.join(",")
            }
        }
    };
    vec![
        f.address.clone(),
        f.slot.as_ref().map_or_else(|| "-".to_string(), |s| s.name.clone()),
        format!("{}:{}", f.vendor_id, f.device_id),
        f.driver.clone().unwrap_or_else(|| "-".into()),
        f.port_type.clone().unwrap_or_else(|| "-".into()),
        link,
        can,
        aer,
        bits,
        f.command.map_or_else(|| "not readable".to_string(), |c| c.words()),
        by,
    ]
}

/// The whole table. `previous` (`--watch`'s first refresh): cells that differ from it are shown
/// in reverse video when `color`.
pub fn table(r: &HealthReport, previous: Option<&HealthReport>, color: bool) -> String {
    let slots = r.functions.iter().any(|f| f.slot.is_some());
    let rows: Vec<Vec<String>> = r.functions.iter().map(|f| cells(f, slots)).collect();
    let before: Vec<(String, Vec<String>)> = previous
        .map(|p| p.functions.iter().map(|f| (f.address.clone(), cells(f, slots))).collect())
        .unwrap_or_default();
    let mut header: Vec<String> = HEADER.iter().map(|h| h.to_string()).collect();
    if !slots {
        header.remove(SLOT);
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = format!(
        "pcibench health: {} PCIe function{} at {}{}\n",
        r.functions.len(),
        if r.functions.len() == 1 { "" } else { "s" },
        r.time,
        if r.without_link > 0 { format!(" ({} without a PCIe link not shown)", r.without_link) } else { String::new() }
    );
    let line = |cells: &[String], changed: &dyn Fn(usize) -> bool| {
        let last = cells.len() - 1;
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = if i == last { 0 } else { widths[i] - c.chars().count() + 2 };
            if changed(i) && color {
                s.push_str(&format!("\x1b[7m{c}\x1b[0m"));
            } else {
                s.push_str(c);
            }
            s.push_str(&" ".repeat(pad));
        }
        s.trim_end().to_string() + "\n"
    };
    // No header over no rows (a host whose devices are all conventional PCI, as in many VMs).
    if !rows.is_empty() {
        out.push_str(&line(&header, &|_| false));
    }
    for row in &rows {
        let old = before.iter().find(|(a, _)| *a == row[0]).map(|(_, c)| c);
        let changed = |i: usize| previous.is_some() && old.is_none_or(|o| o[i] != row[i]);
        out.push_str(&line(row, &changed));
    }
    let findings: Vec<String> = r
        .functions
        .iter()
        .flat_map(|f| f.findings.iter().map(move |x| format!("  {}  {}  {}\n", x.level.tag(), f.address, x.what)))
        .collect();
    if !findings.is_empty() {
        out.push_str("\nFindings:\n");
        out.extend(findings);
    }
    if let Some(changes) = &r.changes {
        out.push_str(&format!("\nChanges since the previous run ({}):\n", r.previous_time.as_deref().unwrap_or("?")));
        if changes.is_empty() {
            out.push_str("  none\n");
        }
        for c in changes {
            out.push_str(&format!("  {}  {}\n", c.level.tag(), c.what));
        }
    }
    let unreadable = r.functions.iter().filter(|f| f.device_status.is_none()).count();
    if unreadable > 0 {
        out.push_str(&format!(
            "\nStatus bits not readable on {unreadable} function{}: Device and Link Status lie past the 64 bytes of config space a user may read (root reads them)\n",
            if unreadable == 1 { "" } else { "s" }
        ));
    }
    let count = |lvl| {
        r.functions.iter().flat_map(|f| &f.findings).filter(|x| x.level == lvl).count()
            + r.changes.iter().flatten().filter(|c| c.level == lvl).count()
    };
    let (w, f) = (count(crate::health::Level::Warning), count(crate::health::Level::Failure));
    let verdict = match r.status {
        Status::Healthy => "healthy".to_string(),
        Status::Warning => format!("warning: {w} warning{}", if w == 1 { "" } else { "s" }),
        Status::Failure => format!(
            "failure: {f} failure{}, {w} warning{}",
            if f == 1 { "" } else { "s" },
            if w == 1 { "" } else { "s" }
        ),
    };
    out.push_str(&format!("\nVerdict: {verdict} (exit {})\n", r.status.code()));
    out
}
