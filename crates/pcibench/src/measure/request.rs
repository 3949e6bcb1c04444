//! What to measure, as plain data: what the user asked for, before anything is resolved against
//! the device or its engine (default BARs, sizes, totals, the engine's window). The CLI builds a
//! `Request` from its flags; a saved run carries the request that produced it. Every field is a
//! choice the user made; `None` or an empty list means the library's default for it.

use crate::access::{IoMode, IrqKind, Via};
use crate::device::Target;
use crate::direction::Direction;
use crate::mmio::Width;
use serde::{Deserialize, Serialize};

/// The types a request is made of, for its callers: they need no runner's module.
pub use crate::bench::latency::load::LoadMode;
pub use crate::bench::latency::DEFAULT_SAMPLES;
pub use crate::bench::rate::{parse_latency, Rate, RateRequest, Rates};
pub use crate::bench::result::MapMode;
pub use crate::dma::cpu::Kind;
pub use crate::dma::engines::qdma::st::{Design, Mode as QdmaMode};
pub use crate::dma::engines::qdma::{CmptTrigger, QdmaIntr};
pub use crate::dma::BufferSource;
/// The engine to drive and how to open it (`dma`, `latency`, the suite's DMA part).
pub use crate::session::EngineRequest;

/// One measurement: `pcibench pio`, `dma`, `latency`, `buffers`, or the suite (`run`, itself a
/// list of requests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Request {
    Pio(PioRequest),
    Dma(DmaRequest),
    Latency(LatencyRequest),
    Buffers(BuffersRequest),
    Run(RunRequest),
    Memtest(MemtestRequest),
}

/// `pcibench memtest` (docs/memtest.md): the card memory an engine reaches, filled, read back
/// and checked, then the aliasing pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemtestRequest {
    pub device: Target,
    pub via: Option<Via>,
    pub engine: EngineRequest,
    /// Where the region starts in the engine's window (`--offset`; None: its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Bytes to test (`--size`; None: the rest of the window, the design's declared size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Bytes per transfer and host buffer (`--chunk`; None: up to 64 MiB, less where memory is short).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<u64>,
    pub timeout_ms: u64,
    /// Consent to DMA on a real device.
    pub allow_dma: bool,
    #[serde(flatten)]
    pub common: Common,
}

/// What every request carries besides its own choices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Common {
    /// `--cpu`: pin the measuring thread to this CPU (None: a CPU of the device's NUMA node
    /// when sysfs names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The command line, for the report's context.
    #[serde(default)]
    pub command_line: Vec<String>,
}

/// Copy routines (`--width`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Widths {
    /// Every routine there is: one this CPU or path lacks becomes a skipped row with the reason.
    All,
    /// These: one that cannot run here is refused before anything runs.
    These(Vec<Width>),
}

/// `pcibench pio`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PioRequest {
    pub device: Target,
    pub via: Option<Via>,
    /// None: every memory BAR that holds no DMA engine's registers.
    pub bars: Option<Vec<u8>>,
    /// Empty: every mapping (one the path cannot give becomes a skipped row).
    pub maps: Vec<MapMode>,
    pub dirs: Vec<Direction>,
    pub widths: Widths,
    /// Empty: the whole BAR from `offset`.
    pub sizes: Vec<u64>,
    /// Bytes per configuration.
    pub total: u64,
    /// `total` is the default, not the user's: each row also stops once its samples took
    /// `sampler::ROW_BUDGET_NS` (issue 43). Absent in older saved runs: a total kept whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub total_by_time: bool,
    /// Each row stops once its samples took this long (with `stats::MIN_SAMPLES` of them), whatever
    /// the total: the suite's own sizing on a simulated card (issue 52). None: `total_by_time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_budget_ms: Option<u64>,
    pub offset: u64,
    pub io: IoMode,
    /// Consent to write the BARs of a real device.
    pub allow_write: bool,
    #[serde(flatten)]
    pub common: Common,
}

/// `--dir` of `dma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmaDirs {
    H2c,
    C2h,
    /// h2c, then c2h.
    Both,
    /// Both directions at the same time.
    Bidir,
    /// h2c, c2h, then both at once.
    All,
}

/// `--pattern`: where transfers go in the host buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmaPattern {
    Seq,
    Random,
}

/// The transfer size when a DMA request names none. Both start from the one default
/// (`measure::dma::default_size`: the engine's card window from the card offset, at most 16 MiB, up to its largest
/// transfer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DefaultSize {
    /// The default itself: the card memory, as fpga_sio's DMA test moves it, up to 16 MiB.
    #[default]
    Window,
    /// The suite's quick look, one row per direction: engines that keep many transfers in
    /// flight at 1 MiB at most (their whole window would be a handful of samples), and no more
    /// than the total (whole 4 KiB pages).
    Quick,
}

/// `--completion`: how the CPU learns a transfer completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompletionMode {
    /// The engine's own loop reads its status or writeback (the default).
    Poll,
    /// The engine's completion interrupt, as its vendor's driver arms and services it.
    Irq,
    /// Both, rows side by side.
    Both,
}

impl CompletionMode {
    /// The ways measured, in row order.
    pub fn completions(self) -> Vec<crate::bench::result::Completion> {
        use crate::bench::result::Completion::{Irq, Poll};
        match self {
            CompletionMode::Poll => vec![Poll],
            CompletionMode::Irq => vec![Irq],
            CompletionMode::Both => vec![Poll, Irq],
        }
    }
}

/// `pcibench dma`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DmaRequest {
    pub device: Target,
    pub via: Option<Via>,
    pub engine: EngineRequest,
    pub dirs: DmaDirs,
    /// Queue counts to measure (empty: one queue).
    pub queues: Vec<u16>,
    pub pattern: DmaPattern,
    /// The host window of `--pattern random` (None: 1 GiB, less where memory is short).
    pub window: Option<u64>,
    /// Empty: see `default_size`.
    pub sizes: Vec<u64>,
    #[serde(default)]
    pub default_size: DefaultSize,
    /// Bytes per direction and size (None: the engine's default for the first size).
    pub total: Option<u64>,
    /// Each row stops once its samples took this long (with `stats::MIN_SAMPLES` of them), whatever
    /// the total: the suite's own sizing on a simulated card (issue 52). None: as `total` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_budget_ms: Option<u64>,
    pub timeout_ms: u64,
    /// Consent to start DMA on a real device.
    pub allow_dma: bool,
    /// `--completion` (None: polling, rows unlabelled, as before the option; absent in older
    /// saved runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionMode>,
    /// The interrupt kind to route for completion by interrupt (`--irq-kind`; None: the best the
    /// function has, MSI-X, MSI, INTx).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_kind: Option<IrqKind>,
    /// Submit open loop at offered rates (`--rate`) instead of timing throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateRequest>,
    /// Every stream asked for at once, for a time (`--duration`), instead of one row at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakRequest>,
    #[serde(flatten)]
    pub common: Common,
}

/// `dma --duration` (docs/soak.md): each channel, queue and card at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoakRequest {
    /// How long to run.
    pub duration_ms: u64,
    /// A row per stream this often (`--every`; fpga_sio reports every 10 s).
    pub every_ms: u64,
    /// More cards to run at the same time, beside `device`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<Target>,
    /// XDMA channels to run (`--channels`; None: every memory-mapped channel the card has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<u8>>,
}

/// DMA latency (`latency --dma`, `--completion`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DmaLatencyRequest {
    pub dirs: Vec<Direction>,
    /// Empty: 64 B to 4 KiB within what the engine takes.
    pub sizes: Vec<u64>,
    /// `--completion` (None: polling, or `irq` below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionMode>,
    /// Saved runs before `--completion`: `--irq` measured polling and MSI side by side. Read so
    /// those files mean what they meant; never written.
    #[serde(default, skip_serializing)]
    pub irq: bool,
    /// The interrupt kind to route for completion by interrupt (None: the best the function has,
    /// MSI-X, MSI, INTx).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_kind: Option<IrqKind>,
    /// Samples per row (None: the engine's default total over the size, at most 10000).
    pub samples: Option<u64>,
    /// Submit open loop at offered rates (`--rate`), each latency from its due time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateRequest>,
}

impl DmaLatencyRequest {
    /// The ways to see completion it asks for.
    pub fn mode(&self) -> CompletionMode {
        self.completion.unwrap_or(if self.irq { CompletionMode::Both } else { CompletionMode::Poll })
    }
}

/// Reads under DMA load (`latency --load`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRequest {
    pub modes: Vec<LoadMode>,
    /// Bytes per load transfer (None: 1 MiB, or what the engine and half its window take).
    pub size: Option<u64>,
    /// The load thread's CPU (None: one other than the measuring thread's).
    pub cpu: Option<u32>,
    /// Hold the load at this rate in each direction it streams (`--load-rate`; None: flat out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// `pcibench latency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRequest {
    pub device: Target,
    pub via: Option<Via>,
    /// None: the first memory BAR.
    pub bar: Option<u8>,
    pub offset: u64,
    /// None: 32-bit reads.
    pub widths: Option<Widths>,
    /// Also time write-then-read (consent on a real device).
    pub allow_write: bool,
    pub samples: u64,
    /// `samples` is the default, not the user's: each row also stops once its samples took
    /// `sampler::ROW_BUDGET_NS` (issue 43). Absent in older saved runs: a count kept whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub samples_by_time: bool,
    /// None: 1% of the samples, 1 to 1000.
    pub warmup: Option<u64>,
    pub dma: Option<DmaLatencyRequest>,
    pub load: Option<LoadRequest>,
    /// The engine for `dma` and `load`.
    pub engine: EngineRequest,
    pub timeout_ms: u64,
    pub allow_dma: bool,
    #[serde(flatten)]
    pub common: Common,
}

/// `pcibench buffers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuffersRequest {
    /// Also the DMA buffers of this device.
    pub device: Option<Target>,
    /// Empty: every kind this host has (those it cannot give become skipped lines).
    pub kinds: Vec<Kind>,
    /// Bytes per access (None: the whole u-dma-buf, 16 MiB for the others).
    pub size: Option<u64>,
    /// Bytes per configuration (None: 16 accesses).
    pub total: Option<u64>,
    pub widths: Vec<Width>,
    #[serde(flatten)]
    pub common: Common,
}

/// `pcibench run`: the suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub device: Target,
    pub allow_write: bool,
    pub allow_dma: bool,
    /// Bytes per configuration (None: 64 MiB on a simulated card; on a real device 4 MiB for
    /// PIO and the engine's own default for DMA).
    pub total: Option<u64>,
    #[serde(flatten)]
    pub common: Common,
}

impl Request {
    /// The command that asks for it: pio, dma, latency, buffers, run or memtest.
    pub fn command(&self) -> &'static str {
        match self {
            Request::Pio(_) => "pio",
            Request::Dma(_) => "dma",
            Request::Latency(_) => "latency",
            Request::Buffers(_) => "buffers",
            Request::Run(_) => "run",
            Request::Memtest(_) => "memtest",
        }
    }

    /// The device it measures (None: host memory only).
    pub fn device(&self) -> Option<&Target> {
        match self {
            Request::Pio(r) => Some(&r.device),
            Request::Dma(r) => Some(&r.device),
            Request::Latency(r) => Some(&r.device),
            Request::Buffers(r) => r.device.as_ref(),
            Request::Run(r) => Some(&r.device),
            Request::Memtest(r) => Some(&r.device),
        }
    }

    /// The access path asked for (None: the device's default).
    pub fn via(&self) -> Option<Via> {
        match self {
            Request::Pio(r) => r.via,
            Request::Dma(r) => r.via,
            Request::Latency(r) => r.via,
            Request::Memtest(r) => r.via,
            Request::Buffers(_) | Request::Run(_) => None,
        }
    }

    pub fn common(&self) -> &Common {
        match self {
            Request::Pio(r) => &r.common,
            Request::Dma(r) => &r.common,
            Request::Latency(r) => &r.common,
            Request::Buffers(r) => &r.common,
            Request::Run(r) => &r.common,
            Request::Memtest(r) => &r.common,
        }
    }
}

/// `--engine`: the name of an engine pcibench drives, or `sim` for a simulated card's own.
pub fn parse_engine(s: &str) -> crate::Result<String> {
    if s == "sim" || crate::dma::engines::by_name(s).is_some() {
        Ok(s.to_string())
    } else {
        Err(crate::Error::usage(format!("unknown engine '{s}': use one of {}, or sim", crate::dma::engines::names())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common() -> Common {
        Common { cpu: Some(1), command_line: vec!["pcibench".into(), "dma".into()] }
    }

    fn requests() -> Vec<Request> {
        vec![
            Request::Pio(PioRequest {
                device: "sim".parse().unwrap(),
                via: None,
                bars: Some(vec![2]),
                maps: vec![MapMode::Wc],
                dirs: vec![Direction::C2h],
                widths: Widths::All,
                sizes: vec![4096, 8192],
                total: 1 << 20,
                total_by_time: false,
                row_budget_ms: None,
                offset: 0,
                io: IoMode::Mmap,
                allow_write: false,
                common: common(),
            }),
            Request::Dma(DmaRequest {
                device: "0000:15:00.0".parse().unwrap(),
                via: Some(Via::VfioNoiommu),
                engine: EngineRequest {
                    engine: Some("xdma".into()),
                    buffer: Some("reserved:0x10000000,64M".parse().unwrap()),
                    card_size: Some(1 << 20),
                    ..EngineRequest::default()
                },
                dirs: DmaDirs::All,
                queues: vec![1, 4],
                pattern: DmaPattern::Random,
                window: Some(16 << 20),
                sizes: Vec::new(),
                default_size: DefaultSize::Quick,
                total: None,
                row_budget_ms: None,
                timeout_ms: 2000,
                allow_dma: true,
                completion: Some(CompletionMode::Both),
                irq_kind: Some(IrqKind::MsiX),
                rate: Some(RateRequest {
                    rates: Rates::These(vec![Rate::Ops(1e6), Rate::Bytes(2e9)]),
                    until_p99_ns: None,
                }),
                soak: Some(SoakRequest {
                    duration_ms: 60_000,
                    every_ms: 10_000,
                    more: vec!["sim-qdma".parse().unwrap()],
                    channels: Some(vec![0, 2]),
                }),
                common: common(),
            }),
            Request::Latency(LatencyRequest {
                device: "sim-qdma".parse().unwrap(),
                via: None,
                bar: None,
                offset: 0x40,
                widths: Some(Widths::These(vec![Width::B32, Width::V512])),
                allow_write: true,
                samples: 100,
                samples_by_time: false,
                warmup: None,
                dma: Some(DmaLatencyRequest {
                    dirs: vec![Direction::H2c],
                    sizes: vec![64],
                    completion: Some(CompletionMode::Both),
                    irq: false,
                    irq_kind: Some(IrqKind::Intx),
                    samples: None,
                    rate: Some(RateRequest { rates: Rates::Sweep, until_p99_ns: Some(50_000) }),
                }),
                load: Some(LoadRequest {
                    modes: LoadMode::ALL.to_vec(),
                    size: None,
                    cpu: Some(0),
                    rate: Some(Rate::Bytes(6e9)),
                }),
                engine: EngineRequest { qdma_intr: Some(QdmaIntr::Aggregated), ..EngineRequest::default() },
                timeout_ms: 500,
                allow_dma: false,
                common: common(),
            }),
            Request::Buffers(BuffersRequest {
                device: None,
                kinds: vec![Kind::Heap, "u-dma-buf:udmabuf0".parse().unwrap()],
                size: Some(4096),
                total: None,
                widths: vec![Width::Memcpy],
                common: common(),
            }),
            Request::Run(RunRequest {
                device: "sim-nvram".parse().unwrap(),
                allow_write: true,
                allow_dma: false,
                total: Some(1 << 20),
                common: Common::default(),
            }),
        ]
    }

    #[test]
    fn qdma_intr_is_written_only_when_asked_and_older_requests_read() {
        let text = serde_json::to_string(&EngineRequest::default()).unwrap();
        assert!(!text.contains("qdma_intr"), "{text}");
        let asked = EngineRequest { qdma_intr: Some(QdmaIntr::Aggregated), ..EngineRequest::default() };
        assert!(serde_json::to_string(&asked).unwrap().contains(r#""qdma_intr":"aggregated""#));
        let old: EngineRequest = serde_json::from_str(r#"{"engine":"qdma","buffer":null,"dma_bits":null,"card_addr":null,"card_size":null,"channel":null,"ring_size":null}"#).unwrap();
        assert_eq!(old.qdma_intr, None);
    }

    #[test]
    fn requests_read_back_as_written() {
        for r in requests() {
            let text = serde_json::to_string(&r).unwrap();
            let back: Request = serde_json::from_str(&text).unwrap();
            assert_eq!(back, r, "{text}");
        }
        let v = serde_json::to_value(&requests()[1]).unwrap();
        assert_eq!(v["kind"], "dma");
        assert_eq!(v["device"], "0000:15:00.0");
        assert_eq!(v["engine"]["buffer"], "reserved:0x10000000,0x4000000");
        assert_eq!(v["cpu"], 1, "the common part is flat");
    }

    #[test]
    fn a_saved_run_keeps_its_request_and_reads_one_it_cannot_as_none() {
        use crate::results::saved::SavedRun;
        let mut run = SavedRun::new(&crate::host::Host::with_root("/nonexistent"), "run", None, Vec::new(), Vec::new());
        run.request = Some(requests().remove(4));
        let text = serde_json::to_string(&run).unwrap();
        let back: SavedRun = serde_json::from_str(&text).unwrap();
        assert_eq!(back.request, run.request);
        // A request a newer pcibench wrote (a kind this one does not know) is context, not a
        // reason to refuse the file.
        let newer = text.replace("\"kind\":\"run\"", "\"kind\":\"thermal\"");
        let back: SavedRun = serde_json::from_str(&newer).unwrap();
        assert_eq!(back.request, None);
    }

    /// Saved runs from before `--completion`: `"irq": true` meant polling and MSI side by side, a
    /// row's "msi" is completion by interrupt; both still read so.
    #[test]
    fn older_completion_fields_read_as_they_meant() {
        let d: DmaLatencyRequest =
            serde_json::from_str(r#"{"dirs":["h2c"],"sizes":[],"irq":true,"samples":null}"#).unwrap();
        assert_eq!((d.mode(), d.completion), (CompletionMode::Both, None));
        let d: DmaLatencyRequest = serde_json::from_str(r#"{"dirs":["h2c"],"sizes":[],"samples":null}"#).unwrap();
        assert_eq!(d.mode(), CompletionMode::Poll);
        assert!(!serde_json::to_string(&d).unwrap().contains("irq"), "never written");
        let c: crate::bench::result::Completion = serde_json::from_str(r#""msi""#).unwrap();
        assert_eq!(c, crate::bench::result::Completion::Irq);
    }
}
