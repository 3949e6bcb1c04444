//! Checks for the VFIO paths: the IOMMU, the device's IOMMU group, the vfio modules and
//! no-IOMMU mode, the /dev/vfio nodes, and CAP_SYS_RAWIO for no-IOMMU groups.

use super::caller::CAP_SYS_RAWIO;
use super::{Ctx, Finding, InUse, Severity};
use crate::access::Via;
use crate::host::state::{
    class_is_bridge, class_of, cmdline_param, driver_of, group_members, kernel_version, module_loaded, noiommu_enabled,
    vfio_node, NOIOMMU_PARAM,
};
use std::fs;

pub(super) fn checks(c: &Ctx) -> Vec<Finding> {
    vec![iommu(c), iommu_group(c), modules(c), noiommu_mode(c), nodes(c), cap_sys_rawio(c)]
}

fn iommu(c: &Ctx) -> Finding {
    let params: Vec<String> = ["intel_iommu", "amd_iommu", "iommu"]
        .iter()
        .filter_map(|k| cmdline_param(&c.cmdline, k).map(|v| format!("{k}={v}")))
        .collect();
    let params = if params.is_empty() { "no IOMMU options on the command line".to_string() } else { params.join(" ") };
    if c.vfio == Via::Vfio {
        let what = if c.iommus.is_empty() {
            format!("the device is in IOMMU group {}", c.group.unwrap_or(0))
        } else {
            c.iommus.join(" ")
        };
        return Finding::new("iommu", Severity::Pass, format!("{what} ({params})"));
    }
    let off = params.contains("=off");
    let mut ev = format!("no IOMMU in /sys/class/iommu ({params})");
    if off {
        ev.push_str(": the command line turns it off");
    }
    ev.push_str("; VFIO type1 is unavailable, no-IOMMU mode works without DMA protection");
    Finding::new("iommu", Severity::Info, ev)
        .fix("enable VT-d (Intel) or AMD-Vi in the firmware and boot with intel_iommu=on (Intel) or amd_iommu=on (AMD)")
        .blocks(Via::Vfio, None)
}

/// Group viability, as VFIO decides it: since Linux 5.19 every member must be driver-less or
/// bound to a driver that manages its own DMA (`driver_managed_dma`: vfio-pci and its variants,
/// pci-stub, pcieport), else iommu_group_dma_owner_claimed fails (drivers/iommu/iommu.c). Before
/// 5.19 vfio_dev_viable also accepted any driver on a bridge (non-type-0 header).
fn member_ok(c: &Ctx, member: &str, driver: Option<&str>) -> bool {
    match driver {
        None => true,
        Some(d) if d.contains("vfio") || d == "pci-stub" || d == "pcieport" => true,
        Some(_) => {
            let old = kernel_version(c.host).is_some_and(|v| v < (5, 19));
            old && class_of(c.host, member).is_some_and(class_is_bridge)
        }
    }
}

fn iommu_group(c: &Ctx) -> Finding {
    let Some(g) = c.group else {
        if c.vfio == Via::Vfio {
            return Finding::new(
                "iommu-group",
                Severity::Warn,
                format!("not in an IOMMU group although the host has an IOMMU ({})", c.iommus.join(" ")),
            )
            .fix(format!("look for DMAR or AMD-Vi messages about it: dmesg | grep -i -e iommu -e dmar -e {}", c.addr))
            .blocks(Via::Vfio, None);
        }
        return Finding::new(
            "iommu-group",
            Severity::Info,
            "none: with no IOMMU, vfio-pci creates a no-IOMMU group when it binds (enable_unsafe_noiommu_mode=1)",
        );
    };
    if c.noiommu_group {
        return Finding::new(
            "iommu-group",
            Severity::Pass,
            format!("no-IOMMU group {g} (created by vfio-pci; no isolation between devices)"),
        );
    }
    let me = c.addr.to_string();
    let mut listed = Vec::new();
    let mut offenders = Vec::new();
    for m in group_members(c.host, g) {
        let d = driver_of(c.host, &m);
        listed.push(format!("{m} ({})", d.as_deref().unwrap_or("no driver")));
        // The device's own driver is the driver check's business.
        if m != me && !member_ok(c, &m, d.as_deref()) {
            offenders.push((m, d.unwrap_or_default()));
        }
    }
    if offenders.is_empty() {
        return Finding::new("iommu-group", Severity::Pass, format!("group {g} is viable: {}", listed.join(", ")));
    }
    let names: Vec<String> = offenders.iter().map(|(m, d)| format!("{m} (bound to {d})")).collect();
    let evidence = format!(
        "group {g} is not viable: {} share it; VFIO needs every member bound to vfio-pci, pci-stub, \
         pcieport or no driver",
        names.join(", ")
    );
    // A member the running system uses, or whose in-use check was incomplete, is never offered to
    // vfio-pci (issue 54).
    let mut used: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for (m, _) in &offenders {
        match InUse::of(c.host, m) {
            InUse::Free => {}
            InUse::Unverified(inv) => unknown.push(format!("{m}: {}", inv.unchecked.words())),
            InUse::Used(inv) => used.push(format!("{m}: {}", inv.summary())),
            InUse::Unknown(e) => used.push(format!("{m}: cannot tell what uses it ({e})")),
        }
    }
    if !used.is_empty() || !unknown.is_empty() {
        let mut ev = evidence;
        if !used.is_empty() {
            ev.push_str(&format!("; the running system uses some of them ({})", used.join("; ")));
        }
        if !unknown.is_empty() {
            ev.push_str(&format!("; the in-use check of some of them was incomplete ({})", unknown.join("; ")));
        }
        return Finding::new("iommu-group", Severity::Info, ev)
        .fix(
            "VFIO cannot have this device without them: move the card to a slot with its own IOMMU group, or use sysfs",
        )
        .blocks(Via::Vfio, None);
    }
    let cmd: Vec<String> = offenders.iter().map(|(m, _)| format!("sudo pcibench setup {m} --vfio")).collect();
    Finding::new("iommu-group", Severity::Info, evidence)
        .fix(format!("move them to vfio-pci too: {}", cmd.join(" && ")))
        .blocks(Via::Vfio, Some(cmd.join(" && ")))
        .takes()
}

fn modules(c: &Ctx) -> Finding {
    let mut want = vec!["vfio", "vfio_pci"];
    if c.vfio == Via::Vfio {
        want.push("vfio_iommu_type1");
    }
    let vfio_pci_driver = c.host.path("/sys/bus/pci/drivers/vfio-pci").is_dir();
    let missing: Vec<&str> =
        want.iter().copied().filter(|m| !(module_loaded(c.host, m) || (*m == "vfio_pci" && vfio_pci_driver))).collect();
    if missing.is_empty() {
        return Finding::new("vfio-modules", Severity::Pass, format!("{} loaded", want.join(", ")));
    }
    let by_hand = if c.vfio == Via::VfioNoiommu && missing.contains(&"vfio") {
        "sudo modprobe vfio enable_unsafe_noiommu_mode=1 && sudo modprobe vfio-pci"
    } else if missing.contains(&"vfio_iommu_type1") && missing.len() == 1 {
        "sudo modprobe vfio_iommu_type1"
    } else {
        "sudo modprobe vfio-pci"
    };
    Finding::new("vfio-modules", Severity::Info, format!("not loaded: {}", missing.join(", ")))
        .fix(format!("{} loads them (by hand: {by_hand})", c.setup_vfio()))
        .blocks(c.vfio, Some(c.setup_vfio()))
        .takes()
}

fn noiommu_mode(c: &Ctx) -> Finding {
    let param = noiommu_enabled(c.host);
    if c.vfio == Via::Vfio {
        return match param {
            Some(true) => Finding::new(
                "noiommu-mode",
                Severity::Info,
                "enabled, unused for this device: it has an IOMMU group, so VFIO uses type1",
            ),
            _ => Finding::new("noiommu-mode", Severity::Pass, "off (not needed: the host has an IOMMU)"),
        };
    }
    let warn = "it taints the kernel and gives the card unchecked DMA to all of memory";
    match param {
        Some(true) => Finding::new(
            "noiommu-mode",
            Severity::Pass,
            format!("enabled ({NOIOMMU_PARAM} = Y): VFIO works without an IOMMU; {warn}"),
        ),
        Some(false) => {
            Finding::new("noiommu-mode", Severity::Info, format!("off ({NOIOMMU_PARAM} = N), and there is no IOMMU"))
                .fix(format!("{} enables it (by hand: echo 1 | sudo tee {NOIOMMU_PARAM}); {warn}", c.setup_vfio()))
                .blocks(Via::VfioNoiommu, Some(c.setup_vfio()))
                .takes()
        }
        None if module_loaded(c.host, "vfio") => Finding::new(
            "noiommu-mode",
            Severity::Info,
            format!("vfio is loaded without {NOIOMMU_PARAM}: this kernel was built without CONFIG_VFIO_NOIOMMU"),
        )
        .fix("use a kernel built with CONFIG_VFIO_NOIOMMU=y, or a machine with an IOMMU")
        .blocks(Via::VfioNoiommu, None),
        None => Finding::new("noiommu-mode", Severity::Info, "vfio is not loaded, and there is no IOMMU")
            .fix(format!("{} loads it with enable_unsafe_noiommu_mode=1; {warn}", c.setup_vfio()))
            .blocks(Via::VfioNoiommu, Some(c.setup_vfio()))
            .takes(),
    }
}

/// A node's state for this caller: Ok(()) when it can open it read+write, else the problem and
/// the command that fixes it (None when no command can).
fn node_access(c: &Ctx, path: &std::path::Path, shown: &str, fix: String) -> Result<(), (String, Option<String>)> {
    use std::os::unix::fs::MetadataExt;
    match fs::metadata(path) {
        Ok(m) if c.caller.can_read_write(&m) => Ok(()),
        Ok(m) => Err((
            format!(
                "{} cannot open {shown} for read+write (owner {}:{}, mode {:04o})",
                c.caller.user,
                m.uid(),
                m.gid(),
                m.mode() & 0o7777
            ),
            Some(fix),
        )),
        Err(_) => Err((format!("{shown} is missing"), None)),
    }
}

fn nodes(c: &Ctx) -> Finding {
    let container = c.host.path("/dev/vfio/vfio");
    let container_state = node_access(c, &container, "/dev/vfio/vfio", "sudo chmod 0666 /dev/vfio/vfio".into());
    if !c.bound_to_vfio() {
        let later = "the group node appears when the device is bound to vfio-pci";
        return match container_state {
            Err((what, Some(cmd))) => {
                Finding::new("vfio-nodes", Severity::Info, what).fix(cmd.clone()).blocks(c.vfio, Some(cmd))
            }
            Err(_) => {
                Finding::new("vfio-nodes", Severity::Info, format!("no /dev/vfio/vfio (vfio is not loaded); {later}"))
            }
            Ok(()) => Finding::new("vfio-nodes", Severity::Info, format!("/dev/vfio/vfio usable; {later}")),
        };
    }
    let Some(g) = c.group else {
        return Finding::new("vfio-nodes", Severity::Warn, "bound to vfio-pci but the device has no iommu_group link")
            .fix(format!("rebind it: sudo pcibench setup {} --release && {}", c.addr, c.setup_vfio()))
            .blocks(c.vfio, None)
            .takes();
    };
    let shown = format!("/dev/vfio/{}{g}", if c.noiommu_group { "noiommu-" } else { "" });
    let node = vfio_node(c.host, g, c.noiommu_group);
    let node_state = node_access(c, &node, &shown, format!("sudo chown {} {shown}", c.caller.user));
    let holders = crate::host::inuse::vfio_group_users(c.host, &c.addr.to_string()).map(|u| u.who).unwrap_or_default();
    let mut problems: Vec<(String, Option<String>)> =
        [container_state.err(), node_state.err()].into_iter().flatten().collect();
    if !holders.is_empty() {
        problems.push((format!("{shown} is held open by {} (VFIO allows one opener)", holders.join(", ")), None));
    }
    if problems.is_empty() {
        return Finding::new(
            "vfio-nodes",
            Severity::Pass,
            format!("/dev/vfio/vfio and {shown}: read+write for {}", c.caller.user),
        );
    }
    let what: Vec<&str> = problems.iter().map(|p| p.0.as_str()).collect();
    let cmds: Vec<String> = problems.iter().filter_map(|p| p.1.clone()).collect();
    let hard = problems.iter().any(|p| p.1.is_none());
    let fix = if !holders.is_empty() {
        "wait for that process to finish, or stop it".to_string()
    } else if hard {
        "is devtmpfs mounted on /dev? ls -l /dev/vfio; dmesg | grep -i vfio".to_string()
    } else {
        format!("{} (or: sudo pcibench setup {} --vfio --user {})", cmds.join(" && "), c.addr, c.caller.user)
    };
    let cmd = (!hard).then(|| cmds.join(" && "));
    Finding::new("vfio-nodes", Severity::Info, what.join("; ")).fix(fix).blocks(c.vfio, cmd)
}

fn cap_sys_rawio(c: &Ctx) -> Finding {
    let caps = format!("CapEff {:016x}", c.caller.cap_eff);
    let has = c.caller.has_cap(CAP_SYS_RAWIO);
    if c.vfio == Via::Vfio {
        let state = if has { "present" } else { "absent" };
        return Finding::new(
            "cap-sys-rawio",
            Severity::Info,
            format!("{state} ({caps}); only no-IOMMU groups need it"),
        );
    }
    let unsafe_install = writable_install(&c.caller.exe);
    if has {
        if let (Some(why), true) = (&unsafe_install, c.caller.uid != 0) {
            // CAP_SYS_RAWIO on a file its user can rewrite: the user runs any code with it.
            return Finding::new(
                "cap-sys-rawio",
                Severity::Warn,
                format!(
                    "present ({caps}), but {why}: whoever can write there can replace this capability-carrying \
                     program, and CAP_SYS_RAWIO is root-equivalent"
                ),
            )
            .fix(format!(
                "{}; then remove the capability here: sudo setcap -r {}",
                install_line(&c.caller.exe),
                c.caller.exe.display()
            ));
        }
        return Finding::new("cap-sys-rawio", Severity::Pass, format!("present ({caps})"));
    }
    let (setcap, where_) = match &unsafe_install {
        None => (format!("sudo setcap cap_sys_rawio=ep {}", c.caller.exe.display()), String::new()),
        Some(why) => (
            install_line(&c.caller.exe),
            format!("; {why}, so a capability set on it could be rewritten: install it root-owned first"),
        ),
    };
    Finding::new(
        "cap-sys-rawio",
        Severity::Info,
        format!(
            "absent ({caps}): opening a no-IOMMU group needs CAP_SYS_RAWIO, else EPERM \
             (drivers/vfio/vfio_main.c, vfio_group_fops_open){where_}"
        ),
    )
    .fix(format!("{setcap} (or run pcibench with sudo; a user given CAP_SYS_RAWIO is root-equivalent)"))
    .blocks(Via::VfioNoiommu, Some(setcap))
}

/// Install to a root-owned place, then give that copy the capability.
fn install_line(exe: &std::path::Path) -> String {
    crate::os::privilege::install_line(exe)
}

/// Why the executable at `exe` could be rewritten by someone other than root: it or a directory
/// above it owned by another user, or writable by group or others (a sticky root-owned
/// directory such as /tmp excepted: only a file's owner may replace it there). None when it is
/// safe, or cannot be told (a path that does not exist, as in tests).
pub(super) fn writable_install(exe: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let exe = fs::canonicalize(exe).ok()?;
    let mut p = Some(exe.as_path());
    while let Some(cur) = p {
        let m = fs::metadata(cur).ok()?;
        let what = if cur == exe { "the program".to_string() } else { "its directory".to_string() };
        if m.uid() != 0 {
            return Some(format!("{what} {} is owned by uid {}", cur.display(), m.uid()));
        }
        let sticky = m.is_dir() && m.mode() & 0o1000 != 0;
        if m.mode() & 0o022 != 0 && !sticky {
            return Some(format!("{what} {} is writable by others (mode {:04o})", cur.display(), m.mode() & 0o7777));
        }
        p = cur.parent();
    }
    None
}

#[cfg(test)]
mod install_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_program_others_can_rewrite_is_named() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("pcibench");
        fs::write(&exe, "").unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let why = writable_install(&exe).unwrap();
        if rustix::process::geteuid().is_root() {
            assert!(why.contains("is writable by others (mode 0777)") && why.starts_with("its directory"), "{why}");
        } else {
            assert!(why.starts_with("the program") && why.contains("is owned by uid"), "{why}");
        }
        assert_eq!(writable_install(std::path::Path::new("/nonexistent/pcibench")), None);
        assert!(install_line(&exe).ends_with("&& sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench"));
    }
}
