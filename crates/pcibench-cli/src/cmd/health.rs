use super::{emit, interrupt_flag};
use clap::{Args, ValueEnum};
use pcibench::file::{Destination, Output};
use pcibench::health::{self, state, HealthReport};
use pcibench::host::Host;
use pcibench::pci::PciAddress;
use pcibench::report;
use std::ffi::OsStr;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum HealthFormat {
    /// One line per function, then the findings, the changes and the verdict (default).
    Table,
    /// One JSON document (status, functions, changes).
    Json,
    /// The Prometheus text exposition format, for node_exporter's textfile collector.
    #[value(alias = "prometheus")]
    Openmetrics,
}

/// `-o FILE`, `--state FILE`: checked before anything is read.
pub fn parse_file(flag: &'static str, example: &'static str) -> impl Fn(&str) -> Result<Destination, String> + Clone {
    move |s: &str| Destination::check(flag, example, Path::new(s)).map_err(|e| e.to_string())
}

/// `-o FILE`, or `-o -` for stdout: checked before anything is read.
pub fn parse_output(example: &'static str) -> impl Fn(&str) -> Result<Output, String> + Clone {
    move |s: &str| Output::check("-o", example, OsStr::new(s)).map_err(|e| e.to_string())
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.5..=86400.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("'{s}' is not a refresh interval: give seconds from 0.5 to 86400, e.g. --watch 2")),
    }
}

#[derive(Args)]
#[command(
    after_help = "Read-only: reads sysfs and what config space the caller may read (root sees the Device and Link
Status registers, a user only the first 64 bytes: 'not readable', never guessed); never opens a BAR, binds a
driver or writes to a device, so it is safe on the disks and NICs the host runs on.

Exit status (health's own, for scripts and monitoring):
  0  healthy
  1  warnings: a degraded link (trained below what both ends support), correctable errors that grew, a link
     that retrained or came up at another speed or width, a Device Status bit newly set; without a previous
     run to compare, non-fatal or fatal errors the kernel counted since boot
  2  failures: non-fatal or fatal errors that grew, a link down, a function that does not answer config
     reads or is gone since the previous run
  3  could not check: bad usage or an error (one line on stderr says what)
  130  --watch ended by Ctrl-C (SIGINT, SIGTERM, SIGHUP)

Without --state, counters are judged only as counts since boot; keep a state file to judge their growth.

Examples:
  pcibench health                                    every PCIe link, AER counters, status bits
  pcibench health 03:00.0                            one device and the ports above it
  pcibench health --state /var/lib/pcibench/health.state    what changed since the last run
  pcibench health --format openmetrics -o /var/lib/node_exporter/textfile_collector/pcibench.prom
  pcibench health --watch 2                          refresh on this terminal, changes highlighted"
)]
pub struct HealthArgs {
    /// Only these functions (DDDD:BB:DD.F or BB:DD.F) and the ports above them (default: every PCIe function).
    #[arg(value_name = "DEVICE", value_parser = |s: &str| s.parse::<PciAddress>().map_err(|e| e.to_string()))]
    devices: Vec<PciAddress>,
    /// Output: table (default), json, or openmetrics (the Prometheus text format; also `prometheus`).
    #[arg(long, value_enum)]
    format: Option<HealthFormat>,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Write the output to FILE instead of stdout, replacing it atomically (a temporary file beside
    /// it, flushed, then renamed: a reader such as node_exporter sees the old file or the new one); - is stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE", value_parser = parse_output("pcibench.prom"))]
    output: Option<Output>,
    /// Compare with the state the previous run kept in FILE (counters that grew, links that
    /// retrained or went down, functions gone), then keep this run's state there (created on the
    /// first run; replaced atomically, only once the output is written).
    #[arg(long, value_name = "FILE", value_parser = parse_file("--state", "health-state.json"))]
    state: Option<Destination>,
    /// Redraw the table every SECONDS on this terminal, the cells that changed since the watch
    /// started highlighted and the changes since then (or since --state's run) listed, until
    /// Ctrl-C (exit 130). Needs a terminal on stdout; --state is read, not written.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, conflicts_with_all = ["output", "json", "format"])]
    watch: Option<Duration>,
}

pub fn run(host: &Host, a: HealthArgs) -> anyhow::Result<ExitCode> {
    let previous = match &a.state {
        Some(p) => state::read(p.path())?,
        None => None,
    };
    if let Some(every) = a.watch {
        return watch(host, &a, previous, every);
    }
    let r = health::check(host, &a.devices, previous.as_ref())?;
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    let format = if a.json { HealthFormat::Json } else { a.format.unwrap_or(HealthFormat::Table) };
    let text = match format {
        HealthFormat::Table => report::health::table(&r, None, false),
        HealthFormat::Json => pcibench::report::json::to_json(&r)?,
        HealthFormat::Openmetrics => report::openmetrics::health(&r),
    };
    match &a.output {
        Some(Output::File(dest)) => dest.write(text.as_bytes())?,
        Some(Output::Stdout) | None => emit(&text),
    }
    if let Some(dest) = &a.state {
        if previous.is_none() {
            eprintln!(
                "pcibench: no previous run in {}: this run's state is kept there for the next",
                dest.path().display()
            );
        }
        state::write(dest.path(), &state::State::next(&r.time, &r.states, previous.as_ref()))?;
    }
    Ok(ExitCode::from(r.status.code()))
}

/// `--watch`: redraw until a signal. Refused off a terminal: a pipe or a file would get screen
/// after screen of escape codes (a timer running health, or `watch`, serves those).
fn watch(host: &Host, a: &HealthArgs, previous: Option<state::State>, every: Duration) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        return Err(pcibench::Error::usage(
            "--watch redraws a terminal, and stdout is not one: run health without --watch from a timer (dist/systemd) or under watch(1)",
        )
        .into());
    }
    let stop = interrupt_flag();
    // The baseline the changes are listed against: the --state run's, else the first refresh.
    let mut baseline = previous;
    let mut first: Option<HealthReport> = None;
    loop {
        let r = health::check(host, &a.devices, baseline.as_ref())?;
        if baseline.is_none() {
            baseline = Some(state::State::next(&r.time, &r.states, None));
        }
        let mut screen = String::from("\x1b[H\x1b[2J");
        screen.push_str(&report::health::table(&r, first.as_ref(), true));
        screen.push_str(&format!(
            "\nEvery {}s; reverse video: changed since the watch started. Ctrl-C ends.\n",
            every.as_secs_f64()
        ));
        emit(&screen);
        first.get_or_insert(r);
        let until = Instant::now() + every;
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Ok(ExitCode::from(130));
            }
            std::thread::sleep(Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())));
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(ExitCode::from(130));
        }
    }
}
