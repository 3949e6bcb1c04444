//! The expansion ROM, as `lspci -v` judges it: the address and size the kernel gave it (sysfs
//! `resource` line 6, the ROM resource for every header type: drivers/pci/probe.c reads a
//! bridge's ROM BAR at 0x38 into the same PCI_ROM_RESOURCE) and its ROM Base Address register in
//! config space (0x30 on a type 0 header, 0x38 on a type 1, PCI Local Bus 3.0 §6.2.5.2), whose bit 0
//! enables decoding. lspci (pciutils ls-kernel/lspci.c, show_rom) prints "Expansion ROM at ADDR",
//! `<unassigned>` or `<ignored>`, then `[virtual]`, `[disabled]` or `[disabled by cmd]`, and
//! `[size=N]`; `rom_line` says the same words.

use serde::Serialize;

/// Bits of the ROM BAR that hold the address (the low 11 are flags and reserved).
const ADDRESS_MASK: u64 = !0x7ff;
/// ROM Address Enable (bit 0 of the register; the kernel keeps it as IORESOURCE_ROM_ENABLE, bit 0
/// of the resource's flags, which libpci reads back the same way).
const ENABLE: u64 = 1;
/// PCI_COMMAND's Memory Space bit.
const COMMAND_MEMORY: u16 = 0x2;

/// A device's expansion ROM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpansionRom {
    /// The bus address the kernel assigned (`None`: unassigned).
    pub start: Option<u64>,
    /// Bytes the ROM decodes (0 when the kernel gives no size).
    pub size: u64,
    /// The ROM Base Address register as read from config space (`None` where it could not be read).
    pub register: Option<u32>,
    /// Whether ROM decoding is enabled (the register's bit 0).
    pub enabled: bool,
    /// The register holds no address though the kernel has one: a ROM the platform provides (a
    /// shadow copy), which lspci marks `[virtual]`.
    #[serde(rename = "virtual")]
    pub is_virtual: bool,
    /// The register holds an address the kernel did not take (lspci's `<ignored>`).
    pub ignored: bool,
    /// Enabled in the register, but Memory Space is off in the command register.
    pub disabled_by_command: bool,
}

/// The ROM from the text of the sysfs `resource` file and the config space read (as little as
/// the first 64 bytes: both registers lie there). None when there is no ROM at all.
pub fn read(resource: &str, cfg: &[u8]) -> Option<ExpansionRom> {
    let line = resource.lines().nth(6)?;
    let nums: Vec<u64> =
        line.split_whitespace().filter_map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()).collect();
    let &[start, end, flags] = nums.as_slice() else { return None };
    let rom = start | (flags & 0xf);
    let size = if end > start { end - start + 1 } else { 0 };
    let offset = match cfg.get(0x0e).map(|h| h & 0x7f) {
        Some(0) => Some(0x30),
        Some(1) => Some(0x38),
        _ => None,
    };
    let register = offset.and_then(|o| cfg.get(o..o + 4)).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let mut flg = register.map_or(rom, u64::from);
    if rom == 0 && flg == 0 && size == 0 {
        return None;
    }
    let is_virtual = register.is_some() && rom & ADDRESS_MASK != 0 && flg & ADDRESS_MASK == 0;
    if is_virtual {
        flg = rom;
    }
    let memory = cfg.get(4..6).is_none_or(|b| u16::from_le_bytes([b[0], b[1]]) & COMMAND_MEMORY != 0);
    let enabled = flg & ENABLE != 0;
    Some(ExpansionRom {
        start: Some(rom & ADDRESS_MASK).filter(|a| *a != 0),
        size,
        register,
        enabled,
        is_virtual,
        ignored: rom & ADDRESS_MASK == 0 && flg & ADDRESS_MASK != 0,
        disabled_by_command: enabled && !is_virtual && !memory,
    })
}

impl ExpansionRom {
    /// lspci -v's line, without its tab: `Expansion ROM at fe840000 [disabled] [size=256K]`.
    pub fn rom_line(&self) -> String {
        let mut s = String::from("Expansion ROM at ");
        match self.start {
            Some(a) => s.push_str(&format!("{a:08x}")),
            None if self.ignored => s.push_str("<ignored>"),
            None => s.push_str("<unassigned>"),
        }
        if self.is_virtual {
            s.push_str(" [virtual]");
        }
        if !self.enabled {
            s.push_str(" [disabled]");
        } else if self.disabled_by_command {
            s.push_str(" [disabled by cmd]");
        }
        if self.size > 0 {
            // lspci's show_size: the largest unit that divides it (K, M, G, T).
            let (mut n, mut unit) = (self.size, 0);
            while unit < 4 && n % 1024 == 0 {
                n /= 1024;
                unit += 1;
            }
            s.push_str(&format!(" [size={n}{}]", ["", "K", "M", "G", "T"][unit]));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resource file whose line 6 is the ROM.
    fn resource(start: u64, size: u64, flags: u64) -> String {
        let mut lines = vec!["0x0 0x0 0x0".to_string(); 13];
        let end = if size > 0 { start + size - 1 } else { 0 };
        lines[6] = format!("0x{start:016x} 0x{end:016x} 0x{flags:016x}");
        lines.join("\n")
    }

    /// Config space of a header `htype` with Memory Space `mem` and the ROM register `reg`.
    fn config(htype: u8, mem: bool, reg: u32) -> Vec<u8> {
        let mut c = vec![0u8; 64];
        c[4] = if mem { 2 } else { 0 };
        c[0x0e] = htype;
        let at = if htype == 1 { 0x38 } else { 0x30 };
        c[at..at + 4].copy_from_slice(&reg.to_le_bytes());
        c
    }

    #[test]
    fn a_disabled_rom_reads_as_lspci_prints_it() {
        // QEMU's e1000e: efi-e1000e.rom, 256 KiB, assigned but not enabled.
        let rom = read(&resource(0xfe84_0000, 256 << 10, 0x46200), &config(0, true, 0xfe84_0000)).unwrap();
        assert_eq!(rom.start, Some(0xfe84_0000));
        assert!(!rom.enabled && !rom.is_virtual);
        assert_eq!(rom.rom_line(), "Expansion ROM at fe840000 [disabled] [size=256K]");
    }

    #[test]
    fn enabled_disabled_by_command_virtual_unassigned_and_bridges() {
        let on = read(&resource(0xfe84_0000, 1 << 20, 0x46201), &config(0, true, 0xfe84_0001)).unwrap();
        assert_eq!(on.rom_line(), "Expansion ROM at fe840000 [size=1M]");
        let off = read(&resource(0xfe84_0000, 64 << 10, 0x46201), &config(0, false, 0xfe84_0001)).unwrap();
        assert_eq!(off.rom_line(), "Expansion ROM at fe840000 [disabled by cmd] [size=64K]");
        // A platform's shadow copy: the kernel has an address, the register none.
        let shadow = read(&resource(0xc0000, 128 << 10, 0x46201), &config(0, true, 0)).unwrap();
        assert_eq!(shadow.rom_line(), "Expansion ROM at 000c0000 [virtual] [size=128K]");
        let unassigned = read(&resource(0, 0, 0), &config(0, true, 0x1)).unwrap();
        assert_eq!(unassigned.rom_line(), "Expansion ROM at <unassigned>");
        let ignored = read(&resource(0, 0, 0), &config(0, true, 0xfe80_0000)).unwrap();
        assert_eq!(ignored.rom_line(), "Expansion ROM at <ignored> [disabled]");
        // A bridge's ROM register is at 0x38.
        let bridge = read(&resource(0xfe60_0000, 2 << 10, 0x46200), &config(1, true, 0xfe60_0000)).unwrap();
        assert_eq!(bridge.register, Some(0xfe60_0000));
        assert_eq!(bridge.rom_line(), "Expansion ROM at fe600000 [disabled] [size=2K]");
    }

    #[test]
    fn no_rom_is_none() {
        assert_eq!(read(&resource(0, 0, 0), &config(0, true, 0)), None);
        assert_eq!(read("", &[]), None);
        assert_eq!(read(&resource(0, 0, 0), &config(2, true, 0)), None);
    }
}
