//! Builds fake sysfs trees shaped like the kernel's, for tests here, in the CLI crate and in
//! doctor/setup (feature `fixtures`). Devices live under /sys/devices/pci0000:00/… with the
//! /sys/bus/pci/devices/ADDR symlinks, driver and iommu_group links as on a real system.

use std::fs;
use std::path::{Path, PathBuf};

/// A link at `link` to `target` (both under the fixture root), written relative as sysfs writes
/// its own (`../../../devices/...`): a fixture's files are opened beneath its root
/// (`file::beneath`), where an absolute link would lead out.
pub fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    let from: Vec<_> = link.parent().unwrap_or(Path::new("/")).components().collect();
    let to: Vec<_> = target.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to[common..] {
        rel.push(c);
    }
    std::os::unix::fs::symlink(rel, link)
}

pub struct Fixture {
    root: PathBuf,
}

pub struct DeviceBuilder {
    pub dir: PathBuf,
    root: PathBuf,
}

fn write(p: &Path, data: impl AsRef<[u8]>) {
    fs::create_dir_all(p.parent().expect("fixture path has a parent")).expect("fixture dir");
    fs::write(p, data).expect("fixture file");
}

impl Fixture {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).expect("fixture root");
        fs::create_dir_all(root.join("sys/bus/pci/drivers")).expect("fixture root");
        Fixture { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A device directly on the root bus.
    pub fn device(&self, addr: &str) -> DeviceBuilder {
        self.device_at(&format!("sys/devices/pci0000:00/{addr}"), addr)
    }

    /// A device behind `bridge` (which is created on the root bus if missing).
    pub fn device_behind(&self, bridge: &str, addr: &str) -> DeviceBuilder {
        if !self.root.join("sys/bus/pci/devices").join(bridge).exists() {
            self.device(bridge).ids(0x8086, 0x1901, 0, 0).class(0x060400);
        }
        self.device_at(&format!("sys/devices/pci0000:00/{bridge}/{addr}"), addr)
    }

    fn device_at(&self, rel: &str, addr: &str) -> DeviceBuilder {
        let dir = self.root.join(rel);
        fs::create_dir_all(&dir).expect("fixture device dir");
        let link = self.root.join("sys/bus/pci/devices").join(addr);
        let _ = fs::remove_file(&link);
        symlink(&dir, &link).expect("fixture device link");
        DeviceBuilder { dir, root: self.root.clone() }
    }
}

impl DeviceBuilder {
    pub fn file(&self, name: &str, data: impl AsRef<[u8]>) -> &Self {
        write(&self.dir.join(name), data);
        self
    }

    pub fn ids(&self, vid: u16, did: u16, svid: u16, sdid: u16) -> &Self {
        self.file("vendor", format!("0x{vid:04x}\n"))
            .file("device", format!("0x{did:04x}\n"))
            .file("subsystem_vendor", format!("0x{svid:04x}\n"))
            .file("subsystem_device", format!("0x{sdid:04x}\n"))
            .file("revision", "0x00\n")
            .file("numa_node", "-1\n")
    }

    pub fn class(&self, class: u32) -> &Self {
        self.file("class", format!("0x{class:06x}\n"))
    }

    /// BARs as (index, start, size, flags); writes `resource` and the resourceN(_wc) files
    /// the kernel would create (WC only for prefetchable memory BARs).
    pub fn bars(&self, bars: &[(u8, u64, u64, u64)]) -> &Self {
        let mut lines = vec![(0u64, 0u64, 0u64); 13];
        for &(i, start, size, flags) in bars {
            lines[i as usize] = (start, start + size - 1, flags);
            self.file(&format!("resource{i}"), "");
            if flags & 0x2000 != 0 && flags & 0x200 != 0 {
                self.file(&format!("resource{i}_wc"), "");
            }
        }
        let text: String = lines.iter().map(|(s, e, f)| format!("0x{s:016x} 0x{e:016x} 0x{f:016x}\n")).collect();
        self.file("resource", text)
    }

    /// An expansion ROM: line 6 of the `resource` file (call after `bars`), as the kernel keeps it.
    pub fn rom(&self, start: u64, size: u64, flags: u64) -> &Self {
        let text = fs::read_to_string(self.dir.join("resource")).unwrap_or_default();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.resize(13, format!("0x{0:016x} 0x{0:016x} 0x{0:016x}", 0));
        lines[6] = format!("0x{start:016x} 0x{:016x} 0x{flags:016x}", start + size - 1);
        self.file("resource", lines.join("\n") + "\n")
    }

    pub fn config(&self, bytes: &[u8]) -> &Self {
        self.file("config", bytes)
    }

    pub fn link(&self, cur: &str, cur_w: u8, max: &str, max_w: u8) -> &Self {
        self.file("current_link_speed", format!("{cur}\n"))
            .file("current_link_width", format!("{cur_w}\n"))
            .file("max_link_speed", format!("{max}\n"))
            .file("max_link_width", format!("{max_w}\n"))
    }

    pub fn driver(&self, name: &str) -> &Self {
        let drv = self.root.join("sys/bus/pci/drivers").join(name);
        fs::create_dir_all(&drv).expect("fixture driver dir");
        let link = self.dir.join("driver");
        let _ = fs::remove_file(&link);
        symlink(&drv, &link).expect("fixture driver link");
        self
    }

    pub fn iommu_group(&self, n: u32) -> &Self {
        let g = self.root.join("sys/kernel/iommu_groups").join(n.to_string());
        fs::create_dir_all(g.join("devices")).expect("fixture group dir");
        let name = self.dir.file_name().expect("device dir name");
        let _ = symlink(&self.dir, &g.join("devices").join(name));
        let link = self.dir.join("iommu_group");
        let _ = fs::remove_file(&link);
        symlink(&g, &link).expect("fixture group link");
        self
    }
}

/// Config space of an endpoint: `command` at 0x04, capability list PM@0x40 → MSI@0x48 →
/// PCIe@0x70 (gen/width, MPS, MRRS as given), AER@0x100 → Secondary PCIe@0x1c0 when `len` > 256.
// Test-only builder: one argument per field the tests vary reads better than a struct here.
#[allow(clippy::too_many_arguments)]
pub fn endpoint_config(
    vid: u16,
    did: u16,
    command: u16,
    gen: u8,
    width: u8,
    mps: u32,
    mrrs: u32,
    len: usize,
) -> Vec<u8> {
    let mut c = vec![0u8; 4096];
    let enc = |v: u32| (v / 128).trailing_zeros() as u16;
    c[0..2].copy_from_slice(&vid.to_le_bytes());
    c[2..4].copy_from_slice(&did.to_le_bytes());
    c[4..6].copy_from_slice(&command.to_le_bytes());
    c[6..8].copy_from_slice(&0x0010u16.to_le_bytes());
    c[0x34] = 0x40;
    c[0x40] = 0x01;
    c[0x41] = 0x48;
    c[0x48] = 0x05;
    c[0x49] = 0x70;
    c[0x70] = 0x10;
    c[0x72..0x74].copy_from_slice(&0x0002u16.to_le_bytes());
    c[0x74..0x78].copy_from_slice(&2u32.to_le_bytes());
    c[0x78..0x7a].copy_from_slice(&((enc(mps) << 5) | (enc(mrrs) << 12)).to_le_bytes());
    c[0x7c..0x80].copy_from_slice(&(gen as u32 | ((width as u32) << 4)).to_le_bytes());
    c[0x82..0x84].copy_from_slice(&(gen as u16 | ((width as u16) << 4)).to_le_bytes());
    c[0x100..0x104].copy_from_slice(&(0x0001u32 | (2 << 16) | (0x1c0 << 20)).to_le_bytes());
    c[0x1c0..0x1c4].copy_from_slice(&(0x0019u32 | (1 << 16)).to_le_bytes());
    c.truncate(len);
    c
}

/// `config` with its ROM Base Address register (0x30, a type 0 header) set to `reg`.
fn with_rom(mut config: Vec<u8>, reg: u32) -> Vec<u8> {
    config[0x30..0x34].copy_from_slice(&reg.to_le_bytes());
    config
}

/// The devices the tests and README examples use, modelled on the seeds:
/// - 0000:15:00.0 10ee:7024, three 64-bit prefetchable BARs (1 MiB, 128 KiB, 64 KiB), a 64 KiB expansion ROM (disabled), Gen2 x4 (seed 000)
/// - 0000:16:00.0 the same card with 32-bit non-prefetchable BARs 0/1/2 (seed 000 §2)
/// - 0000:2d:00.0 1332:5425 Micro Memory NVRAM, 1 GiB BAR, bound to vfio-pci, IOMMU group 85 (seed 001)
/// - 0000:22:00.0 10ee:9031 behind bridges 0000:20:00.0 (seed 002's Thunderbolt enclosure), Gen3 x1 of x8
pub fn seed_tree(root: impl Into<PathBuf>) -> Fixture {
    let f = Fixture::new(root);
    const PREF64: u64 = 0x0014_220c;
    const MEM32: u64 = 0x0004_0200;
    f.device("0000:15:00.0")
        .ids(0x10ee, 0x7024, 0x0002, 0x0001)
        .class(0x058000)
        .bars(&[
            (0, 0x387f_8000_0000, 1 << 20, PREF64),
            (2, 0x387f_8010_0000, 128 << 10, PREF64),
            (4, 0x387f_8012_0000, 64 << 10, PREF64),
        ])
        // A 64 KiB option ROM, assigned and not enabled (config 0x30), as a card's usually is.
        .rom(0x9600_0000, 64 << 10, 0x46200)
        .config(&with_rom(endpoint_config(0x10ee, 0x7024, 0x0002, 2, 4, 256, 512, 4096), 0x9600_0000))
        .link("5.0 GT/s PCIe", 4, "5.0 GT/s PCIe", 4)
        .file("aer_dev_correctable", "RxErr 0\nBadTLP 2\nBadDLLP 0\nTOTAL_ERR_COR 2\n")
        .file("aer_dev_nonfatal", "Undefined 0\nTOTAL_ERR_NONFATAL 0\n")
        .file("aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 0\n");
    f.device("0000:16:00.0")
        .ids(0x10ee, 0x7024, 0x0002, 0x0001)
        .class(0x058000)
        .bars(&[
            (0, 0x9680_0000, 1 << 20, MEM32),
            (1, 0x9690_0000, 128 << 10, MEM32),
            (2, 0x9692_0000, 64 << 10, MEM32),
        ])
        .config(&endpoint_config(0x10ee, 0x7024, 0x0000, 2, 4, 256, 512, 256))
        .link("5.0 GT/s PCIe", 4, "5.0 GT/s PCIe", 4);
    f.device("0000:2d:00.0")
        .ids(0x1332, 0x5425, 0x1332, 0x5453)
        .class(0x050000)
        .bars(&[(0, 0xe000_0000, 1 << 30, 0x0004_0200)])
        .config(&endpoint_config(0x1332, 0x5425, 0x0006, 1, 1, 128, 512, 64))
        .driver("vfio-pci")
        .iommu_group(85);
    f.device("0000:20:00.0").ids(0x1b21, 0x2463, 0x1b21, 0x2463).class(0x060400).driver("pcieport");
    f.device_behind("0000:20:00.0", "0000:22:00.0")
        .ids(0x10ee, 0x9031, 0x10ee, 0x0007)
        .class(0x070001)
        .bars(&[(0, 0xb000_0000, 128 << 10, MEM32)])
        .config(&endpoint_config(0x10ee, 0x9031, 0x0002, 3, 1, 256, 512, 4096))
        .link("8.0 GT/s PCIe", 1, "8.0 GT/s PCIe", 8)
        .iommu_group(16);
    f
}

/// PCI Express port types (PCIe Base 6.0 §7.5.3.2, Device/Port Type).
pub const ENDPOINT: u8 = 0;
pub const ROOT_PORT: u8 = 4;

/// Config space of a PCI Express function for the link-health fixtures: `endpoint_config` with
/// its port type, Link Capabilities `cap` and Link Status `sta` as (gen, width), Device Status
/// `devsta` and extra Link Status bits `lnksta` (LBMS 1 << 14, LABS 1 << 15). 256 bytes (what
/// root reads before the extended space).
pub fn pcie_config(port_type: u8, cap: (u8, u8), sta: (u8, u8), devsta: u16, lnksta: u16) -> Vec<u8> {
    let mut c = endpoint_config(0x8086, 0x1234, 0x0006, cap.0, cap.1, 256, 512, 256);
    c[0x72] = 0x02 | (port_type << 4);
    if port_type == ROOT_PORT {
        c[0x0e] = 0x01; // a type 1 (bridge) header
    }
    c[0x7a..0x7c].copy_from_slice(&devsta.to_le_bytes());
    let s = sta.0 as u16 | ((sta.1 as u16) << 4) | lnksta;
    c[0x82..0x84].copy_from_slice(&s.to_le_bytes());
    c
}

/// The sysfs speed name of a generation (`8.0 GT/s PCIe`).
pub fn speed(gen: u8) -> String {
    super::link::speed_name(gen).unwrap_or_else(|| "Unknown".into())
}

impl DeviceBuilder {
    /// A PCI Express function's link files and config space: LnkCap `cap`, LnkSta `sta` (gen,
    /// width; width 0 is a link that is down), Device Status `devsta`, extra Link Status bits.
    pub fn pcie(&self, port_type: u8, cap: (u8, u8), sta: (u8, u8), devsta: u16, lnksta: u16) -> &Self {
        let cur = if sta.1 == 0 { "Unknown".to_string() } else { speed(sta.0) };
        self.file("current_link_speed", format!("{cur}\n"))
            .file("current_link_width", format!("{}\n", sta.1))
            .file("max_link_speed", format!("{}\n", speed(cap.0)))
            .file("max_link_width", format!("{}\n", cap.1))
            .config(&pcie_config(port_type, cap, sta, devsta, lnksta))
    }

    /// AER counter files, the kernel's long names (6.x: `Header Log Overflow`) or the short ones
    /// older kernels write (`HeaderOF`), with the correctable BadTLP, non-fatal CmpltAbrt and
    /// fatal DLP counts given; `rootport` adds the root port's totals.
    pub fn aer(
        &self,
        long_names: bool,
        cor_badtlp: u64,
        nonfatal_cmpltabrt: u64,
        fatal_dlp: u64,
        rootport: bool,
    ) -> &Self {
        let hol = if long_names { "Header Log Overflow" } else { "HeaderOF" };
        self.file(
            "aer_dev_correctable",
            format!("RxErr 0\nBadTLP {cor_badtlp}\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\n{hol} 0\nTOTAL_ERR_COR {cor_badtlp}\n"),
        )
        .file(
            "aer_dev_nonfatal",
            format!("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt {nonfatal_cmpltabrt}\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nTOTAL_ERR_NONFATAL {nonfatal_cmpltabrt}\n"),
        )
        .file("aer_dev_fatal", format!("Undefined 0\nDLP {fatal_dlp}\nSDES 0\nTLP 0\nTOTAL_ERR_FATAL {fatal_dlp}\n"));
        if rootport {
            self.file("aer_rootport_total_err_cor", format!("{cor_badtlp}\n"))
                .file("aer_rootport_total_err_nonfatal", format!("{nonfatal_cmpltabrt}\n"))
                .file("aer_rootport_total_err_fatal", format!("{fatal_dlp}\n"));
        }
        self
    }
}

/// A host for `pcibench health`, every link healthy:
/// - 0000:00:1c.0 root port (Gen3 x8 capable), AER with the long names and root-port totals, and
///   below it 0000:03:00.0, a Gen3 x8 endpoint (10ee:7024, a 64 KiB memory BAR0, Memory Space and
///   Bus Master on) trained Gen3 x8, AER with the short names
/// - 0000:00:1d.0 root port (Gen3 x4: the slot is wired x4), below it 0000:04:00.0 an x8 card at
///   Gen3 x4: limited by the port, not degraded (lspci would flag the endpoint)
/// - 0000:00:1e.0 root port with an empty slot (its link is down: no verdict)
/// - 0000:00:00.0 a host bridge (no PCIe link, no AER: not listed)
///
/// `health_degrade`, `health_errors`, `health_retrain`, `health_down` and `health_memory_off`
/// then break one thing each.
pub fn health_tree(root: impl Into<PathBuf>) -> Fixture {
    let f = Fixture::new(root);
    f.device("0000:00:00.0").ids(0x8086, 0x29c0, 0x1af4, 0x1100).class(0x060000);
    f.device("0000:00:1c.0")
        .ids(0x8086, 0xa110, 0x8086, 0x0000)
        .class(0x060400)
        .driver("pcieport")
        .pcie(ROOT_PORT, (3, 8), (3, 8), 0, 0)
        .aer(true, 0, 0, 0, true);
    f.device_behind("0000:00:1c.0", "0000:03:00.0")
        .ids(0x10ee, 0x7024, 0x10ee, 0x0007)
        .class(0x058000)
        .driver("xdma")
        .bars(&[(0, 0xf000_0000, 0x10000, 0x40200)])
        .pcie(ENDPOINT, (3, 8), (3, 8), 0, 0)
        .aer(false, 0, 0, 0, false);
    f.device("0000:00:1d.0").ids(0x8086, 0xa111, 0x8086, 0x0000).class(0x060400).driver("pcieport").pcie(
        ROOT_PORT,
        (3, 4),
        (3, 4),
        0,
        0,
    );
    f.device_behind("0000:00:1d.0", "0000:04:00.0")
        .ids(0x15b3, 0x1017, 0x15b3, 0x0007)
        .class(0x020000)
        .driver("mlx5_core")
        .pcie(ENDPOINT, (3, 8), (3, 4), 0, 0);
    f.device("0000:00:1e.0").ids(0x8086, 0xa112, 0x8086, 0x0000).class(0x060400).driver("pcieport").pcie(
        ROOT_PORT,
        (3, 4),
        (1, 0),
        0,
        0,
    );
    f
}

impl Fixture {
    /// The existing function `addr`'s builder (to change its files between two runs).
    pub fn at(&self, addr: &str) -> DeviceBuilder {
        let link = self.root.join("sys/bus/pci/devices").join(addr);
        let dir = fs::canonicalize(&link).expect("fixture device exists");
        DeviceBuilder { dir, root: self.root.clone() }
    }
}

/// `health_tree`'s endpoint 0000:03:00.0 trained Gen1 x8 while both ends support Gen3 x8:
/// degraded, by lspci's rule.
pub fn health_degrade(f: &Fixture) {
    f.at("0000:00:1c.0").pcie(ROOT_PORT, (3, 8), (1, 8), 0, 0);
    f.at("0000:03:00.0").pcie(ENDPOINT, (3, 8), (1, 8), 0, 0);
}

/// `health_tree`'s AER counters grow: the endpoint (short names) 3 correctable BadTLP; the root
/// port (long names) 2 non-fatal CmpltAbrt and, when `fatal`, 1 fatal DLP, with its totals.
pub fn health_errors(f: &Fixture, fatal: bool) {
    f.at("0000:03:00.0").aer(false, 3, 0, 0, false);
    f.at("0000:00:1c.0").aer(true, 0, 2, u64::from(fatal), true);
}

/// `health_tree`'s second port retrains: its link and its endpoint's come back at Gen2 x4 and the
/// port's Link Status shows LBMS.
pub fn health_retrain(f: &Fixture) {
    f.at("0000:00:1d.0").pcie(ROOT_PORT, (3, 4), (2, 4), 0, 1 << 14);
    f.at("0000:04:00.0").pcie(ENDPOINT, (3, 8), (2, 4), 0, 0);
}

/// `health_tree`'s first link goes down: the port reads width 0 and an unknown speed, the
/// endpoint's config space all ones.
pub fn health_down(f: &Fixture) {
    f.at("0000:00:1c.0").pcie(ROOT_PORT, (3, 8), (1, 0), 0, 0);
    f.at("0000:03:00.0").config(&[0xff; 256]);
}

/// `health_tree`'s endpoint 0000:03:00.0 with Memory Space Enable cleared (a reset, or another
/// process wrote its Command register) while its driver stays bound: command 0x0004.
pub fn health_memory_off(f: &Fixture) {
    let dir = f.at("0000:03:00.0");
    let mut config = fs::read(dir.dir.join("config")).expect("fixture config");
    config[4..6].copy_from_slice(&0x0004u16.to_le_bytes());
    dir.config(&config);
}

/// `n` functions for the health benchmark: root ports each with one endpoint below, every
/// function with a PCI Express link, AER counters and readable status registers.
pub fn health_fleet(root: impl Into<PathBuf>, n: usize) -> Fixture {
    let f = Fixture::new(root);
    for i in 0..n / 2 {
        let (bus, dev) = (i / 32, i % 32);
        let port = format!("0000:{bus:02x}:{dev:02x}.0");
        let ep = format!("0000:{:02x}:{:02x}.0", 0x40 + i / 32, i % 32);
        f.device(&port)
            .ids(0x8086, 0xa110, 0x8086, 0)
            .class(0x060400)
            .driver("pcieport")
            .pcie(ROOT_PORT, (4, 16), (4, 16), 0, 0)
            .aer(true, 0, 0, 0, true);
        f.device_behind(&port, &ep)
            .ids(0x10ee, 0x9038, 0x10ee, 7)
            .class(0x058000)
            .driver("xdma")
            .pcie(ENDPOINT, (4, 16), (4, 16), 0, 0)
            .aer(false, 1, 0, 0, false);
    }
    f
}
