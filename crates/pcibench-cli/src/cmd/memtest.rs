use super::dma::EngineArgs;
use super::{parse_target, MeasureArgs};
use clap::Args;
use pcibench::device::Target;
use pcibench::host::Host;
use pcibench::measure::{EngineRequest, MemtestRequest, Request};
use pcibench::report;
use pcibench::units::parse_size;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench memtest sim                                   the simulated card's 1184 KiB of card memory
  pcibench memtest 03:00.0 --engine xdma --card-size 4G --allow-dma    a design's 4 GiB of DDR through XDMA
  pcibench memtest sim-nvram --size 64M --chunk 8M       the first 64 MiB of the NVRAM, 8 MiB at a time")]
pub struct MemtestArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    pub device: Target,
    #[command(flatten)]
    pub dma: EngineArgs,
    /// Card (AXI) address of the engine's memory window (xdma).
    #[arg(long)]
    pub card_addr: Option<String>,
    /// Bytes of card memory in the window: the design's memory (xdma, qdma; default 0x128000 and 32M, the sim cards').
    #[arg(long)]
    pub card_size: Option<String>,
    /// Where the test starts in the window (default: its start).
    #[arg(long)]
    pub offset: Option<String>,
    /// Bytes to test (default: the whole window from --offset).
    #[arg(long)]
    pub size: Option<String>,
    /// Bytes moved per transfer, the host buffer's size (default 64M, less where host memory is short).
    #[arg(long)]
    pub chunk: Option<String>,
    /// XDMA channel (0-3).
    #[arg(long)]
    pub channel: Option<u8>,
    /// Address bits the device can drive (default 64; edu: 28).
    #[arg(long)]
    pub dma_bits: Option<u32>,
    /// Give up when the engine has made no progress for this many milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub timeout_ms: u64,
    /// Consent to start DMA on this device (not needed for sim).
    #[arg(long)]
    pub allow_dma: bool,
    #[command(flatten)]
    pub common: MeasureArgs,
}

/// The request the flags ask for.
pub fn request(a: &MemtestArgs) -> anyhow::Result<Request> {
    let engine = a.dma.request()?;
    Ok(Request::Memtest(MemtestRequest {
        device: a.device,
        via: a.dma.via(),
        engine: EngineRequest {
            dma_bits: a.dma_bits,
            card_addr: a.card_addr.as_deref().map(parse_size).transpose()?,
            card_size: a.card_size.as_deref().map(parse_size).transpose()?,
            channel: a.channel,
            ..engine
        },
        offset: a.offset.as_deref().map(parse_size).transpose()?,
        size: a.size.as_deref().map(parse_size).transpose()?,
        chunk: a.chunk.as_deref().map(parse_size).transpose()?,
        timeout_ms: a.timeout_ms,
        allow_dma: a.allow_dma,
        common: a.common.common()?,
    }))
}

pub fn run(host: &Host, a: MemtestArgs) -> anyhow::Result<ExitCode> {
    let m = super::measure(host, &request(&a)?, None)?;
    a.common.deliver(host, &m, report::Options::default())
}
