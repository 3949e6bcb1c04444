//! Link health: snapshots of the device and every port up to the root complex (AER counters,
//! current link speed and width, the Device Status error bits and Link Status LBMS from config
//! space where readable), and what changed between two of them, in words. The counters are the
//! truth: kernel logs are rate-limited (10 per 5 s per device in recent kernels) while the
//! counters keep counting, so logs are never parsed.

use super::PciAddress;
use crate::host::Host;
use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

// PCI Express capability registers (PCIe Base 4.0 §7.5.3): Device Status at +0x0A, Link Status
// at +0x12. DevSta bits 0-3: correctable, non-fatal, fatal error detected, unsupported request.
// LnkSta bit 14: Link Bandwidth Management Status (a retrain or a speed/width change the port
// made on its own); bit 15: Link Autonomous Bandwidth Status.
const DEVSTA: u64 = 0x0a;
const LNKSTA: u64 = 0x12;
const DEVSTA_ERRORS: u16 = 0x000f;
pub const LNKSTA_LBMS: u16 = 1 << 14;
pub const LNKSTA_LABS: u16 = 1 << 15;
/// Device Status bits 0-3 as lspci -vvv names them, with the level a newly set one has.
pub const DEVSTA_BITS: [(u16, &str, &str, Level); 4] = [
    (1 << 0, "CorrErr", "a correctable error", Level::Warning),
    (1 << 1, "NonFatalErr", "a non-fatal error", Level::Failure),
    (1 << 2, "FatalErr", "a fatal error", Level::Failure),
    (1 << 3, "UnsupReq", "an unsupported request", Level::Warning),
];
/// Link Status bits 14-15 as lspci -vvv names them.
pub const LNKSTA_BITS: [(u16, &str); 2] = [(LNKSTA_LBMS, "BWMgmt"), (LNKSTA_LABS, "ABWMgmt")];

/// How much a change (or a finding of `pcibench health`) matters: a warning (a degraded link,
/// correctable errors, a retrain) or a failure (non-fatal or fatal errors, a link that went down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Warning,
    Failure,
}

impl Level {
    /// `WARN` or `FAIL`, as doctor marks its checks.
    pub fn tag(self) -> &'static str {
        match self {
            Level::Warning => "WARN",
            Level::Failure => "FAIL",
        }
    }
}

/// One change between two snapshots, with the function it happened on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub address: String,
    pub level: Level,
    /// In words: `2 non-fatal errors (2 CmpltAbrt) on 0000:00:01.0`.
    pub what: String,
}

/// One function's state at one moment (also what `pcibench health --state` keeps between runs).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FunctionState {
    pub addr: String,
    /// `severity:name` and count, as `aer::read_all` reads them.
    pub aer: Vec<(String, u64)>,
    /// sysfs `current_link_speed` and `current_link_width` as written.
    pub speed: Option<String>,
    pub width: Option<String>,
    /// Device Status and Link Status; None where config space is not readable that far.
    pub devsta: Option<u16>,
    pub lnksta: Option<u16>,
    /// The Command register (within the 64 bytes any reader may read); None where unread (state
    /// files written before it was kept).
    #[serde(default)]
    pub command: Option<u16>,
}

impl FunctionState {
    /// The function whose sysfs directory is `dir`, with Device and Link Status taken from
    /// `config` (the bytes this reader could read; unprivileged readers get 64, too few).
    pub fn read(addr: &str, dir: &std::path::Path, config: &[u8]) -> FunctionState {
        let mut ignored = Vec::new();
        let reg = |off: u64| -> Option<u16> {
            let at = (pcie_cap(config)? + off) as usize;
            Some(u16::from_le_bytes(config.get(at..at + 2)?.try_into().ok()?))
        };
        FunctionState {
            addr: addr.to_string(),
            aer: super::aer::read_all(dir, &mut ignored),
            speed: read(dir.join("current_link_speed")),
            width: read(dir.join("current_link_width")),
            devsta: reg(DEVSTA),
            lnksta: reg(LNKSTA),
            command: config.get(4..6).map(|b| u16::from_le_bytes([b[0], b[1]])),
        }
    }

    /// Whether the link is up: Some(false) for width 0 or an unknown speed (the kernel writes
    /// `Unknown` when Link Status reads no valid speed), None when nothing says.
    pub fn link_up(&self) -> Option<bool> {
        let width = self.width.as_deref().and_then(|w| w.parse::<u32>().ok());
        let speed_known = self.speed.as_deref().map(|s| super::link::gen_from_speed(s).is_some());
        match (width, speed_known) {
            (None, None) => None,
            (Some(0), _) | (_, Some(false)) => Some(false),
            _ => Some(true),
        }
    }

    /// `8.0 GT/s PCIe x8`, with `?` for what is unknown.
    pub fn link_words(&self) -> String {
        format!("{} x{}", self.speed.as_deref().unwrap_or("?"), self.width.as_deref().unwrap_or("?"))
    }
}

/// The device and its ports up to the root, at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub functions: Vec<FunctionState>,
}

/// What to snapshot: a device and the bridges above it, with each one's PCIe capability offset
/// (where config space shows one) for the status registers.
#[derive(Debug, Clone)]
pub struct HealthProbe {
    chain: Vec<(String, PathBuf, Option<u64>)>,
    /// The device's Memory Space Enable when the probe was made (clearing it later makes the
    /// card stop answering its BARs).
    memory_on: bool,
}

/// PCI_COMMAND bit 1, Memory Space Enable (PCI Local Bus 3.0 §6.2.2).
const COMMAND_MEMORY: u16 = 1 << 1;

/// The device's vendor id and command register from its sysfs config file (the first 64
/// bytes are readable by every user).
fn id_and_command(dir: &std::path::Path) -> Option<(u16, u16)> {
    let f = crate::file::open_regular(&dir.join("config")).ok()?;
    let mut b = [0u8; 6];
    (f.read_at(&mut b, 0).ok()? == 6).then(|| (u16::from_le_bytes([b[0], b[1]]), u16::from_le_bytes([b[4], b[5]])))
}

fn read(p: PathBuf) -> Option<String> {
    crate::file::read_trim(&p)
}

/// The offset of the PCI Express capability (id 0x10) in `config`, walking the list with a bound.
fn pcie_cap(config: &[u8]) -> Option<u64> {
    let mut at = *config.get(0x34)? as usize & !3;
    for _ in 0..48 {
        if at < 0x40 || at + 2 > config.len() {
            return None;
        }
        if config[at] == 0x10 {
            return Some(at as u64);
        }
        at = config[at + 1] as usize & !3;
    }
    None
}

impl HealthProbe {
    /// The chain for `addr`: the device, then each bridge above it in sysfs (its path under
    /// /sys/devices names every port on the way: pci0000:00/0000:00:1c.0/0000:03:00.0).
    pub fn new(host: &Host, addr: &PciAddress) -> HealthProbe {
        let dir = host.pci_devices_dir().join(addr.to_string());
        let real = fs::canonicalize(&dir).unwrap_or(dir);
        let mut chain = Vec::new();
        for d in real.ancestors().take(32) {
            let Some(name) = d.file_name().and_then(|n| n.to_str()) else { break };
            if name.parse::<PciAddress>().is_err() {
                break;
            }
            let cap = crate::file::read(&d.join("config"), 4096).ok().and_then(|c| pcie_cap(&c));
            chain.push((name.to_string(), d.to_path_buf(), cap));
        }
        let memory_on =
            chain.first().and_then(|(_, d, _)| id_and_command(d)).is_some_and(|(_, c)| c & COMMAND_MEMORY != 0);
        HealthProbe { chain, memory_on }
    }

    /// Why the device no longer answers, or None while it does: its config space reads the
    /// all-ones vendor id no function has (surprise removal, link down, a reset in progress), or
    /// its Memory Space Enable was cleared since the probe was made (a reset, or someone else's
    /// setpci), so its BARs answer nothing.
    pub fn not_answering(&self) -> Option<String> {
        let (_, dir, _) = self.chain.first()?;
        let (vendor, command) = id_and_command(dir)?;
        if vendor == 0xffff {
            return Some("its config space reads vendor id 0xffff".into());
        }
        (self.memory_on && command & COMMAND_MEMORY == 0)
            .then(|| format!("its Memory Space Enable was cleared (command register {command:#06x})"))
    }

    /// The one line for a device that stopped answering (`what`: what read all-ones): the
    /// upstream port's link and AER counters as read now, and what to run.
    pub fn gone_line(&self, what: &str) -> String {
        let snap = self.snapshot();
        let device = snap.functions.first().map_or("the device", |f| f.addr.as_str());
        gone_line(device, what, snap.functions.get(1))
    }

    /// The functions watched, device first.
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.chain.iter().map(|(a, _, _)| a.as_str())
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut functions = Vec::with_capacity(self.chain.len());
        for (addr, dir, cap) in &self.chain {
            let mut ignored = Vec::new();
            let reg = |off: u64| -> Option<u16> {
                let f = crate::file::open_regular(&dir.join("config")).ok()?;
                let mut b = [0u8; 2];
                // Short reads (an unprivileged reader sees 64 bytes) mean "not readable".
                (f.read_at(&mut b, (*cap)? + off).ok()? == 2).then(|| u16::from_le_bytes(b))
            };
            functions.push(FunctionState {
                addr: addr.clone(),
                aer: super::aer::read_all(dir, &mut ignored),
                speed: read(dir.join("current_link_speed")),
                width: read(dir.join("current_link_width")),
                devsta: reg(DEVSTA),
                lnksta: reg(LNKSTA),
                command: id_and_command(dir).map(|(_, command)| command),
            });
        }
        Snapshot { functions }
    }
}

/// The card no longer answers: `what` read all-ones on `device`; the port above it (`port`,
/// where there is one) as it reads now; what to run.
pub fn gone_line(device: &str, what: &str, port: Option<&FunctionState>) -> String {
    let port = match port {
        None => "no upstream port to read".to_string(),
        Some(p) => {
            let link = match p.link_up() {
                Some(false) => format!("link down ({})", p.link_words()),
                Some(true) => format!("link up at {}", p.link_words()),
                None => "link state unknown".to_string(),
            };
            // Each severity's total (its TOTAL_ERR_* line where the kernel writes one).
            let sums: Vec<(&str, u64)> = ["correctable", "nonfatal", "fatal"]
                .into_iter()
                .filter_map(|sev| {
                    let entries: Vec<(String, u64)> = p
                        .aer
                        .iter()
                        .filter_map(|(k, v)| k.strip_prefix(sev)?.strip_prefix(':').map(|n| (n.to_string(), *v)))
                        .collect();
                    (!entries.is_empty()).then(|| super::aer::total(&entries).map(|t| (sev, t))).flatten()
                })
                .collect();
            let aer = if sums.is_empty() {
                "no AER counters".to_string()
            } else {
                let list: Vec<String> = sums.iter().map(|(s, n)| format!("{s} {n}")).collect();
                format!("AER {}", list.join(", "))
            };
            format!("upstream port {}: {link}, {aer}", p.addr)
        }
    };
    format!(
        "{device} no longer answers (surprise removal, link down, or a reset): {what}; {port}; run `pcibench health {device}`"
    )
}

/// What changed from `before` to `after`, one sentence per change; empty when nothing did.
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    diff(&before.functions, &after.functions).into_iter().map(|c| c.what).collect()
}

/// What changed from `before` to `after`, per function present in both, with how much it
/// matters: errors that grew (non-fatal and fatal: failures; correctable: warnings), links that
/// retrained or came up at another speed or width (warnings) or went down (failures), Device
/// Status error bits and Link Status LBMS/LABS that became set.
pub fn diff(before: &[FunctionState], after: &[FunctionState]) -> Vec<Change> {
    let mut out = Vec::new();
    let by_addr: std::collections::HashMap<&str, &FunctionState> = after.iter().map(|a| (a.addr.as_str(), a)).collect();
    for b in before {
        let Some(a) = by_addr.get(b.addr.as_str()) else { continue };
        let mut push = |level: Level, what: String| out.push(Change { address: a.addr.clone(), level, what });
        aer_changes(b, a, &mut push);
        if (&b.speed, &b.width) != (&a.speed, &a.width) {
            let (was, now) = (b.link_words(), a.link_words());
            match (b.link_up(), a.link_up()) {
                (Some(true), Some(false)) => push(Level::Failure, format!("link of {} went down (was {was})", a.addr)),
                _ => push(Level::Warning, format!("link of {} retrained from {was} to {now}", a.addr)),
            }
        }
        if let (Some(x), Some(y)) = (b.devsta, a.devsta) {
            let new = y & !x & DEVSTA_ERRORS;
            for (bit, _, words, level) in DEVSTA_BITS {
                if new & bit != 0 {
                    push(level, format!("{} reported {words} (Device Status)", a.addr));
                }
            }
        }
        // Memory Space Enable cleared: the function's BARs stop answering (a reset puts the
        // register to 0, PCIe Base 6.0 §7.5.1.1.3; or another process wrote it). All-ones is
        // no reading (a function that does not answer, said by the link and header checks).
        if let (Some(x), Some(y)) = (b.command, a.command) {
            if x != 0xffff && y != 0xffff && x & COMMAND_MEMORY != 0 && y & COMMAND_MEMORY == 0 {
                push(
                    Level::Failure,
                    format!(
                        "Memory Space Enable of {} was cleared (command register {x:#06x} to {y:#06x}): its BARs do not answer (a reset, or another process cleared it)",
                        a.addr
                    ),
                );
            }
        }
        if let (Some(x), Some(y)) = (b.lnksta, a.lnksta) {
            if y & !x & (LNKSTA_LBMS | LNKSTA_LABS) != 0 {
                push(
                    Level::Warning,
                    format!("{} changed its link bandwidth on its own (Link Status LBMS/LABS)", a.addr),
                );
            }
        }
    }
    out
}

fn aer_changes(b: &FunctionState, a: &FunctionState, push: &mut impl FnMut(Level, String)) {
    if a.aer == b.aer {
        return;
    }
    let was: std::collections::HashMap<&str, u64> = b.aer.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let now: std::collections::HashMap<&str, u64> = a.aer.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    // Per severity: the increase of the named counters, else of the totals.
    for sev in ["correctable", "nonfatal", "fatal"] {
        let grew = |key: &str| now.get(key).copied().unwrap_or(0).saturating_sub(was.get(key).copied().unwrap_or(0));
        let prefix = format!("{sev}:");
        let mut named: Vec<(String, u64)> = a
            .aer
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix) && !k.contains("TOTAL_ERR"))
            .map(|(k, _)| (k[prefix.len()..].to_string(), grew(k)))
            .filter(|(_, d)| *d > 0)
            .collect();
        let total: u64 = named.iter().map(|e| e.1).sum();
        let rootport = grew(&format!("rootport:{sev}"));
        let kind = match sev {
            "nonfatal" => "non-fatal",
            other => other,
        };
        let level = if sev == "correctable" { Level::Warning } else { Level::Failure };
        if total > 0 {
            named.sort();
            let list: Vec<String> = named.iter().map(|(n, d)| format!("{d} {n}")).collect();
            push(
                level,
                format!(
                    "{total} {kind} error{} ({}) on {}",
                    if total == 1 { "" } else { "s" },
                    list.join(", "),
                    a.addr
                ),
            );
        } else if rootport > 0 {
            push(
                level,
                format!(
                    "{rootport} {kind} error{} reported to root port {}",
                    if rootport == 1 { "" } else { "s" },
                    a.addr
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Host, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        let port = h.path("/sys/devices/pci0000:00/0000:00:1c.0");
        let dev = port.join("0000:03:00.0");
        fs::create_dir_all(&dev).unwrap();
        fs::create_dir_all(h.pci_devices_dir()).unwrap();
        std::os::unix::fs::symlink(&dev, h.pci_devices_dir().join("0000:03:00.0")).unwrap();
        for d in [&port, &dev] {
            fs::write(d.join("current_link_speed"), "8.0 GT/s PCIe\n").unwrap();
            fs::write(d.join("current_link_width"), "8\n").unwrap();
        }
        // Long names on the port (kernel 6.x), short on the device.
        fs::write(port.join("aer_dev_correctable"), "RxErr 0\nBadTLP 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 0\n")
            .unwrap();
        fs::write(port.join("aer_rootport_total_err_cor"), "0\n").unwrap();
        fs::write(dev.join("aer_dev_correctable"), "RxErr 0\nBadTLP 0\n").unwrap();
        // Config space: status pointer at 0x34 -> PCIe capability at 0x40.
        let mut cfg = vec![0u8; 256];
        cfg[0x34] = 0x40;
        cfg[0x40] = 0x10;
        for d in [&port, &dev] {
            fs::write(d.join("config"), &cfg).unwrap();
        }
        (t, h, port, dev)
    }

    /// A device whose Memory Space Enable is cleared, or whose config space reads all-ones, no
    /// longer answers; the line names the upstream port's link and AER counters and `health`.
    #[test]
    fn a_device_that_stops_answering_is_named_with_its_upstream_port() {
        let (_t, h, port, dev) = tree();
        let mut cfg = fs::read(dev.join("config")).unwrap();
        cfg[..2].copy_from_slice(&0x10eeu16.to_le_bytes());
        cfg[4] = 0x06; // memory space and bus master on
        fs::write(dev.join("config"), &cfg).unwrap();
        let p = HealthProbe::new(&h, &"03:00.0".parse().unwrap());
        assert_eq!(p.not_answering(), None);
        cfg[4] = 0x04; // someone cleared Memory Space Enable (setpci COMMAND=0x04)
        fs::write(dev.join("config"), &cfg).unwrap();
        assert_eq!(p.not_answering().unwrap(), "its Memory Space Enable was cleared (command register 0x0004)");
        fs::write(dev.join("config"), vec![0xffu8; 256]).unwrap();
        fs::write(port.join("current_link_width"), "0\n").unwrap();
        fs::write(port.join("aer_dev_correctable"), "RxErr 3\nBadTLP 0\n").unwrap();
        let why = p.not_answering().unwrap();
        assert_eq!(why, "its config space reads vendor id 0xffff");
        assert_eq!(
            p.gone_line(&why),
            "0000:03:00.0 no longer answers (surprise removal, link down, or a reset): its config space reads vendor id \
             0xffff; upstream port 0000:00:1c.0: link down (8.0 GT/s PCIe x0), AER correctable 3; run `pcibench health 0000:03:00.0`"
        );
    }

    #[test]
    fn the_chain_reaches_the_root_port_and_sees_nothing_change_at_rest() {
        let (_t, h, _, _) = tree();
        let p = HealthProbe::new(&h, &"03:00.0".parse().unwrap());
        assert_eq!(p.functions().collect::<Vec<_>>(), vec!["0000:03:00.0", "0000:00:1c.0"]);
        let a = p.snapshot();
        assert_eq!(a.functions[0].devsta, Some(0));
        assert!(changes(&a, &p.snapshot()).is_empty());
    }

    #[test]
    fn errors_retrains_and_status_bits_are_named() {
        let (_t, h, port, dev) = tree();
        let p = HealthProbe::new(&h, &"03:00.0".parse().unwrap());
        let before = p.snapshot();
        fs::write(port.join("aer_dev_correctable"), "RxErr 0\nBadTLP 2\nHeader Log Overflow 0\nTOTAL_ERR_COR 2\n")
            .unwrap();
        fs::write(port.join("aer_rootport_total_err_cor"), "2\n").unwrap();
        fs::write(dev.join("current_link_width"), "4\n").unwrap();
        let mut cfg = fs::read(dev.join("config")).unwrap();
        cfg[0x40 + 0x0a] = 0x01; // DevSta: correctable error detected
        cfg[0x40 + 0x13] = 0x40; // LnkSta bit 14: LBMS
        fs::write(dev.join("config"), &cfg).unwrap();
        let c = changes(&before, &p.snapshot());
        assert_eq!(
            c,
            vec![
                "link of 0000:03:00.0 retrained from 8.0 GT/s PCIe x8 to 8.0 GT/s PCIe x4",
                "0000:03:00.0 reported a correctable error (Device Status)",
                "0000:03:00.0 changed its link bandwidth on its own (Link Status LBMS/LABS)",
                "2 correctable errors (2 BadTLP) on 0000:00:1c.0",
            ]
        );
    }

    #[test]
    fn dangling_and_odd_trees_give_an_empty_watch_not_a_hang() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        fs::create_dir_all(h.pci_devices_dir()).unwrap();
        std::os::unix::fs::symlink("/nonexistent/0000:09:00.0", h.pci_devices_dir().join("0000:09:00.0")).unwrap();
        let p = HealthProbe::new(&h, &"09:00.0".parse().unwrap());
        assert!(changes(&p.snapshot(), &p.snapshot()).is_empty());
        // A capability list that loops is cut short.
        let mut cfg = vec![0u8; 256];
        cfg[0x34] = 0x40;
        cfg[0x40] = 0x01;
        cfg[0x41] = 0x40;
        assert_eq!(pcie_cap(&cfg), None);
    }
}
