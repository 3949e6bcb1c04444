//! DMA: host buffers the card can reach (`buffers`), the same buffers as the CPU sees them
//! (`cpu`, for `pcibench buffers`), and drivers for card DMA engines (`engines`).

pub mod buffers;
pub mod cpu;
pub mod engines;
pub mod watchdog;

pub use crate::direction::Direction;
use crate::{Error, Result};
use serde::Serialize;
use std::time::Duration;

/// What `--buffer` takes for DMA, as `--help` and the parse error list it: one word per
/// `BufferSource` variant (`from_str` matches these; a test holds the two together).
pub const BUFFER_SOURCES: &[&str] = &["heap", "hugepage", "u-dma-buf:NAME", "reserved:START,SIZE"];

/// `--buffer`: where DMA buffers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferSource {
    /// Page-aligned anonymous memory.
    Heap,
    /// 2 MiB hugepages (heap with a note when none are reserved).
    Hugepage,
    /// A u-dma-buf device `/dev/NAME`: reserved, physically contiguous memory.
    UDmaBuf(String),
    /// Physical memory the kernel was told to leave alone (`memmap=SIZE$START`), mapped through
    /// /dev/mem: `reserved:START,SIZE`, page-aligned. `force` (`dma --force`) takes a Reserved
    /// range of /proc/iomem that no memmap=/reserve= on the kernel command line reserved.
    Reserved { start: u64, size: u64, force: bool },
}

serde_as_text!(BufferSource);

impl std::fmt::Display for BufferSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BufferSource::Heap => f.write_str("heap"),
            BufferSource::Hugepage => f.write_str("hugepage"),
            BufferSource::UDmaBuf(n) => write!(f, "u-dma-buf:{n}"),
            BufferSource::Reserved { start, size, .. } => write!(f, "reserved:{start:#x},{size:#x}"),
        }
    }
}

impl std::str::FromStr for BufferSource {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "heap" => Ok(BufferSource::Heap),
            "hugepage" => Ok(BufferSource::Hugepage),
            _ if s.starts_with("reserved:") => parse_reserved(s),
            _ => match s.strip_prefix("u-dma-buf:") {
                Some(name) if !name.is_empty() && !name.contains('/') => Ok(BufferSource::UDmaBuf(name.to_string())),
                _ => Err(Error::usage(format!(
                    "invalid buffer '{s}': use {} (e.g. u-dma-buf:udmabuf0, reserved:0x10000000,64M)",
                    crate::text::or_list(BUFFER_SOURCES)
                ))),
            },
        }
    }
}

/// `reserved:START,SIZE`: both page-aligned (the range is mapped through /dev/mem a page at a
/// time at the least), non-empty, and not wrapping around.
fn parse_reserved(s: &str) -> Result<BufferSource> {
    let bad =
        |why: &str| Error::usage(format!("--buffer {s}: {why}; e.g. reserved:0x10000000,64M (memmap=64M$0x10000000)"));
    let (a, b) = s["reserved:".len()..].split_once(',').ok_or_else(|| bad("give START,SIZE"))?;
    let start = crate::units::parse_size(a.trim()).map_err(|_| bad("START is not an address"))?;
    let size = crate::units::parse_size(b.trim()).map_err(|_| bad("SIZE is not a size"))?;
    let page = crate::os::mmap::page_size() as u64;
    if size == 0 || start.checked_add(size).is_none() {
        return Err(bad("the range is empty or wraps past the top of the address space"));
    }
    if start % page != 0 || size % page != 0 {
        return Err(bad(&format!(
            "START {start:#x} and SIZE {size:#x} must both be multiples of the {page}-byte page (they are mapped through /dev/mem)"
        )));
    }
    Ok(BufferSource::Reserved { start, size, force: false })
}

/// What the card is given as the buffer's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Addressing {
    /// An I/O virtual address mapped in the IOMMU (VFIO type1).
    Iova,
    /// A CPU physical address (no IOMMU).
    Physical,
    /// The sim card's own address space (process virtual addresses it may touch).
    Sim,
}

/// A bus-contiguous piece of a buffer: `len` bytes at buffer offset `offset` are at bus `bus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub offset: u64,
    pub bus: u64,
    pub len: u64,
}

/// Host memory a card can reach.
///
/// The contract the runners' views of the bytes rely on (`bench::dma::bytes`): the buffer owns
/// `len()` bytes at `as_ptr()`, valid for as long as it lives, and the device writes them only
/// while an engine runs a transfer on it.
pub trait DmaBuffer: Send + Sync {
    fn as_ptr(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bus-contiguous segments covering the buffer in order (one for IOVA mappings and
    /// hugepage-backed physical buffers, one per page for scattered physical pages).
    fn segments(&self) -> &[Segment];
    fn addressing(&self) -> Addressing;
    /// How it was made, e.g. "vfio-mapped heap", "locked hugepage (physical)", "u-dma-buf udmabuf0".
    fn describe(&self) -> String;
    /// Whether the card's addresses still name this buffer's memory: a no-IOMMU buffer of
    /// movable pages re-reads its frame numbers and fails with "a buffer page moved" when one
    /// changed; every other buffer cannot move under the card and says Ok.
    fn still_in_place(&self) -> crate::Result<()> {
        Ok(())
    }
    /// The bus address of byte `offset` when `[offset, offset+len)` is bus-contiguous.
    fn bus_range(&self, offset: u64, len: u64) -> Option<u64> {
        self.segments()
            .iter()
            .find(|s| offset >= s.offset && offset + len <= s.offset + s.len)
            .map(|s| s.bus + (offset - s.offset))
    }
}

/// One transfer an engine is asked to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Transfer {
    pub dir: Direction,
    pub buf_offset: u64,
    pub card_addr: u64,
    pub len: u64,
}

/// One transfer of a batch: the buffer it uses, what it moves, and which of the engine's queues
/// (or channels) carries it.
#[derive(Clone, Copy)]
pub struct Work<'a> {
    pub buf: &'a dyn DmaBuffer,
    pub t: Transfer,
    pub queue: u16,
}

/// What an engine's own performance counters saw in one direction (where it has them): a
/// hardware-side count to set beside the bytes pcibench timed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct EngineCounters {
    pub dir: Direction,
    /// Engine clock cycles counted while the counters ran.
    pub cycles: u64,
    /// Data beats (datapath-wide transfers) the engine counted.
    pub beats: u64,
    /// Bytes one data beat carries (the datapath width), where the engine says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat_bytes: Option<u32>,
    /// The engine's user clock in Hz, where it is known (the simulated cards'); a real card's
    /// clock is its design's, which no register reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_hz: Option<f64>,
    /// A counter saturated (its "maxed" bit): the counts are lower bounds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub maxed: bool,
    /// The counters cover the last engine run only, from its start to its last descriptor, and
    /// count only while the engine ran (XDMA's auto mode clears them whenever the channel's run
    /// bit rises); otherwise they cover every run since `counters_start`, counting throughout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_run: bool,
}

impl EngineCounters {
    /// Counters with nothing known beyond the two counts.
    pub fn counts(dir: Direction, cycles: u64, beats: u64) -> EngineCounters {
        EngineCounters { dir, cycles, beats, beat_bytes: None, clock_hz: None, maxed: false, last_run: false }
    }
}

/// A driver for a card's DMA engine.
///
/// `prepare` does the per-transfer setup (descriptor chains) once; `run` starts the prepared
/// transfer and polls it to completion, so a benchmark times `run` alone. Engines with several
/// queues also take a batch of transfers spread over them (`prepare_batch`), which one `run`
/// moves together; the defaults describe an engine that runs one transfer at a time.
pub trait Engine: Send {
    fn name(&self) -> &'static str;
    /// Bytes of card memory the engine can reach (the default transfer size).
    fn card_size(&self) -> u64;
    /// Largest single transfer the engine takes.
    fn max_transfer(&self) -> u64;
    /// Whether the card window is the user's to set (`--card-size`): where the engine's design
    /// decides how much memory is behind it (XDMA, QDMA). An engine whose window is fixed or read
    /// from the card (edu's buffer, the NVRAM's size) says no, and messages do not suggest it.
    fn card_size_settable(&self) -> bool {
        false
    }
    /// Bytes to move per direction and size when the user gives no `--total` (64 MiB, as
    /// fpga_sio; slow engines ask for less).
    fn default_total(&self, size: u64) -> u64 {
        let _ = size;
        64 << 20
    }
    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()>;
    fn run(&mut self, timeout: Duration) -> Result<()>;
    /// Stop the engine now (timeout, Ctrl-C); returns its decoded status.
    fn stop(&mut self) -> Result<String>;
    /// What the engine noticed since the last call that fails nothing but the user should know
    /// (an error bit it does not watch, a corrected ECC event), in words; taken once.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Whether each transfer is a packet on a stream (XDMA AXI4-Stream channels): reports then
    /// give packets per second beside MB/s.
    fn packets(&self) -> bool {
        false
    }
    /// The transfers of a batch start this many bytes apart at least, on the host and the card
    /// (each size rounded up to it): an XDMA stream's C2H buffers are whole multiples of 64 bytes
    /// (PG195 "Length Granularity"), so its packets start on 64-byte boundaries. 1: no rule.
    fn transfer_align(&self) -> u64 {
        1
    }
    /// Queues (or channels) the engine was opened with: `Work::queue` is below this.
    fn queues(&self) -> u16 {
        1
    }
    /// Most transfers one `run` takes (1: one transfer at a time).
    fn max_batch(&self) -> usize {
        1
    }
    /// Prepare transfers that one `run` moves together, each on its queue. The default takes
    /// a batch of one transfer on queue 0, which is what single-transfer engines run.
    fn prepare_batch(&mut self, work: &[Work]) -> Result<()> {
        match work {
            [w] if w.queue == 0 => self.prepare(w.buf, &w.t),
            _ => Err(Error::Unsupported(format!(
                "the {} engine runs one transfer at a time on one queue; this batch has {} transfers",
                self.name(),
                work.len()
            ))),
        }
    }
    /// Whether the engine can post a transfer without waiting for it (`post`) and report
    /// completions separately (`reap`): what an open loop at a rate (`--rate`) needs. An engine
    /// that cannot runs one transfer per `run`, and the rate it keeps is bounded by that closed
    /// loop. QDMA's rings can (several transfers in flight per queue).
    fn posts(&self) -> bool {
        false
    }
    /// Post the transfer `prepare_batch` prepared for `queue` once more, without waiting for it:
    /// Ok(false) when its ring has no room until completions are reaped (the card is behind).
    fn post(&mut self, queue: u16) -> Result<bool> {
        let _ = queue;
        Err(Error::Unsupported(format!(
            "the {} engine runs one transfer at a time: it cannot post transfers without waiting for each",
            self.name()
        )))
    }
    /// Add the transfers completed since the last call to `done[queue]` (each queue completes in
    /// the order it was posted); never waits. An error the engine logged fails it.
    fn reap(&mut self, done: &mut [u32]) -> Result<()> {
        let _ = done;
        Err(Error::Unsupported(format!("the {} engine has no posted transfers to reap", self.name())))
    }
    /// Whether `run_interrupt` can wait for this engine's completion interrupt.
    fn completes_by_interrupt(&self) -> bool {
        false
    }
    /// The interrupts this engine completes by: what it asks the access path for (the kind its
    /// vendor driver chooses, and a vector per channel or queue it signals on).
    fn irq_request(&self) -> crate::access::IrqRequest {
        crate::access::IrqRequest::any(1)
    }
    /// Run the prepared transfer with the engine's completion interrupt armed and sleep until
    /// `irq` signals it; then check that the engine reports the transfer done (an interrupt
    /// never comes before the completion it signals) and acknowledge the interrupt.
    fn run_interrupt(&mut self, irq: &dyn crate::access::Interrupts, timeout: Duration) -> Result<()> {
        let _ = (irq, timeout);
        Err(Error::Unsupported(format!(
            "the {} engine completes by polling only: pcibench arms no completion interrupt on it (edu has one)",
            self.name()
        )))
    }
    /// Whether `begin_run` returns once the prepared transfer is submitted and `run_done` sees its
    /// end: one thread then keeps several engines moving at once (`bench::soak`, as fpga_sio's
    /// parallel-streams test polls every channel in one loop). XDMA's memory-mapped channels can
    /// (each has its own descriptor engine, PG195); an engine that cannot runs the transfer to
    /// its end in `begin_run`, and says so by answering false.
    fn overlaps(&self) -> bool {
        false
    }
    /// Every channel of this engine's IP that could run beside the one it was opened on (its
    /// direction and index), for a soak to open one engine per channel: XDMA's memory-mapped
    /// channels. Empty: the engine has one way (or its queues, `queues`).
    fn channels(&self) -> Vec<(Direction, u8)> {
        Vec::new()
    }
    /// Submit the prepared transfer; by default run it to its end (`run`).
    fn begin_run(&mut self, timeout: Duration) -> Result<()> {
        self.run(timeout)
    }
    /// Whether the started transfer completed (the engine is then ready to start again); never
    /// waits. A failure, or `timeout` without progress, is an error with the engine's run ended
    /// as `run` ends it.
    fn run_done(&mut self) -> Result<bool> {
        Ok(true)
    }
    /// Clear and start the engine's performance counters before a measured row.
    fn counters_start(&mut self) -> Result<()> {
        Ok(())
    }
    /// What the counters saw since `counters_start`; empty for engines without counters.
    fn counters_read(&mut self) -> Result<Vec<EngineCounters>> {
        Ok(Vec::new())
    }
    /// A stream engine's far end, which makes and checks the data (None: the engine moves data
    /// to and from card memory).
    fn stream_end(&mut self) -> Option<&mut dyn StreamEnd> {
        None
    }
    /// Settings of the card that shape a row's figures and that the engine found rather than
    /// chose, by name (QDMA: the writeback interval, GLBL_DSC_CFG[2:0], part of every open-loop
    /// latency); read once a row, recorded in it. None by default.
    fn settings(&mut self) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(Default::default())
    }
    /// Whether the engine has performance counters at all (edu, umem and the NVRAM have none:
    /// a report says so once).
    fn has_counters(&self) -> bool {
        false
    }
}

/// A stream engine's far end (the vendor's example design): what it sends and accepts, and its
/// own verdict on what it received. The runner asks an engine for one (`Engine::stream_end`):
/// with one, C2H data is the far end's and is compared with `transfer_bytes`, H2C data is
/// `transfer_bytes` and the far end's checker judges it; without, card memory holds the data.
pub trait StreamEnd {
    /// The packets one transfer of `size` bytes is cut into.
    fn packets(&self, size: u64) -> u64;
    /// Host bytes a C2H transfer of `size` bytes takes (whole receive buffers).
    fn c2h_stride(&self, size: u64) -> u64;
    /// Where a C2H transfer of `size` bytes lands in its receive buffers: (offset from the
    /// transfer's first buffer, length) of each packet, in the order of the transfer's bytes.
    fn c2h_pieces(&self, size: u64) -> Vec<(u64, u64)>;
    /// The bytes of a transfer of `size` as the far end generates (C2H) and checks (H2C) them.
    fn transfer_bytes(&self, size: u64) -> Vec<u8>;
    /// Clear the far end's checker before the H2C runs of a row.
    fn clear_checker(&mut self) -> Result<()>;
    /// The checker's verdict on every H2C packet since it was cleared: Ok, or why not.
    fn checker(&mut self) -> Result<std::result::Result<(), String>>;
}

/// Makes buffers a device can reach, on one access path (VFIO type1, no-IOMMU, u-dma-buf, sim).
/// Engines use it for their own descriptor memory as well as the data buffers.
pub trait DmaAllocator: Send + Sync {
    /// A buffer of at least `len` bytes (rounded up to the allocator's granule).
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>>;
    /// Address bits the device can drive (`--dma-bits`); addresses above are refused up front.
    fn dma_bits(&self) -> u32;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list `--help` and the refusal show is what the parser takes: each entry (its
    /// placeholders filled in) parses, each to another kind of buffer, and the refusal names all.
    #[test]
    fn every_listed_buffer_source_parses_and_each_is_another_kind() {
        let filled = |s: &str| s.replace("NAME", "udmabuf0").replace("START,SIZE", "0x10000000,64M");
        let parsed: Vec<BufferSource> = BUFFER_SOURCES.iter().map(|s| filled(s).parse().unwrap()).collect();
        let kinds: std::collections::HashSet<_> = parsed.iter().map(std::mem::discriminant).collect();
        assert_eq!(kinds.len(), BUFFER_SOURCES.len());
        let e = "pinned".parse::<BufferSource>().unwrap_err().to_string();
        assert!(BUFFER_SOURCES.iter().all(|s| e.contains(s)), "{e}");
    }
}
