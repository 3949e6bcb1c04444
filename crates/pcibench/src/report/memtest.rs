//! `pcibench memtest` in words: the region, each pass's verdict with its bad ranges (and whose
//! data they hold), the aliasing pass, the size that answers, and the engine's write and read
//! throughput over the passes.

use super::notes::verify_text;
use crate::bench::memtest::figures::Memtest;
use crate::bench::result::Report;
use crate::units::human_size;
use std::fmt::Write;

pub fn table(r: &Report, t: &Memtest) -> String {
    let mut s = format!(
        "pcibench memtest {} engine {} via {}{}\n  buffer: {}\n",
        r.device,
        r.engine.as_deref().unwrap_or("-"),
        r.via,
        super::simulated_label(r.simulated),
        r.buffer.as_deref().unwrap_or("-")
    );
    let _ = writeln!(
        s,
        "  card memory {:#x}-{:#x} ({}), moved {} at a time; each 8-byte word holds its address (keyed), then its complement",
        t.card_addr,
        t.card_addr + t.size.saturating_sub(1),
        human_size(t.size),
        human_size(t.chunk)
    );
    super::notes::context_lines(&mut s, r);
    let _ = writeln!(
        s,
        "{:<8} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  verify",
        "", "chunk", "chunks", "min MB/s", "mean MB/s", "med MB/s", "max MB/s", "limit MB/s"
    );
    for x in &r.results {
        let st = x.stats.as_ref();
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{:<8} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
            if x.dir == crate::direction::Direction::H2c { "write" } else { "read" },
            human_size(x.size),
            st.map_or("-".into(), |s| s.samples.to_string()),
            f(st.map(|s| s.min_mbps)),
            f(st.map(|s| s.mean_mbps)),
            f(st.map(|s| s.median_mbps)),
            f(st.map(|s| s.max_mbps)),
            f(x.limit_mbps),
            verify_text(&x.verify)
        );
    }
    for p in &t.passes {
        if p.bad_bytes == 0 {
            let _ = writeln!(s, "{} pass: every byte as written", p.name);
            continue;
        }
        let _ = writeln!(
            s,
            "{} pass: {} bad bytes in {} ranges:",
            p.name,
            p.bad_bytes,
            p.bad_ranges.len() as u64 + p.more_ranges
        );
        for b in &p.bad_ranges {
            let holds =
                b.holds_from.map(|d| format!(": holds the data written {d:#x} bytes above it")).unwrap_or_default();
            let _ = writeln!(s, "  {:#x}-{:#x} ({}){holds}", b.start, b.end - 1, human_size(b.end - b.start));
        }
        if p.more_ranges > 0 {
            let _ = writeln!(s, "  and {} more ranges (--json lists the first {})", p.more_ranges, p.bad_ranges.len());
        }
    }
    if let Some(a) = &t.aliasing {
        if a.found_elsewhere.is_empty() && a.lost.is_empty() {
            let _ = writeln!(
                s,
                "aliasing pass: each of {} markers (offset 0 and every power of two) read back where it was written",
                a.offsets.len()
            );
        } else {
            for (at, from) in &a.found_elsewhere {
                let _ = writeln!(s, "aliasing pass: the marker written at +{from:#x} reads back at +{at:#x}");
            }
            for at in &a.lost {
                let _ = writeln!(s, "aliasing pass: +{at:#x} holds no marker");
            }
        }
    }
    if t.answers < t.size {
        let _ = writeln!(
            s,
            "the memory answers at {} ({:#x}), not {}: it aliases at that distance (an address line that does not decode)",
            human_size(t.answers),
            t.answers,
            human_size(t.size)
        );
    } else if t.tested == t.size {
        let _ = writeln!(s, "the memory answers at its whole {} ({:#x})", human_size(t.size), t.size);
    } else {
        let _ = writeln!(s, "tested {} of {} before the stop", human_size(t.tested), human_size(t.size));
    }
    super::notes::tail(&mut s, r);
    s
}
