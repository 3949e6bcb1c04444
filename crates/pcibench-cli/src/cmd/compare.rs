use super::{emit, finish};
use clap::{Args, ValueEnum};
use pcibench::outcome::Outcome;
use pcibench::report::compare as render;
use pcibench::results::compare::{self, DEFAULT_THRESHOLD_PCT};
use pcibench::results::saved;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum CompareFormat {
    /// Context differences, then B/A per row with its range and verdict (default).
    Table,
    /// One JSON document: context differences, rows, counts.
    Json,
    /// One header row, then one row per configuration measured in both runs.
    Csv,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a percentage (e.g. 2 or 0.5)")),
    }
}

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench compare before.json after.json              B/A per row, changes beyond the noise flagged
  pcibench compare before.json after.json --format csv > delta.csv
  pcibench compare base.json new.json --threshold 5 || echo slower    for CI: exit 5 when a row got slower

A row is SLOWER (FASTER) when B's p5..p95 band lies wholly below (above) A's and the medians differ by at
least --threshold percent; rows with fewer than 10 samples on a side are not judged. Exit status: 0 no row
slower, 5 some row slower, 4 no configuration measured in both runs, 2 a file that is not a saved run.")]
pub struct CompareArgs {
    /// The baseline run (written by --save FILE.json).
    #[arg(value_name = "A.json")]
    a: PathBuf,
    /// The run judged against it.
    #[arg(value_name = "B.json")]
    b: PathBuf,
    /// Changes smaller than this many percent of A's median are never flagged.
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_THRESHOLD_PCT, value_parser = parse_threshold)]
    threshold: f64,
    /// Output: table (default), json or csv.
    #[arg(long, value_enum)]
    format: Option<CompareFormat>,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let (ra, rb) = (saved::read(&a.a)?, saved::read(&a.b)?);
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    let c = compare::compare((&na, &ra), (&nb, &rb), a.threshold)?;
    let format = if a.json { CompareFormat::Json } else { a.format.unwrap_or(CompareFormat::Table) };
    if format != CompareFormat::Table {
        if let Some(q) = render::questionable_line(&c) {
            eprintln!("warning: {q}");
        }
    }
    emit(&match format {
        CompareFormat::Table => render::table(&c),
        CompareFormat::Json => render::json(&c)?,
        CompareFormat::Csv => render::csv(&c),
    });
    let outcome = Outcome::of_comparison(&c);
    match c.why_nothing_compared() {
        Some(why) => {
            eprintln!("pcibench: {why}");
            Ok(ExitCode::from(outcome.code()))
        }
        None => Ok(finish(outcome)),
    }
}
