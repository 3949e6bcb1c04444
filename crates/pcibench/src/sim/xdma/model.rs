//! The sim card's DMA engine: a register model of the Xilinx/AMD DMA/Bridge Subsystem for PCI
//! Express (XDMA, PG195) in memory-mapped SGDMA mode, written from PG195's register tables.
//!
//! BAR4 offset = target[15:12] | channel[11:8] | register[7:0]. Targets: 0 H2C channel,
//! 1 C2H channel, 2 IRQ block, 3 config block, 4 H2C SGDMA, 5 C2H SGDMA, 6 SGDMA common,
//! 8 MSI-X (not modelled: reads 0). Absent channels read 0 everywhere (their identifier
//! included) and ignore writes. The engine itself (descriptor fetch, data movement, status,
//! writeback) progresses with time at the IP's datapath, whenever the host looks (`engine.rs`,
//! `stream.rs`; `datapath.rs` says why): every register access brings the channels to now first.

use super::super::card_memory::CardMemory;
use super::super::datapath::{self, ModelClock};
use super::super::host_map::HostMap;
use super::super::irq::{Offers, SimIrq};
use super::super::mem::Pages;
use super::state::*;
pub use super::state::{XdmaModelConfig, CARD_MEMORY_SIZE, DATAPATH, XDMA_BAR_LEN};
use super::stream::Loopback;
use crate::direction::Direction;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The XDMA IP's interrupts (PG195): up to 32 MSI-X and 32 MSI vectors, and INTx; the MSI-X table
/// and PBA in the DMA BAR's target 0x8 (PG195 "MSI-X Vector Table and PBA": 0x8000, PBA 0x8fe0).
pub const IRQ: Offers =
    Offers { msix: 32, msi: 32, intx: true, pin: 1, intx_maskable: true, msix_table: 0x8000, msix_pba: 0x8fe0 };

/// The XDMA register block and engine of one sim card.
/// The most descriptors one look completes per direction. Simulating a descriptor can take longer
/// than the datapath takes to move it (an endless chain, a loaded host, a run under qemu-user):
/// each look would then have more to catch up than the last and one register access would take
/// ever longer. Past this many the model falls behind real time instead, and the next look goes
/// on where this one stopped (about 10 ms of work natively).
const MAX_PER_LOOK: usize = 1 << 16;

pub struct XdmaModel {
    shared: Arc<Shared>,
    /// Stream mode: the loopback between H2C and C2H channel N, one per pair (empty otherwise).
    loops: Vec<Loopback>,
}

fn rmw(reg: &AtomicU32, alias: u32, value: u32, mask: u32) {
    match alias {
        0 => reg.store(value & mask, Ordering::Relaxed),
        1 => {
            reg.fetch_or(value & mask, Ordering::Relaxed);
        }
        _ => {
            reg.fetch_and(!(value & mask), Ordering::Relaxed);
        }
    }
}

/// The register a W1S/W1C alias modifies (and reads back): IRQ block enable masks at 0x04 and
/// 0x10, SGDMA common descriptor control at 0x10 and credit mode enable at 0x20.
fn alias_base(target: u32, reg: u32) -> u32 {
    match (target, reg) {
        (T_IRQ, 0x04 | 0x08 | 0x0c) => 0x04,
        (T_IRQ | T_COMMON, 0x10 | 0x14 | 0x18) => 0x10,
        (T_COMMON, 0x20 | 0x24 | 0x28) => 0x20,
        _ => reg,
    }
}

/// Busy from the `set_linger` test hook: run cleared, reads left (one spent per read).
fn lingering(c: &Channel) -> u32 {
    if c.control.load(Ordering::Acquire) & CTRL_RUN != 0 {
        return 0;
    }
    let left = c.linger.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| match n {
        0 => None,
        u32::MAX => Some(u32::MAX),
        n => Some(n - 1),
    });
    if left.is_ok() {
        ST_BUSY
    } else {
        0
    }
}

impl XdmaModel {
    pub fn new(cfg: XdmaModelConfig, host: Arc<HostMap>) -> Result<XdmaModel> {
        XdmaModel::with_clock(cfg, host, ModelClock::real())
    }

    /// The model on `clock`'s time (a test's fake clock).
    pub fn with_clock(cfg: XdmaModelConfig, host: Arc<HostMap>, clock: ModelClock) -> Result<XdmaModel> {
        if cfg.h2c_channels > 4 || cfg.c2h_channels > 4 {
            return Err(Error::usage(format!(
                "an XDMA engine has at most 4 channels per direction (asked for {} H2C, {} C2H)",
                cfg.h2c_channels, cfg.c2h_channels
            )));
        }
        let card_len = usize::try_from(cfg.card_size)
            .map_err(|_| Error::usage(format!("card memory of {:#x} bytes is too large", cfg.card_size)))?;
        let regs = || (0..64).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
        let unshaken = cfg.stepped || clock.set_by_test();
        let shared = Shared {
            cfg,
            h2c: (0..cfg.h2c_channels).map(|i| Channel::new(Direction::H2c, i, unshaken)).collect(),
            c2h: (0..cfg.c2h_channels).map(|i| Channel::new(Direction::C2h, i, unshaken)).collect(),
            card: CardMemory::new(Pages::new("card memory", card_len)?, cfg.card_size),
            host,
            bus_master: AtomicBool::new(false),
            clock,
            irq: regs(),
            config: regs(),
            common: regs(),
            violations: Mutex::new(Vec::new()),
            overrun: Default::default(),
            irq_out: Arc::new(SimIrq::new("XDMA", Offers { pin: cfg.intx_pin, ..IRQ })),
            user_req: AtomicU32::new(0),
            busy: Default::default(),
        };
        let loops = (0..if cfg.stream { cfg.h2c_channels.min(cfg.c2h_channels) } else { 0 })
            .map(|_| Default::default())
            .collect();
        // Config block (PG195 "Config Block Registers"): MPS 256 (code 1) and MRRS 512 (code 2)
        // as the sim config space reports, system ID 0xff01, 64-bit PCIe data width (code 0).
        shared.config[0x08 / 4].store(1, Ordering::Relaxed);
        shared.config[0x0c / 4].store(2, Ordering::Relaxed);
        shared.config[0x10 / 4].store(0xff01, Ordering::Relaxed);
        shared.config[0x40 / 4].store(0x11, Ordering::Relaxed);
        shared.config[0x44 / 4].store(0x22, Ordering::Relaxed);
        Ok(XdmaModel { shared: Arc::new(shared), loops })
    }

    pub fn config(&self) -> &XdmaModelConfig {
        &self.shared.cfg
    }

    fn identifier(&self, target: u32, ch: u32) -> u32 {
        // Channel identifiers carry bit 15 on AXI4-Stream channels (PG195 "H2C Channel
        // Identifier (0x00)": Stream; libxdma.c engine_init tests 0x8000).
        let stream = if self.shared.cfg.stream && matches!(target, T_H2C | T_C2H) { 1 << 15 } else { 0 };
        0x1fc0_0000 | target << 16 | ch << 8 | stream | self.shared.cfg.version as u32
    }

    fn target_channel(&self, target: u32, ch: u32) -> Option<&Channel> {
        let dir = if matches!(target, T_H2C | T_H2C_SG) { Direction::H2c } else { Direction::C2h };
        self.shared.channel(dir, ch as usize)
    }

    /// Bring every channel to model time now: what is due completes, in this thread (the host
    /// looked), at most `MAX_PER_LOOK` descriptors a direction. A poll's whole cost when nothing is
    /// due: a clock read and an atomic per channel.
    pub fn advance(&self) {
        if datapath::hands_off() {
            return;
        }
        let s = &*self.shared;
        let now = s.now();
        if s.cfg.stream {
            for c in s.channels() {
                if c.due.by(now) {
                    self.serve(c, now, false);
                }
            }
            return;
        }
        // A direction's channels share its datapath and each takes it a descriptor at a time
        // as it fetches one: they are served in the order their descriptors complete, however
        // late the host looks, so who is next on it is the model's, never the scheduler's.
        for chans in [&s.h2c, &s.c2h] {
            for _ in 0..MAX_PER_LOOK {
                let Some(c) = chans.iter().filter(|c| c.due.by(now)).min_by_key(|c| (c.due.get(), c.index)) else {
                    break;
                };
                let at = c.due.get();
                self.serve(c, at, false);
                if c.due.get() == at {
                    // No progress at its own time: bring the rest to now at once.
                    chans.iter().filter(|c| c.due.by(now)).for_each(|c| {
                        self.serve(c, now, false);
                    });
                    break;
                }
            }
        }
    }

    /// How long until a channel next completes something (None: nothing is under way).
    pub fn due_in(&self) -> Option<Duration> {
        let s = &*self.shared;
        datapath::wait_for(s.clock.now(), s.channels().map(|c| c.due.get()))
    }

    /// Serve channel `c` up to `now` (`force`: a stalled one too); whether anything moved.
    fn serve(&self, c: &Channel, now: u64, force: bool) -> bool {
        if self.shared.cfg.stream {
            return super::stream::pump(&self.shared, &self.loops, c.index as usize, now, force);
        }
        let mut st = c.lock();
        super::engine::serve(&self.shared, c, &mut st, now, force)
    }

    /// A 32-bit register read at `offset` (bounds and alignment are the BAR's job).
    pub fn read32(&self, offset: u64) -> u32 {
        self.advance();
        let off = (offset & 0xffff) as u32;
        let (target, ch, reg) = (off >> 12, (off >> 8) & 0xf, off & 0xff);
        let s = &self.shared;
        match target {
            T_H2C | T_C2H => self.target_channel(target, ch).map_or(0, |c| match reg {
                0x00 => self.identifier(target, ch),
                0x04 | 0x08 | 0x0c => c.control.load(Ordering::Relaxed),
                0x40 => c.status.load(Ordering::Acquire) | lingering(c),
                // Read-to-clear: everything but busy, which only the engine changes.
                0x44 => {
                    let v = c.status.fetch_and(ST_BUSY, Ordering::AcqRel) | lingering(c);
                    s.update_irq(c);
                    v
                }
                0x48 => c.completed.load(Ordering::Acquire),
                0x4c => (s.cfg.addr_align as u32) << 16 | (s.cfg.len_granularity as u32) << 8 | s.cfg.addr_bits as u32,
                0x88 => c.wb_lo.load(Ordering::Relaxed),
                0x8c => c.wb_hi.load(Ordering::Relaxed),
                0x90 | 0x94 | 0x98 => c.ie_mask.load(Ordering::Relaxed),
                0xc0..=0xd0 => c.perf.read(reg, s.clock.now()),
                _ => 0,
            }),
            T_H2C_SG | T_C2H_SG => self.target_channel(target, ch).map_or(0, |c| match reg {
                0x00 => self.identifier(target, ch),
                0x80 => c.sg_lo.load(Ordering::Relaxed),
                0x84 => c.sg_hi.load(Ordering::Relaxed),
                0x88 => c.sg_adj.load(Ordering::Relaxed),
                0x8c => c.sg_credits.load(Ordering::Relaxed),
                _ => 0,
            }),
            // IRQ block channel and user interrupt request and pending (PG195; libxdma.c xdma_isr
            // reads the requests to find what to service).
            T_IRQ if ch == 0 && reg == 0x44 => s.channel_requests(),
            T_IRQ if ch == 0 && reg == 0x4c => s.channel_requests() & s.irq[IRQ_CHANNEL_ENABLE].load(Ordering::Acquire),
            T_IRQ if ch == 0 && reg == 0x40 => s.user_req.load(Ordering::Acquire),
            T_IRQ if ch == 0 && reg == 0x48 => {
                s.user_req.load(Ordering::Acquire) & s.irq[IRQ_USER_ENABLE].load(Ordering::Acquire)
            }
            T_IRQ | T_CONFIG | T_COMMON if ch == 0 => match reg {
                0x00 => self.identifier(target, 0),
                _ => self.block(target)[alias_base(target, reg) as usize / 4].load(Ordering::Relaxed),
            },
            _ => 0,
        }
    }

    fn block(&self, target: u32) -> &[AtomicU32] {
        match target {
            T_IRQ => &self.shared.irq,
            T_CONFIG => &self.shared.config,
            _ => &self.shared.common,
        }
    }

    /// A 32-bit register write at `offset`.
    pub fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.advance();
        let off = (offset & 0xffff) as u32;
        let (target, ch, reg) = (off >> 12, (off >> 8) & 0xf, off & 0xff);
        match target {
            T_H2C | T_C2H => {
                let Some(c) = self.target_channel(target, ch) else { return Ok(()) };
                match reg {
                    0x04 => return self.write_control(c, value & CTRL_RUN != 0, |_| value),
                    0x08 => return self.write_control(c, value & CTRL_RUN != 0, |old| old | value),
                    0x0c => return self.write_control(c, false, |old| old & !value),
                    0x40 => {
                        c.status.fetch_and(!(value & ST_LOGGABLE), Ordering::AcqRel);
                        self.shared.update_irq(c);
                    }
                    0x88 | 0x8c => {
                        super::rules::reprogram(&self.shared, c, "the poll-mode writeback address");
                        let r = if reg == 0x88 { &c.wb_lo } else { &c.wb_hi };
                        r.store(value, Ordering::Relaxed);
                    }
                    0x90 | 0x94 | 0x98 => {
                        rmw(&c.ie_mask, (reg - 0x90) / 4, value, ST_LOGGABLE);
                        self.shared.update_irq(c);
                    }
                    0xc0 => c.perf.control(value, self.shared.clock.now()),
                    _ => {}
                }
            }
            T_H2C_SG | T_C2H_SG => {
                let Some(c) = self.target_channel(target, ch) else { return Ok(()) };
                if matches!(reg, 0x80..=0x88) {
                    super::rules::reprogram(&self.shared, c, "the SGDMA descriptor address");
                }
                match reg {
                    0x80 => c.sg_lo.store(value, Ordering::Relaxed),
                    0x84 => c.sg_hi.store(value, Ordering::Relaxed),
                    0x88 => c.sg_adj.store(value & 0x3f, Ordering::Relaxed),
                    0x8c => c.sg_credits.store(value & 0x3ff, Ordering::Relaxed),
                    _ => {}
                }
            }
            T_IRQ if ch == 0 => {
                let irq = &self.shared.irq;
                match reg {
                    // User and channel interrupt enable masks with their W1S/W1C aliases.
                    0x04 | 0x08 | 0x0c => rmw(&irq[1], (reg - 4) / 4, value, 0xffff),
                    0x10 | 0x14 | 0x18 => rmw(&irq[4], (reg - 0x10) / 4, value, 0xff),
                    0x80..=0xa4 => irq[reg as usize / 4].store(value & 0x1f1f_1f1f, Ordering::Relaxed),
                    _ => {}
                }
                self.shared.update_irqs();
            }
            T_CONFIG if ch == 0 => {
                if matches!(reg, 0x1c | 0x40 | 0x44 | 0x60) {
                    self.shared.config[reg as usize / 4].store(value, Ordering::Relaxed);
                }
            }
            T_COMMON if ch == 0 => {
                let m = |n: u8| (1u32 << n) - 1;
                let chans = m(self.shared.cfg.h2c_channels) | m(self.shared.cfg.c2h_channels) << 16;
                let common = &self.shared.common;
                match reg {
                    0x10 | 0x14 | 0x18 => rmw(&common[4], (reg - 0x10) / 4, value, chans),
                    0x20 | 0x24 | 0x28 => rmw(&common[8], (reg - 0x20) / 4, value, chans),
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A control write. A rising edge of run resets the status and the completed count and
    /// starts the chain the SGDMA registers hold, at model time now (stepped: the whole chain runs
    /// before the write returns, unless the channel is stalled). Clearing run lets the descriptor
    /// in flight finish at its time, then the channel stops (a stream channel waiting for data or
    /// room has none in flight: it stops now). Taken under the channel's lock, so a rising edge
    /// serializes with the engine's completions.
    fn write_control(&self, c: &Channel, may_start: bool, f: impl Fn(u32) -> u32) -> Result<()> {
        let update = |old: u32| Some(f(old) & CTRL_WRITABLE);
        let s = &*self.shared;
        let mut st = c.lock();
        // The closure never returns None, so this cannot fail.
        let old = c.control.fetch_update(Ordering::AcqRel, Ordering::Acquire, update).unwrap_or_else(|v| v);
        let rose = may_start && old & CTRL_RUN == 0 && c.control.load(Ordering::Acquire) & CTRL_RUN != 0;
        if !rose {
            if s.cfg.stream {
                drop(st);
                super::stream::pump(s, &self.loops, c.index as usize, s.now(), false);
            } else {
                super::engine::serve(s, c, &mut st, s.now(), false);
            }
            return Ok(());
        }
        // Rising edge: status and the completed count reset (PG195 "Reset on setting the
        // Control register Run bit"); the engine latches the SGDMA registers.
        let now = s.clock.now();
        c.status.store(ST_BUSY, Ordering::Release);
        s.update_irq(c);
        c.completed.store(0, Ordering::Release);
        c.perf.engine_started(now);
        st.gen += 1;
        st.start = Start {
            addr: (c.sg_hi.load(Ordering::Relaxed) as u64) << 32 | c.sg_lo.load(Ordering::Relaxed) as u64,
            adj: c.sg_adj.load(Ordering::Relaxed),
        };
        if s.cfg.stream {
            let start = st.start;
            drop(st);
            super::stream::start(s, &self.loops, c, start, now);
        } else {
            super::engine::start(s, c, &mut st, now);
            super::engine::serve(s, c, &mut st, s.now(), false);
        }
        Ok(())
    }

    /// The command register's Bus Master Enable: without it the engine's host accesses fail.
    pub fn set_bus_master(&self, on: bool) {
        self.shared.bus_master.store(on, Ordering::Release);
    }

    /// Read card (AXI) memory directly, as an independent check of what H2C wrote.
    pub fn card_read(&self, addr: u64, out: &mut [u8]) -> Result<()> {
        self.shared.card.read(addr, out)
    }

    pub fn card_write(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.shared.card.write(addr, data)
    }

    fn chan(&self, dir: Direction, ch: u8) -> Result<&Channel> {
        self.shared
            .channel(dir, ch as usize)
            .ok_or_else(|| Error::usage(format!("the sim card has no {dir} channel {ch}")))
    }

    /// Test hook: once run is cleared, the channel stays busy for `reads` more status reads (a
    /// descriptor in flight finishing; `u32::MAX`: it never finishes).
    pub fn set_linger(&self, dir: Direction, ch: u8, reads: u32) -> Result<()> {
        self.chan(dir, ch)?.linger.store(reads, Ordering::Release);
        Ok(())
    }

    /// Whether the channel reads busy now (without spending a `set_linger` read).
    pub fn busy(&self, dir: Direction, ch: u8) -> Result<bool> {
        self.advance();
        let c = self.chan(dir, ch)?;
        let lingers = c.control.load(Ordering::Acquire) & CTRL_RUN == 0 && c.linger.load(Ordering::Acquire) > 0;
        Ok(lingers || c.status.load(Ordering::Acquire) & ST_BUSY != 0)
    }

    /// Test hook: the user logic requests user interrupts `bits` (usr_irq_req[15:0]) from now on.
    pub fn set_user_irq(&self, bits: u32) {
        self.shared.user_req.store(bits & 0xffff, Ordering::Release);
        self.shared.update_user_irqs();
    }

    /// Test hook: a stalled channel accepts runs but moves nothing (a hung engine).
    pub fn set_stalled(&self, dir: Direction, ch: u8, stalled: bool) -> Result<()> {
        let c = self.chan(dir, ch)?;
        c.stalled.store(stalled, Ordering::Release);
        if !stalled {
            // Released: the run moves on from now, when the host next looks.
            c.due.set(0);
        }
        Ok(())
    }

    /// Test hook: preset a channel's performance counts (to make them saturate).
    pub fn preset_perf(&self, dir: Direction, ch: u8, cycles: u64, beats: u64) -> Result<()> {
        self.chan(dir, ch)?.perf.preset(cycles, beats, self.shared.clock.now());
        Ok(())
    }

    /// Test step (stepped mode): run the channel's pending run (one a stall held back) now;
    /// whether any descriptor moved.
    pub fn step(&self, dir: Direction, ch: u8) -> Result<bool> {
        Ok(self.serve(self.chan(dir, ch)?, u64::MAX, true))
    }

    /// Test hook: the channel writes no writeback while set (error writebacks included); its
    /// completed count (+0x48) still moves. A writeback that has not come yet.
    pub fn withhold_writebacks(&self, dir: Direction, ch: u8, withhold: bool) -> Result<()> {
        self.chan(dir, ch)?.withhold.store(withhold, Ordering::Release);
        Ok(())
    }

    /// Test hook: each descriptor also writes one byte past its end (`sim::overrun`).
    pub fn set_overrun(&self, on: bool) {
        self.shared.overrun.set(on);
    }

    /// What a driver made the model do that the real engine would act on badly (so far: an
    /// interrupt raised where nothing services one), in words, oldest first.
    pub fn violations(&self) -> Vec<String> {
        super::super::served::violations(&self.shared.violations, &self.shared.irq_out)
    }

    /// The card's interrupts (what the access path routes).
    pub fn irq(&self) -> &Arc<SimIrq> {
        &self.shared.irq_out
    }

    /// Stream mode: bytes waiting in loopback `pair`'s FIFO between H2C and C2H (back-pressure).
    pub fn loopback_queued(&self, pair: u8) -> Option<usize> {
        self.loops.get(pair as usize).map(|l| l.queued())
    }

    /// Stream mode: move what can move on loopback `pair` now (a stepped test's step).
    pub fn pump(&self, pair: u8) {
        super::stream::pump(&self.shared, &self.loops, pair as usize, self.shared.now(), false);
    }

    /// Why the channel last stopped on an error, in words (the model's own diagnosis).
    pub fn last_fault(&self, dir: Direction, ch: u8) -> Option<String> {
        self.chan(dir, ch).ok()?.last_fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl super::super::RegisterModel for XdmaModel {
    fn violations(&self) -> Vec<String> {
        XdmaModel::violations(self)
    }

    fn populate_card(&self, addr: u64, len: u64) {
        self.shared.card.populate(addr, len);
    }

    fn size(&self) -> u64 {
        XDMA_BAR_LEN
    }

    fn check_width(&self, index: u8, width: crate::mmio::Width) -> Result<()> {
        super::super::served::only_32bit("XDMA", index, width)
    }

    fn read(&self, offset: u64, _width: crate::mmio::Width) -> u64 {
        self.read32(offset) as u64
    }

    fn write(&self, offset: u64, _width: crate::mmio::Width, value: u64) -> Result<()> {
        self.write32(offset, value as u32)
    }

    fn set_bus_master(&self, on: bool) {
        self.shared.bus_master.store(on, Ordering::Release);
    }

    fn advance(&self) {
        XdmaModel::advance(self)
    }

    fn due_in(&self) -> Option<Duration> {
        XdmaModel::due_in(self)
    }
}
