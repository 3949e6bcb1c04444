//! `pcibench reset`: reset a PCI function by a way the kernel offers for it, with `setup`'s rules
//! (nothing the running system uses, no more privilege than the caller, `--force` says what it
//! overrides before acting) and the user's consent (the CLI's `--allow-reset`).
//!
//! The ways, in the order `auto` takes them:
//! - `vfio`: VFIO_DEVICE_RESET on the device opened through vfio-pci (drivers/vfio/pci/
//!   vfio_pci_core.c: pci_try_reset_function, the kernel's first method in `reset_method`);
//! - `kernel`: the sysfs `reset` attribute (pci_reset_function: save config space, the first
//!   method that works, restore); `flr`, `pm`, `bus` ... the same with `reset_method` set to that
//!   one method for the reset and put back as found after it (Linux 5.15 and later);
//! - `port`: a secondary bus reset of the port above it, where the kernel offers none for the
//!   function itself (one of several functions on a bus: pci_parent_bus_reset refuses those): the
//!   port's `reset_subordinate` where the kernel has it (Linux 6.13, pci_reset_bus), else
//!   `bridge` (which can also be asked for): pcibench sets the port's Bridge Control Secondary Bus
//!   Reset bit itself, as pci_reset_secondary_bus does, having saved what pci_save_state saves of
//!   every function below and restoring it as pci_restore_state does (`saved`).
//!
//! Every function a reset reaches is checked with `host::inuse` first; `bridge` also refuses
//! functions bound to a driver other than vfio-pci (that driver is not told: the kernel's own
//! resets call its reset_prepare/reset_done) and functions with MSI-X enabled (their vector table
//! lives in a BAR, which only the kernel's saved copy restores).

mod kernel;
mod port;
mod saved;

pub(crate) use saved::read_config;

use crate::host::state::{class_is_bridge, class_of, device_dir, driver_of};
use crate::host::Host;
use crate::pci::PciAddress;
use crate::setup::{Change, SetupOptions};
use crate::{Error, Result};
use serde::Serialize;

/// How to reset (`--method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The first of vfio, kernel, port that applies.
    Auto,
    Vfio,
    /// The sysfs `reset` attribute: the kernel picks the method.
    Kernel,
    /// One of the kernel's methods, by its `reset_method` name.
    Named(KernelMethod),
    /// A secondary bus reset of the port above: the kernel's `reset_subordinate` where it has one,
    /// else `Bridge`.
    Port,
    /// pcibench's own secondary bus reset through the port's Bridge Control, even where the kernel
    /// has `reset_subordinate` (what `Port` does on kernels before 6.13).
    Bridge,
}

/// The kernel's reset methods by their `reset_method` names (drivers/pci/pci.c,
/// pci_reset_fn_methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelMethod {
    DeviceSpecific,
    Acpi,
    Flr,
    AfFlr,
    Pm,
    Bus,
    CxlBus,
}

impl KernelMethod {
    pub const ALL: [KernelMethod; 7] = [
        KernelMethod::DeviceSpecific,
        KernelMethod::Acpi,
        KernelMethod::Flr,
        KernelMethod::AfFlr,
        KernelMethod::Pm,
        KernelMethod::Bus,
        KernelMethod::CxlBus,
    ];

    /// As `reset_method` spells it.
    pub fn name(self) -> &'static str {
        match self {
            KernelMethod::DeviceSpecific => "device_specific",
            KernelMethod::Acpi => "acpi",
            KernelMethod::Flr => "flr",
            KernelMethod::AfFlr => "af_flr",
            KernelMethod::Pm => "pm",
            KernelMethod::Bus => "bus",
            KernelMethod::CxlBus => "cxl_bus",
        }
    }
}

/// Every `--method` name, in the order the help lists them.
pub const METHODS: [&str; 12] =
    ["auto", "vfio", "kernel", "device_specific", "acpi", "flr", "af_flr", "pm", "bus", "cxl_bus", "port", "bridge"];

impl std::str::FromStr for Method {
    type Err = Error;
    fn from_str(s: &str) -> Result<Method> {
        Ok(match s {
            "auto" => Method::Auto,
            "vfio" => Method::Vfio,
            "kernel" => Method::Kernel,
            "port" => Method::Port,
            "bridge" => Method::Bridge,
            _ => match KernelMethod::ALL.iter().find(|m| m.name() == s) {
                Some(m) => Method::Named(*m),
                None => {
                    return Err(Error::usage(format!("unknown reset method '{s}': use one of {}", METHODS.join(", "))))
                }
            },
        })
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::Auto => "auto",
            Method::Vfio => "vfio",
            Method::Kernel => "kernel",
            Method::Named(m) => m.name(),
            Method::Port => "port",
            Method::Bridge => "bridge",
        })
    }
}

/// What the kernel offers for a function, and what `auto` would take.
#[derive(Debug, Clone, Serialize)]
pub struct Offered {
    pub device: String,
    pub driver: Option<String>,
    /// The sysfs `reset` attribute exists (the kernel found at least one method).
    pub kernel_reset: bool,
    /// `reset_method` as read: the kernel's methods for it, in the order it tries them; None where
    /// the file is missing (a kernel before 5.15, or no method at all).
    pub kernel_methods: Option<Vec<String>>,
    /// Bound to vfio-pci: VFIO_DEVICE_RESET through an open device.
    pub vfio: bool,
    /// The port above it, whose secondary bus reset also resets `port_resets`.
    pub port: Option<String>,
    /// Every function below that port (this one included), which a bus reset of it resets.
    pub port_resets: Vec<String>,
    /// The port has `reset_subordinate` (Linux 6.13: the kernel resets the bus below it).
    pub port_by_kernel: bool,
    /// What `auto` takes (None: nothing applies, `no_reset` says why).
    pub auto: Option<Method>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_reset: Option<String>,
}

/// What a reset did.
#[derive(Debug, Clone, Serialize)]
pub struct ResetReport {
    pub device: String,
    /// The method that ran (never `auto`).
    pub method: Method,
    /// How, in words: "VFIO_DEVICE_RESET through vfio-pci (the kernel's methods: bus)".
    pub how: String,
    /// Every function the reset reached.
    pub reset: Vec<String>,
    /// What pcibench changed or overrode on the way, in order (as `setup` reports its changes).
    pub steps: Vec<Change>,
    /// Each function as read after the reset.
    pub after: Vec<After>,
    pub offered: Offered,
}

/// A function after the reset: does it answer, and its Command register.
#[derive(Debug, Clone, Serialize)]
pub struct After {
    pub address: String,
    /// Vendor and device id as read (`ffff:ffff`: it does not answer).
    pub ids: String,
    pub answers: bool,
    pub command: Option<u16>,
}

/// What the kernel offers for `addr`, read-only (`reset --list`, `doctor`).
pub fn offered(host: &Host, addr: &PciAddress) -> Result<Offered> {
    let dir = device_dir(host, addr);
    if !dir.is_dir() {
        return Err(Error::NoDevice(addr.to_string()));
    }
    let a = addr.to_string();
    let driver = driver_of(host, &a);
    let kernel_reset = dir.join("reset").exists();
    let kernel_methods = crate::file::read_trim(&dir.join("reset_method"))
        .map(|m| m.split_whitespace().map(crate::text::one_line).collect::<Vec<_>>());
    let port = port::above(host, addr);
    let port_resets = port.as_ref().map(|p| port::below(host, p).into_iter().map(|f| f.to_string()).collect());
    let port_by_kernel = port.as_ref().is_some_and(|p| device_dir(host, p).join("reset_subordinate").exists());
    let vfio = driver.as_deref() == Some("vfio-pci");
    let mut o = Offered {
        device: a,
        driver,
        kernel_reset,
        kernel_methods,
        vfio,
        port: port.map(|p| p.to_string()),
        port_resets: port_resets.unwrap_or_default(),
        port_by_kernel,
        auto: None,
        no_reset: None,
    };
    match choose_auto(&o) {
        Ok(m) => o.auto = Some(m),
        Err(why) => o.no_reset = Some(why),
    }
    Ok(o)
}

/// `auto`: VFIO where vfio-pci holds it, else the kernel's own reset, else its port's bus.
fn choose_auto(o: &Offered) -> std::result::Result<Method, String> {
    if o.vfio {
        return Ok(Method::Vfio);
    }
    if o.kernel_reset {
        return Ok(Method::Kernel);
    }
    if o.port.is_some() {
        return Ok(Method::Port);
    }
    Err(format!(
        "the kernel offers no reset for {} (no sysfs reset: no FLR, PM or bus reset it can do) and it has no port \
         above it (it sits on a root bus): power-cycle the host, or reload the card's FPGA image",
        o.device
    ))
}

/// Reset `addr` by `method`. `opts` are `setup`'s: `force` overrides the in-use check (said
/// through `notify` first), `system` makes every write, `timeout` bounds each wait.
pub fn reset(host: &Host, addr: &PciAddress, method: Method, opts: &SetupOptions) -> Result<ResetReport> {
    let a = addr.to_string();
    if class_of(host, &a).is_some_and(class_is_bridge) {
        return Err(Error::Refused(format!(
            "{a} is a PCI bridge: pcibench resets the functions below one (pcibench reset ENDPOINT --method port \
             resets the bus below its port), not the bridge itself"
        )));
    }
    let offered = offered(host, addr)?;
    let method = match method {
        Method::Auto => match offered.auto {
            Some(m) => m,
            None => return Err(Error::Unsupported(offered.no_reset.clone().unwrap_or_default())),
        },
        m => m,
    };
    if method != Method::Vfio {
        // Binding drivers aside, a reset changes the host for every user: root's decision.
        crate::setup::refuse_elevated()?;
    }
    let mut steps = Vec::new();
    let (how, reset) = match method {
        Method::Vfio => {
            steps.extend(crate::setup::guard(host, addr, &format!("reset {a}"), opts)?);
            (vfio_reset(host, addr, &offered)?, vec![a.clone()])
        }
        Method::Kernel | Method::Named(_) => {
            steps.extend(crate::setup::guard(host, addr, &format!("reset {a}"), opts)?);
            let how = kernel::reset(host, addr, method, &offered, opts, &mut steps)?;
            (how, vec![a.clone()])
        }
        Method::Port | Method::Bridge => port::reset(host, addr, &offered, method == Method::Bridge, opts, &mut steps)?,
        Method::Auto => unreachable!("auto was resolved above"),
    };
    let after = reset.iter().map(|f| after(host, f)).collect();
    Ok(ResetReport { device: a, method, how, reset, steps, after, offered })
}

/// VFIO_DEVICE_RESET on the device opened through its group (vfio-pci resets it on open and
/// close as well; the ioctl is the reset asked for).
fn vfio_reset(host: &Host, addr: &PciAddress, o: &Offered) -> Result<String> {
    if !o.vfio {
        return Err(Error::Refused(format!(
            "{addr} is not bound to vfio-pci (driver: {}): bind it first (sudo pcibench setup {addr} --vfio), or use \
             --method kernel",
            o.driver.as_deref().unwrap_or("none")
        )));
    }
    if !host.is_real() {
        return Err(Error::Unsupported(format!(
            "VFIO_DEVICE_RESET needs the real kernel: {} is a fixture root",
            host.root().display()
        )));
    }
    let dev = crate::access::vfio::VfioDevice::open(host, addr, None)?;
    dev.reset()?;
    Ok(format!("VFIO_DEVICE_RESET through vfio-pci (the kernel's methods: {})", methods_words(o)))
}

pub fn methods_words(o: &Offered) -> String {
    match &o.kernel_methods {
        Some(m) if !m.is_empty() => m.join(", "),
        _ if o.kernel_reset => "not listed (no reset_method before Linux 5.15)".into(),
        _ => "none".into(),
    }
}

/// `f` as read now: its ids (all-ones when it does not answer) and Command register.
fn after(host: &Host, f: &str) -> After {
    let cfg = saved::read_config(&host.pci_devices_dir().join(f).join("config"), 64).unwrap_or_default();
    let word = |o: usize| cfg.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let (vid, did) = (word(0).unwrap_or(0xffff), word(2).unwrap_or(0xffff));
    After {
        address: f.to_string(),
        ids: format!("{vid:04x}:{did:04x}"),
        answers: vid != 0xffff,
        command: word(crate::pci::config::COMMAND).filter(|_| vid != 0xffff),
    }
}

#[cfg(test)]
mod tests;
