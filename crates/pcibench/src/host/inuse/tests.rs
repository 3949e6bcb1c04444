//! The inventory on fixture trees laid out as the kernel lays out sysfs: /sys/class/* entries are
//! relative symlinks into /sys/devices, holders/ entries link to the holding device.

use super::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Component, Path};

pub(super) const F: &str = "0000:01:00.0";
pub(super) const FDIR: &str = "sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0";

/// The PID standing for pcibench itself in the fixtures' /proc (no fixture process uses it).
pub(super) const OWN_PID: u32 = 9999;

pub(super) struct T {
    pub dir: tempfile::TempDir,
}

impl T {
    /// A bridge 0000:00:1c.0 with the function 0000:01:00.0 below it; nothing uses anything.
    pub(super) fn new() -> T {
        T::in_dir(tempfile::tempdir().unwrap())
    }

    /// The same tree in `dir`.
    pub(super) fn in_dir(dir: tempfile::TempDir) -> T {
        let t = T { dir };
        for d in ["sys/class/block", "sys/class/net", "sys/bus/pci/devices", "proc/net"] {
            fs::create_dir_all(t.p(d)).unwrap();
        }
        t.file(&format!("{FDIR}/vendor"), "0x8086\n");
        t.link(&format!("sys/bus/pci/devices/{F}"), FDIR);
        t.link("sys/bus/pci/devices/0000:00:1c.0", "sys/devices/pci0000:00/0000:00:1c.0");
        t.file("proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n");
        t.file("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
        t
    }

    pub(super) fn p(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    /// The fixture host, in whose /proc this process is `OWN_PID`.
    pub(super) fn host(&self) -> Host {
        Host::with_root(self.dir.path()).with_own_pid(OWN_PID)
    }

    pub(super) fn file(&self, rel: &str, data: &str) -> &Self {
        let p = self.p(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
        self
    }

    pub(super) fn dir(&self, rel: &str) -> &Self {
        fs::create_dir_all(self.p(rel)).unwrap();
        self
    }

    /// A relative symlink, as sysfs has them.
    pub(super) fn link(&self, link: &str, target: &str) -> &Self {
        let l = self.p(link);
        fs::create_dir_all(l.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&l);
        let up = Path::new(link).parent().unwrap().components().count();
        let rel: std::path::PathBuf = std::iter::repeat_n(Component::ParentDir.as_os_str(), up)
            .map(std::path::PathBuf::from)
            .chain(std::iter::once(std::path::PathBuf::from(target)))
            .collect();
        symlink(rel, l).unwrap();
        self
    }

    /// A block device at `dir` (its real place), with its /sys/class/block entry and its node's
    /// stand-in (`block MAJ:MIN`: nobody holds it exclusively).
    pub(super) fn block(&self, dir: &str, dev: &str) -> &Self {
        let name = dir.rsplit('/').next().unwrap();
        self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
        self.file(&format!("dev/{name}"), &format!("block {dev}\n"));
        self.link(&format!("sys/class/block/{name}"), dir)
    }

    pub(super) fn partition(&self, dir: &str, dev: &str) -> &Self {
        self.block(dir, dev).file(&format!("{dir}/partition"), "1\n")
    }

    /// `holder` (a block device directory) holds `lower`.
    pub(super) fn holds(&self, lower: &str, holder: &str) -> &Self {
        let name = holder.rsplit('/').next().unwrap();
        self.link(&format!("{lower}/holders/{name}"), holder)
    }

    /// A device-mapper device dm-N with a name and uuid.
    pub(super) fn dm(&self, n: u32, name: &str, uuid: &str) -> String {
        let d = format!("sys/devices/virtual/block/dm-{n}");
        self.block(&d, &format!("253:{n}")).file(&format!("{d}/dm/name"), name).file(&format!("{d}/dm/uuid"), uuid);
        d
    }

    pub(super) fn mounts(&self, lines: &[(&str, &str, &str)]) -> &Self {
        let mut s = String::from("22 1 0:21 / /proc rw - proc proc rw\n");
        for (i, (dev, point, src)) in lines.iter().enumerate() {
            s.push_str(&format!("{} 1 {dev} / {point} rw,relatime shared:1 - ext4 {src} rw\n", 30 + i));
        }
        self.file("proc/self/mountinfo", &s)
    }

    pub(super) fn inv(&self) -> Inventory {
        inventory(&self.host(), F).unwrap()
    }

    pub(super) fn err(&self) -> String {
        inventory(&self.host(), F).unwrap_err().to_string()
    }
}

/// The NVMe layout with CONFIG_NVME_MULTIPATH: the per-path node under the controller, the head
/// (and its partition) under /sys/devices/virtual/nvme-subsystem.
const HEAD: &str = "sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1";

fn nvme_multipath(t: &T, with_links: bool) {
    let ctrl = format!("{FDIR}/nvme/nvme0");
    t.file(&format!("{ctrl}/dev"), "240:0\n");
    t.block(&format!("{ctrl}/nvme0c0n1"), "259:9");
    t.block(HEAD, "259:0").partition(&format!("{HEAD}/nvme0n1p1"), "259:1");
    t.partition(&format!("{HEAD}/nvme0n1p2"), "259:2");
    if with_links {
        t.link(&format!("{HEAD}/multipath/nvme0c0n1"), &format!("{ctrl}/nvme0c0n1"));
    } else {
        t.link("sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0", &ctrl);
        t.link("sys/class/nvme-subsystem/nvme-subsys0", "sys/devices/virtual/nvme-subsystem/nvme-subsys0");
    }
}

#[test]
fn a_free_device_has_an_empty_inventory() {
    let t = T::new();
    t.block(&format!("{FDIR}/nvme/nvme0/nvme0n1"), "259:0");
    let inv = t.inv();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
    assert_eq!(
        inventory(&t.host(), "0000:09:00.0").unwrap_err().to_string(),
        Error::NoDevice("0000:09:00.0".into()).to_string()
    );
}

#[test]
fn root_and_boot_on_a_virtio_disk_are_named_as_such() {
    let t = T::new();
    let vda = format!("{FDIR}/virtio0/block/vda");
    t.block(&vda, "254:0").partition(&format!("{vda}/vda1"), "254:1").partition(&format!("{vda}/vda2"), "254:2");
    // /dev/root by device number, /boot by its source.
    t.mounts(&[("254:2", "/", "/dev/root"), ("254:99", "/boot", "/dev/vda1")]);
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        ["it backs / (root filesystem) through vda2", "it backs /boot (the kernels and initramfs images) through vda1"]
    );
    assert_eq!(inv.holders[0].kind, HolderKind::RootFs);
    assert_eq!(inv.holders[1].kind, HolderKind::Boot);
    // The running root filesystem cannot be freed: nothing to offer for it.
    assert_eq!(inv.free_steps(), ["umount /boot"]);
}

#[test]
fn a_multipath_namespace_is_found_through_its_head_and_stacks_are_followed() {
    for with_links in [true, false] {
        let t = T::new();
        nvme_multipath(&t, with_links);
        let dm0 = t.dm(0, "vg-data", "LVM-abc");
        t.holds(&format!("{HEAD}/nvme0n1p1"), &dm0);
        let dm1 = t.dm(1, "secret", "CRYPT-LUKS2-123");
        t.holds(&dm0, &dm1);
        t.mounts(&[("253:1", "/data", "/dev/mapper/secret"), ("259:2", "/", "/dev/nvme0n1p2")]);
        let inv = t.inv();
        let head = if with_links {
            "nvme0n1 (NVMe multipath head over nvme0c0n1)"
        } else {
            "nvme0n1 (NVMe multipath head in nvme-subsys0 over controller nvme0)"
        };
        assert_eq!(
            inv.reasons(),
            [
                format!("it backs / (root filesystem) through nvme0n1p2 on {head}"),
                format!("it backs /data through secret (dm-1, dm-crypt) on vg-data (dm-0, LVM) on nvme0n1p1 on {head}"),
            ],
            "with multipath/ links: {with_links}"
        );
    }
}

#[test]
fn a_stack_nothing_mounts_still_holds_the_device() {
    let t = T::new();
    let host0 = format!("{FDIR}/ata1/host0/target0:0:0/0:0:0:0/block");
    t.block(&format!("{host0}/sda"), "8:0").partition(&format!("{host0}/sda/sda1"), "8:1");
    let host1 = format!("{FDIR}/ata2/host1/target1:0:0/1:0:0:0/block");
    t.block(&format!("{host1}/sdb"), "8:16").partition(&format!("{host1}/sdb/sdb1"), "8:17");
    // md0 over both partitions: reached twice, which is no loop.
    let md = "sys/devices/virtual/block/md0";
    t.block(md, "9:0").dir(&format!("{md}/md"));
    t.holds(&format!("{host0}/sda/sda1"), md).holds(&format!("{host1}/sdb/sdb1"), md);
    let inv = t.inv();
    assert_eq!(inv.reasons(), ["it carries md0 (md RAID) on sda1, which md RAID keeps open"]);
    assert_eq!(inv.holders[0].kind, HolderKind::Stacked);
    assert_eq!(inv.free_steps(), ["mdadm --stop /dev/md0"]);
    // Mounted, the mount says it all.
    t.mounts(&[("9:0", "/srv", "/dev/md0")]);
    assert_eq!(t.inv().reasons(), ["it backs /srv through md0 (md RAID) on sda1"]);
}

#[test]
fn swap_partitions_swap_files_and_loop_files_on_its_filesystems() {
    let t = T::new();
    let vda = format!("{FDIR}/virtio0/block/vda");
    t.block(&vda, "254:0").partition(&format!("{vda}/vda1"), "254:1").partition(&format!("{vda}/vda2"), "254:2");
    t.mounts(&[("254:1", "/data", "/dev/vda1"), ("7:0", "/mnt/my\\040img", "/dev/loop0")]);
    t.file(
        "proc/swaps",
        "Filename\tType\tSize\tUsed\tPriority\n/dev/vda2 partition 1048572 0 -2\n/data/swap\\040file file 4096 0 -3\n",
    );
    let lp = "sys/devices/virtual/block/loop0";
    t.block(lp, "7:0").file(&format!("{lp}/loop/backing_file"), "/data/disk.img\n");
    let lp1 = "sys/devices/virtual/block/loop1";
    t.block(lp1, "7:1").file(&format!("{lp1}/loop/backing_file"), "/elsewhere/x.img\n");
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        [
            "it backs /data through vda1",
            "it backs /mnt/my img through loop0 (backing file /data/disk.img) on vda1",
            "it backs active swap through vda2",
            "it backs active swap file /data/swap file through vda1",
        ]
    );
    assert_eq!(inv.holders[2].free, ["swapoff /dev/vda2"]);
    // The loop device alone, not mounted: still attached to a file on the disk.
    t.mounts(&[("254:1", "/data", "/dev/vda1")]);
    t.file("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
    assert_eq!(
        t.inv().reasons(),
        [
            "it backs /data through vda1",
            "it carries loop0 (backing file /data/disk.img) on vda1, which the loop driver keeps open"
        ]
    );
}

#[test]
fn a_btrfs_filesystem_over_several_devices_is_found_by_any_member() {
    let t = T::new();
    let ctrl = format!("{FDIR}/nvme/nvme0");
    t.block(&format!("{ctrl}/nvme0n1"), "259:0").partition(&format!("{ctrl}/nvme0n1/nvme0n1p1"), "259:1");
    t.block("sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sdb", "8:16");
    let fs = "sys/fs/btrfs/0b5c1b2e-aaaa-bbbb-cccc-1234567890ab/devices";
    t.link(&format!("{fs}/nvme0n1p1"), &format!("{ctrl}/nvme0n1/nvme0n1p1"));
    t.link(&format!("{fs}/sdb"), "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sdb");
    // btrfs reports an anonymous device number and one member as the source: the other one.
    t.mounts(&[("0:45", "/pool", "/dev/sdb")]);
    assert_eq!(t.inv().reasons(), ["it backs /pool through nvme0n1p1"]);
}

#[test]
fn network_interfaces_up_addressed_or_enslaved() {
    let t = T::new();
    let eth = format!("{FDIR}/net/eth0");
    t.file(&format!("{eth}/operstate"), "up\n").file(&format!("{eth}/flags"), "0x1003\n");
    t.link("sys/class/net/eth0", &eth);
    t.file(
        "proc/net/fib_trie",
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     +-- 10.0.0.0/24 2 0 2\n        |-- 10.0.0.0\n           /24 link UNICAST\n        |-- 10.0.0.5\n           /32 host LOCAL\nLocal:\n  +-- 10.0.0.0/24 2 0 2\n     |-- 10.0.0.5\n        /32 host LOCAL\n     |-- 127.0.0.1\n        /32 host LOCAL\n",
    );
    // 10.0.0.0/24 on eth0: Destination 0x0000000A, Mask 0x00FFFFFF as the kernel's native u32.
    let dst = u32::from_ne_bytes([10, 0, 0, 0]);
    let mask = u32::from_ne_bytes([255, 255, 255, 0]);
    t.file(
        "proc/net/route",
        &format!("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neth0\t{dst:08X}\t00000000\t0001\t0\t0\t0\t{mask:08X}\t0\t0\t0\n"),
    );
    t.file(
        "proc/net/if_inet6",
        "20010db8000000000000000000000005 02 40 00 80 eth0\nfe800000000000000000000000000001 02 40 20 80 eth0\n",
    );
    assert_eq!(t.inv().reasons(), ["eth0 is up with 10.0.0.5/24, 2001:db8::5/64"]);
    assert_eq!(t.inv().free_steps(), ["ip link set eth0 down"]);
    // Down, enslaved to a bond: the master link says so.
    t.file(&format!("{eth}/operstate"), "down\n").file(&format!("{eth}/flags"), "0x1002\n");
    t.file("proc/net/if_inet6", "").file("proc/net/route", "");
    t.dir("sys/devices/virtual/net/bond0").link(&format!("{eth}/master"), "sys/devices/virtual/net/bond0");
    assert_eq!(t.inv().reasons(), ["eth0 is enslaved to bond0"]);
    // A VLAN on it that is up.
    fs::remove_file(t.p(&format!("{eth}/master"))).unwrap();
    let vlan = "sys/devices/virtual/net/eth0.100";
    t.file(&format!("{vlan}/flags"), "0x1003\n").link("sys/class/net/eth0.100", vlan);
    t.link(&format!("{eth}/upper_eth0.100"), vlan);
    assert_eq!(t.inv().reasons(), ["eth0 carries eth0.100, up"]);
    // Down, nothing on it: free.
    fs::remove_file(t.p(&format!("{eth}/upper_eth0.100"))).unwrap();
    assert!(t.inv().is_empty());
}

#[test]
fn the_boot_vga_device_and_the_framebuffer_console() {
    let t = T::new();
    t.file(&format!("{FDIR}/boot_vga"), "1\n");
    assert_eq!(t.inv().holders[0].kind, HolderKind::Console);
    t.file(&format!("{FDIR}/boot_vga"), "0\n");
    assert!(t.inv().is_empty());
    let fb = format!("{FDIR}/graphics/fb0");
    t.link(&format!("{fb}/device"), FDIR).link("sys/class/graphics/fb0", &fb);
    t.file("sys/devices/virtual/vtconsole/vtcon1/name", "(M) frame buffer device\n");
    t.file("sys/devices/virtual/vtconsole/vtcon1/bind", "0\n");
    t.link("sys/class/vtconsole/vtcon1", "sys/devices/virtual/vtconsole/vtcon1");
    assert!(t.inv().is_empty(), "fbcon not bound");
    t.file("sys/devices/virtual/vtconsole/vtcon1/bind", "1\n");
    assert_eq!(t.inv().reasons(), ["fb0 on it carries the text console (fbcon bound to vtcon1)"]);
}

#[test]
fn references_on_a_driver_only_this_device_uses() {
    let t = T::new();
    let drv = "sys/bus/pci/drivers/uio_pci_generic";
    t.link(&format!("{FDIR}/driver"), drv).link(&format!("{drv}/{F}"), FDIR);
    t.file(&format!("{FDIR}/uevent"), "");
    t.file(&format!("{drv}/bind"), "");
    t.file("sys/module/uio_pci_generic/refcnt", "1\n").link(&format!("{drv}/module"), "sys/module/uio_pci_generic");
    assert_eq!(
        t.inv().reasons(),
        ["its driver uio_pci_generic is held: module uio_pci_generic has 1 reference beyond the modules that depend on it (a process or a kernel user has it open), which pcibench could not attribute to any use it found"]
    );
    // A dependent module explains the reference.
    t.dir("sys/module/uio_pci_generic/holders/other");
    assert!(t.inv().is_empty());
    // Another device on the same driver: the references may be its.
    fs::remove_dir(t.p("sys/module/uio_pci_generic/holders/other")).unwrap();
    t.file("sys/devices/pci0000:00/0000:00:05.0/uevent", "")
        .link(&format!("{drv}/0000:00:05.0"), "sys/devices/pci0000:00/0000:00:05.0");
    assert!(t.inv().is_empty());
}

#[test]
fn a_bridge_covers_everything_below_it_and_names_the_function() {
    let t = T::new();
    let vda = format!("{FDIR}/virtio0/block/vda");
    t.block(&vda, "254:0");
    t.mounts(&[("254:0", "/", "/dev/vda")]);
    let inv = inventory(&t.host(), "0000:00:1c.0").unwrap();
    assert_eq!(inv.reasons(), ["it backs / (root filesystem) through vda (on 0000:01:00.0 below it)"]);
}

#[test]
fn holder_loops_dangling_links_and_symlink_loops_are_errors_not_hangs() {
    // dm-0 holds dm-1 holds dm-0.
    let t = T::new();
    let disk = format!("{FDIR}/nvme/nvme0/nvme0n1");
    t.block(&disk, "259:0");
    let dm0 = t.dm(0, "a", "LVM-a");
    let dm1 = t.dm(1, "b", "LVM-b");
    t.holds(&disk, &dm0).holds(&dm0, &dm1).holds(&dm1, &dm0);
    let e = t.err();
    assert!(e.starts_with("holder loop in sysfs: nvme0n1 -> dm-0 -> dm-1 -> dm-0"), "{e}");
    // A device holding itself.
    let t = T::new();
    t.block(&disk, "259:0");
    t.holds(&disk, &disk);
    assert!(t.err().starts_with("holder loop in sysfs: nvme0n1 -> nvme0n1"), "{}", t.err());
    // A holder link to nowhere.
    let t = T::new();
    t.block(&disk, "259:0");
    t.link(&format!("{disk}/holders/dm-7"), "sys/devices/virtual/block/dm-7");
    let e = t.err();
    assert!(e.starts_with("dangling link ") && e.contains("holders/dm-7"), "{e}");
    // /sys/class/block entries that loop on themselves.
    let t = T::new();
    t.link("sys/class/block/x", "sys/class/block/y").link("sys/class/block/y", "sys/class/block/x");
    let e = t.err();
    assert!(e.starts_with("symlink loop at ") && e.contains("sys/class/block/x"), "{e}");
}
