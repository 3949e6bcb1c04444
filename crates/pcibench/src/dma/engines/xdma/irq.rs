//! XDMA completion by interrupt, as libxdma.c runs it when not in poll mode.
//!
//! Arming (once, when the first run by interrupt comes; `xdma_irq_setup`/`irq_setup`,
//! `engine_init_regs`): the channel pair's vector numbers in the IRQ block (0xA0.., a 5-bit field
//! a channel bit, H2C channels first: `prog_irq_msix_channel` gives channel bit `i` MSI-X vector
//! `i`; with MSI or INTx every channel signals on the function's one vector, 0, as
//! `irq_legacy_setup` leaves them for pin A), the channel interrupt enable mask (`IE_MASK_IRQ`:
//! errors, descriptor stopped and completed) and the IRQ block's channel enables (W1S,
//! `channel_interrupts_enable`). Each run writes `CONTROL_IRQ` (no poll-mode writeback) and sleeps
//! on the access path's eventfds. The handler is the vendor's:
//! - MSI-X (`xdma_channel_irq`, `engine_service_work`): the channel's vector fired; disable its
//!   mask (W1C), flush with a read of the pending register, read the status through the
//!   read-to-clear alias (`engine_service` → `engine_status_read(engine, 1, 0)`), re-enable (W1S).
//! - MSI and INTx (`xdma_isr`): read the IRQ block's channel request register, disable the channels
//!   that request (W1C), flush with a read of the user request, service each, re-enable them;
//!   INTx is then unmasked, the cause having been cleared by the status read.
//!
//! Switching back to polling, and dropping the engine, put every register armed back as it was
//! found, so the device is left with its interrupt enables as they were.

use super::regs::*;
use super::{decode_status, Direction, XdmaEngine, FLOOR_MBPS};
use crate::access::{Fired, Interrupts, IrqKind, IrqRequest};
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::{Error, Result};
use std::time::Duration;

/// How long one sleep on the eventfds lasts before the engine's progress is looked at: the
/// watchdog ends a run whose interrupt never comes once the completed count stops moving.
const SLICE: Duration = Duration::from_millis(20);

/// What arming changed, as found, and the routing it was armed for.
pub(super) struct Armed {
    kind: IrqKind,
    vectors: u32,
    /// IRQ block channel enable (0x10), for this pair's bits.
    enable: u32,
    /// IRQ block channel vector registers (0xA0, 0xA4).
    vector_regs: [u32; 2],
    /// (direction, interrupt enable mask) of each channel present.
    masks: Vec<(Direction, u32)>,
}

impl XdmaEngine {
    /// This pair's channels and their bits in the IRQ block.
    fn irq_channels(&self) -> Vec<(Direction, u32)> {
        [Direction::H2c, Direction::C2h]
            .into_iter()
            .filter(|&d| self.info.channel(d, self.opts.channel).is_some())
            .filter_map(|d| self.irq_bit(d).map(|b| (d, b)))
            .collect()
    }

    /// What to ask the access path for: a vector per channel bit up to this pair's highest (the
    /// vendor's MSI-X layout), of the best kind the function offers.
    pub(super) fn irq_wanted(&self) -> IrqRequest {
        IrqRequest::any(self.irq_channels().iter().map(|(_, b)| b + 1).max().unwrap_or(1))
    }

    /// Arm the pair's interrupts for `irq` (once; again after a change of routing).
    fn arm(&mut self, irq: &dyn Interrupts) -> Result<()> {
        if let Some(a) = &self.armed {
            if a.kind == irq.kind() && a.vectors == irq.vectors() {
                return Ok(());
            }
            self.disarm()?;
        }
        let chans = self.irq_channels();
        if chans.is_empty() {
            return Err(Error::Unsupported(format!(
                "XDMA channel {} has no bit in the IRQ block (the vendor numbers channels only up to the first absent one): it cannot complete by interrupt",
                self.opts.channel
            )));
        }
        let vec_reg = |i: usize| reg(T_IRQ, 0, IRQ_CHANNEL_VECTOR + 4 * i as u32);
        let mut armed = Armed {
            kind: irq.kind(),
            vectors: irq.vectors(),
            enable: self.rd(reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE))?,
            vector_regs: [self.rd(vec_reg(0))?, self.rd(vec_reg(1))?],
            masks: Vec::new(),
        };
        let mut words = armed.vector_regs;
        let mut bits = 0u32;
        for &(dir, bit) in &chans {
            let vector = match irq.kind() {
                IrqKind::MsiX if bit >= irq.vectors() => {
                    return Err(Error::Unsupported(format!(
                        "XDMA {dir} channel {} signals on MSI-X vector {bit} (libxdma's layout: one per channel, H2C first), \
                         but only {} vectors were routed",
                        self.opts.channel,
                        irq.vectors()
                    )))
                }
                IrqKind::MsiX => bit,
                IrqKind::Msi | IrqKind::Intx => 0,
            };
            let (word, shift) = (bit as usize / 4, 8 * (bit % 4));
            words[word] = words[word] & !(0x1f << shift) | vector << shift;
            bits |= 1 << bit;
            armed.masks.push((dir, self.rd(self.ch_reg(dir, CH_IE_MASK))?));
        }
        armed.enable &= bits;
        // Recorded before the first write: a failure part way is undone by `disarm`.
        self.armed = Some(armed);
        for (i, w) in words.iter().enumerate() {
            self.wr(vec_reg(i), *w)?;
        }
        for &(dir, _) in &chans {
            self.wr(self.ch_reg(dir, CH_IE_MASK), IE_MASK_IRQ)?;
        }
        self.wr(reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE_W1S), bits)
    }

    /// Put back what `arm` changed (the channel enables first, so nothing fires half-restored).
    pub(super) fn disarm(&mut self) -> Result<()> {
        let Some(a) = self.armed.take() else { return Ok(()) };
        let bits = self.irq_channels().iter().fold(0, |acc, (_, b)| acc | 1 << b);
        self.wr(reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE_W1C), bits & !a.enable)?;
        for (dir, mask) in &a.masks {
            self.wr(self.ch_reg(*dir, CH_IE_MASK), *mask)?;
        }
        for (i, w) in a.vector_regs.iter().enumerate() {
            self.wr(reg(T_IRQ, 0, IRQ_CHANNEL_VECTOR + 4 * i as u32), *w)?;
        }
        // The status a completion left requesting is read-cleared, so no request is left asserted.
        for (dir, _) in &a.masks {
            self.rd(self.ch_reg(*dir, CH_STATUS_RC))?;
        }
        Ok(())
    }

    /// Run the prepared chain and sleep until its completion interrupt.
    pub(super) fn run_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        let chain = self.prepared()?;
        let (dir, n) = (chain.dir, chain.descriptors.len() as u32);
        let largest = chain.descriptors.iter().map(|d| u64::from(d.len)).max().unwrap_or(0);
        self.arm(irq)?;
        let bit = self.irq_bit(dir).ok_or_else(|| {
            Error::Unsupported(format!("XDMA {dir} channel {} has no bit in the IRQ block", self.opts.channel))
        })?;
        // What fired before this run (a poll-mode run's leftovers) is not this run's completion.
        irq.wait(Duration::ZERO)?;
        self.submit_with(CONTROL_IRQ)?;
        let timeout = timeout.max(Duration::from_micros(largest / FLOOR_MBPS));
        let mut dog = Watchdog::new(timeout);
        let ch = self.opts.channel;
        loop {
            let fired = irq.wait(SLICE.min(timeout))?;
            let status = if fired.is_empty() { None } else { self.service(irq, &fired, dir, bit)? };
            let done = self.rd(self.ch_reg(dir, CH_COMPLETED))? & WB_COUNT;
            if let Some(st) = status {
                if st & ST_ERRORS != 0 {
                    self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
                    let (st2, _) = self.settle(dir)?;
                    return Err(Error::Device(format!(
                        "XDMA {dir} channel {ch} raised its interrupt on an error after {done} of {n} descriptors: status {}",
                        decode_status(dir, st | st2)
                    )));
                }
                if done >= n && st & ST_BUSY == 0 {
                    return self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN);
                }
            }
            let now = if fired.is_empty() { self.rd(self.ch_reg(dir, CH_STATUS))? } else { ST_BUSY };
            if now & ST_BUSY == 0 {
                // Idle with no interrupt: the enables are not what they were armed with.
                let st = self.rd(self.ch_reg(dir, CH_STATUS_RC))?;
                self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
                return Err(Error::Device(format!(
                    "XDMA {dir} channel {ch} went idle after {done} of {n} descriptors without raising its interrupt \
                     ({}; IRQ block channel enable {:#x}, interrupt enable mask {:#x}): status {}",
                    irq.describe(),
                    self.rd(reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE))?,
                    self.rd(self.ch_reg(dir, CH_IE_MASK))?,
                    decode_status(dir, st | now)
                )));
            }
            if dog.stalled(u64::from(done)) {
                self.wr(self.ch_reg(dir, CH_CONTROL_W1C), RUN)?;
                let (st, idle) = self.settle(dir)?;
                let stopped = if idle {
                    "cleared run and waited for the channel to go idle".to_string()
                } else {
                    format!("cleared run; {}", self.still_busy(dir))
                };
                return Err(Error::Device(format!(
                    "XDMA {dir} channel {ch}: no interrupt came and {} ({done} of {n} descriptors completed; {}); {stopped}; status {}",
                    no_progress(timeout),
                    irq.describe(),
                    decode_status(dir, st)
                )));
            }
        }
    }

    /// The vendor's handler for what fired: the status of `dir`'s channel, read and cleared, if
    /// its interrupt was among it (None: another channel's, or nothing to service).
    fn service(&self, irq: &dyn Interrupts, fired: &Fired, dir: Direction, bit: u32) -> Result<Option<u32>> {
        let irq_reg = |r| reg(T_IRQ, 0, r);
        match irq.kind() {
            IrqKind::MsiX => {
                if fired.vector(bit) == 0 {
                    return Ok(None);
                }
                self.wr(self.ch_reg(dir, CH_IE_MASK_W1C), IE_MASK_IRQ)?;
                self.rd(irq_reg(IRQ_CHANNEL_PENDING))?;
                let st = self.rd(self.ch_reg(dir, CH_STATUS_RC))?;
                self.wr(self.ch_reg(dir, CH_IE_MASK_W1S), IE_MASK_IRQ)?;
                Ok(Some(st))
            }
            IrqKind::Msi | IrqKind::Intx => {
                let ours = self.irq_channels().iter().fold(0, |a, (_, b)| a | 1 << b);
                let requests = self.rd(irq_reg(IRQ_CHANNEL_REQUEST))? & ours;
                if requests != 0 {
                    self.wr(irq_reg(IRQ_CHANNEL_ENABLE_W1C), requests)?;
                }
                self.rd(irq_reg(IRQ_USER_REQUEST))?;
                let mut st = None;
                for (d, b) in self.irq_channels() {
                    if requests & 1 << b != 0 {
                        let s = self.rd(self.ch_reg(d, CH_STATUS_RC))?;
                        if b == bit {
                            st = Some(s);
                        }
                    }
                }
                if requests != 0 {
                    self.wr(irq_reg(IRQ_CHANNEL_ENABLE_W1S), requests)?;
                }
                // The causes are cleared: a level still asserted now is a new one, and fires.
                irq.unmask()?;
                Ok(st)
            }
        }
    }
}
