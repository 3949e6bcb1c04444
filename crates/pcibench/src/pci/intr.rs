//! What config space says about a function's interrupts: the INTx pin, the MSI and MSI-X
//! capabilities with their vector counts and enables, the command register's Interrupt Disable
//! and the status register's Interrupt Status (PCI Local Bus 3.0 §6.2.2-3, §6.8.1-2). The same
//! counts vfio-pci reports through VFIO_DEVICE_GET_IRQ_INFO (vfio_pci_get_irq_count), read here
//! without opening the device.

use super::config::{parse, COMMAND};
use serde::Serialize;

const STATUS: usize = 0x06;
pub const INTERRUPT_PIN: usize = 0x3d;
/// Command bit 10: Interrupt Disable (INTx); status bit 3: Interrupt Status (PCI 2.3 and later).
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
pub const STATUS_INTERRUPT: u16 = 1 << 3;
const CAP_MSI: u16 = 0x05;
const CAP_MSIX: u16 = 0x11;
/// MSI Message Control: enable, Multiple Message Capable (3:1), 64-bit, per-vector masking.
const MSI_ENABLE: u16 = 1 << 0;
const MSI_64BIT: u16 = 1 << 7;
const MSI_MASKABLE: u16 = 1 << 8;
/// MSI-X Message Control: Table Size (10:0, N-1), Function Mask, Enable.
const MSIX_TABLE_SIZE: u16 = 0x7ff;
const MSIX_MASK_ALL: u16 = 1 << 14;
const MSIX_ENABLE: u16 = 1 << 15;

/// The MSI capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Msi {
    pub offset: u16,
    /// Multiple Message Capable: 1, 2, 4, 8, 16 or 32 vectors.
    pub vectors: u32,
    pub enabled: bool,
    pub addr64: bool,
    pub per_vector_mask: bool,
}

/// The MSI-X capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MsiX {
    pub offset: u16,
    /// Table Size + 1: 1 to 2048 vectors.
    pub vectors: u32,
    pub enabled: bool,
    pub function_masked: bool,
    /// The BAR holding the vector table (BIR) and the offset in it.
    pub table_bar: u8,
    pub table_offset: u32,
    /// The BAR holding the Pending Bit Array and the offset in it.
    pub pba_bar: u8,
    pub pba_offset: u32,
}

/// A function's interrupt facts from its config space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IrqCaps {
    /// Interrupt Pin: 0 none, 1-4 INTA-INTD.
    pub pin: u8,
    /// Command bit 10 (None: the header could not be read).
    pub intx_disabled: Option<bool>,
    /// Status bit 3: the function asserts INTx now (or would, were it not disabled).
    pub intx_pending: Option<bool>,
    pub msi: Option<Msi>,
    pub msix: Option<MsiX>,
}

impl IrqCaps {
    /// The pin as lspci names it: "INTA".
    pub fn pin_name(&self) -> Option<&'static str> {
        ["INTA", "INTB", "INTC", "INTD"].get(self.pin.checked_sub(1)? as usize).copied()
    }
}

fn rd16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn rd32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Read the interrupt facts from whatever part of config space could be read.
pub fn read(bytes: &[u8]) -> IrqCaps {
    let info = parse(bytes);
    let cap = |id: u16| info.capabilities.iter().find(|c| c.id == id).map(|c| c.offset as usize);
    let msi = cap(CAP_MSI).and_then(|at| {
        let ctl = rd16(bytes, at + 2)?;
        Some(Msi {
            offset: at as u16,
            // MMC values above 5 are reserved: 32 is the most MSI has.
            vectors: 1 << ((ctl >> 1) & 0x7).min(5),
            enabled: ctl & MSI_ENABLE != 0,
            addr64: ctl & MSI_64BIT != 0,
            per_vector_mask: ctl & MSI_MASKABLE != 0,
        })
    });
    let msix = cap(CAP_MSIX).and_then(|at| {
        let ctl = rd16(bytes, at + 2)?;
        let table = rd32(bytes, at + 4)?;
        let pba = rd32(bytes, at + 8)?;
        Some(MsiX {
            offset: at as u16,
            vectors: (ctl & MSIX_TABLE_SIZE) as u32 + 1,
            enabled: ctl & MSIX_ENABLE != 0,
            function_masked: ctl & MSIX_MASK_ALL != 0,
            table_bar: (table & 0x7) as u8,
            table_offset: table & !0x7,
            pba_bar: (pba & 0x7) as u8,
            pba_offset: pba & !0x7,
        })
    });
    IrqCaps {
        pin: bytes.get(INTERRUPT_PIN).copied().filter(|p| (1..=4).contains(p)).unwrap_or(0),
        intx_disabled: rd16(bytes, COMMAND).map(|c| c & CMD_INTX_DISABLE != 0),
        intx_pending: rd16(bytes, STATUS).map(|s| s & STATUS_INTERRUPT != 0),
        msi,
        msix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Config space with MSI at 0x50 (4 vectors, 64-bit, enabled) and MSI-X at 0x70 (8 vectors
    /// in BAR2 at 0x2000), pin INTA, Interrupt Disable set.
    fn config() -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[0x04..0x06].copy_from_slice(&(CMD_INTX_DISABLE | 0x6).to_le_bytes());
        b[0x06..0x08].copy_from_slice(&0x0010u16.to_le_bytes());
        b[0x34] = 0x50;
        b[0x3d] = 1;
        b[0x50] = 0x05;
        b[0x51] = 0x70;
        b[0x52..0x54].copy_from_slice(&(MSI_ENABLE | (2 << 1) | MSI_64BIT).to_le_bytes());
        b[0x70] = 0x11;
        b[0x72..0x74].copy_from_slice(&7u16.to_le_bytes());
        b[0x74..0x78].copy_from_slice(&(0x2000u32 | 2).to_le_bytes());
        b[0x78..0x7c].copy_from_slice(&(0x3000u32 | 2).to_le_bytes());
        b
    }

    #[test]
    fn reads_pin_msi_and_msix_as_the_spec_lays_them_out() {
        let c = read(&config());
        assert_eq!((c.pin, c.pin_name(), c.intx_disabled, c.intx_pending), (1, Some("INTA"), Some(true), Some(false)));
        let m = c.msi.unwrap();
        assert_eq!((m.offset, m.vectors, m.enabled, m.addr64, m.per_vector_mask), (0x50, 4, true, true, false));
        let x = c.msix.unwrap();
        assert_eq!((x.offset, x.vectors, x.enabled, x.table_bar, x.table_offset), (0x70, 8, false, 2, 0x2000));
        assert_eq!((x.pba_bar, x.pba_offset), (2, 0x3000));
        // No capability list, no pin: nothing offered; a truncated header: nothing known.
        let mut plain = vec![0u8; 64];
        plain[0x3d] = 9;
        assert_eq!(
            read(&plain),
            IrqCaps { intx_disabled: Some(false), intx_pending: Some(false), ..Default::default() }
        );
        assert_eq!(read(&[0u8; 4]).intx_disabled, None);
    }
}
