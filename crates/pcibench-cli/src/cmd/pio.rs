use super::{parse_target, MeasureArgs};
use clap::{Args, ValueEnum};
use pcibench::access::{IoMode, Via};
use pcibench::device::Target;
use pcibench::direction::Direction;
use pcibench::host::Host;
use pcibench::measure::{MapMode, PioRequest, Request, Widths};
use pcibench::mmio::Width;
use pcibench::report;
use pcibench::units::{parse_size, parse_sizes};
use std::process::ExitCode;

/// Bytes per configuration at most when --total is not given (fpga_sio's PCIe test programs move
/// 64 MiB); rows also stop by time then (`measure::PioRequest::total_by_time`).
const DEFAULT_TOTAL: u64 = 64 << 20;

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum MapArg {
    /// Uncached-minus (sysfs resourceN, every VFIO mapping).
    Uc,
    /// Write-combining (sysfs resourceN_wc, prefetchable BARs only).
    Wc,
    /// Write-combining, the timed part ending with a read that drains the posted writes.
    WcFlush,
    /// Every mapping the path offers; the others become skipped rows with the reason.
    All,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DirArg {
    /// Host to card: the CPU writes the BAR.
    H2c,
    /// Card to host: the CPU reads the BAR.
    C2h,
    Both,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum IoArg {
    /// Loads and stores through a mapping of the BAR.
    Mmap,
    /// One pread/pwrite per access on the VFIO device (the slow path some tools use).
    Syscall,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ViaArg {
    /// The sysfs resource files (no driver bound).
    Sysfs,
    /// VFIO with an IOMMU (bound to vfio-pci).
    Vfio,
    /// VFIO without an IOMMU (bound to vfio-pci in no-IOMMU mode).
    VfioNoiommu,
    /// A device model in another process over vfio-user (chosen for vfio-user:SOCKET anyway).
    VfioUser,
}

impl ViaArg {
    pub fn via(self) -> Via {
        match self {
            ViaArg::Sysfs => Via::Sysfs,
            ViaArg::Vfio => Via::Vfio,
            ViaArg::VfioNoiommu => Via::VfioNoiommu,
            ViaArg::VfioUser => Via::VfioUser,
        }
    }
}

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench pio sim                                          every mapping, both directions, whole BARs (simulated card)
  pcibench pio 15:00.0 --bar 0 --map wc --width 512 --allow-write
  pcibench pio 15:00.0 --bar 2 --map uc --dir c2h --size 8..1K --total 256K     read latency by size, reads only
  pcibench pio 15:00.0 --via vfio --io syscall --width 64 --allow-write          one pread/pwrite per access")]
pub struct PioArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    device: Target,
    /// BAR index to measure (repeatable; default: every memory BAR that is not a DMA register block).
    #[arg(long = "bar", value_name = "N")]
    bars: Vec<u8>,
    /// Access path (default: sysfs when no driver is bound, vfio when bound to vfio-pci).
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
    /// Memory type of the mapping (repeatable; default all): uc, wc, or wc-flush (a read after the writes, inside the timed part).
    #[arg(long = "map", value_enum, value_name = "MAP")]
    maps: Vec<MapArg>,
    /// Direction: h2c (the CPU writes, needs --allow-write on a real device), c2h (reads), or both.
    #[arg(long, value_enum, default_value = "both")]
    dir: DirArg,
    #[arg(long = "width", value_name = "WIDTH", default_value = "64",
        help = format!("Copy routine: {}, or all (repeatable)", super::help::widths(&pcibench::mmio::Width::ALL)))]
    widths: Vec<String>,
    /// Transfer size(s): 4K, a list 64,4K, or a power-of-two range such as 8..1M (default: the whole BAR).
    #[arg(long = "size", value_name = "BYTES")]
    sizes: Vec<String>,
    /// Bytes to move per configuration. Default: what moves in half a second of samples (at least
    /// 10), at most 64M (as the fpga_sio PCIe test programs move); a run estimated past 10 s says
    /// so first.
    #[arg(long)]
    total: Option<String>,
    /// Offset into the BAR where transfers start.
    #[arg(long, default_value = "0")]
    offset: String,
    /// mmap (default), or syscall: one pread/pwrite per 8-64-bit access (VFIO only).
    #[arg(long, value_enum, default_value = "mmap")]
    io: IoArg,
    /// Allow host-to-card writes to this device's BARs (not needed for sim).
    #[arg(long)]
    allow_write: bool,
    #[command(flatten)]
    common: MeasureArgs,
    /// Also print per-transfer latency percentiles.
    #[arg(long)]
    latency: bool,
}

/// The request the flags ask for.
fn request(a: &PioArgs) -> anyhow::Result<Request> {
    let widths = if a.widths.iter().any(|w| w == "all") {
        Widths::All
    } else {
        Widths::These(a.widths.iter().map(|w| w.parse::<Width>()).collect::<Result<_, _>>()?)
    };
    let mut maps = Vec::new();
    if !a.maps.contains(&MapArg::All) {
        for m in &a.maps {
            let mode = match m {
                MapArg::Uc => MapMode::Uc,
                MapArg::Wc => MapMode::Wc,
                MapArg::WcFlush | MapArg::All => MapMode::WcFlush,
            };
            if !maps.contains(&mode) {
                maps.push(mode);
            }
        }
    }
    Ok(Request::Pio(PioRequest {
        device: a.device,
        via: a.via.map(ViaArg::via),
        bars: (!a.bars.is_empty()).then(|| a.bars.clone()),
        maps,
        dirs: match a.dir {
            DirArg::H2c => vec![Direction::H2c],
            DirArg::C2h => vec![Direction::C2h],
            DirArg::Both => vec![Direction::H2c, Direction::C2h],
        },
        widths,
        sizes: parse_sizes(&a.sizes)?,
        total: a.total.as_deref().map_or(Ok(DEFAULT_TOTAL), parse_size)?,
        total_by_time: a.total.is_none(),
        row_budget_ms: None,
        offset: parse_size(&a.offset)?,
        io: match a.io {
            IoArg::Mmap => IoMode::Mmap,
            IoArg::Syscall => IoMode::Syscall,
        },
        allow_write: a.allow_write,
        common: a.common.common()?,
    }))
}

pub fn run(host: &Host, a: PioArgs) -> anyhow::Result<ExitCode> {
    let m = super::measure(host, &request(&a)?, None)?;
    a.common.deliver(host, &m, report::Options { latency: a.latency })
}
