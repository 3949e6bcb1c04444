use super::{command_line, interrupt_flag, parse_target, MeasureArgs, Measured, Progress};
use clap::Args;
use pcibench::bench::buffers::{self, BufferPlan};
use pcibench::bench::sample::clock::MONOTONIC;
use pcibench::bench::sample::sampler::{Progress as _, Sampling};
use pcibench::dma::cpu::{self, CpuBuffer, Kind};
use pcibench::host::Host;
use pcibench::mmio::Width;
use pcibench::report;
use pcibench::session::Session;
use pcibench::target::Target;
use pcibench::units::parse_size;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench buffers                                   every buffer this host has (heap, hugepages, /dev/udmabuf, u-dma-bufs)
  pcibench buffers --buffer u-dma-buf:udmabuf0 --format seed    the u-dma-buf driver's own test, line for line
  pcibench buffers --buffer udmabuf --size 4M --width 64 --width memcpy
  pcibench buffers --device 0000:03:00.0 --size 2M   the DMA buffers pcibench would give that device (VFIO-mapped or physical)")]
pub struct BuffersArgs {
    /// Buffer kind: heap, hugepage, udmabuf (Linux's /dev/udmabuf), u-dma-buf:NAME, or device (repeatable; default: every kind this host has).
    #[arg(long = "buffer", value_name = "KIND", value_parser = |s: &str| s.parse::<Kind>().map_err(|e| e.to_string()))]
    kinds: Vec<Kind>,
    /// Also measure the DMA buffers of this device (DDDD:BB:DD.F, or a simulated card such as sim).
    #[arg(long, value_parser = parse_target)]
    device: Option<Target>,
    /// Bytes per access (default: the whole u-dma-buf, 16M for the others).
    #[arg(long)]
    size: Option<String>,
    /// Bytes to move per configuration (default: 16 accesses of --size, enough samples to show the spread).
    #[arg(long)]
    total: Option<String>,
    /// Copy routine for mmap access: 8 16 32 64 128 256 512 nt128 nt256 nt512 memcpy (repeatable; default memcpy).
    #[arg(long = "width", value_name = "WIDTH", default_value = "memcpy")]
    widths: Vec<String>,
    #[command(flatten)]
    common: MeasureArgs,
}

pub fn run(host: &Host, a: BuffersArgs) -> anyhow::Result<ExitCode> {
    let size = a.size.as_deref().map(parse_size).transpose()?;
    let mut widths = Vec::new();
    for w in &a.widths {
        widths.push(w.parse::<Width>()?);
    }
    // Kinds named with --buffer must open; of the discovered ones, those this host cannot give
    // are reported as skipped.
    let named = !a.kinds.is_empty();
    let kinds = if named {
        a.kinds.clone()
    } else {
        let mut k = cpu::discover(host);
        if a.device.is_some() {
            k.push(Kind::Device);
        }
        k
    };
    let session = a.device.as_ref().map(|t| Session::open(host, t, None)).transpose()?;
    let mut bufs: Vec<Box<dyn CpuBuffer>> = Vec::new();
    let mut unavailable = Vec::new();
    for k in &kinds {
        let opened = match (k, &session) {
            (Kind::Device, Some(s)) => s.cpu_buffer(size.unwrap_or(16 << 20)),
            _ => cpu::open(host, k, size),
        };
        match opened {
            Ok(b) => bufs.push(b),
            Err(e) if !named => unavailable.push((k.label(), e.to_string())),
            Err(e) => return Err(e.into()),
        }
    }
    let context = match &session {
        Some(s) => s.place(a.common.placement(), &command_line())?,
        None => pcibench::bench::context::place(host, a.common.placement(), None, &command_line())?,
    };
    let largest = bufs.iter().map(|b| size.unwrap_or(b.len() as u64)).max().unwrap_or(16 << 20);
    let total = match &a.total {
        Some(t) => parse_size(t)?,
        None => 16 * largest,
    };
    let plan = BufferPlan { widths, size, total };
    let stop = interrupt_flag();
    let mut progress = Progress::new();
    progress.begin("buffers", plan.total.saturating_mul(2 * bufs.len() as u64));
    let mut sampling = Sampling::new(&MONOTONIC, &stop, &mut progress, None);
    let mut result = buffers::run(&bufs, &unavailable, &plan, &mut sampling)?;
    progress.end();
    result.context = Some(context);
    let device = session.as_ref().map(|s| &s.info);
    a.common.deliver(host, device, Measured::Report(&result), report::Options::default())
}
