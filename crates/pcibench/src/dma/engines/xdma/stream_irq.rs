//! XDMA AXI4-Stream channels completing by interrupt, as libxdma.c runs streams when not in poll
//! mode (Xilinx dma_ip_drivers `XDMA/linux-kernel/xdma/libxdma.c`).
//!
//! libxdma has no stream-specific interrupt code: a stream channel is an engine like any other
//! (`engine_init` only notes `streaming`), armed by `xdma_irq_setup` and `engine_init_regs` and
//! serviced by `xdma_channel_irq` (MSI-X) or `xdma_isr` (MSI, INTx) through `engine_service`. So
//! the pair is armed and serviced by the memory-mapped driver's code (`super::irq::PairIrq`: the
//! IRQ block vector numbers, the interrupt enable mask `IE_MASK_IRQ` with descriptor completed and
//! stopped, the channel enables W1S; the status read through the read-to-clear alias).
//!
//! Which descriptors raise: `transfer_init` puts STOP | EOP | COMPLETED on a transfer's last
//! descriptor only, and COMPLETED on the others only for a C2H engine opened with `eop_flush`
//! (`cdev_sgdma.c`: `O_TRUNC` on the C2H node), which then completes at the first EOP. pcibench
//! does what libxdma does by default: COMPLETED on each chain's last descriptor, so one run (a
//! batch of up to `MAX_BATCH` packets in one chain per direction) raises one interrupt on H2C
//! and one on C2H, whatever the number of packets; the packets' EOPs raise nothing. With MSI or
//! INTx both channels share vector 0 and one wake may service both (`xdma_isr` reads the IRQ
//! block's channel request register and services every channel in it).
//!
//! A run is done when both channels have raised and their statuses (read and cleared by the
//! handler) say stopped and not busy with every descriptor counted; then run is cleared on both
//! (`engine_service_shutdown`) and the C2H writeback records are checked as in poll mode. An
//! error status raised stops both channels and says what they and the records said; an interrupt
//! that never comes ends the run through the progress watchdog; a channel that goes idle without
//! raising (its enables changed behind pcibench's back) is named with the enables it reads.

use super::super::irq::{Serviced, SLICE};
use super::XdmaStreamEngine;
use crate::access::Interrupts;
use crate::dma::engines::xdma::decode_status;
use crate::dma::engines::xdma::regs::*;
use crate::dma::watchdog::{no_progress, Watchdog};
use crate::dma::Direction;
use crate::{Error, Result};
use std::time::Duration;

const DIRS: [Direction; 2] = [Direction::H2c, Direction::C2h];

impl XdmaStreamEngine {
    /// Post the C2H buffers, send the batch with the pair's interrupts armed, sleep until both
    /// channels have raised theirs, check the records.
    pub(super) fn run_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        let p = self.prepared.as_ref().ok_or_else(|| Error::usage("XDMA stream run before prepare"))?;
        let n = [p.h2c.descriptors.len() as u32, p.c2h.descriptors.len() as u32];
        // As the polled wait: at least the time the batch takes at 50 MB/s.
        let timeout = timeout.max(Duration::from_micros(p.h2c.bytes / 50));
        if let Some(dir) = DIRS.into_iter().find(|&d| self.irq.bit(d).is_none()) {
            return Err(Error::Unsupported(format!(
                "XDMA {dir} stream channel {} has no bit in the IRQ block (the vendor numbers channels only up to \
                 the first absent one): this pair cannot complete by interrupt; use --completion poll",
                self.ch
            )));
        }
        self.irq.arm(&*self.bar, irq)?;
        // What fired before this run (a poll-mode run's leftovers, a user interrupt before arming
        // disabled it) is not this run's completion; it is serviced as the vendor's handler would,
        // so an INTx line that fired is unmasked again (else the run's own would never come).
        let stale = irq.wait(Duration::ZERO)?;
        if !stale.is_empty() {
            self.irq.service(&*self.bar, irq, &stale)?;
        }
        self.submit(CONTROL_IRQ)?;
        self.wait_irq(irq, timeout, n)?;
        self.complete()
    }

    /// Sleep on the interrupts until both channels have raised theirs for `n` descriptors each.
    fn wait_irq(&self, irq: &dyn Interrupts, timeout: Duration, n: [u32; 2]) -> Result<()> {
        let ch = self.ch;
        let mut dog = Watchdog::new(timeout);
        let mut done = [false; 2];
        // Slices in a row each channel was seen idle with nothing fired.
        let mut quiet = [0u32; 2];
        loop {
            let fired = irq.wait(SLICE.min(timeout))?;
            let serviced =
                if fired.is_empty() { Serviced::default() } else { self.irq.service(&*self.bar, irq, &fired)? };
            let mut progress = 0u64;
            for (k, dir) in DIRS.into_iter().enumerate() {
                let count = self.rd(self.ch_reg(dir, CH_COMPLETED))? & WB_COUNT;
                progress += u64::from(count);
                let Some(st) = serviced.of(dir).filter(|_| !done[k]) else { continue };
                if st & ST_ERRORS != 0 {
                    return Err(self.fail(
                        format!(
                            "XDMA {dir} stream channel {ch} raised its interrupt on an error after {count} of {} \
                             descriptors: status {}",
                            n[k],
                            decode_status(dir, st)
                        ),
                        n[1] as usize,
                    ));
                }
                done[k] = count >= n[k] && st & ST_BUSY == 0;
            }
            if done == [true, true] {
                return Ok(());
            }
            if fired.is_empty() {
                for (k, dir) in DIRS.into_iter().enumerate().filter(|(k, _)| !done[*k]) {
                    let status = self.rd(self.ch_reg(dir, CH_STATUS))?;
                    if status == u32::MAX && self.rd(self.ch_reg(dir, CH_ID))? == u32::MAX {
                        return Err(Error::Gone(format!(
                            "XDMA {dir} stream channel {ch}'s status and identifier registers read 0xffffffff"
                        )));
                    }
                    // Idle for a whole slice after one already idle, and not requesting: a raise
                    // the channel requests is on its way however late (the watchdog bounds it).
                    let idle = status & ST_BUSY == 0 && !self.irq.requesting(&*self.bar, dir)?;
                    quiet[k] = if idle { quiet[k] + 1 } else { 0 };
                    if quiet[k] >= 2 {
                        let count = self.rd(self.ch_reg(dir, CH_COMPLETED))? & WB_COUNT;
                        return Err(self.fail(
                            format!(
                                "XDMA {dir} stream channel {ch} went idle after {count} of {} descriptors without \
                                 raising its interrupt ({}; IRQ block channel enable {:#x}, interrupt enable mask \
                                 {:#x})",
                                n[k],
                                irq.describe(),
                                self.rd(reg(T_IRQ, 0, IRQ_CHANNEL_ENABLE))?,
                                self.rd(self.ch_reg(dir, CH_IE_MASK))?
                            ),
                            n[1] as usize,
                        ));
                    }
                }
            }
            if dog.stalled(progress) {
                let waiting: Vec<String> =
                    DIRS.iter().zip(done).filter(|(_, d)| !d).map(|(dir, _)| dir.to_string()).collect();
                return Err(self.fail(
                    format!(
                        "XDMA stream channel {ch}: no interrupt came from {} and {}; is the AXI4-Stream loopback \
                         example design behind the channels? ({})",
                        waiting.join(" and "),
                        no_progress(timeout),
                        irq.describe()
                    ),
                    n[1] as usize,
                ));
            }
        }
    }
}
