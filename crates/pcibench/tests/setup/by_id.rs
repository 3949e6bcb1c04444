//! `setup --id`: every function with the ids at once, all or nothing: one member of their IOMMU
//! groups in use refuses the whole command before anything changes.

use super::*;
use crate::common::MEM32;
use pcibench::pci::IdFilter;

const RAW: [&str; 3] = ["0000:00:05.0", "0000:00:06.0", "0000:00:07.0"];
const NIC: &str = "0000:00:08.0";

/// Three virtio disks (1af4:1001) in groups 5, 6, 7 and a NIC (1af4:1000) bound to virtio-pci
/// in group 7 with the third disk; an IOMMU, vfio loaded.
fn disks() -> Tree {
    let t = Tree::new();
    t.iommu().vfio_loaded(false);
    for (i, a) in RAW.iter().enumerate() {
        t.device(a, 0x1af4, 0x1001, 0x010000, &[(0, 0xfe00_0000 + (i as u64) * 0x10000, 0x1000, MEM32)], 0x0006);
        t.group(a, 5 + i as u32);
    }
    t.device(NIC, 0x1af4, 0x1000, 0x020000, &[(0, 0xfe10_0000, 0x1000, MEM32)], 0x0006).bind(NIC, "virtio-pci");
    t.group(NIC, 7);
    t
}

fn ids(s: &str) -> IdFilter {
    s.parse().unwrap()
}

#[test]
fn binds_every_function_with_the_ids_and_names_a_group_member_left_with_its_driver() {
    let t = disks();
    let k = FakeKernel::new(&t);
    let each = setup::vfio_by_id(&t.host(), &ids("1af4:1001"), &opts(&k)).unwrap();
    let devices: Vec<&str> = each.iter().map(|e| e.device.as_str()).collect();
    assert_eq!(devices, RAW);
    for a in RAW {
        assert!(t.read(&format!("{}/driver_override", t.devdir(a))).starts_with("vfio-pci"), "{a}");
        assert!(fs::read_link(t.path(&format!("{}/driver", t.devdir(a)))).unwrap().ends_with("vfio-pci"));
    }
    assert!(fs::read_link(t.path(&format!("{}/driver", t.devdir(NIC)))).unwrap().ends_with("virtio-pci"));
    let first = notes(&each[0].changes);
    assert!(
        first.contains(
            &"0000:00:08.0 shares an IOMMU group with them and stays bound to virtio-pci: VFIO opens the group only \
              once it is bound to vfio-pci too (sudo pcibench setup 0000:00:08.0 --vfio)"
        ),
        "{first:?}"
    );
    // Given back, every one.
    let k = FakeKernel::new(&t);
    let each = setup::release_by_id(&t.host(), &ids("1af4:1001"), &opts(&k)).unwrap();
    assert_eq!(each.len(), 3);
    for a in RAW {
        assert!(fs::symlink_metadata(t.path(&format!("{}/driver", t.devdir(a)))).is_err(), "{a} unbound");
    }
}

#[test]
fn one_member_in_use_refuses_them_all_and_changes_nothing() {
    let t = disks();
    // A process writes to the NIC's BAR through sysfs: it shares group 7 with the third disk.
    t.holder(812, "fio", 3, &format!("/{}/resource0", t.devdir(NIC)), "0100002");
    t.holder(813, "dd", 3, &format!("/{}/resource0", t.devdir(RAW[0])), "0100002");
    let k = FakeKernel::new(&t);
    let e = setup::vfio_by_id(&t.host(), &ids("1af4:1001"), &opts(&k)).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "refusing to bind the 3 functions with ids 1af4:1001 to vfio-pci: the running system uses 0000:00:05.0 ("
        ),
        "{e}"
    );
    assert!(e.contains("; 0000:00:08.0 (") && e.contains("PID 812 (fio)") && e.contains("PID 813 (dd)"), "{e}");
    assert!(
        e.ends_with("nothing was changed: free them first or narrow --id (VID:DID); --force takes them anyway"),
        "{e}"
    );
    assert!(k.log().is_empty(), "{:?}", k.log());
    for a in RAW {
        assert_eq!(t.read(&format!("{}/driver_override", t.devdir(a))), "(null)\n");
    }
    // --force says what it overrides before the first write.
    let k = FakeKernel::new(&t);
    let o = SetupOptions { force: true, ..opts(&k) };
    setup::vfio_by_id(&t.host(), &ids("1af4:1001"), &o).unwrap();
    let log = k.log();
    let said = log
        .iter()
        .position(|l| l.starts_with("notify --force: went ahead although the system uses 0000:00:08.0"))
        .unwrap();
    let wrote = log.iter().position(|l| l.starts_with("write ")).unwrap();
    assert!(said < wrote, "{log:?}");
}

#[test]
fn no_match_and_bridges_are_said() {
    let t = disks();
    t.device("0000:00:1c.0", 0x1af4, 0x1001, 0x060400, &[], 0x0006);
    let k = FakeKernel::new(&t);
    let e = setup::vfio_by_id(&t.host(), &ids("10ee"), &opts(&k)).unwrap_err().to_string();
    assert_eq!(
        e,
        "no PCI device with ids 10ee (no endpoint matches --id 10ee): run `pcibench list` to see the devices present"
    );
    let each = setup::vfio_by_id(&t.host(), &ids("1af4:1001"), &opts(&k)).unwrap();
    assert!(notes(&each[0].changes).contains(&"skipped 0000:00:1c.0: a PCI bridge, which vfio-pci does not take"));
    assert_eq!(each.len(), 3);
}
