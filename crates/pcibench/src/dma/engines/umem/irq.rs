//! umem completion by interrupt, as drivers/block/umem.c runs the card: its INTx
//! (`request_irq(dev->irq, mm_interrupt, IRQF_SHARED)`; umem.c never enables MSI), the descriptors
//! carrying the enables its handler services (`add_bio`: ERR_INT_EN and PARITY_INT_EN on every
//! one, CHAIN_COMP_EN on a chain's last), and `mm_interrupt`'s sequence when the line fires:
//! read DMA_STATUS_CTRL; nothing of DMASCR_ERROR_MASK or CHAIN_COMPLETE there is another
//! device's interrupt on the shared line; clear DMA_COMPLETE|CHAIN_COMPLETE by writing them (a
//! 32-bit write on the 5415/5425/6155, `UM_FLAG_NO_BYTE_STATUS`); clear ANY_ERR/MBE_ERR by
//! writing 0 to ERROR_COUNT and the PCI-side errors by writing PCI_STATUS back (`clear_errors`,
//! the same sequence); then `process_page` checks the chain's semaphores and `mm_start_io`
//! starts the next chain. Every cause is cleared before the line is unmasked, so the enables
//! set are serviced and the model's unserviced-interrupt violation never fires.
//!
//! Arming clears PCI_COMMAND's Interrupt Disable (set at open, while pcibench polls); polling
//! again, and dropping the engine, set it back as found and take the enables out of the
//! descriptors.

use super::regs::*;
use super::{desc, Outcome, UmemEngine, FLOOR_MBPS};
use crate::access::Interrupts;
use crate::dma::watchdog::Watchdog;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long one sleep on the eventfd lasts before the semaphores are looked at: the watchdog
/// ends a chain whose interrupt never comes once they stop moving.
const SLICE: Duration = Duration::from_millis(20);

impl UmemEngine {
    /// Interrupt Disable cleared (its value as found kept) and the prepared chain's descriptors
    /// given umem.c's enables.
    fn arm(&mut self) -> Result<()> {
        if self.intx_found.is_none() {
            let cmd = self.config16(CFG_COMMAND)?;
            self.intx_found = Some(cmd);
            if cmd & CMD_INTX_DISABLE != 0 {
                self.config.write(CFG_COMMAND, &(cmd & !CMD_INTX_DISABLE).to_le_bytes())?;
            }
        }
        if !self.chain_irq {
            let chain = self.prepared()?;
            desc::set_interrupts(&*self.desc_mem, chain, self.pci_cmds, true);
            self.chain_irq = true;
        }
        Ok(())
    }

    /// Back to polling: the descriptors without enables, Interrupt Disable as found.
    pub(super) fn disarm(&mut self) -> Result<()> {
        if self.chain_irq {
            if let Some(chain) = &self.chain {
                desc::set_interrupts(&*self.desc_mem, chain, self.pci_cmds, false);
            }
            self.chain_irq = false;
        }
        if let Some(found) = self.intx_found.take() {
            let now = self.config16(CFG_COMMAND)?;
            let back = now & !CMD_INTX_DISABLE | found & CMD_INTX_DISABLE;
            if back != now {
                self.config.write(CFG_COMMAND, &back.to_le_bytes())?;
            }
        }
        Ok(())
    }

    /// Run the prepared transfer chain by chain, each ended by the card's interrupt.
    pub(super) fn run_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        self.arm()?;
        // What fired before this run (another device on a shared line) is not its completion. It is
        // unmasked all the same: vfio-pci masks INTx at each signal (automasked) until the handler
        // unmasks, so a signal dropped here unanswered left the line masked for the whole run.
        if !irq.wait(Duration::ZERO)?.is_empty() {
            irq.unmask()?;
        }
        self.submit()?;
        loop {
            self.wait_part_irq(irq, timeout)?;
            if self.part + 1 >= self.prepared()?.parts.len() {
                return self.settle();
            }
            self.part += 1;
            self.start_part()?;
        }
    }

    /// Sleep until the current chain's interrupt, then service it as `mm_interrupt` does.
    fn wait_part_irq(&mut self, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
        let (n, largest, dir, part) = {
            let c = self.prepared()?;
            (c.pieces.len(), c.pieces.iter().map(|p| p.len).max().unwrap_or(0), c.dir, c.parts[self.part])
        };
        let timeout = timeout.max(Duration::from_micros(largest / FLOOR_MBPS));
        let mut dog = Watchdog::new(timeout);
        // Whether the chain was seen finished at the last empty wait: a chain that finishes between
        // a wait's timeout and the status read has its interrupt still on the way, so only one
        // seen finished across a whole further slice with nothing fired is called unraised.
        let mut finished = false;
        loop {
            if irq.wait(SLICE.min(timeout))?.is_empty() {
                let done = self.completed(n);
                let s = self.rd32(DMA_STATUS_CTRL)?;
                let was = std::mem::replace(&mut finished, s & GO == 0 && done >= part.start + part.count);
                if finished && was {
                    return Err(Error::Device(format!(
                        "the {} finished its chain without raising its interrupt ({}; status {}): \
                         is PCI_COMMAND's Interrupt Disable set behind pcibench's back?",
                        self.info.model,
                        irq.describe(),
                        decode_status(s)
                    )));
                }
                if dog.stalled(done as u64) {
                    return self.finish(Outcome::Timeout(s), dir, n, timeout);
                }
                continue;
            }
            let s = self.rd32(DMA_STATUS_CTRL)?;
            if s & (ERROR_MASK | CHAIN_COMPLETE) == 0 {
                // Not this card's: unmask for whoever shares the line, and sleep on.
                irq.unmask()?;
                continue;
            }
            if s & ERROR_MASK != 0 {
                // `finish` clears completion and the errors as mm_interrupt does, then unmask.
                let r = self.finish(Outcome::Error(s), dir, n, timeout);
                irq.unmask()?;
                return r;
            }
            self.wr32(DMA_STATUS_CTRL, COMPLETION_BITS)?;
            irq.unmask()?;
            // process_page: the chain's semaphores say whether it all went well.
            let last = desc::semaphore(&*self.desc_mem, part.start + part.count - 1);
            let outcome = if last.load(Ordering::Acquire) & DMA_COMPLETE != 0 {
                self.semaphore_errors(part)
            } else {
                Outcome::Stopped(s)
            };
            return self.finish(outcome, dir, n, timeout);
        }
    }
}
