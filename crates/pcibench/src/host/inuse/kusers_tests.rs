//! In-kernel users on fixture trees laid out as the kernel writes configfs and sysfs: each kind
//! named with what frees it, only when it is this function's device, and what cannot be read said.

use super::tests::{F, FDIR, T};
use super::*;

const VDB: &str = "sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/virtio1/block/vdb";
const NQN: &str = "nqn.2024-01.org.example:lun";
const CFS: &str = "sys/kernel/config";

/// vdb (254:16) with partition vdb1 (254:17) below the function, configfs mounted.
fn disk() -> T {
    let t = T::new();
    t.block(VDB, "254:16").partition(&format!("{VDB}/vdb1"), "254:17");
    configfs(&t, &[]);
    t
}

/// mountinfo with configfs on /sys/kernel/config and ext4 `mounts` (device, point).
fn configfs(t: &T, mounts: &[(&str, &str)]) {
    let mut s =
        String::from("22 1 0:21 / /proc rw - proc proc rw\n40 1 0:40 / /sys/kernel/config rw - configfs configfs rw\n");
    for (i, (dev, point)) in mounts.iter().enumerate() {
        s.push_str(&format!("{} 1 {dev} / {point} rw - ext4 /dev/x rw\n", 50 + i));
    }
    t.file("proc/self/mountinfo", &s);
}

/// An nvmet namespace of subsystem NQN serving `path`, enabled or not.
fn nvmet_ns(t: &T, nsid: u32, path: &str, enabled: bool) {
    let n = format!("{CFS}/nvmet/subsystems/{NQN}/namespaces/{nsid}");
    t.file(&format!("{n}/device_path"), &format!("{path}\n"))
        .file(&format!("{n}/enable"), if enabled { "1\n" } else { "0\n" });
}

fn kernel_reasons(inv: &Inventory) -> Vec<&str> {
    inv.holders.iter().filter(|h| h.kind == HolderKind::Kernel).map(|h| h.why.as_str()).collect()
}

#[test]
fn nvmet_exports_of_a_disk_are_named_with_their_ports_and_what_frees_them() {
    let t = disk();
    nvmet_ns(&t, 1, "/dev/vdb", true);
    let port = format!("{CFS}/nvmet/ports/1");
    t.file(&format!("{port}/addr_trtype"), "tcp\n")
        .file(&format!("{port}/addr_traddr"), "10.0.0.1\n")
        .file(&format!("{port}/addr_trsvcid"), "4420\n")
        .dir(&format!("{port}/subsystems/{NQN}"));
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        [format!(
            "nvmet (the kernel's NVMe over Fabrics target) exports vdb as namespace 1 of subsystem {NQN} (port 1: tcp \
             10.0.0.1:4420)"
        )]
    );
    assert_eq!(inv.holders[0].kind, HolderKind::Kernel);
    assert_eq!(inv.free_steps(), [format!("echo 0 > /sys/kernel/config/nvmet/subsystems/{NQN}/namespaces/1/enable")]);
    // Disabled, it holds nothing.
    nvmet_ns(&t, 1, "/dev/vdb", false);
    assert!(t.inv().is_empty(), "{:?}", t.inv());
    // Another machine's disk (a node of a device not below the function) is not this function's.
    t.file("dev/vdz", "block 254:99\n");
    nvmet_ns(&t, 1, "/dev/vdz", true);
    let inv = t.inv();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
}

#[test]
fn a_file_a_kernel_user_serves_names_the_filesystem_it_lies_on_and_is_freed_before_the_unmount() {
    let t = disk();
    configfs(&t, &[("254:17", "/srv")]);
    t.file("srv/lun.img", "");
    nvmet_ns(&t, 2, "/srv/lun.img", true);
    let inv = t.inv();
    assert_eq!(
        kernel_reasons(&inv),
        [format!(
            "nvmet (the kernel's NVMe over Fabrics target) exports file /srv/lun.img on vdb1 as namespace 2 of \
             subsystem {NQN}"
        )]
    );
    assert_eq!(inv.reasons()[0], "it backs /srv through vdb1");
    // The export goes before the unmount, which would fail while it holds the file.
    assert_eq!(
        inv.free_steps(),
        [format!("echo 0 > /sys/kernel/config/nvmet/subsystems/{NQN}/namespaces/2/enable"), "umount /srv".into()]
    );
    // A path that cannot be looked up here (configured in another mount namespace) may be on it:
    // could not check, never free.
    configfs(&t, &[]);
    nvmet_ns(&t, 2, "/elsewhere/lun.img", true);
    let inv = t.inv();
    assert!(inv.is_empty(), "{inv:?}");
    let w = inv.unchecked.words();
    assert!(
        w.starts_with(&format!(
            "nvmet (the kernel's NVMe over Fabrics target) exports /elsewhere/lun.img as namespace 2 of subsystem {NQN}, \
             which cannot be looked up here ("
        )) && w.ends_with("it may lie on this device; look it up where it was configured"),
        "{w}"
    );
}

#[test]
fn lio_zram_bcache_xen_pktcdvd_rnbd_and_ocfs2_are_each_named() {
    let t = disk();
    let lio = format!("{CFS}/target/core");
    t.file(&format!("{lio}/fileio_0/lun0/enable"), "1\n").file(
        &format!("{lio}/fileio_0/lun0/info"),
        "TCM FILEIO ID: 0        File: /dev/vdb  Size: 1048576  Mode: O_DSYNC Async: 0\n",
    );
    // A backstore configured but not enabled opened nothing.
    t.file(&format!("{lio}/fileio_1/idle/enable"), "0\n")
        .file(&format!("{lio}/fileio_1/idle/info"), "TCM FILEIO ID: 1        File: /dev/vdb1  Size: 0\n");
    t.file("sys/devices/virtual/block/zram0/backing_dev", "/dev/vdb1\n")
        .link("sys/class/block/zram0", "sys/devices/virtual/block/zram0");
    t.dir(&format!("{VDB}/bcache"));
    t.file("sys/bus/xen-backend/devices/vbd-1-51712/physical_device", "fe:10\n");
    t.file("sys/class/pktcdvd/device_map", "pktcdvd0 253:0 254:17\n");
    t.dir("sys/class/rnbd-server/ctl/devices/vdb1/sessions");
    t.file(&format!("{CFS}/cluster/c1/heartbeat/r1/dev"), "vdb\n");
    let inv = t.inv();
    assert_eq!(
        kernel_reasons(&inv),
        [
            "LIO (the kernel's SCSI target) exports vdb as backstore fileio_0/lun0",
            "ocfs2's disk heartbeat (o2hb) beats on vdb (region r1 of cluster c1)",
            "zram0 writes its pages back to vdb1 (its backing_dev)",
            "bcache holds vdb (registered as a backing device)",
            "rnbd-server (the kernel's RDMA network block device server) exports vdb1",
            "xen-blkback gives vdb to a Xen guest (vbd-1-51712)",
            "pktcdvd writes packets to vdb1 as pktcdvd0",
        ]
    );
    assert!(inv.free_steps().contains(&"delete the backstore: targetcli /backstores/fileio delete lun0".to_string()));
    assert!(inv.free_steps().contains(&"echo 1 > /sys/class/block/vdb/bcache/stop".to_string()));
}

#[test]
fn nvmet_passthru_of_the_functions_controller_is_named() {
    let t = T::new();
    t.file(&format!("{FDIR}/nvme/nvme0/dev"), "240:0\n").file("dev/nvme0", "char 240:0\n");
    configfs(&t, &[]);
    let pt = format!("{CFS}/nvmet/subsystems/{NQN}/passthru");
    t.file(&format!("{pt}/device_path"), "/dev/nvme0\n").file(&format!("{pt}/enable"), "1\n");
    assert_eq!(
        t.inv().reasons(),
        [format!("nvmet (the kernel's NVMe over Fabrics target) passes through controller nvme0 as subsystem {NQN}")]
    );
}

#[test]
fn a_storage_target_loaded_without_configfs_mounted_is_could_not_check() {
    let t = T::new();
    t.block(VDB, "254:16").dir("sys/module/nvmet");
    let inv = t.inv();
    assert!(inv.is_empty(), "{inv:?}");
    assert_eq!(
        inv.unchecked.words(),
        "nvmet is loaded but configfs is not mounted here (systemd mounts it on /sys/kernel/config), so what it serves \
         cannot be read: mount -t configfs none /sys/kernel/config"
    );
    // A function with no block device cannot be what it serves.
    let t = T::new();
    t.dir("sys/module/nvmet");
    assert!(inventory(&t.host(), F).unwrap().unchecked.is_empty());
}
