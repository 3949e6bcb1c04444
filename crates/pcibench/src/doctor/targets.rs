//! The reports for targets with no host checks to run: a PCI address with no device behind it, a
//! vfio-user socket (its server answers or not), and a simulated card (every check information).

use super::{Check, Recommendation, Report, Severity, CHECK_NAMES};
use crate::access::Via;
use crate::device::Target;
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

/// A vfio-user device: reachable when its server answers; nothing of the host's applies.
pub(super) fn vfio_user_report(host: &Host, target: &Target) -> Report {
    let name = target.to_string();
    let (severity, evidence, fix) = match crate::device::describe(host, target) {
        Ok(info) => {
            let s = info.served.as_ref();
            let evidence = format!(
                "a vfio-user server answers: protocol {}{}",
                s.map_or("?", |s| s.protocol.as_str()),
                s.and_then(|s| s.pcibench_card.as_deref())
                    .map(|c| format!(", pcibench's simulated card {c}"))
                    .unwrap_or_default()
            );
            (Severity::Pass, evidence, None)
        }
        Err(e) => (
            Severity::Fail,
            e.to_string(),
            Some(format!(
                "start the model's server on that socket (pcibench serve sim --socket {})",
                &name[crate::device::VFIO_USER_PREFIX.len()..]
            )),
        ),
    };
    let ready = severity == Severity::Pass;
    let check = Check {
        name: "device",
        severity,
        evidence: evidence.clone(),
        fix,
        blocks: if ready { Vec::new() } else { vec![Via::VfioUser] },
    };
    Report {
        device: name.clone(),
        checks: vec![check],
        recommended: Recommendation {
            via: Some(Via::VfioUser),
            goal: Some(Via::VfioUser),
            ready,
            blocked_by: if ready { Vec::new() } else { vec!["device"] },
            command: Some(format!("pcibench pio {name}")),
            then: Vec::new(),
            summary: if ready {
                format!("{name}: ready ({evidence})")
            } else {
                format!("{name}: not reachable: {evidence}")
            },
        },
        worst: severity,
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
