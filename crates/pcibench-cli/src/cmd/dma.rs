use super::{open_device, parse_target, print_json, progress_bar};
use crate::cmd::pio::Format;
use clap::{Args, ValueEnum};
use pcibench::access::{DeviceAccess, IoMode, Mapping, Via};
use pcibench::bench::dma::{self, DmaPlan, DmaReport, DmaSetup};
use pcibench::dma::engines::{edu, xdma};
use pcibench::dma::{BufferSource, Direction, DmaAllocator, Engine};
use pcibench::host::Host;
use pcibench::pci::{self, DeviceInfo, Target};
use pcibench::report::dma as out;
use pcibench::units::{parse_size, parse_size_list};
use pcibench::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum EngineArg {
    /// QEMU's edu device (1234:11e8): 4 KiB card buffer, ~100 ms per transfer.
    Edu,
    /// Xilinx/AMD DMA/Bridge Subsystem (PG195), SGDMA in poll mode, no kernel module.
    Xdma,
    /// The sim card's engine (an XDMA register model): same as xdma on `sim`.
    Sim,
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
    #[arg(long, value_enum)]
    pub engine: EngineArg,
    /// VFIO with an IOMMU (IOVA) or without one (physical addresses); default: what the device's group is.
    #[arg(long, value_enum)]
    pub via: Option<DmaVia>,
    /// Host buffer: heap, hugepage, or u-dma-buf:NAME.
    #[arg(long, default_value = "hugepage")]
    pub buffer: String,
    #[arg(long, value_enum, default_value = "both")]
    pub dir: crate::cmd::pio::DirArg,
    /// Transfer size(s) (default: the engine's whole card memory, as time_dma_blkram).
    #[arg(long = "size", value_name = "BYTES")]
    pub sizes: Vec<String>,
    /// Bytes per direction and size (default 64M; edu: 4 transfers, it takes ~100 ms each).
    #[arg(long)]
    pub total: Option<String>,
    /// Card (AXI) address of the memory window (xdma), or edu offset/address.
    #[arg(long, default_value = "0")]
    pub card_addr: String,
    /// Bytes of card memory in the window (xdma; default 0x128000, the sim card's).
    #[arg(long)]
    pub card_size: Option<String>,
    /// XDMA channel (0-3).
    #[arg(long, default_value_t = 0)]
    pub channel: u8,
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

/// The engine and the allocator its buffers come from, for one opened device.
pub struct Driver {
    pub engine: Box<dyn Engine>,
    pub alloc: Box<dyn DmaAllocator>,
    /// Plan's card address (an offset within the engine's window).
    pub card_offset: u64,
    pub default_total: Option<u64>,
}

pub fn build_driver(info: &DeviceInfo, dev: &dyn DeviceAccess, a: &DmaArgs) -> anyhow::Result<Driver> {
    let source: BufferSource = a.buffer.parse()?;
    let card_addr = parse_size(&a.card_addr)?;
    match a.engine {
        EngineArg::Edu => {
            if (info.vendor_id, info.device_id) != (edu::EDU_VENDOR, edu::EDU_DEVICE) {
                anyhow::bail!(Error::usage(format!(
                    "{} is {}, not QEMU's edu device (1234:11e8): choose the engine that matches the card",
                    info.address,
                    info.ids()
                )));
            }
            let bits = a.dma_bits.unwrap_or(edu::EDU_DEFAULT_DMA_BITS);
            let alloc = dev.dma_allocator(&source, bits)?;
            let bar0 = dev.open_bar(0, Mapping::Uc, IoMode::Mmap)?;
            Ok(Driver {
                engine: Box::new(edu::EduEngine::new(bar0, bits)?),
                alloc,
                card_offset: edu::card_offset(card_addr)?,
                default_total: None,
            })
        }
        EngineArg::Xdma | EngineArg::Sim => {
            if a.engine == EngineArg::Sim && !info.simulated {
                anyhow::bail!(Error::usage(format!(
                    "--engine sim drives the simulated card's engine: use it with `sim`, or --engine xdma for {}",
                    info.address
                )));
            }
            let bars: Vec<u8> = info.bars.iter().filter(|b| b.is_memory()).map(|b| b.index).collect();
            let bar = xdma::find_dma_bar(dev, &bars)?.ok_or_else(|| {
                Error::Unsupported(format!(
                    "no XDMA register BAR on {}: none of BARs {bars:?} has the DMA/Bridge Subsystem identifiers (0x1fc2xxxx at +0x2000, 0x1fc3xxxx at +0x3000)",
                    info.address
                ))
            })?;
            let alloc = dev.dma_allocator(&source, a.dma_bits.unwrap_or(64))?;
            let card_size = match &a.card_size {
                Some(s) => parse_size(s)?,
                None => xdma::DEFAULT_CARD_SIZE,
            };
            let opts = xdma::XdmaOptions { channel: a.channel, card_addr, card_size };
            let engine = xdma::XdmaEngine::new(dev.open_bar(bar, Mapping::Uc, IoMode::Mmap)?, alloc.as_ref(), opts)?;
            Ok(Driver { engine: Box::new(engine), alloc, card_offset: 0, default_total: None })
        }
    }
}

pub fn plan(a: &DmaArgs, drv: &Driver) -> anyhow::Result<DmaPlan> {
    let mut sizes = Vec::new();
    for s in &a.sizes {
        sizes.extend(parse_size_list(s)?);
    }
    let first = sizes.first().copied().unwrap_or(drv.engine.card_size().min(drv.engine.max_transfer()));
    let total = match &a.total {
        Some(t) => parse_size(t)?,
        None if a.engine == EngineArg::Edu => 4 * first,
        None => drv.default_total.unwrap_or(64 << 20),
    };
    Ok(DmaPlan {
        dirs: match a.dir {
            crate::cmd::pio::DirArg::H2c => vec![Direction::H2c],
            crate::cmd::pio::DirArg::C2h => vec![Direction::C2h],
            crate::cmd::pio::DirArg::Both => vec![Direction::H2c, Direction::C2h],
        },
        sizes,
        total,
        card_addr: drv.card_offset,
        timeout: Duration::from_millis(a.timeout_ms),
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
    let info = pci::describe(host, &a.device)?;
    if !a.allow_dma && !info.simulated {
        anyhow::bail!(Error::Refused(format!(
            "dma makes {} read and write host memory: add --allow-dma to consent to DMA on this device",
            info.address
        )));
    }
    let via = a.via.map(|v| match v {
        DmaVia::Vfio => Via::Vfio,
        DmaVia::VfioNoiommu => Via::VfioNoiommu,
    });
    let dev = open_device(host, &a.device, &info, via)?;
    let mut drv = build_driver(&info, dev.as_ref(), a)?;
    let plan = plan(a, &drv)?;
    let stop = interrupt_flag();
    let link = info.link.as_ref().and_then(|l| l.model_link());
    let planned = plan.total * plan.dirs.len() as u64 * plan.sizes.len().max(1) as u64;
    let mut bar = progress_bar(planned, "dma");
    let setup = DmaSetup {
        dev: dev.as_ref(),
        device: &info.address,
        simulated: info.simulated,
        link,
        engine: drv.engine.as_mut(),
        alloc: drv.alloc.as_ref(),
    };
    let report = dma::run(setup, &plan, &stop, &mut |n| bar.inc(n))?;
    bar.finish_and_clear();
    Ok((info, report))
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
