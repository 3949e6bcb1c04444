//! The kernel's own answers on fixture trees: the exclusive-open probe's every outcome, mounts in
//! other mount namespaces, and the walk of other network namespaces (no permission, one that goes
//! away while it is walked, 200 of them).

use super::kernel::{Exclusive, Fixture, Kernel, NsError, NsLink, NsView};
use super::procs::Devno;
use super::tests::{F, FDIR, T};
use super::*;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

const VDB: &str = "sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0/virtio1/block/vdb";

/// The fixture's answers, with every question asked written down.
#[derive(Debug, Default)]
struct Counting {
    probes: Mutex<Vec<String>>,
    views: Mutex<Vec<String>>,
    /// Removed from the tree before the first namespace is looked into (a process exiting mid-walk).
    vanish: Option<std::path::PathBuf>,
}

impl Kernel for Counting {
    fn exclusive_open(&self, host: &Host, node: &Path, dev: Devno) -> Exclusive {
        self.probes.lock().unwrap().push(node.file_name().unwrap().to_string_lossy().into_owned());
        Fixture.exclusive_open(host, node, dev)
    }

    fn net_view(&self, host: &Host, ns: &Path, inode: u64) -> Result<NsView, NsError> {
        let mut v = self.views.lock().unwrap();
        if v.is_empty() {
            if let Some(p) = &self.vanish {
                fs::remove_dir_all(p).unwrap();
            }
        }
        v.push(ns.strip_prefix(host.root()).unwrap().display().to_string());
        drop(v);
        Fixture.net_view(host, ns, inode)
    }
}

fn counting(t: &T) -> (Host, Arc<Counting>) {
    let k = Arc::new(Counting::default());
    (t.host().with_kernel(k.clone()), k)
}

/// vdb (254:16) below the function with a partition vdb1 (254:17).
fn disk(t: &T) {
    t.block(VDB, "254:16").partition(&format!("{VDB}/vdb1"), "254:17");
}

#[test]
fn the_probe_asks_only_about_devices_nothing_else_explains() {
    let t = T::new();
    disk(&t);
    t.mounts(&[("254:17", "/data", "/dev/vdb1")]);
    let (host, k) = counting(&t);
    let inv = inventory(&host, F).unwrap();
    assert_eq!(inv.reasons(), ["it backs /data through vdb1"]);
    // vdb1 is mounted here and vdb carries it: neither is opened.
    assert!(k.probes.lock().unwrap().is_empty(), "{:?}", k.probes.lock().unwrap());
    // Unmounted: both are asked, and free.
    t.mounts(&[]);
    let (host, k) = counting(&t);
    let inv = inventory(&host, F).unwrap();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
    assert_eq!(*k.probes.lock().unwrap(), ["vdb", "vdb1"]);
}

#[test]
fn every_probe_outcome_is_a_holder_or_could_not_check() {
    let t = T::new();
    disk(&t);
    // EBUSY on the partition: it is named; the whole disk (busy because of it) is not.
    t.file("dev/vdb", "block 254:16 busy\n").file("dev/vdb1", "block 254:17 busy\n");
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        ["vdb1 is held exclusively by the kernel (a mount in another namespace, a storage target export, ...)"]
    );
    assert_eq!(inv.holders[0].kind, HolderKind::Exclusive);
    assert_eq!(
        inv.free_steps(),
        ["find its holder with `lsblk /dev/vdb1`, `findmnt -N PID` (a container's PID), `targetcli ls`, and release it"]
    );
    // The disk alone busy (a storage target exports the whole disk).
    t.file("dev/vdb1", "block 254:17\n");
    assert_eq!(
        t.inv().reasons(),
        ["vdb is held exclusively by the kernel (a mount in another namespace, a storage target export, ...)"]
    );
    // EACCES: no holder, but not free either.
    t.file("dev/vdb", "block 254:16 eacces\n");
    let inv = t.inv();
    assert!(inv.is_empty(), "{inv:?}");
    assert_eq!(
        inv.unchecked.words(),
        "could not ask the kernel whether vdb is held exclusively (/dev/vdb: Permission denied (os error 13): run it as root)"
    );
    // No node; a node of another device: nothing is opened, and it is said.
    fs::remove_file(t.p("dev/vdb")).unwrap();
    assert!(t.inv().unchecked.words().contains("no node /dev/vdb: is devtmpfs mounted on /dev?"));
    t.file("dev/vdb", "block 254:99\n");
    assert!(t.inv().unchecked.words().contains("/dev/vdb is a block device 254:99, not block device 254:16"));
    // The kernel's DEVNAME names the node.
    t.file(&format!("{VDB}/uevent"), "MAJOR=254\nMINOR=16\nDEVNAME=disk/vdb\n");
    t.file("dev/disk/vdb", "block 254:16 busy\n");
    assert!(t.inv().reasons()[0].starts_with("vdb is held exclusively"));
}

#[test]
fn a_hidden_per_path_node_and_stacked_devices_are_never_opened() {
    let t = T::new();
    let ctrl = format!("{FDIR}/nvme/nvme0");
    t.block(&format!("{ctrl}/nvme0c0n1"), "259:9").file(&format!("{ctrl}/nvme0c0n1/hidden"), "1\n");
    let (host, k) = counting(&t);
    assert!(inventory(&host, F).unwrap().is_empty());
    assert!(k.probes.lock().unwrap().is_empty());
}

#[test]
fn a_busy_disk_is_named_by_the_mount_namespace_that_mounts_it() {
    let t = T::new();
    disk(&t);
    t.file("dev/vdb", "block 254:16 busy\n");
    t.link("proc/self/ns/mnt", "mnt:[4026531841]");
    // PID 1 shares our namespace; PIDs 812 and 813 share another, which mounts vdb twice.
    t.link("proc/1/ns/mnt", "mnt:[4026531841]").file("proc/1/comm", "init\n");
    for pid in [812, 813] {
        t.link(&format!("proc/{pid}/ns/mnt"), "mnt:[4026532300]").file(&format!("proc/{pid}/comm"), "sleep\n");
    }
    let info = "40 30 254:16 / /data rw - ext4 /dev/vdb rw\n41 30 254:16 / /srv rw - ext4 /dev/vdb rw\n";
    t.file("proc/812/mountinfo", info);
    let inv = t.inv();
    assert_eq!(inv.reasons(), ["it backs /data, /srv in the mount namespace of PID 812 (sleep) through vdb"]);
    assert_eq!(inv.free_steps(), ["nsenter -t 812 -m umount /srv", "nsenter -t 812 -m umount /data"]);
    // PID 812 exited: the namespace is read through 813.
    fs::remove_dir_all(t.p("proc/812")).unwrap();
    t.file("proc/813/mountinfo", info);
    assert!(t.inv().reasons()[0].ends_with("in the mount namespace of PID 813 (sleep) through vdb"));
    // Mounted nowhere pcibench can see: the kernel holds it.
    fs::remove_dir_all(t.p("proc/813")).unwrap();
    assert_eq!(t.inv().holders[0].kind, HolderKind::Exclusive);
}

/// A network function whose interface is in another namespace: `net/` empty here.
fn nic(t: &T) {
    t.file(&format!("{FDIR}/class"), "0x020000\n");
    t.dir(&format!("{FDIR}/virtio0/net"));
    t.link("sys/bus/virtio/devices/virtio0", &format!("{FDIR}/virtio0"));
    t.link("proc/self/ns/net", "net:[4026531840]");
}

fn ns_file(t: &T, rel: &str, inode: u64, view: &NsView) {
    t.file(rel, &format!("net:[{inode}]\n{}\n", serde_json::to_string(view).unwrap()));
}

fn eth(index: i32, name: &str, up: bool, parent: Option<&str>) -> NsLink {
    NsLink {
        index,
        name: name.into(),
        up,
        parent_bus: parent.map(|_| "virtio".into()),
        parent: parent.map(Into::into),
        ..Default::default()
    }
}

fn pod(up: bool, addr: bool) -> NsView {
    let lo = NsLink { index: 1, name: "lo".into(), up: true, ..Default::default() };
    let addrs = if addr { vec![(2, "10.0.0.2/24".to_string())] } else { Vec::new() };
    NsView { links: vec![lo, eth(2, "eth1", up, Some("virtio0"))], addrs }
}

#[test]
fn an_interface_in_another_namespace_is_named_by_its_name_or_process() {
    let t = T::new();
    nic(&t);
    ns_file(&t, "run/netns/blue", 4026532500, &pod(true, true));
    let inv = t.inv();
    assert_eq!(inv.reasons(), ["eth1 is up with 10.0.0.2/24 in network namespace blue (ip netns)"]);
    assert_eq!(inv.free_steps(), ["ip -n blue link set eth1 down"]);
    // Only a process in it: named by PID and command; down with an address still holds it.
    fs::remove_file(t.p("run/netns/blue")).unwrap();
    ns_file(&t, "proc/812/ns/net", 4026532500, &pod(false, true));
    t.file("proc/812/comm", "pause\n");
    let inv = t.inv();
    assert_eq!(inv.reasons(), ["eth1 is down but has 10.0.0.2/24 in the network namespace of PID 812 (pause)"]);
    assert_eq!(inv.free_steps(), ["nsenter -t 812 -n ip addr flush dev eth1"]);
    // Enslaved, and carrying an upper device that is up.
    let mut v = pod(false, false);
    v.links[1].master = Some(3);
    v.links.push(NsLink { index: 3, name: "br0".into(), up: true, ..Default::default() });
    v.links.push(NsLink { index: 4, name: "eth1.7".into(), up: true, link: Some(2), ..Default::default() });
    ns_file(&t, "proc/812/ns/net", 4026532500, &v);
    assert_eq!(
        t.inv().reasons(),
        [
            "eth1 is enslaved to br0 in the network namespace of PID 812 (pause)",
            "eth1 carries eth1.7, up, in the network namespace of PID 812 (pause)"
        ]
    );
    // Down, no address, nothing above: free, and nothing left unchecked.
    ns_file(&t, "proc/812/ns/net", 4026532500, &pod(false, false));
    let inv = t.inv();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
}

/// Issue 54: a namespace nothing keeps but a mount outside /run/netns (Docker's /run/docker/netns),
/// here or only in another mount namespace, or a descriptor of a process in this one: found
/// through mountinfo's nsfs lines and the processes' fd links, and named as a user reaches it.
#[test]
fn a_namespace_kept_by_a_mount_anywhere_or_a_descriptor_is_found_and_named() {
    let t = T::new();
    nic(&t);
    // mountinfo escapes a space as \040 (fs/proc_namespace.c, mangle).
    let nsfs = |point: &str| {
        let point = point.replace(' ', "\\040");
        format!("22 1 0:21 / /proc rw - proc proc rw\n61 1 0:4 net:[4026532600] {point} rw - nsfs nsfs rw\n")
    };
    t.file("proc/self/mountinfo", &nsfs("/run/docker/netns/1a2b"));
    ns_file(&t, "run/docker/netns/1a2b", 4026532600, &pod(true, true));
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        ["eth1 is up with 10.0.0.2/24 in the network namespace mounted on /run/docker/netns/1a2b"]
    );
    assert_eq!(inv.free_steps(), ["nsenter --net=/run/docker/netns/1a2b ip link set eth1 down"]);
    assert!(inv.unchecked.is_empty(), "{inv:?}");

    // Mounted only in the mount namespace of PID 640: reached through its root.
    t.file("proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n");
    t.dir("proc/640/ns").file("proc/640/comm", "containerd\n");
    std::os::unix::fs::symlink("mnt:[4026531841]", t.p("proc/self/ns/mnt")).unwrap();
    std::os::unix::fs::symlink("mnt:[4026532700]", t.p("proc/640/ns/mnt")).unwrap();
    t.file("proc/640/mountinfo", &nsfs("/var/lib/ns/pod 7"));
    ns_file(&t, "proc/640/root/var/lib/ns/pod 7", 4026532600, &pod(true, false));
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        ["eth1 is up in the network namespace mounted on /var/lib/ns/pod 7 in the mount namespace of PID 640 (containerd)"]
    );
    assert_eq!(inv.free_steps(), ["nsenter --net='/proc/640/root/var/lib/ns/pod 7' ip link set eth1 down"]);

    // Held only by descriptor 5 of PID 700, a process in this namespace.
    fs::remove_dir_all(t.p("proc/640")).unwrap();
    t.dir("proc/700/fd").file("proc/700/comm", "python3\n");
    std::os::unix::fs::symlink("net:[4026532600]", t.p("proc/700/fd/5")).unwrap();
    ns_file(&t, ".netns/4026532600", 4026532600, &pod(true, true));
    let inv = t.inv();
    assert_eq!(
        inv.reasons(),
        ["eth1 is up with 10.0.0.2/24 in the network namespace PID 700 (python3) holds open as descriptor 5"]
    );
    assert_eq!(inv.free_steps(), ["nsenter --net=/proc/700/fd/5 ip link set eth1 down"]);
    // Closed: nothing keeps it, the interface is nowhere found, and that is said.
    fs::remove_file(t.p("proc/700/fd/5")).unwrap();
    let inv = t.inv();
    assert!(inv.is_empty(), "{inv:?}");
    assert!(inv.unchecked.words().contains("its network interfaces are in no network namespace pcibench could find"));
}

/// Run in a PID namespace of its own (a container's), /proc lists only that namespace's processes:
/// the host's are not seen, and that is said, never taken as holding nothing.
#[test]
fn a_pid_namespace_of_its_own_is_could_not_check() {
    let t = T::new();
    fs::create_dir_all(t.p("proc/self/ns")).unwrap();
    std::os::unix::fs::symlink("pid:[4026532800]", t.p("proc/self/ns/pid")).unwrap();
    let w = t.inv().unchecked.words();
    assert!(
        w.starts_with("pcibench runs in a PID namespace of its own (a container's), so processes outside it"),
        "{w}"
    );
    // The initial PID namespace (PROC_PID_INIT_INO) sees every process.
    fs::remove_file(t.p("proc/self/ns/pid")).unwrap();
    std::os::unix::fs::symlink("pid:[4026531836]", t.p("proc/self/ns/pid")).unwrap();
    assert!(t.inv().unchecked.is_empty());
}

#[test]
fn a_namespace_that_cannot_be_entered_is_could_not_check() {
    let t = T::new();
    nic(&t);
    t.file("proc/812/ns/net", "net:[4026532500]\neacces\n").file("proc/812/comm", "pause\n");
    let inv = t.inv();
    assert!(inv.is_empty());
    assert_eq!(
        inv.unchecked.words(),
        "could not look into the network namespace of PID 812 (pause) (no permission to enter it: run it as root)"
    );
    // Not even which namespace a process is in (another user's /proc/PID/ns, not root).
    fs::remove_dir_all(t.p("proc/812")).unwrap();
    fs::create_dir_all(t.p("proc/900/ns")).unwrap();
    t.file("proc/900/ns/net", "");
    let words = t.inv().unchecked.words();
    assert!(words.contains("could not see the network namespace of PID 900"), "{words}");
    // A function with no network: no namespace is walked, nothing is said.
    let plain = T::new();
    plain.file("proc/812/ns/net", "net:[4026532500]\neacces\n");
    assert!(plain.inv().unchecked.is_empty());
}

#[test]
fn a_net_directory_whose_interfaces_are_nowhere_found_is_could_not_check() {
    let t = T::new();
    nic(&t);
    let inv = t.inv();
    assert!(inv.is_empty());
    assert!(inv.unchecked.words().contains("its network interfaces are in no network namespace pcibench could find"));
    // Its interface here, down: free.
    t.dir(&format!("{FDIR}/virtio0/net/eth0"));
    assert!(t.inv().unchecked.is_empty());
}

#[test]
fn a_namespace_that_goes_away_while_walked_holds_nothing() {
    let t = T::new();
    nic(&t);
    // Two namespaces; the second's first process exits while the first is looked into.
    ns_file(&t, "proc/700/ns/net", 4026532400, &NsView::default());
    ns_file(&t, "proc/800/ns/net", 4026532500, &pod(true, true));
    t.file("proc/800/comm", "pause\n");
    let k = Arc::new(Counting { vanish: Some(t.p("proc/800")), ..Default::default() });
    let inv = inventory(&t.host().with_kernel(k.clone()), F).unwrap();
    // Its last process gone, the namespace went with it and holds nothing; its interface is on its
    // way back to this namespace (default_device_exit_net), not yet seen here: not a pass.
    assert!(inv.is_empty(), "{inv:?}");
    assert!(inv.unchecked.words().starts_with("its network interfaces are in no network namespace"), "{inv:?}");
    // Run again: the interface is back here, down.
    t.dir(&format!("{FDIR}/virtio0/net/eth1"));
    let inv = inventory(&t.host(), F).unwrap();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
    // A second process keeps it: looked into through that one.
    ns_file(&t, "proc/800/ns/net", 4026532500, &pod(true, true));
    ns_file(&t, "proc/801/ns/net", 4026532500, &pod(true, true));
    t.file("proc/801/comm", "nginx\n");
    let k = Arc::new(Counting { vanish: Some(t.p("proc/800")), ..Default::default() });
    let inv = inventory(&t.host().with_kernel(k.clone()), F).unwrap();
    assert_eq!(inv.reasons(), ["eth1 is up with 10.0.0.2/24 in the network namespace of PID 801 (nginx)"]);
    assert_eq!(*k.views.lock().unwrap(), ["proc/700/ns/net", "proc/800/ns/net", "proc/801/ns/net"]);
}

#[test]
fn two_hundred_namespaces_are_each_looked_into_once_per_command() {
    let t = T::new();
    nic(&t);
    // pcibench skips its own PID, and a fixture's PID equal to this test process's would be
    // skipped too: the 200 PIDs are placed above pid_max's ceiling (PID_MAX_LIMIT, 2^22), which
    // no real process has (issue 34: PIDs 1000-1199 failed on a runner whose PID fell among them).
    let base = 1u64 << 23;
    for i in 0..200u64 {
        let pid = base + i;
        let view =
            if i == 137 { pod(true, true) } else { NsView { links: vec![eth(2, "eth0", true, None)], addrs: vec![] } };
        ns_file(&t, &format!("proc/{pid}/ns/net"), 4026533000 + i, &view);
        t.file(&format!("proc/{pid}/comm"), "pause\n");
    }
    let (host, k) = counting(&t);
    let inv = inventory(&host, F).unwrap();
    let pod_pid = base + 137;
    assert_eq!(
        inv.reasons(),
        [format!("eth1 is up with 10.0.0.2/24 in the network namespace of PID {pod_pid} (pause)")]
    );
    assert_eq!(k.views.lock().unwrap().len(), 200);
    // The next device of the same command reuses the walk.
    inventory(&host, F).unwrap();
    assert_eq!(k.views.lock().unwrap().len(), 200);
}

/// Found on the real kernel (lab inuse_nvme): an NVMe subsystem holds the head's generic character
/// node (ng0n1, class nvme-generic) beside the head, with a `dev` of its own. Only the head is a
/// block device; the generic node is never taken for one, never opened.
#[test]
fn the_heads_generic_character_node_is_no_block_device() {
    let t = T::new();
    let ctrl = format!("{FDIR}/nvme/nvme0");
    let subsys = "sys/devices/virtual/nvme-subsystem/nvme-subsys0";
    t.file(&format!("{ctrl}/dev"), "240:0\n");
    t.link(&format!("{subsys}/nvme0"), &ctrl);
    t.link("sys/class/nvme-subsystem/nvme-subsys0", subsys);
    t.block(&format!("{subsys}/nvme0n1"), "259:0").link(&format!("{subsys}/nvme0n1/subsystem"), "sys/class/block");
    t.file(&format!("{subsys}/ng0n1/dev"), "246:0\n")
        .link(&format!("{subsys}/ng0n1/subsystem"), "sys/class/nvme-generic");
    t.file("dev/ng0n1", "char 246:0\n");
    let (host, k) = counting(&t);
    let inv = inventory(&host, F).unwrap();
    assert!(inv.is_empty() && inv.unchecked.is_empty(), "{inv:?}");
    assert_eq!(*k.probes.lock().unwrap(), ["nvme0n1"]);
}
