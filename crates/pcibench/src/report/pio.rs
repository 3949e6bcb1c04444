//! PIO results as a table, as fpga_sio's block format (`--format seed`), or JSON.

use crate::bench::pio::{PioReport, PioResult, Verdict};
use crate::units::human_size;
use std::fmt::Write;

fn verdict_text(v: &Option<Verdict>) -> String {
    match v {
        None => "-".into(),
        Some(Verdict::Ok) => "ok".into(),
        Some(Verdict::Mismatch { mismatch }) => format!("MISMATCH: {mismatch}"),
        Some(Verdict::Unverified { .. }) => "unverified".into(),
    }
}

pub fn header(r: &PioReport) -> String {
    let sim = if r.simulated { " (simulated card: host-memory figures, not PCIe figures)" } else { "" };
    format!(
        "pcibench pio {} via {}{sim}; timer overhead {:.0} ns; MB = 10^6 bytes\n",
        r.device, r.via, r.timer_overhead_ns
    )
}

/// The default readable table, one row per configuration, notes under their row.
pub fn table(r: &PioReport) -> String {
    let mut s = header(r);
    let _ = writeln!(
        s,
        "{:>3} {:<8} {:<3} {:<9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}  verify",
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
        "limit MB/s",
        "eff"
    );
    for x in &r.results {
        let _ = writeln!(s, "{}", table_row(x));
        for n in &x.notes {
            let _ = writeln!(s, "      note: {n}");
        }
        if let Some(Verdict::Unverified { reason }) = &x.verify {
            let _ = writeln!(s, "      note: {reason}");
        }
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

fn table_row(x: &PioResult) -> String {
    let io = if x.io == crate::access::IoMode::Syscall { "-sys" } else { "" };
    let map = format!("{}{io}", x.map.name());
    let (xfers, min, mean, med, max) = match &x.stats {
        Some(st) => (
            st.transfers.to_string(),
            format!("{:.2}", st.min_mbps),
            format!("{:.2}", st.mean_mbps),
            format!("{:.2}", st.median_mbps),
            format!("{:.2}", st.max_mbps),
        ),
        None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
    };
    let limit = x.limit_mbps.map(|l| format!("{l:.1}")).unwrap_or_else(|| "-".into());
    let eff = x.efficiency_pct.map(|e| format!("{e:.1}%")).unwrap_or_else(|| "-".into());
    let size = if x.size == 0 { "-".into() } else { human_size(x.size) };
    format!(
        "{:>3} {:<8} {:<3} {:<9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}  {}",
        x.bar,
        map,
        x.dir,
        x.width.to_string(),
        size,
        xfers,
        min,
        mean,
        med,
        max,
        limit,
        eff,
        verdict_text(&x.verify)
    )
}

/// Latency per transfer, one row per measured configuration.
pub fn latency_table(r: &PioReport) -> String {
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
            x.bar,
            x.map.name(),
            x.dir,
            x.width.to_string(),
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

/// fpga_sio's time_memmapped output, block for block:
/// `host-to-card PIO mapped with write-combining timing for 64 transfers of 1048576 bytes:`
/// then `   Min = 922.115268 (Mbytes/sec)`, `  Mean = …`, `   Max = …`.
pub fn seed_format(r: &PioReport) -> String {
    let mut s = String::new();
    let mut last_bar = None;
    for x in &r.results {
        let Some(st) = &x.stats else {
            for n in &x.notes {
                let _ = writeln!(s, "BAR {} {}: {n}", x.bar, x.map.seed_name());
            }
            continue;
        };
        if last_bar != Some((x.bar, x.map, x.width, x.size)) {
            let _ = writeln!(s, "Testing BAR {} memory size {:#x} for {}", x.bar, x.size, r.device);
            last_bar = Some((x.bar, x.map, x.width, x.size));
        }
        match &x.verify {
            Some(Verdict::Ok) => {
                let _ = writeln!(s, "Test pattern pass");
            }
            Some(Verdict::Mismatch { mismatch }) => {
                let _ = writeln!(s, "Test pattern fail: {mismatch}");
            }
            _ => {}
        }
        let _ = writeln!(
            s,
            "{} PIO mapped with {} timing for {} transfers of {} bytes:",
            x.dir.long_name(),
            x.map.seed_name(),
            st.transfers,
            x.size
        );
        let _ = writeln!(s, "   Min = {:.6} (Mbytes/sec)", st.min_mbps);
        let _ = writeln!(s, "  Mean = {:.6} (Mbytes/sec)", st.mean_mbps);
        let _ = writeln!(s, "   Max = {:.6} (Mbytes/sec)", st.max_mbps);
    }
    s
}
