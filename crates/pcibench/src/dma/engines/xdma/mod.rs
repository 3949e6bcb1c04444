//! A user-space driver for the Xilinx/AMD DMA/Bridge Subsystem for PCI Express (XDMA, PG195):
//! memory-mapped SGDMA channels in poll mode, through any `BarRegion` (sysfs, VFIO, the sim
//! card). Written from PG195's register descriptions (REFERENCE.md has the facts used).
//!
//! The fast path: `prepare` builds and writes the descriptor chain once; each `run` is a fixed
//! handful of register accesses (stop, clear status, writeback address, chain address, control,
//! one flushing read) and then polls the writeback word in host memory, so a run costs the same
//! whatever the chain's length.
//!
//! Where the rest is: `wait.rs` polls a run to its end, `irq.rs` completes one by interrupt (and
//! holds what the memory-mapped and stream drivers share: a channel pair's arming, servicing and
//! poll-mode setup), `stream.rs` drives AXI4-Stream channel pairs, `driver.rs` is the registry
//! entry that picks between them.

pub(super) mod desc;
mod driver;
mod irq;
#[cfg(test)]
mod irq_rule_tests;
#[cfg(test)]
mod irq_tests;
#[cfg(test)]
mod linux_tests;
mod perf;
#[cfg(test)]
mod perf_tests;
pub mod probe;
pub(crate) mod regs;
pub mod stream;
#[cfg(test)]
mod stream_rule_tests;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
pub(super) mod tests;
#[cfg(test)]
mod vendor_tests;
mod wait;

use self::desc::Chain;
use self::regs::*;
use crate::access::BarRegion;
use crate::dma::watchdog::Watchdog;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, EngineCounters, Transfer};
use crate::mmio::Width;
use crate::trace::Tracer;
use crate::{Error, Result};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

pub use self::desc::Chain as XdmaChain;
pub use self::desc::{decode_status, Descriptor};
pub use self::driver::XdmaDriver;
pub use self::probe::{find_dma_bar, is_dma_bar, probe, Interface, XdmaChannel, XdmaInfo};
pub use self::regs::{MIN_DMA_BAR_LEN, XILINX_VENDOR};

/// Card memory of seed 000's dma_blkram design, and of the sim card.
pub const DEFAULT_CARD_SIZE: u64 = 0x12_8000;

/// How often the poll loop also reads the status register, in case the engine stopped on an
/// error without writing back (hardware is not documented to write back on errors).
const STATUS_EVERY: Duration = Duration::from_millis(1);
/// The slowest rate a working XDMA is given per descriptor before its wait calls it hung (a
/// 256 MiB descriptor then has 5.4 s; a Gen1 x1 link moves ~200 MB/s).
const FLOOR_MBPS: u64 = 50;
/// How long a channel may take to go idle after run is cleared (it finishes the descriptor in
/// flight, PG195 control bit 0; one descriptor moves up to 256 MiB) before we call it hung.
const IDLE_WAIT: Duration = Duration::from_secs(2);
/// Upper bound on one chain: 2 MiB of descriptor memory.
const MAX_DESCRIPTORS: usize = 65536;

fn rd(bar: &dyn BarRegion, off: u64) -> Result<u32> {
    Ok(bar.read(off, Width::B32)? as u32)
}

/// Which channel and which window of card memory the engine works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdmaOptions {
    pub channel: u8,
    /// Card (AXI) address of the window (`--card-addr`); `Transfer::card_addr` is an offset in it.
    pub card_addr: u64,
    /// Bytes of card memory in the window (`--card-size`).
    pub card_size: u64,
}

impl Default for XdmaOptions {
    fn default() -> Self {
        XdmaOptions { channel: 0, card_addr: 0, card_size: DEFAULT_CARD_SIZE }
    }
}

/// Driver for one XDMA channel pair (H2C and C2H with the same index).
pub struct XdmaEngine {
    bar: Box<dyn BarRegion>,
    info: XdmaInfo,
    opts: XdmaOptions,
    desc_mem: Box<dyn DmaBuffer>,
    wb_mem: Box<dyn DmaBuffer>,
    wb_bus: u64,
    chain: Option<Chain>,
    /// Where descriptors and writebacks are reported (`--trace`), taken from the BAR.
    trace: Option<Tracer>,
    /// The card's user clock where it is known (the simulated card's): no register reports it.
    user_clock_hz: Option<f64>,
    /// The pair's interrupts, and interrupt mode's registers as found while armed (`irq.rs`).
    irq: irq::PairIrq,
    /// A chain started by `Engine::begin_run`, not yet seen to its end (`wait.rs`).
    pending: Option<wait::Poller>,
}

impl XdmaEngine {
    /// Probe the engine behind `bar` and allocate descriptor and writeback memory from `alloc`
    /// (enough descriptors for a `card_size` transfer over a buffer of scattered 4 KiB pages).
    pub fn new(bar: Box<dyn BarRegion>, alloc: &dyn DmaAllocator, opts: XdmaOptions) -> Result<XdmaEngine> {
        let info = probe(&*bar)?;
        let ch = opts.channel;
        let list = |l: &[XdmaChannel]| l.iter().map(|c| c.index.to_string()).collect::<Vec<_>>().join(",");
        if info.channel(Direction::H2c, ch).is_none() && info.channel(Direction::C2h, ch).is_none() {
            return Err(Error::Unsupported(format!(
                "the XDMA engine in BAR{} has no channel {ch} (H2C channels: [{}], C2H channels: [{}])",
                info.bar,
                list(&info.h2c),
                list(&info.c2h)
            )));
        }
        if opts.card_size == 0 || opts.card_addr.checked_add(opts.card_size).is_none() {
            return Err(Error::usage(format!(
                "card window {:#x} + {:#x} is empty or overflows: give --card-size (and --card-addr) for the card's memory",
                opts.card_addr, opts.card_size
            )));
        }
        let pages = opts.card_size.div_ceil(4096) + 1;
        let wanted = (pages + opts.card_size / MAX_DESC_LEN + 1).min(MAX_DESCRIPTORS as u64) as usize;
        let desc_mem = alloc.alloc(wanted * DESC_BYTES as usize)?;
        let wb_mem = alloc.alloc(64)?;
        let wb_bus = wb_mem
            .bus_range(0, 4)
            .filter(|b| b % 4 == 0 && wb_mem.as_ptr() as usize % 4 == 0)
            .ok_or_else(|| Error::Device("the writeback buffer is not a 4-byte aligned, bus-reachable word".into()))?;
        let trace = bar.tracer().cloned();
        let irq = irq::PairIrq::new(&info, opts.channel);
        let engine = XdmaEngine {
            bar,
            info,
            opts,
            desc_mem,
            wb_mem,
            wb_bus,
            chain: None,
            trace,
            user_clock_hz: None,
            irq,
            pending: None,
        };
        irq::poll_mode(&*engine.bar, &engine.info, engine.opts.channel)?;
        Ok(engine)
    }

    pub fn info(&self) -> &XdmaInfo {
        &self.info
    }

    pub fn options(&self) -> &XdmaOptions {
        &self.opts
    }

    /// The card's user clock, for the performance monitor's figures (the simulated card's;
    /// a real card's is its design's, unknown here).
    pub fn set_user_clock(&mut self, hz: Option<f64>) {
        self.user_clock_hz = hz;
    }

    /// The function's INTx pin (config byte 0x3D), which interrupt mode programs into the vector
    /// fields with INTx (libxdma.c irq_legacy_setup).
    pub fn set_intx_pin(&mut self, pin: u8) {
        self.irq.set_pin(pin);
    }

    /// The prepared chain (what `run` submits), for inspection.
    pub fn chain(&self) -> Option<&Chain> {
        self.chain.as_ref()
    }

    /// Where the descriptors live (for inspection and fault-injection tests).
    pub fn descriptor_memory(&self) -> &dyn DmaBuffer {
        &*self.desc_mem
    }

    fn ch_reg(&self, dir: Direction, r: u32) -> u64 {
        let target = if dir == Direction::H2c { T_H2C } else { T_C2H };
        reg(target, self.opts.channel, r)
    }

    fn sg_reg(&self, dir: Direction, r: u32) -> u64 {
        let target = if dir == Direction::H2c { T_SGDMA + T_H2C } else { T_SGDMA + T_C2H };
        reg(target, self.opts.channel, r)
    }

    fn rd(&self, off: u64) -> Result<u32> {
        rd(&*self.bar, off)
    }

    fn wr(&self, off: u64, v: u32) -> Result<()> {
        self.bar.write(off, Width::B32, v as u64)
    }

    fn prepared(&self) -> Result<&Chain> {
        self.chain.as_ref().ok_or_else(|| Error::usage("XDMA run before prepare: prepare a transfer first"))
    }

    /// Start the prepared chain and return without waiting (the host-side cost of a run).
    pub fn submit(&mut self) -> Result<()> {
        self.submit_with(CONTROL_POLL)
    }

    /// Start the prepared chain with `control` (poll mode's or interrupt mode's).
    fn submit_with(&mut self, control: u32) -> Result<()> {
        let chain = self.prepared()?;
        let (dir, first, adj) = (chain.dir, chain.first, chain.first_adj);
        self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
        if self.rd(self.ch_reg(dir, CH_STATUS_RC))? & ST_BUSY != 0 {
            // Still finishing an earlier run (one that timed out or was stopped): reprogramming
            // now could let its last writeback land in this run's word.
            self.wait_idle(dir)?;
        }
        self.wr(self.ch_reg(dir, CH_WB_LO), self.wb_bus as u32)?;
        self.wr(self.ch_reg(dir, CH_WB_HI), (self.wb_bus >> 32) as u32)?;
        desc::writeback_word(&*self.wb_mem).store(0, Ordering::Relaxed);
        self.wr(self.sg_reg(dir, SG_ADDR_LO), first as u32)?;
        self.wr(self.sg_reg(dir, SG_ADDR_HI), (first >> 32) as u32)?;
        self.wr(self.sg_reg(dir, SG_ADJACENT), adj)?;
        // The zeroed writeback word and the descriptors must be visible before the doorbell.
        fence(Ordering::SeqCst);
        self.wr(self.ch_reg(dir, CH_CONTROL), control)?;
        // A read flushes the posted writes, so the engine is running when we start polling.
        self.rd(self.ch_reg(dir, CH_STATUS))?;
        Ok(())
    }

    /// Wait (bounded) for a channel whose run was just cleared to finish its descriptor in flight.
    fn wait_idle(&self, dir: Direction) -> Result<()> {
        let start = Instant::now();
        loop {
            let status = self.rd(self.ch_reg(dir, CH_STATUS))?;
            if status == u32::MAX {
                self.check_answering(dir)?;
            }
            if status & ST_BUSY == 0 {
                self.rd(self.ch_reg(dir, CH_STATUS_RC))?;
                return Ok(());
            }
            if start.elapsed() >= IDLE_WAIT {
                return Err(Error::Device(format!(
                    "XDMA {dir} channel {} is still busy {IDLE_WAIT:?} after run was cleared (status {}): \
                     the engine is hung; {} and try again",
                    self.opts.channel,
                    decode_status(dir, status),
                    super::reset_the_card(&*self.bar)
                )));
            }
            std::thread::yield_now();
        }
    }

    /// After run is cleared: wait for the channel to finish its descriptor in flight (PG195
    /// control bit 0: the engine completes the current descriptor, up to 256 MiB, before it
    /// stops), so no DMA lands in a buffer the caller is about to release. Bounded by progress:
    /// each descriptor gets the larger of `IDLE_WAIT` and the prepared chain's largest
    /// descriptor at `FLOOR_MBPS`, and the wait goes on while the completed count moves.
    /// Returns the status (read to clear once idle) and whether the channel went idle.
    fn settle(&self, dir: Direction) -> Result<(u32, bool)> {
        let largest =
            self.chain.as_ref().map_or(0, |c| c.descriptors.iter().map(|d| u64::from(d.len)).max().unwrap_or(0));
        let mut dog = Watchdog::new(IDLE_WAIT.max(Duration::from_micros(largest / FLOOR_MBPS)));
        loop {
            let status = self.rd(self.ch_reg(dir, CH_STATUS))?;
            if status & ST_BUSY == 0 {
                return Ok((self.rd(self.ch_reg(dir, CH_STATUS_RC))? | status, true));
            }
            if dog.stalled(u64::from(self.rd(self.ch_reg(dir, CH_COMPLETED))?)) {
                return Ok((status, false));
            }
            std::thread::yield_now();
        }
    }

    /// Words for a channel that `settle` could not see go idle.
    fn still_busy(&self, dir: Direction) -> String {
        format!(
            "XDMA {dir} channel {} is still busy after run was cleared and its completed count stopped moving for \
             {IDLE_WAIT:?} or more: its descriptor in flight may still write host memory; {} before trusting its \
             buffers",
            self.opts.channel,
            super::reset_the_card(&*self.bar)
        )
    }

    fn check_transfer(&self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<&XdmaChannel> {
        let ch = self.opts.channel;
        let c = self.info.channel(t.dir, ch).ok_or_else(|| {
            Error::Unsupported(format!(
                "the XDMA engine has no {} channel {ch}: this card cannot DMA {}",
                t.dir,
                t.dir.long_name()
            ))
        })?;
        if c.interface == Interface::Stream {
            return Err(Error::Unsupported(format!(
                "XDMA {} channel {ch} is AXI4-Stream: the memory-mapped engine cannot drive it; open the card through \
                 `EngineDriver::open` (`--engine xdma`), which gives stream channels the stream engine",
                t.dir
            )));
        }
        if t.len == 0 {
            return Err(Error::usage("a DMA transfer needs at least 1 byte"));
        }
        if t.buf_offset.checked_add(t.len).is_none_or(|e| e > buf.len() as u64) {
            return Err(Error::usage(format!(
                "transfer of {} bytes at buffer offset {:#x} does not fit the {}-byte buffer",
                t.len,
                t.buf_offset,
                buf.len()
            )));
        }
        if t.card_addr.checked_add(t.len).is_none_or(|e| e > self.opts.card_size) {
            return Err(Error::usage(format!(
                "transfer of {} bytes at card offset {:#x} does not fit the {:#x}-byte card window at {:#x} (--card-size)",
                t.len, t.card_addr, self.opts.card_size, self.opts.card_addr
            )));
        }
        Ok(c)
    }
}

impl Engine for XdmaEngine {
    fn name(&self) -> &'static str {
        "xdma"
    }

    fn card_size(&self) -> u64 {
        self.opts.card_size
    }

    fn max_transfer(&self) -> u64 {
        self.opts.card_size
    }

    /// The AXI memory behind the engine is the design's: --card-size says how much.
    fn card_size_settable(&self) -> bool {
        true
    }

    /// Build the chain for `t` (card address = `--card-addr` + `t.card_addr`) and write it to
    /// descriptor memory. `buf` must stay alive and unchanged in place until the last `run`.
    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        self.chain = None;
        let c = self.check_transfer(buf, t)?.clone();
        let card = super::card_address(self.opts.card_addr, t)?;
        let pieces = desc::split(buf.segments(), t.buf_offset, t.len, card)?;
        let (align, gran) = (c.addr_align.max(1) as u64, c.len_granularity.max(1) as u64);
        // `probe` already put the vendor's defaults in for a register reading 0.
        let limit = if c.addr_bits >= 64 { u64::MAX } else { (1u64 << c.addr_bits) - 1 };
        for p in &pieces {
            if p.host % align != 0 || p.card % align != 0 || p.len % gran != 0 {
                return Err(Error::Unsupported(format!(
                    "XDMA {} channel {} needs {align}-byte aligned addresses and lengths in multiples of {gran} \
                     (alignments register +0x4C); this transfer has a piece at host {:#x}, card {:#x}, {} bytes",
                    t.dir, c.index, p.host, p.card, p.len
                )));
            }
            if p.host.checked_add(p.len - 1).is_none_or(|end| end > limit) {
                return Err(Error::Unsupported(format!(
                    "host bus address {:#x} is beyond the engine's {} address bits",
                    p.host, c.addr_bits
                )));
            }
        }
        let capacity = self.desc_mem.len() / DESC_BYTES as usize;
        if pieces.len() > capacity {
            return Err(Error::Unsupported(format!(
                "this transfer needs {} descriptors (one per bus-contiguous piece); descriptor memory holds {capacity}: \
                 use a smaller --size or a buffer with larger contiguous segments (hugepages)",
                pieces.len()
            )));
        }
        let mem = &*self.desc_mem;
        let chain = desc::link(t.dir, &pieces, |i| mem.bus_range(i as u64 * DESC_BYTES, DESC_BYTES))?;
        desc::write_chain(mem, &chain)?;
        if let Some(tr) = &self.trace {
            for (i, d) in chain.descriptors.iter().enumerate() {
                let bus = mem.bus_range(i as u64 * DESC_BYTES, DESC_BYTES).unwrap_or_default();
                let fields = [
                    ("control", d.word0.into()),
                    ("len", d.len.into()),
                    ("src", d.src),
                    ("dst", d.dst),
                    ("next", d.next),
                ];
                tr.descriptor("xdma", i as u64, bus, &d.to_bytes(), &fields);
            }
        }
        self.chain = Some(chain);
        Ok(())
    }

    fn run(&mut self, timeout: Duration) -> Result<()> {
        // Back from interrupt mode: the enables as found, so polling raises no interrupt.
        self.irq.disarm(&*self.bar)?;
        self.submit()?;
        self.wait(timeout)
    }

    fn completes_by_interrupt(&self) -> bool {
        true
    }

    fn overlaps(&self) -> bool {
        true
    }

    fn channels(&self) -> Vec<(Direction, u8)> {
        let mm = |dir: Direction, l: &[XdmaChannel]| -> Vec<(Direction, u8)> {
            l.iter().filter(|c| c.interface == Interface::MemoryMapped).map(|c| (dir, c.index)).collect()
        };
        [mm(Direction::H2c, &self.info.h2c), mm(Direction::C2h, &self.info.c2h)].concat()
    }

    fn begin_run(&mut self, timeout: Duration) -> Result<()> {
        self.start_overlapped(timeout)
    }

    fn run_done(&mut self) -> Result<bool> {
        self.finished_overlapped()
    }

    fn irq_request(&self) -> crate::access::IrqRequest {
        self.irq.wanted()
    }

    fn run_interrupt(&mut self, irq: &dyn crate::access::Interrupts, timeout: Duration) -> Result<()> {
        self.run_irq(irq, timeout)
    }

    fn stop(&mut self) -> Result<String> {
        if let Some(t) = &self.trace {
            t.stop(self.name());
        }
        self.pending = None;
        let ch = self.opts.channel;
        let dirs: Vec<Direction> = match &self.chain {
            Some(c) => vec![c.dir],
            None => {
                [Direction::H2c, Direction::C2h].into_iter().filter(|&d| self.info.channel(d, ch).is_some()).collect()
            }
        };
        let mut out = Vec::new();
        for dir in dirs {
            self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
            // Wait for the descriptor in flight, as the error path does: the caller releases
            // the buffers next.
            let (status, idle) = self.settle(dir)?;
            let busy = if idle { String::new() } else { format!(" ({})", self.still_busy(dir)) };
            out.push(format!("{dir} channel {ch}: {}{busy}", decode_status(dir, status)));
        }
        Ok(out.join("; "))
    }

    fn has_counters(&self) -> bool {
        true
    }

    fn counters_start(&mut self) -> Result<()> {
        self.perf_start()
    }

    fn counters_read(&mut self) -> Result<Vec<EngineCounters>> {
        self.perf_read()
    }
}
impl Drop for XdmaEngine {
    /// The interrupt enables left as found (best effort: a card that stopped answering takes
    /// the writes nowhere, and there is no one to tell).
    fn drop(&mut self) {
        let _ = self.irq.disarm(&*self.bar);
    }
}
