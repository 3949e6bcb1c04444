//! `setup --id VID[:DID] --vfio` (and `--release`): every function with those ids at once, as
//! fpga_sio's bind_device_to_vfio.sh binds every device of a vendor. All or nothing before
//! anything changes: every member of every IOMMU group those functions are in is checked with
//! `host::inuse` (the group node opens them all), and one in use refuses the whole command,
//! naming each; bridges are skipped (vfio-pci takes endpoints only). A group member that does not
//! match and stays bound to another driver is named: VFIO opens a group only when every member is
//! bound to vfio-pci or to no driver (Documentation/driver-api/vfio.rst, "viable" groups).

use super::{Change, SetupOptions};
use crate::host::state::{class_is_bridge, class_of, driver_of, group_members, iommu_group_of};
use crate::host::Host;
use crate::pci::{sysfs::Detail, IdFilter, PciAddress};
use crate::{Error, Result};

/// What one function of an `--id` run got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Each {
    pub device: String,
    pub changes: Vec<Change>,
}

fn words(f: &IdFilter) -> String {
    let part = |v: Option<u16>| v.map_or("*".to_string(), |v| format!("{v:04x}"));
    match f.device {
        Some(_) => format!("{}:{}", part(f.vendor), part(f.device)),
        None => part(f.vendor),
    }
}

/// The endpoints with these ids, and a note for each bridge that matched too.
fn matching(host: &Host, ids: &IdFilter) -> Result<(Vec<PciAddress>, Vec<Change>)> {
    let (found, _) = crate::pci::list(host, Some(*ids), None, Detail::Summary)?;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for d in found.iter().filter(|d| !d.simulated) {
        let Ok(a) = d.address.parse::<PciAddress>() else { continue };
        if class_is_bridge(d.class_code) {
            notes.push(Change::note(format!("skipped {a}: a PCI bridge, which vfio-pci does not take"), None));
        } else {
            out.push(a);
        }
    }
    if out.is_empty() {
        return Err(Error::NoDevice(format!("with ids {} (no endpoint matches --id {})", words(ids), words(ids))));
    }
    Ok((out, notes))
}

/// Bind every endpoint with `ids` to vfio-pci (see the module docs).
pub fn vfio_by_id(host: &Host, ids: &IdFilter, opts: &SetupOptions) -> Result<Vec<Each>> {
    super::refuse_elevated()?;
    let (targets, mut first) = matching(host, ids)?;
    let mut members: Vec<String> = Vec::new();
    for t in &targets {
        match iommu_group_of(host, t) {
            Some(g) => members.extend(group_members(host, g)),
            None => members.push(t.to_string()),
        }
    }
    members.sort();
    members.dedup();
    first.extend(check_members(host, ids, &targets, &members, opts)?);
    let mut out = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let mut changes = if i == 0 { std::mem::take(&mut first) } else { Vec::new() };
        match super::vfio::vfio_checked(host, t, opts) {
            Ok(c) => changes.extend(c),
            Err(e) => {
                let done: Vec<String> = out.iter().map(|e: &Each| e.device.clone()).collect();
                let back = if done.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; bound so far: {} (sudo pcibench setup --id {} --release gives them back)",
                        done.join(", "),
                        words(ids)
                    )
                };
                return Err(Error::Device(format!("{t}: {e}{back}")));
            }
        }
        out.push(Each { device: t.to_string(), changes });
    }
    Ok(out)
}

/// Every group member checked before anything changes: one in use refuses the command (naming
/// each), `force` goes ahead saying what it overrides; a member that stays with another driver is
/// named.
fn check_members(
    host: &Host,
    ids: &IdFilter,
    targets: &[PciAddress],
    members: &[String],
    opts: &SetupOptions,
) -> Result<Vec<Change>> {
    let mut used = Vec::new();
    let mut unknown = Vec::new();
    let mut notes = Vec::new();
    for m in members {
        match crate::host::inuse::inventory(host, m) {
            Ok(inv) if inv.is_empty() && inv.unchecked.is_empty() => {}
            Ok(inv) if inv.is_empty() => unknown.push(format!("{m} ({})", inv.unchecked.words())),
            Ok(inv) => used.push(format!("{m} ({})", inv.summary())),
            Err(e) => used.push(format!("{m} (cannot tell what uses it: {e})")),
        }
        let taken = targets.iter().any(|t| t.to_string() == *m);
        let bridge = class_of(host, m).is_some_and(class_is_bridge);
        if let Some(d) = driver_of(host, m).filter(|d| !taken && !bridge && d != "vfio-pci") {
            notes.push(Change::note(
                format!(
                    "{m} shares an IOMMU group with them and stays bound to {d}: VFIO opens the group only once it is \
                     bound to vfio-pci too (sudo pcibench setup {m} --vfio)"
                ),
                None,
            ));
        }
    }
    let n = targets.len();
    let action = format!("bind the {n} function{} with ids {} to vfio-pci", if n == 1 { "" } else { "s" }, words(ids));
    if !opts.force && !used.is_empty() {
        return Err(Error::Refused(format!(
            "refusing to {action}: the running system uses {}; nothing was changed: free them first or narrow --id \
             (VID:DID); --force takes them anyway",
            used.join("; ")
        )));
    }
    if !opts.force && !unknown.is_empty() {
        return Err(Error::Refused(format!(
            "refusing to {action}: cannot tell whether a process holds {}; nothing was changed; --force takes them \
             without knowing",
            unknown.join("; ")
        )));
    }
    let mut ch = Vec::new();
    for what in used.iter().chain(&unknown).map(|u| format!("--force: went ahead although the system uses {u}")) {
        if let Some(n) = &opts.notify {
            n(&what);
        }
        ch.push(Change::warn(what, super::FORCE_WARNING));
    }
    ch.extend(notes);
    Ok(ch)
}

/// `--release` for every endpoint with `ids` that setup bound or changed.
pub fn release_by_id(host: &Host, ids: &IdFilter, opts: &SetupOptions) -> Result<Vec<Each>> {
    super::refuse_elevated()?;
    let (targets, _) = matching(host, ids)?;
    let mut out = Vec::new();
    for t in targets {
        let changes = super::vfio::release(host, &t, opts).map_err(|e| Error::Device(format!("{t}: {e}")))?;
        out.push(Each { device: t.to_string(), changes });
    }
    Ok(out)
}
