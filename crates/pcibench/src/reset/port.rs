//! A secondary bus reset of the port above a function: everything below the port is reset.
//!
//! Where the port has `reset_subordinate` (Linux 6.13), the kernel does it (pci_reset_bus: every
//! driver below told, every function's state saved and restored). Otherwise pcibench does what
//! pci_reset_secondary_bus and pci_bridge_wait_for_secondary_bus do: every function below saved
//! (`saved`) and disabled, the port's Bridge Control Secondary Bus Reset bit (PCI-to-PCI Bridge
//! 1.2 §3.2.5.18, bit 6 of 0x3E) set, held 2 ms (Trst is at least 1 ms), cleared; then the link
//! waited for (Data Link Layer Link Active where the port reports it, PCIe Base 6.0 §7.5.3.8) and
//! the 100 ms a function may take after a Conventional Reset before it must answer (§6.6.1), then
//! each function polled until it answers (it may return Configuration Request Retry Status, read
//! as vendor id 0x0001, until ready), and restored parents first.

use super::saved::{read_config, Saved};
use super::Offered;
use crate::host::state::{class_is_bridge, device_dir, driver_of};
use crate::host::Host;
use crate::pci::PciAddress;
use crate::setup::{Change, SetupOptions};
use crate::{Error, Result};
use std::time::{Duration, Instant};

/// Bridge Control (type 1 header 0x3E), bit 6: Secondary Bus Reset.
const BRIDGE_CONTROL: u64 = 0x3e;
const BRIDGE_CTL_BUS_RESET: u16 = 1 << 6;
/// How long the bit is held (drivers/pci/pci.c, pci_reset_secondary_bus: msleep(2)).
const HOLD: Duration = Duration::from_millis(2);
/// What a function may take after a Conventional Reset before config requests (PCIe Base 6.0
/// §6.6.1; the kernel's PCI_RESET_WAIT).
const SETTLE: Duration = Duration::from_millis(100);
/// Link Capabilities bit 20: Data Link Layer Link Active Reporting Capable; Link Status bit 13.
const LNKCAP_DLLLARC: u32 = 1 << 20;
const LNKSTA_DLLLA: u16 = 1 << 13;
/// A vendor id read during Configuration Request Retry Status (PCIe Base 6.0 §2.3.2).
const CRS_VENDOR: u16 = 0x0001;

/// The port (bridge) directly above `addr`, if it is not on a root bus.
pub(super) fn above(host: &Host, addr: &PciAddress) -> Option<PciAddress> {
    let real = std::fs::canonicalize(device_dir(host, addr)).ok()?;
    real.parent()?.file_name()?.to_str()?.parse().ok()
}

/// Every function below `port`, at any depth, parents before children (sysfs order within).
pub(super) fn below(host: &Host, port: &PciAddress) -> Vec<PciAddress> {
    let Ok(root) = std::fs::canonicalize(device_dir(host, port)) else { return Vec::new() };
    let mut out = Vec::new();
    let mut level = vec![root];
    for _ in 0..8 {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(rd) = std::fs::read_dir(dir) else { continue };
            let mut found: Vec<(PciAddress, std::path::PathBuf)> = rd
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()).map(|a| (a, e.path())))
                .collect();
            found.sort();
            for (a, p) in found {
                out.push(a);
                next.push(p);
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    out
}

pub(super) fn reset(
    host: &Host,
    addr: &PciAddress,
    o: &Offered,
    by_hand: bool,
    opts: &SetupOptions,
    steps: &mut Vec<Change>,
) -> Result<(String, Vec<String>)> {
    let Some(port) = o.port.as_deref().and_then(|p| p.parse::<PciAddress>().ok()) else {
        return Err(Error::Unsupported(format!(
            "{addr} sits on a root bus: there is no port above it whose bus could be reset"
        )));
    };
    let all = below(host, &port);
    let names: Vec<String> = all.iter().map(|f| f.to_string()).collect();
    let what = if names.len() == 1 {
        format!("reset the bus below {port} ({addr})")
    } else {
        format!("reset the bus below {port} ({}: all of them are reset)", names.join(", "))
    };
    // The port's inventory covers everything below it (`host::inuse`).
    steps.extend(crate::setup::guard(host, &port, &what, opts)?);
    if o.port_by_kernel && !by_hand {
        crate::setup::write_attr(opts, &device_dir(host, &port).join("reset_subordinate"), "1")?;
        return Ok((
            format!("a secondary bus reset of port {port} by the kernel (reset_subordinate: pci_reset_bus)"),
            names,
        ));
    }
    refuse_drivers(host, &all, opts, steps)?;
    let saved: Vec<Saved> =
        all.iter().map(|f| Saved::read(&f.to_string(), device_dir(host, f).join("config"))).collect::<Result<_>>()?;
    if let Some(s) = saved.iter().find(|s| s.msix_enabled()) {
        return Err(Error::Refused(format!(
            "{} has MSI-X enabled: its vector table lives in a BAR, which a bus reset clears and only its driver's \
             saved copy restores; stop whoever enabled it, or use the kernel's reset (--method kernel)",
            s.address
        )));
    }
    let bytes: usize = saved.iter().map(|s| s.bytes.len()).sum();
    steps.push(Change::new(format!(
        "saved the config space of {} ({bytes} bytes), as pci_save_state does",
        names.join(", ")
    )));
    for s in saved.iter().rev() {
        s.disable(opts)?;
    }
    let port_cfg = device_dir(host, &port).join("config");
    let link_active = reports_link_active(&port_cfg)?;
    let ctl = read_u16(&port_cfg, BRIDGE_CONTROL)?;
    let write = |v: u16| {
        opts.system
            .write_at(&port_cfg, BRIDGE_CONTROL, &v.to_le_bytes())
            .map_err(|e| Error::io("cannot write", &port_cfg, e))
    };
    write(ctl | BRIDGE_CTL_BUS_RESET)?;
    opts.system.sleep(HOLD);
    write(ctl & !BRIDGE_CTL_BUS_RESET)?;
    steps.push(Change::new(format!(
        "set and cleared Secondary Bus Reset in {port}'s Bridge Control ({ctl:#06x} | 0x0040, held {HOLD:?})"
    )));
    wait_link(&port_cfg, link_active, opts)?;
    opts.system.sleep(SETTLE);
    for s in &saved {
        wait_answers(s, opts)?;
        let wrote = s.restore(opts)?;
        steps.push(Change::new(if wrote.is_empty() {
            format!("{}: nothing to restore (its config space read as saved)", s.address)
        } else {
            format!("restored {} of {} (command {:#06x})", wrote.join(", "), s.address, s.command())
        }));
    }
    Ok((format!("a secondary bus reset of port {port} by pcibench (its Bridge Control)"), names))
}

/// A bus reset by hand is not announced to the drivers below (the kernel's own resets call
/// their reset_prepare and reset_done): a function bound to one is refused, `--force` overrides.
fn refuse_drivers(host: &Host, all: &[PciAddress], opts: &SetupOptions, steps: &mut Vec<Change>) -> Result<()> {
    let bound: Vec<String> = all
        .iter()
        .filter(|f| !crate::host::state::class_of(host, &f.to_string()).is_some_and(class_is_bridge))
        .filter_map(|f| {
            let d = driver_of(host, &f.to_string())?;
            (d != "vfio-pci").then(|| format!("{f} (bound to {d})"))
        })
        .collect();
    if bound.is_empty() {
        return Ok(());
    }
    if !opts.force {
        return Err(Error::Refused(format!(
            "refusing a bus reset by hand under {}: its driver is not told and keeps state the reset clears; unbind it \
             first (sudo pcibench setup ADDR --vfio), or --force resets it anyway",
            bound.join(", ")
        )));
    }
    for b in bound {
        let what = format!("--force: reset {b} under its driver, which is not told");
        if let Some(n) = &opts.notify {
            n(&what);
        }
        steps.push(Change::warn(what, "the driver's view of the device is stale: rebind it (unbind, then bind)"));
    }
    Ok(())
}

fn read_u16(path: &std::path::Path, off: u64) -> Result<u16> {
    let b = read_config(path, off + 2).map_err(|e| Error::io("cannot read", path, e))?;
    b.get(off as usize..off as usize + 2)
        .map(|w| u16::from_le_bytes([w[0], w[1]]))
        .ok_or_else(|| Error::Device(format!("{} is shorter than {} bytes", path.display(), off + 2)))
}

/// Whether to wait for Data Link Layer Link Active after the reset: where the port reports it
/// (Link Capabilities) and it was set before (QEMU's pcie-root-port claims the capability and
/// never sets the bit; waiting for it there would fail every reset). Read before the reset.
fn reports_link_active(port_cfg: &std::path::Path) -> Result<Option<u64>> {
    let cfg = read_config(port_cfg, 256).map_err(|e| Error::io("cannot read", port_cfg, e))?;
    let Some(p) = crate::pci::config::parse(&cfg).pcie else { return Ok(None) };
    let at = |o: usize, n: usize| cfg.get(o..o + n);
    let lnkcap = at(p.offset as usize + 0x0c, 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let lnksta = at(p.offset as usize + 0x12, 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
    Ok((lnkcap & LNKCAP_DLLLARC != 0 && lnksta & LNKSTA_DLLLA != 0).then_some(p.offset as u64 + 0x12))
}

/// Wait for Data Link Layer Link Active (at `sta`, where `reports_link_active` found it), bounded
/// by `opts.timeout`.
fn wait_link(port_cfg: &std::path::Path, sta: Option<u64>, opts: &SetupOptions) -> Result<()> {
    let Some(sta) = sta else { return Ok(()) };
    let start = Instant::now();
    loop {
        if read_u16(port_cfg, sta)? & LNKSTA_DLLLA != 0 {
            return Ok(());
        }
        if start.elapsed() >= opts.timeout {
            return Err(Error::Device(format!(
                "the link below {} did not come back within {:?} of the bus reset (Data Link Layer Link Active stays \
                 clear): see dmesg, and pcibench health",
                port_cfg.display(),
                opts.timeout
            )));
        }
        opts.system.sleep(Duration::from_millis(10));
    }
}

/// Poll `s`'s vendor id until it answers (not all-ones, not Retry Status), bounded.
fn wait_answers(s: &Saved, opts: &SetupOptions) -> Result<()> {
    let start = Instant::now();
    loop {
        let v = read_u16(&s.path, 0)?;
        if v != 0xffff && v != CRS_VENDOR {
            return Ok(());
        }
        if start.elapsed() >= opts.timeout {
            return Err(Error::Device(format!(
                "{} does not answer {:?} after the bus reset (vendor id reads {v:#06x}): it may need longer, or the \
                 link did not train; see pcibench health {}",
                s.address, opts.timeout, s.address
            )));
        }
        opts.system.sleep(Duration::from_millis(10));
    }
}
