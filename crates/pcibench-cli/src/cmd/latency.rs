use super::dma::parse_engine;
use super::pio::ViaArg;
use super::{command_line, interrupt_flag, parse_target, FormatArg, MeasureArgs, Measured, Progress};
use clap::{Args, ValueEnum};
use pcibench::bench::latency::dma::DmaLatency;
use pcibench::bench::latency::load::{LoadMode, LoadPlan};
use pcibench::bench::latency::row::latency_clock;
use pcibench::bench::latency::{self, LatencyPlan, LatencyTarget, ALL_WIDTHS, DEFAULT_SAMPLES, DEFAULT_WIDTH};
use pcibench::bench::result::Completion;
use pcibench::bench::sample::sampler::{Progress as _, Sampling};
use pcibench::dma::engines::EngineOptions;
use pcibench::dma::{BufferSource, Direction, DmaAllocator, Engine};
use pcibench::host::Host;
use pcibench::mmio::Width;
use pcibench::report;
use pcibench::session::{DmaRequest, Session};
use pcibench::target::Target;
use pcibench::units::{parse_size, parse_size_list};
use std::process::ExitCode;
use std::time::Duration;

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
  pcibench latency sim --dma                                DMA latency, 64 B to 4 KiB, both directions
  pcibench latency 00:01.0 --offset 0x0 --width 32          one register's read latency (reads only)
  pcibench latency 00:01.0 --dma --irq --allow-dma --dma-bits 32    poll against MSI (VFIO)"
)]
pub struct LatencyArgs {
    /// The device: DDDD:BB:DD.F, BB:DD.F, or a simulated card (sim, sim-qdma, ...).
    #[arg(value_parser = parse_target)]
    device: Target,
    /// BAR to read (default: the first memory BAR, registers included: reads only unless --allow-write).
    #[arg(long, value_name = "N")]
    bar: Option<u8>,
    /// Offset of the access in the BAR.
    #[arg(long, default_value = "0")]
    offset: String,
    /// Access width: 8 16 32 64, 512 (one 64-byte load, AVX-512F), or all (repeatable; default 32). A device may not decode every width: on aarch64 an access it rejects kills the process (SIGBUS).
    #[arg(long = "width", value_name = "WIDTH")]
    widths: Vec<String>,
    /// Access path (default: sysfs when no driver is bound, vfio when bound to vfio-pci).
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
    /// Also time write-then-read: the value read first is written back, then read (not needed for sim).
    #[arg(long)]
    allow_write: bool,
    /// Samples per MMIO row (and per row under load).
    #[arg(long, default_value_t = DEFAULT_SAMPLES)]
    samples: u64,
    /// Accesses run and discarded before each row (default: 1% of its samples, 1 to 1000).
    #[arg(long)]
    warmup: Option<u64>,
    /// Also measure DMA latency: one transfer per sample, submission to completion.
    #[arg(long)]
    dma: bool,
    /// Also complete DMA by the device's MSI (VFIO eventfd) beside polling; implies --dma.
    #[arg(long)]
    irq: bool,
    /// Also time the reads while the engine streams DMA: h2c, c2h, both, or all three.
    #[arg(long, value_enum)]
    load: Option<LoadArg>,
    /// Bytes per load transfer (default 1M, or what half the engine's card window takes).
    #[arg(long)]
    load_size: Option<String>,
    /// CPU for the load thread (default: one other than the measuring thread's).
    #[arg(long, value_name = "N")]
    load_cpu: Option<u32>,
    /// DMA engine (edu, xdma, qdma, or sim); default: the one found on the device.
    #[arg(long, value_parser = parse_engine)]
    engine: Option<String>,
    /// DMA transfer sizes: 64, a list 64,4K, or a range 64..4K (default 64,256,1K,4K, within what the engine takes).
    #[arg(long = "size", value_name = "BYTES")]
    sizes: Vec<String>,
    /// DMA directions: h2c, c2h, or both (default).
    #[arg(long, value_enum, default_value = "both")]
    dir: LatDir,
    /// Samples per DMA row (default: the engine's default total over the size, at most 10000; edu: 4).
    #[arg(long)]
    dma_samples: Option<u64>,
    /// Host buffer: heap, hugepage (default), or u-dma-buf:NAME.
    #[arg(long)]
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
    /// Consent to start DMA on this device (--dma, --irq, --load; not needed for sim).
    #[arg(long)]
    allow_dma: bool,
    #[command(flatten)]
    common: MeasureArgs,
}

fn widths(a: &LatencyArgs) -> anyhow::Result<(Vec<Width>, bool)> {
    if a.widths.is_empty() {
        return Ok((vec![DEFAULT_WIDTH], true));
    }
    if a.widths.iter().any(|w| w == "all") {
        return Ok((ALL_WIDTHS.to_vec(), false));
    }
    Ok((a.widths.iter().map(|w| w.parse::<Width>()).collect::<Result<_, _>>()?, true))
}

fn sizes(a: &LatencyArgs) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for s in a.sizes.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
        out.extend(parse_size_list(s.trim())?);
    }
    Ok(out)
}

/// What only applies with an engine is refused without one, in one line.
fn check(a: &LatencyArgs) -> anyhow::Result<()> {
    let engine_opts = [
        ("--size", !a.sizes.is_empty()),
        ("--dma-samples", a.dma_samples.is_some()),
        ("--load-size", a.load_size.is_some()),
        ("--load-cpu", a.load_cpu.is_some()),
        ("--engine", a.engine.is_some()),
        ("--buffer", a.buffer.is_some()),
        ("--dma-bits", a.dma_bits.is_some()),
        ("--card-addr", a.card_addr.is_some()),
    ];
    let dma = a.dma || a.irq;
    if let Some((flag, _)) = engine_opts.iter().find(|(_, given)| *given).filter(|_| !dma && a.load.is_none()) {
        anyhow::bail!(pcibench::Error::usage(format!("{flag} applies to DMA latency or load: add --dma or --load")));
    }
    for (flag, given) in [("--size", !a.sizes.is_empty()), ("--dma-samples", a.dma_samples.is_some())] {
        if given && !dma {
            anyhow::bail!(pcibench::Error::usage(format!("{flag} applies to DMA latency: add --dma")));
        }
    }
    for (flag, given) in [("--load-size", a.load_size.is_some()), ("--load-cpu", a.load_cpu.is_some())] {
        if given && a.load.is_none() {
            anyhow::bail!(pcibench::Error::usage(format!("{flag} applies to --load")));
        }
    }
    if a.samples == 0 {
        anyhow::bail!(pcibench::Error::usage("--samples 0: give at least one sample"));
    }
    if a.common.format == Some(FormatArg::Seed) && !dma && a.load.is_none() {
        anyhow::bail!(pcibench::Error::usage(
            "--format seed prints the QDMA benchmark's latency tables, which need --load (the AXI-Lite table) or --dma (DMA latency): add one, or use --format table"
        ));
    }
    Ok(())
}

fn request(a: &LatencyArgs) -> anyhow::Result<DmaRequest> {
    Ok(DmaRequest {
        engine: a.engine.clone(),
        buffer: a.buffer.as_deref().map(str::parse::<BufferSource>).transpose()?,
        dma_bits: a.dma_bits,
        options: EngineOptions { card_addr: a.card_addr.as_deref().map(parse_size).transpose()?, ..Default::default() },
    })
}

/// The plan from the flags; `card_addr` is where the engine's window starts (0 without one).
fn plan(a: &LatencyArgs, session: &Session, card_addr: u64) -> anyhow::Result<LatencyPlan> {
    let (widths, strict_width) = widths(a)?;
    let timeout = Duration::from_millis(a.timeout_ms);
    let dma = a.dma || a.irq;
    Ok(LatencyPlan {
        bar: match a.bar {
            Some(b) => b,
            None => session.first_memory_bar()?,
        },
        offset: parse_size(&a.offset)?,
        widths: widths.clone(),
        strict_width,
        allow_write: session.may_write(a.allow_write),
        samples: a.samples,
        warmup: a.warmup,
        dma: match dma {
            false => None,
            true => Some(DmaLatency {
                dirs: match a.dir {
                    LatDir::H2c => vec![Direction::H2c],
                    LatDir::C2h => vec![Direction::C2h],
                    LatDir::Both => vec![Direction::H2c, Direction::C2h],
                },
                sizes: sizes(a)?,
                completions: if a.irq { vec![Completion::Poll, Completion::Msi] } else { vec![Completion::Poll] },
                samples: a.dma_samples,
                card_addr,
                timeout,
            }),
        },
        load: match a.load {
            None => None,
            Some(l) => Some(LoadPlan {
                modes: match l {
                    LoadArg::H2c => vec![LoadMode::H2c],
                    LoadArg::C2h => vec![LoadMode::C2h],
                    LoadArg::Both => vec![LoadMode::Both],
                    LoadArg::All => LoadMode::ALL.to_vec(),
                },
                width: latency::load_width(&widths),
                size: a.load_size.as_deref().map(parse_size).transpose()?,
                cpu: a.load_cpu,
                card_addr,
                timeout,
            }),
        },
    })
}

pub fn run(host: &Host, a: LatencyArgs) -> anyhow::Result<ExitCode> {
    check(&a)?;
    let session = Session::open(host, &a.device, a.via.map(ViaArg::via))?;
    let dma = a.dma || a.irq || a.load.is_some();
    if dma {
        // Consent before anything touches the device: routing the interrupt enables MSI.
        session.check_dma_consent(a.allow_dma)?;
    }
    let irq = if a.irq { Some(session.interrupt()?) } else { None };
    let mut rig = None;
    if dma {
        let option = if a.dma || a.irq { "--dma" } else { "--load" };
        rig = Some(session.open_dma_for(option, &request(&a)?)?);
    }
    let plan = plan(&a, &session, rig.as_ref().map_or(0, |r| r.card_offset))?;
    let mut m = session.measuring(a.common.placement(), &command_line())?;
    let clock = latency_clock(m.context.tsc_invariant);
    m.context.clock = clock.name();
    let stop = interrupt_flag();
    let mut progress = Progress::new();
    // Bytes read per row, for the bar's length (DMA rows are not counted).
    let rows = plan.widths.len() as u64 * (1 + plan.allow_write as u64)
        + plan.load.as_ref().map_or(0, |l| l.modes.len() as u64);
    progress.begin("latency", a.samples.saturating_mul(4).saturating_mul(rows));
    let mut sampling = Sampling::new(clock.as_ref(), &stop, &mut progress, m.health.as_ref());
    let engine: Option<(&mut dyn Engine, &dyn DmaAllocator)> = match rig.as_mut() {
        Some(r) => Some((r.engine.as_mut(), r.alloc.as_ref())),
        None => None,
    };
    let t = LatencyTarget {
        dev: session.dev.as_ref(),
        device: &session.info.address,
        simulated: session.info.simulated,
        engine,
        irq: irq.as_deref(),
    };
    let mut result = latency::run(t, &plan, &mut sampling)?;
    progress.end();
    m.finish(&mut result);
    a.common.deliver(host, Some(&session.info), Measured::Report(&result), report::Options::default())
}
