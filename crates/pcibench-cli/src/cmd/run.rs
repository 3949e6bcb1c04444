use super::{command_line, interrupt_flag, parse_target, MeasureArgs, Measured, Progress};
use clap::Args;
use pcibench::bench::sample::clock::MonotonicClock;
use pcibench::host::Host;
use pcibench::report;
use pcibench::suite::{self, SuiteOptions};
use pcibench::target::Target;
use pcibench::units::parse_size;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench run                                   the suite on the simulated card
  pcibench run sim-qdma --format seed
  pcibench run 15:00.0 --allow-write --allow-dma --cpu 2 --json")]
pub struct RunArgs {
    /// The device (default: the simulated card `sim`).
    #[arg(value_parser = parse_target, default_value = "sim")]
    device: Target,
    /// Allow PIO writes (host-to-card) on a real device; without it PIO only reads.
    #[arg(long)]
    allow_write: bool,
    /// Allow the DMA suite on a real device with an engine pcibench drives.
    #[arg(long)]
    allow_dma: bool,
    /// Bytes per PIO/DMA configuration (default: 64M on sim, 4M on a real device).
    #[arg(long)]
    total: Option<String>,
    #[command(flatten)]
    common: MeasureArgs,
}

pub fn run(host: &Host, a: RunArgs) -> anyhow::Result<ExitCode> {
    let opts = SuiteOptions {
        allow_write: a.allow_write,
        allow_dma: a.allow_dma,
        total: a.total.as_deref().map(parse_size).transpose()?,
        placement: a.common.placement(),
        args: command_line(),
    };
    let stop = interrupt_flag();
    let mut progress = Progress::new();
    let result = suite::run(host, &a.device, &opts, &MonotonicClock, &stop, &mut progress)?;
    for w in &result.info.warnings {
        eprintln!("warning: {w}");
    }
    a.common.deliver(host, Some(&result.info), Measured::Suite(&result), report::Options::default())
}
