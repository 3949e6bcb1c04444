//! Checks for the sysfs path: the resourceN files and what can stop their mmap even for root
//! (drivers/pci/pci-sysfs.c, pci_mmap_resource: kernel lockdown first, then iomem_is_exclusive).

use super::{Ctx, Finding, Severity};
use crate::access::Via;
use crate::host::state::{cmdline_param, kernel_config, kernel_release, lockdown};
use std::fs;
use std::os::unix::fs::MetadataExt;

pub(super) fn checks(c: &Ctx) -> Vec<Finding> {
    vec![resource_files(c), lockdown_check(c), strict_devmem(c)]
}

fn resource_files(c: &Ctx) -> Finding {
    let bars: Vec<_> = c.info.bars.iter().filter(|b| b.is_memory()).collect();
    if bars.is_empty() {
        return Finding::new("resource-files", Severity::Info, "no memory BARs");
    }
    let dir = crate::host::state::device_dir(c.host, &c.addr);
    let (mut ok, mut denied, mut missing, mut no_wc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in &bars {
        let mut names = vec![format!("resource{}", b.index)];
        if b.prefetchable {
            // resourceN_wc exists only for prefetchable BARs where the arch can map WC
            // (pci_create_attr, arch_can_pci_mmap_wc).
            let wc = format!("resource{}_wc", b.index);
            if dir.join(&wc).exists() {
                names.push(wc);
            } else {
                no_wc.push(b.index);
            }
        }
        for (k, name) in names.into_iter().enumerate() {
            let p = dir.join(&name);
            match fs::metadata(&p) {
                Err(_) if k == 0 => missing.push(name),
                Err(_) => no_wc.push(b.index),
                Ok(m) => {
                    let desc = format!("{name} (owner {}:{}, mode {:04o})", m.uid(), m.gid(), m.mode() & 0o7777);
                    if !c.caller.can_read_write(&m) {
                        denied.push((name, desc));
                    } else if c.caller.live && c.host.is_real() {
                        // Modes are not the whole story (LSMs): open it as mmap would need it.
                        match crate::file::open_regular_with(&p, rustix::fs::OFlags::RDWR) {
                            Ok(_) => ok.push(name),
                            Err(e) => denied.push((name, format!("{desc}: {e}"))),
                        }
                    } else {
                        ok.push(name);
                    }
                }
            }
        }
    }
    let wc_note = if no_wc.is_empty() {
        String::new()
    } else {
        let l: Vec<String> = no_wc.iter().map(|i| format!("BAR{i}")).collect();
        format!("; no write-combining file for prefetchable {} (this kernel cannot map it WC)", l.join(", "))
    };
    let sysdir = c.sysfs_dir();
    if !missing.is_empty() {
        return Finding::new(
            "resource-files",
            Severity::Warn,
            format!("{} missing in {sysdir}{wc_note}", missing.join(", ")),
        )
        .fix(format!("the kernel did not create them: is the BAR assigned an address? (dmesg | grep {})", c.addr))
        .blocks(Via::Sysfs, None);
    }
    if !denied.is_empty() {
        let paths: Vec<String> = denied.iter().map(|(n, _)| format!("{sysdir}/{n}")).collect();
        let descs: Vec<&str> = denied.iter().map(|(_, d)| d.as_str()).collect();
        return Finding::new(
            "resource-files",
            Severity::Info,
            format!("{} cannot open for read+write: {}{wc_note}", c.caller.user, descs.join(", ")),
        )
        .fix(format!("{} (or: sudo chown {} {})", c.setup_sysfs(), c.caller.user, paths.join(" ")))
        .blocks(Via::Sysfs, Some(c.setup_sysfs()))
        .takes();
    }
    Finding::new(
        "resource-files",
        Severity::Pass,
        format!("{}: read+write for {}{wc_note}", ok.join(", "), c.caller.user),
    )
}

fn lockdown_check(c: &Ctx) -> Finding {
    let param = cmdline_param(&c.cmdline, "lockdown");
    match lockdown(c.host).as_deref() {
        // Without securityfs mounted the file is missing whatever the mode: say so.
        None if !securityfs_mounted(c) => Finding::new(
            "lockdown",
            Severity::Info,
            format!(
                "cannot tell: securityfs is not mounted ({}); mount it: sudo mount -t securityfs securityfs \
                 /sys/kernel/security",
                param
                    .map(|p| format!("lockdown={p} on the command line"))
                    .unwrap_or("no lockdown= on the command line".into())
            ),
        ),
        None => Finding::new("lockdown", Severity::Pass, "no lockdown (/sys/kernel/security/lockdown absent)"),
        Some("none") => Finding::new("lockdown", Severity::Pass, "none"),
        Some(mode) => Finding::new(
            "lockdown",
            Severity::Warn,
            format!(
                "{mode}: the kernel refuses mmap of sysfs BARs and config-space writes even for root \
                 (LOCKDOWN_PCI_ACCESS in drivers/pci/pci-sysfs.c)"
            ),
        )
        .fix(format!(
            "use VFIO, which lockdown allows: {}; lifting lockdown means turning Secure Boot off in the firmware",
            c.setup_vfio()
        ))
        .blocks(Via::Sysfs, None)
        .takes(),
    }
}

/// securityfs lists at least one entry (lsm) once mounted.
fn securityfs_mounted(c: &Ctx) -> bool {
    fs::read_dir(c.host.path("/sys/kernel/security")).is_ok_and(|mut d| d.next().is_some())
}

/// kernel/resource.c: a BAR a driver has claimed (IORESOURCE_BUSY) is exclusive when
/// strict_iomem_checks (CONFIG_STRICT_DEVMEM, or iomem=strict; iomem=relaxed clears it) and
/// CONFIG_IO_STRICT_DEVMEM (or the driver claimed it exclusively) hold; mmap then fails EINVAL.
fn strict_devmem(c: &Ctx) -> Finding {
    let iomem = cmdline_param(&c.cmdline, "iomem");
    let iomem_desc = match iomem {
        Some(v) => format!("iomem={v} on the command line"),
        None => "no iomem= on the command line".into(),
    };
    let cfg = kernel_config(c.host);
    let (desc, strict) = match &cfg {
        Some(k) => {
            // strict_iomem(): "relaxed" clears the checks, then "strict" sets them.
            let mut checks = k.enabled("CONFIG_STRICT_DEVMEM");
            if iomem.is_some_and(|v| v.contains("relaxed")) {
                checks = false;
            }
            if iomem.is_some_and(|v| v.contains("strict")) {
                checks = true;
            }
            let io = k.enabled("CONFIG_IO_STRICT_DEVMEM");
            let opt = if io { "CONFIG_IO_STRICT_DEVMEM=y" } else { "CONFIG_IO_STRICT_DEVMEM not set" };
            (format!("{opt} ({}), {iomem_desc}", k.source), Some(checks && io))
        }
        None if iomem.is_some_and(|v| v.contains("relaxed")) => (iomem_desc, Some(false)),
        None => {
            let rel = kernel_release(c.host).unwrap_or_else(|| "$(uname -r)".into());
            (format!("cannot tell: no /boot/config-{rel} and no /proc/config.gz; {iomem_desc}"), None)
        }
    };
    match c.driver.as_deref() {
        None => Finding::new(
            "strict-devmem",
            Severity::Pass,
            format!("{desc}; no driver has claimed the BARs, so it does not apply"),
        ),
        Some("vfio-pci") => Finding::new(
            "strict-devmem",
            Severity::Info,
            format!("{desc}; vfio-pci claims the BARs only while the device is open"),
        ),
        Some(d) => match strict {
            Some(true) => Finding::new(
                "strict-devmem",
                Severity::Info,
                format!("{desc}: the BARs {d} has claimed cannot be mapped through sysfs (mmap fails EINVAL)"),
            )
            .fix(format!("unbind {d} (see driver), or boot with iomem=relaxed"))
            .blocks(Via::Sysfs, Some(format!("echo {} | sudo tee /sys/bus/pci/drivers/{d}/unbind", c.addr)))
            .takes(),
            Some(false) => Finding::new(
                "strict-devmem",
                Severity::Pass,
                format!("{desc}: BARs claimed by {d} can still be mapped"),
            ),
            None => Finding::new("strict-devmem", Severity::Info, format!("{desc}; {d} has claimed the BARs")),
        },
    }
}
