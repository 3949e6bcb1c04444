//! `reset` on a fixture host with a fake kernel: a root port 0000:00:01.0 with QEMU's edu
//! (0000:01:00.0) below it, the kernel's sysfs `reset`/`reset_method` and a bus that resets when
//! the port's Secondary Bus Reset bit rises (what QEMU does: the functions below lose their
//! Command register and BARs).

use super::*;
use crate::pci::fixture::{pcie_config, Fixture, ROOT_PORT};
use crate::setup::fake::FakeKernel;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PORT: &str = "0000:00:01.0";
const EDU: &str = "0000:01:00.0";

/// edu's config space: ids, command 0x0006, BAR0 at 0xfea00000, MSI at 0x40 (64-bit, enabled).
fn edu_config() -> Vec<u8> {
    let mut c = vec![0u8; 256];
    c[0..4].copy_from_slice(&0x11e8_1234u32.to_le_bytes());
    c[4..6].copy_from_slice(&0x0006u16.to_le_bytes());
    c[6..8].copy_from_slice(&0x0010u16.to_le_bytes());
    c[0x10..0x14].copy_from_slice(&0xfea0_0000u32.to_le_bytes());
    c[0x3c] = 11;
    c[0x34] = 0x40;
    c[0x40] = 0x05;
    c[0x42..0x44].copy_from_slice(&0x0081u16.to_le_bytes());
    c[0x44..0x48].copy_from_slice(&0xfee0_0000u32.to_le_bytes());
    c[0x4c..0x4e].copy_from_slice(&0x4021u16.to_le_bytes());
    c
}

fn port_config() -> Vec<u8> {
    let mut c = pcie_config(ROOT_PORT, (3, 4), (3, 4), 0, 0);
    c[0x18] = 0x00; // primary bus
    c[0x19] = 0x01; // secondary bus
    c[0x1a] = 0x01; // subordinate bus
    c
}

struct Host1 {
    _dir: tempfile::TempDir,
    root: PathBuf,
    fx: Fixture,
}

impl Host1 {
    fn new() -> Host1 {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let fx = Fixture::new(&root);
        fx.device(PORT).ids(0x1b36, 0x000c, 0x1b36, 0).class(0x060400).driver("pcieport").config(&port_config());
        fx.device_behind(PORT, EDU).ids(0x1234, 0x11e8, 0x1af4, 0x1100).class(0x00ff00).config(&edu_config());
        Host1 { _dir: dir, root, fx }
    }

    fn host(&self) -> Host {
        Host::with_root(&self.root)
    }

    fn edu(&self) -> PathBuf {
        self.fx.at(EDU).dir
    }

    /// The kernel offers `methods` for edu (the `reset` and `reset_method` attributes).
    fn kernel_offers(&self, methods: &str) -> &Self {
        self.fx.at(EDU).file("reset", "").file("reset_method", format!("{methods}\n"));
        self
    }

    fn config(&self) -> Vec<u8> {
        fs::read(self.edu().join("config")).unwrap()
    }
}

/// The fake kernel: sysfs writes land in the files; `reset_method` takes only methods the device
/// has; a rising Secondary Bus Reset bit resets every function below the port.
struct FakeBus {
    root: PathBuf,
    supported: Vec<&'static str>,
    log: Mutex<Vec<String>>,
}

impl FakeBus {
    fn new(h: &Host1, supported: &[&'static str]) -> Arc<FakeBus> {
        Arc::new(FakeBus { root: h.root.clone(), supported: supported.to_vec(), log: Mutex::new(Vec::new()) })
    }

    fn rel(&self, p: &Path) -> String {
        let r = fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let root = fs::canonicalize(&self.root).unwrap();
        let r = r.strip_prefix(&root).unwrap_or(&r).to_string_lossy().to_string();
        r.rsplit('/').take(2).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("/")
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl FakeKernel for FakeBus {
    fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
        self.log.lock().unwrap().push(format!("write {} {data:?}", self.rel(path)));
        let name = path.file_name().unwrap().to_str().unwrap();
        if name == "reset_method" && data != "default" && !data.split(' ').all(|m| self.supported.contains(&m)) {
            return Err(std::io::Error::from_raw_os_error(22));
        }
        fs::write(path, data)
    }

    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.log.lock().unwrap().push(format!("write_at {} {offset:#x} {data:02x?}", self.rel(path)));
        let mut bytes = fs::read(path)?;
        let before = bytes.get(0x3e).copied().unwrap_or(0);
        bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        fs::write(path, &bytes)?;
        let rising = offset == 0x3e && before & 0x40 == 0 && data[0] & 0x40 != 0;
        if rising {
            // Everything below the port: Command and BARs back to their reset values (0).
            let below = path.parent().unwrap();
            for e in fs::read_dir(below)?.flatten().filter(|e| e.path().join("config").is_file()) {
                let p = e.path().join("config");
                let mut c = fs::read(&p)?;
                c[4..6].fill(0);
                c[0x10..0x28].fill(0);
                c[0x42..0x44].fill(0);
                c[0x44..0x48].fill(0);
                fs::write(&p, c)?;
            }
        }
        Ok(())
    }

    fn run(&self, program: &str, _: &[&str]) -> Result<()> {
        Err(Error::Unsupported(format!("the fake kernel runs no {program}")))
    }
}

fn opts(k: &Arc<FakeBus>) -> SetupOptions {
    SetupOptions { timeout: Duration::from_millis(200), system: k.clone(), ..SetupOptions::default() }
}

fn edu() -> PciAddress {
    EDU.parse().unwrap()
}

#[test]
fn offered_names_the_kernels_methods_vfio_and_the_port() {
    let h = Host1::new();
    h.kernel_offers("bus");
    let o = offered(&h.host(), &edu()).unwrap();
    assert_eq!(o.kernel_methods.as_deref(), Some(&["bus".to_string()][..]));
    assert!(o.kernel_reset && !o.vfio && !o.port_by_kernel);
    assert_eq!((o.port.as_deref(), o.port_resets.clone()), (Some(PORT), vec![EDU.to_string()]));
    assert_eq!(o.auto, Some(Method::Kernel));
    // Without the kernel's reset, auto takes the port; on vfio-pci, VFIO.
    let h = Host1::new();
    assert_eq!(offered(&h.host(), &edu()).unwrap().auto, Some(Method::Port));
    h.fx.at(EDU).driver("vfio-pci");
    assert_eq!(offered(&h.host(), &edu()).unwrap().auto, Some(Method::Vfio));
}

#[test]
fn a_function_on_a_root_bus_without_a_kernel_reset_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Fixture::new(dir.path());
    fx.device("0000:00:04.0").ids(0x1234, 0x11e8, 0, 0).class(0x00ff00).config(&edu_config());
    let h = Host::with_root(dir.path());
    let a: PciAddress = "00:04.0".parse().unwrap();
    let o = offered(&h, &a).unwrap();
    assert_eq!(o.port, None);
    let why = o.no_reset.clone().unwrap();
    assert!(why.contains("offers no reset for 0000:00:04.0") && why.contains("root bus"), "{why}");
    let k = FakeBus::new(&Host1::new(), &[]);
    let e = reset(&h, &a, Method::Auto, &opts(&k)).unwrap_err().to_string();
    assert_eq!(e, why);
    let e = reset(&h, &a, Method::Port, &opts(&k)).unwrap_err().to_string();
    assert!(e.contains("sits on a root bus"), "{e}");
}

#[test]
fn the_kernel_reset_is_one_write_and_a_named_method_is_put_back() {
    let h = Host1::new();
    h.kernel_offers("flr bus");
    let k = FakeBus::new(&h, &["flr", "bus"]);
    let r = reset(&h.host(), &edu(), Method::Kernel, &opts(&k)).unwrap();
    assert_eq!(r.method, Method::Kernel);
    assert_eq!(r.how, "the kernel's reset (sysfs reset; its methods: flr, bus)");
    assert_eq!(k.log(), [format!("write {EDU}/reset \"1\"")]);
    assert!(r.after[0].answers && r.after[0].ids == "1234:11e8", "{:?}", r.after);

    let k = FakeBus::new(&h, &["flr", "bus"]);
    let r = reset(&h.host(), &edu(), "bus".parse().unwrap(), &opts(&k)).unwrap();
    assert_eq!(
        k.log(),
        [
            format!("write {EDU}/reset_method \"bus\""),
            format!("write {EDU}/reset \"1\""),
            format!("write {EDU}/reset_method \"flr bus\""),
        ]
    );
    let steps: Vec<&str> = r.steps.iter().map(|c| c.what.as_str()).collect();
    assert_eq!(steps, ["set reset_method to bus for this reset (it was: flr bus)", "put reset_method back to flr bus"]);

    // A method the function does not have: the kernel's EINVAL, said with what it offers.
    let k = FakeBus::new(&h, &["flr", "bus"]);
    let e = reset(&h.host(), &edu(), "pm".parse().unwrap(), &opts(&k)).unwrap_err().to_string();
    assert!(
        e.starts_with("the kernel does not offer pm for 0000:01:00.0") && e.ends_with("it offers: flr, bus"),
        "{e}"
    );
    assert_eq!(k.log().len(), 1, "nothing written after the refusal: {:?}", k.log());
}

#[test]
fn without_a_kernel_reset_the_kernel_method_points_at_the_port() {
    let h = Host1::new();
    let k = FakeBus::new(&h, &[]);
    let e = reset(&h.host(), &edu(), Method::Kernel, &opts(&k)).unwrap_err().to_string();
    assert!(e.starts_with("the kernel offers no reset for 0000:01:00.0"), "{e}");
    assert!(e.contains("pcibench reset 0000:01:00.0 --method port --allow-reset, which resets nothing else"), "{e}");
    assert!(k.log().is_empty());
}

#[test]
fn a_bus_reset_by_hand_saves_resets_and_restores_what_the_kernel_restores() {
    let h = Host1::new();
    let k = FakeBus::new(&h, &[]);
    let before = h.config();
    let r = reset(&h.host(), &edu(), Method::Auto, &opts(&k)).unwrap();
    assert_eq!(r.method, Method::Port);
    assert_eq!(r.reset, [EDU]);
    assert!(r.how.starts_with("a secondary bus reset of port 0000:00:01.0 by pcibench"), "{}", r.how);
    // The bus went through reset (the bit rose and fell) and edu's config space is whole again.
    let log = k.log();
    let sbr: Vec<&String> = log.iter().filter(|l| l.contains("0x3e")).collect();
    assert_eq!(sbr.len(), 2, "{log:?}");
    assert!(sbr[0].ends_with("[40, 00]") && sbr[1].ends_with("[00, 00]"), "{sbr:?}");
    assert_eq!(h.config(), before, "every byte the reset cleared is back");
    // BAR0 before Command: the function decodes only once its BARs are back.
    let bar = log.iter().position(|l| l.contains(&format!("{EDU}/config 0x10 "))).unwrap();
    let cmd = log.iter().rposition(|l| l.contains(&format!("{EDU}/config 0x4 "))).unwrap();
    assert!(bar < cmd, "{log:?}");
    let steps: Vec<&str> = r.steps.iter().map(|c| c.what.as_str()).collect();
    assert_eq!(steps[0], "saved the config space of 0000:01:00.0 (256 bytes), as pci_save_state does");
    assert!(
        steps[2].starts_with("restored ") && steps[2].contains("BAR0") && steps[2].contains("MSI address"),
        "{steps:?}"
    );
    assert_eq!((r.after[0].answers, r.after[0].command), (true, Some(0x0006)));
}

#[test]
fn a_bus_reset_by_hand_refuses_a_bound_driver_and_msix_and_force_says_so_first() {
    let h = Host1::new();
    h.fx.at(EDU).driver("edu_drv");
    let k = FakeBus::new(&h, &[]);
    let e = reset(&h.host(), &edu(), Method::Port, &opts(&k)).unwrap_err().to_string();
    assert!(e.starts_with("refusing a bus reset by hand under 0000:01:00.0 (bound to edu_drv)"), "{e}");
    assert!(k.log().is_empty());
    let said = Arc::new(Mutex::new(Vec::new()));
    let s = said.clone();
    let o = SetupOptions {
        force: true,
        notify: Some(Arc::new(move |m: &str| s.lock().unwrap().push(m.to_string()))),
        ..opts(&k)
    };
    let r = reset(&h.host(), &edu(), Method::Port, &o).unwrap();
    assert_eq!(
        said.lock().unwrap()[0],
        "--force: reset 0000:01:00.0 (bound to edu_drv) under its driver, which is not told"
    );
    assert!(r.steps[0].warning.is_some());

    // MSI-X enabled: its table lives in a BAR that the reset clears.
    let h = Host1::new();
    let mut c = edu_config();
    c[0x41] = 0x50;
    c[0x50] = 0x11;
    c[0x52..0x54].copy_from_slice(&0x8000u16.to_le_bytes());
    h.fx.at(EDU).config(&c);
    let k = FakeBus::new(&h, &[]);
    let e = reset(&h.host(), &edu(), Method::Port, &opts(&k)).unwrap_err().to_string();
    assert!(e.starts_with("0000:01:00.0 has MSI-X enabled"), "{e}");
    assert!(k.log().is_empty());
}

#[test]
fn the_kernels_reset_subordinate_is_preferred_for_the_port() {
    let h = Host1::new();
    h.fx.at(PORT).file("reset_subordinate", "");
    let k = FakeBus::new(&h, &[]);
    let r = reset(&h.host(), &edu(), Method::Port, &opts(&k)).unwrap();
    assert_eq!(k.log(), [format!("write {PORT}/reset_subordinate \"1\"")]);
    assert!(r.how.contains("by the kernel (reset_subordinate"), "{}", r.how);
    // `bridge` is pcibench's own all the same.
    let k = FakeBus::new(&h, &[]);
    let r = reset(&h.host(), &edu(), Method::Bridge, &opts(&k)).unwrap();
    assert!(r.how.ends_with("by pcibench (its Bridge Control)"), "{}", r.how);
    assert!(k.log().iter().any(|l| l.contains("config 0x3e")), "{:?}", k.log());
}

#[test]
fn vfio_needs_vfio_pci_and_a_bridge_is_not_a_target() {
    let h = Host1::new();
    let k = FakeBus::new(&h, &[]);
    let e = reset(&h.host(), &edu(), Method::Vfio, &opts(&k)).unwrap_err().to_string();
    assert!(e.starts_with("0000:01:00.0 is not bound to vfio-pci (driver: none): bind it first"), "{e}");
    let e = reset(&h.host(), &PORT.parse().unwrap(), Method::Auto, &opts(&k)).unwrap_err().to_string();
    assert!(e.starts_with("0000:00:01.0 is a PCI bridge"), "{e}");
    assert!(k.log().is_empty());
}

#[test]
fn method_names_parse_and_print_back() {
    for m in METHODS {
        assert_eq!(m.parse::<Method>().unwrap().to_string(), m);
    }
    assert!("reboot".parse::<Method>().unwrap_err().to_string().contains("use one of auto, vfio, kernel"));
}
