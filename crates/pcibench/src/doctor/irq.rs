//! What completion by interrupt needs, read without a write to the device: its MSI and MSI-X
//! capabilities (vectors, enables), its INTx pin and whether INTx can be masked at the function
//! (PCI 2.3 Interrupt Disable), and which completion modes each access path then offers. Neither
//! finding blocks a path: polling works without any of it.

use super::{Ctx, Finding, Severity};
use crate::pci::intr::{self, IrqCaps};
use std::fmt::Write;

pub(super) fn checks(c: &Ctx) -> Vec<Finding> {
    let dir = c.host.path(c.sysfs_dir());
    // The kernel gives unprivileged readers only the 64-byte header (pci_read_config in
    // drivers/pci/pci-sysfs.c): the capabilities lie beyond it.
    let cfg = crate::file::read(&dir.join("config"), 256).unwrap_or_default();
    let caps = intr::read(&cfg);
    let irq = crate::file::read_trim(&dir.join("irq")).filter(|s| s != "0");
    if cfg.len() <= 0x3d {
        let ev = format!(
            "{}/config gave {} bytes, not the 64-byte header: the function's interrupts are unknown",
            c.sysfs_dir(),
            cfg.len()
        );
        return vec![
            Finding::new("interrupts", Severity::Info, ev.clone()),
            Finding::new("intx-mask", Severity::Info, ev),
        ];
    }
    vec![interrupts(c, &caps, cfg.len(), irq.as_deref()), intx_mask(c, &caps, irq.as_deref())]
}

fn vectors(n: u32) -> String {
    format!("{n} vector{}", if n == 1 { "" } else { "s" })
}

fn interrupts(c: &Ctx, caps: &IrqCaps, read: usize, irq: Option<&str>) -> Finding {
    let by = |enabled: bool| match (enabled, c.driver.as_deref()) {
        (false, _) => String::new(),
        (true, Some("vfio-pci")) => ", enabled: a process has it routed through VFIO".into(),
        (true, Some(d)) => format!(", enabled by {d}"),
        (true, None) => ", enabled with no driver bound".into(),
    };
    let mut kinds = Vec::new();
    if let Some(x) = caps.msix {
        kinds.push(format!(
            "MSI-X {} (table in BAR{} at {:#x}{})",
            vectors(x.vectors),
            x.table_bar,
            x.table_offset,
            by(x.enabled)
        ));
    }
    if let Some(m) = caps.msi {
        let bits = if m.addr64 { "64-bit" } else { "32-bit" };
        kinds.push(format!("MSI {} ({bits}{})", vectors(m.vectors), by(m.enabled)));
    }
    if let Some(pin) = caps.pin_name() {
        kinds.push(format!("INTx pin {pin}{}", irq.map(|i| format!(" (IRQ {i})")).unwrap_or_default()));
    }
    if read < 256 && caps.msi.is_none() && caps.msix.is_none() {
        let mut ev = format!(
            "{}; MSI and MSI-X unknown: {}/config gave the {read}-byte header only (the kernel gives the rest to root)",
            if kinds.is_empty() { "no INTx pin".to_string() } else { kinds.join(", ") },
            c.sysfs_dir()
        );
        ev.push_str("; completion by interrupt needs VFIO (vfio, vfio-noiommu) or vfio-user, sysfs polls only");
        return Finding::new("interrupts", Severity::Info, ev)
            .fix(format!("sudo pcibench doctor {} reads the capabilities", c.addr));
    }
    if kinds.is_empty() {
        return Finding::new(
            "interrupts",
            Severity::Info,
            "no MSI-X, no MSI, no INTx pin: completion by polling only, on every path",
        );
    }
    // auto picks as libxdma's xdma_irq_setup: MSI-X, else MSI, else INTx.
    let auto = [(caps.msix.is_some(), "MSI-X"), (caps.msi.is_some(), "MSI"), (caps.pin != 0, "INTx")]
        .into_iter()
        .find(|(has, _)| *has)
        .map_or("none", |(_, k)| k);
    let mut ev = kinds.join(", ");
    let _ = write!(
        ev,
        "; completion modes: polling on every path; by interrupt through {} and vfio-user (--irq-kind auto takes {auto}); sysfs polls only",
        c.vfio
    );
    Finding::new("interrupts", Severity::Pass, ev)
}

/// The interrupt line's users in /proc/interrupts ("  11: ... IO-APIC 11-fasteoi  uhci_hcd:usb1, vfio-intx(...)").
fn line_users(c: &Ctx, irq: &str) -> Vec<String> {
    let text = crate::file::read_string(&c.host.path("/proc/interrupts"), 1 << 20).unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.split(':').next().is_some_and(|n| n.trim() == irq)) else {
        return Vec::new();
    };
    // The counters, the chip and the trigger come first; the handlers' names follow, comma-separated.
    let fields: Vec<&str> = line.split_whitespace().collect();
    let names = fields.iter().skip_while(|f| !f.contains("-edge") && !f.contains("-level") && !f.contains("-fasteoi"));
    let tail: Vec<&str> = names.skip(1).copied().collect();
    tail.join(" ").split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

fn intx_mask(c: &Ctx, caps: &IrqCaps, irq: Option<&str>) -> Finding {
    if caps.pin == 0 {
        return Finding::new("intx-mask", Severity::Info, "no INTx pin: INTx completion is unavailable");
    }
    let nointxmask = crate::file::read_trim(&c.host.path("/sys/module/vfio_pci/parameters/nointxmask"))
        .is_some_and(|v| v == "Y" || v == "1");
    let others: Vec<String> =
        irq.map(|i| line_users(c, i)).unwrap_or_default().into_iter().filter(|u| !u.starts_with("vfio-intx")).collect();
    let shared = if others.is_empty() {
        String::new()
    } else {
        format!("; IRQ {} is shared with {}", irq.unwrap_or("?"), others.join(", "))
    };
    // vfio_intx_enable requests the line shared only where it can mask INTx at the function
    // (vdev->pci_2_3); otherwise it asks for it exclusively, and a line others hold refuses it.
    let exclusive = format!(
        "without it vfio-pci needs the line to itself{shared}: use MSI (--irq-kind msi) where the function has it"
    );
    if nointxmask {
        let base = if others.is_empty() { Severity::Info } else { Severity::Warn };
        return Finding::new(
            "intx-mask",
            base,
            format!("vfio-pci is loaded with nointxmask=Y (/sys/module/vfio_pci/parameters/nointxmask): it does not mask INTx at the function; {exclusive}"),
        )
        .fix("reload it without the option: sudo modprobe -r vfio_pci && sudo modprobe vfio_pci");
    }
    let pcie = c.info.capabilities.iter().any(|k| k.id == 0x10);
    if caps.intx_disabled == Some(true) {
        return Finding::new(
            "intx-mask",
            Severity::Pass,
            format!(
                "Interrupt Disable (command bit 10) reads set: the function implements INTx masking (PCI 2.3){shared}"
            ),
        );
    }
    if pcie {
        return Finding::new(
            "intx-mask",
            Severity::Pass,
            format!(
                "a PCI Express function must implement Interrupt Disable (PCIe Base 4.0 §7.5.1.1.1); vfio-pci confirms it when it enables the device (pci_intx_mask_supported) and masks INTx there{shared}"
            ),
        );
    }
    // Telling needs a write (the kernel toggles the bit and reads it back): never done here.
    let base = if others.is_empty() { Severity::Info } else { Severity::Warn };
    Finding::new(
        "intx-mask",
        base,
        format!("a conventional PCI function: INTx masking (PCI 2.3) is known only after a write, which vfio-pci makes when it enables the device (pci_intx_mask_supported); {exclusive}"),
    )
}

/// The `interrupts` check of a device served over vfio-user (`doctor vfio-user:SOCKET`): the MSI
/// and MSI-X capabilities and INTx pin read through its config region, the vectors the server
/// offers (DEVICE_GET_IRQ_INFO), and the enables now (set while a client has them routed: the
/// server enables them for DEVICE_SET_IRQS, as vfio-pci does).
pub(super) fn served(socket: &str) -> super::Check {
    let check = |severity, evidence: String| super::Check {
        name: "interrupts",
        severity,
        evidence,
        fix: None,
        blocks: Vec::new(),
    };
    let dev = match crate::device::connect(socket) {
        Ok(d) => d,
        Err(e) => return check(Severity::Info, format!("the server's interrupts are unknown: {e}")),
    };
    let mut cfg = [0u8; 256];
    let caps = match crate::access::DeviceAccess::config_read(&dev, 0, &mut cfg) {
        Ok(()) => intr::read(&cfg),
        Err(e) => return check(Severity::Info, format!("the device's config space cannot be read: {e}")),
    };
    let count = |index: u32| dev.irqs().iter().find(|&&(i, _)| i == index).map_or(0, |&(_, n)| n);
    let (msix, msi, intx) = (count(2), count(1), count(0));
    let mut kinds = Vec::new();
    let mut enabled = Vec::new();
    if let Some(x) = caps.msix {
        kinds.push(format!("MSI-X {} (table in BAR{} at {:#x})", vectors(x.vectors), x.table_bar, x.table_offset));
        if x.enabled {
            enabled.push("MSI-X");
        }
    }
    if let Some(m) = caps.msi {
        kinds.push(format!("MSI {} ({})", vectors(m.vectors), if m.addr64 { "64-bit" } else { "32-bit" }));
        if m.enabled {
            enabled.push("MSI");
        }
    }
    if let Some(pin) = caps.pin_name() {
        kinds.push(format!("INTx pin {pin}"));
    }
    if kinds.is_empty() && msix + msi + intx == 0 {
        return check(Severity::Info, "no MSI-X, no MSI, no INTx pin: completion by polling only".into());
    }
    let auto =
        [(msix, "MSI-X"), (msi, "MSI"), (intx, "INTx")].into_iter().find(|(n, _)| *n > 0).map_or("none", |k| k.1);
    let now = if enabled.is_empty() {
        "none enabled now".to_string()
    } else {
        format!("{} enabled now (a client has it routed)", enabled.join(", "))
    };
    let ev = format!(
        "{}; the server offers MSI-X {msix}, MSI {msi}, INTx {intx} (DEVICE_GET_IRQ_INFO); {now}; completion modes: polling, and by interrupt (--irq-kind auto takes {auto})",
        if kinds.is_empty() { "no interrupt capability in config space".to_string() } else { kinds.join(", ") },
    );
    check(if auto == "none" { Severity::Info } else { Severity::Pass }, ev)
}
