pub mod buffers;
pub mod dma;
pub mod doctor;
pub mod info;
pub mod list;
pub mod peek;
pub mod pio;
pub mod run;
pub mod setup;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pcibench::target::Target;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parse a DEVICE argument (`DDDD:BB:DD.F`, `BB:DD.F`, or a simulated card such as `sim`).
pub fn parse_target(s: &str) -> Result<Target, String> {
    s.parse::<Target>().map_err(|e| e.to_string())
}

/// Print a JSON document on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Options every measuring command takes (`pio`, `dma`, `run`).
#[derive(clap::Args, Clone)]
pub struct MeasureArgs {
    /// Pin the measuring thread to this CPU (default: a CPU on the device's NUMA node when sysfs names one).
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// Output: table, seed (the fpga_sio block format) or json.
    #[arg(long, value_enum, default_value = "table")]
    pub format: FormatArg,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
}

impl MeasureArgs {
    pub fn placement(&self) -> pcibench::bench::context::Placement {
        match self.cpu {
            Some(c) => pcibench::bench::context::Placement::Cpu(c),
            None => pcibench::bench::context::Placement::Default,
        }
    }

    pub fn format(&self) -> pcibench::report::Format {
        self.format.resolve(self.json)
    }
}

/// The command line as typed, for reports' context.
pub fn command_line() -> Vec<String> {
    std::env::args().collect()
}

/// The output formats of measuring commands (`--format`).
#[derive(Clone, Copy, clap::ValueEnum, PartialEq)]
pub enum FormatArg {
    /// A readable table (default).
    Table,
    /// The fpga_sio block format (`Min/Mean/Max (Mbytes/sec)`).
    Seed,
    /// One JSON document.
    Json,
}

impl FormatArg {
    /// `--json` wins over `--format`.
    pub fn resolve(self, json: bool) -> pcibench::report::Format {
        use pcibench::report::Format;
        match (json, self) {
            (true, _) | (_, FormatArg::Json) => Format::Json,
            (_, FormatArg::Table) => Format::Table,
            (_, FormatArg::Seed) => Format::Seed,
        }
    }
}

/// Ctrl-C sets this; runners stop at the next sample, stop engines and report what they have.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flag);
    // A second handler install fails harmlessly; the first stays.
    let _ = ctrlc::set_handler(move || f.store(true, Ordering::SeqCst));
    flag
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

impl pcibench::bench::sampler::Progress for Progress {
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
