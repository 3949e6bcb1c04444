//! Fixture host trees for the doctor and setup tests, laid out as the kernel lays them out:
//! /sys/bus/pci/devices/ADDR are relative symlinks into /sys/devices/pci0000:00/…, `driver`
//! links into /sys/bus/pci/drivers/NAME, `iommu_group` links into /sys/kernel/iommu_groups/N
//! whose devices/ lists the members; /proc, /boot, /dev/vfio and /etc/passwd are plain files.
#![allow(dead_code)] // each test binary uses a different part

use pcibench::doctor::Caller;
use pcibench::host::Host;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Component, Path, PathBuf};

pub const EDU: &str = "0000:00:04.0";
/// resource flags: 32-bit non-prefetchable memory; 64-bit prefetchable memory.
pub const MEM32: u64 = 0x0004_0200;
pub const PREF64: u64 = 0x0014_220c;
pub const USER_UID: u32 = 4242;

pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    /// An empty host: PCI bus, a 6.1 kernel with no IOMMU options, two users, no hugepages.
    pub fn new() -> Tree {
        let t = Tree { dir: tempfile::tempdir().unwrap() };
        for d in ["sys/bus/pci/devices", "sys/bus/pci/drivers", "sys/kernel/iommu_groups", "sys/module", "run"] {
            fs::create_dir_all(t.root().join(d)).unwrap();
        }
        t.file("sys/bus/pci/drivers_probe", "");
        t.file("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-test root=/dev/sda1 ro quiet\n");
        t.file("proc/sys/kernel/osrelease", "6.1.0-test\n");
        t.file("proc/mounts", "proc /proc proc rw 0 0\n");
        t.file("proc/meminfo", "MemTotal: 4000000 kB\nHugePages_Total: 0\nHugePages_Free: 0\nHugepagesize: 2048 kB\n");
        t.file(
            "etc/passwd",
            format!("root:x:0:0:root:/root:/bin/sh\nuser:x:{USER_UID}:{USER_UID}::/home/user:/bin/sh\n"),
        );
        t.file("sys/kernel/security/lsm", "capability,yama,apparmor\n");
        t.hugepages(2048, 0, 0);
        t
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn host(&self) -> Host {
        Host::with_root(self.root())
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel.trim_start_matches('/'))
    }

    pub fn file(&self, rel: &str, data: impl AsRef<[u8]>) -> &Self {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
        self
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub fn chmod(&self, rel: &str, mode: u32) -> &Self {
        fs::set_permissions(self.path(rel), fs::Permissions::from_mode(mode)).unwrap();
        self
    }

    /// A relative symlink at `link` pointing to `target` (both relative to the root), as sysfs has.
    pub fn link(&self, link: &str, target: &str) -> &Self {
        let l = self.path(link);
        fs::create_dir_all(l.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&l);
        let up = Path::new(link.trim_start_matches('/')).parent().unwrap().components().count();
        let rel: PathBuf = std::iter::repeat_n(Component::ParentDir.as_os_str(), up)
            .map(PathBuf::from)
            .chain(std::iter::once(PathBuf::from(target.trim_start_matches('/'))))
            .collect();
        symlink(rel, l).unwrap();
        self
    }

    /// The sysfs directory of a device (its real place under /sys/devices).
    pub fn devdir(&self, addr: &str) -> String {
        let l = fs::read_link(self.path(&format!("sys/bus/pci/devices/{addr}"))).unwrap();
        let mut s = l.to_string_lossy().to_string();
        while let Some(rest) = s.strip_prefix("../") {
            s = rest.to_string();
        }
        s
    }

    /// QEMU's edu device, as on the lab's machines: 1234:11e8, BAR0 1 MiB 32-bit memory.
    pub fn edu(&self) -> &Self {
        self.device(EDU, 0x1234, 0x11e8, 0x00ff00, &[(0, 0xfea0_0000, 1 << 20, MEM32)], 0x0002)
    }

    /// A device on the root bus: ids, class, BARs as (index, start, size, flags), command register.
    pub fn device(&self, addr: &str, vid: u16, did: u16, class: u32, bars: &[(u8, u64, u64, u64)], cmd: u16) -> &Self {
        self.device_at(&format!("devices/pci0000:00/{addr}"), addr, vid, did, class, bars, cmd)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn device_at(
        &self,
        rel: &str,
        addr: &str,
        vid: u16,
        did: u16,
        class: u32,
        bars: &[(u8, u64, u64, u64)],
        cmd: u16,
    ) -> &Self {
        let d = format!("sys/{rel}");
        self.link(&format!("sys/bus/pci/devices/{addr}"), &d);
        self.file(&format!("{d}/vendor"), format!("0x{vid:04x}\n"))
            .file(&format!("{d}/device"), format!("0x{did:04x}\n"))
            .file(&format!("{d}/subsystem_vendor"), "0x1af4\n")
            .file(&format!("{d}/subsystem_device"), "0x1100\n")
            .file(&format!("{d}/class"), format!("0x{class:06x}\n"))
            .file(&format!("{d}/driver_override"), "(null)\n");
        let mut lines = vec![(0u64, 0u64, 0u64); 13];
        for &(i, start, size, flags) in bars {
            lines[i as usize] = (start, start + size - 1, flags);
            self.file(&format!("{d}/resource{i}"), "").chmod(&format!("{d}/resource{i}"), 0o600);
            if flags & 0x2000 != 0 {
                self.file(&format!("{d}/resource{i}_wc"), "").chmod(&format!("{d}/resource{i}_wc"), 0o600);
            }
        }
        let text: String = lines.iter().map(|(s, e, f)| format!("0x{s:016x} 0x{e:016x} 0x{f:016x}\n")).collect();
        self.file(&format!("{d}/resource"), text);
        let mut cfg = vec![0u8; 64];
        cfg[0..2].copy_from_slice(&vid.to_le_bytes());
        cfg[2..4].copy_from_slice(&did.to_le_bytes());
        cfg[4..6].copy_from_slice(&cmd.to_le_bytes());
        cfg[0x0e] = if class >> 8 == 0x0604 { 1 } else { 0 };
        self.file(&format!("{d}/config"), cfg)
    }

    /// Bind `addr` to `driver` (creating the driver's directory with bind/unbind files).
    pub fn bind(&self, addr: &str, driver: &str) -> &Self {
        let drv = format!("sys/bus/pci/drivers/{driver}");
        self.file(&format!("{drv}/bind"), "").file(&format!("{drv}/unbind"), "");
        let d = self.devdir(addr);
        self.link(&format!("{d}/driver"), &drv)
    }

    pub fn unbind(&self, addr: &str) -> &Self {
        let _ = fs::remove_file(self.path(&format!("{}/driver", self.devdir(addr))));
        self
    }

    /// Put `addr` in IOMMU group `n` (with the group's devices/ entry).
    pub fn group(&self, addr: &str, n: u32) -> &Self {
        let g = format!("sys/kernel/iommu_groups/{n}");
        fs::create_dir_all(self.path(&format!("{g}/devices"))).unwrap();
        let d = self.devdir(addr);
        self.link(&format!("{g}/devices/{addr}"), &d);
        self.link(&format!("{d}/iommu_group"), &g)
    }

    pub fn noiommu_group(&self, addr: &str, n: u32) -> &Self {
        self.group(addr, n).file(&format!("sys/kernel/iommu_groups/{n}/name"), "vfio-noiommu\n")
    }

    /// An IOMMU (dmar0) and intel_iommu=on on the command line.
    pub fn iommu(&self) -> &Self {
        fs::create_dir_all(self.path("sys/class/iommu/dmar0")).unwrap();
        self.file("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-test root=/dev/sda1 ro quiet intel_iommu=on\n")
    }

    pub fn module(&self, name: &str) -> &Self {
        fs::create_dir_all(self.path(&format!("sys/module/{name}"))).unwrap();
        self
    }

    /// vfio, vfio_pci, vfio_iommu_type1 loaded (vfio-pci's driver directory too), no-IOMMU mode as given.
    pub fn vfio_loaded(&self, noiommu: bool) -> &Self {
        self.module("vfio").module("vfio_pci").module("vfio_iommu_type1");
        self.file("sys/bus/pci/drivers/vfio-pci/bind", "").file("sys/bus/pci/drivers/vfio-pci/unbind", "");
        self.file("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", if noiommu { "Y\n" } else { "N\n" });
        self.file("dev/vfio/vfio", "").chmod("dev/vfio/vfio", 0o666)
    }

    /// A /dev/vfio group node (a plain file standing in for the character device).
    /// A VFIO group node: a fixture's stand-in for a character device (tests cannot mknod), vfio's
    /// major with the group's number as its minor.
    pub fn node(&self, name: &str, mode: u32) -> &Self {
        let p = format!("dev/vfio/{name}");
        let minor: u32 = name.trim_start_matches("noiommu-").parse().unwrap_or(999);
        self.file(&p, format!("char 511:{minor}\n")).chmod(&p, mode)
    }

    /// Process `pid` (`comm`) holding `target` open as fd `fd` with open flags `flags` (octal).
    pub fn holder(&self, pid: u32, comm: &str, fd: u32, target: &str, flags: &str) -> &Self {
        self.file(&format!("proc/{pid}/comm"), format!("{comm}\n"));
        self.file(&format!("proc/{pid}/fdinfo/{fd}"), format!("pos:\t0\nflags:\t{flags}\nmnt_id:\t25\n"));
        let l = self.path(&format!("proc/{pid}/fd/{fd}"));
        fs::create_dir_all(l.parent().unwrap()).unwrap();
        symlink(target, l).unwrap();
        self
    }

    pub fn lockdown(&self, text: &str) -> &Self {
        self.file("sys/kernel/security/lockdown", format!("{text}\n"))
    }

    pub fn hugepages(&self, kb: u64, total: u64, free: u64) -> &Self {
        let d = format!("sys/kernel/mm/hugepages/hugepages-{kb}kB");
        self.file(&format!("{d}/nr_hugepages"), format!("{total}\n"))
            .file(&format!("{d}/free_hugepages"), format!("{free}\n"))
    }

    pub fn link_speed(&self, addr: &str, cur: &str, cur_w: u8, max: &str, max_w: u8) -> &Self {
        let d = self.devdir(addr);
        self.file(&format!("{d}/current_link_speed"), format!("{cur}\n"))
            .file(&format!("{d}/current_link_width"), format!("{cur_w}\n"))
            .file(&format!("{d}/max_link_speed"), format!("{max}\n"))
            .file(&format!("{d}/max_link_width"), format!("{max_w}\n"))
    }

    pub fn dev_file(&self, addr: &str, name: &str, data: impl AsRef<[u8]>) -> &Self {
        let d = self.devdir(addr);
        self.file(&format!("{d}/{name}"), data)
    }
}

/// Root with every capability and no memlock limit.
pub fn root() -> Caller {
    Caller {
        uid: 0,
        gid: 0,
        groups: vec![],
        user: "root".into(),
        cap_eff: 0x1ff_ffff_ffff,
        exe: PathBuf::from("/usr/local/bin/pcibench"),
        memlock: None,
        live: false,
    }
}

/// An ordinary user: no capabilities, the common 8 MiB memlock limit.
pub fn user() -> Caller {
    Caller {
        uid: USER_UID,
        gid: USER_UID,
        groups: vec![],
        user: "user".into(),
        cap_eff: 0,
        exe: PathBuf::from("/usr/local/bin/pcibench"),
        memlock: Some(8 << 20),
        live: false,
    }
}
