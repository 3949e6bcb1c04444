//! Reads of host kernel state shared by `doctor` and `setup`: drivers, IOMMU groups, modules,
//! the kernel command line and configuration. Every path goes through `Host`; a missing or
//! unreadable file reads as "unknown" (None or empty), never as an error.

use crate::host::Host;
use std::fmt::Display;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A kernel attribute's text, trimmed (`file::read_trim`: regular files only, bounded).
pub use crate::file::read_trim;

/// The last component of a symlink's target (`driver` → `e1000e`, `iommu_group` → `5`).
pub fn link_name(p: &Path) -> Option<String> {
    fs::read_link(p).ok()?.file_name()?.to_str().map(str::to_string)
}

/// The exact command that lets a non-root user open no-IOMMU groups: a root-owned copy with the
/// capability (a capability on a copy its user can rewrite, such as ~/.cargo/bin/pcibench, is
/// root for whoever rewrites it: the kernel keeps it across a write by the file's owner).
pub fn setcap_hint() -> String {
    let exe = super::install::exe_path();
    format!(
        "no-IOMMU VFIO needs CAP_SYS_RAWIO: run as root, or install a root-owned copy with the capability: {}",
        super::install::install_line(&exe)
    )
}

/// The device's resource files (`resourceN`, `resourceN_wc`) that belong to a user other than
/// root, as "resource0 (uid 1000)": a `--sysfs-user` grant still in place. Whoever holds one can
/// rewrite the card's registers (a DMA engine's addresses) under a driver or a VFIO user.
pub fn foreign_resource_files(host: &Host, addr: &impl Display) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = device_dir(host, addr);
    let mut v: Vec<(String, u32)> = fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let rest = name.strip_prefix("resource")?;
                    let n = rest.strip_suffix("_wc").unwrap_or(rest);
                    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                        return None;
                    }
                    let uid = fs::symlink_metadata(e.path()).ok()?.uid();
                    (uid != 0).then_some((name, uid))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(n, u)| format!("{} (uid {u})", crate::text::one_line(&n))).collect()
}

/// `/sys/bus/pci/devices/ADDR`, for a PCI address as sysfs names it (`0000:15:00.0`).
pub fn device_dir(host: &Host, addr: &impl Display) -> PathBuf {
    host.pci_devices_dir().join(addr.to_string())
}

pub fn driver_of(host: &Host, addr: &str) -> Option<String> {
    link_name(&host.path("/sys/bus/pci/devices").join(addr).join("driver"))
}

pub fn iommu_group_of(host: &Host, addr: &impl Display) -> Option<u32> {
    link_name(&device_dir(host, addr).join("iommu_group"))?.parse().ok()
}

/// Whether IOMMU group `group` is one vfio made for no-IOMMU mode: such a group is named
/// `vfio-noiommu` and its node is /dev/vfio/noiommu-N (drivers/vfio/group.c,
/// vfio_noiommu_group_alloc). Either sign is enough: the name file needs kernel >= 5.x sysfs,
/// the node needs devtmpfs. Doctor and the VFIO path both ask here, so they cannot disagree.
pub fn group_is_noiommu(host: &Host, group: u32) -> bool {
    read_trim(&host.path(format!("/sys/kernel/iommu_groups/{group}/name"))).is_some_and(|n| n == "vfio-noiommu")
        || host.path(format!("/dev/vfio/noiommu-{group}")).exists()
}

/// The addresses in an IOMMU group, sorted.
pub fn group_members(host: &Host, group: u32) -> Vec<String> {
    let dir = host.path(format!("/sys/kernel/iommu_groups/{group}/devices"));
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The group's character device: `/dev/vfio/N`, or `/dev/vfio/noiommu-N` for a no-IOMMU group.
pub fn vfio_node(host: &Host, group: u32, noiommu: bool) -> PathBuf {
    host.path(format!("/dev/vfio/{}{group}", if noiommu { "noiommu-" } else { "" }))
}

/// Names under /sys/class/iommu (dmar0, ivhd0, ...): one per IOMMU the kernel drives.
pub fn iommus(host: &Host) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(host.path("/sys/class/iommu"))
        .map(|rd| rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The kernel's IOMMU setup as it bears on one device's DMA, for saved runs: whether DMA is
/// translated, passed through or physical changes what a figure means.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IommuState {
    /// IOMMUs the kernel drives (/sys/class/iommu).
    pub iommus: Vec<String>,
    /// The IOMMU words of the kernel command line (intel_iommu=, amd_iommu=, iommu=, iommu.*=).
    pub cmdline: Vec<String>,
    pub group: Option<u32>,
    /// The group's default domain type (/sys/kernel/iommu_groups/N/type, drivers/iommu/iommu.c):
    /// DMA (strict invalidation), DMA-FQ (lazy, a flush queue), identity (passthrough), ...
    pub group_type: Option<String>,
    /// A group vfio made for no-IOMMU mode: the device is given physical addresses.
    pub noiommu_group: bool,
}

impl IommuState {
    /// In a few words: "none", "no-IOMMU (physical addresses)", "passthrough (identity)",
    /// "translated, DMA-FQ (lazy invalidation)", ...
    pub fn mode(&self) -> String {
        if self.noiommu_group {
            return "no-IOMMU (vfio unsafe mode: physical addresses)".into();
        }
        match self.group_type.as_deref() {
            Some("identity") => "passthrough (identity domain)".into(),
            Some("DMA") => "translated, DMA (strict invalidation)".into(),
            Some("DMA-FQ") => "translated, DMA-FQ (lazy invalidation)".into(),
            Some(t) => format!("group type {t}"),
            None if self.iommus.is_empty() => "none".into(),
            None => "on (the device is in no IOMMU group)".into(),
        }
    }
}

/// The IOMMU state for a device in `group` (None: in none).
pub fn iommu_state(host: &Host, group: Option<u32>) -> IommuState {
    let line = cmdline(host);
    let keys = ["intel_iommu=", "amd_iommu=", "iommu=", "iommu."];
    IommuState {
        iommus: iommus(host),
        cmdline: line.split_whitespace().filter(|w| keys.iter().any(|k| w.starts_with(k))).map(String::from).collect(),
        group,
        group_type: group.and_then(|g| read_trim(&host.path(format!("/sys/kernel/iommu_groups/{g}/type")))),
        noiommu_group: group.is_some_and(|g| group_is_noiommu(host, g)),
    }
}

/// Modules appear under /sys/module when loaded, and when built in with parameters, as
/// vfio, vfio_pci and vfio_iommu_type1 all have.
pub fn module_loaded(host: &Host, name: &str) -> bool {
    host.path("/sys/module").join(name).is_dir()
}

pub const NOIOMMU_PARAM: &str = "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode";

/// `Some(true)` when vfio's no-IOMMU mode is on; None when the parameter is absent (vfio not
/// loaded, or built without CONFIG_VFIO_NOIOMMU).
pub fn noiommu_enabled(host: &Host) -> Option<bool> {
    read_trim(&host.path(NOIOMMU_PARAM)).map(|v| v == "Y" || v == "1")
}

pub fn cmdline(host: &Host) -> String {
    read_trim(&host.path("/proc/cmdline")).unwrap_or_default()
}

/// The value of `key=` on the kernel command line (the last one wins, as the kernel parses it).
pub fn cmdline_param<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline.split_whitespace().filter_map(|w| w.strip_prefix(key)?.strip_prefix('=')).next_back()
}

/// `uname -r`, through the host so fixtures can name their own kernel.
pub fn kernel_release(host: &Host) -> Option<String> {
    read_trim(&host.path("/proc/sys/kernel/osrelease")).filter(|s| !s.is_empty())
}

/// (major, minor) of the running kernel.
pub fn kernel_version(host: &Host) -> Option<(u32, u32)> {
    let r = kernel_release(host)?;
    let mut it = r.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The kernel's build configuration: where it came from and its text.
pub struct KernelConfig {
    pub source: String,
    pub text: String,
}

impl KernelConfig {
    /// True for `=y` or `=m`; false for `# ... is not set` or an option the config does not mention.
    pub fn enabled(&self, option: &str) -> bool {
        self.text
            .lines()
            .any(|l| l.strip_prefix(option).and_then(|r| r.strip_prefix('=')).is_some_and(|v| v == "y" || v == "m"))
    }
}

/// The most of /etc/passwd read (a directory-backed host may list many users).
pub const PASSWD_MAX: u64 = 16 << 20;

/// The most of a kernel configuration read (a distribution's is ~300 KB).
const CONFIG_MAX: u64 = 16 << 20;

/// /boot/config-$(uname -r), else /proc/config.gz (CONFIG_IKCONFIG_PROC), else None. Both are
/// bounded, the decompressed text too.
pub fn kernel_config(host: &Host) -> Option<KernelConfig> {
    if let Some(rel) = kernel_release(host) {
        let p = host.path(format!("/boot/config-{rel}"));
        if let Ok(text) = crate::file::read_string(&p, CONFIG_MAX) {
            return Some(KernelConfig { source: format!("/boot/config-{rel}"), text });
        }
    }
    let gz = crate::file::open_regular(&host.path("/proc/config.gz")).ok()?;
    let mut text = String::new();
    let n = flate2::read::GzDecoder::new(gz).take(CONFIG_MAX + 1).read_to_string(&mut text).ok()?;
    (n as u64 <= CONFIG_MAX).then_some(KernelConfig { source: "/proc/config.gz".into(), text })
}

/// Kernel lockdown mode from the bracketed word of /sys/kernel/security/lockdown
/// (`none [integrity] confidentiality`), `none` included; None when the file is absent (no
/// lockdown LSM) or unreadable.
pub fn lockdown(host: &Host) -> Option<String> {
    parse_lockdown(&read_trim(&host.path("/sys/kernel/security/lockdown"))?)
}

pub fn parse_lockdown(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

/// The lockdown mode when one is in force (anything but `none`): it forbids user-space BAR
/// access even for root (security/lockdown/lockdown.c, LOCKDOWN_PCI_ACCESS).
pub fn lockdown_active(host: &Host) -> Option<String> {
    lockdown(host).filter(|m| m != "none")
}

/// `/proc/meminfo` value in kB (or a plain count for HugePages_*).
pub fn meminfo(host: &Host, key: &str) -> Option<u64> {
    let text = crate::file::read_string(&host.path("/proc/meminfo"), crate::file::read::KERNEL_MAX).ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(key))?;
    line.split(':').nth(1)?.split_whitespace().next()?.parse().ok()
}

/// Whether `class` (the 24-bit class code) is a bridge: vfio-pci only takes normal (type 0)
/// headers (drivers/vfio/pci/vfio_pci_core.c, vfio_pci_core_register_device).
pub fn class_is_bridge(class: u32) -> bool {
    matches!(class >> 8, 0x0604 | 0x0607 | 0x0609)
}

pub fn class_of(host: &Host, addr: &str) -> Option<u32> {
    let s = read_trim(&host.path("/sys/bus/pci/devices").join(addr).join("class"))?;
    u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// Find an /etc/passwd entry: `name:x:uid:gid:...` → (name, uid, gid).
pub fn passwd_lookup(text: &str, want: impl Fn(&str, u32, u32) -> bool) -> Option<(String, u32, u32)> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        let (name, uid, gid) = (f.first()?, f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?);
        want(name, uid, gid).then(|| (name.to_string(), uid, gid))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_params_last_wins() {
        let c = "BOOT_IMAGE=/vmlinuz ro iomem=strict quiet intel_iommu=on iomem=relaxed";
        assert_eq!(cmdline_param(c, "iomem"), Some("relaxed"));
        assert_eq!(cmdline_param(c, "intel_iommu"), Some("on"));
        assert_eq!(cmdline_param(c, "amd_iommu"), None);
        assert_eq!(cmdline_param("iommu=pt", "iommu"), Some("pt"));
        assert_eq!(cmdline_param("amd_iommu=on", "iommu"), None);
    }

    #[test]
    fn config_options() {
        let k = KernelConfig {
            source: "x".into(),
            text: "CONFIG_STRICT_DEVMEM=y\n# CONFIG_IO_STRICT_DEVMEM is not set\nCONFIG_VFIO=m\n".into(),
        };
        assert!(k.enabled("CONFIG_STRICT_DEVMEM"));
        assert!(k.enabled("CONFIG_VFIO"));
        assert!(!k.enabled("CONFIG_IO_STRICT_DEVMEM"));
        assert!(!k.enabled("CONFIG_STRICT"));
    }

    #[test]
    fn iommu_state_reads_group_type_and_cmdline() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        fs::create_dir_all(h.path("/sys/kernel/iommu_groups/3")).unwrap();
        fs::create_dir_all(h.path("/sys/class/iommu/dmar0")).unwrap();
        fs::create_dir_all(h.path("/proc")).unwrap();
        fs::write(h.path("/sys/kernel/iommu_groups/3/type"), "DMA-FQ\n").unwrap();
        fs::write(h.path("/proc/cmdline"), "ro quiet intel_iommu=on iommu.strict=0 iommus=x\n").unwrap();
        let s = iommu_state(&h, Some(3));
        assert_eq!(s.iommus, ["dmar0"]);
        assert_eq!(s.cmdline, ["intel_iommu=on", "iommu.strict=0"]);
        assert_eq!(s.group_type.as_deref(), Some("DMA-FQ"));
        assert_eq!(s.mode(), "translated, DMA-FQ (lazy invalidation)");
        let none = iommu_state(&Host::with_root(t.path().join("absent")), None);
        assert_eq!(none.mode(), "none");
    }
}
