//! `setup` refuses to take a device the running system uses (a mounted multipath NVMe namespace,
//! a raw disk a process writes to, a group another process holds, an interface that is up), and
//! says what `--force` overrides before it changes anything.

use super::*;

/// The device as an NVMe controller with CONFIG_NVME_MULTIPATH, as Debian's kernels have it: the
/// per-path node nvme0c0n1 under the controller, the namespace head nvme0n1 (partitions nvme0n1p1,
/// nvme0n1p2) under /sys/devices/virtual/nvme-subsystem, and dm-0 (LVM) stacked on nvme0n1p1.
fn with_multipath_disk(t: &Tree) {
    let ctrl = format!("{}/nvme/nvme0", t.devdir(EDU));
    let head = "sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1";
    let block = |dir: &str, dev: &str| {
        t.file(&format!("{dir}/dev"), format!("{dev}\n"));
        t.link(&format!("sys/class/block/{}", dir.rsplit('/').next().unwrap()), dir);
    };
    block(&format!("{ctrl}/nvme0c0n1"), "259:9");
    block(head, "259:0");
    for (p, dev) in [("nvme0n1p1", "259:1"), ("nvme0n1p2", "259:2")] {
        block(&format!("{head}/{p}"), dev);
        t.file(&format!("{head}/{p}/partition"), "1\n");
    }
    t.link(&format!("{head}/multipath/nvme0c0n1"), &format!("{ctrl}/nvme0c0n1"));
    block("sys/devices/virtual/block/dm-0", "253:0");
    t.file("sys/devices/virtual/block/dm-0/dm/name", "vg-data\n")
        .file("sys/devices/virtual/block/dm-0/dm/uuid", "LVM-x\n");
    t.link(&format!("{head}/nvme0n1p1/holders/dm-0"), "sys/devices/virtual/block/dm-0");
}

/// Nothing changed: no kernel write, no driver_override, no record.
fn assert_untouched(t: &Tree, k: &FakeKernel) {
    assert!(k.log().is_empty(), "nothing may change: {:?}", k.log());
    assert_eq!(t.read(&format!("{}/driver_override", t.devdir(EDU))), "(null)\n");
    assert!(!t.path("run/pcibench/0000:00:04.0").exists());
}

#[test]
fn refuses_to_take_a_multipath_nvme_whose_namespace_is_mounted() {
    let t = Tree::new();
    t.edu().bind(EDU, "nvme");
    with_multipath_disk(&t);
    // The root filesystem by device number (/dev/root), /data on LVM by device number.
    t.file(
        "proc/self/mountinfo",
        "21 1 259:2 / / rw,relatime - ext4 /dev/root rw\n30 21 253:0 / /data rw - xfs /dev/mapper/vg-data rw\n",
    );
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert_eq!(
        e,
        "refusing to unbind 0000:00:04.0 from nvme: the running system uses it: it backs / (root filesystem) \
         through nvme0n1p2 on nvme0n1 (NVMe multipath head over nvme0c0n1); it backs /data through vg-data \
         (dm-0, LVM) on nvme0n1p1 on nvme0n1 (NVMe multipath head over nvme0c0n1); choose another device; \
         --force takes it anyway"
    );
    assert_untouched(&t, &k);
    // --sysfs-user would give a user the BARs: refused for the use first (the driver's refusal would
    // offer VFIO, which the use rules out as well).
    let e = setup::sysfs_user(&t.host(), &edu(), "user", &opts(&k)).unwrap_err().to_string();
    assert!(
        e.starts_with("refusing to give user the BARs of 0000:00:04.0: the running system uses it: it backs /"),
        "{e}"
    );
    assert_untouched(&t, &k);

    // Swap on the other partition, unmounted LVM: still in use.
    t.file("proc/self/mountinfo", "")
        .file("proc/swaps", "Filename Type Size Used Priority\n/dev/nvme0n1p2 partition 1024 0 -2\n");
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("it backs active swap through nvme0n1p2 on nvme0n1 (NVMe multipath head over nvme0c0n1); it carries vg-data (dm-0, LVM) on nvme0n1p1 on nvme0n1 (NVMe multipath head over nvme0c0n1), which device-mapper keeps open"), "{e}");
    assert!(
        e.contains(
            "free it first (swapoff /dev/nvme0n1p2; dmsetup remove vg-data (or vgchange -an / cryptsetup close))"
        ),
        "{e}"
    );
    assert_untouched(&t, &k);
}

#[test]
fn force_says_what_it_overrides_before_it_changes_anything() {
    let t = Tree::new();
    t.edu().bind(EDU, "nvme");
    with_multipath_disk(&t);
    t.file("proc/self/mountinfo", "21 1 259:2 / / rw,relatime - ext4 /dev/root rw\n");
    let k = FakeKernel::new(&t);
    let forced = SetupOptions { force: true, ..opts(&k) };
    let ch = setup::vfio(&t.host(), &edu(), &forced).unwrap();
    let said = "--force: went ahead although it backs / (root filesystem) through nvme0n1p2 on nvme0n1 (NVMe multipath head over nvme0c0n1)";
    assert_eq!(ch[0].what, said);
    assert!(ch[0].warning.as_deref().is_some_and(|w| w.contains("I/O errors")), "{:?}", ch[0]);
    assert_eq!(k.log()[0], format!("notify 0000:00:04.0: {said}"), "announced first: {:?}", k.log());
    assert!(whats(&ch).contains(&"unbound it from nvme"));
    let text = pcibench::report::setup::render_changes(EDU, &ch);
    assert!(text.starts_with(&format!("0000:00:04.0: {said}\nWARNING: the running system loses")), "{text}");
}

#[test]
fn an_inconsistent_sysfs_is_a_clear_refusal_and_never_an_unbind() {
    let t = Tree::new();
    t.edu().bind(EDU, "nvme");
    with_multipath_disk(&t);
    // dm-0 lists the partition it sits on as its own holder: a loop.
    t.link(
        "sys/devices/virtual/block/dm-0/holders/nvme0n1p1",
        "sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1/nvme0n1p1",
    );
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(
        e.starts_with("refusing to unbind 0000:00:04.0 from nvme: cannot tell what the running system uses it for: holder loop in sysfs: nvme0n1 -> nvme0n1p1 -> dm-0 -> nvme0n1p1"),
        "{e}"
    );
    assert!(e.ends_with("--force takes it without knowing"), "{e}");
    assert_untouched(&t, &k);
    // A dangling holder link.
    fs::remove_file(t.path("sys/devices/virtual/block/dm-0/holders/nvme0n1p1")).unwrap();
    t.link("sys/devices/virtual/block/dm-0/holders/dm-5", "sys/devices/virtual/block/dm-5");
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("cannot tell what the running system uses it for: dangling link "), "{e}");
    assert_untouched(&t, &k);
    // --force goes ahead, and says it did not know.
    let forced = SetupOptions { force: true, ..opts(&k) };
    let ch = setup::vfio(&t.host(), &edu(), &forced).unwrap();
    assert!(ch[0].what.starts_with("--force: went ahead without knowing what uses it (dangling link "), "{:?}", ch[0]);
}

#[test]
fn refuses_a_raw_disk_a_process_writes_to_and_a_loop_device_on_it() {
    let t = Tree::new();
    t.edu().bind(EDU, "virtio-pci");
    let vde = format!("{}/virtio3/block/vde", t.devdir(EDU));
    t.file(&format!("{vde}/dev"), "254:64\n").link("sys/class/block/vde", &vde);
    t.file("dev/vde", "block 254:64\n");
    t.holder(258, "postgres", 3, "/dev/vde", "0100001");
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert_eq!(
        e,
        "refusing to unbind 0000:00:04.0 from virtio-pci: the running system uses it: held open by PID 258 \
         (postgres) for writing: /dev/vde; free it first (stop PID 258 (postgres), or have it close /dev/vde) or \
         choose another device; --force takes it anyway"
    );
    assert_untouched(&t, &k);
    // The writer gone, a loop device backed by the raw disk (the kernel makes no holders/ link for it).
    fs::remove_dir_all(t.path("proc/258")).unwrap();
    let lp = "sys/devices/virtual/block/loop7";
    t.file(&format!("{lp}/dev"), "7:7\n").file(&format!("{lp}/loop/backing_file"), "/dev/vde\n");
    t.link("sys/class/block/loop7", lp);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("it carries loop7 (backing file /dev/vde) on vde, which the loop driver keeps open; free it first (losetup -d /dev/loop7)"), "{e}");
    assert_untouched(&t, &k);
}

#[test]
fn processes_that_cannot_be_checked_refuse_unless_forced() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 7).vfio_loaded(false);
    // Its open files cannot be read (for another user's process: EACCES; here: no fd directory to list).
    t.file("proc/4000/comm", "secret\n").file("proc/4000/fd", "");
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert_eq!(
        e,
        "refusing to bind 0000:00:04.0 to vfio-pci: cannot tell whether the running system uses it: could not check PID \
         4000 (/proc/PID/fd cannot be listed (Not a directory (os error 20))); --force takes it without knowing"
    );
    assert_untouched(&t, &k);
    let forced = SetupOptions { force: true, ..opts(&k) };
    let ch = setup::vfio(&t.host(), &edu(), &forced).unwrap();
    assert!(
        ch[0].what.starts_with(
            "--force: went ahead without knowing whether the running system uses it (could not check PID 4000"
        ),
        "{:?}",
        ch[0]
    );
    assert_eq!(k.log()[0], format!("notify 0000:00:04.0: {}", ch[0].what));
}

#[test]
fn a_vfio_device_another_process_holds_is_refused_even_when_bound() {
    let t = Tree::new();
    t.edu().iommu().vfio_loaded(false).bind(EDU, "vfio-pci").group(EDU, 7).node("7", 0o600);
    t.holder(321, "qemu-system-x86", 12, "/dev/vfio/7", "02000002");
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert_eq!(
        e,
        "refusing to set up 0000:00:04.0 for VFIO: the running system uses it: held open by PID 321 \
         (qemu-system-x86) for reading and writing: /dev/vfio/7; free it first (stop PID 321 (qemu-system-x86), or \
         have it close /dev/vfio/7) or choose another device; --force takes it anyway"
    );
    // --sysfs-user is refused too (main refuses it for any vfio-pci device before the in-use check).
    assert!(setup::sysfs_user(&t.host(), &edu(), "user", &opts(&k)).is_err());
    assert!(k.log().is_empty(), "{:?}", k.log());
    // Released: setup goes ahead (nothing to unbind: it is bound already).
    fs::remove_dir_all(t.path("proc/321")).unwrap();
    let ch = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    assert!(whats(&ch).iter().all(|w| !w.contains("unbound") && !w.contains("--force")), "{ch:?}");
}

#[test]
fn refuses_to_unbind_a_driver_with_an_interface_up() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 7).bind(EDU, "e1000e").vfio_loaded(false);
    let d = t.devdir(EDU);
    t.file(&format!("{d}/net/enp0s4/operstate"), "up\n").file(&format!("{d}/net/enp0s4/flags"), "0x1003\n");
    t.link("sys/class/net/enp0s4", &format!("{d}/net/enp0s4"));
    let k = FakeKernel::with_native(&t, &[(EDU, "e1000e")]);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("the running system uses it: enp0s4 is up; free it first (ip link set enp0s4 down)"), "{e}");
    // Administratively up but no carrier still counts (IFF_UP).
    t.file(&format!("{d}/net/enp0s4/operstate"), "down\n");
    assert!(setup::vfio(&t.host(), &edu(), &opts(&k)).is_err());
    t.file(&format!("{d}/net/enp0s4/flags"), "0x1002\n");
    let ch = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    assert!(whats(&ch).contains(&"unbound it from e1000e"));
}
