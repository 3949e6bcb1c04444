//! What `--trace` costs a row (issue 43): measured, not stated. Once per run, after its rows, a
//! fresh tracer writes `PROBE_EVENTS` register lines to an unnamed file in the trace's own
//! directory (the same filesystem, the same write(2) per line as the run's), in batches; the
//! median batch's time over its count is the cost of one traced event. Each row that traced events in its timed samples
//! (`Row::traced`) then says what they cost it: events × that cost over the row's time.

use super::result::{Note, Report};
use super::sample::clock::Clock;
use crate::mmio::Width;
use crate::trace::{Access, Tracer};
use crate::{Error, Result};
use std::path::Path;

/// Lines the calibration writes: a few milliseconds on a local disk.
pub const PROBE_EVENTS: u64 = 2000;
/// In this many batches.
const PROBE_BATCHES: u64 = 16;

/// The cost of one traced event in ns, timed on `clock`: register writes (never folded into a
/// repeat line) into a tracer on a file beside `trace_path`, which is gone when it is closed.
pub fn per_event_ns(trace_path: &Path, clock: &dyn Clock) -> Result<f64> {
    let dir = trace_path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file = tempfile::tempfile_in(dir).map_err(|e| Error::io("cannot make a file to time the trace in", dir, e))?;
    let t = Tracer::to_file(file, trace_path, u64::MAX, &[])?;
    // In batches, the median batch taken: on a loaded host a batch the scheduler interrupted is
    // the exception, not the cost.
    let per = PROBE_EVENTS / PROBE_BATCHES;
    let mut batches: Vec<f64> = (0..PROBE_BATCHES)
        .map(|b| {
            let t0 = clock.now_ns();
            for i in 0..per {
                t.reg(Access::Write, 0, (i % 64) * 4, Width::B32, b * per + i);
            }
            // A fake clock charges the events its cost model's time; a real one measured them.
            clock.did(per, 0);
            clock.now_ns().saturating_sub(t0) as f64 / per as f64
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    Ok(batches[batches.len() / 2])
}

/// Each row whose timed samples traced events gets a note of their cost at `ns_per_event`.
pub fn annotate(report: &mut Report, ns_per_event: f64) {
    for row in &mut report.results {
        let Some(t) = row.traced.filter(|t| t.events > 0 && t.secs > 0.0) else { continue };
        let share_pct = (t.events as f64 * ns_per_event * 1e-9 / t.secs * 100.0).min(100.0);
        row.notes.push(Note::Tracing { events: t.events, ns_per_event, share_pct });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::bench::result::{Kind, Row, Traced};
    use crate::bench::sample::clock::FakeClock;
    use crate::direction::Direction;

    /// The figure is the calibration's: on a fake clock whose cost model charges 700 ns an event
    /// (and nothing for a reading), the cost is 700 ns, and a row that traced 1000 events in 10 ms
    /// spent 7% of its time tracing. A row that traced nothing says nothing.
    #[test]
    fn the_cost_is_measured_and_each_row_says_its_share() {
        let dir = tempfile::tempdir().unwrap();
        let ns = per_event_ns(&dir.path().join("t.jsonl"), &FakeClock::new(0, 700, u64::MAX)).unwrap();
        assert_eq!(ns, 700.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the calibration's file is gone");
        let mut report = Report::new(Kind::Dma, "sim", true, Via::Sim, 20.0);
        let mut traced = Row::new(Direction::H2c, 4096);
        traced.traced = Some(Traced { events: 1000, secs: 0.01 });
        let mut quiet = Row::new(Direction::C2h, 4096);
        quiet.traced = Some(Traced { events: 0, secs: 0.01 });
        report.results = vec![traced, quiet];
        annotate(&mut report, ns);
        let n = &report.results[0].notes;
        assert_eq!(n.len(), 1);
        let Note::Tracing { events, ns_per_event, share_pct } = n[0] else { panic!("{n:?}") };
        assert_eq!((events, ns_per_event), (1000, 700.0));
        assert!((share_pct - 7.0).abs() < 1e-9, "{share_pct}");
        let text = crate::report::notes::text(&n[0]);
        assert!(text.starts_with("tracing cost about 700 ns per access, 7.0% of this row"), "{text}");
        assert!(report.results[1].notes.is_empty());
    }

    /// The sampler counts what the timed samples traced: a traced event per transfer.
    #[test]
    fn the_sampler_counts_the_events_its_samples_traced() {
        use crate::bench::sample::sampler::Sampling;
        let dir = tempfile::tempdir().unwrap();
        let t = Tracer::create(&dir.path().join("t.jsonl"), u64::MAX, &[]).unwrap();
        let clock = FakeClock::new(20, 100, u64::MAX);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut progress = ();
        let mut s = Sampling::new(&clock, &stop, &mut progress, None);
        let sampled = s
            .run(64, 64 * 1000, |k| {
                for i in 0..k {
                    t.reg(Access::Write, 0, 0, Width::B32, i);
                }
                Ok(())
            })
            .unwrap();
        // Warm-up and calibration transfers are not the samples': only the measured ones count.
        assert_eq!(sampled.traced, sampled.measured());
        let mut row = Row::new(Direction::H2c, 64);
        row.measured(&sampled, None, 20.0);
        assert_eq!(row.traced.map(|t| t.events), Some(1000));
    }
}
