pub mod buffers;
pub mod compare;
pub mod dist;
pub mod dma;
pub mod doctor;
pub mod export;
pub mod health;
pub mod info;
mod interrupt;
pub mod latency;
pub mod list;
pub mod peek;
pub mod pio;
pub mod plot;
pub mod run;
pub mod setup;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pcibench::device::Target;
use pcibench::file::Output;
use pcibench::host::Host;
use pcibench::measure::{Common, Hooks, Measured, Measurement, Request};
use pcibench::outcome::Outcome;
use pcibench::report;
use pcibench::results::saved::{self, SavedRun};
use pcibench::trace::Tracer;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parse a DEVICE argument (`DDDD:BB:DD.F`, `BB:DD.F`, or a simulated card such as `sim`).
pub fn parse_target(s: &str) -> Result<Target, String> {
    s.parse::<Target>().map_err(|e| e.to_string())
}

/// Print a JSON document on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    emit(&pcibench::report::json::to_json(v)?);
    Ok(())
}

/// `--save FILE` (or `-`: stdout): checked when the flags are parsed, before anything is measured.
fn parse_save(s: &str) -> Result<Output, String> {
    // Created 0600: a saved run holds the command line and the device's bus addresses.
    Output::check("--save", "run.json", s.as_ref()).map(Output::private).map_err(|e| e.to_string())
}

/// Options every measuring command takes (`pio`, `dma`, `latency`, `buffers`, `run`), and the one
/// place they finish (`deliver`): a new measuring command gets every format and --save with them.
#[derive(clap::Args, Clone)]
pub struct MeasureArgs {
    /// Pin the measuring thread to this CPU (default: a CPU on the device's NUMA node when sysfs names one).
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// Output: table (default), seed (the text the test programs pcibench replaces print, e.g. fpga_sio's "Min/Mean/Max (Mbytes/sec)" blocks), json or csv.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Also save the whole result with its context (device, link, IOMMU mode, host) to FILE.json,
    /// for `pcibench plot` and `pcibench compare` (a new file, or a regular file replaced whole;
    /// `-` prints it on stdout instead of the output, for a pipe or a device).
    #[arg(long, value_name = "FILE.json", value_parser = parse_save)]
    pub save: Option<Output>,
}

impl MeasureArgs {
    pub fn format(&self) -> pcibench::report::Format {
        self.format.unwrap_or(FormatArg::Table).resolve(self.json)
    }

    /// What every request carries from these flags, checked before anything is measured.
    pub fn common(&self) -> anyhow::Result<Common> {
        if self.save == Some(Output::Stdout) && (self.format.is_some() || self.json) {
            anyhow::bail!(pcibench::Error::usage(
                "--save - prints the saved run (JSON) on stdout in place of the output: drop --format/--json, or save to a file"
            ));
        }
        Ok(Common { cpu: self.cpu, command_line: std::env::args().collect() })
    }

    /// Save the run (--save) with the device's context, print it in the chosen format, and
    /// return the exit status. The file is written before the output, so a closed stdout cannot
    /// lose it.
    pub fn deliver(&self, host: &Host, m: &Measurement, opts: report::Options) -> anyhow::Result<ExitCode> {
        let exporter = report::exporter(self.format(), opts);
        let (text, outcome) = match &m.measured {
            Measured::Report(r) => (exporter.report(r)?, Outcome::of_report(r)),
            Measured::Suite(s) => {
                for w in &s.info.warnings {
                    eprintln!("warning: {w}");
                }
                (exporter.suite(s)?, Outcome::of_suite(s))
            }
        };
        match &self.save {
            None => emit(&text),
            Some(Output::Stdout) => emit(&saved::to_json(&SavedRun::of_measurement(host, m))?),
            Some(Output::File(dest)) => {
                let saving = saved::write(dest, &SavedRun::of_measurement(host, m));
                emit(&text);
                saving?;
            }
        }
        Ok(finish(outcome))
    }
}

/// Measure `request` with the terminal's progress bar and the signal handlers' stop flag, traced
/// where `trace` asks for it: the one library call of every measuring command.
pub fn measure(host: &Host, request: &Request, trace: Option<&TraceArgs>) -> anyhow::Result<Measurement> {
    let stop = interrupt_flag();
    let tracer = trace.map(TraceArgs::open).transpose()?.flatten();
    let mut progress = Progress::new();
    let hooks = &mut Hooks { stop: &stop, progress: &mut progress, trace: tracer.as_ref() };
    let result = pcibench::measure::measure(host, request, hooks);
    if let Some(t) = tracer {
        let outcome = match &result {
            Ok(m) => match &m.measured {
                Measured::Report(r) => Outcome::of_report(r),
                Measured::Suite(s) => Outcome::of_suite(s),
            },
            Err(e) => Outcome::of_error(e),
        };
        // A run the user stopped ended because of the stop, whatever it ran into on the way.
        let outcome = if stop.load(Ordering::Relaxed) { Outcome::Interrupted } else { outcome };
        TraceArgs::finish(&t, outcome, result.as_ref().err().map(|e| e.to_string()).as_deref());
    }
    Ok(result?)
}

/// `--trace FILE` and its limit, on the commands that drive a card's registers (`dma`, `latency`,
/// `run`, `info`).
#[derive(clap::Args, Clone)]
pub struct TraceArgs {
    /// Write every register read and write, DMA buffer, descriptor and writeback to FILE, one JSON
    /// line each, as it happens: the file to send back when a run on a real card fails
    /// (docs/trace.md). FILE is a new name or a regular file, which is overwritten.
    #[arg(long, value_name = "FILE", value_parser = parse_trace)]
    pub trace: Option<PathBuf>,
    /// Lines the trace holds at most (default 1000000, about 100 MB): then one line says the limit
    /// was reached, and the run goes on untraced.
    #[arg(long, value_name = "LINES", requires = "trace", default_value_t = pcibench::trace::DEFAULT_LIMIT,
          value_parser = clap::value_parser!(u64).range(1..), hide_default_value = true)]
    pub trace_limit: u64,
}

/// `--trace FILE`: checked when the flags are parsed, before anything is measured.
fn parse_trace(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    pcibench::trace::check_destination("--trace", &p).map_err(|e| e.to_string())?;
    Ok(p)
}

impl TraceArgs {
    /// The trace, created before anything is measured (None without --trace).
    pub fn open(&self) -> anyhow::Result<Option<Tracer>> {
        let Some(path) = &self.trace else { return Ok(None) };
        Ok(Some(Tracer::create(path, self.trace_limit, &std::env::args().collect::<Vec<_>>())?))
    }

    /// End the trace with how the command ended, and say on stderr where it is.
    pub fn finish(t: &Tracer, outcome: Outcome, error: Option<&str>) {
        match t.finish(outcome.name(), error) {
            Ok(s) => {
                let dropped = match s.dropped {
                    0 => String::new(),
                    n => format!("; {n} later events left out (--trace-limit)"),
                };
                eprintln!("pcibench: trace: {} lines in {}{dropped}", s.lines, s.path.display());
            }
            Err(e) => eprintln!("pcibench: the trace is incomplete: {e}: write it where there is room"),
        }
    }
}

/// The output formats of measuring commands (`--format`).
#[derive(Clone, Copy, clap::ValueEnum, PartialEq)]
pub enum FormatArg {
    /// A readable table (default).
    Table,
    /// The text of the test programs pcibench replaces, for side-by-side comparison: fpga_sio's
    /// (a public set of PCIe test programs) `Min/Mean/Max (Mbytes/sec)` blocks for PIO and DMA,
    /// u-dma-buf's test lines for buffers, the QDMA and latency tables for queues and latency.
    Seed,
    /// One JSON document.
    Json,
    /// One header row, then one row per result (the fields of JSON's rows).
    Csv,
}

impl FormatArg {
    /// `--json` wins over `--format`.
    pub fn resolve(self, json: bool) -> pcibench::report::Format {
        use pcibench::report::Format;
        match (json, self) {
            (true, _) | (_, FormatArg::Json) => Format::Json,
            (_, FormatArg::Table) => Format::Table,
            (_, FormatArg::Seed) => Format::Seed,
            (_, FormatArg::Csv) => Format::Csv,
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP set this: runners stop at the next sample, stop engines, restore
/// Bus Master and report what they have (exit 130). A second signal from a person (another one,
/// or the same a second later) ends the process at once with 130 (`interrupt`).
pub fn interrupt_flag() -> Arc<AtomicBool> {
    interrupt::flag()
}

/// Write to stdout. When the reader has gone (`| head -1`), leave quietly as coreutils do when
/// SIGPIPE ends them (status 141): every run has finished and cleaned up before it prints.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("pcibench: cannot write the output: {e}");
        std::process::exit(1);
    }
}

/// `emit` with a newline.
pub fn emitln(text: &str) {
    emit(&format!("{text}\n"));
}

/// The exit status of a finished run, with the line that explains a non-zero one.
pub fn finish(outcome: pcibench::outcome::Outcome) -> ExitCode {
    if let Some(why) = outcome.explain() {
        eprintln!("pcibench: {why}");
    }
    ExitCode::from(outcome.code())
}

/// A byte-progress bar on stderr that appears only for runs longer than about 2 s, and only
/// when stderr is a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    shown: bool,
    tty: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress { bar: None, start: Instant::now(), shown: false, tty: std::io::stderr().is_terminal() }
    }
}

impl pcibench::bench::sample::sampler::Progress for Progress {
    fn begin(&mut self, what: &str, bytes: u64) {
        let bar = ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::hidden());
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(what.to_string());
        self.bar = Some(bar);
        self.start = Instant::now();
        self.shown = false;
    }

    fn add(&mut self, n: u64) {
        let Some(bar) = &self.bar else { return };
        bar.inc(n);
        if !self.shown && self.tty && self.start.elapsed() > Duration::from_secs(2) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
