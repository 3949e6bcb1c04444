//! `pcibench doctor`: why a device cannot be reached, and the exact command that fixes it.
//!
//! Each check reads host state (through `Host`, so fixture trees work) and returns a finding:
//! evidence, the fix, and which access paths it blocks. The report then picks the one access
//! path to recommend (the first of sysfs / vfio / vfio-noiommu that works, else the first whose
//! blockers all have a command) and marks the findings that block it as failures.
//!
//! JSON (`serde_json::to_string(&report)`), field names stable:
//! ```text
//! { "device": "0000:00:04.0",
//!   "checks": [ { "name": "driver", "severity": "pass|warn|fail|info", "evidence": "...",
//!                 "fix": "..." | null, "blocks": ["sysfs", "vfio", "vfio-noiommu"] } ... ],
//!   "recommended": { "via": "sysfs|vfio|vfio-noiommu|sim|none", "goal": "vfio" | null,
//!                    "ready": true, "blocked_by": ["driver"], "command": "..." | null,
//!                    "then": ["..."], "summary": "..." },
//!   "worst": "pass|info|warn|fail" }
//! ```
//! `via` is the path usable now (`none` when a fix is needed first); `goal` the path the
//! commands lead to; `command` the one command to run (to use the path when ready, else the
//! first fix) and `then` any further fixes in order. Exit codes: `Report::exit_code`.
//!
//! A device the running system uses (`in-use`: `host::inuse`) is never recommended: the check
//! fails, no other check offers a command that would take it (setup, unbind, driver_override,
//! --sysfs-user), and the recommendation says to pick another device or free the holders first.
//! A bridge is not a target either: the report points at the endpoints below it.

mod bridge;
mod caller;
mod device;
mod dma;
mod irq;
mod sysfs;
mod targets;
mod vfio;

pub use caller::Caller;

use crate::access::Via;
use crate::device::Target;
use crate::host::Host;
use crate::pci::{DeviceInfo, PciAddress};
use crate::Result;
use serde::{Serialize, Serializer};

/// How bad a finding is. Ordered: `Pass < Info < Warn < Fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The check found what access needs.
    Pass,
    /// Context, or a problem only for a path other than the recommended one.
    Info,
    /// A caveat on the recommended path: a degraded link, counted errors, DMA limits, or
    /// something (lockdown, a bound driver) that takes away another path.
    Warn,
    /// It stops the recommended access path until fixed.
    Fail,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Pass => "PASS",
            Severity::Info => "INFO",
            Severity::Warn => "WARN",
            Severity::Fail => "FAIL",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable identifier: device, driver, in-use, memory-space, bus-master, resource-files, lockdown,
    /// strict-devmem, iommu, iommu-group, vfio-modules, noiommu-mode, vfio-nodes, cap-sys-rawio,
    /// memlock, hugepages, interrupts, intx-mask, link, aer, reset.
    pub name: &'static str,
    pub severity: Severity,
    /// What was found, with the values read (files, bits, modes).
    pub evidence: String,
    /// What to do about it (the exact command where there is one).
    pub fix: Option<String>,
    /// The access paths this finding stops until fixed.
    pub blocks: Vec<Via>,
}

fn via_or_none<S: Serializer>(v: &Option<Via>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_str("none"),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    /// The path to use now; `None` (JSON "none") until the blockers are fixed.
    #[serde(serialize_with = "via_or_none")]
    pub via: Option<Via>,
    /// The path the commands lead to (`None` when the device does not exist).
    pub goal: Option<Via>,
    pub ready: bool,
    /// Names of the checks that stop `goal`.
    pub blocked_by: Vec<&'static str>,
    /// The one command to run: how to use `goal` when ready, else the first fix.
    pub command: Option<String>,
    /// Further fixes, in order, after `command`.
    pub then: Vec<String>,
    /// One line for people.
    pub summary: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub device: String,
    pub checks: Vec<Check>,
    pub recommended: Recommendation,
    pub worst: Severity,
}

impl Report {
    /// 0: every check passed or is information; 1: a warning; 2: a failure (the recommended
    /// path does not work until a fix is applied).
    pub fn exit_code(&self) -> u8 {
        match self.worst {
            Severity::Pass | Severity::Info => 0,
            Severity::Warn => 1,
            Severity::Fail => 2,
        }
    }

    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// What a check found, before the report decides which path to recommend.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub name: &'static str,
    /// Severity when this finding does not block the recommended path.
    pub base: Severity,
    pub evidence: String,
    pub fix: Option<String>,
    /// Paths this finding stops, each with the command that lifts it for that path
    /// (`None`: no command can, e.g. kernel lockdown for sysfs).
    pub blocks: Vec<(Via, Option<String>)>,
    /// Matters only for DMA (memlock, hugepages): information when the path is sysfs.
    pub dma_only: bool,
    /// Its fix or commands would take the device from its driver or give its BARs to a user:
    /// dropped while the running system uses the device.
    pub takes: bool,
}

impl Finding {
    pub fn new(name: &'static str, base: Severity, evidence: impl Into<String>) -> Self {
        Finding { name, base, evidence: evidence.into(), fix: None, blocks: Vec::new(), dma_only: false, takes: false }
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    pub fn blocks(mut self, via: Via, command: Option<String>) -> Self {
        self.blocks.push((via, command));
        self
    }

    pub fn dma(mut self) -> Self {
        self.dma_only = true;
        self
    }

    pub fn takes(mut self) -> Self {
        self.takes = true;
        self
    }

    /// The check this finding becomes once the report judged it `severity`: its fix kept unless
    /// it passed or `drop_fix` (a fix that would take a device the running system uses).
    fn judged(self, severity: Severity, drop_fix: bool) -> Check {
        let fix = if severity == Severity::Pass || drop_fix { None } else { self.fix };
        Check {
            name: self.name,
            severity,
            evidence: self.evidence,
            fix,
            blocks: self.blocks.into_iter().map(|b| b.0).collect(),
        }
    }
}

/// What the running system uses the device for (`host::inuse`).
#[derive(Debug, Clone)]
pub(crate) enum InUse {
    Free,
    Used(crate::host::inuse::Inventory),
    /// The inventory could not be taken (an inconsistent sysfs): treated as used.
    Unknown(String),
    /// No use found, but some processes could not be checked for open files of it (another user's):
    /// said, not treated as used (`setup`, run as root, checks them again).
    Unverified(crate::host::inuse::Inventory),
}

impl InUse {
    pub fn of(host: &Host, addr: &str) -> InUse {
        match crate::host::inuse::inventory(host, addr) {
            Ok(inv) if inv.is_empty() && inv.unchecked.is_empty() => InUse::Free,
            Ok(inv) if inv.is_empty() => InUse::Unverified(inv),
            Ok(inv) => InUse::Used(inv),
            Err(e) => InUse::Unknown(e.to_string()),
        }
    }

    pub fn taken(&self) -> bool {
        !matches!(self, InUse::Free | InUse::Unverified(_))
    }
}

/// Everything the checks share about one PCI device.
pub(crate) struct Ctx<'a> {
    pub host: &'a Host,
    pub caller: &'a Caller,
    pub addr: PciAddress,
    pub info: DeviceInfo,
    pub driver: Option<String>,
    pub group: Option<u32>,
    /// The device's group is a vfio no-IOMMU group.
    pub noiommu_group: bool,
    pub iommus: Vec<String>,
    pub cmdline: String,
    /// The VFIO flavour this device would use: `Vfio` with an IOMMU, else `VfioNoiommu`.
    pub vfio: Via,
    pub in_use: InUse,
    /// The transfer size the user plans (`doctor --size`): no-IOMMU buffers must hold two.
    pub transfer: Option<u64>,
}

impl Ctx<'_> {
    pub fn bound_to_vfio(&self) -> bool {
        self.driver.as_deref() == Some("vfio-pci")
    }

    /// `sudo pcibench setup ADDR --vfio`.
    pub fn setup_vfio(&self) -> String {
        format!("sudo pcibench setup {} --vfio", self.addr)
    }

    pub fn setup_sysfs(&self) -> String {
        format!("sudo pcibench setup {} --sysfs-user {}", self.addr, self.caller.user)
    }

    pub fn sysfs_dir(&self) -> String {
        format!("/sys/bus/pci/devices/{}", self.addr)
    }
}

/// Diagnose `target` as the running process.
pub fn run(host: &Host, target: &Target) -> Result<Report> {
    run_as(host, target, &Caller::current())
}

/// Diagnose `target` for DMA transfers of `transfer` bytes (`doctor --size`): no-IOMMU
/// buffers are checked to hold a source and a destination of that size.
pub fn run_for(host: &Host, target: &Target, transfer: Option<u64>) -> Result<Report> {
    run_as_for(host, target, &Caller::current(), transfer)
}

/// Diagnose `target` as `caller` (tests inject uid, capabilities and limits).
pub fn run_as(host: &Host, target: &Target, caller: &Caller) -> Result<Report> {
    run_as_for(host, target, caller, None)
}

/// `run_as` for transfers of `transfer` bytes.
pub fn run_as_for(host: &Host, target: &Target, caller: &Caller, transfer: Option<u64>) -> Result<Report> {
    let addr = match target {
        Target::Sim(id) => return Ok(targets::sim_report(id.name())),
        Target::VfioUser(_) => return Ok(vfio_user_report(host, target)),
        Target::Pci(a) => *a,
    };
    let info = match crate::device::describe(host, target) {
        Ok(i) => i,
        Err(crate::Error::NoDevice(_)) => return Ok(targets::missing_report(host, &addr)),
        Err(e) => return Err(e),
    };
    let group = crate::host::state::iommu_group_of(host, &addr);
    let noiommu_group = group.is_some_and(|g| crate::host::state::group_is_noiommu(host, g));
    let iommus = crate::host::state::iommus(host);
    let has_iommu = !noiommu_group && (!iommus.is_empty() || group.is_some());
    let ctx = Ctx {
        host,
        caller,
        addr,
        driver: info.driver.clone(),
        info,
        group,
        noiommu_group,
        iommus,
        cmdline: crate::host::state::cmdline(host),
        vfio: if has_iommu { Via::Vfio } else { Via::VfioNoiommu },
        in_use: InUse::of(host, &addr.to_string()),
        transfer,
    };
    if crate::host::state::class_is_bridge(ctx.info.class_code) {
        return Ok(bridge::report(&ctx));
    }
    let mut findings = vec![device::exists(&ctx)];
    findings.extend(device::checks(&ctx));
    findings.extend(sysfs::checks(&ctx));
    findings.extend(vfio::checks(&ctx));
    findings.extend(dma::checks(&ctx));
    findings.extend(irq::checks(&ctx));
    findings.extend(device::link_checks(&ctx));
    findings.push(device::reset(&ctx));
    // With vfio-pci bound only VFIO applies; with another driver bound VFIO comes first (setup
    // rebinds it and it brings DMA); with no driver sysfs comes first (no rebinding, and WC).
    let candidates = match ctx.driver.as_deref() {
        Some("vfio-pci") => vec![ctx.vfio],
        Some(_) => vec![ctx.vfio, Via::Sysfs],
        None => vec![Via::Sysfs, ctx.vfio],
    };
    if ctx.in_use.taken() {
        return Ok(finish_in_use(addr.to_string(), findings, &ctx.in_use));
    }
    if let InUse::Unverified(inv) = &ctx.in_use {
        return Ok(finish_incomplete(addr.to_string(), findings, &candidates, inv, &ctx));
    }
    Ok(finish(addr.to_string(), findings, &candidates))
}

/// What completes an in-use check that could not look everywhere: as another user, the same check
/// as root (`sudo pcibench doctor ADDR`), a command; as root, settling what each "could not check"
/// names (their words say how) and checking again. Never "run it on the host": pcibench cannot
/// tell where it runs from a denial alone, and a container says so itself (its own PID namespace).
pub(super) fn complete_check(c: &Ctx) -> (Option<String>, String) {
    if c.caller.uid == 0 {
        (None, format!("settle what it could not check (each says how), then run pcibench doctor {} again", c.addr))
    } else {
        let cmd = format!("sudo pcibench doctor {}", c.addr);
        (Some(cmd.clone()), format!("run it as root to check every process: {cmd}"))
    }
}

/// Issues 43 and 54: a device whose in-use check is incomplete (a process, namespace, storage
/// target or block device it could not look at) is not known to be free, so nothing that takes it
/// is offered, in any form: no `setup` (binding vfio-pci, handing its files to a user), no unbind
/// or driver_override line in a fix. A path that needs nothing taken stays recommended, with the
/// warning: ready (sysfs reads of a device no driver holds), or blocked only by fixes that take
/// nothing (a group node's owner, a capability, a module). Otherwise the recommendation is to
/// complete the check. `setup` itself refuses in the same case without --force (`setup::guard`).
fn finish_incomplete(
    device: String,
    findings: Vec<Finding>,
    candidates: &[Via],
    inv: &crate::host::inuse::Inventory,
    c: &Ctx,
) -> Report {
    let untaking: Vec<Via> = candidates
        .iter()
        .copied()
        .filter(|v| !findings.iter().any(|f| f.takes && f.blocks.iter().any(|(b, _)| b == v)))
        .collect();
    if !untaking.is_empty() {
        let findings = findings
            .into_iter()
            .map(|mut f| {
                if f.takes {
                    f.fix = None;
                    f.blocks.clear();
                }
                f
            })
            .collect();
        return finish(device, findings, &untaking);
    }
    // The checks judged as ever (for the path a complete check would lead to), less every fix that
    // takes the device; the recommendation is to complete the check.
    let taking: Vec<&'static str> = findings.iter().filter(|f| f.takes).map(|f| f.name).collect();
    let mut r = finish(device, findings, candidates);
    for ch in r.checks.iter_mut().filter(|ch| taking.contains(&ch.name)) {
        ch.fix = None;
    }
    let (command, words) = complete_check(c);
    let rec = &mut r.recommended;
    rec.summary = format!(
        "none until the in-use check is complete: {} (it found no use, but what it could not check may hold the \
         device); {words}",
        inv.unchecked.words()
    );
    rec.via = None;
    rec.ready = false;
    rec.blocked_by.retain(|b| *b != "in-use");
    rec.blocked_by.insert(0, "in-use");
    rec.command = command;
    rec.then.clear();
    r
}

/// The report for a device the running system uses: the in-use check fails, nothing that would
/// take the device is offered, and the recommendation is to choose another device or free it.
fn finish_in_use(device: String, findings: Vec<Finding>, in_use: &InUse) -> Report {
    let (summary, then) = match in_use {
        InUse::Used(inv) if !inv.can_be_freed() => {
            (format!("none: the running system uses {device} ({}); pick another device", inv.summary()), Vec::new())
        }
        InUse::Used(inv) => (
            format!(
                "none: the running system uses {device} ({}); pick another device, or free it first and run \
                 pcibench doctor {device} again",
                inv.summary()
            ),
            inv.free_steps(),
        ),
        InUse::Unknown(e) => (
            format!("none: cannot tell what the running system uses {device} for ({e}); pick another device"),
            Vec::new(),
        ),
        InUse::Free | InUse::Unverified(_) => unreachable!("finish_in_use for a device not taken"),
    };
    untaken(device, findings, Severity::Fail, None, then, summary)
}

/// A report that offers nothing that takes the device: in-use judged `in_use`, every other check as
/// found, no fix that takes it, no path; `command` and `then` only what frees it or completes the check.
fn untaken(
    device: String,
    findings: Vec<Finding>,
    in_use: Severity,
    command: Option<String>,
    then: Vec<String>,
    summary: String,
) -> Report {
    let checks: Vec<Check> = findings
        .into_iter()
        .map(|f| {
            let severity = if f.name == "in-use" { in_use } else { f.base };
            let takes = f.takes;
            f.judged(severity, takes)
        })
        .collect();
    let worst = checks.iter().map(|c| c.severity).max().unwrap_or(Severity::Pass);
    Report {
        device,
        checks,
        recommended: Recommendation {
            via: None,
            goal: None,
            ready: false,
            blocked_by: vec!["in-use"],
            command,
            then,
            summary,
        },
        worst,
    }
}

/// Pick the path, then turn findings into checks: blockers of the chosen path fail.
fn finish(device: String, findings: Vec<Finding>, candidates: &[Via]) -> Report {
    let blockers =
        |via: Via| -> Vec<&Finding> { findings.iter().filter(|f| f.blocks.iter().any(|(v, _)| *v == via)).collect() };
    let command_for = |f: &Finding, via: Via| f.blocks.iter().find(|(v, _)| *v == via).and_then(|(_, c)| c.clone());
    let ready = candidates.iter().copied().find(|v| blockers(*v).is_empty());
    let fixable = candidates.iter().copied().find(|v| blockers(*v).iter().all(|f| command_for(f, *v).is_some()));
    // Candidates are never empty (every device has a VFIO flavour); sysfs is a harmless default.
    let goal = ready.or(fixable).or(candidates.last().copied()).unwrap_or(Via::Sysfs);
    let recommended = match ready {
        Some(v) => Recommendation {
            via: Some(v),
            goal: Some(v),
            ready: true,
            blocked_by: Vec::new(),
            command: Some(format!("pcibench pio {device} --via {v}")),
            then: Vec::new(),
            summary: format!("{v}: ready"),
        },
        None => {
            let g = goal;
            let bs = blockers(g);
            let mut cmds: Vec<String> = Vec::new();
            for c in bs.iter().filter_map(|f| command_for(f, g)) {
                if !cmds.contains(&c) {
                    cmds.push(c);
                }
            }
            let names: Vec<&'static str> = bs.iter().map(|f| f.name).collect();
            let command = (!cmds.is_empty()).then(|| cmds.remove(0));
            let summary = if command.is_some() {
                format!("none until you fix {} (then {g})", names.join(", "))
            } else {
                format!("none until you fix {} (no command can: see its fix)", names.join(", "))
            };
            Recommendation { via: None, goal: Some(g), ready: false, blocked_by: names, command, then: cmds, summary }
        }
    };
    let checks: Vec<Check> = findings
        .into_iter()
        .map(|f| {
            let blocks_goal = !recommended.ready && f.blocks.iter().any(|(v, _)| Some(*v) == recommended.goal);
            let mut severity = if blocks_goal { Severity::Fail } else { f.base };
            if f.dma_only && recommended.goal == Some(Via::Sysfs) && severity == Severity::Warn {
                severity = Severity::Info;
            }
            f.judged(severity, false)
        })
        .collect();
    let worst = checks.iter().map(|c| c.severity).max().unwrap_or(Severity::Pass);
    Report { device, checks, recommended, worst }
}

/// Every check name, in report order (the sim card reports each as information).
pub const CHECK_NAMES: [&str; 21] = [
    "device",
    "driver",
    "in-use",
    "memory-space",
    "bus-master",
    "resource-files",
    "lockdown",
    "strict-devmem",
    "iommu",
    "iommu-group",
    "vfio-modules",
    "noiommu-mode",
    "vfio-nodes",
    "cap-sys-rawio",
    "memlock",
    "hugepages",
    "interrupts",
    "intx-mask",
    "link",
    "aer",
    "reset",
];

/// A vfio-user device: reachable when its server answers; nothing of the host's applies.
fn vfio_user_report(host: &Host, target: &Target) -> Report {
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
    let mut checks = vec![check];
    if ready {
        checks.push(irq::served(&name[crate::device::VFIO_USER_PREFIX.len()..]));
    }
    Report {
        device: name.clone(),
        checks,
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
