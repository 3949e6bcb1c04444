//! The `pcibench` command: argument parsing and dispatch only; all logic lives in the library.

mod cmd;
#[cfg(test)]
mod docs_parse;

use clap::{CommandFactory, Parser, Subcommand};
use pcibench::host::Host;
use pcibench::outcome::Outcome;
use pcibench::Error;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pcibench",
    version,
    about = "Find a PCIe card, reach its BARs and DMA engine, and measure PIO and DMA with verified data",
    after_help = after_help()
)]
struct Cli {
    /// Use this directory in place of / for /sys, /proc, /dev and /boot (fixtures, tests; also
    /// $PCIBENCH_SYSROOT, where empty means /).
    #[arg(long, global = true, hide = true)]
    sysroot: Option<PathBuf>,
    /// Print on stderr what pcibench did with its privileges (each capability drop, with the
    /// process's /proc/self/status lines right after it).
    #[arg(long, global = true, hide = true)]
    debug: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One line per device, like lspci (the simulated card `sim` first).
    List(cmd::list::ListArgs),
    /// Ids, names, BARs, link, payload sizes, AER and the link model's limits for one device.
    Info(cmd::info::InfoArgs),
    /// PIO throughput through BAR mappings by mapping, access width and size, verified.
    Pio(cmd::pio::PioArgs),
    /// Read one register of a BAR.
    Peek(cmd::peek::PeekArgs),
    /// Write one register of a BAR (needs --allow-write except on sim).
    Poke(cmd::peek::PokeArgs),
    #[command(about = format!(
        "DMA throughput of a card's engine both ways, verified ({}; the simulated cards)",
        pcibench::dma::engines::names()
    ))]
    Dma(cmd::dma::DmaArgs),
    /// The card memory a DMA engine reaches, all of it: filled with each address, read back, checked, and the aliasing pass.
    Memtest(cmd::memtest::MemtestArgs),
    /// Why a device can't be reached, each check with its evidence and the exact fix.
    Doctor(cmd::doctor::DoctorArgs),
    /// Prepare a device for an access path: --vfio, --sysfs-user USER, or --release.
    Setup(cmd::setup::SetupArgs),
    /// Reset a device by a way the kernel offers (VFIO, sysfs reset, a bus reset of its port); --list shows them.
    Reset(cmd::reset::ResetArgs),
    /// A link's registers, its target speed and a retrain (--speed genN, --retrain), AER before and after.
    Link(cmd::link::LinkArgs),
    /// The suite on one device: info, then the measurements its access paths allow (default: sim).
    Run(cmd::run::RunArgs),
    /// Single-access latency: MMIO reads per width, DMA by polling and by MSI, reads under DMA load.
    Latency(cmd::latency::LatencyArgs),
    #[command(about = format!(
        "CPU access to DMA buffers ({}): mmap and file, sync and O_SYNC, verified",
        pcibench::text::or_list(pcibench::dma::cpu::KINDS)
    ))]
    Buffers(cmd::buffers::BuffersArgs),
    /// Draw saved runs (--save) as one SVG: bandwidth by size with the link model's ceiling, latency CDFs.
    Plot(cmd::plot::PlotArgs),
    /// Compare two saved runs: what differs in their context, then B/A per row, changes beyond the noise flagged.
    Compare(cmd::compare::CompareArgs),
    /// Every PCIe link against what both ends support, AER errors, status bits and what changed since the last run; read-only.
    Health(cmd::health::HealthArgs),
    /// Render a saved run (--save) for a metrics collector: throughput and latency per configuration.
    Export(cmd::export::ExportArgs),
    /// Serve a simulated card as a vfio-user server on a UNIX socket (device vfio-user:SOCKET).
    Serve(cmd::serve::ServeArgs),
    /// Print a shell completion script (bash, zsh, fish): a packaging step.
    #[command(hide = true)]
    Completions(cmd::dist::CompletionsArgs),
    /// Write a man page per command into DIR: a packaging step.
    #[command(hide = true)]
    Man(cmd::dist::ManArgs),
}

/// The top-level help's closing text; the simulated cards named from their registry.
fn after_help() -> String {
    format!(
        "Devices: DDDD:BB:DD.F or BB:DD.F as lspci prints them, a simulated card ({}), or a
device model served over vfio-user: vfio-user:/path/to/socket (pcibench serve sim --socket PATH serves one).
Sizes: 4K, 1M, 0x1000; 8..1M is every power of two in between; 64,4K a list. MB = 10^6 bytes.

Exit status: 0 everything asked for was measured and verified; 1 an error (the message says what to do);
2 bad usage; 3 data did not verify; 4 nothing could be measured (every configuration skipped, or nothing
to measure); 130 interrupted (SIGINT/SIGTERM/SIGHUP: the rows measured so far are printed; another
signal, or the same one a second later, exits at once); 141 the reader of stdout went away. doctor: 0 ready,
1 a warning, 2 a failure. compare: 5 a row got slower beyond the noise of the two runs. health: 0 healthy,
1 warnings, 2 failures, 3 could not check (bad usage or an error).

Examples:
  pcibench run                      the suite on the simulated card
  pcibench list                     every device, like lspci
  pcibench doctor 15:00.0           why a device can't be reached, and the fix
  pcibench pio sim --save a.json    keep a run (with its context) for plot and compare
  pcibench health                   every PCIe link, its AER errors and what changed",
        pcibench::sim::SimId::names()
    )
}

fn main() -> ExitCode {
    // First of all, before the command line is read or any file touched: a set-id copy is
    // refused (it would write and follow paths as its owner), and a capability copy becomes
    // untraceable and dumps no core before it opens anything (os::privilege::lock_down).
    let privilege = pcibench::os::privilege::at_start();
    if let Err(e) =
        pcibench::os::privilege::refuse_set_id(privilege).and_then(|()| pcibench::os::privilege::lock_down(privilege))
    {
        eprintln!("pcibench: {}", pcibench::text::one_line(&e.to_string()));
        return ExitCode::from(Outcome::of_error(&e).code());
    }
    // A card that vanishes under a BAR mapping (another process cleared its Memory Space Enable
    // or reset it) reads all-ones and is named by the run, instead of SIGBUS ending it (exit 135).
    if let Err(e) = pcibench::access::guard::install() {
        eprintln!("pcibench: warning: cannot install the MMIO fault guard ({e}): a card that vanishes mid-run ends pcibench with SIGBUS");
    }
    // A bug is one line too; unwinding then stops any engine and restores Bus Master on its way up.
    std::panic::set_hook(Box::new(|p| {
        let what = p
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = p.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!(
            "pcibench: internal error: {what}{at}: this is a bug in pcibench; please report it with the command line"
        );
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                e.exit();
            }
            eprintln!("pcibench: {}", clap_one_line(&e.to_string()));
            return ExitCode::from(if subcommand().as_deref() == Some("health") { UNKNOWN } else { 2 });
        }
    };
    // Before anything reads a file: a process with more privilege than its caller takes no
    // paths from the caller (`--sysroot`, PCIBENCH_SYSROOT).
    if let Err(e) = pcibench::os::privilege::refuse_steering(privilege, cli.sysroot.is_some(), std::env::vars_os()) {
        eprintln!("pcibench: {e}");
        return ExitCode::from(Outcome::of_error(&e).code());
    }
    let sysroot = match &cli.sysroot {
        Some(r) => Some(("--sysroot", r.clone())),
        None => std::env::var_os(pcibench::host::SYSROOT_ENV).map(|r| ("$PCIBENCH_SYSROOT", PathBuf::from(r))),
    };
    if let Some((given, root)) = &sysroot {
        let sudo = std::env::var_os("SUDO_UID");
        if let Err(e) = pcibench::os::privilege::refuse_sysroot_for_root(privilege, given, root, sudo.as_deref()) {
            eprintln!("pcibench: {e}");
            return ExitCode::from(Outcome::of_error(&e).code());
        }
    }
    if opens_no_device(&cli.command) {
        // Nothing this command does needs a capability: give them all up before it reads a file.
        if let Err(e) = pcibench::os::privilege::keep_only(0, "starting a command that opens no device") {
            eprintln!("pcibench: {e}");
            return ExitCode::from(Outcome::of_error(&e).code());
        }
    }
    if matches!(cli.command, Command::Serve(_)) {
        // serve's card is host memory, and its clients are other processes: nothing it does needs
        // a capability, and no client may reach one through it (issue 51 S7). Before any thread.
        if let Err(e) = pcibench::os::privilege::keep_only(0, "starting serve (a simulated card needs no privilege)") {
            eprintln!("pcibench: {e}");
            return ExitCode::from(Outcome::of_error(&e).code());
        }
    }
    if matches!(
        cli.command,
        Command::Pio(_)
            | Command::Dma(_)
            | Command::Latency(_)
            | Command::Buffers(_)
            | Command::Run(_)
            | Command::Memtest(_)
    ) {
        // A measuring command stops on a signal with what it has measured, from the start.
        cmd::interrupt_flag();
    }
    let debug = cli.debug;
    // health's 1 and 2 say what it found: it could not check is 3 (cmd::health's help).
    let health = matches!(cli.command, Command::Health(_));
    let host = match &cli.sysroot {
        Some(r) if !r.as_os_str().is_empty() => Host::with_root(r),
        _ => Host::from_env(),
    };
    // Read-only commands walk no /proc (issue 55): what uses a device is doctor's and setup's question.
    let host = if matches!(cli.command, Command::List(_) | Command::Info(_) | Command::Health(_)) {
        host.without_process_walk()
    } else {
        host
    };
    let result = match cli.command {
        Command::List(a) => cmd::list::run(&host, a),
        Command::Info(a) => cmd::info::run(&host, a),
        Command::Run(a) => cmd::run::run(&host, a),
        Command::Buffers(a) => cmd::buffers::run(&host, a),
        Command::Latency(a) => cmd::latency::run(&host, a),
        Command::Pio(a) => cmd::pio::run(&host, a),
        Command::Doctor(a) => cmd::doctor::run(&host, a),
        Command::Setup(a) => cmd::setup::run(&host, a),
        Command::Reset(a) => cmd::reset::run(&host, a),
        Command::Link(a) => cmd::link::run(&host, a),
        Command::Dma(a) => cmd::dma::run(&host, a),
        Command::Memtest(a) => cmd::memtest::run(&host, a),
        Command::Peek(a) => cmd::peek::peek(&host, a),
        Command::Poke(a) => cmd::peek::poke(&host, a),
        Command::Plot(a) => cmd::plot::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Health(a) => cmd::health::run(&host, a),
        Command::Export(a) => cmd::export::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Completions(a) => cmd::dist::completions(Cli::command(), a),
        Command::Man(a) => cmd::dist::man(Cli::command(), a),
    };
    if debug {
        for d in pcibench::os::privilege::drops() {
            eprintln!("pcibench: debug: {d}");
        }
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pcibench: {}", one_line(&e));
            let outcome = e.downcast_ref::<Error>().map_or(Outcome::Failed, Outcome::of_error);
            ExitCode::from(if health { UNKNOWN } else { outcome.code() })
        }
    }
}

/// Commands that never open a device, map a BAR or take DMA memory: they run with no capability.
fn opens_no_device(c: &Command) -> bool {
    matches!(
        c,
        Command::List(_)
            | Command::Plot(_)
            | Command::Compare(_)
            | Command::Health(_)
            | Command::Export(_)
            | Command::Completions(_)
            | Command::Man(_)
    )
}

/// health's exit status when it could not check (bad usage, an error).
const UNKNOWN: u8 = pcibench::health::EXIT_UNKNOWN;

/// The subcommand named on the command line, past the global options (`--sysroot DIR`).
fn subcommand() -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sysroot" => {
                args.next();
            }
            s if s.starts_with('-') => {}
            s => return Some(s.to_string()),
        }
    }
    None
}

/// clap's whole message on one line: what is wrong, the argument's name, the allowed values and
/// any "did you mean", without the usage block and the `--help` tip (which the line points to).
fn clap_one_line(text: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information") {
            continue;
        }
        if line.starts_with("pcibench ") && parts.len() == 1 {
            continue; // the usage line's continuation
        }
        let line = line.trim_start_matches("error: ").to_string();
        // A list after "...:" (the missing arguments) reads as one sentence.
        match parts.last_mut() {
            Some(last) if last.ends_with(':') => last.push_str(&format!(" {line}")),
            Some(last) if last.contains(": <") && line.starts_with('<') => last.push_str(&format!(", {line}")),
            _ => parts.push(line),
        }
    }
    // Only a subcommand that exists has its own help (`pcibench bogus --help` would fail too).
    let help = match subcommand().filter(|a| <Cli as clap::CommandFactory>::command().find_subcommand(a).is_some()) {
        Some(c) => format!("pcibench {c} --help"),
        None => "pcibench --help".to_string(),
    };
    pcibench::text::one_line(&format!("{} (see {help})", parts.join("; ")))
}

/// Errors are one line: the library's message, plus anyhow context joined with ": ".
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    // Echoed values are clipped and control characters escaped (`text::one_line`).
    pcibench::text::one_line(&parts.join(": "))
}
