//! `/proc/iomem`: the kernel's map of physical address space (kernel/resource.c prints one
//! resource a line, `START-END : NAME`, indented two spaces per level of nesting). pcibench
//! reads it to hand out memory reserved on the kernel command line (`memmap=SIZE$START`, shown
//! as a top-level "Reserved" range) as DMA buffers, refusing anything the kernel or a driver uses.
//!
//! Only root sees the addresses: for anyone else the kernel prints every range as zeros
//! (kernel/resource.c r_show, since 4.15 gated on CAP_SYS_ADMIN).

use super::Host;
use crate::units::human_size;
use crate::{Error, Result};

/// One line of /proc/iomem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub start: u64,
    /// Inclusive, as the kernel prints it.
    pub end: u64,
    pub name: String,
    /// 0 for a top-level range.
    pub depth: usize,
}

impl Resource {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start <= end && start <= self.end
    }
    fn is_reserved(&self) -> bool {
        self.name.eq_ignore_ascii_case("reserved")
    }
}

/// Parse /proc/iomem's text; lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<Resource> {
    text.lines()
        .filter_map(|line| {
            let indent = line.len() - line.trim_start().len();
            let (range, name) = line.trim_start().split_once(" : ")?;
            let (s, e) = range.split_once('-')?;
            let start = u64::from_str_radix(s.trim(), 16).ok()?;
            let end = u64::from_str_radix(e.trim(), 16).ok()?;
            Some(Resource { start, end, name: name.trim().to_string(), depth: indent / 2 })
        })
        .collect()
}

/// /proc/iomem of `host`.
pub fn read(host: &Host) -> Result<Vec<Resource>> {
    let p = host.path("/proc/iomem");
    let text =
        crate::file::read_string(&p, crate::file::read::KERNEL_MAX).map_err(|e| Error::io("cannot read", &p, e))?;
    Ok(parse(&text))
}

/// The kernel command-line option that reserves `[start, start+size)`: memmap=SIZE$START.
pub fn memmap_option(start: u64, size: u64) -> String {
    format!("memmap={}${start:#x}", short_size(size))
}

/// A size as memmap= and --buffer take it: 2G, 2050M, 4K, or bytes.
pub fn short_size(size: u64) -> String {
    if size % (1 << 30) == 0 {
        format!("{}G", size >> 30)
    } else if size % (1 << 20) == 0 {
        format!("{}M", size >> 20)
    } else if size % (1 << 10) == 0 {
        format!("{}K", size >> 10)
    } else {
        size.to_string()
    }
}

fn reserve_hint(start: u64, size: u64) -> String {
    let opt = memmap_option(start, size);
    format!(
        "reserve it on the kernel command line with {opt} (in /etc/default/grub write the $ as \\$, then update-grub) and reboot; \
         /proc/iomem then lists it as Reserved"
    )
}

/// Below this, physical memory belongs to the firmware and early boot (BIOS data area, the
/// real-mode trampoline, VGA and option ROMs): never a DMA buffer.
pub const FIRST_MIB: u64 = 1 << 20;

/// The kernel command-line option that reserves all of `[start, start+size)`, if one does:
/// `memmap=SIZE$START` (Documentation/admin-guide/kernel-parameters.txt; comma-separated lists
/// allowed, `$` marks it reserved: E820_TYPE_RESERVED) or `reserve=START,SIZE[,START,SIZE...]`
/// (kernel/resource.c, reserve_setup). Other memmap= forms (`@` usable, `#` ACPI, `!` pmem) do not count.
pub fn cmdline_reservation(cmdline: &str, start: u64, size: u64) -> Option<String> {
    let end = start.checked_add(size)?;
    let covers = |s: u64, len: u64| s <= start && s.checked_add(len).is_some_and(|e| end <= e);
    let num = |t: &str| crate::units::parse_size(t.trim()).ok();
    for word in cmdline.split_whitespace() {
        if let Some(v) = word.strip_prefix("memmap=") {
            for item in v.split(',') {
                if let Some((len, at)) = item.split_once('$') {
                    if let (Some(len), Some(at)) = (num(len), num(at)) {
                        if covers(at, len) {
                            return Some(word.to_string());
                        }
                    }
                }
            }
        } else if let Some(v) = word.strip_prefix("reserve=") {
            let n: Vec<Option<u64>> = v.split(',').map(num).collect();
            for pair in n.chunks(2) {
                if let [Some(at), Some(len)] = pair {
                    if covers(*at, *len) {
                        return Some(word.to_string());
                    }
                }
            }
        }
    }
    None
}

/// The refusal for a Reserved range no command-line option reserved.
pub fn not_on_cmdline(start: u64, size: u64) -> Error {
    let end = start + size - 1;
    Error::Refused(format!(
        "{start:#x}-{end:#x} ({}) is Reserved in /proc/iomem, but no memmap=/reserve= on the kernel command line \
         reserved it: firmware marks ranges Reserved for its own use (ACPI, SMM, the MMIO hole), so pcibench will not \
         give it to a device; {}; or pass --force to use it anyway",
        human_size(size),
        reserve_hint(start, size)
    ))
}

/// Check that `[start, start+size)` is memory the kernel was told to leave alone: inside one
/// top-level "Reserved" range, no part of it System RAM, nothing inside it claimed. The error
/// says what the range is instead and which option would reserve it.
pub fn check_reserved(map: &[Resource], start: u64, size: u64) -> Result<()> {
    let end = start + size - 1;
    let range = format!("{start:#x}-{end:#x} ({})", human_size(size));
    if !map.is_empty() && map.iter().all(|r| r.start == 0 && r.end == 0) {
        return Err(Error::Refused(
            "/proc/iomem shows every range as 0 here: the kernel shows addresses only to root (CAP_SYS_ADMIN); \
             run as root to use --buffer reserved"
                .into(),
        ));
    }
    let top: Vec<&Resource> = map.iter().filter(|r| r.depth == 0 && r.overlaps(start, end)).collect();
    if let Some(ram) = top.iter().find(|r| r.name == "System RAM") {
        return Err(Error::Refused(format!(
            "{range} is System RAM ({:#x}-{:#x} in /proc/iomem): the kernel allocates from it, so a device must not be \
             given it; choose memory the kernel leaves alone: {}",
            ram.start,
            ram.end,
            reserve_hint(start, size)
        )));
    }
    let Some(res) = top.iter().find(|r| r.is_reserved() && r.start <= start && end <= r.end) else {
        let what = if top.is_empty() {
            "in no /proc/iomem range".to_string()
        } else {
            let names: Vec<String> = top.iter().map(|r| format!("{} {:#x}-{:#x}", r.name, r.start, r.end)).collect();
            format!("not inside one Reserved range (it overlaps {})", names.join(", "))
        };
        return Err(Error::Refused(format!("{range} is {what}: {}", reserve_hint(start, size))));
    };
    let pos = map.iter().position(|r| std::ptr::eq(r, *res)).unwrap_or(0);
    let claimed: Vec<String> = map[pos + 1..]
        .iter()
        .take_while(|r| r.depth > 0)
        .filter(|r| r.overlaps(start, end))
        .map(|r| format!("{} ({:#x}-{:#x})", r.name, r.start, r.end))
        .collect();
    if !claimed.is_empty() {
        return Err(Error::Refused(format!(
            "{range} is reserved but claimed inside: {}; choose a part of the Reserved range {:#x}-{:#x} nothing claims",
            claimed.join(", "),
            res.start,
            res.end
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const IOMEM: &str = "\
00000000-00000fff : Reserved
00001000-0009fbff : System RAM
000f0000-000fffff : Reserved
  000f0000-000fffff : System ROM
00100000-0fffffff : System RAM
  01000000-01e02fff : Kernel code
10000000-13ffffff : Reserved
14000000-1ffdffff : System RAM
fea00000-feafffff : 0000:00:02.0
";

    #[test]
    fn parses_nesting_and_names() {
        let m = parse(IOMEM);
        assert_eq!(m.len(), 9);
        assert_eq!(m[3], Resource { start: 0xf0000, end: 0xfffff, name: "System ROM".into(), depth: 1 });
        assert_eq!(m[6].name, "Reserved");
    }

    #[test]
    fn accepts_a_memmap_reservation_and_refuses_the_rest() {
        let m = parse(IOMEM);
        check_reserved(&m, 0x1000_0000, 64 << 20).unwrap();
        check_reserved(&m, 0x1200_0000, 4096).unwrap();
        let e = check_reserved(&m, 0x0800_0000, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("is System RAM") && e.contains("memmap=1M$0x8000000"), "{e}");
        let e = check_reserved(&m, 0x13ff_f000, 8192).unwrap_err().to_string();
        assert!(e.contains("System RAM"), "straddles into RAM: {e}");
        let e = check_reserved(&m, 0x2000_0000, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("in no /proc/iomem range") && e.contains("memmap=1M$0x20000000"), "{e}");
        let e = check_reserved(&m, 0xfea0_0000, 4096).unwrap_err().to_string();
        assert!(e.contains("not inside one Reserved range") && e.contains("0000:00:02.0"), "{e}");
        let e = check_reserved(&m, 0xf0000, 4096).unwrap_err().to_string();
        assert!(e.contains("claimed inside: System ROM"), "{e}");
        let zeros = parse("00000000-00000000 : Reserved\n00000000-00000000 : System RAM\n");
        let e = check_reserved(&zeros, 0x1000_0000, 4096).unwrap_err().to_string();
        assert!(e.contains("only to root"), "{e}");
    }

    #[test]
    fn command_line_reservations() {
        let c = "ro memmap=64M$0x10000000,1G$4G memmap=4K@0x1000 reserve=0x20000000,0x100000";
        assert_eq!(cmdline_reservation(c, 0x1000_0000, 64 << 20).as_deref(), Some("memmap=64M$0x10000000,1G$4G"));
        assert!(cmdline_reservation(c, 0x1_0000_0000 + 4096, 4096).is_some());
        assert!(cmdline_reservation(c, 0x2000_0000, 4096).is_some());
        assert_eq!(cmdline_reservation(c, 0x1000, 4096), None, "@ is usable memory, not reserved");
        assert_eq!(cmdline_reservation(c, 0x13ff_f000, 8192), None, "runs past the reservation");
        assert_eq!(cmdline_reservation("ro quiet", 0x1000_0000, 4096), None);
    }

    #[test]
    fn memmap_option_names_the_size_in_the_largest_unit() {
        assert_eq!(memmap_option(0x1_0000_0000, 2050 << 20), "memmap=2050M$0x100000000");
        assert_eq!(memmap_option(0x1000_0000, 1 << 30), "memmap=1G$0x10000000");
        assert_eq!(memmap_option(0x1000, 4096), "memmap=4K$0x1000");
    }
}
