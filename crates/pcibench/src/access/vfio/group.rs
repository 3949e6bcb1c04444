//! VFIO groups: /dev/vfio/N behind an IOMMU, /dev/vfio/noiommu-N without one. Opening, the
//! viability check, attaching to a container, and the device fd; every failure names its cause
//! (other devices in the group, the process holding it, a missing capability or permission).

use super::container::Container;
use super::ioctl;
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

/// Why opening the group node failed, and the fix.
pub fn open_error_hint(
    errno: Option<Errno>,
    kind: GroupKind,
    n: u32,
    node: &Path,
    addr: &PciAddress,
    holders: &[(u32, String)],
) -> String {
    match errno {
        Some(Errno::BUSY) => {
            if holders.is_empty() {
                format!(
                    "another process holds VFIO group {n} (a group opens once): close it and retry (run as root to see which process it is)"
                )
            } else {
                let who: Vec<String> = holders.iter().map(|(p, c)| format!("PID {p} ({c})")).collect();
                format!("another process holds VFIO group {n}: {}: close it and retry", who.join(", "))
            }
        }
        Some(Errno::PERM) if kind == GroupKind::NoIommu => state::setcap_hint(),
        Some(Errno::ACCESS | Errno::PERM) => format!(
            "no permission on {}: sudo pcibench setup {addr} --vfio (gives your user the group), or run as root",
            node.display()
        ),
        Some(Errno::NOENT) => format!("bind {addr} to vfio-pci: sudo pcibench setup {addr} --vfio"),
        _ => format!("see pcibench doctor {addr}"),
    }
}

impl Group {
    /// Open the group of `addr` and check it is viable.
    pub fn open(host: &Host, addr: &PciAddress) -> Result<Group> {
        let (number, kind, node) = locate(host, addr)?;
        let path = host.path(&node);
        let file = host.open_node(&path, OpenOptions::new().read(true).write(true)).map_err(|e| {
            let errno = Errno::from_io_error(&e);
            let who = if errno == Some(Errno::BUSY) { state::processes_holding(host, &node) } else { Vec::new() };
            let hint = open_error_hint(errno, kind, number, &node, addr, &who);
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
    fn finds_the_process_holding_a_group() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        for (pid, comm, target) in [(1234, "qemu-system-x86", "/dev/vfio/7"), (99, "bash", "/dev/null")] {
            let fd = host.path(format!("/proc/{pid}/fd"));
            fs::create_dir_all(&fd).unwrap();
            symlink(target, fd.join("5")).unwrap();
            fs::write(host.path(format!("/proc/{pid}/comm")), format!("{comm}\n")).unwrap();
        }
        let h = state::processes_holding(&host, Path::new("/dev/vfio/7"));
        assert_eq!(h, vec![(1234, "qemu-system-x86".to_string())]);
        let msg = open_error_hint(Some(Errno::BUSY), GroupKind::Iommu, 7, Path::new("/dev/vfio/7"), &addr(), &h);
        assert_eq!(msg, "another process holds VFIO group 7: PID 1234 (qemu-system-x86): close it and retry");
        let msg = open_error_hint(Some(Errno::BUSY), GroupKind::Iommu, 7, Path::new("/dev/vfio/7"), &addr(), &[]);
        assert!(msg.contains("run as root to see which"), "{msg}");
    }

    #[test]
    fn permission_errors_name_the_fix() {
        let node = Path::new("/dev/vfio/noiommu-0");
        let m = open_error_hint(Some(Errno::PERM), GroupKind::NoIommu, 0, node, &addr(), &[]);
        let exe = fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        assert!(m.ends_with(&format!("sudo setcap cap_sys_rawio=ep {}", exe.display())), "{m}");
        let m = open_error_hint(Some(Errno::ACCESS), GroupKind::Iommu, 5, Path::new("/dev/vfio/5"), &addr(), &[]);
        assert_eq!(
            m,
            "no permission on /dev/vfio/5: sudo pcibench setup 0000:00:04.0 --vfio (gives your user the group), or run as root"
        );
        let m = open_error_hint(Some(Errno::NOENT), GroupKind::Iommu, 5, Path::new("/dev/vfio/5"), &addr(), &[]);
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
