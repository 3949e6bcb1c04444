use super::{parse_target, print_json, progress_bar};
use crate::cmd::pio::Format;
use clap::{Args, ValueEnum};
use pcibench::access::Via;
use pcibench::bench::dma::{self, DmaPlan, DmaReport, DmaSetup};
use pcibench::dma::engines::EngineOptions;
use pcibench::dma::{BufferSource, Direction};
use pcibench::host::Host;
use pcibench::pci::DeviceInfo;
use pcibench::report::dma as out;
use pcibench::session::{DmaRequest, DmaRig, Session};
use pcibench::target::Target;
use pcibench::units::{parse_size, parse_size_list};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    #[arg(long)]
    pub json: bool,
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
        },
    })
}

/// Ctrl-C sets this; the runner stops the engine and reports what it has.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flag);
    // A second handler install (e.g. `run` calling twice) fails harmlessly; the first stays.
    let _ = ctrlc::set_handler(move || f.store(true, Ordering::SeqCst));
    flag
}

pub fn measure(host: &Host, a: &DmaArgs) -> anyhow::Result<(DeviceInfo, DmaReport)> {
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
    let link = info.link.as_ref().and_then(|l| l.model_link());
    let planned = plan.total * plan.dirs.len() as u64 * plan.sizes.len().max(1) as u64;
    let mut bar = progress_bar(planned, "dma");
    let setup = DmaSetup {
        dev: session.dev.as_ref(),
        device: &info.address,
        simulated: info.simulated,
        link,
        engine: rig.engine.as_mut(),
        alloc: rig.alloc.as_ref(),
    };
    let report = dma::run(setup, &plan, &stop, &mut |n| bar.inc(n))?;
    bar.finish_and_clear();
    Ok((session.info, report))
}

pub fn print(report: &DmaReport, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => print_json(report)?,
        Format::Seed => print!("{}", out::seed_format(report)),
        Format::Table => print!("{}", out::table(report)),
    }
    Ok(())
}

pub fn run(host: &Host, a: DmaArgs) -> anyhow::Result<ExitCode> {
    let (_info, report) = measure(host, &a)?;
    print(&report, if a.json { Format::Json } else { a.format })?;
    if report.results.iter().any(|r| r.verified == Some(false)) {
        eprintln!("pcibench: DMA data did not verify: see the MISMATCH rows (offset, expected, found)");
        return Ok(ExitCode::from(1));
    }
    if report.interrupted {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
