use super::{command_line, interrupt_flag, parse_target, MeasureArgs, Progress};
use clap::{Args, ValueEnum};
use pcibench::access::Via;
use pcibench::bench::clock::MonotonicClock;
use pcibench::bench::dma::{self, DmaPlan, DmaSetup};
use pcibench::bench::result::Report;
use pcibench::bench::sampler::{Progress as _, Sampling};
use pcibench::bench::timer::TimerOverhead;
use pcibench::dma::engines::EngineOptions;
use pcibench::dma::{BufferSource, Direction};
use pcibench::host::Host;
use pcibench::pci::DeviceInfo;
use pcibench::report;
use pcibench::session::{DmaRequest, DmaRig, Session};
use pcibench::target::Target;
use pcibench::units::{parse_size, parse_size_list};
use std::process::ExitCode;
use std::time::Duration;

/// `--engine`: a registered engine name, or `sim` for a simulated card's own engine.
fn parse_engine(s: &str) -> Result<String, String> {
    if s == "sim" || pcibench::dma::engines::by_name(s).is_some() {
        Ok(s.to_string())
    } else {
        Err(format!("unknown engine '{s}': use one of {}, or sim", pcibench::dma::engines::names()))
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DmaVia {
    Vfio,
    VfioNoiommu,
}

#[derive(Args, Clone)]
pub struct DmaArgs {
    #[arg(value_parser = parse_target)]
    pub device: Target,
    /// DMA engine driver (edu, xdma, or sim for a simulated card's own); default: the one found on the device.
    #[arg(long, value_parser = parse_engine)]
    pub engine: Option<String>,
    /// VFIO with an IOMMU (IOVA) or without one (physical addresses); default: what the device's group is.
    #[arg(long, value_enum)]
    pub via: Option<DmaVia>,
    /// Host buffer: heap, hugepage (default), or u-dma-buf:NAME.
    #[arg(long)]
    pub buffer: Option<String>,
    #[arg(long, value_enum, default_value = "both")]
    pub dir: crate::cmd::pio::DirArg,
    /// Transfer size(s) (default: the engine's whole card memory, as time_dma_blkram).
    #[arg(long = "size", value_name = "BYTES")]
    pub sizes: Vec<String>,
    /// Bytes per direction and size (default 64M; edu: 4 transfers, it takes ~100 ms each).
    #[arg(long)]
    pub total: Option<String>,
    /// Card (AXI) address of the memory window (xdma), or edu offset/address.
    #[arg(long)]
    pub card_addr: Option<String>,
    /// Bytes of card memory in the window (xdma; default 0x128000, the sim card's).
    #[arg(long)]
    pub card_size: Option<String>,
    /// XDMA channel (0-3).
    #[arg(long)]
    pub channel: Option<u8>,
    /// Address bits the device can drive (default 64; edu: 28, QEMU's default dma_mask).
    #[arg(long)]
    pub dma_bits: Option<u32>,
    /// Per-transfer timeout in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
    /// Consent to start DMA on this device (not needed for sim).
    #[arg(long)]
    pub allow_dma: bool,
    #[command(flatten)]
    pub common: MeasureArgs,
}

fn plan(a: &DmaArgs, rig: &DmaRig) -> anyhow::Result<DmaPlan> {
    let mut sizes = Vec::new();
    for s in &a.sizes {
        sizes.extend(parse_size_list(s)?);
    }
    let first = sizes.first().copied().unwrap_or(rig.engine.card_size().min(rig.engine.max_transfer()));
    let total = match &a.total {
        Some(t) => parse_size(t)?,
        None => rig.engine.default_total(first),
    };
    Ok(DmaPlan {
        dirs: match a.dir {
            crate::cmd::pio::DirArg::H2c => vec![Direction::H2c],
            crate::cmd::pio::DirArg::C2h => vec![Direction::C2h],
            crate::cmd::pio::DirArg::Both => vec![Direction::H2c, Direction::C2h],
        },
        sizes,
        total,
        card_addr: rig.card_offset,
        timeout: Duration::from_millis(a.timeout_ms),
    })
}

pub fn request(a: &DmaArgs) -> anyhow::Result<DmaRequest> {
    Ok(DmaRequest {
        engine: a.engine.clone(),
        buffer: a.buffer.as_deref().map(str::parse::<BufferSource>).transpose()?,
        dma_bits: a.dma_bits,
        options: EngineOptions {
            card_addr: a.card_addr.as_deref().map(parse_size).transpose()?,
            card_size: a.card_size.as_deref().map(parse_size).transpose()?,
            channel: a.channel,
            ..EngineOptions::default()
        },
    })
}

pub fn measure(host: &Host, a: &DmaArgs) -> anyhow::Result<(DeviceInfo, Report)> {
    let via = a.via.map(|v| match v {
        DmaVia::Vfio => Via::Vfio,
        DmaVia::VfioNoiommu => Via::VfioNoiommu,
    });
    let session = Session::open(host, &a.device, via)?;
    session.check_dma_consent(a.allow_dma)?;
    let mut rig = session.open_dma(&request(a)?)?;
    let plan = plan(a, &rig)?;
    let stop = interrupt_flag();
    let info = &session.info;
    let m = session.measuring(a.common.placement(), &command_line())?;
    let mut progress = Progress::new();
    progress.begin("dma", plan.total * plan.dirs.len() as u64 * plan.sizes.len().max(1) as u64);
    let setup = DmaSetup {
        dev: session.dev.as_ref(),
        device: &info.address,
        simulated: info.simulated,
        link: m.link,
        engine: rig.engine.as_mut(),
        alloc: rig.alloc.as_ref(),
    };
    let clock = MonotonicClock;
    let mut sampling = Sampling {
        clock: &clock,
        overhead: TimerOverhead::measure(&clock),
        stop: &stop,
        progress: &mut progress,
        health: m.health.as_ref(),
    };
    let mut report = dma::run(setup, &plan, &mut sampling)?;
    progress.end();
    m.finish(&mut report);
    Ok((session.info, report))
}

pub fn run(host: &Host, a: DmaArgs) -> anyhow::Result<ExitCode> {
    let (_info, result) = measure(host, &a)?;
    let exporter = report::exporter(a.common.format(), report::Options::default());
    print!("{}", exporter.report(&result)?);
    if result.mismatched() {
        eprintln!("pcibench: DMA data did not verify: see the MISMATCH rows (offset, expected, found)");
        return Ok(ExitCode::from(1));
    }
    if result.interrupted {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
