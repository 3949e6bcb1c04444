//! `--format seed`: fpga_sio's output, block for block, as the seeds print it. PIO
//! (time_memmapped): `host-to-card PIO mapped with write-combining timing for 64 transfers of
//! 1048576 bytes:` then `   Min = 922.115268 (Mbytes/sec)`, `  Mean = …`, `   Max = …`; DMA
//! (time_dma_blkram): `host-to-card DMA timing for 14170 transfers of 1212416 bytes:`.

use super::notes::text;
use super::Exporter;
use crate::bench::result::{Kind, Report, Row, Verify};
use crate::Result;
use std::fmt::Write;

pub struct Seed;

impl Exporter for Seed {
    fn report(&self, r: &Report) -> Result<String> {
        if r.kind == Kind::Buffers {
            return Ok(super::buffers::seed(r));
        }
        if r.kind == Kind::Latency {
            return super::latency::seed(r);
        }
        let mut s = String::new();
        if r.simulated {
            let _ = writeln!(s, "Simulated card {}: host-memory figures, not PCIe figures", r.device);
        }
        if super::queues::queued(r) {
            // Seed 004 (a QDMA card) reports its queue benchmarks as these tables.
            s.push_str(&queued(r));
            return Ok(s);
        }
        let mut last = None;
        for x in &r.results {
            let Some(st) = &x.stats else {
                if r.kind == Kind::Pio {
                    for n in &x.notes {
                        let map = x.map.map_or("-", |m| m.seed_name());
                        let _ = writeln!(s, "BAR {} {map}: {}", x.bar.unwrap_or(0), text(n));
                    }
                }
                continue;
            };
            if r.kind == Kind::Pio && last != Some((x.bar, x.map, x.width, x.size)) {
                let size = x.bar_size.unwrap_or(x.size);
                let _ = writeln!(s, "Testing BAR {} memory size {size:#x} for {}", x.bar.unwrap_or(0), r.device);
                last = Some((x.bar, x.map, x.width, x.size));
            }
            pattern_line(&mut s, x);
            match r.kind {
                Kind::Pio => {
                    let map = x.map.map_or("-", |m| m.seed_name());
                    let _ = writeln!(
                        s,
                        "{} PIO mapped with {map} timing for {} transfers of {} bytes:",
                        x.dir.long_name(),
                        st.transfers,
                        x.size
                    );
                }
                Kind::Dma | Kind::Buffers | Kind::Latency => {
                    let _ = writeln!(
                        s,
                        "{} DMA timing for {} transfers of {} bytes:",
                        x.dir.long_name(),
                        st.transfers,
                        x.size
                    );
                }
            }
            let _ = writeln!(s, "   Min = {:.6} (Mbytes/sec)", st.min_mbps);
            let _ = writeln!(s, "  Mean = {:.6} (Mbytes/sec)", st.mean_mbps);
            let _ = writeln!(s, "   Max = {:.6} (Mbytes/sec)", st.max_mbps);
        }
        Ok(s)
    }
}

fn pattern_line(s: &mut String, x: &Row) {
    match &x.verify {
        Some(Verify::Ok) => s.push_str("Test pattern pass\n"),
        Some(Verify::Mismatch { mismatch }) => {
            let _ = writeln!(s, "Test pattern fail: {mismatch}");
        }
        _ => {}
    }
}

/// Seed 004's tables, then whether every row's data verified.
fn queued(r: &Report) -> String {
    let mut s = format!(
        "# {} DMA, engine {}
",
        r.device,
        r.engine.as_deref().unwrap_or("-")
    );
    s.push_str(&super::queues::summary(r));
    let bad: Vec<String> = r
        .results
        .iter()
        .filter_map(|x| x.mismatch().map(|m| format!("{} {} q{}: {m}", x.dir, x.size, x.queues.unwrap_or(1))))
        .collect();
    let measured = r.results.iter().filter(|x| x.stats.is_some()).count();
    if bad.is_empty() {
        let _ = writeln!(
            s,
            "
Test pattern pass ({measured} rows verified)"
        );
    } else {
        let _ = writeln!(
            s,
            "
Test pattern fail: {}",
            bad.join("; ")
        );
    }
    s
}
