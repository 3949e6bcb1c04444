//! DMA results as a table, fpga_sio's block format, or JSON.

use crate::bench::dma::DmaReport;
use crate::units::human_size;
use std::fmt::Write;

pub fn table(r: &DmaReport) -> String {
    let sim = if r.simulated { " (simulated card: host-memory figures, not PCIe figures)" } else { "" };
    let mut s = format!(
        "pcibench dma {} engine {} via {}{sim}\n  buffer: {}; the card was given {} addresses; timer overhead {:.0} ns; MB = 10^6 bytes\n",
        r.device,
        r.engine,
        r.via,
        r.buffer,
        match r.addressing {
            crate::dma::Addressing::Iova => "IOVA (IOMMU-mapped)",
            crate::dma::Addressing::Physical => "physical",
            crate::dma::Addressing::Sim => "sim-card",
        },
        r.timer_overhead_ns
    );
    let _ = writeln!(
        s,
        "{:<3} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>9} {:>9}  verify",
        "dir",
        "size",
        "xfers",
        "min MB/s",
        "mean MB/s",
        "med MB/s",
        "max MB/s",
        "limit MB/s",
        "eff",
        "p50 µs",
        "p99 µs"
    );
    for x in &r.results {
        let f = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        let st = x.stats.as_ref();
        let verify = match (x.verified, &x.mismatch) {
            (Some(true), _) => "ok".to_string(),
            (Some(false), Some(m)) => format!("MISMATCH: {m}"),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "{:<3} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>9} {:>9}  {verify}",
            x.dir.to_string(),
            human_size(x.size),
            st.map(|s| s.transfers.to_string()).unwrap_or_else(|| "-".into()),
            f(st.map(|s| s.min_mbps)),
            f(st.map(|s| s.mean_mbps)),
            f(st.map(|s| s.median_mbps)),
            f(st.map(|s| s.max_mbps)),
            x.limit_mbps.map(|l| format!("{l:.1}")).unwrap_or_else(|| "-".into()),
            x.efficiency_pct.map(|e| format!("{e:.1}%")).unwrap_or_else(|| "-".into()),
            f(st.map(|s| s.latency.p50_us)),
            f(st.map(|s| s.latency.p99_us)),
        );
        for n in &x.notes {
            let _ = writeln!(s, "      note: {n}");
        }
    }
    if r.interrupted {
        let _ = writeln!(s, "interrupted: the figures above cover the samples gathered before Ctrl-C");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// time_dma_blkram's output: `host-to-card DMA timing for 14170 transfers of 1212416 bytes:`.
pub fn seed_format(r: &DmaReport) -> String {
    let mut s = String::new();
    for x in &r.results {
        let Some(st) = &x.stats else { continue };
        match x.verified {
            Some(true) => s.push_str("Test pattern pass\n"),
            Some(false) => s.push_str("Test pattern fail\n"),
            None => {}
        }
        let _ = writeln!(s, "{} DMA timing for {} transfers of {} bytes:", x.dir.long_name(), st.transfers, x.size);
        let _ = writeln!(s, "   Min = {:.6} (Mbytes/sec)", st.min_mbps);
        let _ = writeln!(s, "  Mean = {:.6} (Mbytes/sec)", st.mean_mbps);
        let _ = writeln!(s, "   Max = {:.6} (Mbytes/sec)", st.max_mbps);
    }
    s
}
