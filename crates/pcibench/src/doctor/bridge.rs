//! A bridge (a root port, a switch port) is not a target: vfio-pci takes only type 0 headers
//! (drivers/vfio/pci/vfio_pci_core.c, vfio_pci_core_register_device) and a bridge's own BARs are
//! not a card's. One answer for every bridge: not a target, and the endpoints below it to use
//! instead; its driver (pcieport) stays bound. Its in-use check covers everything below it, and
//! its link is judged as lspci judges a port's (see `pci::partner`).

use super::{device, Check, Ctx, Finding, InUse, Recommendation, Report, Severity};

pub(super) fn report(c: &Ctx) -> Report {
    let i = &c.info;
    let below = crate::pci::sysfs::endpoints_below(c.host, &c.addr);
    let kind = i.link.as_ref().and_then(|l| l.port_type.clone()).unwrap_or_else(|| "PCI bridge".into());
    let listed: Vec<String> = below.iter().map(|a| a.to_string()).collect();
    let targets = if listed.is_empty() {
        "nothing is below it".to_string()
    } else {
        format!("the endpoint(s) below it: {}", listed.join(", "))
    };
    let mut findings = vec![Finding::new(
        "device",
        Severity::Fail,
        format!(
            "{} [{}] {} {}, {}: a bridge ({kind}), not a target: vfio-pci and the sysfs path take only endpoints",
            c.addr,
            i.ids(),
            i.vendor_label(),
            i.device_label(),
            i.class_name
        ),
    )
    .fix(if listed.is_empty() {
        "pcibench list (the devices present)".to_string()
    } else {
        format!("measure {targets}: pcibench doctor {}", listed[0])
    })];
    findings.push(match c.driver.as_deref() {
        Some(d) => Finding::new(
            "driver",
            Severity::Info,
            format!("{d}: the kernel's port driver (AER, hotplug, link power management for what is below it); leave it bound"),
        ),
        None => Finding::new("driver", Severity::Info, "no driver bound"),
    });
    findings.push(in_use(c));
    findings.extend(device::link_checks(c));
    let checks: Vec<Check> = findings
        .into_iter()
        .map(|f| Check { name: f.name, severity: f.base, evidence: f.evidence, fix: f.fix, blocks: Vec::new() })
        .collect();
    let worst = checks.iter().map(|c| c.severity).max().unwrap_or(Severity::Pass);
    let mut cmds: Vec<String> = listed.iter().map(|a| format!("pcibench doctor {a}")).collect();
    let command = (!cmds.is_empty()).then(|| cmds.remove(0));
    Report {
        device: c.addr.to_string(),
        checks,
        recommended: Recommendation {
            via: None,
            goal: None,
            ready: false,
            blocked_by: vec!["device"],
            command,
            then: cmds,
            summary: if listed.is_empty() {
                format!("none: {} is a bridge, not a target, and nothing is below it", c.addr)
            } else {
                format!("none: {} is a bridge, not a target; use {targets}", c.addr)
            },
        },
        worst,
    }
}

/// For a bridge the inventory covers every device below it.
fn in_use(c: &Ctx) -> Finding {
    match &c.in_use {
        InUse::Free => Finding::new("in-use", Severity::Pass, "the running system uses nothing below it"),
        InUse::Used(inv) => {
            Finding::new("in-use", Severity::Fail, format!("in use by the running system: {}", inv.summary()))
                .fix("leave it and what is below it alone: pick a device elsewhere")
        }
        InUse::Unknown(e) => {
            Finding::new("in-use", Severity::Fail, format!("cannot tell what the running system uses below it: {e}"))
        }
        InUse::Unverified(inv) => {
            Finding::new("in-use", Severity::Warn, format!("no use found below it, but {}", inv.unchecked.words()))
        }
    }
}
