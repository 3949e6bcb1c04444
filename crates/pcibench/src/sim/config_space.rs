//! A simulated card's 256-byte config space, built from its `DeviceInfo` so the two always
//! agree: a type 0 header (ids, class), 64-bit prefetchable BARs that size like real ones, and a
//! PCI Express capability at 0x70 with the card's link, MPS and MRRS. Writes go through a
//! per-byte mask of writable bits, so read-only fields ignore writes as on hardware.

use crate::pci::config::{CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
use crate::pci::DeviceInfo;
use crate::{Error, Result};

pub const CONFIG_SIZE: usize = 256;
/// Where the PCI Express capability sits (as `device_info()` reports).
pub const PCIE_CAP: usize = 0x70;
/// The latency timer byte of a type 0 header.
const LATENCY_TIMER: usize = 0x0d;

/// Writable command bits: Memory Space, Bus Master, Parity Error Response, SERR#, INTx Disable
/// (PCI Local Bus 3.0 §6.2.2). I/O Space stays 0: the card has no I/O BARs.
const CMD_WRITABLE: u16 = CMD_MEMORY | CMD_BUS_MASTER | 0x0040 | 0x0100 | 0x0400;

pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
}

impl ConfigSpace {
    pub fn from_info(info: &DeviceInfo) -> ConfigSpace {
        let mut c = ConfigSpace { bytes: [0; CONFIG_SIZE], wmask: [0; CONFIG_SIZE] };
        c.put16(0x00, info.vendor_id);
        c.put16(0x02, info.device_id);
        c.put16(COMMAND, CMD_MEMORY);
        c.mask16(COMMAND, CMD_WRITABLE);
        c.put16(0x06, 0x0010); // status: capability list present
        c.put32(0x08, info.class_code << 8 | info.revision as u32);
        c.put16(0x2c, info.subsystem_vendor_id);
        c.put16(0x2e, info.subsystem_device_id);
        c.bytes[0x34] = PCIE_CAP as u8;
        c.bytes[0x3d] = 1; // INTA
        c.bytes[0x3c] = 0xff;
        c.wmask[0x3c] = 0xff; // interrupt line is scratch for software
        for (index, size) in info.bars.iter().map(|b| (b.index, b.size)) {
            // 64-bit (type 10b) prefetchable memory BAR: low bits 0xc are read-only; the address
            // bits below the size read as zero, so writing all-ones reads back the size mask.
            let off = 0x10 + 4 * index as usize;
            c.put32(off, 0x0000_000c);
            c.mask32(off, !(size as u32 - 1) & 0xffff_fff0);
            c.mask32(off + 4, 0xffff_ffff);
        }
        // PCI Express capability (PCIe Base 4.0 §7.5.3): v2, endpoint.
        let p = PCIE_CAP;
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
        c
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
    use crate::sim::CardSpec;

    #[test]
    fn parses_as_the_described_card() {
        let c = ConfigSpace::from_info(&crate::sim::xdma::card::XdmaCard.info());
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
        let mut c = ConfigSpace::from_info(&crate::sim::xdma::card::XdmaCard.info());
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
}
