use super::{parse_target, MeasureArgs, TraceArgs};
use clap::Args;
use pcibench::device::Target;
use pcibench::host::Host;
use pcibench::measure::{Request, RunRequest};
use pcibench::report;
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
    #[command(flatten)]
    trace: TraceArgs,
}

/// The request the flags ask for.
fn request(a: &RunArgs) -> anyhow::Result<Request> {
    Ok(Request::Run(RunRequest {
        device: a.device,
        allow_write: a.allow_write,
        allow_dma: a.allow_dma,
        total: a.total.as_deref().map(parse_size).transpose()?,
        common: a.common.common()?,
    }))
}

pub fn run(host: &Host, a: RunArgs) -> anyhow::Result<ExitCode> {
    let m = super::measure(host, &request(&a)?, Some(&a.trace))?;
    a.common.deliver(host, &m, report::Options::default())
}
