//! `--engine umem`: a user-space driver for the DMA engine of Micro Memory's MM-5415/5425/6155
//! battery-backed NVRAM cards (seed 001's MM-5425CN), named after the card's old Linux block
//! driver. Written from that driver (drivers/block/umem.c and umem.h, removed in 5.10) and
//! fpga_sio's micromemory_5425_nvram programs, which drive the 5425 from user space over VFIO.
//!
//! Poll mode over any `BarRegion` (VFIO type1 or no-IOMMU, the sim card), set up as umem.c
//! sets the card up: `open` checks the CSR block's magic byte and memory size, stops any run
//! left behind, clears latched errors the vendor's way (`card.rs`), gives the card umem.c's
//! latency timer and its PCI commands (Memory Write and Invalidate only where PCI_COMMAND's MWI
//! Enable holds), sets Interrupt Disable (pcibench polls) and turns error correction on.
//! `prepare` writes the transfer's descriptors once, as chains of at most 128 (umem.c's
//! longest; pieces of up to 1 MiB, a semaphore per MiB), with none of umem.c's interrupt
//! enables (fpga_sio's choice: nothing services them); each `run` starts each chain in turn
//! (GO | CHAIN_EN) and polls its last semaphore for DMA_COMPLETE, reading the status register
//! every millisecond for errors; a semaphore that carries a hard error is an I/O error, as in
//! umem.c. After the last chain it waits for GO to clear and clears the completion bits.
//! Every exit path (error, timeout, `stop`, drop) clears GO.

mod card;
pub mod desc;
mod driver;
mod irq;
#[cfg(test)]
mod irq_tests;
pub mod regs;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vendor_tests;

use self::desc::Chain;
pub use self::driver::UmemDriver;
use self::regs::*;
use crate::access::{BarRegion, ConfigPort};
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::mmio::Width;
use crate::trace::Tracer;
use crate::units::human_size;
use crate::{Error, Result};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the poll loop also reads the status register (errors set no semaphore).
const STATUS_EVERY: Duration = Duration::from_millis(1);
/// How long the engine may take to go idle after GO is cleared before we call it hung.
const IDLE_WAIT: Duration = Duration::from_secs(2);
/// At most this many descriptors (4 MiB of descriptor memory).
const MAX_DESCRIPTORS: u64 = 65536;
/// A descriptor is the finest progress the card shows (its semaphore): the wait for the next one
/// is the larger of `--timeout-ms` and the largest descriptor's time at this rate, the slowest a
/// working card is given (seed 001 measured 697-882 MB/s; at `MAX_DESC_LEN` this is 21 ms).
const FLOOR_MBPS: u64 = 50;

/// The window of card memory the engine works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UmemOptions {
    /// Card address of the window (`--card-addr`); `Transfer::card_addr` is an offset in it.
    pub card_addr: u64,
    /// Bytes in the window (`--card-size`); None: the rest of the card's memory.
    pub card_size: Option<u64>,
}

pub struct UmemEngine {
    bar: Box<dyn BarRegion>,
    /// The card's config space: PCI_STATUS errors are cleared there (umem.c mm_interrupt).
    config: Arc<dyn ConfigPort>,
    info: UmemInfo,
    card_addr: u64,
    card_size: u64,
    desc_mem: Box<dyn DmaBuffer>,
    chain: Option<Chain>,
    /// GO may be set (a run was started and not seen to end): drop clears it.
    running: bool,
    /// The PCI read and write commands, in status/control bits 31:24 (`card::setup_config`).
    pci_cmds: u32,
    /// The chain (`Chain::parts`) the card was last given.
    part: usize,
    /// Errors the card still latched after they were cleared as umem.c clears them: every run
    /// would stop on them, so runs are refused with this (the way to clear them) instead.
    stuck: Option<String>,
    /// Where descriptors and semaphores are reported (`--trace`), taken from the BAR.
    trace: Option<Tracer>,
    /// Completion by interrupt armed: PCI_COMMAND as found (`irq.rs`).
    intx_found: Option<u16>,
    /// The prepared descriptors carry umem.c's interrupt enables.
    chain_irq: bool,
}

enum Outcome {
    Done,
    Error(u32),
    Stopped(u32),
    Timeout(u32),
    /// The chain completed, but descriptor `.0`'s semaphore carries hard error bits `.1`.
    Failed(usize, u32),
}

impl UmemEngine {
    /// Check the card behind `bar` (a device of id `device`, config space `config`), set it up
    /// as umem.c does, and allocate descriptor memory from `alloc`. Nothing is written to a card
    /// that fails the check.
    pub fn new(
        bar: Box<dyn BarRegion>,
        config: Arc<dyn ConfigPort>,
        device: u16,
        alloc: &dyn DmaAllocator,
        o: UmemOptions,
    ) -> Result<UmemEngine> {
        let info = probe(&*bar, device)?;
        if let Some(why) = info.refusal() {
            return Err(Error::Device(why));
        }
        let memory = info.memory.unwrap_or(0);
        let card_size = o.card_size.unwrap_or(memory.saturating_sub(o.card_addr));
        let fits = o.card_addr.checked_add(card_size).is_some_and(|end| end <= memory);
        if card_size == 0 || !fits || o.card_addr % ALIGN != 0 {
            return Err(Error::usage(format!(
                "card window {:#x} + {card_size:#x} is not inside the {} card's {} ({memory:#x} bytes) or not 8-byte aligned: \
                 give --card-addr and --card-size inside it",
                o.card_addr,
                info.model,
                human_size(memory)
            )));
        }
        let pieces = (card_size.div_ceil(4096) + 1 + card_size / MAX_DESC_LEN).min(MAX_DESCRIPTORS);
        let desc_mem = alloc.alloc((pieces * DESC_BYTES) as usize)?;
        let trace = bar.tracer().cloned();
        let mut e = UmemEngine {
            bar,
            config,
            info,
            card_addr: o.card_addr,
            card_size,
            desc_mem,
            chain: None,
            running: true,
            pci_cmds: 0,
            part: 0,
            stuck: None,
            trace,
            intx_found: None,
            chain_irq: false,
        };
        // A run left by an earlier process (or a crash) must end before anything is set up.
        e.halt()?;
        e.wr32(DMA_STATUS_CTRL, COMPLETION_BITS)?;
        if let Some(why) = e.clear_errors()? {
            return Err(Error::Device(why));
        }
        e.pci_cmds = e.setup_config()?;
        e.bar.write(ERRCTRL, Width::B8, EDC_STORE_CORRECT as u64)?;
        e.info.ecc = e.bar.read(ERRCTRL, Width::B8)? as u8;
        // Halted now: the battery register may be read (probe left it alone if GO was set).
        e.info.dma_status = e.rd32(DMA_STATUS_CTRL)?;
        e.info.batteries = batteries(&*e.bar, device, e.info.dma_status)?;
        Ok(e)
    }

    /// The PCI commands the card was given: status/control bits 31:24 (read, write).
    pub fn pci_commands(&self) -> u32 {
        self.pci_cmds
    }

    pub fn info(&self) -> &UmemInfo {
        &self.info
    }

    /// The prepared chain (what `run` submits), for inspection.
    pub fn chain(&self) -> Option<&Chain> {
        self.chain.as_ref()
    }

    /// Where the descriptors live (for inspection and fault-injection tests).
    pub fn descriptor_memory(&self) -> &dyn DmaBuffer {
        &*self.desc_mem
    }

    fn rd32(&self, off: u64) -> Result<u32> {
        Ok(self.bar.read(off, Width::B32)? as u32)
    }

    fn wr32(&self, off: u64, v: u32) -> Result<()> {
        self.bar.write(off, Width::B32, v as u64)
    }

    /// A 64-bit register as two 32-bit writes, low half first (umem.c, fpga_sio).
    fn wr64(&self, off: u64, v: u64) -> Result<()> {
        self.wr32(off, v as u32)?;
        self.wr32(off + 4, (v >> 32) as u32)
    }

    /// The card no longer answers when its magic byte (MEMCTRLSTATUS_MAGIC: 0x59, 0x5c or 0x99
    /// on a live card, umem.c mm_pci_probe) reads 0xff, as a status word of all-ones suggests:
    /// the card-gone error then, instead of an engine that looks hung or failed.
    fn gone(&self) -> Option<Error> {
        let magic = self.bar.read(MAGIC, Width::B8).ok()?;
        (magic == 0xff).then(|| {
            Error::Gone(format!(
                "the {} card's status register and its magic byte (0x00, {:#04x} on a live card) read all-ones",
                self.info.model, self.info.magic
            ))
        })
    }

    /// `gone()` when `status` reads all-ones.
    fn check_answering(&self, status: u32) -> Result<()> {
        match (status == u32::MAX).then(|| self.gone()).flatten() {
            Some(gone) => Err(gone),
            None => Ok(()),
        }
    }

    /// Clear GO and wait (bounded) for the engine to go idle; the status word after.
    fn halt(&mut self) -> Result<u32> {
        self.wr32(DMA_STATUS_CTRL, 0)?;
        let t = Instant::now();
        loop {
            let s = self.rd32(DMA_STATUS_CTRL)?;
            self.check_answering(s)?;
            if s & GO == 0 {
                self.running = false;
                return Ok(s);
            }
            if t.elapsed() >= IDLE_WAIT {
                return Err(Error::Device(format!(
                    "the {} DMA engine still reports GO {IDLE_WAIT:?} after it was cleared (status {}): the engine is hung; \
                     power-cycle the host (a warm reboot does not reset the card) and try again",
                    self.info.model,
                    decode_status(s)
                )));
            }
            std::thread::yield_now();
        }
    }

    fn prepared(&self) -> Result<&Chain> {
        self.chain.as_ref().ok_or_else(|| Error::usage("umem run before prepare: prepare a transfer first"))
    }

    /// Start the prepared transfer's first chain and return without waiting (the host-side
    /// cost of a run).
    pub fn submit(&mut self) -> Result<()> {
        if let Some(why) = &self.stuck {
            return Err(Error::Device(why.clone()));
        }
        let n = self.prepared()?.pieces.len();
        for i in 0..n {
            desc::semaphore(&*self.desc_mem, i).store(0, Ordering::Relaxed);
        }
        self.part = 0;
        self.start_part()
    }

    /// Give the card chain `self.part`: umem.c mm_start_io.
    fn start_part(&mut self) -> Result<()> {
        let first = self.prepared()?.parts[self.part].first;
        if self.running {
            self.halt()?;
        }
        // The chain carries every address; the direct-mode registers are zeroed as umem.c does.
        for r in [DMA_PCI_ADDR, DMA_LOCAL_ADDR, DMA_TRANSFER_SIZE, DMA_SEMAPHORE_ADDR] {
            self.wr64(r, 0)?;
        }
        // The last run's completion bits (umem.c clears them in its interrupt handler).
        self.wr32(DMA_STATUS_CTRL, COMPLETION_BITS)?;
        self.wr64(DMA_DESCRIPTOR_ADDR, first)?;
        // The zeroed semaphores and the descriptors must be visible before GO.
        fence(Ordering::SeqCst);
        self.running = true;
        self.wr32(DMA_STATUS_CTRL, GO | CHAIN_EN | self.pci_cmds)
    }

    fn completed(&self, n: usize) -> usize {
        (0..n).take_while(|&i| desc::semaphore(&*self.desc_mem, i).load(Ordering::Acquire) & DMA_COMPLETE != 0).count()
    }

    /// Wait for each chain of the submitted transfer in turn, starting the next as one ends.
    pub fn wait(&mut self, timeout: Duration) -> Result<()> {
        loop {
            self.wait_part(timeout)?;
            if self.part + 1 >= self.prepared()?.parts.len() {
                return self.settle();
            }
            self.part += 1;
            self.start_part()?;
        }
    }

    /// After a run's last chain: wait (bounded) for the card to drop GO, which it does after the
    /// last semaphore lands, then clear the completion bits it latched, as umem.c's interrupt
    /// handler does (`mm_interrupt`), so no CHAIN_COMPLETE is left latched between runs.
    fn settle(&mut self) -> Result<()> {
        let t = Instant::now();
        loop {
            let s = self.rd32(DMA_STATUS_CTRL)?;
            self.check_answering(s)?;
            if s & GO == 0 {
                return if s & COMPLETION_BITS != 0 { self.wr32(DMA_STATUS_CTRL, COMPLETION_BITS) } else { Ok(()) };
            }
            if t.elapsed() >= IDLE_WAIT {
                return Err(Error::Device(format!(
                    "the {} DMA engine wrote its last semaphore but still reports GO {IDLE_WAIT:?} later (status {}): \
                     the engine is hung; power-cycle the host (a warm reboot does not reset the card) and try again",
                    self.info.model,
                    decode_status(s)
                )));
            }
            std::thread::yield_now();
        }
    }

    /// Poll the last semaphore of the current chain until it completes, fails or stops progressing.
    fn wait_part(&mut self, timeout: Duration) -> Result<()> {
        let (n, largest, dir, part) = {
            let c = self.prepared()?;
            (c.pieces.len(), c.pieces.iter().map(|p| p.len).max().unwrap_or(0), c.dir, c.parts[self.part])
        };
        let timeout = timeout.max(Duration::from_micros(largest / FLOOR_MBPS));
        let last = desc::semaphore(&*self.desc_mem, part.start + part.count - 1);
        // Progress: the descriptors whose semaphore says complete, counted on from the last look
        // (the card completes them in chain order).
        let mut dog = Watchdog::new(timeout);
        let mut done = part.start;
        let mut next_status = STATUS_EVERY;
        let mut spins = 0u32;
        let outcome = loop {
            // The host looks at host memory: a simulated engine brings itself to now.
            self.bar.observe();
            if last.load(Ordering::Acquire) & DMA_COMPLETE != 0 {
                break self.semaphore_errors(part);
            }
            spins = spins.wrapping_add(1);
            if spins % 16 == 0 {
                while done < n && desc::semaphore(&*self.desc_mem, done).load(Ordering::Acquire) & DMA_COMPLETE != 0 {
                    self.trace_semaphore(done);
                    done += 1;
                }
                if dog.stalled(done as u64) {
                    break Outcome::Timeout(self.rd32(DMA_STATUS_CTRL)?);
                }
                let elapsed = dog.elapsed();
                if elapsed >= next_status {
                    next_status = elapsed + STATUS_EVERY;
                    let s = self.rd32(DMA_STATUS_CTRL)?;
                    if s & (HARD_ERROR | ANY_ERR) != 0 {
                        // A descriptor that completed with an error latches it after its
                        // semaphore: the semaphore, looked at again now, names the descriptor.
                        let done = last.load(Ordering::Acquire) & DMA_COMPLETE != 0;
                        break match self.semaphore_errors(part) {
                            failed @ Outcome::Failed(..) if done => failed,
                            _ => Outcome::Error(s),
                        };
                    }
                    if s & GO == 0 {
                        // Idle: the semaphore may have landed just after our last look.
                        let done = last.load(Ordering::Acquire) & DMA_COMPLETE != 0;
                        break if done { self.semaphore_errors(part) } else { Outcome::Stopped(s) };
                    }
                }
            }
            std::hint::spin_loop();
        };
        // The semaphores the card wrote that the loop did not see written.
        let end = part.start + part.count;
        for i in done.max(part.start)..end {
            if desc::semaphore(&*self.desc_mem, i).load(Ordering::Acquire) != 0 {
                self.trace_semaphore(i);
            }
        }
        self.finish(outcome, dir, n, timeout)
    }

    /// Descriptor `i`'s semaphore, as the driver sees it now, to the trace.
    fn trace_semaphore(&self, i: usize) {
        if let Some(t) = &self.trace {
            let at = i as u64 * DESC_BYTES + SEM_OFFSET;
            let bus = self.desc_mem.bus_range(at, 4).unwrap_or_default();
            let v = desc::semaphore(&*self.desc_mem, i).load(Ordering::Acquire);
            t.writeback("umem", "semaphore", bus, Width::B32, v.into());
        }
    }

    /// A completed chain: done, unless a semaphore carries hard error bits beside DMA_COMPLETE,
    /// which umem.c process_page fails as an I/O error (the card finished the descriptor, but
    /// what it moved cannot be trusted).
    fn semaphore_errors(&self, part: desc::Part) -> Outcome {
        (part.start..part.start + part.count)
            .map(|i| (i, desc::semaphore(&*self.desc_mem, i).load(Ordering::Acquire)))
            .find(|(_, v)| v & HARD_ERROR != 0)
            .map_or(Outcome::Done, |(i, v)| Outcome::Failed(i, v))
    }

    fn finish(&mut self, outcome: Outcome, dir: Direction, n: usize, timeout: Duration) -> Result<()> {
        let model = self.info.model;
        let status = match outcome {
            Outcome::Done => None,
            Outcome::Failed(..) => Some(self.rd32(DMA_STATUS_CTRL)?),
            Outcome::Error(s) | Outcome::Stopped(s) | Outcome::Timeout(s) => Some(s),
        };
        if let Some(s) = status {
            self.check_answering(s)?;
        }
        match outcome {
            Outcome::Done => {
                self.running = false;
                Ok(())
            }
            Outcome::Failed(i, v) => {
                self.running = false;
                let memory = self.memory_error(self.rd32(DMA_STATUS_CTRL)?)?;
                let stuck = self.after_error()?;
                Err(Error::Device(format!(
                    "{model} {dir} DMA: descriptor {i} of {n} completed with an error in its semaphore: {}{memory} \
                     (an I/O error, as umem.c counts it: the data it moved cannot be trusted){stuck}",
                    decode_status(v)
                )))
            }
            Outcome::Error(s) | Outcome::Stopped(s) => {
                let memory = self.memory_error(s)?;
                self.halt()?;
                // Counted once the engine has stopped: the semaphore chain is the card's own
                // progress, and one may land while it halts.
                let done = self.completed(n);
                let stuck = self.after_error()?;
                Err(Error::Device(format!(
                    "{model} {dir} DMA stopped after {done} of {n} descriptors: status {}{memory}{stuck}",
                    decode_status(s)
                )))
            }
            Outcome::Timeout(s) => {
                let after = self.halt()?;
                let done = self.completed(n);
                Err(Error::Device(format!(
                    "{model} {dir} DMA: {} ({done} of {n} descriptors done; status {}); \
                     cleared GO to stop it (status now {}). Was error correction on, and the card powered since boot?",
                    no_progress(timeout),
                    decode_status(s),
                    decode_status(after)
                )))
            }
        }
    }

    /// After a failed run: clear completion and the latched errors as umem.c does, so the next
    /// run starts clean; if the card keeps them, remember why (runs are refused) and say so.
    fn after_error(&mut self) -> Result<String> {
        self.wr32(DMA_STATUS_CTRL, COMPLETION_BITS)?;
        self.stuck = self.clear_errors()?;
        Ok(self.stuck.as_ref().map(|why| format!("; then {why}")).unwrap_or_default())
    }

    fn check_transfer(&self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        if t.len == 0 || t.len % ALIGN != 0 || t.card_addr % ALIGN != 0 {
            return Err(Error::usage(format!(
                "the {} DMA engine moves whole 8-byte words (64-bit PCI, ECC per 64-bit word): {} bytes at card offset {:#x} \
                 is not; use a --size that is a multiple of 8",
                self.info.model, t.len, t.card_addr
            )));
        }
        if t.buf_offset.checked_add(t.len).is_none_or(|e| e > buf.len() as u64) {
            return Err(Error::usage(format!(
                "transfer of {} bytes at buffer offset {:#x} does not fit the {}-byte buffer",
                t.len,
                t.buf_offset,
                buf.len()
            )));
        }
        if t.card_addr.checked_add(t.len).is_none_or(|e| e > self.card_size) {
            return Err(Error::usage(format!(
                "transfer of {} at card offset {:#x} does not fit the {} card window at {:#x} ({} card memory)",
                human_size(t.len),
                t.card_addr,
                human_size(self.card_size),
                self.card_addr,
                human_size(self.info.memory.unwrap_or(0))
            )));
        }
        Ok(())
    }
}

impl Drop for UmemEngine {
    fn drop(&mut self) {
        if self.running {
            // Nothing to report to from drop: the engine must just not go on writing host memory.
            let _ = self.wr32(DMA_STATUS_CTRL, 0);
        }
        // Interrupt Disable as found (best effort, as above).
        let _ = self.disarm();
    }
}

impl Engine for UmemEngine {
    fn name(&self) -> &'static str {
        "umem"
    }

    fn card_size(&self) -> u64 {
        self.card_size
    }

    /// Any length: the whole window in one run (as chains of at most 128 descriptors).
    fn max_transfer(&self) -> u64 {
        self.card_size
    }

    /// 16 transfers, as seed 001 (16 × 1 GiB, asked for with `--size 1G`), and at least fpga_sio's 64 MiB.
    fn default_total(&self, size: u64) -> u64 {
        size.saturating_mul(16).max(64 << 20)
    }

    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        self.chain = None;
        self.check_transfer(buf, t)?;
        let card = crate::dma::engines::card_address(self.card_addr, t)?;
        let pieces = desc::split(buf.segments(), t.buf_offset, t.len, card, MAX_DESC_LEN)?;
        if let Some(p) = pieces.iter().find(|p| p.host % ALIGN != 0) {
            return Err(Error::Unsupported(format!(
                "host bus address {:#x} is not 8-byte aligned: the card moves whole 64-bit words",
                p.host
            )));
        }
        let capacity = self.desc_mem.len() as u64 / DESC_BYTES;
        if pieces.len() as u64 > capacity {
            return Err(Error::Unsupported(format!(
                "this transfer needs {} descriptors (one per bus-contiguous piece); descriptor memory holds {capacity}: \
                 use a smaller --size or a buffer with larger contiguous pieces (--buffer hugepage or reserved:START,SIZE)",
                pieces.len()
            )));
        }
        let chain = desc::write_chain(&*self.desc_mem, t.dir, pieces, self.pci_cmds)?;
        self.chain_irq = false;
        if let Some(tr) = &self.trace {
            desc::trace(tr, &*self.desc_mem, &chain);
        }
        self.chain = Some(chain);
        Ok(())
    }

    fn run(&mut self, timeout: Duration) -> Result<()> {
        // Back from interrupt mode: no enables in the descriptors, Interrupt Disable as found.
        self.disarm()?;
        self.submit()?;
        self.wait(timeout)
    }

    fn completes_by_interrupt(&self) -> bool {
        true
    }

    /// The card's one INTx line (umem.c never enables MSI; the kind any gives the best there is).
    fn irq_request(&self) -> crate::access::IrqRequest {
        crate::access::IrqRequest::any(1)
    }

    fn run_interrupt(&mut self, irq: &dyn crate::access::Interrupts, timeout: Duration) -> Result<()> {
        self.run_irq(irq, timeout)
    }

    fn stop(&mut self) -> Result<String> {
        if let Some(t) = &self.trace {
            t.stop(self.name());
        }
        let s = self.halt()?;
        Ok(format!("GO cleared; status {}", decode_status(s)))
    }
}
