//! XDMA AXI4-Stream channels (PG195 "AXI4-Stream" interface; identifier bit 15), driven against
//! the vendor's AXI4-Stream loopback example design: what H2C channel N sends comes back on C2H
//! channel N. Written from libxdma.c's stream path (Xilinx dma_ip_drivers
//! `XDMA/linux-kernel/xdma/libxdma.c`: `engine_init` sets `streaming` from identifier bit 15,
//! `transfer_build` points each C2H descriptor's source at its `struct xdma_result`,
//! `transfer_init` ends every transfer with STOP | EOP | COMPLETED, `xdma_xfer_submit` adds up
//! the results' lengths) and PG195 ("Descriptors", "C2H Stream Writeback").
//!
//! One transfer is one packet, and one run moves a batch of them (`max_batch`, as libxdma's
//! stream path queues many transfers on one engine): one H2C chain carrying every packet, EOP on
//! each packet's last descriptor and STOP on the chain's last, and one C2H chain of host buffers
//! (at most `C2H_BUF` bytes each and a multiple of 64, every packet starting in a fresh one, each
//! with its writeback record; PG195 "Length Granularity"). H2C pieces of a packet break only at a
//! beat of the datapath, as the IP does not pack data across descriptors. A run posts the C2H chain first, then starts the H2C one, and polls both poll-mode
//! writeback words (memory, not registers); so the register traffic (about twenty accesses) is
//! paid once per batch, not per packet. Then every packet's records are checked from memory:
//! magic 0x52B4, EOP on its last buffer only, each buffer full but the last, and the lengths
//! adding up to what was sent. The data itself the runner verifies.
//!
//! The loopback stands in for card memory: the engine keeps a host buffer (`peer`, `--card-size`
//! bytes) as the far side of each transfer. An h2c transfer sends the caller's buffer and receives
//! into `peer` at the transfer's card offset; a c2h transfer sends from `peer` and receives into the
//! caller's buffer. So the runner's checks (h2c read back, c2h seeded first) go through the
//! loopback both ways, and every run moves its bytes on both channels.
//!
//! Completion is by polling both writebacks, or by the channels' interrupts as libxdma runs
//! streams (`stream_irq.rs`: one interrupt per channel per batch, on the chain's last descriptor).
//! A batch's chains are laid out in `stream_chain.rs` and its records checked in `stream_records.rs`.

#[path = "stream_chain.rs"]
mod chain;
#[path = "stream_irq.rs"]
mod irq;
#[cfg(test)]
#[path = "stream_irq_tests.rs"]
mod irq_tests;
#[path = "stream_records.rs"]
mod records;

use super::desc::Chain;
use super::irq::PairIrq;
use super::regs::*;
use super::{decode_status, probe, Interface, XdmaInfo};
use crate::access::BarRegion;
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::mmio::Width;
use crate::trace::Tracer;
use crate::{Error, Result};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Offsets of the two poll-mode writeback words in their buffer (each on its own line).
const WB_H2C: usize = 0;
const WB_C2H: usize = 64;
const STATUS_EVERY: Duration = Duration::from_millis(1);
const IDLE_WAIT: Duration = Duration::from_secs(2);
const MAX_DESCRIPTORS: usize = 65536;
/// Most packets one run moves: as many as the runner keeps in flight per queue
/// (`bench::dma::layout::MAX_DEPTH`, 1024) in each direction, both at once with `--dir bidir`.
pub const MAX_BATCH: usize = 2048;

/// One packet of a prepared batch: its bytes and its C2H buffers (records `first..first + n`).
#[derive(Debug, Clone, Copy)]
struct Packet {
    len: u64,
    first: usize,
    n: usize,
}

/// A prepared batch: both chains (the C2H one with its records' addresses in the sources) and
/// where each packet's C2H buffers are.
struct Prepared {
    h2c: Chain,
    c2h: Chain,
    packets: Vec<Packet>,
}

/// The stream driver for one channel pair.
pub struct XdmaStreamEngine {
    bar: Box<dyn BarRegion>,
    info: XdmaInfo,
    ch: u8,
    window: u64,
    peer: Box<dyn DmaBuffer>,
    h2c_desc: Box<dyn DmaBuffer>,
    c2h_desc: Box<dyn DmaBuffer>,
    records: Box<dyn DmaBuffer>,
    wb: Box<dyn DmaBuffer>,
    prepared: Option<Prepared>,
    trace: Option<Tracer>,
    /// The pair's interrupts, and interrupt mode's registers as found while armed.
    irq: PairIrq,
}

fn word(mem: &dyn DmaBuffer, at: usize) -> &AtomicU32 {
    debug_assert!(mem.len() >= at + 4 && (mem.as_ptr() as usize + at) % 4 == 0);
    // SAFETY: `new` checked 4 aligned bytes at `at` inside the buffer, which lives as long as
    // the borrow; the card writes whole 32-bit words and the CPU only touches them atomically.
    unsafe { AtomicU32::from_ptr(mem.as_ptr().add(at).cast::<u32>()) }
}

impl XdmaStreamEngine {
    /// Probe the engine behind `bar`; channel `ch` must be AXI4-Stream both ways. `window` bytes
    /// of host memory stand for the far side of the loopback.
    pub fn new(bar: Box<dyn BarRegion>, alloc: &dyn DmaAllocator, ch: u8, window: u64) -> Result<Self> {
        let info = probe(&*bar)?;
        for dir in [Direction::H2c, Direction::C2h] {
            match info.channel(dir, ch) {
                Some(c) if c.interface == Interface::Stream => {}
                Some(_) => {
                    return Err(Error::Unsupported(format!(
                        "XDMA {dir} channel {ch} is memory-mapped and its partner is AXI4-Stream: pcibench drives a \
                         channel pair of one kind; choose another --channel"
                    )))
                }
                None => {
                    return Err(Error::Unsupported(format!(
                    "XDMA stream channel {ch} has no {dir} partner: the loopback example design pairs H2C {ch} with \
                         C2H {ch}; choose a --channel present both ways"
                )))
                }
            }
        }
        if window == 0 {
            return Err(Error::usage("--card-size 0: the stream's host window needs at least one byte"));
        }
        let len = usize::try_from(window).map_err(|_| Error::usage("--card-size is too large for this host"))?;
        // A batch moves at most `window` bytes (its card offsets do not overlap) in at most
        // MAX_BATCH packets, each cut at page boundaries: a page's worth of descriptors per 4 KiB
        // plus two per packet for its partial first and last pages. C2H buffers are cut at
        // `C2H_BUF` from each packet's start and at page boundaries both: twice that.
        let pieces = (window.div_ceil(4096) as usize + 2 * MAX_BATCH).min(MAX_DESCRIPTORS);
        let c2h_max = (2 * window.div_ceil(C2H_BUF) as usize + 3 * MAX_BATCH).min(MAX_DESCRIPTORS);
        // A packet received into the window takes its length rounded up to `C2H_GRANULE`.
        let peer = alloc.alloc(len + C2H_GRANULE as usize)?;
        let h2c_desc = alloc.alloc(pieces * DESC_BYTES as usize)?;
        let c2h_desc = alloc.alloc(c2h_max * DESC_BYTES as usize)?;
        let records = alloc.alloc(c2h_max * RESULT_BYTES as usize)?;
        let wb = alloc.alloc(128)?;
        for at in [WB_H2C, WB_C2H] {
            wb.bus_range(at as u64, 4).filter(|b| b % 4 == 0 && (wb.as_ptr() as usize + at) % 4 == 0).ok_or_else(
                || Error::Device("the writeback buffer is not 4-byte aligned, bus-reachable words".into()),
            )?;
        }
        let trace = bar.tracer().cloned();
        // Poll mode as for memory-mapped channels (libxdma.c engine_init_regs: the error enables
        // only in the interrupt mask; the IRQ block's channel enables cleared).
        super::irq::poll_mode(&*bar, &info, ch)?;
        let irq = PairIrq::new(&info, ch);
        let e = XdmaStreamEngine {
            bar,
            info,
            ch,
            window,
            peer,
            h2c_desc,
            c2h_desc,
            records,
            wb,
            prepared: None,
            trace,
            irq,
        };
        Ok(e)
    }

    pub fn info(&self) -> &XdmaInfo {
        &self.info
    }

    /// The function's INTx pin (config byte 0x3D), as `XdmaEngine::set_intx_pin`.
    pub fn set_intx_pin(&mut self, pin: u8) {
        self.irq.set_pin(pin);
    }

    fn ch_reg(&self, dir: Direction, r: u32) -> u64 {
        reg(if dir == Direction::H2c { T_H2C } else { T_C2H }, self.ch, r)
    }

    fn sg_reg(&self, dir: Direction, r: u32) -> u64 {
        reg(T_SGDMA + if dir == Direction::H2c { T_H2C } else { T_C2H }, self.ch, r)
    }

    fn rd(&self, off: u64) -> Result<u32> {
        Ok(self.bar.read(off, Width::B32)? as u32)
    }

    fn wr(&self, off: u64, v: u32) -> Result<()> {
        self.bar.write(off, Width::B32, v as u64)
    }

    fn wb_at(dir: Direction) -> usize {
        if dir == Direction::H2c {
            WB_H2C
        } else {
            WB_C2H
        }
    }

    /// Start `chain` on the `dir` channel with `control` (poll mode's or interrupt mode's), as the
    /// memory-mapped path does (`XdmaEngine::submit_with`).
    fn start(&self, dir: Direction, chain: &Chain, control: u32) -> Result<()> {
        self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
        if self.rd(self.ch_reg(dir, CH_STATUS_RC))? & ST_BUSY != 0 {
            // Still finishing an earlier run: reprogramming it now could let that run's last
            // writeback land in this run's word, so a channel that does not settle is not reused.
            let (status, idle) = self.settle(dir)?;
            if !idle {
                return Err(Error::Device(format!(
                    "XDMA {dir} stream channel {} is still busy {IDLE_WAIT:?} after run was cleared (status {}): \
                     the engine is hung; reset the card (e.g. reload its FPGA image) and try again",
                    self.ch,
                    decode_status(dir, status)
                )));
            }
        }
        let at = Self::wb_at(dir);
        let bus = self.wb.bus_range(at as u64, 4).unwrap_or_default();
        self.wr(self.ch_reg(dir, CH_WB_LO), bus as u32)?;
        self.wr(self.ch_reg(dir, CH_WB_HI), (bus >> 32) as u32)?;
        word(&*self.wb, at).store(0, Ordering::Relaxed);
        self.wr(self.sg_reg(dir, SG_ADDR_LO), chain.first as u32)?;
        self.wr(self.sg_reg(dir, SG_ADDR_HI), (chain.first >> 32) as u32)?;
        self.wr(self.sg_reg(dir, SG_ADJACENT), chain.first_adj)?;
        fence(Ordering::SeqCst);
        // The control word libxdma writes for stream channels too (engine_start_mode_config:
        // nothing stream-specific; C2H credits stay off as with enable_st_c2h_credit=0).
        self.wr(self.ch_reg(dir, CH_CONTROL), control)?;
        self.rd(self.ch_reg(dir, CH_STATUS))?;
        Ok(())
    }

    /// Clear run and wait (bounded) for the channel to go idle; its status (read to clear) and
    /// whether it did. A stream channel waiting for data has no descriptor in flight and stops at once.
    fn settle(&self, dir: Direction) -> Result<(u32, bool)> {
        self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
        let t = Instant::now();
        loop {
            let status = self.rd(self.ch_reg(dir, CH_STATUS))?;
            if status & ST_BUSY == 0 {
                return Ok((self.rd(self.ch_reg(dir, CH_STATUS_RC))? | status, true));
            }
            if t.elapsed() >= IDLE_WAIT {
                return Ok((status, false));
            }
            std::thread::yield_now();
        }
    }

    /// Stop both channels the vendor's way (run cleared, libxdma.c xdma_engine_stop), and say
    /// what each status and the records said.
    fn fail(&self, what: String, n_c2h: usize) -> Error {
        let mut parts = vec![what];
        for dir in [Direction::H2c, Direction::C2h] {
            let done = self.rd(self.ch_reg(dir, CH_COMPLETED)).unwrap_or(0) & WB_COUNT;
            match self.settle(dir) {
                Ok((status, idle)) => parts.push(format!(
                    "{dir}: {done} descriptors completed, status {}{}",
                    decode_status(dir, status),
                    if idle {
                        String::new()
                    } else {
                        format!(
                            " (still busy after run was cleared: {})",
                            crate::dma::engines::reset_the_card(&*self.bar)
                        )
                    }
                )),
                Err(e) => parts.push(format!("{dir}: {e}")),
            }
        }
        parts.push(self.records_text(0, n_c2h, n_c2h));
        Error::Device(parts.join("; "))
    }

    /// Post the C2H buffers, send the packet, poll both writebacks, check the records.
    /// Completion by interrupt (`irq.rs`) replaces the middle step: `submit`, then wait, then
    /// `complete`.
    fn run_polled(&mut self, timeout: Duration) -> Result<()> {
        // Back from interrupt mode: the enables as found, so polling raises no interrupt.
        self.irq.disarm(&*self.bar)?;
        self.submit(CONTROL_POLL)?;
        self.wait_polled(timeout)?;
        self.complete()
    }

    /// Zero the records, post the C2H buffers, send the packet, each channel started with `control`.
    fn submit(&self, control: u32) -> Result<()> {
        let p = self.prepared.as_ref().ok_or_else(|| Error::usage("XDMA stream run before prepare"))?;
        // Records are zeroed before each run (libxdma.c transfer_build memsets them), so a record
        // left from the last run cannot pass for this one's.
        for i in 0..p.c2h.descriptors.len() {
            word(&*self.records, i * RESULT_BYTES as usize).store(0, Ordering::Relaxed);
            word(&*self.records, i * RESULT_BYTES as usize + 4).store(0, Ordering::Relaxed);
        }
        self.start(Direction::C2h, &p.c2h, control)?;
        self.start(Direction::H2c, &p.h2c, control)
    }

    /// Both chains ended on STOP: clear run as libxdma does when a transfer completes
    /// (engine_service_shutdown -> xdma_engine_stop), then check the records.
    fn complete(&self) -> Result<()> {
        self.wr(self.ch_reg(Direction::H2c, CH_CONTROL_W1C), RUN)?;
        self.wr(self.ch_reg(Direction::C2h, CH_CONTROL_W1C), RUN)?;
        self.check_records()
    }

    /// Poll both writeback words until both chains are done, one fails, or nothing moves for
    /// `timeout` (then both channels are stopped and the error says what they and the records said).
    fn wait_polled(&self, timeout: Duration) -> Result<()> {
        let p = self.prepared.as_ref().ok_or_else(|| Error::usage("XDMA stream run before prepare"))?;
        let (nh, nc) = (p.h2c.descriptors.len() as u32, p.c2h.descriptors.len() as u32);
        let timeout = timeout.max(Duration::from_micros(p.h2c.bytes / 50));
        let (wh, wc) = (word(&*self.wb, WB_H2C), word(&*self.wb, WB_C2H));
        let mut dog = Watchdog::new(timeout);
        let (mut next_status, mut spins, mut progress) = (STATUS_EVERY, 0u32, 0u64);
        loop {
            // The host looks at host memory: a simulated engine brings itself to now.
            self.bar.observe();
            let (h, c) = (wh.load(Ordering::Acquire), wc.load(Ordering::Acquire));
            if (h | c) & WB_ERROR != 0 {
                let side = if h & WB_ERROR != 0 { "H2C" } else { "C2H" };
                return Err(self.fail(
                    format!("XDMA stream channel {}: the {side} writeback reports an error", self.ch),
                    nc as usize,
                ));
            }
            if h & WB_COUNT >= nh && c & WB_COUNT >= nc {
                break;
            }
            spins = spins.wrapping_add(1);
            if spins % 16 == 0 {
                let elapsed = dog.elapsed();
                if elapsed >= next_status {
                    next_status = elapsed + STATUS_EVERY;
                    for (dir, w, n) in [(Direction::H2c, h, nh), (Direction::C2h, c, nc)] {
                        let status = self.rd(self.ch_reg(dir, CH_STATUS))?;
                        if status == u32::MAX && self.rd(self.ch_reg(dir, CH_ID))? == u32::MAX {
                            return Err(Error::Gone(format!(
                                "XDMA {dir} stream channel {}'s status and identifier registers read 0xffffffff",
                                self.ch
                            )));
                        }
                        let done = self.rd(self.ch_reg(dir, CH_COMPLETED))? & WB_COUNT;
                        if status & ST_BUSY == 0 && (w & WB_COUNT < n) && (done < n || status & ST_ERRORS != 0) {
                            return Err(self.fail(
                                format!(
                                    "XDMA {dir} stream channel {} stopped after {done} of {n} descriptors",
                                    self.ch
                                ),
                                nc as usize,
                            ));
                        }
                    }
                    progress = u64::from(self.rd(self.ch_reg(Direction::H2c, CH_COMPLETED))? & WB_COUNT)
                        + u64::from(self.rd(self.ch_reg(Direction::C2h, CH_COMPLETED))? & WB_COUNT);
                }
                if dog.stalled(progress.max(u64::from((h & WB_COUNT) + (c & WB_COUNT)))) {
                    return Err(self.fail(
                        format!(
                            "XDMA stream channel {}: {}; nothing (or not all) came back on C2H {}: is the AXI4-Stream \
                             loopback example design behind the channels?",
                            self.ch,
                            no_progress(timeout),
                            self.ch
                        ),
                        nc as usize,
                    ));
                }
            }
            std::hint::spin_loop();
        }
        if let Some(t) = &self.trace {
            let bus = |at| self.wb.bus_range(at as u64, 4).unwrap_or_default();
            t.writeback("xdma-st", "h2c writeback", bus(WB_H2C), Width::B32, u64::from(wh.load(Ordering::Acquire)));
            t.writeback("xdma-st", "c2h writeback", bus(WB_C2H), Width::B32, u64::from(wc.load(Ordering::Acquire)));
        }
        Ok(())
    }
}

impl Engine for XdmaStreamEngine {
    fn name(&self) -> &'static str {
        "xdma"
    }

    fn card_size(&self) -> u64 {
        self.window
    }

    fn max_transfer(&self) -> u64 {
        self.window
    }

    /// The loopback's far side is host memory of `--card-size` bytes.
    fn card_size_settable(&self) -> bool {
        true
    }

    fn packets(&self) -> bool {
        true
    }

    /// Packets start on 64-byte boundaries, so each C2H buffer can be a multiple of 64 bytes on
    /// any pages (PG195 "Length Granularity") and each H2C piece whole beats.
    fn transfer_align(&self) -> u64 {
        C2H_GRANULE
    }

    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        self.prepare_batch(&[Work { buf, t: *t, queue: 0 }])
    }

    /// One channel pair is one queue.
    fn queues(&self) -> u16 {
        1
    }

    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    /// Lay out a batch of packets (either direction, mixed: `--dir bidir` sends the h2c ones from
    /// the caller's buffers and the c2h ones from the window, through the one loopback): both
    /// chains written once here, so `run` only zeroes records, starts, polls and checks.
    fn prepare_batch(&mut self, work: &[Work]) -> Result<()> {
        self.prepared = None;
        if work.is_empty() || work.len() > MAX_BATCH {
            return Err(Error::usage(format!(
                "an XDMA stream run takes 1 to {MAX_BATCH} packets; this batch has {}",
                work.len()
            )));
        }
        let (mut h2c, mut c2h) = (Vec::new(), Vec::new());
        let (mut ends, mut packets) = (Vec::with_capacity(work.len()), Vec::with_capacity(work.len()));
        let beat = u64::from(self.info.data_width_bits / 8).max(1);
        for w in work {
            let t = &w.t;
            if w.queue != 0 {
                return Err(Error::usage(format!(
                    "an XDMA stream channel pair is one queue; work names queue {}",
                    w.queue
                )));
            }
            if t.len == 0 {
                return Err(Error::usage(
                    "a stream packet needs at least 1 byte (an H2C descriptor of length 0 is invalid)",
                ));
            }
            if t.buf_offset.checked_add(t.len).is_none_or(|e| e > w.buf.len() as u64) {
                return Err(Error::usage(format!(
                    "a {}-byte packet does not fit the {}-byte buffer",
                    t.len,
                    w.buf.len()
                )));
            }
            if t.card_addr.checked_add(t.len).is_none_or(|e| e > self.window) {
                return Err(Error::usage(format!(
                    "a {}-byte packet at offset {:#x} does not fit the stream's {:#x}-byte host window (--card-size)",
                    t.len, t.card_addr, self.window
                )));
            }
            let peer = &*self.peer;
            let (from, from_off, to, to_off) = match t.dir {
                Direction::H2c => (w.buf, t.buf_offset, peer, t.card_addr),
                Direction::C2h => (peer, t.card_addr, w.buf, t.buf_offset),
            };
            Self::h2c_pieces(from, from_off, t.len, beat, &mut h2c)?;
            ends.push(h2c.len() - 1);
            let first = c2h.len();
            Self::c2h_pieces(to, to_off, t.len, &mut c2h)?;
            packets.push(Packet { len: t.len, first, n: c2h.len() - first });
        }
        let (h2c, c2h) = (self.h2c_chain(&h2c, &ends)?, self.c2h_chain(&c2h)?);
        self.trace_chain(&h2c, &*self.h2c_desc);
        self.trace_chain(&c2h, &*self.c2h_desc);
        self.prepared = Some(Prepared { h2c, c2h, packets });
        Ok(())
    }

    fn run(&mut self, timeout: Duration) -> Result<()> {
        self.run_polled(timeout)
    }

    fn completes_by_interrupt(&self) -> bool {
        true
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
        let mut out = Vec::new();
        for dir in [Direction::H2c, Direction::C2h] {
            let (status, idle) = self.settle(dir)?;
            let busy = if idle {
                String::new()
            } else {
                format!(" (still busy after run was cleared: {})", crate::dma::engines::reset_the_card(&*self.bar))
            };
            out.push(format!("{dir} stream channel {}: {}{busy}", self.ch, decode_status(dir, status)));
        }
        Ok(out.join("; "))
    }
}

impl Drop for XdmaStreamEngine {
    /// The interrupt enables left as found (best effort, as `XdmaEngine`'s drop).
    fn drop(&mut self) {
        let _ = self.irq.disarm(&*self.bar);
    }
}
