//! A function's config space kept across a reset pcibench makes itself, and put back the way the
//! kernel puts back its own saved state (drivers/pci/pci.c, pci_restore_state): the PCI Express
//! capability's control registers (pci_restore_pcie_state), AER's masks and severities
//! (pci_restore_aer_state), the header dwords from last to first, each written only where it now
//! differs (pci_restore_config_space: BARs before the Command register), then MSI's address, data
//! and control (config space holds all of MSI; the MSI-X table lives in a BAR, which is why a
//! function with MSI-X enabled is refused before the reset).

use crate::pci::config;
use crate::setup::SetupOptions;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// PCI Express capability registers (PCIe Base 6.0 §7.5.3) the kernel saves: Device Control,
/// Link Control, Slot Control, Root Control, Device Control 2, Link Control 2, Slot Control 2.
const PCIE_CTL: [(usize, &str); 7] = [
    (0x08, "Device Control"),
    (0x10, "Link Control"),
    (0x18, "Slot Control"),
    (0x1c, "Root Control"),
    (0x28, "Device Control 2"),
    (0x30, "Link Control 2"),
    (0x38, "Slot Control 2"),
];
/// AER (PCIe Base 6.0 §7.8.4): Uncorrectable Error Mask and Severity, Correctable Error Mask;
/// Root Error Command on a root port.
const AER_REGS: [usize; 3] = [0x08, 0x0c, 0x14];
const AER_ROOT_COMMAND: usize = 0x2c;
const CAP_MSI: u16 = 0x05;
const CAP_MSIX: u16 = 0x11;
const MSIX_ENABLE: u16 = 1 << 15;

/// One function's config space as read before the reset.
pub(super) struct Saved {
    pub address: String,
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

/// The first `max` bytes of a config file, or fewer where the caller may read fewer (a user gets
/// 64; root 256, or 4096 on PCI Express).
pub(crate) fn read_config(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(max as usize);
    crate::file::open_regular(path)?.take(max).read_to_end(&mut buf)?;
    Ok(buf)
}

impl Saved {
    pub fn read(address: &str, path: PathBuf) -> Result<Saved> {
        let bytes = read_config(&path, 4096).map_err(|e| Error::io("cannot read", &path, e))?;
        if bytes.len() < 256 {
            return Err(Error::Refused(format!(
                "{address}: only {} bytes of its config space are readable (root reads 256 or more): run it as root \
                 to save what a bus reset clears",
                bytes.len()
            )));
        }
        if bytes[0..2] == [0xff, 0xff] {
            return Err(Error::Device(format!(
                "{address} does not answer (its vendor id reads 0xffff): nothing to save"
            )));
        }
        Ok(Saved { address: address.to_string(), path, bytes })
    }

    fn u16_at(&self, off: usize) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes.get(off..off + 2)?.try_into().ok()?))
    }

    fn cap(&self, id: u16) -> Option<usize> {
        config::parse(&self.bytes).capabilities.iter().find(|c| c.id == id).map(|c| c.offset as usize)
    }

    /// Whether MSI-X is enabled: its table (in a BAR) is lost to a reset and cannot be restored
    /// from config space.
    pub fn msix_enabled(&self) -> bool {
        self.cap(CAP_MSIX).and_then(|c| self.u16_at(c + 2)).is_some_and(|ctl| ctl & MSIX_ENABLE != 0)
    }

    /// The Command register as saved.
    pub fn command(&self) -> u16 {
        self.u16_at(config::COMMAND).unwrap_or(0)
    }

    /// What pci_dev_save_and_disable does before a reset: the Command register to INTx Disable
    /// only (no decoding, no DMA while the bus goes down).
    pub fn disable(&self, opts: &SetupOptions) -> Result<()> {
        let v = config::CMD_INTX_DISABLE.to_le_bytes();
        opts.system
            .write_at(&self.path, config::COMMAND as u64, &v)
            .map_err(|e| Error::io("cannot write", &self.path, e))
    }

    /// Put back what the kernel restores, in its order; returns what it wrote, in words.
    pub fn restore(&self, opts: &SetupOptions) -> Result<Vec<String>> {
        let now =
            read_config(&self.path, self.bytes.len() as u64).map_err(|e| Error::io("cannot read", &self.path, e))?;
        let mut wrote = Vec::new();
        let put = |off: usize, len: usize, wrote: &mut Vec<String>, what: &str, force: bool| -> Result<()> {
            let want = &self.bytes[off..off + len];
            if !force && now.get(off..off + len) == Some(want) {
                return Ok(());
            }
            opts.system.write_at(&self.path, off as u64, want).map_err(|e| Error::io("cannot write", &self.path, e))?;
            wrote.push(what.to_string());
            Ok(())
        };
        let info = config::parse(&self.bytes);
        if let Some(p) = &info.pcie {
            let base = p.offset as usize;
            let version = self.bytes[base + 2] & 0x0f;
            for (off, name) in PCIE_CTL {
                // Version 1 capabilities end at Slot Status; the "2" registers exist from version 2.
                if (version < 2 && off >= 0x24) || base + off + 2 > self.bytes.len() {
                    continue;
                }
                put(base + off, 2, &mut wrote, name, false)?;
            }
        }
        if let Some(aer) = info.extended_capabilities.iter().find(|c| c.id == 0x0001).map(|c| c.offset as usize) {
            for off in AER_REGS {
                put(aer + off, 4, &mut wrote, "AER masks", false)?;
            }
            if info.pcie.as_ref().is_some_and(|p| p.port_type == "Root Port") {
                put(aer + AER_ROOT_COMMAND, 4, &mut wrote, "AER Root Error Command", false)?;
            }
        }
        // The header: a type 0 function's last dwords, then its BARs, then Command (so it decodes
        // only once its BARs are back); a bridge's bus numbers and windows the same way, its
        // prefetchable window rewritten always (pci_restore_config_space).
        let ranges: &[(usize, usize, bool)] = match info.header_type {
            Some(1) => &[(12, 15, false), (9, 11, true), (0, 8, false)],
            _ => &[(10, 15, false), (4, 9, false), (0, 3, false)],
        };
        for &(first, last, force) in ranges {
            for dw in (first..=last).rev() {
                put(dw * 4, 4, &mut wrote, &header_name(dw, info.header_type == Some(1)), force)?;
            }
        }
        if let Some(msi) = self.cap(CAP_MSI) {
            let ctl = self.u16_at(msi + 2).unwrap_or(0);
            let wide = ctl & (1 << 7) != 0;
            let (data, end) = if wide { (msi + 0x0c, msi + 0x0e) } else { (msi + 0x08, msi + 0x0a) };
            put(msi + 4, 4, &mut wrote, "MSI address", false)?;
            if wide {
                put(msi + 8, 4, &mut wrote, "MSI address", false)?;
            }
            put(data, end - data, &mut wrote, "MSI data", false)?;
            put(msi + 2, 2, &mut wrote, "MSI control", false)?;
        }
        wrote.dedup();
        Ok(wrote)
    }
}

fn header_name(dw: usize, bridge: bool) -> String {
    match (dw, bridge) {
        (1, _) => "Command".into(),
        (3, _) => "cache line size and latency timer".into(),
        (4..=9, false) => format!("BAR{}", dw - 4),
        (4..=5, true) => format!("BAR{}", dw - 4),
        (6, true) => "bus numbers".into(),
        (7..=11, true) => "bridge windows".into(),
        (12, false) | (14, true) => "expansion ROM".into(),
        (15, false) => "interrupt line".into(),
        (15, true) => "interrupt line and bridge control".into(),
        _ => format!("header dword {dw}"),
    }
}
