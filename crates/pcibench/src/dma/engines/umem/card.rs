//! What umem.c does to the card around its transfers, beside the DMA registers: its config
//! header (latency timer, Memory Write and Invalidate, and here Interrupt Disable, as pcibench
//! polls) and clearing the errors the card latches (mm_interrupt): completion through
//! DMA_STATUS_CTRL, parity, system error and aborts through PCI_STATUS in config space, the
//! memory error log by writing 0 to ERROR_COUNT.

use super::regs::*;
use super::UmemEngine;
use crate::mmio::Width;
use crate::Result;

impl UmemEngine {
    pub(super) fn config16(&self, off: u64) -> Result<u16> {
        let mut b = [0u8; 2];
        self.config.read(off, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// umem.c mm_pci_probe: the latency timer to 0xF8, and PCI_COMMAND's MWI Enable set for its
    /// default write command, Memory Write and Invalidate. A PCI master may issue MWI only with
    /// that bit set (PCI Local Bus 3.0 §6.2.2) and PCI Express hardwires it to 0, so the bit is
    /// read back and the card told Memory Write (0x7, umem.c's other choice) when it did not
    /// stick. Interrupt Disable is set too, as a second guard: pcibench installs no handler, and
    /// its descriptors carry no interrupt enable (`desc::control`), since the bit masks INTx
    /// only on a PCI 2.3 function. Returns the PCI commands for status/control bits 31:24
    /// (reads: umem.c's Read Multiple).
    pub(super) fn setup_config(&self) -> Result<u32> {
        self.config.write(CFG_LATENCY_TIMER, &[LATENCY_TIMER])?;
        let cmd = self.config16(CFG_COMMAND)?;
        let want = cmd | CMD_MWI | CMD_INTX_DISABLE;
        if want != cmd {
            self.config.write(CFG_COMMAND, &want.to_le_bytes())?;
        }
        let write = if self.config16(CFG_COMMAND)? & CMD_MWI != 0 { PCI_WRITE_INVALIDATE } else { PCI_WRITE };
        Ok(PCI_READ_MULTIPLE << READ_CMD_SHIFT | write << WRITE_CMD_SHIFT)
    }

    /// Clear what the status register shows latched, as umem.c mm_interrupt does: ANY_ERR and
    /// MBE_ERR by writing 0 to ERROR_COUNT, the PCI-side errors (parity, system error, target
    /// and master abort) by writing PCI_STATUS back to itself (its error bits are write-1-to-
    /// clear). Writing 1s to those bits in DMA_STATUS_CTRL is not how the vendor clears them.
    /// Returns, when the card still shows them, why and what to do.
    pub(super) fn clear_errors(&self) -> Result<Option<String>> {
        let s = self.rd32(DMA_STATUS_CTRL)?;
        if s & (MEMORY_ERRORS | PCI_ERRORS) == 0 {
            return Ok(None);
        }
        if s & MEMORY_ERRORS != 0 {
            self.bar.write(ERROR_COUNT, Width::B8, 0)?;
        }
        if s & PCI_ERRORS != 0 {
            let status = self.config16(CFG_STATUS)?;
            self.config.write(CFG_STATUS, &status.to_le_bytes())?;
        }
        let left = self.rd32(DMA_STATUS_CTRL)? & (MEMORY_ERRORS | PCI_ERRORS);
        if left == 0 {
            return Ok(None);
        }
        let addr = self.config.address();
        let mut fixes = Vec::new();
        if left & PCI_ERRORS != 0 {
            fixes.push(format!(
                "PCI_STATUS was written back to clear {} but vfio-pci does not pass PCI_STATUS writes to the device \
                 (drivers/vfio/pci/vfio_pci_config.c): clear it as root with `sudo setpci -s {addr} STATUS={STATUS_ERRORS:#06x}`",
                decode_status(left & PCI_ERRORS)
            ));
        }
        if left & MEMORY_ERRORS != 0 {
            fixes.push(format!(
                "writing 0 to ERROR_COUNT (BAR0+0x3D) did not clear {}: power-cycle the host (a warm reboot does not reset the card)",
                decode_status(left & MEMORY_ERRORS)
            ));
        }
        Ok(Some(format!(
            "the {} still latches errors from an earlier transfer, and every transfer would stop on them: {}; then run again",
            self.info.model,
            fixes.join("; ")
        )))
    }

    /// The card's memory error logs in words (when the status says it logged one), then cleared
    /// as umem.c does (ERROR_COUNT written 0).
    pub(super) fn memory_error(&self, status: u32) -> Result<String> {
        if status & ANY_ERR == 0 {
            return Ok(String::new());
        }
        let b = |off| -> Result<u64> { self.bar.read(off, Width::B8) };
        let stat = b(ERRSTATUS)? as u8;
        let count = b(ERROR_COUNT)?;
        let addr = self.rd32(ERROR_ADDR_LOG)? as u64 | b(ERROR_ADDR_LOG + 4)? << 32;
        let data = self.rd32(ERROR_DATA_LOG)? as u64 | (self.rd32(ERROR_DATA_LOG + 4)? as u64) << 32;
        let mut kinds = Vec::new();
        if stat & ERRSTATUS_ACCESS != 0 {
            kinds.push("memory access error");
        }
        if stat & ERRSTATUS_MULTI_BIT != 0 {
            kinds.push("multi-bit ECC error");
        }
        self.bar.write(ERROR_COUNT, Width::B8, 0)?;
        Ok(format!(
            "; card memory: {} at card address {addr:#x} (error status {stat:#04x}, count {count}, data {data:#018x})",
            if kinds.is_empty() { "error".to_string() } else { kinds.join(" and ") }
        ))
    }
}
