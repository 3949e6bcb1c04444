//! References the kernel counts on the drivers bound to the function (or to devices below it:
//! virtio_blk under virtio-pci): a module's `refcnt` (/sys/module/NAME/refcnt, modules only, not
//! built-in drivers) minus the modules that depend on it (/sys/module/NAME/holders/) is what
//! processes and kernel users hold (an open /dev/uio0, a block device opened by a filesystem).
//! Counted only when every device the driver serves is below the function, so the references
//! must be this device's.

use super::walk::{dirs_below, entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::Error;
use std::path::PathBuf;

/// How far below the function to look for child devices with drivers (pci → virtio0 → block → vda).
const DEPTH: usize = 4;

pub(super) fn holders(scope: &Scope) -> Result<Vec<Holder>, Error> {
    let mut devices: Vec<PathBuf> = vec![scope.dir.clone()];
    devices.extend(dirs_below(&scope.dir, DEPTH)?);
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for d in devices {
        let Some(drv) = resolve(&d.join("driver"))? else { continue };
        let name = name_of(&drv);
        // vfio-pci hands the device to user space: who holds it is `setup --release`'s business.
        if name == "vfio-pci" || seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let Some(module) = resolve(&drv.join("module"))? else { continue };
        let Some(refcnt) = read_trim(&module.join("refcnt")).and_then(|r| r.parse::<u64>().ok()) else { continue };
        let dependents = entries(&module.join("holders"))?.len() as u64;
        if refcnt <= dependents {
            continue;
        }
        // Every device this driver serves must be ours, or the references may be another's.
        let mut served = 0;
        let mut all_ours = true;
        for (entry, p) in entries(&drv)? {
            if entry == "module" || !std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                continue;
            }
            let Some(real) = resolve(&p)? else { continue };
            if real.join("uevent").exists() || real.join("subsystem").exists() {
                served += 1;
                all_ours &= real.starts_with(&scope.dir);
            }
        }
        if served == 0 || !all_ours {
            continue;
        }
        let module_name = name_of(&module);
        let users = refcnt - dependents;
        out.push(Holder {
            kind: HolderKind::Driver,
            why: format!(
                "its driver {name} is held: module {module_name} has {users} reference{} beyond the modules that \
                 depend on it (a process or a kernel user has it open), which pcibench could not attribute to \
                 any use it found",
                if users == 1 { "" } else { "s" }
            ),
            free: vec![format!("find who: lsof or fuser on its device nodes; stop it first")],
        });
    }
    Ok(out)
}
