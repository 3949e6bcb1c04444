//! Giving a user the sysfs path: the resourceN / resourceN_wc files (what the seeds'
//! set_pci_resource_user_permission.sh did) and Memory Space Enable in the command register.

use super::{Change, SetupOptions, User};
use crate::host::state::{device_dir, driver_of};
use crate::host::Host;
use crate::pci::config::{CMD_MEMORY, COMMAND};
use crate::pci::PciAddress;
use crate::target::Target;
use crate::{Error, Result};
use std::fs;

/// chown the BAR files to `user` (a name, uid or uid:gid), make them read+write for their
/// owner, and set Memory Space Enable through the `config` file if it is clear.
pub fn sysfs_user(host: &Host, addr: &PciAddress, user: &str, opts: &SetupOptions) -> Result<Vec<Change>> {
    let info = crate::target::describe(host, &Target::Pci(*addr))?;
    let u = User::resolve(host, user)?;
    // Giving a user the BARs of a device the system uses lets one write corrupt it.
    let mut ch = super::guard(host, addr, &format!("give {} the BARs of {addr}", u.name), opts)?;
    let dir = device_dir(host, addr);
    let mut chowned = Vec::new();
    let mut chmodded = Vec::new();
    for name in info.bars.iter().flat_map(|b| b.files.iter()) {
        let p = dir.join(name);
        let (uid, gid, mode) = opts.system.owner(&p).map_err(|e| Error::io("cannot read the owner of", &p, e))?;
        if uid != u.uid || gid != u.gid {
            opts.system.chown(&p, u.uid, u.gid).map_err(|e| {
                Error::io_hint("cannot chown", &p, e, "run it as root: sudo pcibench setup ... --sysfs-user USER")
            })?;
            chowned.push(name.as_str());
        }
        if mode & 0o600 != 0o600 {
            opts.system.chmod(&p, mode | 0o600).map_err(|e| Error::io("cannot chmod", &p, e))?;
            chmodded.push(name.as_str());
        }
    }
    if !chowned.is_empty() {
        let what = format!("gave {} ({}:{}) {} (chown)", u.name, u.uid, u.gid, chowned.join(", "));
        ch.push(match driver_of(host, &addr.to_string()).filter(|d| d != "vfio-pci") {
            Some(d) => Change::warn(what, format!("{d} is bound: pcibench will not write to its BARs while it is")),
            None => Change::new(what),
        });
    }
    if !chmodded.is_empty() {
        ch.push(Change::new(format!("made {} read+write for their owner (chmod u+rw)", chmodded.join(", "))));
    }
    if info.bars.iter().any(|b| b.is_memory()) {
        if let Some(c) = enable_memory(&dir.join("config"), opts)? {
            ch.push(c);
        }
    }
    Ok(ch)
}

/// Memory Space Enable (command register bit 1): without it the device ignores memory cycles
/// and BAR reads return all-ones. A read-modify-write of the 16-bit register keeps the other bits.
fn enable_memory(config: &std::path::Path, opts: &SetupOptions) -> Result<Option<Change>> {
    let bytes = fs::read(config).map_err(|e| Error::io("cannot read", config, e))?;
    let Some(raw) = bytes.get(COMMAND..COMMAND + 2) else {
        return Err(Error::Device(format!("{} is shorter than the PCI header", config.display())));
    };
    let cmd = u16::from_le_bytes([raw[0], raw[1]]);
    if cmd & CMD_MEMORY != 0 {
        return Ok(None);
    }
    let new = cmd | CMD_MEMORY;
    opts.system.write_at(config, COMMAND as u64, &new.to_le_bytes()).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            "kernel lockdown refuses config-space writes even for root (check /sys/kernel/security/lockdown): use VFIO"
        } else {
            "see dmesg | tail"
        };
        Error::io_hint("cannot write the command register in", config, e, hint)
    })?;
    Ok(Some(Change::new(format!("enabled Memory Space (command {cmd:#06x} -> {new:#06x})"))))
}
