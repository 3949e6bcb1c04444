//! XDMA completion by interrupt, as libxdma.c runs it when not in poll mode.
//!
//! Arming (once, when the first run by interrupt comes; `xdma_irq_setup`/`irq_setup`,
//! `engine_init_regs`): the channel pair's vector numbers in the IRQ block (0xA0.., a 5-bit field
//! a channel bit, H2C channels first: `prog_irq_msix_channel` gives channel bit `i` MSI-X vector
//! `i`; with MSI every channel signals on the function's one vector, 0; with INTx on the
//! function's pin, `pin - 1` from config byte 0x3D in the channel and user vector fields, as
//! `irq_legacy_setup` programs them: PG195 "Legacy Interrupts", the host sees only the line the
//! field names), the channel interrupt enable mask (`IE_MASK_IRQ`: errors, descriptor stopped and
//! completed), the IRQ block's channel enables (W1S, `channel_interrupts_enable`) and the user
//! interrupt enables cleared (W1C: libxdma disables them at open, `user_interrupts_disable`, so
//! a user interrupt the design raises cannot wake a run or re-assert INTx after every unmask). Each run writes `CONTROL_IRQ` (no poll-mode writeback) and sleeps
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
use super::{decode_status, Direction, XdmaChannel, XdmaEngine, XdmaInfo, FLOOR_MBPS};
use crate::access::{BarRegion, Fired, Interrupts, IrqKind, IrqRequest};
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::mmio::Width;
use crate::{Error, Result};
use std::time::Duration;

/// How long one sleep on the eventfds lasts before the engine's progress is looked at: the
/// watchdog ends a run whose interrupt never comes once the completed count stops moving.
pub(super) const SLICE: Duration = Duration::from_millis(20);

/// What arming changed, as found, and the routing it was armed for.
struct Armed {
    kind: IrqKind,
    vectors: u32,
    /// IRQ block channel enable (0x10), for this pair's bits.
    enable: u32,
    /// IRQ block channel vector registers (0xA0, 0xA4).
    vector_regs: [u32; 2],
    /// IRQ block user interrupt enables (0x04), cleared while armed.
    user_enable: u32,
    /// IRQ block user vector registers (0x80-0x8C), where INTx rewrote them.
    user_vectors: Option<[u32; 4]>,
    /// (direction, interrupt enable mask) of each channel present.
    masks: Vec<(Direction, u32)>,
}

/// The channel's bit in the IRQ block's channel registers: the vendor numbers engines H2C first,
/// then C2H, in probe order (libxdma.c probe_engines, engine_create irq_bitmask); its probe stops
/// at the first absent channel, so only channels below a gap have a bit.
fn irq_bit(info: &XdmaInfo, dir: Direction, ch: u8) -> Option<u32> {
    let present = |list: &[XdmaChannel]| (0..4u8).take_while(|i| list.iter().any(|c| c.index == *i)).count() as u32;
    let ch = u32::from(ch);
    match dir {
        Direction::H2c => (ch < present(&info.h2c)).then_some(ch),
        Direction::C2h => (ch < present(&info.c2h)).then(|| present(&info.h2c) + ch),
    }
}

fn rd(bar: &dyn BarRegion, off: u64) -> Result<u32> {
    Ok(bar.read(off, Width::B32)? as u32)
}

fn wr(bar: &dyn BarRegion, off: u64, v: u32) -> Result<()> {
    bar.write(off, Width::B32, u64::from(v))
}

fn ch_reg(dir: Direction, ch: u8, r: u32) -> u64 {
    reg(if dir == Direction::H2c { T_H2C } else { T_C2H }, ch, r)
}

/// Set a channel pair up for poll mode as the vendor driver does, so that a card left in
/// interrupt mode (by the kernel driver, or an earlier program) raises no interrupt nothing here
/// would service: the interrupt enable mask gets the vendor's poll-mode value (errors only, never
/// descriptor completion; libxdma.c engine_init_regs), and the channels' interrupt enables in the
/// IRQ block are cleared (libxdma.c xdma_device_open disables every channel interrupt and enables
/// them only when not in poll mode). Only this pair's bits are touched: other channels may belong
/// to someone else's measurement.
pub(super) fn poll_mode(bar: &dyn BarRegion, info: &XdmaInfo, ch: u8) -> Result<()> {
    let mut irq_bits = 0u32;
    for dir in [Direction::H2c, Direction::C2h] {
        if info.channel(dir, ch).is_none() {
            continue;
        }
        wr(bar, ch_reg(dir, ch, CH_IE_MASK), IE_MASK_POLL)?;
        if let Some(bit) = irq_bit(info, dir, ch) {
            irq_bits |= 1 << bit;
        }
    }
    if irq_bits != 0 {
        wr(bar, reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE_W1C), irq_bits)?;
    }
    Ok(())
}

/// A channel pair's interrupts: each present channel's bit in the IRQ block, and what arming
/// changed while armed. The memory-mapped and the stream drivers share it: the vendor arms and
/// services both kinds of channel the same way (libxdma.c has no stream-specific interrupt code).
pub(super) struct PairIrq {
    ch: u8,
    /// The function's INTx pin (config byte 0x3D: 1-4, 0 none).
    pin: u8,
    /// (direction, IRQ block bit) of each present channel that has a bit.
    chans: Vec<(Direction, u32)>,
    armed: Option<Armed>,
}

impl PairIrq {
    pub(super) fn new(info: &XdmaInfo, ch: u8) -> PairIrq {
        let chans = [Direction::H2c, Direction::C2h]
            .into_iter()
            .filter(|&d| info.channel(d, ch).is_some())
            .filter_map(|d| irq_bit(info, d, ch).map(|b| (d, b)))
            .collect();
        PairIrq { ch, pin: 1, chans, armed: None }
    }

    /// The function's INTx pin, from config byte 0x3D (libxdma.c irq_legacy_setup reads it).
    pub(super) fn set_pin(&mut self, pin: u8) {
        self.pin = pin;
    }

    /// The vector field of every interrupt with INTx: the pin's line, INTA = 0 (PG195 "Legacy
    /// Interrupts"), in each of four 5-bit fields of a word as libxdma writes it.
    fn intx_vector(&self) -> u32 {
        u32::from(self.pin.clamp(1, 4) - 1)
    }

    /// The `dir` channel's bit in the IRQ block.
    pub(super) fn bit(&self, dir: Direction) -> Option<u32> {
        self.chans.iter().find(|c| c.0 == dir).map(|c| c.1)
    }

    /// Whether the `dir` channel's interrupt is on its way, however late its message arrives: the
    /// channel requests it (IRQ block Channel Interrupt Request, +0x44: a cause logged in its
    /// status and enabled in its mask, PG195) and the IRQ block lets it through (Channel
    /// Interrupt Enable Mask, +0x10).
    pub(super) fn requesting(&self, bar: &dyn BarRegion, dir: Direction) -> Result<bool> {
        let Some(bit) = self.bit(dir) else { return Ok(false) };
        let irq_reg = |r| reg(T_IRQ, 0, r);
        Ok(rd(bar, irq_reg(IRQ_CHANNEL_REQUEST))? & rd(bar, irq_reg(IRQ_CHANNEL_ENABLE))? & 1 << bit != 0)
    }

    fn bits(&self) -> u32 {
        self.chans.iter().fold(0, |acc, (_, b)| acc | 1 << b)
    }

    /// What to ask the access path for: a vector per channel bit up to this pair's highest (the
    /// vendor's MSI-X layout), of the best kind the function offers.
    pub(super) fn wanted(&self) -> IrqRequest {
        IrqRequest::any(self.chans.iter().map(|(_, b)| b + 1).max().unwrap_or(1))
    }

    /// Arm the pair's interrupts for `irq` (once; again after a change of routing).
    pub(super) fn arm(&mut self, bar: &dyn BarRegion, irq: &dyn Interrupts) -> Result<()> {
        if let Some(a) = &self.armed {
            if a.kind == irq.kind() && a.vectors == irq.vectors() {
                return Ok(());
            }
            self.disarm(bar)?;
        }
        if self.chans.is_empty() {
            return Err(Error::Unsupported(format!(
                "XDMA channel {} has no bit in the IRQ block (the vendor numbers channels only up to the first absent one): it cannot complete by interrupt",
                self.ch
            )));
        }
        let vec_reg = |i: usize| reg(T_IRQ, 0, IRQ_CHANNEL_VECTOR + 4 * i as u32);
        let user_reg = |i: usize| reg(T_IRQ, 0, IRQ_USER_VECTOR + 4 * i as u32);
        let intx = irq.kind() == IrqKind::Intx;
        let user_vectors = if intx {
            Some([rd(bar, user_reg(0))?, rd(bar, user_reg(1))?, rd(bar, user_reg(2))?, rd(bar, user_reg(3))?])
        } else {
            None
        };
        let mut armed = Armed {
            kind: irq.kind(),
            vectors: irq.vectors(),
            enable: rd(bar, reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE))?,
            vector_regs: [rd(bar, vec_reg(0))?, rd(bar, vec_reg(1))?],
            user_enable: rd(bar, reg(T_IRQ, 0, IRQ_USER_ENABLE))? & 0xffff,
            user_vectors,
            masks: Vec::new(),
        };
        let mut words = armed.vector_regs;
        for &(dir, bit) in &self.chans {
            let vector = match irq.kind() {
                IrqKind::MsiX if bit >= irq.vectors() => {
                    return Err(Error::Unsupported(format!(
                        "XDMA {dir} channel {} signals on MSI-X vector {bit} (libxdma's layout: one per channel, H2C first), \
                         but only {} vectors were routed",
                        self.ch,
                        irq.vectors()
                    )))
                }
                IrqKind::MsiX => bit,
                IrqKind::Msi => 0,
                IrqKind::Intx => self.intx_vector(),
            };
            let (word, shift) = (bit as usize / 4, 8 * (bit % 4));
            words[word] = words[word] & !(0x1f << shift) | vector << shift;
            armed.masks.push((dir, rd(bar, ch_reg(dir, self.ch, CH_IE_MASK))?));
        }
        let bits = self.bits();
        armed.enable &= bits;
        let user_enable = armed.user_enable;
        // Recorded before the first write: a failure part way is undone by `disarm`.
        self.armed = Some(armed);
        if user_enable != 0 {
            wr(bar, reg(T_IRQ, 0, IRQ_USER_ENABLE_W1C), user_enable)?;
        }
        if intx {
            let v = self.intx_vector() * 0x0101_0101;
            for i in 0..4 {
                wr(bar, user_reg(i), v)?;
            }
        }
        for (i, w) in words.iter().enumerate() {
            wr(bar, vec_reg(i), *w)?;
        }
        for &(dir, _) in &self.chans {
            wr(bar, ch_reg(dir, self.ch, CH_IE_MASK), IE_MASK_IRQ)?;
        }
        wr(bar, reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE_W1S), bits)
    }

    /// Put back what `arm` changed (the channel enables first, so nothing fires half-restored).
    pub(super) fn disarm(&mut self, bar: &dyn BarRegion) -> Result<()> {
        let Some(a) = self.armed.take() else { return Ok(()) };
        wr(bar, reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE_W1C), self.bits() & !a.enable)?;
        for (dir, mask) in &a.masks {
            wr(bar, ch_reg(*dir, self.ch, CH_IE_MASK), *mask)?;
        }
        for (i, w) in a.vector_regs.iter().enumerate() {
            wr(bar, reg(T_IRQ, 0, IRQ_CHANNEL_VECTOR + 4 * i as u32), *w)?;
        }
        for (i, w) in a.user_vectors.iter().flatten().enumerate() {
            wr(bar, reg(T_IRQ, 0, IRQ_USER_VECTOR + 4 * i as u32), *w)?;
        }
        if a.user_enable != 0 {
            wr(bar, reg(T_IRQ, 0, IRQ_USER_ENABLE_W1S), a.user_enable)?;
        }
        // The status a completion left requesting is read-cleared, so no request is left asserted.
        for (dir, _) in &a.masks {
            rd(bar, ch_reg(*dir, self.ch, CH_STATUS_RC))?;
        }
        Ok(())
    }

    /// The vendor's handler for what fired: the status, read and cleared, of each of the pair's
    /// channels whose interrupt was among it.
    pub(super) fn service(&self, bar: &dyn BarRegion, irq: &dyn Interrupts, fired: &Fired) -> Result<Serviced> {
        let irq_reg = |r| reg(T_IRQ, 0, r);
        let mut out = Serviced::default();
        match irq.kind() {
            IrqKind::MsiX => {
                for &(dir, bit) in &self.chans {
                    if fired.vector(bit) == 0 {
                        continue;
                    }
                    wr(bar, ch_reg(dir, self.ch, CH_IE_MASK_W1C), IE_MASK_IRQ)?;
                    rd(bar, irq_reg(IRQ_CHANNEL_PENDING))?;
                    *out.slot(dir) = Some(rd(bar, ch_reg(dir, self.ch, CH_STATUS_RC))?);
                    wr(bar, ch_reg(dir, self.ch, CH_IE_MASK_W1S), IE_MASK_IRQ)?;
                }
            }
            IrqKind::Msi | IrqKind::Intx => {
                let requests = rd(bar, irq_reg(IRQ_CHANNEL_REQUEST))? & self.bits();
                if requests != 0 {
                    wr(bar, irq_reg(IRQ_CHANNEL_ENABLE_W1C), requests)?;
                }
                rd(bar, irq_reg(IRQ_USER_REQUEST))?;
                for &(dir, bit) in &self.chans {
                    if requests & 1 << bit != 0 {
                        *out.slot(dir) = Some(rd(bar, ch_reg(dir, self.ch, CH_STATUS_RC))?);
                    }
                }
                if requests != 0 {
                    wr(bar, irq_reg(IRQ_CHANNEL_ENABLE_W1S), requests)?;
                }
                // The causes are cleared: a level still asserted now is a new one, and fires.
                irq.unmask()?;
            }
        }
        Ok(out)
    }
}

/// What one service found: each channel's status, read and cleared, where its interrupt fired
/// (None: not this channel's, or nothing to service).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Serviced {
    h2c: Option<u32>,
    c2h: Option<u32>,
}

impl Serviced {
    pub(super) fn of(&self, dir: Direction) -> Option<u32> {
        if dir == Direction::H2c {
            self.h2c
        } else {
            self.c2h
        }
    }

    fn slot(&mut self, dir: Direction) -> &mut Option<u32> {
        if dir == Direction::H2c {
            &mut self.h2c
        } else {
            &mut self.c2h
        }
    }
}

impl XdmaEngine {
    /// Run the prepared chain and sleep until its completion interrupt.
    pub(super) fn run_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        let chain = self.prepared()?;
        let (dir, n) = (chain.dir, chain.descriptors.len() as u32);
        let largest = chain.descriptors.iter().map(|d| u64::from(d.len)).max().unwrap_or(0);
        self.irq.arm(&*self.bar, irq)?;
        if self.irq.bit(dir).is_none() {
            return Err(Error::Unsupported(format!(
                "XDMA {dir} channel {} has no bit in the IRQ block",
                self.opts.channel
            )));
        }
        // What fired before this run (a poll-mode run's leftovers, a user interrupt before arming
        // disabled it) is not this run's completion; it is serviced as the vendor's handler would,
        // so an INTx line that fired is unmasked again (else the run's own would never come).
        let stale = irq.wait(Duration::ZERO)?;
        if !stale.is_empty() {
            self.irq.service(&*self.bar, irq, &stale)?;
        }
        self.submit_with(CONTROL_IRQ)?;
        let timeout = timeout.max(Duration::from_micros(largest / FLOOR_MBPS));
        let mut dog = Watchdog::new(timeout);
        let ch = self.opts.channel;
        let mut quiet = 0u32;
        loop {
            let fired = irq.wait(SLICE.min(timeout))?;
            let status = if fired.is_empty() { None } else { self.irq.service(&*self.bar, irq, &fired)?.of(dir) };
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
            // Idle for a whole slice after one already idle, and not requesting: an interrupt the
            // channel requests is on its way however late its message (a preempted model worker on
            // a loaded host, a slow interrupt path), and the watchdog bounds that wait.
            let idle = now & ST_BUSY == 0 && !self.irq.requesting(&*self.bar, dir)?;
            quiet = if idle { quiet + 1 } else { 0 };
            if quiet >= 2 {
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
}
