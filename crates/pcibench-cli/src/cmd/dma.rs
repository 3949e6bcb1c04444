use super::{parse_target, MeasureArgs, TraceArgs};
use clap::{Args, ValueEnum};
use pcibench::access::{IrqKind, Via};
use pcibench::device::Target;
use pcibench::host::Host;
use pcibench::measure::{
    BufferSource, CompletionMode, DefaultSize, DmaDirs, DmaPattern, DmaRequest, EngineRequest, QdmaIntr, Request,
    SoakRequest,
};
use pcibench::report;
use pcibench::units::{parse_duration, parse_size, parse_size_list, parse_sizes};
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
    /// The request's field, the mode named (saved runs show it when it was asked for; an engine
    /// other than qdma refuses either mode alike).
    pub(crate) fn mode(self) -> Option<QdmaIntr> {
        match self {
            QdmaIntrArg::Direct => Some(QdmaIntr::Direct),
            QdmaIntrArg::Aggregated => Some(QdmaIntr::Aggregated),
        }
    }
}

/// `--mode`: which of a QDMA's engines to drive where it has both (docs/engines/qdma-stream.md).
#[derive(Clone, Copy, ValueEnum)]
pub enum QdmaModeArg {
    /// Memory-mapped queues over card memory (the default where the card has MM engines)
    Mm,
    /// Stream queues against the far end (the example design: --design qdma-example on a card)
    St,
}

impl QdmaModeArg {
    pub(crate) fn mode(self) -> pcibench::measure::QdmaMode {
        match self {
            QdmaModeArg::Mm => pcibench::measure::QdmaMode::Mm,
            QdmaModeArg::St => pcibench::measure::QdmaMode::St,
        }
    }
}

/// `--design`: the far end asserted behind a card's stream queues.
#[derive(Clone, Copy, ValueEnum)]
pub enum DesignArg {
    /// The vendor's QDMA example design (C2H generator, H2C checker in the user BAR); consents to writing its registers
    QdmaExample,
}

impl DesignArg {
    pub(crate) fn design(self) -> pcibench::measure::Design {
        match self {
            DesignArg::QdmaExample => pcibench::measure::Design::QdmaExample,
        }
    }
}

/// `--cmpt-trigger`'s help, shared with `latency`.
pub(crate) const CMPT_TRIGGER_HELP: &str = "QDMA stream queues: when a C2H completion ring reports (status and interrupt): every (default), user, timer[:T] or count[:C], T and C indexes into the card's timer and counter tables";

/// `--cmpt-trigger`, parsed; it moderates C2H completion rings, so a run without C2H is refused
/// rather than given a setting it never uses.
pub(crate) fn cmpt_trigger(spec: Option<&str>, c2h: bool) -> anyhow::Result<Option<pcibench::measure::CmptTrigger>> {
    let Some(spec) = spec else { return Ok(None) };
    if !c2h {
        anyhow::bail!(pcibench::Error::usage(
            "--cmpt-trigger moderates C2H completion rings, and this run moves no C2H data: drop it or add C2H (--dir c2h, both, bidir or all)"
        ));
    }
    Ok(Some(spec.parse()?))
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

/// The engine, access path and host buffer of a DMA run (`dma`, `memtest`): the same flags and
/// the same checks on both, in the order each command shows them.
#[derive(Args, Clone)]
pub struct EngineArgs {
    #[arg(long, value_parser = parse_engine, help = super::help::engine())]
    pub engine: Option<String>,
    /// VFIO with an IOMMU (IOVA) or without one (physical addresses); default: what the device's group is.
    #[arg(long, value_enum)]
    pub via: Option<DmaVia>,
    #[arg(long, help = super::help::dma_buffer())]
    pub buffer: Option<String>,
}

impl EngineArgs {
    /// The request's access path (None: what the device's group is).
    pub(crate) fn via(&self) -> Option<Via> {
        self.via.map(|v| match v {
            DmaVia::Vfio => Via::Vfio,
            DmaVia::VfioNoiommu => Via::VfioNoiommu,
        })
    }

    /// The request's engine with these flags (`--buffer` checked); the command sets the rest.
    pub(crate) fn request(&self) -> anyhow::Result<EngineRequest> {
        Ok(EngineRequest {
            engine: self.engine.clone(),
            buffer: self.buffer.as_deref().map(str::parse::<BufferSource>).transpose()?,
            ..EngineRequest::default()
        })
    }
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
    /// More devices to run at the same time, with --duration (every stream of every card at once).
    #[arg(value_parser = parse_target, value_name = "DEVICE")]
    pub more: Vec<Target>,
    #[command(flatten)]
    pub dma: EngineArgs,
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
    /// QDMA: drive its memory-mapped (mm) or stream (st) queues where it has both (default mm).
    #[arg(long, value_enum, value_name = "MODE")]
    pub mode: Option<QdmaModeArg>,
    /// The far end behind a card's QDMA stream queues, asserted (no register says so); consents to writing its user BAR.
    #[arg(long, value_enum, value_name = "DESIGN")]
    pub design: Option<DesignArg>,
    #[arg(long, value_name = "TRIGGER", help = CMPT_TRIGGER_HELP)]
    pub cmpt_trigger: Option<String>,
    /// Consent to start DMA on this device (not needed for sim).
    #[arg(long)]
    pub allow_dma: bool,
    /// Run every stream at once for this long (60s, 10m, 2h): each XDMA channel both ways, each
    /// queue (--queues N per direction), each card named; a row per stream every --every (docs/soak.md).
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// With --duration: a row per stream this often (default 10s, as fpga_sio).
    #[arg(long, value_name = "TIME", requires = "duration")]
    pub every: Option<String>,
    /// With --duration: the XDMA channels to run, e.g. 0,2 (default: every memory-mapped channel).
    #[arg(long, value_name = "LIST", requires = "duration")]
    pub channels: Option<String>,
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
    if a.force && !a.dma.buffer.as_deref().is_some_and(|b| b.starts_with("reserved:") || b == "heap") {
        return Err(pcibench::Error::usage(
            "--force applies only with --buffer reserved:START,SIZE (a Reserved range the kernel command line did not reserve) or --buffer heap (movable pages without an IOMMU): drop --force",
        )
        .into());
    }
    if a.force && a.dma.buffer.as_deref() == Some("heap") {
        eprintln!(
            "pcibench: warning: --force --buffer heap: without an IOMMU the card gets the physical addresses of 4 KiB pages the kernel may move; the run fails if one does"
        );
    }
    let engine = a.dma.request()?;
    Ok(Request::Dma(DmaRequest {
        device: a.device,
        via: a.dma.via(),
        engine: EngineRequest {
            dma_bits: a.dma_bits,
            card_addr: a.card_addr.as_deref().map(parse_size).transpose()?,
            card_size: a.card_size.as_deref().map(parse_size).transpose()?,
            channel: a.channel,
            ring_size: a.ring_size,
            qdma_intr: a.qdma_intr.and_then(QdmaIntrArg::mode),
            qdma_mode: a.mode.map(QdmaModeArg::mode),
            design: a.design.map(DesignArg::design),
            cmpt_trigger: cmpt_trigger(a.cmpt_trigger.as_deref(), !matches!(a.dir, DmaDir::H2c))?,
            force: a.force,
            ..engine
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
        row_budget_ms: None,
        timeout_ms: a.timeout_ms,
        allow_dma: a.allow_dma,
        completion: a.completion.map(CompletionArg::mode),
        irq_kind: a.irq_kind.and_then(IrqKindArg::kind),
        rate: super::help::rate_request(a.rate.as_deref(), a.until_p99.as_deref())?,
        soak: soak_request(a)?,
        common: a.common.common()?,
    }))
}

/// `--duration`, `--every`, `--channels` and the devices after the first.
fn soak_request(a: &DmaArgs) -> anyhow::Result<Option<SoakRequest>> {
    let Some(d) = &a.duration else {
        if !a.more.is_empty() {
            anyhow::bail!(pcibench::Error::usage(
                "several devices run at once with --duration (e.g. --duration 60s): name one device without it"
            ));
        }
        return Ok(None);
    };
    let channels = a
        .channels
        .as_deref()
        .map(|s| {
            s.split(',')
                .map(|c| {
                    c.trim().parse::<u8>().ok().filter(|c| *c < 4).ok_or_else(|| {
                        pcibench::Error::usage(format!("--channels {s}: XDMA channels are 0 to 3, e.g. --channels 0,1"))
                    })
                })
                .collect::<Result<Vec<u8>, _>>()
        })
        .transpose()?;
    Ok(Some(SoakRequest {
        duration_ms: parse_duration(d, "--duration")?,
        every_ms: a.every.as_deref().map(|e| parse_duration(e, "--every")).transpose()?.unwrap_or(10_000),
        more: a.more.clone(),
        channels,
    }))
}

pub fn run(host: &Host, a: DmaArgs) -> anyhow::Result<ExitCode> {
    // A soak's rows are shown as they come, in the output's format.
    *super::live() = Some(a.common.format());
    let m = super::measure(host, &request(&a)?, Some(&a.trace))?;
    a.common.deliver(host, &m, report::Options::default())
}
