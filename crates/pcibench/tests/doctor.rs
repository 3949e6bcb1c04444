//! `doctor` on fixture host trees: each check's passing and failing finding, the recommended
//! access path and its command, the text rendering and the JSON field names.

mod common;
#[path = "doctor/host.rs"]
mod host;

use common::{root, user, Tree, EDU, MEM32, PREF64};
use pcibench::access::Via;
use pcibench::device::Target;
use pcibench::doctor::{self, Caller, Check, Report, Severity, CHECK_NAMES};
use pcibench::report::doctor::render_text;
use std::io::Write;

fn doc(t: &Tree, addr: &str, caller: &Caller) -> Report {
    doctor::run_as(&t.host(), &addr.parse::<Target>().unwrap(), caller).unwrap()
}

fn check<'a>(r: &'a Report, name: &str) -> &'a Check {
    r.check(name).unwrap_or_else(|| panic!("no check {name} in {r:#?}"))
}

/// Severity, and the evidence must contain `ev`.
fn expect(r: &Report, name: &str, sev: Severity, ev: &str) {
    let c = check(r, name);
    assert_eq!(c.severity, sev, "{name}: {c:#?}\n{}", render_text(r));
    assert!(c.evidence.contains(ev), "{name}: evidence {:?} lacks {ev:?}", c.evidence);
}

fn fix(r: &Report, name: &str) -> String {
    check(r, name).fix.clone().unwrap_or_else(|| panic!("{name} has no fix: {:#?}", check(r, name)))
}

/// edu bound to vfio-pci behind an IOMMU, group 7, node 0666, modules loaded.
fn type1_bound() -> Tree {
    let t = Tree::new();
    t.edu().iommu().vfio_loaded(false).bind(EDU, "vfio-pci").group(EDU, 7).node("7", 0o666);
    t
}

/// edu bound to vfio-pci in no-IOMMU mode, group 0, node root-only.
fn noiommu_bound() -> Tree {
    let t = Tree::new();
    t.edu().vfio_loaded(true).bind(EDU, "vfio-pci").noiommu_group(EDU, 0).node("noiommu-0", 0o600);
    t
}

#[test]
fn sim_is_information_only() {
    let t = Tree::new();
    let r = doc(&t, "sim", &user());
    assert_eq!(r.checks.len(), CHECK_NAMES.len());
    assert!(r.checks.iter().all(|c| c.severity == Severity::Info && c.evidence == "simulated card"));
    assert_eq!((r.recommended.via, r.recommended.ready), (Some(Via::Sim), true));
    assert_eq!(r.recommended.command.as_deref(), Some("pcibench pio sim"));
    assert_eq!(r.exit_code(), 0);
}

#[test]
fn device_missing_fails_and_points_to_list() {
    let t = Tree::new();
    let r = doc(&t, "05:00.0", &root());
    assert_eq!(r.checks.len(), 1);
    expect(&r, "device", Severity::Fail, "no 0000:05:00.0 in /sys/bus/pci/devices");
    assert_eq!(r.recommended.command.as_deref(), Some("pcibench list"));
    assert_eq!(r.recommended.via, None);
    assert_eq!(r.exit_code(), 2);

    t.edu();
    let r = doc(&t, "00:04.0", &root());
    expect(&r, "device", Severity::Pass, "0000:00:04.0 [1234:11e8]");
}

#[test]
fn root_with_free_device_is_ready_for_sysfs() {
    let t = Tree::new();
    t.edu();
    let r = doc(&t, EDU, &root());
    expect(&r, "driver", Severity::Pass, "no driver bound");
    expect(&r, "memory-space", Severity::Pass, "Memory Space enabled (command 0x0002");
    expect(&r, "resource-files", Severity::Pass, "resource0: read+write for root");
    expect(&r, "lockdown", Severity::Pass, "absent");
    // No-IOMMU DMA wants hugepages, but DMA is not on the sysfs path: information only.
    expect(&r, "hugepages", Severity::Info, "none free");
    let rec = &r.recommended;
    assert_eq!((rec.via, rec.goal, rec.ready), (Some(Via::Sysfs), Some(Via::Sysfs), true));
    assert_eq!(rec.command.as_deref(), Some("pcibench pio 0000:00:04.0 --via sysfs"));
    assert_eq!(r.worst, Severity::Info);
    assert_eq!(r.exit_code(), 0);
}

#[test]
fn processes_that_cannot_be_checked_are_a_warning_not_a_pass() {
    let t = Tree::new();
    t.edu();
    // Its open files cannot be read (another user's process gives EACCES; here: nothing to list).
    t.file("proc/4000/comm", "secret\n").file("proc/4000/fd", "");
    let r = doc(&t, EDU, &root());
    expect(
        &r,
        "in-use",
        Severity::Warn,
        "no use found, but could not check PID 4000 (/proc/PID/fd cannot be listed (Not a directory (os error 20)))",
    );
    expect(&r, "in-use", Severity::Warn, "the in-use check was incomplete");
    // Root is never told to run as root, nor to run it "on the host" (issue 54): what it could not
    // check says how to settle it.
    assert_eq!(
        fix(&r, "in-use"),
        "settle what it could not check (each says how), then run pcibench doctor 0000:00:04.0 again"
    );
    // Not a use: the path that takes nothing (sysfs, no driver to unbind) stays ready, with the warning.
    assert!(r.recommended.ready, "{:#?}", r.recommended);
    assert_eq!(r.exit_code(), 1);
    let r = doc(&t, EDU, &user());
    assert_eq!(fix(&r, "in-use"), "run it as root to check every process: sudo pcibench doctor 0000:00:04.0");
    // A process mapping its BAR through sysfs is a use, named, even when others cannot be checked.
    let res0 = t.path(&format!("{}/resource0", t.devdir(EDU)));
    let shown = format!("/{}", res0.strip_prefix(t.root()).unwrap().display());
    t.file("proc/4001/comm", "fpga_tool\n")
        .file("proc/4001/maps", format!("7f00-7f10 rw-s 00000000 00:00 0 {shown}\n"));
    std::fs::create_dir_all(t.path("proc/4001/fd")).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "in-use", Severity::Fail, &format!("in use by the running system: mapped by PID 4001 (fpga_tool) for reading and writing: {shown}; could not check PID 4000"));
    offers_nothing_that_takes(&r);
}

/// The lines of a report, text and JSON, that would take the device: a `setup ... --vfio`, an unbind,
/// a driver_override or new_id write (issue 54).
fn taking_lines(r: &Report) -> Vec<String> {
    let json = serde_json::to_string_pretty(r).unwrap();
    let text = render_text(r);
    text.lines()
        .chain(json.lines())
        .filter(|l| {
            ["unbind", "driver_override", "new_id", "drivers_probe"].iter().any(|w| l.contains(w))
                || (l.contains("setup ") && l.contains("--vfio"))
        })
        .map(str::to_string)
        .collect()
}

/// Issues 43 and 54: a device bound to a driver whose in-use check is incomplete (PID 1 denied even
/// to root; a process of another user) is not offered to `setup --vfio`, nor by hand: no output
/// line, text or JSON, unbinds it, writes its driver_override or new_id, or runs setup --vfio. The
/// recommendation is to complete the check; as root it says how, never "on the host itself".
#[test]
fn an_incomplete_in_use_check_offers_nothing_that_takes_the_device() {
    let t = Tree::new();
    t.edu().iommu().bind(EDU, "e1000e").group(EDU, 5);
    t.file("proc/1/comm", "init\n").file("proc/1/fd", "");
    let r = doc(&t, EDU, &root());
    expect(&r, "in-use", Severity::Warn, "the in-use check was incomplete: no use found, but could not check PID 1");
    assert_eq!(taking_lines(&r), Vec::<String>::new(), "{}", render_text(&r));
    let rec = &r.recommended;
    assert!(!rec.ready && rec.via.is_none(), "{rec:#?}");
    assert_eq!(rec.command, None, "as root nothing here completes the check: {rec:#?}");
    assert!(rec.then.is_empty(), "{rec:#?}");
    assert_eq!(rec.blocked_by.first(), Some(&"in-use"), "{rec:#?}");
    assert!(
        rec.summary.starts_with("none until the in-use check is complete: could not check PID 1 (")
            && rec.summary.ends_with("then run pcibench doctor 0000:00:04.0 again"),
        "{}",
        rec.summary
    );
    let text = render_text(&r);
    assert!(!text.contains("run it as root") && !text.contains("host itself"), "{text}");
    // The driver's check still says what is bound and that it blocks, without the commands that
    // would take it.
    expect(&r, "driver", Severity::Fail, "bound to e1000e");
    assert_eq!(check(&r, "driver").fix, None);
    assert_eq!(r.exit_code(), 2);

    // As another user: the same check as root completes it, and that is the one command.
    let r = doc(&t, EDU, &user());
    assert_eq!(taking_lines(&r), Vec::<String>::new(), "{}", render_text(&r));
    let rec = &r.recommended;
    assert_eq!(rec.command.as_deref(), Some("sudo pcibench doctor 0000:00:04.0"), "{rec:#?}");
    assert!(rec.summary.contains("in-use check is complete"), "{}", rec.summary);

    // An interface in no namespace pcibench could find: incomplete too, and the same holds.
    let t = Tree::new();
    t.edu().iommu().bind(EDU, "e1000e").group(EDU, 5);
    t.file(&format!("{}/net/.keep", t.devdir(EDU)), "");
    std::fs::remove_file(t.path(&format!("{}/net/.keep", t.devdir(EDU)))).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "in-use", Severity::Warn, "its network interfaces are in no network namespace pcibench could find");
    assert_eq!(taking_lines(&r), Vec::<String>::new(), "{}", render_text(&r));
    // Free, the same device is offered to setup again.
    std::fs::remove_dir(t.path(&format!("{}/net", t.devdir(EDU)))).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "in-use", Severity::Pass, "the running system does not use it");
    assert_eq!(r.recommended.command.as_deref(), Some("sudo pcibench setup 0000:00:04.0 --vfio"));
}

#[test]
fn render_text_aligns_columns_and_ends_with_the_recommendation() {
    let t = Tree::new();
    t.edu();
    let r = doc(&t, EDU, &user());
    let text = render_text(&r);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "doctor: 0000:00:04.0");
    let w = CHECK_NAMES.iter().map(|n| n.len()).max().unwrap();
    let col = 4 + 2 + w + 2;
    let mut seen = 0;
    for l in &lines[1..] {
        if let Some(label) = ["PASS", "INFO", "WARN", "FAIL"].iter().find(|p| l.starts_with(**p)) {
            let c = &r.checks[seen];
            assert_eq!(*label, c.severity.label());
            assert_eq!(l[6..col].trim_end(), c.name, "{l}");
            assert_eq!(&l[col..], c.evidence, "{l}");
            seen += 1;
        } else if l.trim_start().starts_with("fix: ") {
            assert_eq!(l.find("fix: "), Some(col), "{l}");
        }
    }
    assert_eq!(seen, r.checks.len());
    let n = lines.len();
    assert_eq!(lines[n - 2], "recommended: none until you fix resource-files (then sysfs)");
    assert_eq!(lines[n - 1], "  run: sudo pcibench setup 0000:00:04.0 --sysfs-user user");
}

#[test]
fn resource_files_need_read_write_for_the_user() {
    let t = Tree::new();
    t.edu();
    let r = doc(&t, EDU, &user());
    expect(&r, "resource-files", Severity::Fail, "user cannot open for read+write: resource0 (owner ");
    assert!(check(&r, "resource-files").evidence.contains(", mode 0600)"));
    let f = fix(&r, "resource-files");
    assert!(f.starts_with("sudo pcibench setup 0000:00:04.0 --sysfs-user user"), "{f}");
    assert!(f.contains("sudo chown user /sys/bus/pci/devices/0000:00:04.0/resource0"), "{f}");
    assert_eq!(r.recommended.goal, Some(Via::Sysfs));
    assert_eq!(r.recommended.blocked_by, vec!["resource-files"]);
    assert_eq!(r.exit_code(), 2);
    // Neither CAP_SYS_RAWIO nor the memlock limit matters on the sysfs path.
    expect(&r, "cap-sys-rawio", Severity::Info, "absent");
    expect(&r, "memlock", Severity::Info, "RLIMIT_MEMLOCK 8 MiB");

    t.chmod(&format!("{}/resource0", t.devdir(EDU)), 0o666);
    let r = doc(&t, EDU, &user());
    expect(&r, "resource-files", Severity::Pass, "resource0: read+write for user");
    assert!(r.recommended.ready);
}

#[test]
fn prefetchable_bars_have_wc_files() {
    let t = Tree::new();
    t.device(
        EDU,
        0x10ee,
        0x7024,
        0x058000,
        &[(0, 0xfe00_0000, 1 << 20, MEM32), (2, 0x8_0000_0000, 128 << 10, PREF64)],
        2,
    );
    let r = doc(&t, EDU, &root());
    expect(&r, "resource-files", Severity::Pass, "resource0, resource2, resource2_wc: read+write for root");
    assert!(!check(&r, "resource-files").evidence.contains("no write-combining"));

    std::fs::remove_file(t.path(&format!("{}/resource2_wc", t.devdir(EDU)))).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "resource-files", Severity::Pass, "no write-combining file for prefetchable BAR2");

    std::fs::remove_file(t.path(&format!("{}/resource0", t.devdir(EDU)))).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "resource-files", Severity::Warn, "resource0 missing");
    assert_eq!(check(&r, "resource-files").blocks, vec![Via::Sysfs]);
    // sysfs cannot be fixed by a command: VFIO becomes the goal.
    assert_eq!(r.recommended.goal, Some(Via::VfioNoiommu));
}

#[test]
fn memory_space_and_bus_master_bits() {
    let t = Tree::new();
    t.device(EDU, 0x1234, 0x11e8, 0x00ff00, &[(0, 0xfea0_0000, 1 << 20, MEM32)], 0x0000);
    let r = doc(&t, EDU, &root());
    expect(&r, "memory-space", Severity::Fail, "Memory Space disabled (command 0x0000");
    assert!(fix(&r, "memory-space").contains("sudo setpci -s 0000:00:04.0 COMMAND=0x02:0x02"));
    assert_eq!(r.recommended.command.as_deref(), Some("sudo pcibench setup 0000:00:04.0 --sysfs-user root"));
    expect(&r, "bus-master", Severity::Info, "Bus Master disabled");

    // vfio-pci enables Memory Space itself when the device is opened.
    t.iommu().vfio_loaded(false).bind(EDU, "vfio-pci").group(EDU, 7).node("7", 0o666);
    let r = doc(&t, EDU, &root());
    expect(&r, "memory-space", Severity::Info, "vfio-pci enables it when the device is opened");

    let t = Tree::new();
    t.device(EDU, 0x1234, 0x11e8, 0x00ff00, &[(0, 0xfea0_0000, 1 << 20, MEM32)], 0x0006);
    let r = doc(&t, EDU, &root());
    expect(&r, "bus-master", Severity::Pass, "Bus Master enabled");
}

#[test]
fn another_driver_names_unbind_and_bind_commands() {
    let t = Tree::new();
    t.edu().iommu().bind(EDU, "e1000e").group(EDU, 5);
    let r = doc(&t, EDU, &root());
    expect(&r, "driver", Severity::Fail, "bound to e1000e");
    let f = fix(&r, "driver");
    for want in [
        "sudo pcibench setup 0000:00:04.0 --vfio",
        "echo 0000:00:04.0 | sudo tee /sys/bus/pci/drivers/e1000e/unbind",
        "echo vfio-pci | sudo tee /sys/bus/pci/devices/0000:00:04.0/driver_override",
        "echo 0000:00:04.0 | sudo tee /sys/bus/pci/drivers_probe",
    ] {
        assert!(f.contains(want), "{f} lacks {want}");
    }
    assert_eq!(r.recommended.goal, Some(Via::Vfio));
    assert_eq!(r.recommended.command.as_deref(), Some("sudo pcibench setup 0000:00:04.0 --vfio"));
    assert_eq!(r.exit_code(), 2);

    t.unbind(EDU).bind(EDU, "vfio-pci").vfio_loaded(false).node("5", 0o600);
    let r = doc(&t, EDU, &root());
    expect(&r, "driver", Severity::Pass, "vfio-pci");
    assert_eq!(r.recommended.via, Some(Via::Vfio));
    assert_eq!(r.recommended.command.as_deref(), Some("pcibench pio 0000:00:04.0 --via vfio"));
}

/// A root port 0000:00:1c.0 (LnkCap as given) with an endpoint 0000:01:00.0 below it.
fn port_with_endpoint(t: &Tree, port: (&str, u8), ep: (&str, u8, &str, u8)) {
    t.device("0000:00:1c.0", 0x8086, 0xa110, 0x060400, &[], 0x0006).bind("0000:00:1c.0", "pcieport");
    t.device_at(
        "devices/pci0000:00/0000:00:1c.0/0000:01:00.0",
        "0000:01:00.0",
        0x1b36,
        0x0010,
        0x010802,
        &[(0, 0xfe00_0000, 16 << 10, MEM32)],
        0x0006,
    );
    // The port's LnkSta follows the link; its LnkCap is its own.
    t.link_speed("0000:00:1c.0", ep.0, ep.1, port.0, port.1);
    t.link_speed("0000:01:00.0", ep.0, ep.1, ep.2, ep.3);
}

/// Whatever a report says, it never offers to take the device.
fn offers_nothing_that_takes(r: &Report) {
    let text = render_text(r) + &serde_json::to_string(r).unwrap();
    for bad in ["setup", "unbind", "driver_override", "drivers_probe", "--sysfs-user", "setpci", "chown"] {
        assert!(!text.contains(bad), "offers {bad:?}:\n{text}");
    }
}

#[test]
fn a_bridge_is_not_a_target_and_points_at_the_endpoints_below() {
    let t = Tree::new();
    port_with_endpoint(&t, ("16.0 GT/s PCIe", 16), ("2.5 GT/s PCIe", 1, "2.5 GT/s PCIe", 1));
    let r = doc(&t, "00:1c.0", &root());
    expect(&r, "device", Severity::Fail, "a bridge (PCI bridge), not a target");
    expect(&r, "driver", Severity::Info, "pcieport: the kernel's port driver");
    expect(&r, "in-use", Severity::Pass, "the running system uses nothing below it");
    let names: Vec<&str> = r.checks.iter().map(|c| c.name).collect();
    assert_eq!(names, ["device", "driver", "in-use", "link", "aer"]);
    assert_eq!(r.recommended.command.as_deref(), Some("pcibench doctor 0000:01:00.0"));
    assert_eq!(
        r.recommended.summary,
        "none: 0000:00:1c.0 is a bridge, not a target; use the endpoint(s) below it: 0000:01:00.0"
    );
    assert_eq!(r.recommended.via, None);
    assert_eq!(r.exit_code(), 2);
    offers_nothing_that_takes(&r);
    // Its link trained to what the device below supports: not degraded (lspci's rule for ports).
    expect(
        &r,
        "link",
        Severity::Pass,
        "Gen1 x1 (2.5 GT/s PCIe), the most this link allows: the device below it 0000:01:00.0 supports Gen1 x1",
    );
    // setup refuses it the same way, pointing at the endpoint.
    let k = pcibench::setup::SetupOptions::default();
    let e = pcibench::setup::vfio(&t.host(), &"00:1c.0".parse().unwrap(), &k).unwrap_err().to_string();
    assert!(e.contains("is a PCI bridge") && e.contains("0000:01:00.0"), "{e}");
}

#[test]
fn a_device_the_system_uses_fails_in_use_and_nothing_offers_to_take_it() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 5).bind(EDU, "virtio-pci");
    let d = t.devdir(EDU);
    t.file(&format!("{d}/virtio0/block/vda/dev"), "254:0\n")
        .link("sys/class/block/vda", &format!("{d}/virtio0/block/vda"));
    t.file(&format!("{d}/virtio0/block/vda/vda1/dev"), "254:1\n")
        .file(&format!("{d}/virtio0/block/vda/vda1/partition"), "1\n");
    t.link("sys/class/block/vda1", &format!("{d}/virtio0/block/vda/vda1"));
    // Their nodes: nobody holds them exclusively (the kernel's answer, `host::inuse::kernel`).
    t.file("dev/vda", "block 254:0\n").file("dev/vda1", "block 254:1\n");
    t.file("proc/self/mountinfo", "21 1 254:1 / / rw - ext4 /dev/root rw\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "in-use", Severity::Fail, "in use by the running system: it backs / (root filesystem) through vda1");
    assert_eq!(fix(&r, "in-use"), "pick another device: this one cannot be freed while the system runs from it");
    assert_eq!(r.recommended.via, None);
    assert_eq!(r.recommended.command, None);
    assert_eq!(r.recommended.blocked_by, ["in-use"]);
    assert!(r.recommended.summary.contains("pick another device"), "{}", r.recommended.summary);
    assert_eq!(r.exit_code(), 2);
    offers_nothing_that_takes(&r);
    // The driver check still says what is bound, and nothing else fails because of the path.
    expect(&r, "driver", Severity::Warn, "bound to virtio-pci");
    assert!(
        r.checks.iter().filter(|c| c.severity == Severity::Fail).all(|c| c.name == "in-use"),
        "{}",
        render_text(&r)
    );

    // Mounted elsewhere: freeing it is offered (not the root filesystem).
    t.file("proc/self/mountinfo", "21 1 254:1 / /data rw - ext4 /dev/vda1 rw\n");
    let r = doc(&t, EDU, &root());
    assert_eq!(fix(&r, "in-use"), "pick another device, or free it first: umount /data");
    assert_eq!(r.recommended.then, ["umount /data"]);
    offers_nothing_that_takes(&r);
    // Unmounted: free, and doctor recommends the usual path again.
    t.file("proc/self/mountinfo", "");
    let r = doc(&t, EDU, &root());
    expect(&r, "in-use", Severity::Pass, "the running system does not use it");
    assert_eq!(r.recommended.command.as_deref(), Some("sudo pcibench setup 0000:00:04.0 --vfio"));
}

#[test]
fn a_group_member_the_system_uses_is_never_offered_to_vfio() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 5).vfio_loaded(false);
    t.device("0000:00:04.1", 0x1af4, 0x1042, 0x010000, &[], 0x0006)
        .group("0000:00:04.1", 5)
        .bind("0000:00:04.1", "virtio-pci");
    let d = t.devdir("0000:00:04.1");
    t.file(&format!("{d}/virtio1/block/vdb/dev"), "254:16\n")
        .link("sys/class/block/vdb", &format!("{d}/virtio1/block/vdb"));
    t.file("proc/swaps", "Filename Type Size Used Priority\n/dev/vdb partition 1024 0 -2\n");
    let r = doc(&t, EDU, &root());
    expect(
        &r,
        "iommu-group",
        Severity::Info,
        "the running system uses some of them (0000:00:04.1: it backs active swap through vdb)",
    );
    assert!(!render_text(&r).contains("setup 0000:00:04.1"), "{}", render_text(&r));
}

#[test]
fn link_trained_below_its_maximum() {
    let t = Tree::new();
    t.edu().link_speed(EDU, "2.5 GT/s PCIe", 1, "8.0 GT/s PCIe", 8);
    let r = doc(&t, EDU, &root());
    expect(
        &r,
        "link",
        Severity::Warn,
        "trained at Gen1 x1 (2.5 GT/s PCIe), below its maximum Gen3 x8 (8.0 GT/s PCIe) (its link partner is unknown)",
    );
    assert!(fix(&r, "link").contains("reseat the card"));
    assert_eq!(r.exit_code(), 1);

    t.link_speed(EDU, "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8);
    expect(&doc(&t, EDU, &root()), "link", Severity::Pass, "Gen3 x8 (8.0 GT/s PCIe), its maximum");

    let t = Tree::new();
    t.edu();
    expect(&doc(&t, EDU, &root()), "link", Severity::Info, "no PCIe link information");
}

#[test]
fn degraded_means_below_what_both_ends_support() {
    let ep = "0000:01:00.0";
    // An x8 Gen3 card in an x4 Gen3 slot, trained x4: the slot limits it, not degraded.
    let t = Tree::new();
    port_with_endpoint(&t, ("8.0 GT/s PCIe", 4), ("8.0 GT/s PCIe", 4, "8.0 GT/s PCIe", 8));
    let r = doc(&t, ep, &root());
    expect(&r, "link", Severity::Info, "Gen3 x4 (8.0 GT/s PCIe), the most this link allows: the upstream port 0000:00:1c.0 supports Gen3 x4 (8.0 GT/s PCIe), this device Gen3 x8 (8.0 GT/s PCIe)");
    let info = pcibench::device::describe(&t.host(), &ep.parse().unwrap()).unwrap();
    let l = info.link.as_ref().unwrap();
    assert!(!l.degraded);
    assert_eq!(l.limited_by_words().as_deref(), Some("speed: both ends, width: the upstream port 0000:00:1c.0"));
    let text = pcibench::report::info::info_text(&info);
    assert!(
        text.contains("  Link partner:  0000:00:1c.0 (upstream port), max Gen3 x4; the link can train to Gen3 x4"),
        "{text}"
    );
    assert!(!text.contains("DEGRADED"), "{text}");
    // Trained x2 where both ends do x4: degraded, and the limit is named.
    t.link_speed(ep, "8.0 GT/s PCIe", 2, "8.0 GT/s PCIe", 8);
    let r = doc(&t, ep, &root());
    expect(&r, "link", Severity::Warn, "trained at Gen3 x2 (8.0 GT/s PCIe), below Gen3 x4 that both ends support (this device: Gen3 x8 (8.0 GT/s PCIe); upstream port 0000:00:1c.0: Gen3 x4 (8.0 GT/s PCIe); the limit is set by speed: both ends, width: the upstream port 0000:00:1c.0)");
    assert!(fix(&r, "link").contains("lspci -vv -s 0000:00:1c.0"));
    let info = pcibench::device::describe(&t.host(), &ep.parse().unwrap()).unwrap();
    let text = pcibench::report::info::info_text(&info);
    assert!(text.contains("max Gen3 x8 -- DEGRADED: below Gen3 x4, what both ends support"), "{text}");
    // The root port: Gen4 x16 capable, trained Gen1 x1 to a Gen1 x1 device: never flagged by its own LnkCap.
    let t = Tree::new();
    port_with_endpoint(&t, ("16.0 GT/s PCIe", 16), ("2.5 GT/s PCIe", 1, "2.5 GT/s PCIe", 1));
    let info = pcibench::device::describe(&t.host(), &"00:1c.0".parse().unwrap()).unwrap();
    assert!(!info.link.as_ref().unwrap().degraded);
    let text = pcibench::report::info::info_text(&info);
    assert!(text.contains("  Link:          Gen1 x1 (2.5 GT/s PCIe), max Gen4 x16\n"), "{text}");
    assert!(text.contains("  Link partner:  0000:01:00.0 (device below it), max Gen1 x1; the link can train to Gen1 x1 (set by the device 0000:01:00.0)"), "{text}");
    // ...and the endpoint below it is at its own maximum.
    expect(
        &doc(&t, ep, &root()),
        "link",
        Severity::Pass,
        "Gen1 x1 (2.5 GT/s PCIe), its maximum (the upstream port 0000:00:1c.0 supports Gen4 x16 (16.0 GT/s PCIe))",
    );
    // A root port with nothing below: no verdict.
    let t = Tree::new();
    t.device("0000:00:1c.0", 0x8086, 0xa110, 0x060400, &[], 0x0006).link_speed(
        "0000:00:1c.0",
        "2.5 GT/s PCIe",
        1,
        "16.0 GT/s PCIe",
        16,
    );
    let r = doc(&t, "00:1c.0", &root());
    expect(&r, "link", Severity::Info, "nothing found below it (an empty slot, or the link is down), so no verdict");
}

#[test]
fn aer_error_counts() {
    let t = Tree::new();
    t.edu()
        .dev_file(EDU, "aer_dev_correctable", "RxErr 0\nBadTLP 2\nBadDLLP 1\nTOTAL_ERR_COR 3\n")
        .dev_file(EDU, "aer_dev_nonfatal", "Undefined 0\nTOTAL_ERR_NONFATAL 0\n")
        .dev_file(EDU, "aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 0\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "aer", Severity::Warn, "correctable 3, non-fatal 0, fatal 0 (BadDLLP 1, BadTLP 2)");
    assert_eq!(r.exit_code(), 1);

    t.dev_file(EDU, "aer_dev_correctable", "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n");
    expect(&doc(&t, EDU, &root()), "aer", Severity::Pass, "no errors counted");

    let t = Tree::new();
    t.edu();
    expect(&doc(&t, EDU, &root()), "aer", Severity::Info, "no AER counters");
}

#[test]
fn json_field_names_are_stable() {
    let t = Tree::new();
    t.edu();
    let r = doc(&t, EDU, &user());
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    let keys = |o: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = o.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&v), ["checks", "device", "recommended", "worst"]);
    assert_eq!(keys(&v["checks"][0]), ["blocks", "evidence", "fix", "name", "severity"]);
    assert_eq!(keys(&v["recommended"]), ["blocked_by", "command", "goal", "ready", "summary", "then", "via"]);
    assert_eq!(v["device"], "0000:00:04.0");
    assert_eq!(v["worst"], "fail");
    assert_eq!(v["recommended"]["via"], "none");
    assert_eq!(v["recommended"]["goal"], "sysfs");
    let rf = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "resource-files").unwrap();
    assert_eq!(rf["severity"], "fail");
    assert_eq!(rf["blocks"], serde_json::json!(["sysfs"]));
    let names: Vec<&str> = v["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECK_NAMES);
}
