//! The inventory's open files, loop devices on the raw device and SR-IOV on fixture trees with a
//! fake /proc: fd links as the kernel shows them (absolute paths, resolved inside the tree), fdinfo
//! flags, maps lines, and device nodes as regular files reading `block MAJ:MIN` / `char MAJ:MIN`
//! (tests cannot mknod). Bad input included: unreadable and vanishing processes, looping links,
//! 100,000 descriptors.

use super::procs::{fd_dir_error, resolve_in_root, scan_with, Limits, Stop, LIMITS, NO_PERMISSION};
use super::tests::{F, FDIR, T};
use super::*;
use std::fs;
use std::os::unix::fs::symlink;

const VDE: &str = "sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/virtio3/block/vde";

impl T {
    /// Process `pid` (`comm`) with `target` open as descriptor `fd`, open flags `flags` (octal, as fdinfo).
    fn fd(&self, pid: u32, comm: &str, fd: u32, target: &str, flags: &str) -> &Self {
        self.file(&format!("proc/{pid}/comm"), &format!("{comm}\n"));
        self.file(&format!("proc/{pid}/fdinfo/{fd}"), &format!("pos:\t0\nflags:\t{flags}\nmnt_id:\t29\nino:\t9\n"));
        let l = self.p(&format!("proc/{pid}/fd/{fd}"));
        fs::create_dir_all(l.parent().unwrap()).unwrap();
        symlink(target, l).unwrap();
        self
    }

    /// A device node in the fixture's /dev.
    fn node(&self, path: &str, kind: &str, dev: &str) -> &Self {
        self.file(&format!("dev/{path}"), &format!("{kind} {dev}\n"))
    }

    fn inv_with(&self, limits: &Limits, privileged: bool) -> Inventory {
        let h = self.host();
        inventory_in(&h, F, &scan_with(&h, limits, privileged), true).unwrap()
    }
}

/// The function's virtio disk vde (254:64) with a partition vde1 (254:65) and their /dev nodes.
fn with_disk() -> T {
    disk_on(T::new())
}

fn disk_on(t: T) -> T {
    t.block(VDE, "254:64").partition(&format!("{VDE}/vde1"), "254:65");
    t.node("vde", "block", "254:64").node("vde1", "block", "254:65");
    t
}

#[test]
fn processes_holding_its_block_devices_are_named_by_device_number() {
    let t = with_disk();
    t.fd(258, "postgres", 3, "/dev/vde", "0100001");
    t.fd(300, "dd", 0, "/dev/vde1", "0100000");
    // A node made elsewhere (a container's /dev) with vde's number; a node named vde that is another disk.
    t.node("lxc/disk0", "block", "254:64").fd(301, "runc", 7, "/dev/lxc/disk0", "02");
    t.node("fake/vde", "block", "8:16").fd(302, "innocent", 4, "/dev/fake/vde", "02");
    // Pipes, sockets and files are no nodes of it.
    t.fd(303, "shell", 0, "pipe:[4711]", "0").fd(303, "shell", 1, "socket:[4712]", "02");
    t.fd(303, "shell", 2, "/home/u/notes.txt", "02");
    // This process opens the device itself: no holder.
    t.fd(std::process::id(), "pcibench", 9, "/dev/vde", "02");
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        [
            "held open by PID 258 (postgres) for writing: /dev/vde",
            "held open by PID 300 (dd) for reading: /dev/vde1",
            "held open by PID 301 (runc) for reading and writing: /dev/lxc/disk0 (vde)",
        ]
    );
    assert_eq!(inv.holders[0].kind, HolderKind::Open);
    assert_eq!(inv.holders[0].free, ["stop PID 258 (postgres), or have it close /dev/vde"]);
    assert!(inv.unchecked.is_empty());
}

#[test]
fn openers_of_what_is_stacked_on_it_and_of_its_class_devices() {
    let t = with_disk();
    let dm0 = t.dm(0, "vg-data", "LVM-abc");
    t.holds(&format!("{VDE}/vde1"), &dm0).node("dm-0", "block", "253:0");
    t.fd(410, "mysqld", 12, "/dev/dm-0", "0100002");
    // A DRM card and the NVMe controller's character node below the function.
    t.file(&format!("{FDIR}/drm/card0/dev"), "226:0\n").node("dri/card0", "char", "226:0");
    t.fd(411, "Xorg", 14, "/dev/dri/card0", "02");
    // A class device that is a block device is not taken for a character node with its number.
    t.file(&format!("{FDIR}/virtio3/block/vde/vde1/dev"), "254:65\n");
    t.node("char-254-65", "char", "254:65").fd(412, "other", 3, "/dev/char-254-65", "0");
    assert_eq!(
        t.inv().reasons(),
        [
            "it carries vg-data (dm-0, LVM) on vde1, which device-mapper keeps open",
            "held open by PID 410 (mysqld) for reading and writing: /dev/dm-0 (vg-data (dm-0, LVM) on vde1)",
            "held open by PID 411 (Xorg) for reading and writing: /dev/dri/card0",
        ]
    );
}

#[test]
fn its_vfio_group_node_and_its_sysfs_files_open_or_mapped() {
    let t = T::new();
    t.link(&format!("{FDIR}/iommu_group"), "sys/kernel/iommu_groups/5");
    t.dir("sys/kernel/iommu_groups/5/devices");
    // The vfio class device gives the group node's number; the node itself is /dev/vfio/5.
    t.file("sys/class/vfio/5/dev", "511:2\n").node("vfio/5", "char", "511:2");
    t.fd(500, "qemu-system-x86", 21, "/dev/vfio/5", "02000002");
    t.file(&format!("{FDIR}/resource0"), "").file(&format!("{FDIR}/config"), "");
    let res0 = t.p(&format!("{FDIR}/resource0"));
    let m = fs::metadata(&res0).unwrap();
    let (maj, min) = (
        rustix::fs::major(std::os::unix::fs::MetadataExt::dev(&m)),
        rustix::fs::minor(std::os::unix::fs::MetadataExt::dev(&m)),
    );
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    let shown = format!("/{FDIR}/resource0");
    // Mapped by device and inode; mapped in another sysfs mount (other inode), by path; a library is not.
    t.file(
        "proc/501/maps",
        &format!(
            "7f0000000000-7f0000100000 rw-s 00000000 {maj:02x}:{min:02x} {ino}                    {shown}\n\
             7f1000000000-7f1000001000 r-xp 00000000 08:01 1234                       /usr/lib/libc.so.6\n"
        ),
    );
    t.file("proc/501/comm", "fpga_tool\n").dir("proc/501/fd");
    t.file("proc/502/maps", &format!("7f00-7f01 r--s 00000000 00:99 77 {shown}\n"));
    t.file("proc/502/comm", "sandboxed\n").dir("proc/502/fd");
    t.fd(503, "setpci", 3, &format!("/{FDIR}/config"), "2");
    // A reader of the world-readable config (lspci) is no use of the device (issue 36 L3).
    t.fd(504, "lspci", 3, &format!("/{FDIR}/config"), "0");
    assert_eq!(
        t.inv().reasons(),
        [
            "held open by PID 500 (qemu-system-x86) for reading and writing: /dev/vfio/5",
            &format!("mapped by PID 501 (fpga_tool) for reading and writing: {shown}"),
            &format!("mapped by PID 502 (sandboxed) for reading: {shown}"),
            &format!("held open by PID 503 (setpci) for reading and writing: /{FDIR}/config"),
        ]
    );
    let u = vfio_group_users(&t.host(), F).unwrap();
    assert_eq!(
        (u.node.as_str(), u.who.as_slice()),
        ("/dev/vfio/5", ["PID 500 (qemu-system-x86)".to_string()].as_slice())
    );
}

#[test]
fn a_loop_device_on_the_raw_disk_is_followed_in_turn() {
    let t = with_disk();
    let lp = "sys/devices/virtual/block/loop7";
    t.block(lp, "7:7").file(&format!("{lp}/loop/backing_file"), "/dev/vde\n").node("loop7", "block", "7:7");
    // Backed by another disk, or by a file elsewhere: not ours.
    let l8 = "sys/devices/virtual/block/loop8";
    t.block(l8, "7:8").file(&format!("{l8}/loop/backing_file"), "/dev/sdz\n").node("sdz", "block", "8:0");
    let inv = t.inv();
    assert_eq!(inv.reasons(), ["it carries loop7 (backing file /dev/vde) on vde, which the loop driver keeps open"]);
    assert_eq!(inv.free_steps(), ["losetup -d /dev/loop7"]);
    // Its mounts and openers in turn.
    t.mounts(&[("7:7", "/mnt/img", "/dev/loop7")]);
    t.fd(900, "cat", 3, "/dev/loop7", "0");
    assert_eq!(
        t.inv().reasons(),
        [
            "it backs /mnt/img through loop7 (backing file /dev/vde) on vde",
            "held open by PID 900 (cat) for reading: /dev/loop7 (loop7 (backing file /dev/vde) on vde)",
        ]
    );
    // A backing node that cannot be looked up here (another mount namespace) is matched by its name.
    fs::remove_file(t.p("dev/vde")).unwrap();
    t.mounts(&[]);
    assert_eq!(
        t.inv().reasons()[0],
        "it carries loop7 (backing file /dev/vde) on vde, which the loop driver keeps open"
    );
}

#[test]
fn sriov_virtual_functions_bound_or_in_use_are_named() {
    let t = T::new();
    t.file(&format!("{FDIR}/sriov_numvfs"), "2\n");
    let vf = |n: u32| format!("sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.{}", n + 2);
    for n in 0..2 {
        t.dir(&vf(n)).link(&format!("{FDIR}/virtfn{n}"), &vf(n));
        t.link(&format!("sys/bus/pci/devices/0000:01:00.{}", n + 2), &vf(n));
    }
    assert!(t.inv().is_empty(), "VFs enabled but unused");
    t.link(&format!("{}/driver", vf(0)), "sys/bus/pci/drivers/ixgbevf").dir("sys/bus/pci/drivers/ixgbevf");
    // VF 1 on vfio-pci with its group held by a VM.
    t.link(&format!("{}/driver", vf(1)), "sys/bus/pci/drivers/vfio-pci").dir("sys/bus/pci/drivers/vfio-pci");
    t.link(&format!("{}/iommu_group", vf(1)), "sys/kernel/iommu_groups/12").dir("sys/kernel/iommu_groups/12");
    t.node("vfio/12", "char", "511:12").fd(77, "qemu-system-x86", 30, "/dev/vfio/12", "02");
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        [
            "its SR-IOV virtual function 0000:01:00.2 (virtfn0) is bound to ixgbevf; taking 0000:01:00.0 from its driver removes all 2 of its virtual functions",
            "its SR-IOV virtual function 0000:01:00.3 (virtfn1) is bound to vfio-pci, held open by PID 77 (qemu-system-x86) for reading and writing: /dev/vfio/12; taking 0000:01:00.0 from its driver removes all 2 of its virtual functions",
        ]
    );
    assert_eq!(inv.holders[0].kind, HolderKind::Sriov);
    assert_eq!(
        inv.holders[1].free,
        [
            "stop PID 77 (qemu-system-x86), or have it close /dev/vfio/12",
            "echo 0 | sudo tee /sys/bus/pci/devices/0000:01:00.0/sriov_numvfs (removes its virtual functions)"
        ]
    );
}

#[test]
fn processes_that_cannot_be_checked_are_said_never_passed() {
    let t = with_disk();
    // /proc/600/fd cannot be listed (here: not a directory; for another user's process: EACCES).
    t.file("proc/600/comm", "odd\n").file("proc/600/fd", "");
    // A link that loops.
    t.fd(700, "loopy", 3, "/proc/700/fd/3", "0");
    t.fd(701, "loopy2", 3, "/a", "0");
    symlink("/b", t.p("a")).unwrap();
    symlink("/a", t.p("b")).unwrap();
    let inv = t.inv();
    assert!(inv.is_empty());
    assert_eq!(
        inv.unchecked.words(),
        "could not check PID 600 (/proc/PID/fd cannot be listed (Not a directory (os error 20))); \
         could not check PIDs 700, 701 (what an open file is cannot be told (Too many levels of symbolic links (os error 40)))"
    );
    // /proc mounted hidepid=invisible hides other users' processes from whoever is not root.
    let t = with_disk();
    t.file("proc/self/mountinfo", "22 1 0:21 / /proc rw,nosuid - proc proc rw,hidepid=invisible\n");
    assert_eq!(
        t.inv_with(&LIMITS, false).unchecked.words(),
        "other users' processes are hidden (/proc is mounted with hidepid=invisible): run it as root to check them"
    );
    assert!(t.inv_with(&LIMITS, true).unchecked.is_empty());
}

#[test]
fn a_process_that_exits_mid_scan_holds_nothing() {
    let t = with_disk();
    t.fd(258, "postgres", 3, "/dev/vde", "01");
    // Listed, but its fd directory already gone.
    t.file("proc/259/comm", "exiting\n");
    let h = t.host();
    let scan = scan_with(&h, &LIMITS, true);
    assert!(scan.unchecked.is_empty());
    // Gone between the scan and the naming: not a holder.
    fs::remove_dir_all(t.p("proc/258")).unwrap();
    let inv = inventory_in(&h, F, &scan, true).unwrap();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
}

#[test]
fn a_hundred_thousand_descriptors_are_read_to_the_end_or_the_limit_is_said() {
    // 100,000 symlinks: on tmpfs where there is one (ext4 with discard took 20 s to make them here).
    let t = disk_on(T::in_dir(tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap()));
    let fd = t.p("proc/800/fd");
    fs::create_dir_all(&fd).unwrap();
    for n in 0..99_999 {
        symlink(format!("socket:[{n}]"), fd.join(n.to_string())).unwrap();
    }
    t.fd(800, "bigserver", 99_999, "/dev/vde", "02");
    assert_eq!(t.inv().reasons(), ["held open by PID 800 (bigserver) for reading and writing: /dev/vde"]);
    // Past the scan's limit: no holder seen, and not a pass.
    let inv = t.inv_with(&Limits { entries: 50_000, ..LIMITS }, true);
    assert!(inv.is_empty());
    assert_eq!(inv.unchecked.words(), "could not check PID 800 (the scan stopped after 50000 open files and mappings)");
}

#[test]
fn permission_denied_is_unchecked_unless_a_kernel_thread() {
    let t = T::new();
    // Field 9 is the flags: kthreadd has PF_KTHREAD (0x00200000), init has not; a command name
    // with spaces and parentheses does not shift the fields.
    t.file("proc/2/stat", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n");
    t.file("proc/1/stat", "1 (my (odd) init) S 0 1 1 0 -1 4194560 4417 0 0 0 0 0 0 0 20 0 1 0 4 0 0\n");
    let denied = std::io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error());
    assert_eq!(fd_dir_error(&denied, &t.p("proc/2")), Stop::Kernel);
    assert_eq!(fd_dir_error(&denied, &t.p("proc/1")), Stop::Unchecked(NO_PERMISSION.into()));
    let perm = std::io::Error::from_raw_os_error(rustix::io::Errno::PERM.raw_os_error());
    assert_eq!(fd_dir_error(&perm, &t.p("proc/9")), Stop::Unchecked(NO_PERMISSION.into()));
    let gone = std::io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error());
    assert_eq!(fd_dir_error(&gone, &t.p("proc/1")), Stop::Gone);
    let mut u = Unchecked::default();
    for pid in [1, 5, 3, 40, 41, 42, 43, 44, 45, 46] {
        u.add(pid, NO_PERMISSION);
    }
    assert_eq!(
        u.words(),
        "could not check PIDs 1, 3, 5, 40, 41, 42, 43, 44 and 2 more (no permission to read their open files: run it as root)"
    );
    // Issue 43: root denied all the same (a sandbox: EPERM on /proc/1) is never told to run as root.
    let mut u = Unchecked::default();
    u.add(1, NO_PERMISSION);
    u.unseen.push(
        "other users' processes are hidden (/proc is mounted with hidepid=2): run it as root to check them".into(),
    );
    u.as_root();
    let w = u.words();
    assert!(!w.contains("run it as root"), "{w}");
    assert!(
        w.starts_with("could not check PID 1 (no permission to read their open files, even as root (a container"),
        "{w}"
    );
}

#[test]
fn links_resolve_inside_a_fixture_tree_where_openat2_is_missing() {
    // identify's fallback (qemu-user, kernels before 5.6): absolute targets restart at the tree's root,
    // `..` stops there, and a loop ends in ELOOP as the kernel's own lookup would.
    let t = T::new();
    let root = t.dir.path();
    t.file("c/d", "x");
    symlink("/c/../../c", t.p("b")).unwrap();
    symlink("/b/d", t.p("a")).unwrap();
    assert_eq!(resolve_in_root(root, &t.p("a")).unwrap(), t.p("c/d"));
    symlink("/y", t.p("x")).unwrap();
    symlink("x", t.p("y")).unwrap();
    let e = resolve_in_root(root, &t.p("x")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(rustix::io::Errno::LOOP.raw_os_error()));
    assert_eq!(resolve_in_root(root, &t.p("nowhere/z")).unwrap_err().kind(), std::io::ErrorKind::NotFound);
}
