//! A simulated card's 256-byte config space, built from its `DeviceInfo` so the two always
//! agree: a type 0 header (ids, class), BARs that size like real ones (the sim cards' are 64-bit
//! prefetchable memory; a user's model says), the interrupt capabilities its IP has
//! (`sim::irq::Offers`: MSI at 0x48, MSI-X at 0x60, the Interrupt Pin where it raises INTx), a PCI
//! Express capability at 0x70 with the card's link, MPS and MRRS (none for a conventional PCI
//! function, which has no link), and capabilities of a model's own linked after them. Writes go through a per-byte mask of writable bits, so read-only fields ignore
//! writes as on hardware; the interrupt enables written are handed to the card's `SimIrq`
//! (`control`), which signals by them.

use crate::pci::config::{CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
use crate::pci::resource::BarKind;
use crate::pci::DeviceInfo;
use crate::sim::irq::{Control, Offers};
use crate::{Error, Result};

pub const CONFIG_SIZE: usize = 256;
/// Where the PCI Express capability sits (as `device_info()` reports).
pub const PCIE_CAP: usize = 0x70;
/// Where the MSI and MSI-X capabilities sit when the card has them (PCI Local Bus 3.0 §6.8.1,
/// §6.8.2; the offsets Xilinx's PCIe cores use, below the PCI Express capability).
pub const MSI_CAP: usize = 0x48;
pub const MSIX_CAP: usize = 0x60;
/// Status bit 4: the capability list at 0x34 is there (PCI Local Bus 3.0 §6.2.3).
const STATUS_CAP_LIST: u16 = 0x0010;
/// Command bit 0, I/O Space: writable where the function has an I/O BAR.
const CMD_IO: u16 = 0x0001;
/// The latency timer byte of a type 0 header.
const LATENCY_TIMER: usize = 0x0d;
/// Command bit 10, Interrupt Disable.
const CMD_INTX_DISABLE: u16 = 1 << 10;
/// MSI Message Control: Enable, Multiple Message Capable (3:1), Multiple Message Enable (6:4),
/// 64-bit address capable (bit 7).
const MSI_ENABLE: u16 = 1;
const MSI_64BIT: u16 = 1 << 7;
/// MSI-X Message Control: Function Mask (14), Enable (15); Table Size (10:0) is N-1.
const MSIX_MASK_ALL: u16 = 1 << 14;
const MSIX_ENABLE: u16 = 1 << 15;

/// Writable command bits: Memory Space, Bus Master, Parity Error Response, SERR#, INTx Disable
/// (PCI Local Bus 3.0 §6.2.2). I/O Space stays 0: the card has no I/O BARs.
const CMD_WRITABLE: u16 = CMD_MEMORY | CMD_BUS_MASTER | 0x0040 | 0x0100 | 0x0400;

pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
    /// Where the MSI and MSI-X capabilities are, when the card has them.
    msi: Option<usize>,
    msix: Option<usize>,
}

impl ConfigSpace {
    /// The config space of a card described by `info`, signalling as `irq` says (the offers, and
    /// the register BAR its MSI-X table lies in); None: a card that raises no interrupt.
    pub fn from_info(info: &DeviceInfo, irq: Option<(Offers, u8)>) -> ConfigSpace {
        let mut c = ConfigSpace { bytes: [0; CONFIG_SIZE], wmask: [0; CONFIG_SIZE], msi: None, msix: None };
        c.put16(0x00, info.vendor_id);
        c.put16(0x02, info.device_id);
        c.put16(COMMAND, CMD_MEMORY);
        let io = info.bars.iter().any(|b| b.kind == BarKind::Io);
        c.mask16(COMMAND, CMD_WRITABLE | if io { CMD_IO } else { 0 });
        c.put32(0x08, info.class_code << 8 | info.revision as u32);
        c.put16(0x2c, info.subsystem_vendor_id);
        c.put16(0x2e, info.subsystem_device_id);
        // The card's pin (INTA-INTD) where it raises INTx; 0 (no pin) otherwise (§6.2.4).
        c.bytes[0x3d] = irq.filter(|(o, _)| o.intx).map_or(0, |(o, _)| o.pin.clamp(1, 4));
        c.bytes[0x3c] = 0xff;
        c.wmask[0x3c] = 0xff; // interrupt line is scratch for software
        for b in &info.bars {
            // The type bits are read-only (I/O: bit 0; memory: 64-bit type 10b in bits 2:1,
            // prefetchable bit 3); the address bits below the size read as zero, so writing
            // all-ones reads back the size mask (PCI Local Bus 3.0 §6.2.5.1).
            let off = 0x10 + 4 * b.index as usize;
            let below = b.size.max(16) - 1;
            if b.kind == BarKind::Io {
                c.put32(off, 0x1);
                c.mask32(off, !(below as u32) & 0xffff_fffc);
                continue;
            }
            c.put32(off, if b.is_64bit { 0x4 } else { 0 } | if b.prefetchable { 0x8 } else { 0 });
            c.mask32(off, !(below as u32) & 0xffff_fff0 & if below >> 32 != 0 { 0 } else { !0 });
            if b.is_64bit {
                c.mask32(off + 4, !((below >> 32) as u32));
            }
        }
        // A function without a link is a conventional PCI one: no PCI Express capability.
        if info.link.is_some() {
            c.pcie_capability(info);
        }
        if let Some((offers, bar)) = irq {
            c.interrupt_caps(offers, bar);
        }
        c
    }

    /// The PCI Express capability (PCIe Base 4.0 §7.5.3): v2, endpoint, the card's link.
    fn pcie_capability(&mut self, info: &DeviceInfo) {
        let (c, p) = (self, PCIE_CAP);
        c.bytes[0x34] = p as u8;
        c.put16(0x06, STATUS_CAP_LIST);
        c.bytes[p] = 0x10;
        c.bytes[p + 1] = 0;
        c.put16(p + 2, 0x0002);
        // Payload sizes are encoded as log2(bytes) - 7 (PCIe Base 4.0 §7.5.3.3/§7.5.3.4).
        let code = |bytes: Option<u32>, default: u32| (bytes.unwrap_or(default).max(128).ilog2() - 7) as u16;
        let link = info.link.as_ref();
        let (mps, mrrs) = (code(link.and_then(|l| l.mps), 128), code(link.and_then(|l| l.mrrs), 512));
        c.put32(p + 4, code(link.and_then(|l| l.mps_supported), 128) as u32); // DevCap: MPS supported
        c.put16(p + 8, (mps << 5) | (mrrs << 12)); // DevCtl
        c.mask16(p + 8, 0x7fff);
        let gen = link.and_then(|l| l.max_gen).unwrap_or(1) as u32;
        let width = link.and_then(|l| l.max_width).unwrap_or(1) as u32;
        c.put32(p + 0x0c, (width << 4) | gen); // LinkCap: max speed, max width
        c.put16(p + 0x12, 0x1000 | (width << 4) as u16 | gen as u16); // LinkSta: slot clock, trained at max
        c.put32(p + 0x2c, ((1u32 << gen) - 1) << 1); // LinkCap2: every speed up to the max
    }

    /// Capabilities of the function's own (a user's model: `crate::model` checked them), `bytes`
    /// at `at`, linked after the last capability of the list. Read-only, as the model keeps them.
    pub fn append_capabilities(&mut self, at: u8, bytes: &[u8]) {
        let (at, end) = (at as usize, (at as usize + bytes.len()).min(CONFIG_SIZE));
        self.bytes[at..end].copy_from_slice(&bytes[..end - at]);
        let mut link = 0x34;
        // The list is the card's own, acyclic by construction: at most 48 capabilities fit.
        for _ in 0..48 {
            match self.bytes[link] as usize {
                0 => break,
                next => link = next + 1,
            }
        }
        self.bytes[link] = at as u8;
        self.put16(0x06, STATUS_CAP_LIST);
    }

    /// The MSI and MSI-X capabilities `offers` has, linked in front of the PCI Express one.
    fn interrupt_caps(&mut self, offers: Offers, bar: u8) {
        if offers.msix > 0 {
            // MSI-X (§6.8.2): Table Size N-1, the table and PBA in the register BAR (BIR).
            let x = MSIX_CAP;
            self.bytes[x] = 0x11;
            self.bytes[x + 1] = self.bytes[0x34];
            self.bytes[0x34] = x as u8;
            self.put16(0x06, STATUS_CAP_LIST);
            self.put16(x + 2, (offers.msix - 1) as u16);
            self.mask16(x + 2, MSIX_ENABLE | MSIX_MASK_ALL);
            self.put32(x + 4, offers.msix_table | bar as u32);
            self.put32(x + 8, offers.msix_pba | bar as u32);
            self.msix = Some(x);
        }
        if offers.msi > 0 {
            // MSI (§6.8.1), 64-bit address capable, without per-vector masking, as the Xilinx
            // PCIe cores configure it by default.
            let m = MSI_CAP;
            self.bytes[m] = 0x05;
            self.bytes[m + 1] = self.bytes[0x34];
            self.bytes[0x34] = m as u8;
            self.put16(0x06, STATUS_CAP_LIST);
            let mmc = offers.msi.clamp(1, 32).ilog2() as u16;
            self.put16(m + 2, MSI_64BIT | mmc << 1);
            self.mask16(m + 2, MSI_ENABLE | 0x70);
            self.mask32(m + 4, 0xffff_fffc); // Message Address, DWORD-aligned
            self.mask32(m + 8, 0xffff_ffff); // Message Upper Address
            self.mask16(m + 12, 0xffff); // Message Data
            self.msi = Some(m);
        }
    }

    /// The interrupt enables as the config space holds them now.
    pub fn control(&self) -> Control {
        let rd16 = |at: usize| u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]]);
        let msix = self.msix.map_or(0, |x| rd16(x + 2));
        let msi = self.msi.map_or(0, |m| rd16(m + 2));
        // Multiple Message Enable above the capable count is software's error: the capable count.
        let mmc = (msi >> 1) & 0x7;
        Control {
            msix_enabled: msix & MSIX_ENABLE != 0,
            msix_masked: msix & MSIX_MASK_ALL != 0,
            msi_enabled: msi & MSI_ENABLE != 0,
            msi_vectors: 1 << ((msi >> 4) & 0x7).min(mmc),
            intx_disabled: self.command() & CMD_INTX_DISABLE != 0,
        }
    }

    /// Where the MSI and MSI-X capabilities are (for an access path that enables them).
    pub fn msi_at(&self) -> Option<usize> {
        self.msi
    }
    pub fn msix_at(&self) -> Option<usize> {
        self.msix
    }

    /// Make the header a conventional PCI one where PCI Express hardwires fields to 0: MWI
    /// Enable (command bit 4) and the latency timer become writable.
    pub fn allow_conventional(&mut self) {
        self.wmask[COMMAND] |= 0x10;
        self.wmask[LATENCY_TIMER] = 0xff;
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn mask16(&mut self, off: usize, m: u16) {
        self.wmask[off..off + 2].copy_from_slice(&m.to_le_bytes());
    }
    fn mask32(&mut self, off: usize, m: u32) {
        self.wmask[off..off + 4].copy_from_slice(&m.to_le_bytes());
    }

    fn range(offset: u64, len: usize) -> Result<usize> {
        match usize::try_from(offset).ok().filter(|o| o.checked_add(len).is_some_and(|e| e <= CONFIG_SIZE)) {
            Some(o) => Ok(o),
            None => Err(Error::Refused(format!(
                "config access of {len} bytes at {offset:#x} is past the sim card's {CONFIG_SIZE}-byte config space"
            ))),
        }
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let o = Self::range(offset, buf.len())?;
        buf.copy_from_slice(&self.bytes[o..o + buf.len()]);
        Ok(())
    }

    /// Bytes land only where the mask allows; read-only bits keep their value.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let o = Self::range(offset, data.len())?;
        for (i, &b) in data.iter().enumerate() {
            let m = self.wmask[o + i];
            self.bytes[o + i] = (self.bytes[o + i] & !m) | (b & m);
        }
        Ok(())
    }

    pub fn command(&self) -> u16 {
        u16::from_le_bytes([self.bytes[COMMAND], self.bytes[COMMAND + 1]])
    }

    pub fn bytes(&self) -> &[u8; CONFIG_SIZE] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::config;
    use crate::pci::intr;
    use crate::sim::CardSpec;

    fn xdma() -> ConfigSpace {
        let offers =
            Offers { msix: 32, msi: 32, intx: true, pin: 1, intx_maskable: true, msix_table: 0x8000, msix_pba: 0x8fe0 };
        ConfigSpace::from_info(&crate::sim::xdma::card::XdmaCard.info(), Some((offers, 4)))
    }

    #[test]
    fn parses_as_the_described_card() {
        let c = xdma();
        let info = config::parse(c.bytes());
        assert!(info.warnings.is_empty(), "{:?}", info.warnings);
        assert_eq!(info.command, Some(CMD_MEMORY));
        let pcie = info.pcie.expect("PCIe capability");
        assert_eq!((pcie.offset, pcie.mps, pcie.mrrs, pcie.mps_supported), (0x70, 256, 512, 512));
        assert_eq!((pcie.cur_gen, pcie.cur_width, pcie.max_gen, pcie.max_width), (Some(2), 4, Some(2), 4));
        assert_eq!(&c.bytes()[0..4], &[0xee, 0x10, 0x24, 0x70]);
    }

    #[test]
    fn command_bits_and_bar_sizing_follow_the_masks() {
        let mut c = xdma();
        c.write(4, &[0x07]).unwrap(); // I/O (read-only 0), Memory, Bus Master
        assert_eq!(c.command(), CMD_MEMORY | CMD_BUS_MASTER);
        c.write(4, &(CMD_MEMORY).to_le_bytes()).unwrap();
        assert_eq!(c.command(), CMD_MEMORY);
        // BAR sizing: all-ones reads back ~(size-1) | flags.
        c.write(0x10, &[0xff; 4]).unwrap();
        let mut b = [0u8; 4];
        c.read(0x10, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b), 0xfff0_000c);
        c.write(0x20, &[0xff; 4]).unwrap();
        c.read(0x20, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b), 0xffff_000c);
        // Read-only ids ignore writes; out-of-range accesses are refused.
        c.write(0, &[0; 4]).unwrap();
        assert_eq!(&c.bytes()[0..2], &[0xee, 0x10]);
        assert!(c.read(255, &mut [0; 2]).is_err());
        assert!(c.write(256, &[0]).is_err());
    }

    #[test]
    fn interrupt_capabilities_are_linked_and_their_enables_stick() {
        let mut c = xdma();
        let info = config::parse(c.bytes());
        assert!(info.warnings.is_empty(), "{:?}", info.warnings);
        let ids: Vec<(u16, u16)> = info.capabilities.iter().map(|k| (k.id, k.offset)).collect();
        assert_eq!(ids, vec![(0x05, 0x48), (0x11, 0x60), (0x10, 0x70)]);
        let irq = intr::read(c.bytes());
        assert_eq!((irq.pin, irq.msi.unwrap().vectors, irq.msi.unwrap().addr64), (1, 32, true));
        let x = irq.msix.unwrap();
        assert_eq!((x.vectors, x.table_bar, x.table_offset, x.enabled), (32, 4, 0x8000, false));
        assert_eq!(&c.bytes()[0x68..0x6c], &(0x8fe0u32 | 4).to_le_bytes(), "PBA offset and BIR");
        assert_eq!(c.control(), Control { msi_vectors: 1, ..Control::default() });
        // MSI-X Enable and Function Mask stick; Table Size is read-only.
        c.write(0x62, &0xffffu16.to_le_bytes()).unwrap();
        assert_eq!(&c.bytes()[0x62..0x64], &(0xc000u16 | 31).to_le_bytes());
        assert!(c.control().msix_enabled && c.control().msix_masked);
        // MSI: Enable and Multiple Message Enable (4 vectors) stick; capable bits do not move.
        c.write(0x4a, &(0x0021u16).to_le_bytes()).unwrap();
        assert_eq!(c.control().msi_vectors, 4);
        assert!(c.control().msi_enabled);
        assert_eq!(u16::from_le_bytes([c.bytes()[0x4a], c.bytes()[0x4b]]), 0x00a0 | 5 << 1 | 1);
        c.write(0x4c, &[0xff; 4]).unwrap();
        assert_eq!(&c.bytes()[0x4c..0x50], &[0xfc, 0xff, 0xff, 0xff], "the address is DWORD-aligned");
        c.write(4, &(CMD_MEMORY | CMD_INTX_DISABLE).to_le_bytes()).unwrap();
        assert!(c.control().intx_disabled);
        // A card that raises nothing: no pin, no interrupt capability.
        let plain = ConfigSpace::from_info(&crate::sim::xdma::card::XdmaCard.info(), None);
        assert_eq!(
            intr::read(plain.bytes()),
            intr::IrqCaps { intx_disabled: Some(false), intx_pending: Some(false), ..Default::default() }
        );
    }

    #[test]
    fn a_conventional_function_with_its_own_capabilities_and_32_bit_bars() {
        // A user's model (crate::model): no link, a 32-bit BAR0, an I/O BAR1, MSI, and two
        // vendor-specific capabilities of its own at 0xb0 and 0xc0.
        let mut info = crate::sim::xdma::card::XdmaCard.info();
        info.link = None;
        info.bars = vec![
            crate::pci::Bar { index: 0, size: 1 << 20, is_64bit: false, prefetchable: false, ..info.bars[0].clone() },
            crate::pci::Bar {
                index: 1,
                size: 32,
                kind: BarKind::Io,
                is_64bit: false,
                prefetchable: false,
                ..info.bars[0].clone()
            },
        ];
        let offers = Offers { msix: 0, msi: 1, intx: true, pin: 1, intx_maskable: true, msix_table: 0, msix_pba: 0 };
        let mut c = ConfigSpace::from_info(&info, Some((offers, 0)));
        let mut own = vec![0u8; 0x20];
        (own[0], own[1], own[2], own[0x10], own[0x11], own[0x12]) = (0x09, 0xc0, 0x10, 0x09, 0x00, 0x10);
        c.append_capabilities(0xb0, &own);
        let parsed = config::parse(c.bytes());
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let ids: Vec<(u16, u16)> = parsed.capabilities.iter().map(|k| (k.id, k.offset)).collect();
        assert_eq!(ids, vec![(0x05, 0x48), (0x09, 0xb0), (0x09, 0xc0)], "no PCI Express capability");
        // BAR0: 32-bit non-prefetchable memory, sized; BAR1: I/O; I/O Space is writable.
        c.write(0x10, &[0xff; 4]).unwrap();
        c.write(0x14, &[0xff; 4]).unwrap();
        let mut b = [0u8; 8];
        c.read(0x10, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 0xfff0_0000);
        assert_eq!(u32::from_le_bytes(b[4..].try_into().unwrap()), 0xffff_ffe1);
        c.write(4, &[0x03]).unwrap();
        assert_eq!(c.command() & 0x3, 0x3);
        // Nothing at all: the status register says there is no list.
        let bare = ConfigSpace::from_info(&info, None);
        assert_eq!(bare.bytes()[0x34], 0);
        assert_eq!(bare.bytes()[0x06] & 0x10, 0);
    }
}
