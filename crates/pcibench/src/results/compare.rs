//! `pcibench compare A B`: rows of two saved runs matched by configuration, B/A per row, and
//! which changes are larger than the noise of the two runs; first, what differs between the
//! runs' contexts, marked where it makes the comparison questionable.
//!
//! The noise rule: each row's spread is its p5..p95 sample rates. B/A has the range
//! [B.p5 / A.p95, B.p95 / A.p5]; a row got slower when that whole range lies below 1 (B's fast
//! end is slower than A's slow end: the two bands do not overlap) and the medians differ by at
//! least the threshold; faster likewise. Rows with fewer than `stats::MIN_SAMPLES` samples on
//! either side have no spread to judge and are never flagged.

use super::config::Config;
pub use super::context_diff::ContextDiff;
use super::saved::SavedRun;
use crate::bench::result::Row;
use crate::bench::sample::stats::MIN_SAMPLES;
use crate::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;

/// The default threshold: smaller changes are never flagged, however tight the bands. A run's
/// band shows the noise within it; runs on a busy host also drift by a few percent between
/// them (two identical sim runs on a loaded 2-core VM differ by up to ~5%), which no band shows.
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// One side's figures for a row (MB/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    pub median_mbps: f64,
    pub p5_mbps: f64,
    pub p95_mbps: f64,
    pub samples: usize,
    pub cv_pct: f64,
}

impl Figures {
    pub fn of(row: &Row) -> Option<Figures> {
        // An open-loop row: the throughput it achieved at its offered rate, with no spread across
        // samples to give a band (a change past the threshold is a change).
        if let (None, Some(f)) = (&row.stats, &row.rate) {
            let n = row.latency.as_ref().map_or(0, |l| l.samples) as usize;
            let m = f.achieved_mbps;
            return Some(Figures { median_mbps: m, p5_mbps: m, p95_mbps: m, samples: n, cv_pct: 0.0 });
        }
        let s = row.stats.as_ref()?;
        Some(Figures {
            median_mbps: s.median_mbps,
            p5_mbps: s.p5_mbps,
            p95_mbps: s.p95_mbps,
            samples: s.samples,
            cv_pct: s.cv_pct,
        })
    }

    /// Half the p5..p95 band, in percent of the median.
    pub fn spread_pct(&self) -> f64 {
        if self.median_mbps > 0.0 {
            (self.p95_mbps - self.p5_mbps) / 2.0 / self.median_mbps * 100.0
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Within the noise of the two runs, or below the threshold.
    Same,
    Faster,
    Slower,
    /// Too few samples on a side to know its noise.
    FewSamples,
}

impl Verdict {
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Faster => "FASTER",
            Verdict::Slower => "SLOWER",
            Verdict::FewSamples => "few samples",
        }
    }
}

/// One configuration measured in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct RowChange {
    pub config: Config,
    pub label: String,
    pub a: Figures,
    pub b: Figures,
    /// B's median over A's.
    pub ratio: f64,
    /// The range of B/A the two bands allow: [B.p5 / A.p95, B.p95 / A.p5].
    pub ratio_low: f64,
    pub ratio_high: f64,
    pub verdict: Verdict,
    /// Either side's row carries a flag (noisy, few, above the model, suspect link) or did not verify.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    /// The engine's own figures on each side, where its counters gave them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_a: Option<EngineSide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_b: Option<EngineSide>,
}

/// One side's engine figures for a row (`Row::engine`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EngineSide {
    pub engine_mbps: Option<f64>,
    pub busy_pct: Option<f64>,
    pub maxed: bool,
}

impl EngineSide {
    fn of(row: &Row) -> Option<EngineSide> {
        row.engine.as_ref().map(|e| EngineSide { engine_mbps: e.engine_mbps, busy_pct: e.busy_pct, maxed: e.maxed })
    }
}

/// A run as the comparison names it.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub file: String,
    pub command: String,
    pub device: Option<String>,
    pub time: Option<String>,
    pub pcibench_version: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub threshold_pct: f64,
    /// What differs between the two runs' contexts, the questionable first.
    pub context: Vec<ContextDiff>,
    pub rows: Vec<RowChange>,
    /// Configurations measured in one run only.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    /// Configurations present in both without throughput figures on both sides (skipped rows;
    /// latency rows, which carry histograms instead).
    pub unmeasured: Vec<String>,
}

impl Comparison {
    pub fn count(&self, v: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == v).count()
    }

    pub fn questionable(&self) -> bool {
        self.context.iter().any(|d| d.questionable)
    }

    /// Why no row was compared, in one line (None when some were): not "nothing was measured",
    /// which would blame the runs, but what the two runs do not have in common.
    pub fn why_nothing_compared(&self) -> Option<String> {
        if !self.rows.is_empty() {
            return None;
        }
        let unmeasured = match self.unmeasured.len() {
            0 => String::new(),
            n => format!(", {n} in both without throughput figures on both sides (skipped, or latency rows)"),
        };
        Some(format!(
            "nothing to compare: no configuration was measured in both runs ({} only in A, {} only in B{unmeasured}): compare two runs of the same measurement",
            self.only_a.len(),
            self.only_b.len()
        ))
    }
}

fn side(file: &str, run: &SavedRun) -> Side {
    // What a file says is clipped: the header is a line whatever the file holds.
    let clip = |s: &str| crate::text::clip(s, 200).into_owned();
    Side {
        file: file.to_string(),
        command: clip(&run.command),
        device: run.device.as_ref().map(|d| clip(&d.address)),
        time: run.context.as_ref().map(|c| clip(&c.time)),
        pcibench_version: run.context.as_ref().map(|c| clip(&c.pcibench_version)),
    }
}

/// The verdict for one row: see the module's noise rule.
pub fn verdict(a: &Figures, b: &Figures, threshold_pct: f64) -> (Verdict, f64, f64) {
    let low = if a.p95_mbps > 0.0 { b.p5_mbps / a.p95_mbps } else { f64::NAN };
    let high = if a.p5_mbps > 0.0 { b.p95_mbps / a.p5_mbps } else { f64::NAN };
    if a.samples < MIN_SAMPLES || b.samples < MIN_SAMPLES {
        return (Verdict::FewSamples, low, high);
    }
    let ratio = b.median_mbps / a.median_mbps;
    let v = if !ratio.is_finite() || (ratio - 1.0).abs() * 100.0 < threshold_pct {
        Verdict::Same
    } else if high < 1.0 {
        Verdict::Slower
    } else if low > 1.0 {
        Verdict::Faster
    } else {
        Verdict::Same
    };
    (v, low, high)
}

fn caveats(which: &str, row: &Row) -> Vec<String> {
    use crate::bench::result::Note;
    let mut out: Vec<String> = row
        .notes
        .iter()
        .filter_map(|n| match n {
            Note::FewSamples { .. } => Some("few samples"),
            Note::Noisy { .. } => Some("noisy"),
            Note::AboveLinkModel { .. } => Some("above the link model"),
            Note::LinkHealth { .. } => Some("link health changed (suspect)"),
            _ => None,
        })
        .map(|n| format!("{which}: {n}"))
        .collect();
    if row.mismatch().is_some() || row.rejected().is_some() {
        out.push(format!("{which}: data did not verify"));
    }
    out
}

/// Open-loop rows at the same offered rate: their latency on each side, in words.
fn latency_words(a: &Row, b: &Row) -> Option<String> {
    a.rate.as_ref()?;
    let (la, lb) = (a.latency.as_ref()?, b.latency.as_ref()?);
    Some(format!(
        "latency A to B: p50 {:.2} to {:.2} µs, p99 {:.2} to {:.2} µs",
        la.p50_ns / 1e3,
        lb.p50_ns / 1e3,
        la.p99_ns / 1e3,
        lb.p99_ns / 1e3
    ))
}

/// Rows keyed by configuration; a configuration measured twice in a run is told apart by its
/// occurrence.
fn keyed(run: &SavedRun) -> Vec<((Config, usize), &Row)> {
    let mut seen: HashMap<Config, usize> = HashMap::new();
    run.rows()
        .map(|(r, x)| {
            let c = Config::of(r, x);
            let n = seen.entry(c.clone()).or_insert(0);
            *n += 1;
            ((c, *n), x)
        })
        .collect()
}

/// Compare run `b` against run `a` (each with the name to show for it).
pub fn compare(a: (&str, &SavedRun), b: (&str, &SavedRun), threshold_pct: f64) -> Result<Comparison> {
    let kinds = |r: &SavedRun| r.reports.iter().map(|x| x.kind).collect::<Vec<_>>();
    let (ka, kb) = (kinds(a.1), kinds(b.1));
    if !ka.iter().any(|k| kb.contains(k)) {
        return Err(Error::usage(format!(
            "{} holds a {} run and {} a {} run: compare needs two runs of the same command",
            a.0, a.1.command, b.0, b.1.command
        )));
    }
    let rows_a = keyed(a.1);
    let rows_b = keyed(b.1);
    let index_b: HashMap<&(Config, usize), &Row> = rows_b.iter().map(|(k, r)| (k, *r)).collect();
    let mut out = Comparison {
        a: side(a.0, a.1),
        b: side(b.0, b.1),
        threshold_pct,
        context: super::context_diff::diffs(a.1, b.1),
        rows: Vec::new(),
        only_a: Vec::new(),
        only_b: Vec::new(),
        unmeasured: Vec::new(),
    };
    for (key, ra) in &rows_a {
        let label = crate::text::clip(&key.0.label(), 200).into_owned();
        let Some(rb) = index_b.get(key) else {
            out.only_a.push(label);
            continue;
        };
        let (Some(fa), Some(fb)) = (Figures::of(ra), Figures::of(rb)) else {
            out.unmeasured.push(label);
            continue;
        };
        let (verdict, ratio_low, ratio_high) = verdict(&fa, &fb, threshold_pct);
        let mut notes = caveats("A", ra);
        notes.extend(caveats("B", rb));
        notes.extend(latency_words(ra, rb));
        out.rows.push(RowChange {
            config: key.0.clone(),
            label,
            a: fa,
            b: fb,
            ratio: fb.median_mbps / fa.median_mbps,
            ratio_low,
            ratio_high,
            verdict,
            caveats: notes,
            engine_a: EngineSide::of(ra),
            engine_b: EngineSide::of(rb),
        });
    }
    let in_a: std::collections::HashSet<&(Config, usize)> = rows_a.iter().map(|(k, _)| k).collect();
    out.only_b = rows_b
        .iter()
        .filter(|(k, _)| !in_a.contains(k))
        .map(|(k, _)| crate::text::clip(&k.0.label(), 200).into_owned())
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::bench::result::{Kind, LatencyFigures, RateFigures, Report};
    use crate::direction::Direction;
    use crate::host::Host;

    fn run(points: &[(f64, f64, f64)]) -> SavedRun {
        let mut r = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
        for &(offered, mbps, p99) in points {
            let mut x = Row::new(Direction::H2c, 64);
            x.latency = Some(LatencyFigures { samples: 1000, p50_ns: p99 / 2.0, p99_ns: p99, ..Default::default() });
            x.rate = Some(RateFigures { offered_ops: offered, achieved_mbps: mbps, ..Default::default() });
            r.results.push(x);
        }
        SavedRun::of_report(&Host::default(), None, &r)
    }

    #[test]
    fn open_loop_curves_compare_at_equal_offered_rates() {
        let a = run(&[(1e6, 64.0, 2_000.0), (2e6, 128.0, 4_000.0), (4e6, 200.0, 90_000.0)]);
        let b = run(&[(2e6, 128.0, 3_000.0), (4e6, 150.0, 200_000.0), (8e6, 150.0, 900_000.0)]);
        let c = compare(("a", &a), ("b", &b), DEFAULT_THRESHOLD_PCT).unwrap();
        let got: Vec<(&str, Verdict)> = c.rows.iter().map(|r| (r.label.as_str(), r.verdict)).collect();
        assert_eq!(
            got,
            [
                ("dma latency h2c 64 B offered 2.000 M/s", Verdict::Same),
                ("dma latency h2c 64 B offered 4.000 M/s", Verdict::Slower)
            ]
        );
        assert!(c.rows[1]
            .caveats
            .contains(&"latency A to B: p50 45.00 to 100.00 µs, p99 90.00 to 200.00 µs".to_string()));
        assert_eq!((c.only_a.len(), c.only_b.len()), (1, 1));
    }
}
