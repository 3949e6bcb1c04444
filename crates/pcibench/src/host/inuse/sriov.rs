//! SR-IOV: a physical function with virtual functions enabled (`sriov_numvfs` > 0,
//! Documentation/ABI/testing/sysfs-bus-pci) takes them with it when its driver lets go (the PF
//! driver's remove disables SR-IOV, which removes every VF: drivers/pci/iov.c, sriov_disable). So
//! the PF is in use while any of its VFs (the `virtfnN` links in its directory) is bound to a driver
//! or in use by the other rules of the inventory; each such VF is named.

use super::procs::ProcScan;
use super::walk::{entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::Error;

/// VFs named one by one; the rest are counted.
const NAMED: usize = 16;

pub(super) fn holders(scope: &Scope, scan: &ProcScan) -> Result<Vec<Holder>, Error> {
    let numvfs = read_trim(&scope.dir.join("sriov_numvfs")).and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
    if numvfs == 0 {
        return Ok(Vec::new());
    }
    let mut vfs = Vec::new();
    for (name, link) in entries(&scope.dir)? {
        let Some(i) = name.strip_prefix("virtfn").and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some(dir) = resolve(&link)? {
            vfs.push((i, dir));
        }
    }
    vfs.sort();
    let pf = &scope.addr;
    let mut out = Vec::new();
    let mut more = 0;
    for (i, dir) in vfs {
        let vf = name_of(&dir);
        let driver = resolve(&dir.join("driver"))?.map(|d| name_of(&d));
        // A VF has no VFs of its own: its inventory stops there.
        let inv = super::inventory_in(scope.host, &vf, scan, false)?;
        if driver.is_none() && inv.is_empty() {
            continue;
        }
        if out.len() >= NAMED {
            more += 1;
            continue;
        }
        let mut uses: Vec<String> = driver.iter().map(|d| format!("is bound to {d}")).collect();
        uses.extend(inv.reasons().iter().map(|r| r.to_string()));
        let mut free = inv.free_steps();
        free.push(format!("echo 0 | sudo tee /sys/bus/pci/devices/{pf}/sriov_numvfs (removes its virtual functions)"));
        let removes = if numvfs == 1 {
            "its virtual function".to_string()
        } else {
            format!("all {numvfs} of its virtual functions")
        };
        out.push(Holder {
            kind: HolderKind::Sriov,
            why: format!(
                "its SR-IOV virtual function {vf} (virtfn{i}) {}; taking {pf} from its driver removes {removes}",
                uses.join(", ")
            ),
            free,
        });
    }
    if more > 0 {
        out.push(Holder {
            kind: HolderKind::Sriov,
            why: format!("{more} more of its SR-IOV virtual functions are in use"),
            free: vec![format!(
                "echo 0 | sudo tee /sys/bus/pci/devices/{pf}/sriov_numvfs (removes its virtual functions)"
            )],
        });
    }
    Ok(out)
}
