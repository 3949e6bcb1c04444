use super::{command_line, interrupt_flag, parse_target, MeasureArgs, Progress};
use clap::{Args, ValueEnum};
use pcibench::access::{IoMode, Via};
use pcibench::bench::clock::MONOTONIC;
use pcibench::bench::pio::{self, MapMode, PioPlan, PioTarget};
use pcibench::bench::sampler::{Progress as _, Sampling};
use pcibench::dma::Direction;
use pcibench::host::Host;
use pcibench::mmio::Width;
use pcibench::report;
use pcibench::session::Session;
use pcibench::target::Target;
use pcibench::units::{parse_size, parse_size_list};
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
pub enum MapArg {
    Uc,
    Wc,
    WcFlush,
    All,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DirArg {
    H2c,
    C2h,
    Both,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum IoArg {
    Mmap,
    Syscall,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ViaArg {
    Sysfs,
    Vfio,
    VfioNoiommu,
}

impl ViaArg {
    pub fn via(self) -> Via {
        match self {
            ViaArg::Sysfs => Via::Sysfs,
            ViaArg::Vfio => Via::Vfio,
            ViaArg::VfioNoiommu => Via::VfioNoiommu,
        }
    }
}

#[derive(Args)]
pub struct PioArgs {
    /// The device: DDDD:BB:DD.F, BB:DD.F or sim.
    #[arg(value_parser = parse_target)]
    device: Target,
    /// BAR index to measure (repeatable; default: every memory BAR that is not a DMA register block).
    #[arg(long = "bar", value_name = "N")]
    bars: Vec<u8>,
    /// Access path (default: sysfs when no driver is bound, vfio when bound to vfio-pci).
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
    /// Memory type of the mapping; wc-flush adds a read after the writes inside the timed part.
    #[arg(long, value_enum, default_value = "all")]
    map: MapArg,
    #[arg(long, value_enum, default_value = "both")]
    dir: DirArg,
    /// Copy routine: 8 16 32 64 128 256 512 nt128 nt256 nt512 movdir64b memcpy, or all (repeatable).
    #[arg(long = "width", value_name = "WIDTH", default_value = "64")]
    widths: Vec<String>,
    /// Transfer size(s): 4K, 1M, 0x1000, or a power-of-two range such as 8..1M (default: the whole BAR).
    #[arg(long = "size", value_name = "BYTES")]
    sizes: Vec<String>,
    /// Bytes to move per configuration (default 64M, as fpga_sio).
    #[arg(long, default_value = "64M")]
    total: String,
    /// Offset into the BAR.
    #[arg(long, default_value = "0")]
    offset: String,
    /// mmap (default) or one pread/pwrite per access (VFIO only: seed 002's comparison).
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

pub fn run(host: &Host, a: PioArgs) -> anyhow::Result<ExitCode> {
    let session = Session::open(host, &a.device, a.via.map(ViaArg::via))?;
    let (info, dev) = (&session.info, &session.dev);
    let mut widths = Vec::new();
    let mut strict_width = true;
    for w in &a.widths {
        if w == "all" {
            widths.extend(Width::ALL);
            strict_width = false;
        } else {
            widths.push(w.parse::<Width>()?);
        }
    }
    let maps = match a.map {
        MapArg::Uc => vec![MapMode::Uc],
        MapArg::Wc => vec![MapMode::Wc],
        MapArg::WcFlush => vec![MapMode::WcFlush],
        MapArg::All => MapMode::ALL.to_vec(),
    };
    let mut sizes = Vec::new();
    for s in &a.sizes {
        sizes.extend(parse_size_list(s)?);
    }
    let bars = session.pio_bars(&a.bars)?;
    let plan = PioPlan {
        bars,
        maps,
        dirs: match a.dir {
            DirArg::H2c => vec![Direction::H2c],
            DirArg::C2h => vec![Direction::C2h],
            DirArg::Both => vec![Direction::H2c, Direction::C2h],
        },
        widths,
        sizes,
        total: parse_size(&a.total)?,
        offset: parse_size(&a.offset)?,
        io: match a.io {
            IoArg::Mmap => IoMode::Mmap,
            IoArg::Syscall => IoMode::Syscall,
        },
        allow_write: session.may_write(a.allow_write),
        strict_map: !matches!(a.map, MapArg::All),
        strict_width,
    };
    let m = session.measuring(a.common.placement(), &command_line())?;
    let stop = interrupt_flag();
    let mut progress = Progress::new();
    progress.begin("pio", plan.planned_bytes());
    let mut sampling = Sampling::new(&MONOTONIC, &stop, &mut progress, m.health.as_ref());
    let t = PioTarget {
        dev: dev.as_ref(),
        device: &info.address,
        simulated: info.simulated,
        link: m.link,
        bar_sizes: session.bar_sizes(),
    };
    let mut result = pio::run(&t, &plan, &mut sampling)?;
    progress.end();
    m.finish(&mut result);
    let exporter = report::exporter(a.common.format(), report::Options { latency: a.latency });
    print!("{}", exporter.report(&result)?);
    if result.mismatched() {
        eprintln!("pcibench: data did not verify: see the MISMATCH rows (offset, expected, found)");
        return Ok(ExitCode::from(1));
    }
    if result.interrupted {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
