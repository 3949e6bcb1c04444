//! `doctor`'s checks of the host's kernel: lockdown, strict /dev/mem, the IOMMU and the device's
//! group, the VFIO modules, no-IOMMU mode and nodes, CAP_SYS_RAWIO, memlock and hugepages.

use super::*;

#[test]
fn lockdown_blocks_sysfs_even_for_root() {
    let t = Tree::new();
    t.edu().iommu().group(EDU, 3);
    t.lockdown("none [integrity] confidentiality");
    let r = doc(&t, EDU, &root());
    expect(&r, "lockdown", Severity::Warn, "integrity: the kernel refuses mmap of sysfs BARs");
    assert!(fix(&r, "lockdown").contains("sudo pcibench setup 0000:00:04.0 --vfio"));
    let rec = &r.recommended;
    assert_eq!((rec.via, rec.goal), (None, Some(Via::Vfio)));
    assert_eq!(rec.command.as_deref(), Some("sudo pcibench setup 0000:00:04.0 --vfio"));

    t.lockdown("[none] integrity confidentiality");
    let r = doc(&t, EDU, &root());
    expect(&r, "lockdown", Severity::Pass, "none");
    assert_eq!(r.recommended.via, Some(Via::Sysfs));

    // No lockdown LSM: securityfs mounted, no lockdown file.
    std::fs::remove_file(t.path("sys/kernel/security/lockdown")).unwrap();
    expect(&doc(&t, EDU, &root()), "lockdown", Severity::Pass, "no lockdown (/sys/kernel/security/lockdown absent)");
    // securityfs not mounted: the file is absent whatever the mode.
    std::fs::remove_dir_all(t.path("sys/kernel/security")).unwrap();
    t.file("proc/cmdline", "root=/dev/sda1 lockdown=integrity\n");
    let r = doc(&t, EDU, &root());
    expect(
        &r,
        "lockdown",
        Severity::Info,
        "cannot tell: securityfs is not mounted (lockdown=integrity on the command line)",
    );
    assert!(check(&r, "lockdown").evidence.contains("mount -t securityfs securityfs /sys/kernel/security"));
}

fn gzip(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

#[test]
fn strict_devmem_matters_when_a_driver_is_bound() {
    let strict = "CONFIG_STRICT_DEVMEM=y\nCONFIG_IO_STRICT_DEVMEM=y\n";
    let t = Tree::new();
    t.edu().bind(EDU, "e1000e").file("boot/config-6.1.0-test", strict);
    let r = doc(&t, EDU, &root());
    expect(&r, "strict-devmem", Severity::Info, "CONFIG_IO_STRICT_DEVMEM=y (/boot/config-6.1.0-test)");
    assert!(check(&r, "strict-devmem").evidence.contains("cannot be mapped through sysfs"));
    assert!(fix(&r, "strict-devmem").contains("iomem=relaxed"));
    assert_eq!(check(&r, "strict-devmem").blocks, vec![Via::Sysfs]);

    t.file("proc/cmdline", "root=/dev/sda1 iomem=relaxed\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "strict-devmem", Severity::Pass, "iomem=relaxed on the command line: BARs claimed by e1000e can still");

    // The seed 002 kernel: CONFIG_IO_STRICT_DEVMEM not set, read from /proc/config.gz.
    let t = Tree::new();
    t.edu().bind(EDU, "e1000e");
    t.file("proc/config.gz", gzip("CONFIG_STRICT_DEVMEM=y\n# CONFIG_IO_STRICT_DEVMEM is not set\n"));
    let r = doc(&t, EDU, &root());
    expect(&r, "strict-devmem", Severity::Pass, "CONFIG_IO_STRICT_DEVMEM not set (/proc/config.gz)");
    t.file("proc/config.gz", gzip(strict));
    let r = doc(&t, EDU, &root());
    expect(&r, "strict-devmem", Severity::Info, "CONFIG_IO_STRICT_DEVMEM=y (/proc/config.gz)");

    std::fs::remove_file(t.path("proc/config.gz")).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "strict-devmem", Severity::Info, "cannot tell: no /boot/config-6.1.0-test and no /proc/config.gz");

    t.unbind(EDU).file("boot/config-6.1.0-test", strict);
    let r = doc(&t, EDU, &root());
    expect(&r, "strict-devmem", Severity::Pass, "no driver has claimed the BARs");
}

#[test]
fn iommu_present_or_absent() {
    let t = Tree::new();
    t.edu();
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu", Severity::Info, "no IOMMU in /sys/class/iommu (no IOMMU options on the command line)");
    assert!(fix(&r, "iommu").contains("intel_iommu=on"));
    assert_eq!(check(&r, "iommu").blocks, vec![Via::Vfio]);

    t.file("proc/cmdline", "root=/dev/sda1 intel_iommu=off\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu", Severity::Info, "intel_iommu=off): the command line turns it off");

    t.iommu().group(EDU, 3);
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu", Severity::Pass, "dmar0 (intel_iommu=on)");
}

#[test]
fn iommu_group_viability_names_the_offenders() {
    let t = type1_bound();
    t.device("0000:00:1c.0", 0x8086, 0xa110, 0x060400, &[], 0)
        .bind("0000:00:1c.0", "pcieport")
        .group("0000:00:1c.0", 7);
    t.device("0000:00:04.1", 0x1234, 0x11e9, 0x00ff00, &[], 0).group("0000:00:04.1", 7);
    let r = doc(&t, EDU, &root());
    expect(
        &r,
        "iommu-group",
        Severity::Pass,
        "group 7 is viable: 0000:00:04.0 (vfio-pci), 0000:00:04.1 (no driver), 0000:00:1c.0 (pcieport)",
    );

    t.device("0000:00:04.2", 0x8086, 0x2668, 0x040300, &[], 0)
        .bind("0000:00:04.2", "snd_hda_intel")
        .group("0000:00:04.2", 7);
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu-group", Severity::Fail, "0000:00:04.2 (bound to snd_hda_intel)");
    assert_eq!(r.recommended.command.as_deref(), Some("sudo pcibench setup 0000:00:04.2 --vfio"));

    // A bridge on another driver: not viable since 5.19, viable before.
    t.unbind("0000:00:04.2").unbind("0000:00:1c.0").bind("0000:00:1c.0", "shpchp");
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu-group", Severity::Fail, "0000:00:1c.0 (bound to shpchp)");
    t.file("proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu-group", Severity::Pass, "0000:00:1c.0 (shpchp)");
}

#[test]
fn iommu_group_noiommu_and_missing() {
    let t = noiommu_bound();
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu-group", Severity::Pass, "no-IOMMU group 0");
    let rec = &r.recommended;
    assert_eq!((rec.via, rec.ready), (Some(Via::VfioNoiommu), true));
    assert_eq!(rec.command.as_deref(), Some("pcibench pio 0000:00:04.0 --via vfio-noiommu"));

    let t = Tree::new();
    t.edu().iommu();
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu-group", Severity::Warn, "not in an IOMMU group although the host has an IOMMU (dmar0)");
    assert_eq!(check(&r, "iommu-group").blocks, vec![Via::Vfio]);

    let t = Tree::new();
    t.edu();
    let r = doc(&t, EDU, &root());
    expect(&r, "iommu-group", Severity::Info, "vfio-pci creates a no-IOMMU group when it binds");
}

#[test]
fn vfio_modules_and_noiommu_mode() {
    let t = Tree::new();
    t.edu().bind(EDU, "e1000e");
    let r = doc(&t, EDU, &root());
    expect(&r, "vfio-modules", Severity::Fail, "not loaded: vfio, vfio_pci");
    assert!(
        fix(&r, "vfio-modules").contains("sudo modprobe vfio enable_unsafe_noiommu_mode=1 && sudo modprobe vfio-pci")
    );
    expect(&r, "noiommu-mode", Severity::Fail, "vfio is not loaded, and there is no IOMMU");
    assert!(fix(&r, "noiommu-mode").contains("taints the kernel"));

    t.vfio_loaded(false);
    let r = doc(&t, EDU, &root());
    expect(&r, "vfio-modules", Severity::Pass, "vfio, vfio_pci loaded");
    expect(&r, "noiommu-mode", Severity::Fail, "off (/sys/module/vfio/parameters/enable_unsafe_noiommu_mode = N)");
    assert!(
        fix(&r, "noiommu-mode").contains("echo 1 | sudo tee /sys/module/vfio/parameters/enable_unsafe_noiommu_mode")
    );

    t.file("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "Y\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "noiommu-mode", Severity::Pass, "enabled");

    // vfio without the parameter: built without CONFIG_VFIO_NOIOMMU. No command fixes that, so
    // the goal falls back to sysfs after unbinding the driver.
    std::fs::remove_dir_all(t.path("sys/module/vfio/parameters")).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "noiommu-mode", Severity::Info, "CONFIG_VFIO_NOIOMMU");
    assert_eq!(r.recommended.goal, Some(Via::Sysfs));
    assert_eq!(
        r.recommended.command.as_deref(),
        Some("echo 0000:00:04.0 | sudo tee /sys/bus/pci/drivers/e1000e/unbind")
    );

    let t = type1_bound();
    t.module("vfio").file("sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "N\n");
    let r = doc(&t, EDU, &root());
    expect(&r, "vfio-modules", Severity::Pass, "vfio, vfio_pci, vfio_iommu_type1 loaded");
    expect(&r, "noiommu-mode", Severity::Pass, "off (not needed: the host has an IOMMU)");
    std::fs::remove_dir_all(t.path("sys/module/vfio_iommu_type1")).unwrap();
    let r = doc(&t, EDU, &root());
    expect(&r, "vfio-modules", Severity::Fail, "not loaded: vfio_iommu_type1");
}

#[test]
fn vfio_nodes_and_cap_sys_rawio_for_a_user() {
    let t = noiommu_bound();
    let r = doc(&t, EDU, &user());
    expect(&r, "vfio-nodes", Severity::Fail, "user cannot open /dev/vfio/noiommu-0 for read+write");
    expect(&r, "cap-sys-rawio", Severity::Fail, "absent (CapEff 0000000000000000)");
    assert_eq!(
        fix(&r, "cap-sys-rawio"),
        "sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench (or run pcibench with sudo; a user given CAP_SYS_RAWIO is root-equivalent)"
    );
    let rec = &r.recommended;
    assert_eq!(rec.goal, Some(Via::VfioNoiommu));
    assert_eq!(rec.blocked_by, vec!["vfio-nodes", "cap-sys-rawio"]);
    assert_eq!(rec.command.as_deref(), Some("sudo chown user /dev/vfio/noiommu-0"));
    assert_eq!(rec.then, vec!["sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench".to_string()]);

    let r = doc(&t, EDU, &root());
    expect(&r, "vfio-nodes", Severity::Pass, "/dev/vfio/vfio and /dev/vfio/noiommu-0: read+write for root");
    expect(&r, "cap-sys-rawio", Severity::Pass, "present");

    let mut raw = user();
    raw.cap_eff = 1 << 17;
    t.chmod("dev/vfio/noiommu-0", 0o666);
    let r = doc(&t, EDU, &raw);
    expect(&r, "cap-sys-rawio", Severity::Pass, "present (CapEff 0000000000020000)");
    assert!(r.recommended.ready);

    // With an IOMMU the capability is not needed; /dev/vfio/vfio itself can be the problem.
    let t = type1_bound();
    t.chmod("dev/vfio/vfio", 0o600);
    let r = doc(&t, EDU, &user());
    expect(&r, "cap-sys-rawio", Severity::Info, "only no-IOMMU groups need it");
    expect(&r, "vfio-nodes", Severity::Fail, "user cannot open /dev/vfio/vfio for read+write");
    assert_eq!(r.recommended.command.as_deref(), Some("sudo chmod 0666 /dev/vfio/vfio"));
}

#[test]
fn vfio_node_held_by_another_process() {
    let t = type1_bound();
    t.holder(321, "qemu-system-x86", 12, "/dev/vfio/7", "02000002");
    let r = doc(&t, EDU, &root());
    // Another VFIO user has it: in use, named, and nothing offered that would take it.
    expect(
        &r,
        "in-use",
        Severity::Fail,
        "in use by the running system: held open by PID 321 (qemu-system-x86) for reading and writing: /dev/vfio/7",
    );
    assert_eq!(
        fix(&r, "in-use"),
        "pick another device, or free it first: stop PID 321 (qemu-system-x86), or have it close /dev/vfio/7"
    );
    expect(&r, "vfio-nodes", Severity::Info, "/dev/vfio/7 is held open by PID 321 (qemu-system-x86)");
    assert_eq!(r.recommended.command, None);
    assert_eq!(r.recommended.blocked_by, ["in-use"]);
    assert_eq!(r.exit_code(), 2);
}

#[test]
fn memlock_limits_vfio_dma() {
    let t = type1_bound();
    let r = doc(&t, EDU, &user());
    expect(&r, "memlock", Severity::Warn, "RLIMIT_MEMLOCK 8 MiB: VFIO pins DMA buffers against it");
    assert!(fix(&r, "memlock").contains("sudo prlimit --pid $$ --memlock=unlimited"));
    assert_eq!(r.exit_code(), 1);

    let mut u = user();
    u.memlock = None;
    expect(&doc(&t, EDU, &u), "memlock", Severity::Pass, "RLIMIT_MEMLOCK unlimited");
    u.memlock = Some(1 << 30);
    expect(&doc(&t, EDU, &u), "memlock", Severity::Pass, "RLIMIT_MEMLOCK 1 GiB");
    u.memlock = Some(64 << 10);
    u.cap_eff = 1 << 14;
    expect(&doc(&t, EDU, &u), "memlock", Severity::Pass, "CAP_IPC_LOCK");
}

#[test]
fn hugepages_for_dma_buffers() {
    let t = noiommu_bound();
    let r = doc(&t, EDU, &root());
    expect(
        &r,
        "hugepages",
        Severity::Warn,
        "none free (0 of 0 free at 2 MiB): no-IOMMU DMA needs physically contiguous",
    );
    let f = fix(&r, "hugepages");
    assert!(
        f.starts_with("echo 64 | sudo tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages, or reserve"),
        "{f}"
    );
    assert!(f.contains("--buffer reserved:0x100000000,128M") && f.contains("memmap=128M$0x100000000"), "{f}");

    t.hugepages(2048, 16, 16).hugepages(1048576, 1, 0);
    let r = doc(&t, EDU, &root());
    expect(&r, "hugepages", Severity::Pass, "16 of 16 free at 2 MiB, 0 of 1 free at 1 GiB");
    // Seed 001's transfer, 1 GiB: two buffers do not fit 32 MiB of hugepages; reserved memory does.
    let r = doctor::run_as_for(&t.host(), &EDU.parse::<Target>().unwrap(), &root(), Some(1 << 30)).unwrap();
    expect(&r, "hugepages", Severity::Warn, "32 MiB free in hugepages");
    let f = fix(&r, "hugepages");
    assert!(f.starts_with("echo 1024 | sudo tee") && f.contains("--buffer reserved:0x100000000,2G"), "{f}");
    let r = doctor::run_as_for(&t.host(), &EDU.parse::<Target>().unwrap(), &root(), Some(8 << 20)).unwrap();
    expect(&r, "hugepages", Severity::Pass, "16 of 16 free");

    // Older kernels or containers: /proc/meminfo only.
    std::fs::remove_dir_all(t.path("sys/kernel/mm/hugepages")).unwrap();
    t.file("proc/meminfo", "HugePages_Total: 8\nHugePages_Free: 4\nHugepagesize: 2048 kB\n");
    expect(&doc(&t, EDU, &root()), "hugepages", Severity::Pass, "4 of 8 free at 2 MiB");

    let t = type1_bound();
    let r = doc(&t, EDU, &root());
    expect(&r, "hugepages", Severity::Info, "heap buffers work through the IOMMU");
}
