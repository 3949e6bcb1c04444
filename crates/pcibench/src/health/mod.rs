//! `pcibench health`: every PCIe link's state, read-only, for hosts whose devices are in use.
//!
//! It reads sysfs and as much config space as the caller may read (64 bytes unprivileged, where
//! the status registers are out of reach: said, never guessed); it never opens a BAR, binds a
//! driver or writes anything to a device, so it is safe on the disks and NICs the host runs on.
//! Per function: the link against what both ends support (`pci::partner`, lspci's rule, naming
//! the end that limits it), the AER counters by name (`pci::aer`), Device Status error bits and
//! Link Status LBMS/LABS (`pci::health`). With the previous run's state (`state`), what changed
//! since (`pci::health::diff`): counters that grew, links that retrained, came up at another speed
//! or width or went down, functions that are gone.
//!
//! Verdicts, the command's exit status: a failure (2) is a link down, a function that does not
//! answer config reads or is gone, non-fatal or fatal errors that grew (or, with no previous run to
//! compare, that the kernel counted since boot: a warning then); a warning (1) is a degraded link,
//! correctable errors that grew, a retrain or a newly set Device Status bit.

pub mod state;

use crate::host::Host;
pub use crate::pci::health::{Change, Level};
use crate::pci::health::{FunctionState, HealthProbe, DEVSTA_BITS, LNKSTA_BITS};
use crate::pci::link::gen_gts;
use crate::pci::sysfs::{self, Detail};
use crate::pci::{DeviceInfo, PciAddress};
use crate::{Error, Result};
use serde::Serialize;

/// The whole answer: every function checked, what changed since the previous run, the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    /// `healthy`, `warning` or `failure`: the worst finding or change.
    pub status: Status,
    /// When it was read (RFC 3339, UTC), and as seconds since the epoch.
    pub time: String,
    pub timestamp: u64,
    pub functions: Vec<FunctionHealth>,
    /// Functions with no PCIe link and no AER counters (host bridges, conventional PCI), not
    /// shown unless named.
    pub without_link: usize,
    /// What changed since the previous run (`--state`); None without one (no `--state`, or its
    /// first run).
    pub changes: Option<Vec<Change>>,
    /// When the previous run was, if there was one.
    pub previous_time: Option<String>,
    /// Entries that could not be read (a device being removed), one line each.
    pub warnings: Vec<String>,
    /// What `--state` keeps for the next run.
    #[serde(skip)]
    pub states: Vec<FunctionState>,
}

/// The verdict: health's exit status is its `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Healthy,
    Warning,
    Failure,
}

impl Status {
    /// 0 healthy, 1 warnings, 2 failures (README "Exit status"; 3: health could not check).
    pub fn code(self) -> u8 {
        match self {
            Status::Healthy => 0,
            Status::Warning => 1,
            Status::Failure => 2,
        }
    }

    fn of(level: Level) -> Status {
        match level {
            Level::Warning => Status::Warning,
            Level::Failure => Status::Failure,
        }
    }
}

/// health's exit status when it could not check at all (bad usage, sysfs unreadable, the state
/// or output file unwritable): not 1 or 2, which say what it found (Nagios plugins' UNKNOWN).
pub const EXIT_UNKNOWN: u8 = 3;

#[derive(Debug, Clone, Serialize)]
pub struct FunctionHealth {
    pub address: String,
    /// Ids as lspci prints them (`10ee`, `7024`, `058000`).
    pub vendor_id: String,
    pub device_id: String,
    pub class_code: String,
    pub name: String,
    pub driver: Option<String>,
    /// The PCI Express port type, where config space shows it (root only).
    pub port_type: Option<String>,
    /// The physical slot it sits in, where sysfs or a port above names one (`pci::slot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<crate::pci::slot::PhysicalSlot>,
    /// Named on the command line (false: a port above a named device, or every function).
    pub named: bool,
    /// None: no PCIe link (sysfs shows no link files).
    pub link: Option<LinkHealth>,
    /// Every counter the kernel keeps (`aer_dev_*`, `aer_rootport_total_err_*`); None: none in
    /// sysfs (no AER capability, or a kernel before 4.19).
    pub aer: Option<Vec<AerCounter>>,
    /// The Device Status error bits set (`CorrErr`, `NonFatalErr`, `FatalErr`, `UnsupReq`); None:
    /// not readable (config space past 64 bytes needs root).
    pub device_status: Option<Vec<&'static str>>,
    /// Link Status `BWMgmt` (LBMS: the link retrained or changed bandwidth) and `ABWMgmt` (LABS:
    /// it did so on its own) when set; None: not readable.
    pub link_status: Option<Vec<&'static str>>,
    /// The Command register as read (within the 64 bytes any reader may read); None: not
    /// readable.
    pub command: Option<CommandRegister>,
    /// What is wrong now, worst first.
    pub findings: Vec<Finding>,
}

/// The Command register's bits that say whether a function can be used (PCI Local Bus 3.0
/// §6.2.2): Memory Space (its memory BARs answer), Bus Master (it may start DMA), Interrupt
/// Disable (it may not assert INTx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CommandRegister {
    pub value: u16,
    pub memory: bool,
    pub bus_master: bool,
    pub intx_disable: bool,
}

impl CommandRegister {
    pub fn from_raw(value: u16) -> Self {
        use crate::pci::config::{CMD_BUS_MASTER, CMD_INTX_DISABLE, CMD_MEMORY};
        CommandRegister {
            value,
            memory: value & CMD_MEMORY != 0,
            bus_master: value & CMD_BUS_MASTER != 0,
            intx_disable: value & CMD_INTX_DISABLE != 0,
        }
    }

    /// As lspci -vvv's Control line says them: `Mem+ BusMaster- DisINTx+`.
    pub fn words(&self) -> String {
        let f = |b: bool| if b { '+' } else { '-' };
        format!("Mem{} BusMaster{} DisINTx{}", f(self.memory), f(self.bus_master), f(self.intx_disable))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkHealth {
    /// As sysfs writes it (`8.0 GT/s PCIe`); None: unknown (the link is down, or an integrated
    /// endpoint with no link).
    pub current_speed: Option<String>,
    pub current_gen: Option<u8>,
    pub current_width: Option<u8>,
    /// This function's Link Capabilities.
    pub max_gen: Option<u8>,
    pub max_width: Option<u8>,
    /// What the link can train to: the lower of both ends' capabilities.
    pub limit_gen: Option<u8>,
    pub limit_width: Option<u8>,
    /// Which end sets that limit, in words (`the upstream port 0000:00:1c.0`, `both ends`).
    pub limited_by: Option<String>,
    /// The other end's address.
    pub partner: Option<String>,
    /// Trained below that limit (lspci's "downgraded").
    pub degraded: bool,
    /// Some(false): down (width 0 or no valid speed) while it has a partner.
    pub up: Option<bool>,
}

impl LinkHealth {
    /// The link's speed in GT/s, for metrics.
    pub fn speed_gts(gen: Option<u8>) -> Option<f64> {
        gen.and_then(gen_gts)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AerCounter {
    /// `correctable`, `nonfatal`, `fatal`; `rootport_correctable` etc. for a root port's totals
    /// of what its hierarchy reported.
    pub severity: String,
    /// As the kernel names it (`BadTLP`, `Header Log Overflow`, `TOTAL_ERR_COR`); `total` for the
    /// root port's totals.
    pub kind: String,
    pub count: u64,
}

impl AerCounter {
    /// A root port's total (`aer_rootport_total_err_*`), not a counter of this function's own.
    pub fn is_rootport(&self) -> bool {
        self.severity.starts_with("rootport_")
    }

    /// A TOTAL_ERR_* line (the sum of the others).
    pub fn is_total(&self) -> bool {
        self.kind.starts_with("TOTAL_ERR")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub level: Level,
    pub what: String,
}

/// Check every PCIe function (`named` empty), or the named ones and the ports above each (a
/// link's errors are often logged at the port's end). `previous`: the state of the last run.
pub fn check(host: &Host, named: &[PciAddress], previous: Option<&state::State>) -> Result<HealthReport> {
    let mut warnings = Vec::new();
    let every = named.is_empty();
    let addrs: Vec<(PciAddress, bool)> = if every {
        if !host.path("/sys/bus/pci").exists() {
            Vec::new()
        } else {
            sysfs::list_addresses(host)?.into_iter().map(|a| (a, false)).collect()
        }
    } else {
        let mut v: Vec<(PciAddress, bool)> = Vec::new();
        for a in named {
            if !sysfs::device_dir(host, a).is_dir() {
                return Err(Error::usage(format!(
                    "no PCI device {a} in {}: see `pcibench list` or lspci for the addresses",
                    host.pci_devices_dir().display()
                )));
            }
            for f in HealthProbe::new(host, a).functions() {
                if let Ok(p) = f.parse::<PciAddress>() {
                    v.push((p, p == *a));
                }
            }
        }
        // Sorted, each once (named wins over "port above").
        v.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
        v.dedup_by_key(|x| x.0);
        v
    };
    let mut functions = Vec::new();
    let mut states = Vec::new();
    let mut without_link = 0;
    let compare = previous.is_some();
    for (addr, is_named) in addrs {
        let (info, cfg) = match sysfs::read_device_with_config(host, &addr, Detail::Link) {
            Ok(x) => x,
            Err(Error::NoDevice(_)) => {
                warnings.push(format!("{addr} is listed in sysfs but its directory is gone (being removed?): skipped"));
                continue;
            }
            Err(e) => {
                warnings.push(format!("{addr}: {e}: skipped"));
                continue;
            }
        };
        let dir = sysfs::device_dir(host, &addr);
        let st = FunctionState::read(&info.address, &dir, &cfg);
        // The kernel shows the link files for PCI Express functions only (pci-sysfs.c,
        // pcie_dev_attrs_are_visible): the test that holds for every reader.
        let pcie = dir.join("current_link_speed").exists();
        if every && !pcie && st.aer.is_empty() {
            without_link += 1;
            continue;
        }
        let mut ignored = Vec::new();
        let memory_bars = sysfs::read_bars(&dir, &mut ignored).iter().any(|b| b.is_memory());
        functions.push(function(&info, &cfg, &st, pcie, is_named, compare, memory_bars));
        states.push(st);
    }
    let (changes, previous_time) = match previous {
        Some(prev) => {
            let now: std::collections::HashSet<&str> = states.iter().map(|s| s.addr.as_str()).collect();
            let in_scope = |a: &str| every || now.contains(a);
            let before: Vec<FunctionState> = prev.functions.iter().filter(|f| in_scope(&f.addr)).cloned().collect();
            let mut changes = crate::pci::health::diff(&before, &states);
            if every {
                for gone in before.iter().filter(|b| !now.contains(b.addr.as_str())) {
                    changes.push(Change {
                        address: gone.addr.clone(),
                        level: Level::Failure,
                        what: format!(
                            "{} is gone since the previous run (removed, or it fell off the bus: link down?)",
                            gone.addr
                        ),
                    });
                }
            }
            changes.sort_by(|a, b| b.level.cmp(&a.level).then(a.address.cmp(&b.address)));
            (Some(changes), Some(prev.time.clone()))
        }
        None => (None, None),
    };
    let worst = functions
        .iter()
        .flat_map(|f| f.findings.iter().map(|x| x.level))
        .chain(changes.iter().flatten().map(|c| c.level))
        .max();
    let timestamp = now_secs();
    Ok(HealthReport {
        status: worst.map_or(Status::Healthy, Status::of),
        time: crate::bench::context::rfc3339(timestamp),
        timestamp,
        functions,
        without_link,
        changes,
        previous_time,
        warnings,
        states,
    })
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// One function's health from what was read.
fn function(
    info: &DeviceInfo,
    cfg: &[u8],
    st: &FunctionState,
    pcie: bool,
    named: bool,
    compare: bool,
    memory_bars: bool,
) -> FunctionHealth {
    let mut findings = Vec::new();
    // A link that reads down has no current speed, whatever Link Status' speed field still holds.
    let down = st.link_up() == Some(false);
    // Root complex integrated endpoints and event collectors have no link: their Link registers are
    // reserved (PCIe Base 6.0 §7.5.3), whatever sysfs makes of them. Without the port type (a user's
    // 64 bytes), a function on a root bus that is no bridge and whose link reads down is one.
    let port_type = info.link.as_ref().and_then(|l| l.port_type.as_deref());
    let integrated = match port_type {
        Some(t) => t.starts_with("Root Complex"),
        None => down && info.parent.is_none() && !crate::host::state::class_is_bridge(info.class_code),
    };
    let link = info.link.as_ref().filter(|_| pcie && !integrated).map(|l| LinkHealth {
        current_speed: l.current_speed.clone().filter(|_| !down),
        current_gen: l.current_gen.filter(|_| !down),
        current_width: l.current_width.filter(|_| !down),
        max_gen: l.max_gen,
        max_width: l.max_width,
        limit_gen: l.limit_gen,
        limit_width: l.limit_width,
        limited_by: l.limited_by_words(),
        partner: l.partner.as_ref().map(|p| p.address.clone()),
        degraded: l.degraded,
        // An empty slot's port, an integrated endpoint: no partner, so no link to be down.
        up: l.partner.as_ref().and(st.link_up()),
    });
    // Config reads of a function that does not answer complete with all ones (PCIe Base 6.0
    // §2.3.2, Unsupported Request / Completion Timeout): the vendor id reads ffff.
    if cfg.len() >= 4 && cfg[..4] == [0xff; 4] {
        findings.push(Finding {
            level: Level::Failure,
            what:
                "does not answer config reads (the header reads all ones): its link is down, or it is in reset or dead"
                    .into(),
        });
    }
    // Memory Space Enable off on a function a driver (or vfio-pci) holds: its BARs do not
    // answer; a driver enables it when it binds (pci_enable_device_mem), so it was cleared since:
    // a reset (the register reads 0 after one, PCIe Base 6.0 §7.5.1.1.3) or another process.
    let command = st.command.filter(|c| *c != 0xffff).map(CommandRegister::from_raw);
    if let (Some(c), Some(_), true) = (command, &info.driver, memory_bars) {
        if !c.memory {
            findings.push(Finding {
                level: Level::Failure,
                what: format!(
                    "Memory Space is off: the BARs of {} do not answer (a reset or another process cleared it)",
                    info.address
                ),
            });
        }
    }
    if let Some(l) = &link {
        if l.up == Some(false) {
            findings.push(Finding {
                level: Level::Failure,
                what: format!(
                    "link down (speed {}, width {}) with {} at the other end",
                    st.speed.as_deref().unwrap_or("unknown"),
                    st.width.as_deref().unwrap_or("unknown"),
                    l.partner.as_deref().unwrap_or("a function")
                ),
            });
        } else if l.degraded {
            findings.push(Finding {
                level: Level::Warning,
                what: format!(
                    "link degraded: trained at {}, below the {} both ends support (limited by {})",
                    gen_width(l.current_gen, l.current_width),
                    gen_width(l.limit_gen, l.limit_width),
                    l.limited_by.as_deref().unwrap_or("?")
                ),
            });
        }
    }
    let aer = (!st.aer.is_empty()).then(|| st.aer.iter().map(counter).collect::<Vec<_>>());
    if !compare {
        // No previous run to compare: errors the kernel counted since boot are still worth a look.
        for (sev, words) in [("nonfatal", "non-fatal"), ("fatal", "fatal")] {
            let n = aer_total(&st.aer, sev);
            if n > 0 {
                findings.push(Finding {
                    level: Level::Warning,
                    what: format!(
                        "{n} {words} error{} counted since boot (keep a --state file to see when they grow)",
                        if n == 1 { "" } else { "s" }
                    ),
                });
            }
        }
    }
    findings.sort_by_key(|x| std::cmp::Reverse(x.level));
    let bits = |reg: Option<u16>, names: &[(u16, &'static str)]| {
        reg.map(|r| names.iter().filter(|(b, _)| r & b != 0).map(|(_, n)| *n).collect::<Vec<_>>())
    };
    let devsta_names: Vec<(u16, &'static str)> = DEVSTA_BITS.iter().map(|(b, n, _, _)| (*b, *n)).collect();
    FunctionHealth {
        address: info.address.clone(),
        vendor_id: format!("{:04x}", info.vendor_id),
        device_id: format!("{:04x}", info.device_id),
        class_code: format!("{:06x}", info.class_code),
        name: format!("{} {}", info.vendor_label(), info.device_label()),
        driver: info.driver.clone(),
        port_type: info.link.as_ref().and_then(|l| l.port_type.clone()),
        slot: info.physical_slot.clone(),
        named,
        link,
        aer,
        device_status: bits(st.devsta, &devsta_names),
        link_status: bits(st.lnksta, &LNKSTA_BITS),
        command,
        findings,
    }
}

/// `Gen3 x8`, `?` for what is unknown.
pub fn gen_width(gen: Option<u8>, width: Option<u8>) -> String {
    let o = |v: Option<u8>| v.map_or("?".to_string(), |v| v.to_string());
    format!("Gen{} x{}", o(gen), o(width))
}

fn counter((key, count): &(String, u64)) -> AerCounter {
    let (sev, kind) = key.split_once(':').unwrap_or(("", key));
    match sev {
        "rootport" => AerCounter { severity: format!("rootport_{kind}"), kind: "total".into(), count: *count },
        _ => AerCounter { severity: sev.into(), kind: kind.into(), count: *count },
    }
}

/// A severity's total over the function's own counters: its TOTAL_ERR_* line, else the sum.
pub fn aer_total(aer: &[(String, u64)], severity: &str) -> u64 {
    let prefix = format!("{severity}:");
    let entries: Vec<(String, u64)> =
        aer.iter().filter_map(|(k, v)| k.strip_prefix(&prefix).map(|n| (n.to_string(), *v))).collect();
    crate::pci::aer::total(&entries).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
