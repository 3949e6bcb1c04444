use super::{command_line, interrupt_flag, parse_target, MeasureArgs, Measured, Progress};
use clap::{Args, ValueEnum};
use pcibench::access::Via;
use pcibench::bench::dma::layout::Access;
use pcibench::bench::dma::{self, DmaPlan, DmaSetup};
use pcibench::bench::result::Report;
use pcibench::bench::sample::clock::MONOTONIC;
use pcibench::bench::sample::sampler::{Progress as _, Sampling};
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
pub(crate) fn parse_engine(s: &str) -> Result<String, String> {
    if s == "sim" || pcibench::dma::engines::by_name(s).is_some() {
        Ok(s.to_string())
    } else {
        Err(format!("unknown engine '{s}': use one of {}, or sim", pcibench::dma::engines::names()))
    }
}

/// `--dir` for DMA: one direction, each in turn, both at once, or all three.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum DmaDir {
    /// Host to card: the card's engine reads host memory.
    H2c,
    /// Card to host: the engine writes host memory.
    C2h,
    /// h2c, then c2h.
    Both,
    /// Both directions at the same time (engines with queues).
    Bidir,
    /// h2c, c2h, then both at once.
    All,
}

/// `--pattern`: where transfers go in the host buffer.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum PatternArg {
    /// Consecutive transfers.
    Seq,
    /// Fixed-size packets at random offsets in a host window (--window).
    Random,
}

/// `--queues 1,2,4,8` or `1..16` (powers of two): the queue counts to measure.
fn parse_queues(s: &str) -> anyhow::Result<Vec<u16>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        for n in parse_size_list(part.trim())? {
            let q = u16::try_from(n).ok().filter(|q| *q > 0);
            out.push(q.ok_or_else(|| {
                anyhow::anyhow!(pcibench::Error::usage(format!("--queues {n}: a queue count is 1 to 65535")))
            })?);
        }
    }
    if out.is_empty() {
        anyhow::bail!(pcibench::Error::usage("--queues needs a count, e.g. --queues 1,2,4,8"));
    }
    Ok(out)
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DmaVia {
    /// VFIO with an IOMMU: the card is given I/O virtual addresses.
    Vfio,
    /// VFIO without an IOMMU: the card is given physical addresses.
    VfioNoiommu,
}

#[derive(Args, Clone)]
#[command(after_help = "Examples:
  pcibench dma sim                                       the simulated card's XDMA engine, both directions, verified
  pcibench dma sim-qdma --queues 1,2,4,8 --size 64..1M    throughput by size and queue count
  pcibench dma 03:00.0 --engine xdma --allow-dma --format seed
  pcibench dma 00:01.0 --engine edu --dma-bits 32 --total 16K --allow-dma    QEMU's edu device")]
pub struct DmaArgs {
    /// The device: DDDD:BB:DD.F, BB:DD.F, or a simulated card (sim, sim-qdma, ...).
    #[arg(value_parser = parse_target)]
    pub device: Target,
    /// DMA engine driver (edu, xdma, or sim for a simulated card's own); default: the one found on the device.
    #[arg(long, value_parser = parse_engine)]
    pub engine: Option<String>,
    /// VFIO with an IOMMU (IOVA) or without one (physical addresses); default: what the device's group is.
    #[arg(long, value_enum)]
    pub via: Option<DmaVia>,
    /// Host buffer: heap, hugepage (default), u-dma-buf:NAME, or reserved:START,SIZE (memory
    /// reserved with memmap=SIZE$START, mapped through /dev/mem; no-IOMMU only).
    #[arg(long)]
    pub buffer: Option<String>,
    /// With --buffer reserved: take a range /proc/iomem lists as Reserved although no memmap= or
    /// reserve= on the kernel command line reserved it (firmware may use it); the run says so.
    #[arg(long)]
    pub force: bool,
    /// Direction: h2c, c2h, both (one after the other, default), bidir (at once), or all.
    #[arg(long, value_enum, default_value = "both")]
    pub dir: DmaDir,
    /// Queue counts to spread each run over (qdma): 1,2,4,8,16 or 1..16.
    #[arg(long)]
    pub queues: Option<String>,
    /// Descriptors per queue ring (qdma): an entry of the card's global ring-size table (default 2048).
    #[arg(long)]
    pub ring_size: Option<u32>,
    /// seq (default) or random: fixed-size packets at random offsets in a host window (qdma).
    #[arg(long, value_enum, default_value = "seq")]
    pub pattern: PatternArg,
    /// Host window for --pattern random (default 1G, less where memory is short).
    #[arg(long)]
    pub window: Option<String>,
    /// Transfer size(s): 4K, a list 64,4K, or a power-of-two range 64..1M (default: the engine's whole card memory, as fpga_sio's DMA test moves).
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
    /// Give up when the engine has made no progress for this many milliseconds (no descriptor
    /// completed, no queue index or semaphore moved): a slow transfer that keeps moving is waited
    /// for however long it takes; a hung engine is stopped this long after its last progress.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub timeout_ms: u64,
    /// Consent to start DMA on this device (not needed for sim).
    #[arg(long)]
    pub allow_dma: bool,
    #[command(flatten)]
    pub common: MeasureArgs,
}

fn plan(a: &DmaArgs, rig: &DmaRig, access: Access) -> anyhow::Result<DmaPlan> {
    let mut sizes = Vec::new();
    for s in a.sizes.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
        sizes.extend(parse_size_list(s.trim())?);
    }
    use DmaDir::*;
    let first = sizes.first().copied().unwrap_or(rig.engine.card_size().min(rig.engine.max_transfer()));
    let total = match &a.total {
        Some(t) => parse_size(t)?,
        None => rig.engine.default_total(first),
    };
    Ok(DmaPlan {
        dirs: match a.dir {
            H2c => vec![Direction::H2c],
            C2h => vec![Direction::C2h],
            Both | All => vec![Direction::H2c, Direction::C2h],
            Bidir => vec![],
        },
        bidir: matches!(a.dir, Bidir | All),
        sizes,
        total,
        card_addr: rig.card_offset,
        timeout: Duration::from_millis(a.timeout_ms),
        queues: a.queues.as_deref().map(parse_queues).transpose()?.unwrap_or_default(),
        access,
    })
}

pub fn request(a: &DmaArgs) -> anyhow::Result<DmaRequest> {
    if a.force && !a.buffer.as_deref().is_some_and(|b| b.starts_with("reserved:")) {
        return Err(pcibench::Error::usage(
            "--force applies only with --buffer reserved:START,SIZE (a Reserved range the kernel command line did not reserve): drop --force",
        )
        .into());
    }
    Ok(DmaRequest {
        engine: a.engine.clone(),
        buffer: a.buffer.as_deref().map(str::parse::<BufferSource>).transpose()?.map(|b| match b {
            BufferSource::Reserved { start, size, .. } => BufferSource::Reserved { start, size, force: a.force },
            b => b,
        }),
        dma_bits: a.dma_bits,
        options: EngineOptions {
            card_addr: a.card_addr.as_deref().map(parse_size).transpose()?,
            card_size: a.card_size.as_deref().map(parse_size).transpose()?,
            channel: a.channel,
            queues: a.queues.as_deref().map(parse_queues).transpose()?.and_then(|q| q.into_iter().max()),
            ring_size: a.ring_size,
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
    // Everything the engine does not decide is checked before it is opened.
    let req = request(a)?;
    let asked = a.window.as_deref().map(parse_size).transpose()?;
    if asked.is_some() && a.pattern != PatternArg::Random {
        anyhow::bail!(pcibench::Error::usage("--window applies to --pattern random"));
    }
    let (access, window_note) = match a.pattern {
        PatternArg::Seq => (Access::Sequential, None),
        PatternArg::Random => {
            let (window, note) = dma::random_window(host, asked)?;
            (Access::Random { window }, note)
        }
    };
    let mut rig = session.open_dma(&req)?;
    let plan = plan(a, &rig, access)?;
    let stop = interrupt_flag();
    let info = &session.info;
    let m = session.measuring(a.common.placement(), &command_line())?;
    let mut progress = Progress::new();
    let rows = (plan.dirs.len() + 2 * plan.bidir as usize) * plan.sizes.len().max(1) * plan.queues.len().max(1);
    progress.begin("dma", plan.total.saturating_mul(rows as u64));
    let setup = DmaSetup {
        dev: session.dev.as_ref(),
        device: &info.address,
        simulated: info.simulated,
        link: m.link,
        engine: rig.engine.as_mut(),
        alloc: rig.alloc.as_ref(),
    };
    let mut sampling = Sampling::new(&MONOTONIC, &stop, &mut progress, m.health.as_ref());
    let mut report = dma::run(setup, &plan, &mut sampling)?;
    progress.end();
    report.warnings.extend(window_note);
    m.finish(&mut report);
    Ok((session.info, report))
}

pub fn run(host: &Host, a: DmaArgs) -> anyhow::Result<ExitCode> {
    let (info, result) = measure(host, &a)?;
    a.common.deliver(host, Some(&info), Measured::Report(&result), report::Options::default())
}
