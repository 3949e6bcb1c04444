//! The sysfs `resource` file: one line per resource, `start end flags` in hex.
//! Lines 0-5 are the BARs, line 6 the expansion ROM (drivers/pci/pci-sysfs.c, resource_show).

use serde::Serialize;

// include/linux/ioport.h
const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_PREFETCH: u64 = 0x2000;
const IORESOURCE_MEM_64: u64 = 0x0010_0000;
const IORESOURCE_DISABLED: u64 = 0x1000_0000;
const IORESOURCE_UNSET: u64 = 0x2000_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BarKind {
    Memory,
    Io,
}

/// One base address register region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    pub index: u8,
    pub start: u64,
    pub size: u64,
    pub kind: BarKind,
    pub is_64bit: bool,
    pub prefetchable: bool,
    /// The raw IORESOURCE_* flags word from sysfs.
    pub flags: u64,
    /// Which of `resourceN` and `resourceN_wc` exist for this BAR.
    pub files: Vec<String>,
}

impl Bar {
    pub fn is_memory(&self) -> bool {
        self.kind == BarKind::Memory
    }

    pub fn has_file(&self, name: &str) -> bool {
        self.files.iter().any(|f| f == name)
    }

    /// `memory 64-bit prefetchable`, as lspci words it.
    pub fn describe(&self) -> String {
        match self.kind {
            BarKind::Io => "I/O ports".to_string(),
            BarKind::Memory => format!(
                "memory {} {}",
                if self.is_64bit { "64-bit" } else { "32-bit" },
                if self.prefetchable { "prefetchable" } else { "non-prefetchable" }
            ),
        }
    }
}

/// Parse the BAR lines of a `resource` file. Unparseable lines produce a warning and are skipped.
pub fn parse_resource(text: &str, warnings: &mut Vec<String>) -> Vec<Bar> {
    let mut bars = Vec::new();
    for (i, line) in text.lines().enumerate().take(6) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let nums: Option<Vec<u64>> =
            fields.iter().map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()).collect();
        let (start, end, flags) = match nums.as_deref() {
            Some([s, e, f]) => (*s, *e, *f),
            _ => {
                warnings.push(format!("resource line {i} is not `start end flags` in hex: {line:?}"));
                continue;
            }
        };
        if flags & (IORESOURCE_IO | IORESOURCE_MEM) == 0 || end < start || (start == 0 && end == 0) {
            continue;
        }
        // A region ending at the top of the address space from 0 would be 2^64 bytes: impossible.
        let Some(size) = end.checked_sub(start).and_then(|d| d.checked_add(1)) else {
            warnings.push(format!("resource line {i} spans {start:#x}-{end:#x}, an impossible BAR: skipped"));
            continue;
        };
        if flags & (IORESOURCE_DISABLED | IORESOURCE_UNSET) != 0 {
            warnings.push(format!("BAR{i} is not assigned an address by the kernel (flags {flags:#x})"));
        }
        let kind = if flags & IORESOURCE_IO != 0 { BarKind::Io } else { BarKind::Memory };
        bars.push(Bar {
            index: i as u8,
            start,
            size,
            kind,
            is_64bit: kind == BarKind::Memory && flags & IORESOURCE_MEM_64 != 0,
            prefetchable: kind == BarKind::Memory && flags & IORESOURCE_PREFETCH != 0,
            flags,
            files: Vec::new(),
        });
    }
    bars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seed_000_card() {
        let text = "0x0000387f80000000 0x0000387f800fffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000387f80100000 0x0000387f8011ffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
        let mut w = vec![];
        let bars = parse_resource(text, &mut w);
        assert!(w.is_empty());
        assert_eq!(bars.len(), 2);
        assert_eq!(bars[1].index, 2);
        assert_eq!(bars[1].start, 0x387f80100000);
        assert_eq!(bars[1].size, 0x20000);
        assert!(bars[1].is_64bit && bars[1].prefetchable);
        assert_eq!(bars[1].describe(), "memory 64-bit prefetchable");
    }

    #[test]
    fn impossible_sizes_are_caught_not_wrapped() {
        let mut w = vec![];
        let bars = parse_resource("0x0000000000000000 0xffffffffffffffff 0x40200\n", &mut w);
        assert!(bars.is_empty());
        assert!(w[0].contains("impossible BAR"), "{w:?}");
    }

    #[test]
    fn garbage_lines_warn() {
        let mut w = vec![];
        let bars = parse_resource("hello world\n0x1000 0x10ff 0x40101\n", &mut w);
        assert_eq!(w.len(), 1);
        assert_eq!(bars.len(), 1);
        assert_eq!(bars[0].kind, BarKind::Io);
        assert_eq!(bars[0].size, 0x100);
        assert_eq!(bars[0].describe(), "I/O ports");
    }
}
