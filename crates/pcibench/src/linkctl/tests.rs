//! `link` on a fixture host: root port 0000:00:1c.0 (Gen3 x8 capable, Link Capabilities 2 listing
//! Gen1-3) with an endpoint below it (Gen2 x8 capable), and a fake kernel whose port trains when
//! Retrain Link is written: to the lower of its Target Link Speed and the endpoint's maximum.

use super::*;
use crate::pci::fixture::{pcie_config, Fixture, ENDPOINT, ROOT_PORT};
use crate::setup::fake::FakeKernel;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

const PORT: &str = "0000:00:1c.0";
const EP: &str = "0000:03:00.0";
/// The PCI Express capability's offset in `pcie_config`.
const CAP: usize = 0x70;

fn port_cfg() -> Vec<u8> {
    let mut c = pcie_config(ROOT_PORT, (3, 8), (3, 8), 0, 0);
    c[CAP + LNKCAP2..CAP + LNKCAP2 + 4].copy_from_slice(&0b1110u32.to_le_bytes());
    c[CAP + LNKCTL2..CAP + LNKCTL2 + 2].copy_from_slice(&3u16.to_le_bytes());
    c
}

fn tree() -> (tempfile::TempDir, Fixture) {
    let d = tempfile::tempdir().unwrap();
    let f = Fixture::new(d.path());
    f.device(PORT).ids(0x8086, 0xa110, 0x8086, 0).class(0x060400).driver("pcieport").config(&port_cfg()).link(
        "8.0 GT/s PCIe",
        8,
        "8.0 GT/s PCIe",
        8,
    );
    f.device_behind(PORT, EP)
        .ids(0x10ee, 0x7024, 0x10ee, 7)
        .class(0x058000)
        .config(&pcie_config(ENDPOINT, (2, 8), (2, 8), 0, 0))
        .link("5.0 GT/s PCIe", 8, "5.0 GT/s PCIe", 8)
        .file("aer_dev_correctable", "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n");
    (d, f)
}

/// The port's training: on Retrain Link, Link Status takes min(target, 2) and the bit reads 0;
/// `hardwired`: Link Control 2 ignores writes; `counts`: a retrain counts a correctable BadTLP.
struct FakePort {
    hardwired: bool,
    counts: bool,
    log: Mutex<Vec<String>>,
}

impl FakeKernel for FakePort {
    fn write(&self, _: &Path, _: &str) -> std::io::Result<()> {
        unreachable!("link writes config space only")
    }
    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.log.lock().unwrap().push(format!("{offset:#x} {data:02x?}"));
        let mut c = fs::read(path)?;
        let o = offset as usize;
        let v = u16::from_le_bytes([data[0], data[1]]);
        if o == CAP + LNKCTL2 && !self.hardwired {
            c[o..o + 2].copy_from_slice(data);
        }
        if o == CAP + LNKCTL && v & LNKCTL_RL != 0 {
            let target = u16::from_le_bytes([c[CAP + LNKCTL2], c[CAP + LNKCTL2 + 1]]) & 0xf;
            let gen = target.min(2);
            c[CAP + LNKSTA..CAP + LNKSTA + 2].copy_from_slice(&(gen | (8 << 4) | (1 << 14)).to_le_bytes());
            let dir = path.parent().unwrap();
            fs::write(dir.join("current_link_speed"), format!("{}\n", crate::pci::fixture::speed(gen as u8)))?;
            if self.counts {
                let ep = fs::canonicalize(dir).unwrap().join(EP);
                fs::write(ep.join("aer_dev_correctable"), "RxErr 0\nBadTLP 1\nTOTAL_ERR_COR 1\n")?;
            }
        }
        fs::write(path, c)
    }
    fn run(&self, _: &str, _: &[&str]) -> Result<()> {
        unreachable!()
    }
}

fn opts(hardwired: bool, counts: bool) -> (Arc<FakePort>, SetupOptions) {
    let k = Arc::new(FakePort { hardwired, counts, log: Mutex::new(Vec::new()) });
    (k.clone(), SetupOptions { system: k, timeout: Duration::from_millis(50), ..SetupOptions::default() })
}

fn ep() -> PciAddress {
    EP.parse().unwrap()
}

#[test]
fn an_endpoints_link_is_its_ports_and_showing_it_writes_nothing() {
    let (d, _f) = tree();
    let (k, o) = opts(false, false);
    let r = link(&Host::with_root(d.path()), &ep(), LinkChange::default(), &o).unwrap();
    assert_eq!((r.device.as_str(), r.port.as_str()), (EP, PORT));
    assert_eq!((r.before.gen, r.before.width, r.before.target), (Some(3), 8, Some(3)));
    assert_eq!((r.before.max_gen, r.before.supported.clone()), (Some(3), vec![1, 2, 3]));
    assert_eq!(r.seen_before[1].current_link_speed.as_deref(), Some("5.0 GT/s PCIe"));
    assert!(r.after.is_none() && k.log.lock().unwrap().is_empty());
}

#[test]
fn a_target_speed_and_a_retrain_train_the_link_and_say_what_it_came_to() {
    let (d, _f) = tree();
    let (k, o) = opts(false, true);
    let h = Host::with_root(d.path());
    let r = link(&h, &ep(), LinkChange { speed: Some(1), retrain: true }, &o).unwrap();
    let a = r.after.clone().unwrap();
    assert_eq!((a.gen, a.width, a.target), (Some(1), 8, Some(1)));
    assert_eq!(r.seen_after[0].current_link_speed.as_deref(), Some("2.5 GT/s PCIe"));
    let steps: Vec<&str> = r.steps.iter().map(|c| c.what.as_str()).collect();
    assert_eq!(
        steps,
        [
            "set 0000:00:1c.0's Target Link Speed to Gen1 (2.5 GT/s) (Link Control 2 0x0003 -> 0x0001; it was Gen3 (8.0 GT/s))",
            "retrained 0000:00:1c.0's link (Link Control 0x0000 | Retrain Link 0x0020)",
        ]
    );
    assert_eq!(r.notes, ["the link trained at Gen1 (2.5 GT/s) x8 (was Gen3 (8.0 GT/s) x8)"]);
    assert_eq!(r.aer_grew, ["0000:03:00.0: correctable:BadTLP 0 -> 1"]);
    assert_eq!(*k.log.lock().unwrap(), ["0xa0 [01, 00]", "0x80 [20, 00]"]);
    // Back to Gen3: the endpoint (Gen2 at most) limits it, and the note says so.
    let (_k, o) = opts(false, false);
    let r = link(&h, &ep(), LinkChange { speed: Some(3), retrain: true }, &o).unwrap();
    assert_eq!(r.after.as_ref().unwrap().gen, Some(2));
    assert!(r.notes[1].starts_with("below the Gen3 asked: the device at the other end"), "{:?}", r.notes);
}

#[test]
fn a_speed_the_port_cannot_run_or_cannot_take_is_refused() {
    let (d, _f) = tree();
    let h = Host::with_root(d.path());
    let (k, o) = opts(false, false);
    let e = link(&h, &ep(), LinkChange { speed: Some(4), retrain: true }, &o).unwrap_err().to_string();
    assert_eq!(e, "0000:00:1c.0 cannot run at Gen4: it supports gen1, gen2, gen3 (Link Capabilities 2)");
    assert!(k.log.lock().unwrap().is_empty());
    // A port that hardwires its Target Link Speed (QEMU's pcie-root-port does): said, no retrain.
    let (k, o) = opts(true, false);
    let e = link(&h, &ep(), LinkChange { speed: Some(1), retrain: true }, &o).unwrap_err().to_string();
    assert!(e.starts_with("0000:00:1c.0 kept Target Link Speed Gen3 (8.0 GT/s) after Gen1 was written"), "{e}");
    assert_eq!(k.log.lock().unwrap().len(), 1, "no retrain after the refusal");
}

#[test]
fn a_speed_without_retrain_waits_for_the_next_training() {
    let (d, _f) = tree();
    let (_k, o) = opts(false, false);
    let r = link(&Host::with_root(d.path()), &ep(), LinkChange { speed: Some(2), retrain: false }, &o).unwrap();
    let a = r.after.unwrap();
    assert_eq!((a.gen, a.target), (Some(3), Some(2)), "the link keeps its speed until it trains");
    assert!(r.notes[0].starts_with("the link trains to it at its next training: add --retrain"), "{:?}", r.notes);
}

#[test]
fn a_function_without_a_link_or_readable_registers_is_refused() {
    let (d, f) = tree();
    let h = Host::with_root(d.path());
    let (_k, o) = opts(false, false);
    f.at(EP).config(&pcie_config(ENDPOINT, (2, 8), (2, 8), 0, 0)[..64]);
    let e = link(&h, &ep(), LinkChange::default(), &o).unwrap_err().to_string();
    assert!(e.starts_with("only 64 bytes of 0000:03:00.0's config space are readable"), "{e}");
    f.device("0000:00:04.0").ids(0x1234, 0x11e8, 0, 0).config(&[0u8; 256]);
    let e = link(&h, &"00:04.0".parse().unwrap(), LinkChange::default(), &o).unwrap_err().to_string();
    assert!(e.contains("is not PCI Express"), "{e}");
}

/// A port that claims Data Link Layer Link Active reporting but never sets the bit on a working
/// link (QEMU's pcie-root-port) retrains without waiting for it; one that reported it and loses it
/// fails, saying the link is not up again.
#[test]
fn link_active_is_waited_for_only_where_the_port_showed_it() {
    let (d, f) = tree();
    let h = Host::with_root(d.path());
    let mut c = port_cfg();
    c[CAP + LNKCAP + 2] |= 0x10; // DLLLARC, bit 20
    f.at(PORT).config(&c);
    let (_k, o) = opts(false, false);
    let r = link(&h, &ep(), LinkChange { speed: None, retrain: true }, &o).unwrap();
    assert_eq!(r.after.unwrap().gen, Some(2));
    c[CAP + LNKSTA + 1] |= 0x20; // DLLLA set before; the fake's retrain clears it
    f.at(PORT).config(&c);
    let e = link(&h, &ep(), LinkChange { speed: None, retrain: true }, &o).unwrap_err().to_string();
    assert!(e.starts_with("0000:00:1c.0's link is not up again (Data Link Layer Link Active stays clear)"), "{e}");
}
