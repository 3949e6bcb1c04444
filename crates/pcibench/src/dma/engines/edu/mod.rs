//! QEMU's `edu` device (1234:11e8, hw/misc/edu.c; docs/specs/edu.rst) as a DMA engine.
//!
//! BAR0 registers: +0x80 source, +0x88 destination, +0x90 count, +0x98 command (bit 0 start,
//! bit 1 direction: 1 = EDU to RAM, bit 2 raise IRQ 0x100 when done), +0x24 interrupt status,
//! +0x64 interrupt acknowledge. The card side is a 4096-byte buffer at device address 0x40000.
//! A transfer completes after a ~100 ms virtual-clock timer: edu is a functional target, not a
//! speed one. Its timer clears the start bit first, then raises the interrupt: as an MSI when
//! MSI is enabled (VFIO enables it for an eventfd), else INTx (edu_dma_timer, edu_raise_irq);
//! the acknowledge lowers INTx once no status bit is left (edu_lower_irq).
//!
//! QEMU up to 7.2 checks `end < 0x41000` strictly (edu_check_range) and aborts the whole VM on
//! failure, so a transfer must end at least one byte before the end of the buffer: 4095 bytes at
//! most. Host addresses are ANDed with the `dma_mask` property (28 bits by default, often raised
//! to 32), silently, so addresses beyond the mask are refused here before starting.

use crate::access::BarRegion;
use crate::dma::{Direction, DmaBuffer, Engine, Transfer};
use crate::mmio::Width;
use crate::trace::Tracer;
use crate::{Error, Result};
use std::time::{Duration, Instant};

pub const EDU_VENDOR: u16 = 0x1234;
pub const EDU_DEVICE: u16 = 0x11e8;
const REG_ID: u64 = 0x00;
const REG_DMA_SRC: u64 = 0x80;
const REG_DMA_DST: u64 = 0x88;
const REG_DMA_COUNT: u64 = 0x90;
const REG_DMA_CMD: u64 = 0x98;
const REG_IRQ_STATUS: u64 = 0x24;
const REG_IRQ_ACK: u64 = 0x64;
const CMD_START: u64 = 1 << 0;
const CMD_TO_RAM: u64 = 1 << 1;
/// Raise interrupt DMA_IRQ when the transfer is done.
const CMD_IRQ: u64 = 1 << 2;
/// The interrupt status bit of a finished DMA.
const DMA_IRQ: u64 = 0x100;
/// edu's DMA timer: a transfer completes this long after its command (dma_rw: timer_mod(now + 100 ms)).
const EDU_TIMER: Duration = Duration::from_millis(100);
/// Polls sleep this long between reads until the timer is near.
const GENTLE_POLL: Duration = Duration::from_micros(200);
/// How long before the timer is due polling stops sleeping.
const TIGHT_BEFORE: Duration = Duration::from_millis(5);
/// The card buffer's device address and size.
pub const EDU_BUF_ADDR: u64 = 0x40000;
pub const EDU_BUF_SIZE: u64 = 4096;
/// Largest transfer QEMU 7.2 accepts without aborting (see the module comment).
pub const EDU_MAX_TRANSFER: u64 = EDU_BUF_SIZE - 1;
/// The edu device's default `dma_mask` property (hw/misc/edu.c: (1UL << 28) - 1).
pub const EDU_DEFAULT_DMA_BITS: u32 = 28;

/// What a prepared transfer writes to the registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    pub src: u64,
    pub dst: u64,
    pub count: u64,
    pub cmd: u64,
}

pub struct EduEngine {
    bar: Box<dyn BarRegion>,
    dma_bits: u32,
    prepared: Option<Program>,
    /// Whether the interrupt status was checked for a cause left from before since `prepare`.
    stale_checked: bool,
    /// Where a stop is reported (`--trace`), taken from the BAR; its registers are traced there.
    trace: Option<Tracer>,
}

/// The card offset of `card_addr`: an offset into the 4 KiB buffer (0..4095), or the absolute
/// device address 0x40000..0x40fff.
pub fn card_offset(card_addr: u64) -> Result<u64> {
    if card_addr < EDU_BUF_SIZE {
        Ok(card_addr)
    } else if (EDU_BUF_ADDR..EDU_BUF_ADDR + EDU_BUF_SIZE).contains(&card_addr) {
        Ok(card_addr - EDU_BUF_ADDR)
    } else {
        Err(Error::usage(format!(
            "edu card address {card_addr:#x} is outside its 4 KiB buffer: give an offset 0-0xfff or a device address 0x40000-0x40fff"
        )))
    }
}

/// Check a transfer against edu's limits and build its register program.
pub fn program(t: &Transfer, host_bus: Option<u64>, dma_bits: u32) -> Result<Program> {
    let off = card_offset(t.card_addr)?;
    if t.len == 0 {
        return Err(Error::usage("an edu transfer needs at least 1 byte"));
    }
    // Checked: the length is the user's (a size near 2^64 must be refused, not wrap).
    if off.checked_add(t.len).is_none_or(|end| end > EDU_MAX_TRANSFER) {
        return Err(Error::Refused(format!(
            "edu transfer of {} bytes at card offset {off:#x} would end at {:#x}: edu's buffer allows transfers ending by 0xfff (QEMU 7.2 aborts the VM on a full 4096): use --size 4095 or less",
            t.len,
            off.saturating_add(t.len)
        )));
    }
    let bus = host_bus.ok_or_else(|| {
        Error::Refused(format!(
            "the host buffer is not bus-contiguous over [{:#x}, {:#x}): edu needs one contiguous range per transfer: use --buffer hugepage or u-dma-buf:NAME",
            t.buf_offset,
            t.buf_offset.saturating_add(t.len)
        ))
    })?;
    let last = bus.checked_add(t.len - 1).ok_or_else(|| Error::usage("bus address overflows"))?;
    if dma_bits < 64 && last >> dma_bits != 0 {
        return Err(Error::Refused(format!(
            "buffer bus address {bus:#x}-{last:#x} is beyond edu's {dma_bits}-bit dma_mask: edu would silently clamp it and write elsewhere; no DMA was started (raise the device's dma_mask property and --dma-bits, or get a lower buffer)"
        )));
    }
    let card = EDU_BUF_ADDR + off;
    Ok(match t.dir {
        Direction::H2c => Program { src: bus, dst: card, count: t.len, cmd: CMD_START },
        Direction::C2h => Program { src: card, dst: bus, count: t.len, cmd: CMD_START | CMD_TO_RAM },
    })
}

impl EduEngine {
    /// Drive the edu device through its BAR0. `dma_bits` is its dma_mask width (28 by default
    /// in QEMU; 32 when started with `-device edu,dma_mask=0xffffffff`).
    pub fn new(bar0: Box<dyn BarRegion>, dma_bits: u32) -> Result<EduEngine> {
        if bar0.index() != 0 || bar0.len() < 0x100 {
            return Err(Error::usage(format!(
                "the edu engine needs BAR0 (1 MiB), not BAR{} of {} bytes",
                bar0.index(),
                bar0.len()
            )));
        }
        // The identification register reads 0x010000ed (version 1.0, 0xed).
        let id = bar0.read(REG_ID, Width::B32)?;
        if id & 0xff != 0xed {
            return Err(Error::Device(format!(
                "BAR0 +0x00 reads {id:#010x}, not edu's identification 0x010000ed: is this QEMU's edu device (1234:11e8) with memory decoding on?"
            )));
        }
        let trace = bar0.tracer().cloned();
        Ok(EduEngine { bar: bar0, dma_bits, prepared: None, stale_checked: false, trace })
    }

    fn cmd(&self) -> Result<u64> {
        self.bar.read(REG_DMA_CMD, Width::B32)
    }

    /// A command register of all-ones may be the card gone: the identification register never
    /// reads all-ones on a live edu (0x010000ed, hw/misc/edu.c), so if it does too, say so.
    fn check_answering(&self, cmd: u64) -> Result<()> {
        if cmd == 0xffff_ffff && self.bar.read(REG_ID, Width::B32)? == 0xffff_ffff {
            return Err(Error::Gone(
                "edu's command and identification registers read 0xffffffff (its identification is 0x010000ed)".into(),
            ));
        }
        Ok(())
    }

    /// Program the prepared transfer and write the command `cmd` (which starts it).
    fn start(&self, cmd: u64) -> Result<()> {
        let p = self.prepared.ok_or_else(|| Error::usage("edu: start without prepare()"))?;
        let now = self.cmd()?;
        self.check_answering(now)?;
        if now & CMD_START != 0 {
            return Err(Error::Device("edu: a DMA is still running from before: wait for it to finish".into()));
        }
        self.write_addr(REG_DMA_SRC, p.src)?;
        self.write_addr(REG_DMA_DST, p.dst)?;
        self.bar.write(REG_DMA_COUNT, Width::B32, p.count)?;
        self.bar.write(REG_DMA_CMD, Width::B32, cmd)
    }

    /// Addresses that fit 32 bits are written with one 32-bit store (a VFIO pwrite of 8 bytes is
    /// split into two 32-bit accesses on older kernels, and edu ignores the upper one).
    fn write_addr(&self, reg: u64, v: u64) -> Result<()> {
        match u32::try_from(v) {
            Ok(v32) => self.bar.write(reg, Width::B32, v32 as u64),
            Err(_) => self.bar.write(reg, Width::B64, v),
        }
    }
}

impl Engine for EduEngine {
    fn name(&self) -> &'static str {
        "edu"
    }

    fn card_size(&self) -> u64 {
        EDU_MAX_TRANSFER
    }

    fn max_transfer(&self) -> u64 {
        EDU_MAX_TRANSFER
    }

    /// Four transfers: each takes ~100 ms of QEMU's virtual clock.
    fn default_total(&self, size: u64) -> u64 {
        4 * size
    }

    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        if !matches!(t.buf_offset.checked_add(t.len), Some(end) if end <= buf.len() as u64) {
            return Err(Error::usage(format!(
                "transfer of {} bytes at buffer offset {:#x} is past the {}-byte buffer",
                t.len,
                t.buf_offset,
                buf.len()
            )));
        }
        self.prepared = Some(program(t, buf.bus_range(t.buf_offset, t.len), self.dma_bits)?);
        self.stale_checked = false;
        Ok(())
    }

    fn run(&mut self, timeout: Duration) -> Result<()> {
        let p = self.prepared.ok_or_else(|| Error::usage("edu: run() without prepare()"))?;
        self.start(p.cmd)?;
        let start = Instant::now();
        loop {
            let cmd = self.cmd()?;
            if cmd & CMD_START == 0 {
                return Ok(());
            }
            if cmd == 0xffff_ffff {
                self.check_answering(cmd)?;
                return Err(Error::Device(
                    "edu: the command register reads all-ones: the device stopped responding (memory decoding off, or removed)".into(),
                ));
            }
            if start.elapsed() > timeout {
                let status = self.stop()?;
                return Err(Error::Device(format!(
                    "edu DMA did not finish within {} ms: {status}",
                    timeout.as_millis()
                )));
            }
            // edu finishes on its ~100 ms timer: poll gently rather than flood the VM with exits,
            // then, close to the timer, without sleeping, so the completion is seen within a
            // register read of it (a latency run times this loop).
            if start.elapsed() + TIGHT_BEFORE < EDU_TIMER {
                std::thread::sleep(GENTLE_POLL);
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn completes_by_interrupt(&self) -> bool {
        true
    }

    fn run_interrupt(&mut self, irq: &dyn crate::access::Interrupts, timeout: Duration) -> Result<()> {
        let p = self.prepared.ok_or_else(|| Error::usage("edu: run_interrupt() without prepare()"))?;
        // Collect anything pending from before, so the wait below is for this transfer. A cause left
        // from before (a transfer that completed after its run was killed, which edu then raised on
        // INTx, MSI being off) is acknowledged, once per prepared transfer or when something is
        // pending: edu ORs a new cause into the status and would not raise the line again while it
        // is still up (edu_raise_irq), and only the acknowledge lowers it (edu_lower_irq). Whatever
        // fired for it is collected and INTx, which vfio-pci masked when it fired, unmasked.
        let pending = !irq.wait(Duration::ZERO)?.is_empty();
        if pending || !self.stale_checked {
            self.stale_checked = true;
            if self.bar.read(REG_IRQ_STATUS, Width::B32)? & DMA_IRQ != 0 {
                self.bar.write(REG_IRQ_ACK, Width::B32, DMA_IRQ)?;
            }
            if pending | !irq.wait(Duration::ZERO)?.is_empty() {
                irq.unmask()?;
            }
        }
        self.start(p.cmd | CMD_IRQ)?;
        if irq.wait(timeout)?.is_empty() {
            let status = self.stop()?;
            return Err(Error::Device(format!(
                "edu raised no interrupt within {} ms of the DMA command ({}): {status}",
                timeout.as_millis(),
                irq.describe()
            )));
        }
        // edu_dma_timer clears the start bit before it raises the interrupt.
        let cmd = self.cmd()?;
        if cmd & CMD_START != 0 {
            return Err(Error::Device(format!(
                "edu's interrupt arrived while its command register still reads {cmd:#x} (running): an interrupt before the completion it signals"
            )));
        }
        let status = self.bar.read(REG_IRQ_STATUS, Width::B32)?;
        if status & DMA_IRQ == 0 {
            return Err(Error::Device(format!(
                "an interrupt arrived but edu's interrupt status reads {status:#x}, without the DMA-done bit {DMA_IRQ:#x}"
            )));
        }
        // The acknowledge clears the status bit; with MSI off, edu_lower_irq then drops INTx. Only
        // after it is the line unmasked (vfio-pci masked it when it fired: vfio_intx_handler), so
        // a level still asserted cannot fire again for this transfer; MSI has nothing to unmask.
        self.bar.write(REG_IRQ_ACK, Width::B32, DMA_IRQ)?;
        irq.unmask()
    }

    fn stop(&mut self) -> Result<String> {
        if let Some(t) = &self.trace {
            t.stop(self.name());
        }
        // edu has no abort: its timer always completes the transfer. Report what it holds.
        let cmd = self.cmd()?;
        let rd = |r| self.bar.read(r, Width::B64);
        Ok(format!(
            "command {cmd:#x} ({}), source {:#x}, destination {:#x}, count {}",
            if cmd & CMD_START != 0 { "still running: edu cannot be stopped, its timer completes it" } else { "idle" },
            rd(REG_DMA_SRC)?,
            rd(REG_DMA_DST)?,
            rd(REG_DMA_COUNT)?
        ))
    }
}

/// edu in the engine registry: QEMU's test device, found by its fixed ids.
pub struct EduDriver;

impl super::EngineDriver for EduDriver {
    fn name(&self) -> &'static str {
        "edu"
    }

    fn about(&self) -> &'static str {
        "QEMU's edu device (1234:11e8): 4 KiB card buffer, ~100 ms per transfer"
    }

    /// QEMU hw/misc/edu.c `edu_mmio_read`: 4-byte accesses anywhere, 8-byte ones from 0x80 (below
    /// it they read all-ones).
    fn register_widths(&self) -> &'static [crate::mmio::Width] {
        &[crate::mmio::Width::B32, crate::mmio::Width::B64]
    }

    fn default_dma_bits(&self) -> u32 {
        EDU_DEFAULT_DMA_BITS
    }

    fn check_options(&self, opts: &super::EngineOptions) -> Result<()> {
        opts.refuse_queues("edu")?;
        let unused = [("--card-size", opts.card_size.is_some()), ("--channel", opts.channel.is_some())];
        match unused.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(Error::usage(format!(
                "{flag} does not apply to the edu engine (one 4 KiB buffer, one channel): drop it"
            ))),
            None => Ok(()),
        }
    }

    fn detect(
        &self,
        info: &crate::pci::DeviceInfo,
        _dev: &dyn crate::access::DeviceAccess,
    ) -> Result<Option<super::Detected>> {
        if (info.vendor_id, info.device_id) != (EDU_VENDOR, EDU_DEVICE) {
            return Ok(None);
        }
        Ok(Some(super::Detected {
            engine: "edu",
            register_bars: vec![0],
            summary: format!(
                "edu DMA engine (QEMU) in BAR0: a {EDU_BUF_SIZE}-byte card buffer at {EDU_BUF_ADDR:#x}, transfers up to {EDU_MAX_TRANSFER} bytes"
            ),
            details: serde_json::json!({ "bar": 0, "buffer_addr": EDU_BUF_ADDR, "buffer_size": EDU_BUF_SIZE }),
        }))
    }

    fn open(
        &self,
        _found: &super::Detected,
        _info: &crate::pci::DeviceInfo,
        dev: &dyn crate::access::DeviceAccess,
        alloc: &dyn crate::dma::DmaAllocator,
        opts: &super::EngineOptions,
    ) -> Result<super::Opened> {
        let bar0 = dev.open_bar(0, crate::access::Mapping::Uc, crate::access::IoMode::Mmap)?;
        Ok(super::Opened {
            engine: Box::new(EduEngine::new(bar0, alloc.dma_bits())?),
            card_offset: card_offset(opts.card_addr.unwrap_or(0))?,
        })
    }
}

#[cfg(test)]
mod tests;
