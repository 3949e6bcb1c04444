use super::dma::parse_engine;
use super::pio::ViaArg;
use super::{parse_target, FormatArg, MeasureArgs, TraceArgs};
use clap::{Args, ValueEnum};
use pcibench::device::Target;
use pcibench::direction::Direction;
use pcibench::host::Host;
use pcibench::measure::{
    BufferSource, DmaLatencyRequest, EngineRequest, LatencyRequest, LoadMode, LoadRequest, Request,
};
use pcibench::measure::{Widths, DEFAULT_SAMPLES};
use pcibench::mmio::Width;
use pcibench::report;
use pcibench::units::{parse_size, parse_sizes};
use std::process::ExitCode;

/// `--dir` of DMA latency.
#[derive(Clone, Copy, ValueEnum)]
pub enum LatDir {
    /// Host to card: the engine reads host memory.
    H2c,
    /// Card to host: the engine writes host memory.
    C2h,
    /// h2c, then c2h.
    Both,
}

/// `--load`: what the engine streams while the reads are timed.
#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum LoadArg {
    /// The engine reads host memory.
    H2c,
    /// The engine writes host memory.
    C2h,
    /// Both directions (at once on engines with queues, else alternating).
    Both,
    /// h2c, c2h, then both: the table of register reads idle and under each DMA load.
    All,
}

#[derive(Args)]
#[command(
    after_help = "Each sample is one access or one transfer, timed alone (never batched), with the timer's own cost
subtracted; percentiles come from a log-linear histogram (buckets under 1% wide), so millions of samples
cost no memory. The clock: the invariant TSC where /proc/cpuinfo says it is (frequency measured against
CLOCK_MONOTONIC), else CLOCK_MONOTONIC.

Examples:
  pcibench latency sim --width all                          MMIO read latency per width (simulated card)
  pcibench latency sim --load all                           and under DMA load (register reads beside DMA throughput)
  pcibench latency sim --load h2c --load-rate 500MB/s       under a DMA load held at a rate (seed 004's AXI-Lite rows)
  pcibench latency sim --dma                                DMA latency, 64 B to 4 KiB, both directions
  pcibench latency sim --dma --rate sweep                   DMA latency against offered load, to the knee
  pcibench latency 00:01.0 --offset 0x0 --width 32          one register's read latency (reads only)
  pcibench latency sim --dma --completion both              DMA latency by polling and by interrupt, side by side
  pcibench latency 00:01.0 --dma --completion both --allow-dma --dma-bits 32    poll against MSI (VFIO)
  pcibench latency 00:01.0 --dma --completion both --irq-kind intx --allow-dma --dma-bits 32    poll against INTx"
)]
pub struct LatencyArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    device: Target,
    /// BAR to read (default: the first memory BAR, registers included: reads only unless --allow-write).
    #[arg(long, value_name = "N")]
    bar: Option<u8>,
    /// Offset of the access in the BAR.
    #[arg(long, default_value = "0")]
    offset: String,
    #[arg(long = "width", value_name = "WIDTH", help = format!(
        "Access width: {}, or all (repeatable; default 32; 512 is one 64-byte load, AVX-512F). A device may not decode every width: on aarch64 an access it rejects kills the process (SIGBUS)",
        super::help::widths(&pcibench::measure::latency::WIDTHS)
    ))]
    widths: Vec<String>,
    /// Access path (default: sysfs when no driver is bound, vfio when bound to vfio-pci).
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
    /// Also time write-then-read: the value read first is written back, then read (not needed for sim).
    #[arg(long)]
    allow_write: bool,
    #[arg(long, help = format!(
        "Samples per MMIO row (and per row under load) [default: as many as half a second takes at the rate of the row's first 10, at most {DEFAULT_SAMPLES}]"
    ))]
    samples: Option<u64>,
    /// Accesses run and discarded before each row (default: 1% of its samples, 1 to 1000; without
    /// --samples, at most a tenth of the row's half second).
    #[arg(long)]
    warmup: Option<u64>,
    /// Also measure DMA latency: one transfer per sample, submission to completion.
    #[arg(long)]
    dma: bool,
    /// How DMA completion is seen: poll (default), irq (the engine's interrupt), or both side by side; implies --dma.
    #[arg(long, value_enum)]
    completion: Option<super::dma::CompletionArg>,
    /// The same as --completion both: polled and interrupt rows side by side (kept from before --completion).
    #[arg(long, conflicts_with = "completion")]
    irq: bool,
    /// The interrupt kind completion by interrupt routes (with --completion irq or both, or --irq): auto (MSI-X, else MSI, else INTx), msix, msi or intx.
    #[arg(long, value_enum, value_name = "KIND")]
    irq_kind: Option<super::dma::IrqKindArg>,
    /// QDMA's interrupt mode for completion by interrupt: direct (default: a vector per queue) or aggregated (the interrupt ring).
    #[arg(long, value_enum, value_name = "MODE")]
    qdma_intr: Option<super::dma::QdmaIntrArg>,
    /// QDMA: drive its memory-mapped (mm) or stream (st) queues where it has both (default mm).
    #[arg(long, value_enum, value_name = "MODE")]
    mode: Option<super::dma::QdmaModeArg>,
    /// The far end behind a card's QDMA stream queues, asserted (no register says so); consents to writing its user BAR.
    #[arg(long, value_enum, value_name = "DESIGN")]
    design: Option<super::dma::DesignArg>,
    #[arg(long, value_name = "TRIGGER", help = super::dma::CMPT_TRIGGER_HELP)]
    cmpt_trigger: Option<String>,
    /// Also time the reads while the engine streams DMA: h2c, c2h, both, or all three.
    #[arg(long, value_enum)]
    load: Option<LoadArg>,
    /// Bytes per load transfer (default 1M, or what half the engine's card window takes).
    #[arg(long)]
    load_size: Option<String>,
    /// CPU for the load thread (default: one other than the measuring thread's).
    #[arg(long, value_name = "N")]
    load_cpu: Option<u32>,
    /// Hold the load at this rate in each direction it streams (2GB/s, 500MB/s, or transfers a second: 5K); default: flat out.
    #[arg(long, value_name = "RATE")]
    load_rate: Option<String>,
    #[arg(long, value_parser = parse_engine, help = super::help::engine())]
    engine: Option<String>,
    /// DMA transfer sizes: 64, a list 64,4K, or a range 64..4K (default 64,256,1K,4K, within what the engine takes).
    #[arg(long = "size", value_name = "BYTES")]
    sizes: Vec<String>,
    /// DMA directions: h2c, c2h, or both (default).
    #[arg(long, value_enum, default_value = "both")]
    dir: LatDir,
    /// Samples per DMA row (default: as many as half a second takes, at most the engine's default
    /// total over the size and 10000; edu: 4).
    #[arg(long)]
    dma_samples: Option<u64>,
    #[arg(long, value_name = "RATE", help = super::help::rate())]
    rate: Option<String>,
    /// With --rate sweep: stop once a row's p99 latency passes this (default 100us).
    #[arg(long, value_name = "TIME")]
    until_p99: Option<String>,
    #[arg(long, help = super::help::dma_buffer())]
    buffer: Option<String>,
    /// Address bits the device can drive (default 64; edu: 28, QEMU's default dma_mask).
    #[arg(long)]
    dma_bits: Option<u32>,
    /// Card (AXI) offset of the DMA window (load: H2C uses its first half, C2H the second).
    #[arg(long)]
    card_addr: Option<String>,
    /// Give up when the engine has made no progress for this many milliseconds (no descriptor
    /// completed, no queue index or semaphore moved): a slow transfer that keeps moving is waited
    /// for however long it takes; a hung engine is stopped this long after its last progress.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    timeout_ms: u64,
    /// Consent to start DMA on this device (--dma, --completion, --load; not needed for sim).
    #[arg(long)]
    allow_dma: bool,
    #[command(flatten)]
    common: MeasureArgs,
    #[command(flatten)]
    trace: TraceArgs,
}

/// What only applies with an engine is refused without one, in one line.
fn check(a: &LatencyArgs) -> anyhow::Result<()> {
    let engine_opts = [
        ("--size", !a.sizes.is_empty()),
        ("--dma-samples", a.dma_samples.is_some()),
        ("--load-size", a.load_size.is_some()),
        ("--load-cpu", a.load_cpu.is_some()),
        ("--load-rate", a.load_rate.is_some()),
        ("--engine", a.engine.is_some()),
        ("--buffer", a.buffer.is_some()),
        ("--dma-bits", a.dma_bits.is_some()),
        ("--card-addr", a.card_addr.is_some()),
    ];
    let dma = a.dma || a.irq || a.completion.is_some();
    let by_irq =
        a.irq || matches!(a.completion, Some(super::dma::CompletionArg::Irq | super::dma::CompletionArg::Both));
    super::dma::check_irq_kind(a.irq_kind, a.completion, a.irq, " (or --irq)")?;
    super::dma::check_qdma_intr(a.qdma_intr, by_irq, " (or --irq)")?;
    if let Some((flag, _)) = engine_opts.iter().find(|(_, given)| *given).filter(|_| !dma && a.load.is_none()) {
        anyhow::bail!(pcibench::Error::usage(format!("{flag} applies to DMA latency or load: add --dma or --load")));
    }
    for (flag, given) in [
        ("--size", !a.sizes.is_empty()),
        ("--dma-samples", a.dma_samples.is_some()),
        ("--cmpt-trigger", a.cmpt_trigger.is_some()),
        ("--rate", a.rate.is_some()),
        ("--until-p99", a.until_p99.is_some()),
    ] {
        if given && !dma {
            anyhow::bail!(pcibench::Error::usage(format!("{flag} applies to DMA latency: add --dma")));
        }
    }
    for (flag, given) in [
        ("--load-size", a.load_size.is_some()),
        ("--load-cpu", a.load_cpu.is_some()),
        ("--load-rate", a.load_rate.is_some()),
    ] {
        if given && a.load.is_none() {
            anyhow::bail!(pcibench::Error::usage(format!("{flag} applies to --load")));
        }
    }
    if a.common.format == Some(FormatArg::Seed) && !dma && a.load.is_none() {
        anyhow::bail!(pcibench::Error::usage(
            "--format seed prints the QDMA benchmark's latency tables, which need --load (the AXI-Lite table) or --dma (DMA latency): add one, or use --format table"
        ));
    }
    Ok(())
}

/// The request the flags ask for.
fn request(a: &LatencyArgs) -> anyhow::Result<Request> {
    let widths = match &a.widths {
        w if w.is_empty() => None,
        w if w.iter().any(|w| w == "all") => Some(Widths::All),
        w => Some(Widths::These(w.iter().map(|w| w.parse::<Width>()).collect::<Result<_, _>>()?)),
    };
    Ok(Request::Latency(LatencyRequest {
        device: a.device,
        via: a.via.map(ViaArg::via),
        bar: a.bar,
        offset: parse_size(&a.offset)?,
        widths,
        allow_write: a.allow_write,
        samples: a.samples.unwrap_or(DEFAULT_SAMPLES),
        samples_by_time: a.samples.is_none(),
        warmup: a.warmup,
        dma: (a.dma || a.irq || a.completion.is_some())
            .then(|| -> anyhow::Result<DmaLatencyRequest> {
                Ok(DmaLatencyRequest {
                    dirs: match a.dir {
                        LatDir::H2c => vec![Direction::H2c],
                        LatDir::C2h => vec![Direction::C2h],
                        LatDir::Both => vec![Direction::H2c, Direction::C2h],
                    },
                    sizes: parse_sizes(&a.sizes)?,
                    completion: match (a.completion, a.irq) {
                        (Some(c), _) => Some(c.mode()),
                        // --irq always measured both ways side by side, as saved runs' `"irq": true` reads.
                        (None, true) => Some(pcibench::measure::CompletionMode::Both),
                        (None, false) => None,
                    },
                    irq: false,
                    irq_kind: a.irq_kind.and_then(super::dma::IrqKindArg::kind),
                    samples: a.dma_samples,
                    rate: super::help::rate_request(a.rate.as_deref(), a.until_p99.as_deref())?,
                })
            })
            .transpose()?,
        load: a
            .load
            .map(|l| -> anyhow::Result<LoadRequest> {
                Ok(LoadRequest {
                    modes: match l {
                        LoadArg::H2c => vec![LoadMode::H2c],
                        LoadArg::C2h => vec![LoadMode::C2h],
                        LoadArg::Both => vec![LoadMode::Both],
                        LoadArg::All => LoadMode::ALL.to_vec(),
                    },
                    size: a.load_size.as_deref().map(parse_size).transpose()?,
                    cpu: a.load_cpu,
                    rate: a.load_rate.as_deref().map(str::parse::<pcibench::measure::Rate>).transpose()?,
                })
            })
            .transpose()?,
        engine: EngineRequest {
            engine: a.engine.clone(),
            buffer: a.buffer.as_deref().map(str::parse::<BufferSource>).transpose()?,
            dma_bits: a.dma_bits,
            card_addr: a.card_addr.as_deref().map(parse_size).transpose()?,
            qdma_intr: a.qdma_intr.and_then(super::dma::QdmaIntrArg::mode),
            qdma_mode: a.mode.map(super::dma::QdmaModeArg::mode),
            design: a.design.map(super::dma::DesignArg::design),
            cmpt_trigger: super::dma::cmpt_trigger(a.cmpt_trigger.as_deref(), !matches!(a.dir, LatDir::H2c))?,
            ..EngineRequest::default()
        },
        timeout_ms: a.timeout_ms,
        allow_dma: a.allow_dma,
        common: a.common.common()?,
    }))
}

pub fn run(host: &Host, a: LatencyArgs) -> anyhow::Result<ExitCode> {
    check(&a)?;
    let m = super::measure(host, &request(&a)?, Some(&a.trace))?;
    a.common.deliver(host, &m, report::Options::default())
}
