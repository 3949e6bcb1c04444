use super::{parse_target, MeasureArgs, TraceArgs};
use clap::{Args, ValueEnum};
use pcibench::access::{IrqKind, Via};
use pcibench::device::Target;
use pcibench::host::Host;
use pcibench::measure::{
    BufferSource, CompletionMode, DefaultSize, DmaDirs, DmaPattern, DmaRequest, EngineRequest, QdmaIntr, Request,
};
use pcibench::report;
use pcibench::units::{parse_size, parse_size_list, parse_sizes};
use std::process::ExitCode;

/// `--engine`: a registered engine name, or `sim` for a simulated card's own engine.
pub(crate) fn parse_engine(s: &str) -> Result<String, String> {
    pcibench::measure::parse_engine(s).map_err(|e| e.to_string())
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
    if s.split(',').all(|p| p.trim().is_empty()) {
        anyhow::bail!(pcibench::Error::usage("--queues needs a count, e.g. --queues 1,2,4,8"));
    }
    let mut out = Vec::new();
    for n in parse_size_list(s)? {
        let q = u16::try_from(n).ok().filter(|q| *q > 0);
        out.push(q.ok_or_else(|| {
            anyhow::anyhow!(pcibench::Error::usage(format!("--queues {n}: a queue count is 1 to 65535")))
        })?);
    }
    Ok(out)
}

/// `--completion`: how the CPU learns a transfer completed.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum CompletionArg {
    /// The engine's status or writeback, polled (the default).
    Poll,
    /// The engine's completion interrupt (MSI-X, MSI or INTx), armed and serviced as its vendor's driver does.
    Irq,
    /// Both, rows side by side.
    Both,
}

impl CompletionArg {
    pub(crate) fn mode(self) -> CompletionMode {
        match self {
            CompletionArg::Poll => CompletionMode::Poll,
            CompletionArg::Irq => CompletionMode::Irq,
            CompletionArg::Both => CompletionMode::Both,
        }
    }
}

/// `--irq-kind`: which interrupt to route (docs/interrupts.md).
#[derive(Clone, Copy, ValueEnum)]
pub enum IrqKindArg {
    Auto,
    Msix,
    Msi,
    Intx,
}

impl IrqKindArg {
    pub(crate) fn kind(self) -> Option<IrqKind> {
        match self {
            IrqKindArg::Auto => None,
            IrqKindArg::Msix => Some(IrqKind::MsiX),
            IrqKindArg::Msi => Some(IrqKind::Msi),
            IrqKindArg::Intx => Some(IrqKind::Intx),
        }
    }
}

/// `--qdma-intr`: libqdma's interrupt mode for QDMA's completion by interrupt (docs/engines/qdma.md).
#[derive(Clone, Copy, ValueEnum)]
pub enum QdmaIntrArg {
    /// Each queue its own MSI-X vector (libqdma's direct interrupt mode; the default).
    Direct,
    /// Every queue through the function's interrupt aggregation ring, one vector (libqdma's indirect mode).
    Aggregated,
}

impl QdmaIntrArg {
    /// The request's field: None for the default, so saved runs show the mode only when it is not.
    pub(crate) fn mode(self) -> Option<QdmaIntr> {
        match self {
            QdmaIntrArg::Direct => None,
            QdmaIntrArg::Aggregated => Some(QdmaIntr::Aggregated),
        }
    }
}

/// `--qdma-intr` applies only to completion by interrupt, as `--irq-kind` does.
pub(crate) fn check_qdma_intr(mode: Option<QdmaIntrArg>, by_irq: bool, or: &str) -> anyhow::Result<()> {
    if mode.is_some() && !by_irq {
        anyhow::bail!(pcibench::Error::usage(format!(
            "--qdma-intr applies to completion by interrupt: add --completion irq or --completion both{or}"
        )));
    }
    Ok(())
}

/// `--irq-kind` applies only to completion by interrupt (`--completion irq|both`; `--irq` on
/// `latency`, named by `or`).
pub(crate) fn check_irq_kind(
    kind: Option<IrqKindArg>,
    completion: Option<CompletionArg>,
    irq: bool,
    or: &str,
) -> anyhow::Result<()> {
    if kind.is_some() && !irq && !matches!(completion, Some(CompletionArg::Irq | CompletionArg::Both)) {
        anyhow::bail!(pcibench::Error::usage(format!(
            "--irq-kind applies to completion by interrupt: add --completion irq or --completion both{or}"
        )));
    }
    Ok(())
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
  pcibench dma sim --completion both                     polling and completion by interrupt, side by side
  pcibench dma 03:00.0 --engine xdma --completion irq --irq-kind msi --allow-dma    completion by MSI, not MSI-X
  pcibench dma sim-qdma --rate sweep --size 64,4K --queues 1,4    latency against offered load, to the knee
  pcibench dma 03:00.0 --engine xdma --allow-dma --format seed
  pcibench dma 00:01.0 --engine edu --dma-bits 32 --total 16K --allow-dma    QEMU's edu device")]
pub struct DmaArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    pub device: Target,
    #[arg(long, value_parser = parse_engine, help = super::help::engine())]
    pub engine: Option<String>,
    /// VFIO with an IOMMU (IOVA) or without one (physical addresses); default: what the device's group is.
    #[arg(long, value_enum)]
    pub via: Option<DmaVia>,
    #[arg(long, help = super::help::dma_buffer())]
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
    /// Transfer size(s): 4K, a list 64,4K, or a power-of-two range 64..1M (default: the engine's card memory, as fpga_sio's DMA test moves, at most 16M).
    #[arg(long = "size", value_name = "BYTES")]
    pub sizes: Vec<String>,
    /// Bytes per direction and size. Default: what the engine moves in half a second of samples
    /// (at least 10 samples), at most 64M (edu: 4 transfers, ~100 ms each); a run estimated past
    /// 10 s says so first.
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
    /// How completion is seen: poll (default), irq (the engine's interrupt: xdma, umem, edu), or both side by side.
    #[arg(long, value_enum)]
    pub completion: Option<CompletionArg>,
    /// The interrupt kind --completion irq|both routes: auto (MSI-X, else MSI, else INTx), msix, msi or intx.
    #[arg(long, value_enum, value_name = "KIND")]
    pub irq_kind: Option<IrqKindArg>,
    /// QDMA's interrupt mode with --completion irq|both: direct (default: a vector per queue) or aggregated (the interrupt ring).
    #[arg(long, value_enum, value_name = "MODE")]
    pub qdma_intr: Option<QdmaIntrArg>,
    /// Consent to start DMA on this device (not needed for sim).
    #[arg(long)]
    pub allow_dma: bool,
    #[arg(long, value_name = "RATE", help = super::help::rate())]
    pub rate: Option<String>,
    /// With --rate sweep: stop once a row's p99 latency passes this (default 100us).
    #[arg(long, value_name = "TIME")]
    pub until_p99: Option<String>,
    #[command(flatten)]
    pub common: MeasureArgs,
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// The request the flags ask for.
pub fn request(a: &DmaArgs) -> anyhow::Result<Request> {
    check_irq_kind(a.irq_kind, a.completion, false, "")?;
    check_qdma_intr(a.qdma_intr, matches!(a.completion, Some(CompletionArg::Irq | CompletionArg::Both)), "")?;
    if a.force && !a.buffer.as_deref().is_some_and(|b| b.starts_with("reserved:") || b == "heap") {
        return Err(pcibench::Error::usage(
            "--force applies only with --buffer reserved:START,SIZE (a Reserved range the kernel command line did not reserve) or --buffer heap (movable pages without an IOMMU): drop --force",
        )
        .into());
    }
    if a.force && a.buffer.as_deref() == Some("heap") {
        eprintln!(
            "pcibench: warning: --force --buffer heap: without an IOMMU the card gets the physical addresses of 4 KiB pages the kernel may move; the run fails if one does"
        );
    }
    Ok(Request::Dma(DmaRequest {
        device: a.device,
        via: a.via.map(|v| match v {
            DmaVia::Vfio => Via::Vfio,
            DmaVia::VfioNoiommu => Via::VfioNoiommu,
        }),
        engine: EngineRequest {
            engine: a.engine.clone(),
            buffer: a.buffer.as_deref().map(str::parse::<BufferSource>).transpose()?,
            dma_bits: a.dma_bits,
            card_addr: a.card_addr.as_deref().map(parse_size).transpose()?,
            card_size: a.card_size.as_deref().map(parse_size).transpose()?,
            channel: a.channel,
            ring_size: a.ring_size,
            qdma_intr: a.qdma_intr.and_then(QdmaIntrArg::mode),
            force: a.force,
        },
        dirs: match a.dir {
            DmaDir::H2c => DmaDirs::H2c,
            DmaDir::C2h => DmaDirs::C2h,
            DmaDir::Both => DmaDirs::Both,
            DmaDir::Bidir => DmaDirs::Bidir,
            DmaDir::All => DmaDirs::All,
        },
        queues: a.queues.as_deref().map(parse_queues).transpose()?.unwrap_or_default(),
        pattern: match a.pattern {
            PatternArg::Seq => DmaPattern::Seq,
            PatternArg::Random => DmaPattern::Random,
        },
        window: a.window.as_deref().map(parse_size).transpose()?,
        sizes: parse_sizes(&a.sizes)?,
        default_size: DefaultSize::Window,
        total: a.total.as_deref().map(parse_size).transpose()?,
        timeout_ms: a.timeout_ms,
        allow_dma: a.allow_dma,
        completion: a.completion.map(CompletionArg::mode),
        irq_kind: a.irq_kind.and_then(IrqKindArg::kind),
        rate: super::help::rate_request(a.rate.as_deref(), a.until_p99.as_deref())?,
        common: a.common.common()?,
    }))
}

pub fn run(host: &Host, a: DmaArgs) -> anyhow::Result<ExitCode> {
    let m = super::measure(host, &request(&a)?, Some(&a.trace))?;
    a.common.deliver(host, &m, report::Options::default())
}
