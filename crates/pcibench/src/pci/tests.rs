//! Discovery on fixture sysfs trees modelled on the seeds' devices: exact parsed values.

use super::fixture::{endpoint_config, seed_tree, Fixture};
use super::sysfs::Detail;
use super::*;
use crate::host::Host;

fn tree() -> (tempfile::TempDir, Host) {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let h = Host::with_root(t.path());
    (t, h)
}

fn read(h: &Host, a: &str) -> DeviceInfo {
    sysfs::read_device(h, &a.parse().unwrap()).unwrap()
}

#[test]
fn seed_000_prefetchable_card() {
    let (_t, h) = tree();
    let d = read(&h, "15:00.0");
    assert_eq!((d.vendor_id, d.device_id, d.subsystem_vendor_id, d.subsystem_device_id), (0x10ee, 0x7024, 2, 1));
    assert_eq!(d.vendor_name.as_deref(), Some("Xilinx Corporation"));
    assert_eq!(d.class_code, 0x058000);
    assert_eq!(d.driver, None);
    assert_eq!(d.iommu_group, None);
    assert_eq!(d.parent, None);
    let c = d.command.as_ref().unwrap();
    assert!(c.memory && !c.io && !c.bus_master);
    let bars: Vec<(u8, u64, u64, bool, bool)> =
        d.bars.iter().map(|b| (b.index, b.start, b.size, b.is_64bit, b.prefetchable)).collect();
    assert_eq!(
        bars,
        vec![
            (0, 0x387f_8000_0000, 0x100000, true, true),
            (2, 0x387f_8010_0000, 0x20000, true, true),
            (4, 0x387f_8012_0000, 0x10000, true, true)
        ]
    );
    assert_eq!(d.bars[1].files, vec!["resource2".to_string(), "resource2_wc".to_string()]);
    let l = d.link.as_ref().unwrap();
    assert_eq!((l.current_gen, l.current_width, l.max_gen, l.max_width), (Some(2), Some(4), Some(2), Some(4)));
    assert_eq!((l.mps, l.mrrs, l.mps_supported), (Some(256), Some(512), Some(512)));
    assert!(!l.degraded);
    let m = d.model.as_ref().unwrap();
    assert!((m.write_mbps - 1650.0).abs() < 16.5, "{}", m.write_mbps);
    assert!((m.read_mbps - 1680.0).abs() < 16.8, "{}", m.read_mbps);
    let aer = d.aer.as_ref().unwrap();
    assert_eq!((aer.correctable, aer.nonfatal, aer.fatal), (Some(2), Some(0), Some(0)));
    assert_eq!(aer.nonzero.get("BadTLP"), Some(&2));
    assert_eq!(d.extended_capabilities.len(), 2);
    assert_eq!(d.config_bytes, 4096);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn seed_000_32bit_nonprefetchable_card() {
    let (_t, h) = tree();
    let d = read(&h, "0000:16:00.0");
    let bars: Vec<(u8, u64, bool, bool, Vec<String>)> =
        d.bars.iter().map(|b| (b.index, b.size, b.is_64bit, b.prefetchable, b.files.clone())).collect();
    assert_eq!(
        bars,
        vec![
            (0, 0x100000, false, false, vec!["resource0".to_string()]),
            (1, 0x20000, false, false, vec!["resource1".to_string()]),
            (2, 0x10000, false, false, vec!["resource2".to_string()])
        ]
    );
    // Memory space disabled, as in the seed after reloading the FPGA.
    assert!(!d.command.as_ref().unwrap().memory);
    assert_eq!(d.config_bytes, 256);
    assert!(d.extended_capabilities.is_empty());
}

#[test]
fn seed_001_nvram_bound_to_vfio() {
    let (_t, h) = tree();
    let d = read(&h, "2d:00.0");
    assert_eq!(d.ids(), "1332:5425");
    assert!(d.device_name.as_deref().unwrap().contains("MM-5425CN"));
    assert_eq!(d.driver.as_deref(), Some("vfio-pci"));
    assert_eq!(d.iommu_group, Some(85));
    assert_eq!(d.bars[0].size, 1 << 30);
    let c = d.command.as_ref().unwrap();
    assert!(c.memory && c.bus_master);
    // 64 bytes of config: no capability list, and a warning that says root is needed.
    assert_eq!(d.config_bytes, 64);
    assert!(d.warnings.iter().any(|w| w.contains("needs root") && w.contains("sudo pcibench info 0000:2d:00.0")));
}

#[test]
fn seed_002_device_behind_bridge_with_degraded_link() {
    let (_t, h) = tree();
    let d = read(&h, "22:00.0");
    assert_eq!(d.parent.as_deref(), Some("0000:20:00.0"));
    assert_eq!(d.iommu_group, Some(16));
    let l = d.link.as_ref().unwrap();
    assert_eq!((l.current_gen, l.current_width, l.max_width), (Some(3), Some(1), Some(8)));
    assert!(l.degraded);
    assert_eq!(d.model.as_ref().unwrap().link.width, 1);
    let bridge = read(&h, "20:00.0");
    assert_eq!(bridge.driver.as_deref(), Some("pcieport"));
    assert_eq!(bridge.class_name, "PCI bridge");
}

#[test]
fn list_filters_like_lspci() {
    let (_t, h) = tree();
    let all = list(&h, None, None, Detail::Full).unwrap().0;
    let addrs: Vec<&str> = all.iter().map(|d| d.address.as_str()).collect();
    assert_eq!(addrs, vec!["0000:15:00.0", "0000:16:00.0", "0000:20:00.0", "0000:22:00.0", "0000:2d:00.0"]);
    let x = list(&h, Some("10ee".parse().unwrap()), None, Detail::Full).unwrap().0;
    assert_eq!(x.len(), 3); // 15, 16, 22
    let x = list(&h, Some("10ee:9031".parse().unwrap()), None, Detail::Full).unwrap().0;
    assert_eq!(x.len(), 1);
    let x = list(&h, Some(":5425".parse().unwrap()), None, Detail::Full).unwrap().0;
    assert_eq!(x[0].address, "0000:2d:00.0");
    let x = list(&h, None, Some(&"16:00.0".parse().unwrap()), Detail::Full).unwrap().0;
    assert_eq!(x.len(), 1);
    assert!("10ee:zz".parse::<IdFilter>().is_err());
}

#[test]
fn malformed_devices_warn_and_never_fail() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::new(t.path());
    // Nothing but the directory.
    f.device("0000:01:00.0");
    // Garbage everywhere.
    f.device("0000:02:00.0")
        .file("vendor", "banana\n")
        .file("device", "0x1234\n")
        .file("resource", "not hex at all\n0x1000 0x1fff\n")
        .config(&[0x34, 0x12, 0x11]);
    // A capability loop and an extended-capability loop.
    let mut looped = endpoint_config(0x10ee, 0x7024, 2, 2, 4, 256, 512, 4096);
    looped[0x71] = 0x40;
    looped[0x1c3] = 0x10;
    looped[0x1c2] = 0x01;
    f.device("0000:03:00.0").ids(0x10ee, 0x7024, 0, 0).config(&looped);
    let h = Host::with_root(t.path());

    let d = read(&h, "01:00.0");
    assert!(d.bars.is_empty() && d.command.is_none() && d.link.is_none());
    assert!(d.warnings.iter().any(|w| w.contains("vendor or device id")));
    assert!(d.warnings.iter().any(|w| w.contains("resource file is missing")));

    let d = read(&h, "02:00.0");
    assert!(d.warnings.iter().any(|w| w.contains("vendor holds \"banana\"")));
    assert_eq!(d.warnings.iter().filter(|w| w.contains("resource line")).count(), 2);
    assert!(d.warnings.iter().any(|w| w.contains("truncated")));
    assert_eq!(d.config_bytes, 3);

    let d = read(&h, "03:00.0");
    assert_eq!(d.capabilities.len(), 3);
    assert_eq!(d.extended_capabilities.len(), 2);
    assert_eq!(d.warnings.iter().filter(|w| w.contains("loops")).count(), 2);
    assert_eq!(d.link.as_ref().unwrap().mps, Some(256));

    // The whole list still works with broken devices present.
    assert_eq!(list(&h, None, None, Detail::Full).unwrap().0.len(), 3);
    // Unknown address.
    let e = sysfs::read_device(&h, &"09:00.0".parse().unwrap()).unwrap_err().to_string();
    assert_eq!(e, "no PCI device 0000:09:00.0: run `pcibench list` to see the devices present");
}

#[test]
fn json_field_names_are_stable() {
    let (_t, h) = tree();
    let v = serde_json::to_value(read(&h, "15:00.0")).unwrap();
    for key in [
        "address",
        "simulated",
        "vendor_id",
        "vendor_name",
        "device_id",
        "device_name",
        "subsystem_vendor_id",
        "subsystem_device_id",
        "subsystem_name",
        "class_code",
        "class_name",
        "revision",
        "driver",
        "iommu_group",
        "numa_node",
        "parent",
        "command",
        "bars",
        "link",
        "model",
        "aer",
        "config_bytes",
        "capabilities",
        "extended_capabilities",
        "warnings",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["vendor_id"], "10ee");
    assert_eq!(v["class_code"], "058000");
    assert_eq!(v["bars"][0]["kind"], "memory");
    assert_eq!(v["bars"][0]["size"], 1048576);
    assert_eq!(v["bars"][0]["is_64bit"], true);
    assert_eq!(v["bars"][0]["files"][1], "resource0_wc");
    assert_eq!(v["command"]["memory"], true);
    assert_eq!(v["link"]["current_gen"], 2);
    assert_eq!(v["model"]["link"]["mps"], 256);
}

#[test]
fn a_summary_read_agrees_with_the_full_one_on_what_list_prints() {
    let (_t, h) = tree();
    let full = list(&h, None, None, Detail::Full).unwrap().0;
    let brief = list(&h, None, None, Detail::Summary).unwrap().0;
    assert_eq!(full.len(), brief.len());
    for (f, b) in full.iter().zip(&brief) {
        let key = |d: &DeviceInfo| {
            (
                d.address.clone(),
                d.vendor_id,
                d.device_id,
                d.class_code,
                d.revision,
                d.driver.clone(),
                d.class_name.clone(),
            )
        };
        assert_eq!(key(f), key(b));
        // The summary reads the 64-byte header only: no capabilities, link or AER.
        assert!(b.config_bytes <= 64 && b.link.is_none() && b.aer.is_none(), "{b:?}");
    }
}

#[test]
fn extended_config_space_is_read_only_where_a_pcie_capability_says_it_exists() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::new(t.path());
    f.device("0000:01:00.0")
        .ids(0x10ee, 0x7024, 0, 0)
        .config(&endpoint_config(0x10ee, 0x7024, 2, 2, 4, 256, 512, 4096));
    // A conventional function whose config file is 4 KiB long (as a VM's host bridge can be):
    // no capability list, so only the 256 bytes it has are read.
    let mut plain = vec![0u8; 4096];
    plain[0..4].copy_from_slice(&[0x86, 0x80, 0x57, 0x0d]);
    f.device("0000:00:00.0").ids(0x8086, 0x0d57, 0, 0).config(&plain);
    let h = Host::with_root(t.path());
    assert_eq!(sysfs::read_device(&h, &"01:00.0".parse().unwrap()).unwrap().config_bytes, 4096);
    assert_eq!(sysfs::read_device(&h, &"00:00.0".parse().unwrap()).unwrap().config_bytes, 256);
    let brief = sysfs::read_device_at(&h, &"01:00.0".parse().unwrap(), Detail::Summary).unwrap();
    assert_eq!(brief.config_bytes, 64);
}
