use super::{parse_target, MeasureArgs};
use clap::Args;
use pcibench::device::Target;
use pcibench::host::Host;
use pcibench::measure::{BuffersRequest, Kind, Request};
use pcibench::mmio::Width;
use pcibench::report;
use pcibench::units::parse_size;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench buffers                                   every buffer this host has (heap, hugepages, /dev/udmabuf, u-dma-bufs)
  pcibench buffers --buffer u-dma-buf:udmabuf0 --format seed    the u-dma-buf driver's own test, line for line
  pcibench buffers --buffer udmabuf --size 4M --width 64 --width memcpy
  pcibench buffers --device 0000:03:00.0 --size 2M   the DMA buffers pcibench would give that device (VFIO-mapped or physical)")]
pub struct BuffersArgs {
    #[arg(long = "buffer", value_name = "KIND", value_parser = |s: &str| s.parse::<Kind>().map_err(|e| e.to_string()),
        help = format!("Buffer kind: {} (udmabuf: Linux's /dev/udmabuf; device: the one --device names; repeatable; default: every kind this host has)",
            pcibench::text::or_list(pcibench::dma::cpu::KINDS)))]
    kinds: Vec<Kind>,
    /// Also measure the DMA buffers of this device (DDDD:BB:DD.F, or a simulated card such as sim).
    #[arg(long, value_parser = parse_target)]
    device: Option<Target>,
    /// Bytes per access (default: the whole u-dma-buf, 16M for the others).
    #[arg(long)]
    size: Option<String>,
    /// Bytes to move per configuration. Default: what moves in half a second of samples (at least
    /// 10), at most 16 accesses of --size; a run estimated past 10 s says so first.
    #[arg(long)]
    total: Option<String>,
    #[arg(long = "width", value_name = "WIDTH", default_value = "memcpy",
        help = format!("Copy routine for mmap access: {} (repeatable; default memcpy)", super::help::widths(&pcibench::mmio::Width::ALL)))]
    widths: Vec<String>,
    #[command(flatten)]
    common: MeasureArgs,
}

/// The request the flags ask for.
fn request(a: &BuffersArgs) -> anyhow::Result<Request> {
    Ok(Request::Buffers(BuffersRequest {
        device: a.device,
        kinds: a.kinds.clone(),
        size: a.size.as_deref().map(parse_size).transpose()?,
        total: a.total.as_deref().map(parse_size).transpose()?,
        widths: a.widths.iter().map(|w| w.parse::<Width>()).collect::<Result<_, _>>()?,
        common: a.common.common()?,
    }))
}

pub fn run(host: &Host, a: BuffersArgs) -> anyhow::Result<ExitCode> {
    let m = super::measure(host, &request(&a)?, None)?;
    a.common.deliver(host, &m, report::Options::default())
}
