//! What every measuring command produces: a `Report` of `Row`s, one row per configuration, in one
//! shape whatever measured it (PIO, DMA, and the latency and buffer benchmarks), so each output
//! format (`report::Exporter`) and `compare`/`plot` handle them all. Notes are data here and
//! words in `report/`.

use super::pattern::Mismatch;
use super::sample::stats::Stats;
use crate::access::{IoMode, Mapping, Via};
use crate::direction::Direction;
use crate::dma::Addressing;
use crate::mmio::{MemType, Width};
use serde::{Deserialize, Serialize};

/// The measuring command a report or row comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Pio,
    Dma,
    /// CPU access to DMA buffers (`pcibench buffers`).
    Buffers,
    /// Single-access latency (`pcibench latency`).
    Latency,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Pio => "pio",
            Kind::Dma => "dma",
            Kind::Buffers => "buffers",
            Kind::Latency => "latency",
        }
    }
}

/// `--map`: the memory type, and whether the timed part ends by draining posted writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapMode {
    Uc,
    Wc,
    WcFlush,
}

impl MapMode {
    pub const ALL: [MapMode; 3] = [MapMode::Uc, MapMode::Wc, MapMode::WcFlush];

    pub fn mapping(&self) -> Mapping {
        match self {
            MapMode::Uc => Mapping::Uc,
            MapMode::Wc | MapMode::WcFlush => Mapping::Wc,
        }
    }

    /// fpga_sio's words for it.
    pub fn seed_name(&self) -> &'static str {
        match self {
            MapMode::Uc => "uncached-minus",
            MapMode::Wc => "write-combining",
            MapMode::WcFlush => "write-combining (flush posted writes)",
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            MapMode::Uc => "uc",
            MapMode::Wc => "wc",
            MapMode::WcFlush => "wc-flush",
        }
    }
}

/// Whether the data moved was checked, and how it came out.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Verify {
    Ok,
    Mismatch {
        mismatch: Mismatch,
    },
    /// Nothing known to compare with (reads without permission to write a pattern first).
    Unverified {
        reason: String,
    },
    /// The far end's own checker rejected what it received (a stream design's H2C checker,
    /// which says whether, not where): why, in words.
    Rejected {
        reason: String,
    },
}

/// A remark about a row, as data; `report::notes` puts it in words.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "note", rename_all = "snake_case")]
pub enum Note {
    /// The configuration was not measured.
    Skipped { reason: String },
    /// Samples batched several transfers: one alone is too short to time.
    Batched { transfers: u64, timer_overhead_ns: f64 },
    /// A BAR read back all-ones end to end.
    AllOnes,
    /// The run was stopped (Ctrl-C, SIGTERM) during this row; `engine` is the engine's
    /// status when it was stopped.
    Interrupted { engine: Option<String> },
    /// Too few samples to judge the spread.
    FewSamples { samples: usize },
    /// The samples disagree (coefficient of variation, slowest sample against the median).
    Noisy { cv_pct: f64, min_vs_median: f64 },
    /// Faster than the link model allows: the figure is not what it seems (cached, emulated,
    /// or the model's inputs are wrong).
    AboveLinkModel { efficiency_pct: f64 },
    /// The link's health changed while this row ran: the row is suspect.
    LinkHealth { changes: Vec<String> },
    /// Each engine run kept this many transfers in flight over this many queues.
    InFlight { transfers: u64, queues: u16 },
    /// The engine's own performance counters over the row, as runs saved before `Row::engine`
    /// held them (read, never written now).
    EngineCounters { counters: crate::dma::EngineCounters, bytes: u64, elapsed_s: f64 },
    /// A sync of part of the buffer: what the interface took, or why it failed.
    PartialSync { offset: u64, size: u64, error: Option<String> },
    /// `--trace` wrote `events` lines during this row's timed samples, each costing about
    /// `ns_per_event` (measured once, writing to a file beside the trace): `share_pct` of its time.
    Tracing { events: u64, ns_per_event: f64, share_pct: f64 },
    /// Each access of this row synced the buffer for the CPU and for the device, which cost about
    /// `ns_per_access` (measured once when the buffer was opened): `share_pct` of its time.
    SyncCost { ns_per_access: f64, share_pct: f64 },
}

impl Note {
    /// Notes that make a row's figure untrustworthy as it stands.
    pub fn is_flag(&self) -> bool {
        matches!(
            self,
            Note::FewSamples { .. } | Note::Noisy { .. } | Note::AboveLinkModel { .. } | Note::LinkHealth { .. }
        )
    }
}

/// One configuration: what was measured, how fast, and whether the data arrived intact. Fields
/// that do not apply to a kind of measurement are absent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar: Option<u8>,
    /// The BAR's size (not the transfer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapMode>,
    /// The memory type behind the mapping or buffer the copy routine ran on (what picked its
    /// loads, `mmio::MemType`): the mapping's own on a real BAR, write-back on the sim card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<MemType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoMode>,
    pub dir: Direction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<Width>,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// DMA: queues the transfers were spread over (engines with queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u16>,
    /// DMA: packets at random offsets in a host window of this many bytes (absent: sequential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// DMA: measured while the other direction ran at the same time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub concurrent: bool,
    /// Buffer access (`pcibench buffers`): the buffer, the way in, the coherence mode, the memory
    /// type that gives, and the access's parts (medians).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<crate::dma::cpu::Access>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<crate::dma::cpu::Sync>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Parts>,
    pub stats: Option<Stats>,
    /// Latency runs: per-access figures from a log-linear histogram, and its CDF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyFigures>,
    /// Latency runs: what one sample timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// Latency of DMA: how the CPU learned that a transfer completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    /// Latency measured while an engine streamed DMA on another thread: that load and its
    /// throughput over the same time (absent: the device was idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadFigures>,
    /// Transfers submitted open loop at a rate (`--rate`): what was offered and what came of it;
    /// the row's `latency` is then measured from each transfer's scheduled submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateFigures>,
    /// The link model's limit for this direction and size, where a PCIe link bounds the figure.
    pub limit_mbps: Option<f64>,
    pub efficiency_pct: Option<f64>,
    /// None when the row was not measured.
    pub verify: Option<Verify>,
    /// SHA-256 of the pattern the device holds at [offset, offset+size) after a row that wrote
    /// it, so an independent reader (the lab's host side) can check the card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_sha256: Option<String>,
    /// DMA: the engine's own figures from its performance counters, beside the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<super::counters::EngineFigures>,
    /// Stream DMA (XDMA AXI4-Stream, QDMA ST): the bytes of one packet (a transfer is one or
    /// more equal packets) and the packets per second at the median (absent elsewhere, and in
    /// runs saved before streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets_per_s: Option<f64>,
    /// DMA: engine settings that shape the row's figures and that the engine did not choose
    /// (`Engine::settings`: QDMA's writeback interval, whatever the previous driver left), by
    /// name, as read when the row ran.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub engine_settings: std::collections::BTreeMap<String, String>,
    /// A soak's stream (`dma --duration`): "sim ch1 h2c"; its figures span the run, one sample
    /// per reporting interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    pub notes: Vec<Note>,
    /// What the row's timed samples reported to a `--trace`, for the note on its cost (set by
    /// the sampler's figures; not saved: the note is).
    #[serde(skip)]
    pub traced: Option<Traced>,
}

/// A row's traced events and the time its samples took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traced {
    pub events: u64,
    pub secs: f64,
}

impl Row {
    /// A row for `dir` and `size` with nothing measured yet.
    pub fn new(dir: Direction, size: u64) -> Row {
        Row {
            bar: None,
            bar_size: None,
            map: None,
            mem: None,
            io: None,
            dir,
            width: None,
            size,
            offset: None,
            queues: None,
            window: None,
            concurrent: false,
            buffer: None,
            access: None,
            sync: None,
            memory: None,
            parts: None,
            stats: None,
            latency: None,
            probe: None,
            completion: None,
            load: None,
            rate: None,
            limit_mbps: None,
            efficiency_pct: None,
            verify: None,
            pattern_sha256: None,
            engine: None,
            packet_bytes: None,
            packets_per_s: None,
            engine_settings: Default::default(),
            stream: None,
            notes: Vec::new(),
            traced: None,
        }
    }

    pub fn mismatch(&self) -> Option<&Mismatch> {
        match &self.verify {
            Some(Verify::Mismatch { mismatch }) => Some(mismatch),
            _ => None,
        }
    }

    /// Why the far end's checker rejected the row's data, if it did.
    pub fn rejected(&self) -> Option<&str> {
        match &self.verify {
            Some(Verify::Rejected { reason }) => Some(reason),
            _ => None,
        }
    }

    pub fn skipped(&self) -> bool {
        self.notes.iter().any(|n| matches!(n, Note::Skipped { .. }))
    }

    /// The link's health changed during the row.
    pub fn suspect(&self) -> bool {
        self.notes.iter().any(|n| matches!(n, Note::LinkHealth { .. }))
    }

    /// Million transfers per second at the median rate.
    pub fn mops(&self) -> Option<f64> {
        self.stats.as_ref().filter(|_| self.size > 0).map(|s| s.median_mbps / self.size as f64)
    }

    /// Millions of operations a second as the DMA table shows them: packets on a stream (a
    /// transfer over 28 KiB is several on QDMA), transfers elsewhere (issue 50 item 14).
    pub fn ops_mops(&self) -> Option<f64> {
        self.packets_per_s.map(|p| p / 1e6).or_else(|| self.mops())
    }

    /// Fill statistics, the link model's limit and efficiency (of the median) and the flags
    /// from what the sampler found. `limit_mbps` is None where no PCIe link bounds the figure.
    pub fn measured(&mut self, sampled: &super::sample::sampler::Sampled, limit_mbps: Option<f64>, overhead_ns: f64) {
        if sampled.samples.batch > 1 {
            self.notes.push(Note::Batched { transfers: sampled.samples.batch, timer_overhead_ns: overhead_ns });
        }
        self.stats = sampled.samples.stats();
        self.traced = Some(Traced { events: sampled.traced, secs: sampled.samples.timed_secs() });
        self.limit_mbps = limit_mbps;
        self.efficiency_pct = match (&self.stats, limit_mbps) {
            (Some(st), Some(l)) if l > 0.0 => Some(st.median_mbps / l * 100.0),
            _ => None,
        };
        if let Some(st) = &self.stats {
            for q in st.quality() {
                self.notes.push(match q {
                    super::sample::stats::Quality::FewSamples { samples } => Note::FewSamples { samples },
                    super::sample::stats::Quality::Noisy { cv_pct, min_vs_median } => {
                        Note::Noisy { cv_pct, min_vs_median }
                    }
                });
            }
        }
        if let Some(e) = self.efficiency_pct.filter(|e| *e > 100.0) {
            self.notes.push(Note::AboveLinkModel { efficiency_pct: e });
        }
        if !sampled.health.is_empty() {
            self.notes.push(Note::LinkHealth { changes: sampled.health.clone() });
        }
    }
}

/// What a latency row found: single accesses, never batched, timed one by one with the timer's
/// own cost subtracted, kept in a log-linear histogram (bounded memory whatever the count).
/// Nanoseconds throughout. `cdf` is the histogram as (latency ns, fraction of samples at or
/// below it) points in increasing order, for plots.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LatencyFigures {
    /// Samples in the histogram (warm-up excluded).
    pub samples: u64,
    /// Accesses run first and discarded (caches, TLB, the engine's first descriptor fetch).
    pub warmup: u64,
    /// The timer's own cost per reading pair, subtracted from every sample.
    pub overhead_ns: f64,
    /// The clock: "rdtsc (invariant TSC, N MHz)" or "CLOCK_MONOTONIC (vDSO)".
    pub clock: String,
    pub min_ns: f64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub p9999_ns: f64,
    pub max_ns: f64,
    /// Samples above 3x p95 (as pcie-bench counts outliers).
    pub outliers: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdf: Vec<[f64; 2]>,
}

/// What one latency sample timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    /// One read of `width` at a BAR offset: a non-posted request and its completion.
    MmioRead,
    /// A posted write of `width`, then a read of the same offset, which cannot pass the write
    /// (PCIe ordering): the write's delivery and the read's round trip.
    WriteRead,
    /// One DMA transfer of `size` bytes, from submission to the CPU seeing it complete.
    Dma,
}

impl Probe {
    pub fn name(&self) -> &'static str {
        match self {
            Probe::MmioRead => "mmio-read",
            Probe::WriteRead => "write-read",
            Probe::Dma => "dma",
        }
    }
}

/// How the CPU learns that a DMA transfer completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Completion {
    /// The engine's own loop reads its status until it reports the transfer done.
    Poll,
    /// The thread sleeps until the device's interrupt arrives (MSI-X, MSI or INTx through an
    /// eventfd) and the engine's handler services it. Saved runs before `--completion` called
    /// it "msi" (edu's MSI was the only one): they still read.
    #[serde(alias = "msi")]
    Irq,
}

impl Completion {
    pub fn name(&self) -> &'static str {
        match self {
            Completion::Poll => "poll",
            Completion::Irq => "irq",
        }
    }
}

/// An open-loop row (`--rate`): transfers submitted on a schedule whatever became of the ones
/// before, each one's latency counted from when it was due (no coordinated omission).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RateFigures {
    /// Transfers a second the schedule asked for.
    pub offered_ops: f64,
    /// Transfers completed a second, from the first one's scheduled time to the last completion.
    pub achieved_ops: f64,
    /// Bytes (10^6) a second those moved.
    pub achieved_mbps: f64,
    /// Transfers the schedule held, posted, and completed.
    pub scheduled: u64,
    pub posted: u64,
    pub completed: u64,
    /// Posted more than `LATE_NS` after they were due while the card had room: the host did not
    /// keep the schedule (their latency counts the delay all the same).
    pub late: u64,
    /// The most a transfer was posted behind its time for the host's sake, ns.
    pub worst_lag_ns: f64,
    /// Never posted: the row's time ran out (the card fell that far behind) or it was stopped.
    pub dropped: u64,
    /// The open loop's own cost per transfer on this host (post, reap, clock, record), ns.
    pub loop_ns: f64,
    /// The engine posts transfers without waiting (false: each waited for the one before, so
    /// the rate it keeps is bounded by its closed loop).
    pub posted_ahead: bool,
}

impl RateFigures {
    /// Late posts past 1% of those posted: the host, not the card, limited the row.
    pub fn host_limited(&self) -> bool {
        self.late * 100 > self.posted.max(1)
    }
}

/// The DMA an engine streamed on a thread of its own while a latency row was measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadFigures {
    pub engine: String,
    /// The directions streamed (both: h2c and c2h).
    pub dirs: Vec<Direction>,
    /// Both directions at once in one batch (engines with queues); false: one transfer at a
    /// time, alternating when both directions are streamed.
    pub concurrent: bool,
    /// Bytes per transfer.
    pub size: u64,
    /// Throughput per direction over the load's whole run (which spans the row), MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2c_mbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2h_mbps: Option<f64>,
    /// Transfers the load completed, and over how long.
    pub transfers: u64,
    pub elapsed_s: f64,
    /// The CPU the load thread was pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The rate the load was held at in each direction (`--load-rate`), MB/s; absent: flat out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_mbps: Option<f64>,
}

impl LoadFigures {
    /// "h2c", "c2h" or "both".
    pub fn label(&self) -> String {
        match self.dirs.as_slice() {
            [d] => d.to_string(),
            _ => "both".into(),
        }
    }
}

/// The parts of one buffer access, medians over the samples, microseconds (seed 003's
/// `time=TOTAL sec (MAIN sec)`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Parts {
    pub sync_for_cpu_us: f64,
    pub main_us: f64,
    pub sync_for_device_us: f64,
    pub total_us: f64,
}

/// One buffer's facts for the report (size, physical address, coherence, ...).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferFacts {
    pub name: String,
    /// What kind of buffer it is (`u-dma-buf`, `udmabuf`, `heap`, ...) and the file it is
    /// reached through, where it has one (`/dev/udmabuf0`): a real u-dma-buf is named as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub facts: Vec<(String, String)>,
    /// Why this buffer was not measured (it could not be had on this host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Everything one measuring command found, for one device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub kind: Kind,
    pub device: String,
    pub simulated: bool,
    pub via: Via,
    /// DMA: the engine, what the card was given as addresses, and the buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressing: Option<Addressing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    pub timer_overhead_ns: f64,
    /// Why rows carry no link limit or efficiency, when they do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_note: Option<String>,
    /// Where and how it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<super::context::Context>,
    pub results: Vec<Row>,
    /// Buffer access: each buffer's facts (size, physical address, coherence, sync mode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buffers: Vec<BufferFacts>,
    /// DMA: false when the engine has no performance counters (edu, umem, the NVRAM), so no
    /// row has the card's own figures; absent when it has them (or for other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_counters: Option<bool>,
    /// The card stopped answering mid-run: the one line saying so (what read all-ones, the
    /// upstream port's state then, what to run). The rows cover what was measured before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone: Option<String>,
    /// A stop request ended the run early; the rows cover what was measured before it.
    pub interrupted: bool,
    pub warnings: Vec<String>,
    /// Latency with `--completion irq|both`: the interrupt's own cost to this process, an
    /// eventfd wake to user space, timed on this host beside the rows (`bench::latency::wake`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_wake: Option<WakeFigures>,
    /// `--completion irq|both`: the interrupts the rows completed by, as the access path routed
    /// them ("MSI-X, 2 vectors (VFIO eventfds)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupts: Option<String>,
    /// `dma --duration`: the streams, each interval's figures, aggregates, fairness and errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<super::soak::figures::Soak>,
    /// `pcibench memtest`: the passes over the card memory, bad ranges and the size that answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memtest: Option<super::memtest::figures::Memtest>,
}

/// An eventfd signalled from another thread, until the thread asleep on it runs again: what
/// every interrupt costs this process after the kernel (or the sim card) signals it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct WakeFigures {
    pub samples: u64,
    pub min_ns: f64,
    pub p50_ns: f64,
    pub max_ns: f64,
}

impl Report {
    pub fn new(kind: Kind, device: &str, simulated: bool, via: Via, timer_overhead_ns: f64) -> Report {
        Report {
            kind,
            device: device.to_string(),
            simulated,
            via,
            engine: None,
            addressing: None,
            buffer: None,
            timer_overhead_ns,
            limit_note: None,
            context: None,
            results: Vec::new(),
            buffers: Vec::new(),
            engine_counters: None,
            gone: None,
            interrupted: false,
            warnings: Vec::new(),
            irq_wake: None,
            interrupts: None,
            soak: None,
            memtest: None,
        }
    }

    /// Some row's data did not verify.
    pub fn mismatched(&self) -> bool {
        self.results.iter().any(|r| r.mismatch().is_some() || r.rejected().is_some())
    }

    /// Rows that were measured (have statistics, or latency figures with samples).
    pub fn measured(&self) -> usize {
        self.results.iter().filter(|r| r.stats.is_some() || r.latency.as_ref().is_some_and(|l| l.samples > 0)).count()
    }
}
