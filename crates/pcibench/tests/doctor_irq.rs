//! `doctor`'s interrupt checks on fixture trees: the MSI, MSI-X and INTx facts read from config
//! space, the completion modes each path offers, and whether INTx can be masked, all without a
//! write to the device.

mod common;

use common::{root, user, Tree, EDU};
use pcibench::device::Target;
use pcibench::doctor::{self, Report, Severity};

fn doc(t: &Tree, caller: &pcibench::doctor::Caller) -> Report {
    doctor::run_as(&t.host(), &EDU.parse::<Target>().unwrap(), caller).unwrap()
}

fn expect(r: &Report, name: &str, sev: Severity, ev: &[&str]) {
    let c = r.check(name).unwrap_or_else(|| panic!("no check {name}"));
    assert_eq!(c.severity, sev, "{name}: {c:#?}");
    for e in ev {
        assert!(c.evidence.contains(e), "{name}: evidence {:?} lacks {e:?}", c.evidence);
    }
    assert!(c.blocks.is_empty(), "interrupt findings never block a path: {c:#?}");
}

/// edu's config space as QEMU builds it (hw/misc/edu.c: msi_init with one 64-bit vector, pin
/// INTA), command `cmd`; with `msix`: an MSI-X capability of 16 vectors in BAR2 at 0x3000 and
/// the given control word's enable bit.
fn edu_config(cmd: u16, msi_ctl: u16, msix: Option<u16>) -> Vec<u8> {
    let mut c = vec![0u8; 256];
    c[0..4].copy_from_slice(&[0x34, 0x12, 0xe8, 0x11]);
    c[4..6].copy_from_slice(&cmd.to_le_bytes());
    c[6..8].copy_from_slice(&0x0010u16.to_le_bytes());
    c[0x34] = 0x40;
    c[0x3d] = 1;
    c[0x40] = 0x05;
    c[0x42..0x44].copy_from_slice(&(msi_ctl | 0x80).to_le_bytes());
    if let Some(ctl) = msix {
        c[0x41] = 0x60;
        c[0x60] = 0x11;
        c[0x62..0x64].copy_from_slice(&(ctl | 15).to_le_bytes());
        c[0x64..0x68].copy_from_slice(&(0x3000u32 | 2).to_le_bytes());
    }
    c
}

fn edu_with(t: &Tree, cfg: &[u8], irq: &str) {
    t.edu();
    t.dev_file(EDU, "config", cfg).dev_file(EDU, "irq", format!("{irq}\n"));
}

#[test]
fn msi_and_intx_of_edu_and_the_modes_each_path_offers() {
    let t = Tree::new();
    let cfg = edu_config(0x0002, 0, None);
    edu_with(&t, &cfg, "11");
    t.file("proc/interrupts", "           CPU0\n  0:         40   IO-APIC   2-edge      timer\n 11:          0   IO-APIC  11-fasteoi   virtio0\n");
    let r = doc(&t, &root());
    expect(
        &r,
        "interrupts",
        Severity::Pass,
        &[
            "MSI 1 vector (64-bit)",
            "INTx pin INTA (IRQ 11)",
            "by interrupt through vfio-noiommu and vfio-user (--irq-kind auto takes MSI)",
            "sysfs polls only",
        ],
    );
    // A conventional function whose Interrupt Disable reads clear, on a line virtio0 also uses.
    expect(
        &r,
        "intx-mask",
        Severity::Warn,
        &["known only after a write", "IRQ 11 is shared with virtio0", "--irq-kind msi"],
    );
    let now = std::fs::read(t.path(&format!("{}/config", t.devdir(EDU)))).unwrap();
    assert_eq!(now, cfg, "doctor wrote nothing");
}

#[test]
fn msix_is_preferred_and_an_enable_names_who_holds_it() {
    let t = Tree::new();
    edu_with(&t, &edu_config(0x0406, 1, Some(0x8000)), "0");
    t.iommu().bind(EDU, "vfio-pci").group(EDU, 7);
    let r = doc(&t, &root());
    expect(
        &r,
        "interrupts",
        Severity::Pass,
        &[
            "MSI-X 16 vectors (table in BAR2 at 0x3000, enabled: a process has it routed through VFIO)",
            "MSI 1 vector (64-bit, enabled: a process has it routed through VFIO)",
            "INTx pin INTA;",
            "through vfio and vfio-user (--irq-kind auto takes MSI-X)",
        ],
    );
    // Interrupt Disable reads set: the function has the PCI 2.3 bit.
    expect(&r, "intx-mask", Severity::Pass, &["Interrupt Disable (command bit 10) reads set"]);
}

#[test]
fn vfio_pci_without_intx_masking_needs_the_line_alone() {
    let t = Tree::new();
    edu_with(&t, &edu_config(0x0002, 0, None), "10");
    t.file("sys/module/vfio_pci/parameters/nointxmask", "Y\n");
    t.file("proc/interrupts", " 10:   3   IO-APIC  10-fasteoi   vfio-intx(0000:00:04.0)\n");
    let r = doc(&t, &root());
    expect(&r, "intx-mask", Severity::Info, &["nointxmask=Y", "needs the line to itself"]);
    assert!(r.check("intx-mask").unwrap().fix.as_deref().unwrap().contains("modprobe vfio_pci"));
    t.file("proc/interrupts", " 10:   3   IO-APIC  10-fasteoi   ata_piix, vfio-intx(0000:00:04.0)\n");
    expect(&doc(&t, &root()), "intx-mask", Severity::Warn, &["shared with ata_piix"]);
}

#[test]
fn a_user_sees_the_header_only_and_is_told_how_to_see_more() {
    let t = Tree::new();
    edu_with(&t, &edu_config(0x0002, 0, None)[..64], "11");
    let r = doc(&t, &user());
    expect(
        &r,
        "interrupts",
        Severity::Info,
        &["INTx pin INTA (IRQ 11)", "MSI and MSI-X unknown", "the 64-byte header only"],
    );
    assert_eq!(
        r.check("interrupts").unwrap().fix.as_deref(),
        Some("sudo pcibench doctor 0000:00:04.0 reads the capabilities")
    );
}

#[test]
fn no_interrupts_at_all_is_polling_only() {
    let t = Tree::new();
    let mut cfg = edu_config(0x0002, 0, None);
    cfg[0x06] = 0;
    cfg[0x3d] = 0;
    edu_with(&t, &cfg, "0");
    let r = doc(&t, &root());
    expect(&r, "interrupts", Severity::Info, &["completion by polling only"]);
    expect(&r, "intx-mask", Severity::Info, &["no INTx pin"]);
}
