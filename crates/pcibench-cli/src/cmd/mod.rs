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
pub mod link;
pub mod list;
pub mod memtest;
pub mod peek;
pub mod pio;
pub mod plot;
pub mod reset;
pub mod run;
pub mod serve;
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
/// The lists `--help` shows come from the registries the code uses (a new engine, simulated card,
/// buffer kind or copy routine appears in them by itself; tests/help_lists.rs holds them together).
pub mod help {
    use pcibench::mmio::Width;

    /// A DEVICE argument: an address, or one of the simulated cards by name.
    pub fn device() -> String {
        format!("The device: DDDD:BB:DD.F, BB:DD.F, or a simulated card ({})", pcibench::sim::SimId::names())
    }

    /// `--engine`: every registered engine, or a simulated card's own.
    pub fn engine() -> String {
        format!(
            "DMA engine driver ({}, or sim for a simulated card's own); default: the one found on the device",
            pcibench::dma::engines::names()
        )
    }

    /// `--buffer` of the DMA commands.
    pub fn dma_buffer() -> String {
        format!(
            "Host buffer: {} (default hugepage; reserved: memory reserved with memmap=SIZE$START, mapped through \
             /dev/mem, no-IOMMU only)",
            pcibench::text::or_list(pcibench::dma::BUFFER_SOURCES)
        )
    }

    /// `--rate` of `dma` and `latency --dma`.
    pub fn rate() -> String {
        "Submit transfers open loop at this rate, each one's latency counted from when it was due: transfers a \
         second (1M, 500K), bytes a second (2GB/s), a list (1M,2M), or sweep (from 5% of the closed loop's rate \
         until the p99 passes --until-p99 or throughput stops rising); see docs/offered-load.md"
            .into()
    }

    /// `--rate` and `--until-p99` into the request's part (one-line refusals).
    pub fn rate_request(
        rate: Option<&str>,
        until: Option<&str>,
    ) -> anyhow::Result<Option<pcibench::measure::RateRequest>> {
        use pcibench::measure::{parse_latency, RateRequest, Rates};
        let Some(rate) = rate else {
            if until.is_some() {
                anyhow::bail!(pcibench::Error::usage(
                    "--until-p99 applies to --rate sweep: add it, or drop --until-p99"
                ));
            }
            return Ok(None);
        };
        let rates: Rates = rate.parse()?;
        if until.is_some() && rates != Rates::Sweep {
            anyhow::bail!(pcibench::Error::usage(
                "--until-p99 bounds --rate sweep; a list of rates runs every one: drop --until-p99"
            ));
        }
        Ok(Some(RateRequest { rates, until_p99_ns: until.map(parse_latency).transpose()? }))
    }

    /// `--width` of copy routines, from the widths a command runs.
    pub fn widths(widths: &[Width]) -> String {
        Width::names(widths, " ")
    }
}

/// A real PCI function for a command that changes one (`reset`, `link`): a simulated card has no
/// kernel, bus or link to act on.
pub fn parse_pci(s: &str, what: &str) -> Result<pcibench::pci::PciAddress, String> {
    if pcibench::sim::SimId::from_name(s).is_some() {
        return Err(format!("{s} is a simulated card: it has no {what} (name a PCI device: DDDD:BB:DD.F or BB:DD.F)"));
    }
    s.parse::<pcibench::pci::PciAddress>().map_err(|e| e.to_string())
}

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
        let gone = match &m.measured {
            Measured::Report(r) => r.gone.clone(),
            Measured::Suite(s) => s.parts().find_map(|r| r.gone.clone()),
        };
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
        if let Some(line) = gone {
            // The one line, after the partial rows: the card no longer answers.
            eprintln!("pcibench: {line}");
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
    progress.live = *live();
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
        let note = TraceArgs::end(&t, outcome, result.as_ref().err().map(|e| e.to_string()).as_deref());
        match result {
            // One line: the error, with what the trace holds folded into it.
            Err(e) => return Err(fold(e, note).into()),
            Ok(_) => *trace_note() = note,
        }
    }
    Ok(result?)
}

/// The format a run shows what it finds as it goes in (a soak's interval rows, `dma
/// --duration`): set by the command before its `measure`, as its output's format.
pub fn live() -> std::sync::MutexGuard<'static, Option<report::Format>> {
    static LIVE: std::sync::Mutex<Option<report::Format>> = std::sync::Mutex::new(None);
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `--trace` wrote, said once when the command ends (`finish`): beside the line that
/// explains a non-zero exit, or alone.
fn trace_note() -> std::sync::MutexGuard<'static, Option<String>> {
    static NOTE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    NOTE.lock().unwrap_or_else(|e| e.into_inner())
}

/// `e` with the trace's words at the end of its line (`pcibench: ERROR (trace: N lines in FILE)`).
pub fn fold(e: pcibench::Error, note: Option<String>) -> pcibench::Error {
    match note {
        Some(n) => e.append(&format!(" ({n})")),
        None => e,
    }
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
    /// The trace (None without --trace), deferred: its file is made when the measurement starts,
    /// once the request passed every check against the device (`Tracer::deferred`), or when the
    /// run fails on the device (`end`).
    pub fn open(&self) -> anyhow::Result<Option<Tracer>> {
        let Some(path) = &self.trace else { return Ok(None) };
        Ok(Some(Tracer::deferred(path, self.trace_limit, &std::env::args().collect::<Vec<_>>())?))
    }

    /// End the trace with how the command ended; what it holds in words, for the command's last
    /// stderr line (None: no file was made). A request refused as bad usage makes no file; any
    /// other end keeps what the device did (the reason to trace a run that fails).
    pub fn end(t: &Tracer, outcome: Outcome, error: Option<&str>) -> Option<String> {
        if outcome != Outcome::Usage {
            if let Err(e) = t.commit() {
                return Some(format!("no trace: {e}"));
            }
        }
        match t.finish(outcome.name(), error) {
            Ok(s) if !s.written => None,
            Ok(s) => {
                let dropped = match s.dropped {
                    0 => String::new(),
                    n => format!("; {n} later events left out (--trace-limit)"),
                };
                Some(format!("trace: {} lines in {}{dropped}", s.lines, s.path.display()))
            }
            Err(e) => Some(format!("the trace is incomplete: {e}: write it where there is room")),
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
        emit_failed(e);
    }
}

/// Stdout could not be written: a closed pipe ends quietly (141, as SIGPIPE would), anything else
/// in one line.
pub fn emit_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    eprintln!("pcibench: cannot write the output: {e}");
    std::process::exit(1);
}

/// `emit` with a newline.
pub fn emitln(text: &str) {
    emit(&format!("{text}\n"));
}

/// The exit status of a finished run, with the line that explains a non-zero one.
pub fn finish(outcome: pcibench::outcome::Outcome) -> ExitCode {
    match (outcome.explain(), trace_note().take()) {
        (Some(why), Some(trace)) => eprintln!("pcibench: {why} ({trace})"),
        (Some(why), None) => eprintln!("pcibench: {why}"),
        (None, Some(trace)) => eprintln!("pcibench: {trace}"),
        (None, None) => {}
    }
    ExitCode::from(outcome.code())
}

/// A byte-progress bar on stderr that appears only for runs longer than about 2 s (at once for a
/// configuration estimated past `LONG`), and only when stderr is a terminal: never in a pipe or a
/// file, whatever the output format. A configuration estimated past `LONG` is said first, on
/// stderr, in one line, terminal or not (issue 43).
pub struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    shown: bool,
    tty: bool,
    /// Seconds past which a configuration's estimate is said.
    long: f64,
    /// A long estimate was said before the bar began (the whole run's): show it at once.
    long_said: bool,
    /// The format rows shown as they come are printed in (a soak's intervals), and whether its
    /// header was printed.
    live: Option<report::Format>,
    live_header: bool,
}

/// Work estimated longer than this is said before it starts (`PCIBENCH_LONG_SECS` sets another
/// threshold: scripts that want no estimate, tests whose stderr must not depend on the host).
pub const LONG: Duration = Duration::from_secs(10);

impl Progress {
    pub fn new() -> Progress {
        let long = std::env::var("PCIBENCH_LONG_SECS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(LONG.as_secs_f64());
        Progress {
            bar: None,
            start: Instant::now(),
            shown: false,
            tty: std::io::stderr().is_terminal(),
            long,
            long_said: false,
            live: None,
            live_header: false,
        }
    }

    fn show(&mut self) {
        if let (Some(bar), false, true) = (&self.bar, self.shown, self.tty) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }
}

/// `about 4 min`, `about 25 s`, `about 1.5 h`.
pub fn about(secs: f64) -> String {
    if secs < 90.0 {
        format!("about {secs:.0} s")
    } else if secs < 90.0 * 60.0 {
        format!("about {:.0} min", secs / 60.0)
    } else if secs < 48.0 * 3600.0 {
        format!("about {:.1} h", secs / 3600.0)
    } else {
        format!("about {:.0} days", secs / 86400.0)
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
        if self.long_said {
            self.show();
        }
    }

    fn add(&mut self, n: u64) {
        let Some(bar) = &self.bar else { return };
        bar.inc(n);
        if self.start.elapsed() > Duration::from_secs(2) {
            self.show();
        }
    }

    fn announce(&mut self, line: &str) {
        eprintln!("pcibench: {line}");
    }

    fn estimate(&mut self, secs: f64, work: &str, flag: &str) {
        if secs > self.long {
            if let Some(bar) = &self.bar {
                bar.suspend(|| eprintln!("pcibench: {} for {work}; {flag} sets it", about(secs)));
            } else {
                eprintln!("pcibench: {} for {work}; {flag} sets it", about(secs));
                self.long_said = true;
            }
            self.show();
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn interval(&mut self, rows: &[pcibench::bench::soak::figures::Interval]) {
        let Some(format) = self.live else { return };
        if let Some(text) = report::soak::interval_text(rows, format, !self.live_header) {
            self.live_header = true;
            emit(&text);
        }
    }
}
