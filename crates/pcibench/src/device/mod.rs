//! The device: what the user named (`Target`: a PCI function or a simulated card), described and
//! opened. This is where real devices (`pci`, `access`) and simulated ones (`sim`, `access::sim`)
//! meet, so neither side knows the other. (The module was `target`, a name Cargo's build folder
//! shares.)

use crate::access::sim::SimDevice;
use crate::access::vfio_user::{self, VfioUserDevice};
use crate::access::{self, DeviceAccess, Via};
use crate::host::Host;
use crate::pci::link::Link;
use crate::pci::{self, DeviceInfo, IdFilter, PciAddress};
use crate::sim::SimId;
use crate::{Error, Result};
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

/// A device as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A built-in simulated card (`sim`, ...).
    Sim(SimId),
    Pci(PciAddress),
    /// A device model served over vfio-user at this UNIX socket (`vfio-user:/path/to/socket`).
    /// The path is kept for the life of the process (a command names one device), which keeps
    /// `Target` a plain copyable value.
    VfioUser(&'static str),
}

/// How a vfio-user device is written on the command line.
pub const VFIO_USER_PREFIX: &str = "vfio-user:";

impl Target {
    /// The default simulated card, `sim`.
    pub const SIM: Target = Target::Sim(SimId::DEFAULT);

    pub fn is_sim(&self) -> bool {
        matches!(self, Target::Sim(_))
    }
}

impl FromStr for Target {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if let Some(id) = SimId::from_name(s) {
            return Ok(Target::Sim(id));
        }
        if let Some(path) = s.strip_prefix(VFIO_USER_PREFIX) {
            if path.is_empty() {
                return Err(Error::usage("vfio-user: needs the server's socket: vfio-user:/path/to/socket"));
            }
            return Ok(Target::VfioUser(Box::leak(path.to_string().into_boxed_str())));
        }
        s.parse().map(Target::Pci).map_err(|e| match e {
            Error::Usage(m) => {
                Error::Usage(format!("{m}, or a simulated card: {}, or vfio-user:/path/to/socket", SimId::names()))
            }
            other => other,
        })
    }
}

serde_as_text!(Target);

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sim(id) => f.write_str(id.name()),
            Target::Pci(a) => a.fmt(f),
            Target::VfioUser(p) => write!(f, "{VFIO_USER_PREFIX}{p}"),
        }
    }
}

/// A device as every measurement sees it, built once (`Device::describe`) and passed down to the
/// runners, reports and engines: its typed name (a PCI address or a simulated card), everything
/// `info` shows, and the link that bounds its figures.
#[derive(Debug, Clone)]
pub struct Device {
    pub target: Target,
    pub info: DeviceInfo,
    /// The PCIe link that bounds its throughput (the link model's limits), or why none does: a
    /// simulated card is host memory; conventional PCI and some emulated devices report no link.
    pub link: std::result::Result<Link, String>,
}

impl Device {
    /// Read the device named `target` (sysfs, or the simulated card's own description).
    pub fn describe(host: &Host, target: &Target) -> Result<Device> {
        Ok(Device::new(*target, describe(host, target)?))
    }

    /// A device from what was read about it.
    pub fn new(target: Target, info: DeviceInfo) -> Device {
        let link = info.bounding_link();
        Device { target, info, link }
    }

    /// Open it on the access path `via`, or on the default one.
    pub fn open(&self, host: &Host, via: Option<Via>) -> Result<Box<dyn DeviceAccess>> {
        open(host, &self.target, &self.info, via)
    }

    /// As reports name it: `0000:15:00.0`, `sim`.
    pub fn name(&self) -> &str {
        &self.info.address
    }

    /// A simulated card: host memory, whose figures are host-memory figures.
    pub fn simulated(&self) -> bool {
        self.info.simulated
    }

    /// Its PCI address; None for a simulated card.
    pub fn pci_address(&self) -> Option<&PciAddress> {
        match &self.target {
            Target::Pci(a) => Some(a),
            Target::Sim(_) | Target::VfioUser(_) => None,
        }
    }

    /// The NUMA node sysfs names for it (None: unknown, or a simulated card).
    pub fn numa_node(&self) -> Option<i32> {
        self.info.numa_node
    }

    /// The link that bounds its figures, if one does.
    pub fn bounding_link(&self) -> Option<Link> {
        self.link.as_ref().ok().copied()
    }

    /// A device for runner tests: named `name`, with one 64-bit memory BAR per (index, size), and
    /// `link` bounding its figures.
    #[cfg(test)]
    pub fn for_test(name: &str, simulated: bool, link: Option<Link>, bars: &[(u8, u64)]) -> Device {
        let mut info = SimId::DEFAULT.spec().info();
        info.address = name.to_string();
        info.simulated = simulated;
        info.bars = bars.iter().map(|&(index, size)| pci::Bar { index, size, ..info.bars[0].clone() }).collect();
        Device { target: Target::SIM, info, link: link.ok_or_else(|| "no link in this test".to_string()) }
    }
}

/// Everything about a target: a sysfs device or a simulated card.
pub fn describe(host: &Host, target: &Target) -> Result<DeviceInfo> {
    match target {
        Target::Sim(id) => Ok(id.spec().info()),
        Target::Pci(a) => pci::sysfs::read_device(host, a),
        Target::VfioUser(path) => {
            let dev = connect(path)?;
            let info = vfio_user::info::describe_open(&dev, Path::new(path));
            // Kept open for the rest of the command: every later `open`, `describe` or check of
            // the same socket gets this connection (`VfioUserDevice::open`), so one command is one
            // client (a server may serve one at a time; `pcibench serve` refuses a second).
            *DESCRIBED.lock().unwrap_or_else(|e| e.into_inner()) = Some(dev);
            Ok(info)
        }
    }
}

/// Connect to the vfio-user server at `socket` holding no capability: nothing on this path needs
/// one (the server maps the BARs and the client's memory is its own), and the server is another
/// process, whose answers must not steer a privileged one (issue 51 S7). Every connection a
/// command makes to a `vfio-user:` target comes through here.
pub fn connect(socket: &str) -> Result<VfioUserDevice> {
    crate::os::privilege::keep_only(0, &format!("choosing the vfio-user target {VFIO_USER_PREFIX}{socket}"))?;
    VfioUserDevice::open(Path::new(socket))
}

/// The vfio-user device `describe` connected to, kept for the command's life.
static DESCRIBED: Mutex<Option<VfioUserDevice>> = Mutex::new(None);

/// `pcibench list`: the simulated cards first, then every PCI device, filtered as lspci's -d
/// and -s; and a line for each sysfs entry that could not be read.
pub fn list(
    host: &Host,
    ids: Option<IdFilter>,
    slot: Option<&Target>,
    detail: pci::sysfs::Detail,
) -> Result<(Vec<DeviceInfo>, Vec<String>)> {
    let mut out: Vec<DeviceInfo> = SimId::all()
        .filter(|id| slot.is_none_or(|s| *s == Target::Sim(*id)))
        .map(|id| id.spec().info())
        .filter(|d| ids.is_none_or(|f| f.matches(d)))
        .collect();
    let pci_slot = match slot {
        Some(Target::Sim(_)) => return Ok((out, Vec::new())),
        // A served model is not on this host's bus: `list` shows what is.
        Some(Target::VfioUser(_)) => return Ok((Vec::new(), Vec::new())),
        Some(Target::Pci(a)) => Some(a),
        None => None,
    };
    let (devices, problems) = pci::list(host, ids, pci_slot, detail)?;
    out.extend(devices);
    Ok((out, problems))
}

/// Open a target on the access path `via`, or on the default one (see `access::open_device`).
pub fn open(host: &Host, target: &Target, info: &DeviceInfo, via: Option<Via>) -> Result<Box<dyn DeviceAccess>> {
    match target {
        Target::Sim(id) => {
            if via.is_some_and(|v| v != Via::Sim) {
                return Err(Error::usage(
                    "a simulated card has its own access path: drop --via (sysfs and VFIO need a real device)",
                ));
            }
            Ok(Box::new(SimDevice::open(*id)?))
        }
        Target::Pci(a) => access::open_device(host, a, info, via),
        Target::VfioUser(path) => {
            if via.is_some_and(|v| v != Via::VfioUser) {
                return Err(Error::usage(format!(
                    "{target} is reached over vfio-user: drop --via (or use --via vfio-user)"
                )));
            }
            Ok(Box::new(connect(path)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses() {
        assert_eq!("SIM".parse::<Target>().unwrap(), Target::SIM);
        assert_eq!(Target::SIM.to_string(), "sim");
        assert_eq!("15:00.0".parse::<Target>().unwrap().to_string(), "0000:15:00.0");
        let e = "sim2".parse::<Target>().unwrap_err().to_string();
        assert!(e.contains("DDDD:BB:DD.F") && e.contains("simulated card: sim"), "{e}");
    }

    #[test]
    fn sim_card_is_shaped_like_seed_000() {
        let d = describe(&Host::with_root("/nonexistent"), &Target::SIM).unwrap();
        assert!(d.simulated);
        let bars: Vec<(u8, u64, bool, bool)> =
            d.bars.iter().map(|b| (b.index, b.size, b.is_64bit, b.prefetchable)).collect();
        assert_eq!(bars, vec![(0, 1 << 20, true, true), (2, 128 << 10, true, true), (4, 64 << 10, true, true)]);
        let l = d.link.unwrap();
        assert_eq!((l.current_gen, l.current_width, l.mps, l.mrrs), (Some(2), Some(4), Some(256), Some(512)));
        // Listing works on a host without PCI at all: just the simulated cards.
        let (all, _) = list(&Host::with_root("/nonexistent"), None, None, pci::sysfs::Detail::Full).unwrap();
        assert_eq!(all.len(), crate::sim::CARDS.len());
        assert_eq!(all[0].address, "sim");
        let (only, _) =
            list(&Host::with_root("/nonexistent"), None, Some(&Target::SIM), pci::sysfs::Detail::Full).unwrap();
        assert_eq!(only.len(), 1);
    }
}
