//! Giving a user the sysfs path: the resourceN / resourceN_wc files (what the seeds'
//! set_pci_resource_user_permission.sh did) and Memory Space Enable in the command register.
//!
//! Only for a device with no driver (a driver owns its BARs) and Bus Master off: the user may
//! then read and write the device's registers but cannot make it DMA, since the command register
//! (config space) stays root's. With Bus Master on, whoever writes the registers of a DMA engine
//! can point it at any host address, so that is refused rather than warned about.

use super::record;
use super::{Change, SetupOptions, User};
use crate::device::Target;
use crate::host::state::{device_dir, driver_of};
use crate::host::Host;
use crate::pci::config::{CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
use crate::pci::PciAddress;
use crate::{Error, Result};
use std::path::Path;

/// chown the BAR files to `user` (a name, uid or uid:gid), make them read+write for their
/// owner, and set Memory Space Enable through the `config` file if it is clear; each original
/// owner, mode and command register is recorded for `--release`.
pub fn sysfs_user(host: &Host, addr: &PciAddress, user: &str, opts: &SetupOptions) -> Result<Vec<Change>> {
    super::refuse_elevated()?;
    let info = crate::device::describe(host, &Target::Pci(*addr))?;
    let u = User::resolve(host, user)?;
    // Giving a user the BARs of a device the system uses lets one write corrupt it. Checked before
    // the driver, whose refusal offers VFIO, which a device in use would be refused as well.
    let mut ch = super::guard(host, addr, &format!("give {} the BARs of {addr}", u.name), opts)?;
    if let Some(d) = driver_of(host, &addr.to_string()) {
        let instead = if d == "vfio-pci" {
            format!("give it back first (sudo pcibench setup {addr} --release), or use VFIO: sudo pcibench setup {addr} --vfio --user {}", u.name)
        } else {
            format!("use VFIO instead (sudo pcibench setup {addr} --vfio --user {}), which unbinds it", u.name)
        };
        return Err(Error::Refused(format!(
            "refusing to give {} the BARs of {addr}: it is bound to {d}, which owns them (writes through the resource \
             files would race the driver); --sysfs-user is for a device with no driver: {instead}",
            u.name
        )));
    }
    let dir = device_dir(host, addr);
    let config = dir.join("config");
    let cmd = command(&config)?;
    if cmd & CMD_BUS_MASTER != 0 {
        return Err(Error::Refused(format!(
            "refusing to give {} the BARs of {addr}: Bus Master is on (command {cmd:#06x}), so whoever writes its \
             registers can make it DMA to any host address; clear it first (sudo setpci -s {addr} COMMAND=0:4), or \
             use VFIO, which confines DMA to the IOMMU: sudo pcibench setup {addr} --vfio --user {}",
            u.name, u.name
        )));
    }
    let mut rec = record::load(host, addr)?;
    let mut chowned = Vec::new();
    let mut chmodded = Vec::new();
    for name in info.bars.iter().flat_map(|b| b.files.iter()) {
        let p = dir.join(name);
        let shown = format!("/sys/bus/pci/devices/{addr}/{name}");
        let (chown, chmod) = super::give(host, addr, opts, &mut rec, &p, &shown, &u)?;
        if chown {
            chowned.push(name.as_str());
        }
        if chmod {
            chmodded.push(name.as_str());
        }
    }
    if !chowned.is_empty() {
        ch.push(Change::warn(
            format!("gave {} ({}:{}) {} (chown)", u.name, u.uid, u.gid, chowned.join(", ")),
            format!(
                "{} can now read and write {addr}'s registers and memory through these files (Bus Master stays off and \
                 config space root's, so not DMA); take it back with: sudo pcibench setup {addr} --release",
                u.name
            ),
        ));
    }
    if !chmodded.is_empty() {
        ch.push(Change::new(format!("made {} read+write for their owner (chmod u+rw)", chmodded.join(", "))));
    }
    if info.bars.iter().any(|b| b.is_memory()) && cmd & CMD_MEMORY == 0 {
        rec.command.get_or_insert(cmd);
        record::save(host, addr, &rec)?;
        let new = cmd | CMD_MEMORY;
        write_command(&config, new, opts)?;
        ch.push(Change::new(format!("enabled Memory Space (command {cmd:#06x} -> {new:#06x})")));
    }
    Ok(ch)
}

/// The 16-bit command register from the device's `config` file.
fn command(config: &Path) -> Result<u16> {
    let bytes = crate::file::read(config, 4096).map_err(|e| Error::io("cannot read", config, e))?;
    let Some(raw) = bytes.get(COMMAND..COMMAND + 2) else {
        return Err(Error::Device(format!("{} is shorter than the PCI header", config.display())));
    };
    Ok(u16::from_le_bytes([raw[0], raw[1]]))
}

/// Memory Space Enable (command register bit 1): without it the device ignores memory cycles
/// and BAR reads return all-ones. The register is written whole, the other bits as read.
fn write_command(config: &Path, new: u16, opts: &SetupOptions) -> Result<()> {
    opts.system.write_at(config, COMMAND as u64, &new.to_le_bytes()).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            "kernel lockdown refuses config-space writes even for root (check /sys/kernel/security/lockdown): use VFIO"
        } else {
            "see dmesg | tail"
        };
        Error::io_hint("cannot write the command register in", config, e, hint)
    })
}

/// `--release`: Memory Space as it was before `sysfs_user` (`before`, the recorded register),
/// the other bits as they are now.
pub(crate) fn restore_memory(config: &Path, before: u16, opts: &SetupOptions) -> Result<Option<Change>> {
    let now = command(config)?;
    let new = (now & !CMD_MEMORY) | (before & CMD_MEMORY);
    if new == now {
        return Ok(None);
    }
    write_command(config, new, opts)?;
    Ok(Some(Change::new(format!("restored Memory Space as it was (command {now:#06x} -> {new:#06x})"))))
}
