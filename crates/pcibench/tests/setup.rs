//! `setup` on fixture trees with a fake kernel: the writes land in the fixture's files
//! (unbind, driver_override, drivers_probe, the no-IOMMU parameter, config), the fake plays
//! the kernel's part (binding, group nodes), and each action is idempotent and refuses to
//! take away a mounted filesystem or an interface that is up.

#[path = "setup/by_id.rs"]
mod by_id;
mod common;
#[path = "setup/in_use.rs"]
mod in_use;
#[path = "setup/kernel.rs"]
mod kernel;

use common::{root, Tree, EDU, USER_UID};
use kernel::FakeKernel;
use pcibench::access::Via;
use pcibench::device::Target;
use pcibench::doctor;
use pcibench::pci::PciAddress;
use pcibench::setup::{self, Change, SetupOptions, System, User};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::Duration;

fn opts(k: &Arc<FakeKernel>) -> SetupOptions {
    SetupOptions {
        force: false,
        notify: Some(notify(k)),
        user: Some(User { name: "user".into(), uid: USER_UID, gid: USER_UID }),
        timeout: Duration::from_secs(5),
        system: k.clone(),
    }
}

/// What --force announces goes into the kernel's log, so tests see it came before any write.
fn notify(k: &Arc<FakeKernel>) -> setup::Notify {
    let k = k.clone();
    Arc::new(move |m: &str| k.log.lock().unwrap().push(format!("notify {m}")))
}

fn edu() -> PciAddress {
    EDU.parse().unwrap()
}

/// The changes, without the notes (what the user must know about the state left).
fn whats(ch: &[Change]) -> Vec<&str> {
    ch.iter().filter(|c| !c.note).map(|c| c.what.as_str()).collect()
}

fn notes(ch: &[Change]) -> Vec<&str> {
    ch.iter().filter(|c| c.note).map(|c| c.what.as_str()).collect()
}

fn recommended_via(t: &Tree) -> Option<Via> {
    doctor::run_as(&t.host(), &Target::Pci(edu()), &root()).unwrap().recommended.via
}

#[test]
fn vfio_without_iommu_enables_noiommu_and_binds() {
    let t = Tree::new();
    t.edu();
    let k = FakeKernel::new(&t);
    let ch = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    assert_eq!(
        whats(&ch),
        [
            "loaded vfio in no-IOMMU mode (modprobe vfio enable_unsafe_noiommu_mode=1): this host has no IOMMU",
            "loaded vfio-pci (modprobe vfio-pci)",
            &format!("remembered its driver (none) in {} for --release", t.path("run/pcibench/0000:00:04.0").display()),
            "set driver_override to vfio-pci",
            "bound it to vfio-pci (drivers_probe)",
            "gave user /dev/vfio/noiommu-0 (chown 4242:4242): group 0 holds 0000:00:04.0",
        ]
    );
    assert!(ch[0].warning.as_deref().is_some_and(|w| w.contains("taints the kernel")), "{:?}", ch[0]);
    // The grant names what the user can then do: a no-IOMMU group is root-equivalent.
    let grant = ch.last().unwrap().warning.as_deref().unwrap();
    assert!(
        grant.starts_with("user can now open /dev/vfio/noiommu-0 and point 0000:00:04.0's DMA at any physical address")
            && grant.contains("root-equivalent")
            && grant.ends_with("take it back with: sudo pcibench setup 0000:00:04.0 --release"),
        "{grant}"
    );
    let dev = t.devdir(EDU);
    assert_eq!(t.read(&format!("{dev}/driver_override")), "vfio-pci");
    assert_eq!(t.read("sys/bus/pci/drivers_probe"), EDU);
    // The node's owner and mode before the grant, for --release.
    let node = fs::metadata(t.path("dev/vfio/noiommu-0")).unwrap();
    assert_eq!(
        t.read("run/pcibench/0000:00:04.0"),
        format!("driver=\nowner={}:{}:{:o} /dev/vfio/noiommu-0\n", node.uid(), node.gid(), node.mode() & 0o7777)
    );
    assert_eq!(recommended_via(&t), Some(Via::VfioNoiommu));

    // Twice: nothing left to change, nothing written; the no-IOMMU warning is said again.
    let before = k.log().len();
    let again = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    assert_eq!(whats(&again), Vec::<&str>::new());
    assert_eq!(notes(&again), ["/dev/vfio/noiommu-0 is a no-IOMMU group"]);
    assert_eq!(k.log().len(), before, "{:?}", &k.log()[before..]);
    assert_eq!(
        pcibench::report::setup::render_changes(EDU, &again),
        format!(
            "0000:00:04.0: nothing to change, already set up\n0000:00:04.0: /dev/vfio/noiommu-0 is a no-IOMMU group\nWARNING: {}\n",
            setup::NOIOMMU_WARNING
        )
    );
    // Without --user (and whatever SUDO_USER says) nobody is given the node.
    let nobody = SetupOptions { user: None, ..opts(&k) };
    let ch = setup::vfio(&t.host(), &edu(), &nobody).unwrap();
    assert!(whats(&ch).is_empty());
    assert!(notes(&ch).iter().any(|n| n.contains("--release takes it back")), "{ch:?}");
}

#[test]
fn vfio_without_user_leaves_the_node_roots_and_says_how_to_give_it() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 7).module("vfio").module("vfio_pci").module("vfio_iommu_type1").node("vfio", 0o666);
    t.file("sys/bus/pci/drivers/vfio-pci/unbind", "").file("sys/bus/pci/drivers/vfio-pci/bind", "");
    let k = FakeKernel::new(&t);
    let o = SetupOptions { user: None, ..opts(&k) };
    let ch = setup::vfio(&t.host(), &edu(), &o).unwrap();
    assert!(!k.log().iter().any(|l| l.starts_with("chown")), "{:?}", k.log());
    let owner = fs::metadata(t.path("dev/vfio/7")).unwrap().uid();
    let want = if owner == 0 {
        "nobody was given /dev/vfio/7: it stays root's; to let a user open it: sudo pcibench setup 0000:00:04.0 --vfio --user NAME"
    } else {
        "/dev/vfio/7 belongs to uid"
    };
    assert!(notes(&ch).iter().any(|n| n.starts_with(want)), "{ch:?}");
}

#[test]
fn vfio_with_noiommu_param_off_writes_it() {
    let t = Tree::new();
    t.edu().vfio_loaded(false);
    let k = FakeKernel::new(&t);
    let ch = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    assert!(ch[0]
        .what
        .starts_with("enabled no-IOMMU mode (1 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode)"));
    assert!(ch[0].warning.is_some());
    assert!(k.log().contains(&"write sys/module/vfio/parameters/enable_unsafe_noiommu_mode \"1\"".to_string()));
    assert_eq!(t.read("sys/module/vfio/parameters/enable_unsafe_noiommu_mode"), "Y\n");
    let text = pcibench::report::setup::render_changes(EDU, &ch);
    assert!(text.contains("\nWARNING: no-IOMMU mode taints the kernel"), "{text}");
}

#[test]
fn vfio_refuses_without_noiommu_support() {
    let t = Tree::new();
    t.edu().module("vfio").module("vfio_pci");
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("CONFIG_VFIO_NOIOMMU"), "{e}");
    assert!(e.contains("sudo pcibench setup 0000:00:04.0 --sysfs-user USER"), "{e}");
    assert!(k.log().is_empty(), "{:?}", k.log());
}

#[test]
fn vfio_with_iommu_unbinds_the_driver_and_release_restores_it() {
    let t = Tree::new();
    t.edu().iommu().bind(EDU, "e1000e").group(EDU, 7).module("vfio").module("vfio_pci").node("vfio", 0o666);
    t.file("sys/bus/pci/drivers/vfio-pci/unbind", "").file("sys/bus/pci/drivers/vfio-pci/bind", "");
    let k = FakeKernel::with_native(&t, &[(EDU, "e1000e")]);
    let ch = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    assert_eq!(
        whats(&ch)[..2],
        [
            "loaded vfio_iommu_type1 (modprobe vfio_iommu_type1)",
            &*format!(
                "remembered its driver (e1000e) in {} for --release",
                t.path("run/pcibench/0000:00:04.0").display()
            )
        ]
    );
    assert_eq!(
        whats(&ch)[2..5],
        ["unbound it from e1000e", "set driver_override to vfio-pci", "bound it to vfio-pci (drivers_probe)"]
    );
    assert_eq!(ch[5].what, "gave user /dev/vfio/7 (chown 4242:4242): group 7 holds 0000:00:04.0");
    assert!(ch[5].warning.as_deref().is_some_and(|w| w.contains("(the IOMMU confines it to that)")), "{:?}", ch[5]);
    assert!(ch[..5].iter().all(|c| c.warning.is_none()));
    assert_eq!(t.read("sys/bus/pci/drivers/e1000e/unbind"), EDU);
    let node = fs::metadata(t.path("dev/vfio/7")).unwrap();
    let was = format!("{}:{}", node.uid(), node.gid());
    assert_eq!(
        t.read("run/pcibench/0000:00:04.0"),
        format!("driver=e1000e\nowner={was}:{:o} /dev/vfio/7\n", node.mode() & 0o7777)
    );
    assert_eq!(recommended_via(&t), Some(Via::Vfio));

    let rel = setup::release(&t.host(), &edu(), &opts(&k)).unwrap();
    // The node goes back first (it disappears with the binding), then the driver; then what stays.
    assert_eq!(rel[0].what, format!("gave /dev/vfio/7 back to {was} (mode {:04o})", node.mode() & 0o7777));
    assert_eq!(k.owner(&t.path("dev/vfio/7")).unwrap(), (node.uid(), node.gid(), node.mode() & 0o7777));
    assert_eq!(
        notes(&rel),
        ["left vfio_pci, vfio_iommu_type1, vfio loaded: unload once no device uses them: sudo modprobe -r vfio_pci vfio_iommu_type1 vfio"]
    );
    assert_eq!(
        whats(&rel)[1..],
        [
            "unbound it from vfio-pci",
            "cleared driver_override",
            "gave it back to e1000e",
            &*format!("forgot the remembered driver ({})", t.path("run/pcibench/0000:00:04.0").display()),
        ]
    );
    assert_eq!(t.read("sys/bus/pci/drivers/vfio-pci/unbind"), EDU);
    assert_eq!(t.read(&format!("{}/driver_override", t.devdir(EDU))), "\n");
    assert_eq!(fs::read_link(t.path(&format!("{}/driver", t.devdir(EDU)))).unwrap().file_name().unwrap(), "e1000e");
    assert!(!t.path("run/pcibench/0000:00:04.0").exists());

    let before = k.log().len();
    assert_eq!(setup::release(&t.host(), &edu(), &opts(&k)).unwrap(), vec![]);
    assert_eq!(k.log().len(), before);
}

#[test]
fn release_of_a_device_that_had_no_driver_leaves_it_free() {
    let t = Tree::new();
    t.edu();
    let k = FakeKernel::with_native(&t, &[(EDU, "edu_drv")]);
    setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap();
    let rel = setup::release(&t.host(), &edu(), &opts(&k)).unwrap();
    assert_eq!(whats(&rel)[1..3], ["unbound it from vfio-pci", "cleared driver_override"]);
    // No-IOMMU mode stays on for other devices: said, with the command that turns it off.
    assert!(
        notes(&rel).contains(
            &"left no-IOMMU mode on (other devices bound to vfio-pci may use it): turn it off with: echo 0 | sudo tee /sys/module/vfio/parameters/enable_unsafe_noiommu_mode"
        ),
        "{rel:?}"
    );
    assert!(!t.path(&format!("{}/driver", t.devdir(EDU))).exists(), "no reprobe: it had no driver");
    assert!(!t.path("dev/vfio/noiommu-0").exists());
    assert_eq!(recommended_via(&t), Some(Via::Sysfs));
}

#[test]
fn release_without_record_lets_the_kernel_choose() {
    let t = Tree::new();
    t.edu().iommu().vfio_loaded(false).bind(EDU, "vfio-pci").group(EDU, 7).node("7", 0o600);
    t.file(&format!("{}/driver_override", t.devdir(EDU)), "vfio-pci\n");
    let k = FakeKernel::with_native(&t, &[(EDU, "edu_drv")]);
    t.file("sys/bus/pci/drivers/edu_drv/bind", "");
    let rel = setup::release(&t.host(), &edu(), &opts(&k)).unwrap();
    assert_eq!(
        whats(&rel),
        [
            "unbound it from vfio-pci",
            "cleared driver_override",
            "asked the kernel to probe it (drivers_probe): driver now edu_drv"
        ]
    );
}

#[test]
fn release_refuses_while_a_process_holds_the_group() {
    let t = Tree::new();
    t.edu().iommu().vfio_loaded(false).bind(EDU, "vfio-pci").group(EDU, 7).node("7", 0o600);
    t.holder(555, "pcibench", 5, "/dev/vfio/7", "02");
    let k = FakeKernel::new(&t);
    let e = setup::release(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("/dev/vfio/7 is held open by PID 555 (pcibench)"), "{e}");
    assert!(k.log().is_empty());
    let forced = SetupOptions { force: true, ..opts(&k) };
    let rel = setup::release(&t.host(), &edu(), &forced).unwrap();
    assert_eq!(rel[0].what, "unbound it from vfio-pci");
}

#[test]
fn vfio_refuses_bridges_and_reports_a_failed_bind() {
    let t = Tree::new();
    t.device("0000:00:1c.0", 0x8086, 0xa110, 0x060400, &[], 0);
    let k = FakeKernel::new(&t);
    let e = setup::vfio(&t.host(), &"00:1c.0".parse().unwrap(), &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("is a PCI bridge"), "{e}");

    // An IOMMU host where the fake vfio-pci driver directory is missing: the probe binds nothing.
    let t = Tree::new();
    t.edu().iommu().group(EDU, 7).module("vfio").module("vfio_pci").module("vfio_iommu_type1");
    let k = FakeKernel::new(&t);
    let o = SetupOptions { timeout: Duration::ZERO, ..opts(&k) };
    let e = setup::vfio(&t.host(), &edu(), &o).unwrap_err().to_string();
    assert!(e.starts_with("0000:00:04.0 did not bind to vfio-pci within 0ns (driver now: none)"), "{e}");

    // Unbound from its driver but not taken by vfio-pci: the error says how to give it back, and a
    // second attempt keeps the first record (the driver it had before pcibench touched it).
    fs::remove_file(t.path("run/pcibench/0000:00:04.0")).unwrap();
    t.bind(EDU, "e1000e");
    let e = setup::vfio(&t.host(), &edu(), &o).unwrap_err().to_string();
    assert!(e.ends_with("give it back to e1000e: sudo pcibench setup 0000:00:04.0 --release"), "{e}");
    assert_eq!(t.read("run/pcibench/0000:00:04.0"), "driver=e1000e\n");
    assert!(setup::vfio(&t.host(), &edu(), &o).is_err());
    assert_eq!(t.read("run/pcibench/0000:00:04.0"), "driver=e1000e\n");
}

#[test]
fn sysfs_user_gives_the_files_and_enables_memory_space() {
    let t = Tree::new();
    t.device(
        EDU,
        0x10ee,
        0x7024,
        0x058000,
        &[(0, 0xfe00_0000, 1 << 20, common::MEM32), (2, 0x8_0000_0000, 1 << 17, common::PREF64)],
        0x0400,
    );
    let k = FakeKernel::new(&t);
    let ch = setup::sysfs_user(&t.host(), &edu(), "user", &opts(&k)).unwrap();
    assert_eq!(
        whats(&ch),
        [
            "gave user (4242:4242) resource0, resource2, resource2_wc (chown)",
            "enabled Memory Space (command 0x0400 -> 0x0402)",
        ]
    );
    let cfg = fs::read(t.path(&format!("{}/config", t.devdir(EDU)))).unwrap();
    assert_eq!(u16::from_le_bytes([cfg[4], cfg[5]]), 0x0402);
    let owner = k.owner(&t.path(&format!("{}/resource2_wc", t.devdir(EDU)))).unwrap();
    assert_eq!((owner.0, owner.1), (USER_UID, USER_UID));

    assert!(ch[0].warning.as_deref().is_some_and(|w| w.contains("not DMA")), "{:?}", ch[0]);

    let before = k.log().len();
    assert_eq!(setup::sysfs_user(&t.host(), &edu(), "user", &opts(&k)).unwrap(), vec![]);
    assert_eq!(k.log().len(), before);

    // --release gives every file back as it was, and Memory Space.
    let rel = setup::release(&t.host(), &edu(), &opts(&k)).unwrap();
    let devdir = t.devdir(EDU);
    for name in ["resource0", "resource2", "resource2_wc"] {
        let m = fs::metadata(t.path(&format!("{devdir}/{name}"))).unwrap();
        assert_eq!(k.owner(&t.path(&format!("{devdir}/{name}"))).unwrap(), (m.uid(), m.gid(), m.mode() & 0o7777));
        let line = format!("gave /sys/bus/pci/devices/0000:00:04.0/{name} back to {}:{}", m.uid(), m.gid());
        assert!(whats(&rel).iter().any(|w| w.starts_with(&line)), "{line}: {rel:?}");
    }
    assert!(whats(&rel).contains(&"restored Memory Space as it was (command 0x0402 -> 0x0400)"), "{rel:?}");
    let cfg = fs::read(t.path(&format!("{devdir}/config"))).unwrap();
    assert_eq!(u16::from_le_bytes([cfg[4], cfg[5]]), 0x0400);
    assert!(!t.path("run/pcibench/0000:00:04.0").exists());
    assert_eq!(setup::release(&t.host(), &edu(), &opts(&k)).unwrap(), vec![]);

    // By uid, with a file the owner cannot write.
    let t = Tree::new();
    t.edu().chmod(&format!("{}/resource0", t.devdir(EDU)), 0o400);
    let k = FakeKernel::new(&t);
    let ch = setup::sysfs_user(&t.host(), &edu(), "4242", &opts(&k)).unwrap();
    assert_eq!(
        whats(&ch),
        ["gave user (4242:4242) resource0 (chown)", "made resource0 read+write for their owner (chmod u+rw)"]
    );
    assert!(setup::sysfs_user(&t.host(), &edu(), "nosuchuser", &opts(&k))
        .unwrap_err()
        .to_string()
        .contains("unknown user"));
}

#[test]
fn sysfs_user_refuses_a_bound_driver_and_bus_master_and_unknown_devices_fail() {
    let t = Tree::new();
    t.edu().bind(EDU, "edu_drv");
    let k = FakeKernel::new(&t);
    let e = setup::sysfs_user(&t.host(), &edu(), "user", &opts(&k)).unwrap_err().to_string();
    assert!(
        e.starts_with("refusing to give user the BARs of 0000:00:04.0: it is bound to edu_drv, which owns them"),
        "{e}"
    );
    assert!(k.log().is_empty(), "{:?}", k.log());
    // Bus Master on: whoever writes the registers could start DMA. Refused, nothing changed.
    let t = Tree::new();
    t.device(EDU, 0x1234, 0x11e8, 0x00ff00, &[(0, 0xfea0_0000, 1 << 20, common::MEM32)], 0x0006);
    let k = FakeKernel::new(&t);
    let e = setup::sysfs_user(&t.host(), &edu(), "user", &opts(&k)).unwrap_err().to_string();
    assert!(
        e.contains("Bus Master is on (command 0x0006)") && e.contains("sudo setpci -s 0000:00:04.0 COMMAND=0:4"),
        "{e}"
    );
    assert!(k.log().is_empty(), "{:?}", k.log());
    assert!(!t.path("run/pcibench/0000:00:04.0").exists());
    let missing: PciAddress = "0000:09:00.0".parse().unwrap();
    for r in [
        setup::vfio(&t.host(), &missing, &opts(&k)),
        setup::release(&t.host(), &missing, &opts(&k)),
        setup::sysfs_user(&t.host(), &missing, "user", &opts(&k)),
    ] {
        assert!(r.unwrap_err().to_string().starts_with("no PCI device 0000:09:00.0"));
    }
}

#[test]
fn users_resolve_from_the_hosts_passwd() {
    let t = Tree::new();
    let h = t.host();
    assert_eq!(User::resolve(&h, "user").unwrap(), User { name: "user".into(), uid: USER_UID, gid: USER_UID });
    assert_eq!(User::resolve(&h, "0").unwrap().name, "root");
    assert_eq!(User::resolve(&h, "1234:99").unwrap(), User { name: "1234".into(), uid: 1234, gid: 99 });
    assert!(User::resolve(&h, "x:y").is_err());
}

/// With the real system, a fixture root runs no host command and changes no file outside itself.
#[test]
fn a_fixture_root_runs_no_modprobe_and_chowns_nothing_outside_it() {
    let t = Tree::new();
    t.edu();
    let real = SetupOptions {
        force: false,
        notify: None,
        user: None,
        timeout: Duration::from_millis(10),
        system: Arc::new(setup::RealSystem),
    };
    let e = setup::vfio(&t.host(), &edu(), &real).unwrap_err().to_string();
    assert!(e.starts_with("not running `modprobe vfio enable_unsafe_noiommu_mode=1`: "), "{e}");
    assert!(e.contains("is a fixture root"), "{e}");
    // A resource file linked to a file outside the root is not chowned through the link.
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, "x").unwrap();
    let res = t.path(&format!("{}/resource0", t.devdir(EDU)));
    fs::remove_file(&res).unwrap();
    std::os::unix::fs::symlink(&victim, &res).unwrap();
    let before = fs::metadata(&victim).unwrap();
    let e = setup::sysfs_user(&t.host(), &edu(), "4242", &real).unwrap_err().to_string();
    assert!(e.contains("leads out of the fixture root"), "{e}");
    let after = fs::metadata(&victim).unwrap();
    assert_eq!((after.uid(), after.gid(), after.mode()), (before.uid(), before.gid(), before.mode()));
}

/// M4 (issue 36): `--vfio` takes a `--sysfs-user` grant back before it binds (owners and Memory
/// Space), and a group node another user was given is refused without --force.
#[test]
fn vfio_takes_back_a_sysfs_grant_and_refuses_another_users_node() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 7).module("vfio").module("vfio_pci").module("vfio_iommu_type1").node("vfio", 0o666);
    t.file("sys/bus/pci/drivers/vfio-pci/unbind", "").file("sys/bus/pci/drivers/vfio-pci/bind", "");
    let k = FakeKernel::new(&t);
    let devdir = t.devdir(EDU);
    let res0 = t.path(&format!("{devdir}/resource0"));
    let before = k.owner(&res0).unwrap();
    setup::sysfs_user(&t.host(), &edu(), "4242", &opts(&k)).unwrap();
    assert_eq!(k.owner(&res0).unwrap().0, USER_UID);
    let bob = User { name: "bob".into(), uid: 4343, gid: 4343 };
    let ch = setup::vfio(&t.host(), &edu(), &SetupOptions { user: Some(bob.clone()), ..opts(&k) }).unwrap();
    assert_eq!(k.owner(&res0).unwrap(), before, "resource0 went back before the bind: {ch:?}");
    let w = whats(&ch);
    let first = w.iter().position(|c| {
        c.starts_with("took back the --sysfs-user grant first: gave /sys/bus/pci/devices/0000:00:04.0/resource0 back")
    });
    let bound = w.iter().position(|c| c.starts_with("bound it to vfio-pci") || c.starts_with("set driver_override"));
    assert!(first.is_some() && first < bound, "{w:?}");
    // The edu fixture had Memory Space on already: nothing to restore there, and no record left of it.
    assert!(!w.iter().any(|c| c.contains("Memory Space")), "{w:?}");
    assert_eq!(k.owner(&t.path("dev/vfio/7")).unwrap().0, 4343);
    // The node is bob's now: giving it to the first user is refused, --force hands it over.
    let e = setup::vfio(&t.host(), &edu(), &opts(&k)).unwrap_err().to_string();
    assert!(e.starts_with("refusing to give user /dev/vfio/7: it belongs to uid 4343, given earlier"), "{e}");
    assert_eq!(k.owner(&t.path("dev/vfio/7")).unwrap().0, 4343);
    let ch = setup::vfio(&t.host(), &edu(), &SetupOptions { force: true, ..opts(&k) }).unwrap();
    assert!(whats(&ch).contains(&"--force: took /dev/vfio/7 from uid 4343"), "{ch:?}");
    assert_eq!(k.owner(&t.path("dev/vfio/7")).unwrap().0, USER_UID);
}

/// M4 (issue 36): a vfio-bound device whose resource file another user still holds fails doctor
/// and is not opened through VFIO (which would turn Bus Master on under them).
#[test]
fn a_bound_device_with_a_users_resource_file_fails_doctor_and_is_not_opened() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("setup: not root: chown needs it; the resource-owner test did not run");
        return;
    }
    let t = Tree::new();
    t.edu().iommu().group(EDU, 7).module("vfio").module("vfio_pci").module("vfio_iommu_type1").node("vfio", 0o666);
    let k = FakeKernel::new(&t);
    k.link_driver(EDU, "vfio-pci");
    let res0 = t.path(&format!("{}/resource0", t.devdir(EDU)));
    std::os::unix::fs::chown(&res0, Some(USER_UID), Some(USER_UID)).unwrap();
    let r = doctor::run_as(&t.host(), &Target::Pci(edu()), &root()).unwrap();
    let c = r.checks.iter().find(|c| c.name == "resource-owners").unwrap_or_else(|| panic!("{:?}", r.checks));
    assert_eq!(c.severity, doctor::Severity::Fail);
    assert!(c.evidence.contains("resource0 (uid 4242)"), "{}", c.evidence);
    let info = pcibench::device::describe(&t.host(), &Target::Pci(edu())).unwrap();
    let e = pcibench::access::open_device(&t.host(), &edu(), &info, None).err().unwrap().to_string();
    assert!(e.starts_with("refusing to open 0000:00:04.0 through VFIO: its resource files belong to another user (resource0 (uid 4242))"), "{e}");
    // Root's again: no such finding.
    std::os::unix::fs::chown(&res0, Some(0), Some(0)).unwrap();
    let r = doctor::run_as(&t.host(), &Target::Pci(edu()), &root()).unwrap();
    assert!(!r.checks.iter().any(|c| c.name == "resource-owners"));
}
