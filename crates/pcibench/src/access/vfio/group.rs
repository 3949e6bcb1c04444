//! VFIO groups: /dev/vfio/N behind an IOMMU, /dev/vfio/noiommu-N without one. Opening, the
//! viability check, attaching to a container, and the device fd; every failure names its cause
//! (other devices in the group, the process holding it, a missing capability or permission).

use super::container::Container;
use super::ioctl;
use crate::host::inuse::{self, GroupUsers};
use crate::host::{state, Host};
use crate::pci::PciAddress;
use crate::{Error, Result};
use rustix::io::Errno;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    /// A real IOMMU group: VFIO type1.
    Iommu,
    /// A fake group vfio makes in no-IOMMU mode (drivers/vfio/group.c vfio_noiommu_group_alloc).
    NoIommu,
}

pub struct Group {
    file: File,
    number: u32,
    kind: GroupKind,
    /// The node as the kernel names it (/dev/vfio/N), for messages and /proc/*/fd matching.
    node: PathBuf,
}

/// The device's group number and kind, from its iommu_group link and which /dev/vfio node exists.
pub fn locate(host: &Host, addr: &PciAddress) -> Result<(u32, GroupKind, PathBuf)> {
    let link = state::link_name(&state::device_dir(host, addr).join("iommu_group"));
    if let Some(name) = link.as_deref().filter(|l| l.parse::<u32>().is_err()) {
        // A link that is there but names no group is a broken tree, not a host without an IOMMU.
        return Err(Error::Sysfs(format!(
            "{addr}'s iommu_group link points to {:?}, which is not an IOMMU group number: sysfs is inconsistent here (ls -l {}); nothing was opened",
            crate::text::clip(name, 64),
            state::device_dir(host, addr).join("iommu_group").display()
        )));
    }
    let n: u32 = state::iommu_group_of(host, addr).ok_or_else(|| {
        Error::Unsupported(format!(
            "{addr} has no IOMMU group: this host has no IOMMU (or it is off) and the device is not bound to vfio-pci in no-IOMMU mode: enable the IOMMU (intel_iommu=on / amd_iommu=on), or bind it with no-IOMMU mode on: sudo pcibench setup {addr} --vfio"
        ))
    })?;
    let noiommu = PathBuf::from(format!("/dev/vfio/noiommu-{n}"));
    let iommu = PathBuf::from(format!("/dev/vfio/{n}"));
    if state::group_is_noiommu(host, n) && host.path(&noiommu).exists() {
        Ok((n, GroupKind::NoIommu, noiommu))
    } else if host.path(&iommu).exists() {
        Ok((n, GroupKind::Iommu, iommu))
    } else if state::driver_of(host, &addr.to_string()).as_deref() == Some("vfio-pci") {
        // Bound, yet no node: the binding is done; what is missing is /dev (devtmpfs or udev).
        Err(Error::Unsupported(format!(
            "{addr} is bound to vfio-pci in IOMMU group {n} but neither {} nor {} exists: is devtmpfs mounted on /dev (mount -t devtmpfs devtmpfs /dev), or did udev remove the node? ls -l /dev/vfio shows what is there",
            iommu.display(),
            noiommu.display()
        )))
    } else {
        Err(Error::Unsupported(format!(
            "{addr} is in IOMMU group {n} but neither {} nor {} exists: bind it to vfio-pci: sudo pcibench setup {addr} --vfio",
            iommu.display(),
            noiommu.display()
        )))
    }
}

/// Devices in group `n` and their drivers, from /sys/kernel/iommu_groups/N/devices.
pub fn members(host: &Host, n: u32) -> Vec<(String, Option<String>)> {
    let dir = host.path(format!("/sys/kernel/iommu_groups/{n}/devices"));
    let mut v: Vec<(String, Option<String>)> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| (e.file_name().to_string_lossy().into_owned(), state::link_name(&e.path().join("driver"))))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Why group `n` is not viable: the members bound to drivers VFIO does not accept.
/// (drivers/vfio/group.c: every device must be bound to a vfio driver, unbound, pci-stub, or a bridge.)
pub fn not_viable_message(n: u32, addr: &PciAddress, members: &[(String, Option<String>)]) -> String {
    let blockers: Vec<String> = members
        .iter()
        .filter(|(a, d)| {
            *a != addr.to_string() && d.as_deref().is_some_and(|d| !matches!(d, "vfio-pci" | "pci-stub" | "pcieport"))
        })
        .map(|(a, d)| format!("{a} (bound to {})", d.as_deref().unwrap_or("")))
        .collect();
    if blockers.is_empty() {
        return format!(
            "VFIO group {n} of {addr} is not viable: every device in /sys/kernel/iommu_groups/{n}/devices must be bound to vfio-pci or to no driver: check them with pcibench doctor {addr}"
        );
    }
    let first = blockers[0].split(' ').next().unwrap_or("").to_string();
    format!(
        "VFIO group {n} of {addr} is not viable: other devices in it have kernel drivers: {}: bind each to vfio-pci too (e.g. sudo pcibench setup {first} --vfio), or move the card to a slot with its own IOMMU group",
        blockers.join(", ")
    )
}

/// Why opening the group node failed, and the fix (EBUSY is `busy_message`'s).
pub fn open_error_hint(errno: Option<Errno>, kind: GroupKind, node: &Path, addr: &PciAddress) -> String {
    match errno {
        Some(Errno::PERM) if kind == GroupKind::NoIommu => state::setcap_hint(),
        Some(Errno::ACCESS | Errno::PERM) => format!(
            "no permission on {}: sudo pcibench setup {addr} --vfio (gives your user the group), or run as root",
            node.display()
        ),
        Some(Errno::NOENT) => format!("bind {addr} to vfio-pci: sudo pcibench setup {addr} --vfio"),
        _ => format!("see pcibench doctor {addr}"),
    }
}

/// The one line for a group another process has: who, when they can be seen ("PID 258 (qemu) for
/// reading and writing"), else why they cannot. VFIO lets one process have a group at a time
/// (drivers/vfio/vfio_main.c, vfio_group_fops_open: EBUSY while `opened_file` is set), and a device
/// fd keeps its group's file open even after the group fd is closed.
pub fn busy_message(addr: &PciAddress, n: u32, node: &Path, users: Option<&GroupUsers>) -> String {
    let node = node.display();
    let who = match users {
        Some(u) if !u.how.is_empty() => format!("{node} is held open by {}", u.how.join(", ")),
        Some(u) if !u.unchecked.is_empty() => format!(
            "another process holds VFIO group {n} ({node}) or one of its devices; pcibench {}",
            u.unchecked.words()
        ),
        _ => format!(
            "another process holds VFIO group {n} ({node}) through a device it opened (it keeps the group open after \
             closing {node}); lsof | grep vfio shows which"
        ),
    };
    format!("{addr} is in use: {who}: pcibench will not open it a second time; wait for it to finish, or stop it")
}

impl Group {
    /// Open the group of `addr` and check it is viable. A group another process holds (a VM,
    /// another pcibench) is refused before it is opened, naming who holds it.
    pub fn open(host: &Host, addr: &PciAddress) -> Result<Group> {
        let (number, kind, node) = locate(host, addr)?;
        let users = inuse::vfio_group_users(host, &addr.to_string());
        if let Some(u) = users.as_ref().filter(|u| !u.who.is_empty()) {
            return Err(Error::Refused(busy_message(addr, number, &node, Some(u))));
        }
        let path = host.path(&node);
        let file = host.open_node(&path, OpenOptions::new().read(true).write(true)).map_err(|e| {
            let errno = Errno::from_io_error(&e);
            if errno == Some(Errno::BUSY) {
                // Taken since the scan, or by a process this user cannot see.
                return Error::Refused(busy_message(addr, number, &node, users.as_ref()));
            }
            let hint = open_error_hint(errno, kind, &node, addr);
            Error::io_hint("cannot open VFIO group", &path, e, hint)
        })?;
        let flags = ioctl::group_status(&file).map_err(|e| Error::io("VFIO_GROUP_GET_STATUS failed on", &path, e))?;
        if flags & ioctl::VFIO_GROUP_FLAGS_VIABLE == 0 {
            return Err(Error::Refused(not_viable_message(number, addr, &members(host, number))));
        }
        Ok(Group { file, number, kind, node })
    }

    pub fn number(&self) -> u32 {
        self.number
    }

    pub fn kind(&self) -> GroupKind {
        self.kind
    }

    pub fn node(&self) -> &Path {
        &self.node
    }

    /// VFIO_GROUP_SET_CONTAINER.
    pub fn attach(&self, container: &Container) -> Result<()> {
        ioctl::group_set_container(&self.file, container.file()).map_err(|e| {
            let hint = match (Errno::from_io_error(&e), self.kind) {
                (Some(Errno::PERM), GroupKind::NoIommu) => state::setcap_hint(),
                _ => "the group may already belong to another container".to_string(),
            };
            Error::io_hint("VFIO_GROUP_SET_CONTAINER failed for", &self.node, e, hint)
        })
    }

    /// VFIO_GROUP_GET_DEVICE_FD for `addr`.
    pub fn device_fd(&self, addr: &PciAddress) -> Result<File> {
        let name = CString::new(addr.to_string()).map_err(|_| Error::usage("device address contains NUL"))?;
        ioctl::group_get_device_fd(&self.file, &name).map_err(|e| {
            let hint = match (Errno::from_io_error(&e), self.kind) {
                (Some(Errno::PERM), GroupKind::NoIommu) => state::setcap_hint(),
                (Some(Errno::BUSY), _) => format!("{addr} is already open (in this process or another)"),
                _ => format!(
                    "is {addr} in group {} and bound to vfio-pci? sudo pcibench setup {addr} --vfio",
                    self.number
                ),
            };
            Error::io_hint("VFIO_GROUP_GET_DEVICE_FD failed for", &self.node, e, hint)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn addr() -> PciAddress {
        "0000:00:04.0".parse().unwrap()
    }

    #[test]
    fn locates_iommu_and_noiommu_groups() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let dev = host.path("/sys/bus/pci/devices/0000:00:04.0");
        fs::create_dir_all(&dev).unwrap();
        let e = locate(&host, &addr()).unwrap_err().to_string();
        assert!(e.contains("no IOMMU group"), "{e}");
        fs::create_dir_all(host.path("/sys/kernel/iommu_groups/3")).unwrap();
        symlink(host.path("/sys/kernel/iommu_groups/3"), dev.join("iommu_group")).unwrap();
        let e = locate(&host, &addr()).unwrap_err().to_string();
        assert!(e.contains("sudo pcibench setup 0000:00:04.0 --vfio"), "{e}");
        fs::create_dir_all(host.path("/dev/vfio")).unwrap();
        fs::write(host.path("/dev/vfio/3"), "").unwrap();
        assert_eq!(locate(&host, &addr()).unwrap(), (3, GroupKind::Iommu, PathBuf::from("/dev/vfio/3")));
        fs::write(host.path("/dev/vfio/noiommu-3"), "").unwrap();
        assert_eq!(locate(&host, &addr()).unwrap().1, GroupKind::NoIommu);
    }

    #[test]
    fn a_group_another_process_holds_is_refused_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let dev = host.path("/sys/bus/pci/devices/0000:00:04.0");
        fs::create_dir_all(&dev).unwrap();
        fs::create_dir_all(host.path("/sys/kernel/iommu_groups/7")).unwrap();
        symlink(host.path("/sys/kernel/iommu_groups/7"), dev.join("iommu_group")).unwrap();
        fs::create_dir_all(host.path("/dev/vfio")).unwrap();
        // The group's node by its device number (a fixture's node: tests cannot mknod).
        fs::write(host.path("/dev/vfio/7"), "char 511:3\n").unwrap();
        // /dev/vfio/vfio (the container) is another node: holding it is no hold on the group.
        fs::write(host.path("/dev/vfio/vfio"), "char 10:196\n").unwrap();
        for (pid, comm, target, flags) in [
            (1234, "qemu-system-x86", "/dev/vfio/7", "02"),
            (99, "bash", "/dev/vfio/vfio", "02"),
            (98, "cat", "/dev/null", "0"),
        ] {
            let fd = host.path(format!("/proc/{pid}/fd"));
            fs::create_dir_all(&fd).unwrap();
            symlink(target, fd.join("5")).unwrap();
            fs::create_dir_all(host.path(format!("/proc/{pid}/fdinfo"))).unwrap();
            fs::write(host.path(format!("/proc/{pid}/fdinfo/5")), format!("pos:\t0\nflags:\t{flags}\n")).unwrap();
            fs::write(host.path(format!("/proc/{pid}/comm")), format!("{comm}\n")).unwrap();
        }
        let u = inuse::vfio_group_users(&host, "0000:00:04.0").unwrap();
        assert_eq!(u.who, ["PID 1234 (qemu-system-x86)"]);
        let e = Group::open(&host, &addr()).err().unwrap().to_string();
        assert_eq!(
            e,
            "0000:00:04.0 is in use: /dev/vfio/7 is held open by PID 1234 (qemu-system-x86) for reading and writing: \
             pcibench will not open it a second time; wait for it to finish, or stop it"
        );
        // EBUSY with nobody in sight: the device fd case, and the command that finds it.
        let msg = busy_message(&addr(), 7, Path::new("/dev/vfio/7"), None);
        assert!(
            msg.starts_with(
                "0000:00:04.0 is in use: another process holds VFIO group 7 (/dev/vfio/7) through a device"
            ),
            "{msg}"
        );
    }

    #[test]
    fn permission_errors_name_the_fix() {
        let node = Path::new("/dev/vfio/noiommu-0");
        let m = open_error_hint(Some(Errno::PERM), GroupKind::NoIommu, node, &addr());
        let exe = fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        let want = format!("sudo install -o root -g root -m 0755 {} /usr/local/bin/pcibench && ", exe.display());
        assert!(m.contains(&want) && m.ends_with("sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench"), "{m}");
        let m = open_error_hint(Some(Errno::ACCESS), GroupKind::Iommu, Path::new("/dev/vfio/5"), &addr());
        assert_eq!(
            m,
            "no permission on /dev/vfio/5: sudo pcibench setup 0000:00:04.0 --vfio (gives your user the group), or run as root"
        );
        let m = open_error_hint(Some(Errno::NOENT), GroupKind::Iommu, Path::new("/dev/vfio/5"), &addr());
        assert!(m.contains("--vfio"), "{m}");
    }

    #[test]
    fn not_viable_names_the_other_devices() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let g = host.path("/sys/kernel/iommu_groups/9/devices");
        fs::create_dir_all(&g).unwrap();
        for (a, drv) in [
            ("0000:00:04.0", Some("vfio-pci")),
            ("0000:00:04.1", Some("snd_hda_intel")),
            ("0000:00:1c.0", Some("pcieport")),
            ("0000:00:04.2", None),
        ] {
            let d = t.path().join("devs").join(a);
            fs::create_dir_all(&d).unwrap();
            if let Some(drv) = drv {
                let dd = t.path().join("drivers").join(drv);
                fs::create_dir_all(&dd).unwrap();
                symlink(&dd, d.join("driver")).unwrap();
            }
            symlink(&d, g.join(a)).unwrap();
        }
        let m = members(&host, 9);
        assert_eq!(m.len(), 4);
        let msg = not_viable_message(9, &addr(), &m);
        assert_eq!(
            msg,
            "VFIO group 9 of 0000:00:04.0 is not viable: other devices in it have kernel drivers: 0000:00:04.1 (bound to snd_hda_intel): bind each to vfio-pci too (e.g. sudo pcibench setup 0000:00:04.1 --vfio), or move the card to a slot with its own IOMMU group"
        );
        assert!(not_viable_message(9, &addr(), &[]).contains("/sys/kernel/iommu_groups/9/devices"));
    }
}
