//! The reports for targets with no host checks to run: a PCI address with no device behind it and
//! a simulated card (every check information).

use super::{Check, Recommendation, Report, Severity, CHECK_NAMES};
use crate::access::Via;
use crate::host::Host;
use crate::pci::PciAddress;

pub(super) fn missing_report(host: &Host, addr: &PciAddress) -> Report {
    let why = if host.path("/sys/bus/pci").exists() {
        format!("no {} in /sys/bus/pci/devices", addr)
    } else {
        "no /sys/bus/pci on this host (no PCI, or sysfs not mounted)".to_string()
    };
    let check = Check {
        name: "device",
        severity: Severity::Fail,
        evidence: why,
        fix: Some("pcibench list (the devices present, with their addresses)".into()),
        blocks: vec![Via::Sysfs, Via::Vfio, Via::VfioNoiommu],
    };
    Report {
        device: addr.to_string(),
        checks: vec![check],
        recommended: Recommendation {
            via: None,
            goal: None,
            ready: false,
            blocked_by: vec!["device"],
            command: Some("pcibench list".into()),
            then: Vec::new(),
            summary: format!("none until you fix device: no PCI device {addr}"),
        },
        worst: Severity::Fail,
    }
}

pub(super) fn sim_report(name: &str) -> Report {
    let checks = CHECK_NAMES
        .iter()
        .map(|n| Check {
            name: n,
            severity: Severity::Info,
            evidence: crate::sim::SIM_LABEL.to_string(),
            fix: None,
            blocks: Vec::new(),
        })
        .collect();
    Report {
        device: name.into(),
        checks,
        recommended: Recommendation {
            via: Some(Via::Sim),
            goal: Some(Via::Sim),
            ready: true,
            blocked_by: Vec::new(),
            command: Some(format!("pcibench pio {name}")),
            then: Vec::new(),
            summary: format!("{name}: ready ({}, BARs in host memory)", crate::sim::SIM_LABEL),
        },
        worst: Severity::Info,
    }
}
