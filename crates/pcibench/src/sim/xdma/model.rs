//! The sim card's DMA engine: a register model of the Xilinx/AMD DMA/Bridge Subsystem for PCI
//! Express (XDMA, PG195) in memory-mapped SGDMA mode, written from PG195's register tables.
//!
//! BAR4 offset = target[15:12] | channel[11:8] | register[7:0]. Targets: 0 H2C channel,
//! 1 C2H channel, 2 IRQ block, 3 config block, 4 H2C SGDMA, 5 C2H SGDMA, 6 SGDMA common,
//! 8 MSI-X (not modelled: reads 0). Absent channels read 0 everywhere (their identifier
//! included) and ignore writes. The engine itself (descriptor fetch, data movement, status,
//! writeback) runs on one worker thread per channel: see `engine.rs`.

use super::super::card_memory::CardMemory;
use super::super::host_map::HostMap;
use super::super::irq::{Offers, SimIrq};
use super::super::mem::Pages;
use super::state::*;
pub use super::state::{XdmaModelConfig, CARD_MEMORY_SIZE, XDMA_BAR_LEN};
use super::stream::Loopback;
use crate::direction::Direction;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The XDMA IP's interrupts (PG195): up to 32 MSI-X and 32 MSI vectors, and INTx; the MSI-X table
/// and PBA in the DMA BAR's target 0x8 (PG195 "MSI-X Vector Table and PBA": 0x8000, PBA 0x8fe0).
pub const IRQ: Offers =
    Offers { msix: 32, msi: 32, intx: true, intx_maskable: true, msix_table: 0x8000, msix_pba: 0x8fe0 };

/// The XDMA register block and engine of one sim card.
pub struct XdmaModel {
    shared: Arc<Shared>,
    /// Stream mode: the loopback between H2C and C2H channel N, one per pair (empty otherwise).
    loops: Arc<Vec<Loopback>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
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
        if cfg.h2c_channels > 4 || cfg.c2h_channels > 4 {
            return Err(Error::usage(format!(
                "an XDMA engine has at most 4 channels per direction (asked for {} H2C, {} C2H)",
                cfg.h2c_channels, cfg.c2h_channels
            )));
        }
        let card_len = usize::try_from(cfg.card_size)
            .map_err(|_| Error::usage(format!("card memory of {:#x} bytes is too large", cfg.card_size)))?;
        let regs = || (0..64).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
        let shared = Shared {
            cfg,
            h2c: (0..cfg.h2c_channels).map(|i| Channel::new(Direction::H2c, i)).collect(),
            c2h: (0..cfg.c2h_channels).map(|i| Channel::new(Direction::C2h, i)).collect(),
            card: CardMemory::new(Pages::new("card memory", card_len)?, cfg.card_size),
            host,
            bus_master: AtomicBool::new(false),
            shutdown: CacheLine(AtomicBool::new(false)),
            irq: regs(),
            config: regs(),
            common: regs(),
            violations: Mutex::new(Vec::new()),
            irq_out: Arc::new(SimIrq::new("XDMA", IRQ)),
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
        Ok(XdmaModel { shared: Arc::new(shared), loops: Arc::new(loops), workers: Mutex::new(Vec::new()) })
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

    /// A 32-bit register read at `offset` (bounds and alignment are the BAR's job).
    pub fn read32(&self, offset: u64) -> u32 {
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
                0xc0..=0xd0 => c.perf.read(reg),
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
            // IRQ block channel interrupt request and pending (PG195; libxdma.c xdma_isr reads
            // the request to find the channels to service). No user interrupts are modelled.
            T_IRQ if ch == 0 && reg == 0x44 => s.channel_requests(),
            T_IRQ if ch == 0 && reg == 0x4c => s.channel_requests() & s.irq[IRQ_CHANNEL_ENABLE].load(Ordering::Acquire),
            T_IRQ if ch == 0 && matches!(reg, 0x40 | 0x48) => 0,
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

    /// A 32-bit register write at `offset`. Fails only if the engine's worker cannot start.
    pub fn write32(&self, offset: u64, value: u32) -> Result<()> {
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
                    0x88 => c.wb_lo.store(value, Ordering::Relaxed),
                    0x8c => c.wb_hi.store(value, Ordering::Relaxed),
                    0x90 | 0x94 | 0x98 => {
                        rmw(&c.ie_mask, (reg - 0x90) / 4, value, ST_LOGGABLE);
                        self.shared.update_irq(c);
                    }
                    0xc0 => c.perf.control(value),
                    _ => {}
                }
            }
            T_H2C_SG | T_C2H_SG => {
                let Some(c) = self.target_channel(target, ch) else { return Ok(()) };
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

    /// Control writes that may set run take the channel lock, so a rising edge serializes with
    /// the engine's completion (a writeback from an old run never lands after a new run starts).
    /// Writes that cannot set run need no lock: the engine sees run clear at its next descriptor.
    fn write_control(&self, c: &Channel, may_start: bool, f: impl Fn(u32) -> u32) -> Result<()> {
        let update = |old: u32| Some(f(old) & CTRL_WRITABLE);
        if !may_start {
            // The closure never returns None, so this cannot fail.
            let _ = c.control.fetch_update(Ordering::AcqRel, Ordering::Acquire, update);
            if self.shared.cfg.stream {
                // A stream channel waiting for data or room has no descriptor in flight: it
                // stops now (on this thread, stepped or not).
                super::stream::pump(&self.shared, &self.loops, c.index as usize);
            }
            return Ok(());
        }
        let mut st = c.lock();
        let old = c.control.fetch_update(Ordering::AcqRel, Ordering::Acquire, update).unwrap_or_else(|v| v);
        if old & CTRL_RUN == 0 && c.control.load(Ordering::Acquire) & CTRL_RUN != 0 {
            // Rising edge: status and the completed count reset (PG195 "Reset on setting the
            // Control register Run bit"); the engine latches the SGDMA registers.
            c.status.store(ST_BUSY, Ordering::Release);
            self.shared.update_irq(c);
            c.completed.store(0, Ordering::Release);
            c.perf.engine_started();
            st.gen += 1;
            st.start = Start {
                addr: (c.sg_hi.load(Ordering::Relaxed) as u64) << 32 | c.sg_lo.load(Ordering::Relaxed) as u64,
                adj: c.sg_adj.load(Ordering::Relaxed),
            };
            c.gen_hint.store(st.gen, Ordering::Release);
            if self.shared.cfg.stepped {
                drop(st);
                // The run bit is the step: the chain runs before the write returns.
                if !c.stalled.load(Ordering::Acquire) {
                    self.run_now(c);
                }
                return Ok(());
            }
            c.waker.at_doorbell(st.gen, st.parked);
            if st.parked {
                c.wake.notify_one();
            }
            drop(st);
            self.ensure_worker(c)?;
        }
        Ok(())
    }

    /// Stepped mode: serve the channel's pending rising edge of run now; whether there was one.
    fn run_now(&self, c: &Channel) -> bool {
        if self.shared.cfg.stream {
            super::stream::run_now(&self.shared, &self.loops, c)
        } else {
            super::engine::run_now(&self.shared, c)
        }
    }

    fn ensure_worker(&self, c: &Channel) -> Result<()> {
        if c.worker_started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let (dir, index) = (c.dir, c.index as usize);
        let loops = self.shared.cfg.stream.then(|| Arc::clone(&self.loops));
        let handle = super::super::placement::spawn(format!("sim-xdma-{dir}{index}"), move || match loops {
            Some(loops) => super::stream::worker(shared, loops, dir, index),
            None => super::engine::worker(shared, dir, index),
        })
        .map_err(|e| {
            c.worker_started.store(false, Ordering::Release);
            Error::Unsupported(format!("could not start the sim card's DMA engine thread: {e}"))
        })?;
        self.workers.lock().unwrap_or_else(|e| e.into_inner()).push(handle);
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
        let c = self.chan(dir, ch)?;
        let lingers = c.control.load(Ordering::Acquire) & CTRL_RUN == 0 && c.linger.load(Ordering::Acquire) > 0;
        Ok(lingers || c.status.load(Ordering::Acquire) & ST_BUSY != 0)
    }

    /// Test hook: a stalled channel accepts runs but moves nothing (a hung engine).
    pub fn set_stalled(&self, dir: Direction, ch: u8, stalled: bool) -> Result<()> {
        self.chan(dir, ch)?.stalled.store(stalled, Ordering::Release);
        Ok(())
    }

    /// Test hook: preset a channel's performance counts (to make them saturate).
    pub fn preset_perf(&self, dir: Direction, ch: u8, cycles: u64, beats: u64) -> Result<()> {
        self.chan(dir, ch)?.perf.preset(cycles, beats);
        Ok(())
    }

    /// Test step (stepped mode): run the channel's pending run (one a stall held back) now;
    /// whether there was one.
    pub fn step(&self, dir: Direction, ch: u8) -> Result<bool> {
        Ok(self.run_now(self.chan(dir, ch)?))
    }

    /// Test hook: the channel writes no writeback while set (error writebacks included); its
    /// completed count (+0x48) still moves. A writeback that has not come yet.
    pub fn withhold_writebacks(&self, dir: Direction, ch: u8, withhold: bool) -> Result<()> {
        self.chan(dir, ch)?.withhold.store(withhold, Ordering::Release);
        Ok(())
    }

    /// What a driver made the model do that the real engine would act on badly (so far: an
    /// interrupt raised where nothing services one), in words, oldest first.
    pub fn violations(&self) -> Vec<String> {
        let mut v = self.shared.violations.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.extend(self.shared.irq_out.violations());
        v
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
        super::stream::pump(&self.shared, &self.loops, pair as usize)
    }

    /// Why the channel last stopped on an error, in words (the model's own diagnosis).
    pub fn last_fault(&self, dir: Direction, ch: u8) -> Option<String> {
        self.chan(dir, ch).ok()?.last_fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for XdmaModel {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        for c in self.shared.h2c.iter().chain(&self.shared.c2h) {
            let _guard = c.lock();
            c.wake.notify_all();
        }
        for h in self.workers.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = h.join();
        }
    }
}

impl super::super::RegisterModel for XdmaModel {
    fn populate_card(&self, addr: u64, len: u64) {
        self.shared.card.populate(addr, len);
    }

    fn size(&self) -> u64 {
        XDMA_BAR_LEN
    }

    fn check_width(&self, index: u8, width: crate::mmio::Width) -> Result<()> {
        if width == crate::mmio::Width::B32 {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "XDMA registers are 32-bit only: BAR{index} of the sim card refuses {width}-wide access (use --width 32)"
        )))
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
}
