//! What vfio-pci does to a function's config space when `VFIO_DEVICE_SET_IRQS` routes a kind, done
//! to a simulated card's, and undone when the routing is torn down: MSI-X enabled with the
//! function masked while the routed entries are programmed and unmasked, then the mask lifted
//! (the kernel's msix_capability_init); MSI enabled with Multiple Message Enable for the vectors
//! granted (msi_capability_init). INTx is left to the driver: vfio-pci turns a user's write of
//! Interrupt Disable into its INTx mask (vfio_basic_config_write), and here that write reaches
//! the card itself, as the umem driver arms and disarms it. The host's side of each message (address, data) is the eventfd per vector the
//! routing made: the table holds an x86 message address and the vector as data, as a kernel
//! would write them, and the card routes by entry.

use super::SimConfig;
use crate::access::ConfigPort;
use crate::sim::irq::{Signal, SimIrq};

/// MSI-X Message Control: Function Mask, Enable; MSI Message Control: Enable, Multiple Message Enable.
const MSIX_MASK_ALL: u16 = 1 << 14;
const MSIX_ENABLE: u16 = 1 << 15;
const MSI_ENABLE: u16 = 1;
const MSI_MME: u16 = 0x70;
/// The message address an x86 kernel programs (the local APIC's window, Intel SDM vol. 3 §11.11.1).
const MSG_ADDRESS: u32 = 0xfee0_0000;
/// MSI's Message Control, addresses and data: the capability's bytes 2 to 15 (64-bit, no masking).
const MSI_BYTES: usize = 14;

/// The enables as they were found, to be put back.
pub(super) struct Found {
    msi: Option<(u64, [u8; MSI_BYTES])>,
    msix: Option<(u64, u16)>,
    table: Vec<u8>,
}

fn read16(config: &SimConfig, at: u64) -> u16 {
    let mut b = [0u8; 2];
    // In range by construction: the capabilities lie inside the 256 bytes.
    let _ = config.read(at, &mut b);
    u16::from_le_bytes(b)
}

fn write(config: &SimConfig, at: u64, bytes: &[u8]) {
    // The offsets come from the card's own config space model: always inside it.
    let _ = config.write(at, bytes);
}

/// Enable `kind` with `vectors` vectors at the function; what was there before.
pub(super) fn enable(config: &SimConfig, irq: &SimIrq, kind: Signal, vectors: u32) -> Found {
    let (msi_at, msix_at) = {
        let space = config.space();
        (space.msi_at().map(|a| a as u64), space.msix_at().map(|a| a as u64))
    };
    let offers = irq.offers();
    let table_len = offers.msix as u64 * 16;
    let table = (0..table_len)
        .step_by(4)
        .flat_map(|o| (irq.table_read(offers.msix_table as u64 + o, 4).unwrap_or(0) as u32).to_le_bytes())
        .collect();
    let found = Found {
        msi: msi_at.map(|at| {
            let mut b = [0u8; MSI_BYTES];
            let _ = config.read(at + 2, &mut b);
            (at, b)
        }),
        msix: msix_at.map(|at| (at, read16(config, at + 2))),
        table,
    };
    match kind {
        Signal::MsiX => {
            if let Some((at, ctl)) = found.msix {
                write(config, at + 2, &(ctl | MSIX_ENABLE | MSIX_MASK_ALL).to_le_bytes());
                for v in 0..vectors.min(offers.msix) as u64 {
                    let e = offers.msix_table as u64 + 16 * v;
                    irq.table_write(e, 4, MSG_ADDRESS as u64);
                    irq.table_write(e + 4, 4, 0);
                    irq.table_write(e + 8, 4, v);
                    irq.table_write(e + 12, 4, 0);
                }
                write(config, at + 2, &((ctl | MSIX_ENABLE) & !MSIX_MASK_ALL).to_le_bytes());
            }
        }
        Signal::Msi => {
            if let Some((at, b)) = found.msi {
                write(config, at + 4, &MSG_ADDRESS.to_le_bytes());
                write(config, at + 8, &0u32.to_le_bytes());
                write(config, at + 12, &0u16.to_le_bytes());
                let ctl = u16::from_le_bytes([b[0], b[1]]);
                let mme = (vectors.clamp(1, 32).ilog2() as u16) << 4;
                write(config, at + 2, &((ctl & !MSI_MME) | mme | MSI_ENABLE).to_le_bytes());
            }
        }
        Signal::Intx => {}
    }
    found
}

/// Put the enables back as `found` (the message enables first, so nothing is sent meanwhile).
pub(super) fn restore(config: &SimConfig, irq: &SimIrq, found: &Found) {
    if let Some((at, ctl)) = found.msix {
        write(config, at + 2, &ctl.to_le_bytes());
    }
    if let Some((at, b)) = &found.msi {
        write(config, at + 2, b);
    }
    let base = irq.offers().msix_table as u64;
    for (i, w) in found.table.chunks_exact(4).enumerate() {
        irq.table_write(base + 4 * i as u64, 4, u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64);
    }
}

#[cfg(test)]
mod tests {
    use crate::access::sim::SimDevice;
    use crate::access::{DeviceAccess, IoMode, IrqKind, IrqRequest, Mapping};
    use crate::mmio::Width;
    use crate::pci::intr;

    fn caps(dev: &SimDevice) -> intr::IrqCaps {
        let mut b = [0u8; 256];
        dev.config_read(0, &mut b).unwrap();
        intr::read(&b)
    }

    #[test]
    fn routing_enables_the_kind_as_vfio_pci_does_and_teardown_puts_it_back() {
        let dev = SimDevice::new().unwrap();
        let bar = dev.open_bar(4, Mapping::Uc, IoMode::Mmap).unwrap();
        let entry = |v: u64, word: u64| bar.read(0x8000 + 16 * v + word, Width::B32).unwrap();
        assert!(!caps(&dev).msix.unwrap().enabled);
        assert_eq!(entry(0, 12), 1, "entries masked at reset");
        let irq = dev.interrupts(IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
        let x = caps(&dev).msix.unwrap();
        assert!(x.enabled && !x.function_masked);
        // The routed entries programmed and unmasked, the rest masked as found.
        assert_eq!((entry(0, 0), entry(1, 8), entry(1, 12), entry(2, 12)), (0xfee0_0000, 1, 0, 1));
        drop(irq);
        assert!(!caps(&dev).msix.unwrap().enabled);
        assert_eq!((entry(0, 0), entry(0, 12)), (0, 1));
        // MSI: Enable and Multiple Message Enable for the vectors granted, cleared after.
        let irq = dev.interrupts(IrqRequest::only(IrqKind::Msi, 4)).unwrap();
        let mut ctl = [0u8; 2];
        dev.config_read(0x4a, &mut ctl).unwrap();
        assert_eq!(u16::from_le_bytes(ctl) & 0x71, 0x21, "enabled, 4 vectors");
        assert!(caps(&dev).msi.unwrap().enabled && !caps(&dev).msix.unwrap().enabled);
        drop(irq);
        assert!(!caps(&dev).msi.unwrap().enabled);
    }
}
