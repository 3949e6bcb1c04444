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
        if let Some(k) = &r.soak {
            return Ok(super::soak::seed(k));
        }
        if r.kind == Kind::Latency || super::rate::has_rates(r) {
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
        Some(Verify::Rejected { reason }) => {
            let _ = writeln!(s, "Test pattern fail: {reason}");
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
        .filter_map(|x| {
            let why = x.mismatch().map(|m| m.to_string()).or_else(|| x.rejected().map(String::from));
            why.map(|m| format!("{} {} q{}: {m}", x.dir, x.size, x.queues.unwrap_or(1)))
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::bench::result::Kind;
    use crate::bench::sample::stats::Samples;
    use crate::dma::Direction;

    /// A row of 16 transfers of 1 GiB at seed 001's min and max rates, the other 14 at the rate
    /// that gives its mean (mean = bytes / time).
    fn row(dir: Direction, min: f64, mean: f64, max: f64) -> Row {
        let b = (1u64 << 30) as f64;
        let rest = (16.0 * b / (mean * 1e6) - b / (min * 1e6) - b / (max * 1e6)) / 14.0;
        let mut s = Samples::new(1 << 30, 1);
        s.secs = vec![b / (min * 1e6), b / (max * 1e6)];
        s.secs.extend([rest; 14]);
        let mut r = Row::new(dir, 1 << 30);
        r.stats = s.stats();
        r.verify = Some(Verify::Ok);
        r
    }

    #[test]
    fn umem_dma_renders_seed_001s_blocks() {
        let mut r = Report::new(Kind::Dma, "0000:2d:00.0", false, Via::VfioNoiommu, 20.0);
        r.engine = Some("umem".into());
        r.results.push(row(Direction::H2c, 697.072373, 697.256706, 697.453255));
        r.results.push(row(Direction::C2h, 812.180739, 812.218616, 812.241400));
        let out = Seed.report(&r).unwrap();
        // Seed 001, time_nvram_access_vfio: one pattern line per verified row here (fpga_sio
        // prints one per iteration; pcibench verifies each row once, after its timed runs).
        let want = "Test pattern pass
host-to-card DMA timing for 16 transfers of 1073741824 bytes:
   Min = 697.072373 (Mbytes/sec)
  Mean = 697.256706 (Mbytes/sec)
   Max = 697.453255 (Mbytes/sec)
Test pattern pass
card-to-host DMA timing for 16 transfers of 1073741824 bytes:
   Min = 812.180739 (Mbytes/sec)
  Mean = 812.218616 (Mbytes/sec)
   Max = 812.241400 (Mbytes/sec)
";
        assert_eq!(out, want);
    }
}
