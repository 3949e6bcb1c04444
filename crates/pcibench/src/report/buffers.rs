//! `pcibench buffers` in words: the table (per buffer, its facts then one row per access) and
//! seed 003's lines (`mmap write test : sync=0 time=... sec (... sec)  ... MB/sec`, `compare = ok`).

use super::notes::{flags, grouped, verify_text};
use crate::bench::result::{Report, Row, Verify};
use crate::dma::cpu::Sync;
use crate::units::human_size;
use std::fmt::Write;

fn sync_name(s: Option<Sync>) -> &'static str {
    match s {
        Some(Sync::Coherent) => "coherent",
        Some(Sync::Explicit) => "sync",
        Some(Sync::OSync) => "O_SYNC",
        None => "-",
    }
}

fn op(r: &Row) -> &'static str {
    match r.dir {
        crate::direction::Direction::H2c => "write",
        crate::direction::Direction::C2h => "read",
    }
}

/// A row as the notes name it: "heap mmap coherent 64 write".
fn label(x: &Row) -> String {
    format!(
        "{} {} {} {} {}",
        x.buffer.as_deref().unwrap_or("-"),
        x.access.map_or("-", |a| a.name()),
        sync_name(x.sync),
        x.width.map_or("-".to_string(), |w| w.to_string()),
        op(x)
    )
}

pub fn table(r: &Report) -> String {
    let mut s = format!(
        "pcibench buffers: CPU access to DMA buffers; timer overhead {:.0} ns; MB = 10^6 bytes\n",
        r.timer_overhead_ns
    );
    if let Some(c) = &r.context {
        let _ = writeln!(s, "  {}", super::notes::where_it_ran(c));
    }
    for b in &r.buffers {
        if let Some(why) = &b.skipped {
            let _ = writeln!(s, "\n{}: skipped: {why}", b.name);
            continue;
        }
        let facts: Vec<String> = b.facts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "\n{}{}",
            b.name,
            if facts.is_empty() { String::new() } else { format!(" ({})", facts.join(", ")) }
        );
        let _ = writeln!(
            s,
            "  {:<4} {:<8} {:<7} {:<5} {:>9} {:>6} {:>10} {:>5} {:>10} {:>10} {:>10} {:>10}  verify",
            "way",
            "sync",
            "width",
            "op",
            "size",
            "xfers",
            "med MB/s",
            "cv%",
            "sync-cpu µs",
            "main µs",
            "sync-dev µs",
            "total µs"
        );
        let mut memory: Option<&str> = None;
        for x in r.results.iter().filter(|x| x.buffer.as_deref() == Some(b.name.as_str())) {
            if x.memory.as_deref() != memory {
                memory = x.memory.as_deref();
                let _ = writeln!(s, "  {} mapping: {}", sync_name(x.sync), memory.unwrap_or("-"));
            }
            let st = x.stats.as_ref();
            let p = x.parts;
            let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| format!("{v:.d$}"));
            let _ = writeln!(
                s,
                "  {:<4} {:<8} {:<7} {:<5} {:>9} {:>6} {:>10} {:>5} {:>10} {:>10} {:>10} {:>10}  {}{}",
                x.access.map_or("-", |a| a.name()),
                sync_name(x.sync),
                x.width.map_or("-".to_string(), |w| w.to_string()),
                op(x),
                human_size(x.size),
                st.map_or("-".to_string(), |s| s.transfers.to_string()),
                f(st.map(|s| s.median_mbps), 1),
                f(st.map(|s| s.cv_pct), 1),
                f(p.map(|p| p.sync_for_cpu_us), 2),
                f(p.map(|p| p.main_us), 2),
                f(p.map(|p| p.sync_for_device_us), 2),
                f(p.map(|p| p.total_us), 2),
                verify_text(&x.verify),
                flags(x)
            );
        }
    }
    // Each kind of note once, after every buffer's rows, naming the rows it applies to.
    for n in grouped(&r.results, label) {
        let _ = writeln!(s, "note: {n}");
    }
    super::notes::tail(&mut s, r);
    s
}

/// seed 003's program, line for line, for each write/read pair (the time is the median total,
/// the parenthesis the median copy alone; MB/sec = bytes / total µs).
pub fn seed(r: &Report) -> String {
    let mut s = String::new();
    for b in r.buffers.iter().filter(|b| b.skipped.is_none()) {
        let _ = writeln!(s, "device={}", b.name);
        for (k, v) in &b.facts {
            let _ = writeln!(s, "{k}={v}");
        }
        let rows: Vec<&Row> = r.results.iter().filter(|x| x.buffer.as_deref() == Some(b.name.as_str())).collect();
        for x in rows.iter().filter(|x| x.parts.is_some()) {
            let p = x.parts.unwrap_or(crate::bench::result::Parts {
                sync_for_cpu_us: 0.0,
                main_us: 0.0,
                sync_for_device_us: 0.0,
                total_us: 0.0,
            });
            let way = x.access.map_or("mmap", |a| a.name());
            let _ = writeln!(
                s,
                "{way} {:<5} test : sync={} time={:.6} sec ({:.6} sec) {:6.1} MB/sec",
                op(x),
                x.sync.map_or(0, |y| y.seed_value()),
                p.total_us / 1e6,
                p.main_us / 1e6,
                if p.total_us > 0.0 { x.size as f64 / p.total_us } else { 0.0 }
            );
            if x.dir == crate::direction::Direction::C2h {
                s.push_str(match &x.verify {
                    Some(Verify::Ok) => "compare = ok\n",
                    _ => "compare = mismatch\n",
                });
            }
        }
    }
    s
}
