//! Presentation: every rendering of what the other modules measured or found. Nothing here
//! touches a device. Measurement reports go through `Exporter`, one implementation per format
//! (`table`, `seed`, `json`, `csv`); a new format is one file and one arm in `exporter`. `doctor`
//! and `setup` render those commands' findings and changes; `plot` draws saved runs as SVG and
//! `compare` renders a comparison of two; `health` renders a link-health check as a table and
//! `openmetrics` a check or a saved run in the Prometheus text format.

pub mod buffers;
pub mod compare;
pub mod counters;
pub mod csv;
pub mod doctor;
pub mod health;
pub mod info;
pub mod json;
pub mod latency;
pub mod memtest;
pub mod notes;
pub mod openmetrics;
pub mod ops;
pub mod plot;
pub mod queues;
pub mod rate;
pub mod seed;
pub mod setup;
pub mod soak;
pub mod table;

use crate::bench::result::Report;
use crate::measure::SuiteReport;
use crate::Result;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The readable table (default).
    Table,
    /// fpga_sio's `Min/Mean/Max (Mbytes/sec)` blocks, as the seeds print them.
    Seed,
    /// One JSON document.
    Json,
    /// One header row, then one row per result.
    Csv,
}

/// Renders measurement reports in one format.
pub trait Exporter {
    /// The whole report as text to print on stdout.
    fn report(&self, r: &Report) -> Result<String>;
    /// `pcibench run`'s parts as one document; by default each measured part in turn.
    fn suite(&self, s: &SuiteReport) -> Result<String> {
        let mut out = String::new();
        for r in s.parts() {
            out.push_str(&self.report(r)?);
        }
        Ok(out)
    }
}

/// Options the text formats honour.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Also show per-transfer latency percentiles (table).
    pub latency: bool,
}

pub fn exporter(format: Format, opts: Options) -> Box<dyn Exporter> {
    match format {
        Format::Table => Box::new(table::Table { latency: opts.latency }),
        Format::Seed => Box::new(seed::Seed),
        Format::Json => Box::new(json::Json),
        Format::Csv => Box::new(csv::Csv),
    }
}

/// " (simulated card: ...)" after a report's header, where it applies.
pub(crate) fn simulated_label(simulated: bool) -> &'static str {
    if simulated {
        " (simulated card: host-memory figures, not PCIe figures)"
    } else {
        ""
    }
}

/// A DMA report's first lines, up to its buffer: "pcibench dma DEV engine E via PATH (simulated
/// ...)\n  buffer: B", which the closed-loop table and the offered-load table go on from.
pub(crate) fn dma_heading(r: &Report) -> String {
    format!(
        "pcibench dma {} engine {} via {}{}\n  buffer: {}",
        r.device,
        r.engine.as_deref().unwrap_or("-"),
        r.via,
        simulated_label(r.simulated),
        r.buffer.as_deref().unwrap_or("-"),
    )
}
