//! The `pcibench` command: argument parsing and dispatch only; all logic lives in the library.

mod cmd;

use clap::{Parser, Subcommand};
use pcibench::host::Host;
use pcibench::Error;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pcibench",
    version,
    about = "Find a PCIe card, reach its BARs and DMA engine, and measure PIO and DMA with verified data"
)]
struct Cli {
    /// Use this directory in place of / for /sys, /proc, /dev and /boot (fixtures, tests).
    #[arg(long, global = true, hide = true, env = "PCIBENCH_SYSROOT")]
    sysroot: Option<PathBuf>,
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
    /// DMA throughput of a card's engine both ways, verified (edu, xdma, sim).
    Dma(cmd::dma::DmaArgs),
    /// Why a device can't be reached, each check with its evidence and the exact fix.
    Doctor(cmd::doctor::DoctorArgs),
    /// Prepare a device for an access path: --vfio, --sysfs-user USER, or --release.
    Setup(cmd::setup::SetupArgs),
    /// The suite on one device: info, then the measurements its access paths allow (default: sim).
    Run(cmd::run::RunArgs),
    /// CPU access to DMA buffers (heap, hugepages, u-dma-buf, /dev/udmabuf, a device's): mmap and file, sync and O_SYNC, verified.
    Buffers(cmd::buffers::BuffersArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                e.exit();
            }
            // One line: clap's message without its usage block and `--help` tip.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("pcibench: {} (see pcibench --help)", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let host = match &cli.sysroot {
        Some(r) if !r.as_os_str().is_empty() => Host::with_root(r),
        _ => Host::with_root("/"),
    };
    let result = match cli.command {
        Command::List(a) => cmd::list::run(&host, a),
        Command::Info(a) => cmd::info::run(&host, a),
        Command::Run(a) => cmd::run::run(&host, a),
        Command::Buffers(a) => cmd::buffers::run(&host, a),
        Command::Pio(a) => cmd::pio::run(&host, a),
        Command::Doctor(a) => cmd::doctor::run(&host, a),
        Command::Setup(a) => cmd::setup::run(&host, a),
        Command::Dma(a) => cmd::dma::run(&host, a),
        Command::Peek(a) => cmd::peek::peek(&host, a),
        Command::Poke(a) => cmd::peek::poke(&host, a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pcibench: {}", one_line(&e));
            let usage = e.downcast_ref::<Error>().is_some_and(|e| matches!(e, Error::Usage(_)));
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
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
    parts.join(": ").replace('\n', " ")
}
