//! Binding a device to vfio-pci, and giving it back (Documentation/driver-api/vfio.rst; the
//! driver_override route of Documentation/ABI/testing/sysfs-bus-pci, which works for any
//! vendor/device id without touching vfio-pci's id table).

use super::record::{self, Record};
use super::{write_attr, Change, SetupOptions, User, NOIOMMU_WARNING};
use crate::host::state::{
    class_is_bridge, class_of, device_dir, driver_of, group_is_noiommu, iommu_group_of, iommus, module_loaded,
    noiommu_enabled, read_trim, vfio_node, NOIOMMU_PARAM,
};
use crate::host::Host;
use crate::pci::PciAddress;
use crate::{Error, Result};
use std::path::PathBuf;

fn check_device(host: &Host, addr: &PciAddress) -> Result<PathBuf> {
    let dir = device_dir(host, addr);
    if !dir.is_dir() {
        return Err(Error::NoDevice(addr.to_string()));
    }
    Ok(dir)
}

/// driver_override reads `(null)` when unset.
fn override_of(dir: &std::path::Path) -> Option<String> {
    read_trim(&dir.join("driver_override")).filter(|s| !s.is_empty() && s != "(null)")
}

/// Bind `addr` to vfio-pci (see the module docs of `setup` for the steps).
pub fn vfio(host: &Host, addr: &PciAddress, opts: &SetupOptions) -> Result<Vec<Change>> {
    vfio_with(host, addr, opts, true)
}

/// `vfio` for a function whose IOMMU group `by_id` has checked already, every member at once.
pub(super) fn vfio_checked(host: &Host, addr: &PciAddress, opts: &SetupOptions) -> Result<Vec<Change>> {
    vfio_with(host, addr, opts, false)
}

fn vfio_with(host: &Host, addr: &PciAddress, opts: &SetupOptions, check_use: bool) -> Result<Vec<Change>> {
    super::refuse_elevated()?;
    let dir = check_device(host, addr)?;
    let a = addr.to_string();
    refuse_bridge(host, addr)?;
    let driver = driver_of(host, &a);
    let mut ch = Vec::new();
    // Bound already, it may be another process's (a VM, another pcibench holding its group).
    let action = match driver.as_deref() {
        Some("vfio-pci") => format!("set up {a} for VFIO"),
        Some(d) => format!("unbind {a} from {d}"),
        None => format!("bind {a} to vfio-pci"),
    };
    if check_use {
        ch.extend(super::guard(host, addr, &action, opts)?);
    }
    let group = iommu_group_of(host, addr);
    let has_iommu = match group {
        Some(g) => !group_is_noiommu(host, g),
        None => !iommus(host).is_empty(),
    };
    revoke_sysfs_grant(host, addr, &dir, opts, &mut ch)?;
    load_modules(host, opts, &a, has_iommu, &mut ch)?;
    bind(host, addr, &dir, driver.as_deref(), has_iommu, opts, &mut ch)?;
    give_node(host, addr, opts, &mut ch)?;
    Ok(ch)
}

/// A `--sysfs-user` grant ends where VFIO begins: the resource files go back to their recorded
/// owners and Memory Space as it was, before anything binds. Otherwise the first user keeps
/// `resource0` while the next one's run enables Bus Master, and can then rewrite the engine's
/// address registers through the mapping (no-IOMMU: DMA anywhere; type1: into the other's buffers).
fn revoke_sysfs_grant(
    host: &Host,
    addr: &PciAddress,
    dir: &std::path::Path,
    opts: &SetupOptions,
    ch: &mut Vec<Change>,
) -> Result<()> {
    let mut rec = record::load(host, addr)?;
    let granted = rec.owners.iter().any(|o| !o.path.starts_with("/dev/vfio/"));
    if !granted && rec.command.is_none() {
        return Ok(());
    }
    let mut taken = Vec::new();
    super::restore_owners(host, opts, &mut rec, |p| !p.starts_with("/dev/vfio/"), &mut taken)?;
    if let Some(before) = rec.command.take() {
        taken.extend(super::sysfs::restore_memory(&dir.join("config"), before, opts)?);
    }
    record::save(host, addr, &rec)?;
    for c in taken {
        ch.push(Change::new(format!("took back the --sysfs-user grant first: {}", c.what)));
    }
    Ok(())
}

/// vfio-pci takes endpoints only: a bridge is refused with the endpoints below it.
fn refuse_bridge(host: &Host, addr: &PciAddress) -> Result<()> {
    let a = addr.to_string();
    if !class_of(host, &a).is_some_and(class_is_bridge) {
        return Ok(());
    }
    let below: Vec<String> = crate::pci::sysfs::endpoints_below(host, addr).iter().map(|e| e.to_string()).collect();
    let instead = match below.first() {
        Some(e) => format!("use the endpoint(s) below it: {} (pcibench doctor {e})", below.join(", ")),
        None => "nothing is below it: pcibench list shows the devices present".to_string(),
    };
    Err(Error::Refused(format!(
        "{a} is a PCI bridge, not a target: vfio-pci takes only endpoints (type 0 headers); {instead}"
    )))
}

/// Remember the driver, unbind it, set driver_override and probe, waiting for vfio-pci to bind.
fn bind(
    host: &Host,
    addr: &PciAddress,
    dir: &std::path::Path,
    driver: Option<&str>,
    has_iommu: bool,
    opts: &SetupOptions,
    ch: &mut Vec<Change>,
) -> Result<()> {
    let a = addr.to_string();
    if driver != Some("vfio-pci") {
        let mut rec = record::load(host, addr)?;
        if rec.driver.is_none() {
            rec.driver = Some(driver.map(str::to_string));
            let p = record::save(host, addr, &rec)?;
            ch.push(Change::new(format!(
                "remembered its driver ({}) in {} for --release",
                driver.unwrap_or("none"),
                p.display()
            )));
        }
        if let Some(d) = driver {
            write_attr(opts, &host.path(format!("/sys/bus/pci/drivers/{d}/unbind")), &a)?;
            ch.push(Change::new(format!("unbound it from {d}")));
        }
    }
    if override_of(dir).as_deref() != Some("vfio-pci") {
        write_attr(opts, &dir.join("driver_override"), "vfio-pci")?;
        ch.push(Change::new("set driver_override to vfio-pci"));
    }
    if driver_of(host, &a).as_deref() == Some("vfio-pci") {
        return Ok(());
    }
    write_attr(opts, &host.path("/sys/bus/pci/drivers_probe"), &a)?;
    if !opts.wait_for(|| driver_of(host, &a).as_deref() == Some("vfio-pci")) {
        let now = driver_of(host, &a).unwrap_or_else(|| "none".into());
        let hint = if has_iommu {
            "see dmesg | tail"
        } else {
            "with no IOMMU, vfio-pci binds only in no-IOMMU mode; see dmesg | tail"
        };
        let back = match driver {
            Some(d) if d != "vfio-pci" => format!("; give it back to {d}: sudo pcibench setup {a} --release"),
            _ => String::new(),
        };
        return Err(Error::Device(format!(
            "{a} did not bind to vfio-pci within {:.0?} (driver now: {now}): {hint}{back}",
            opts.timeout
        )));
    }
    ch.push(Change::new("bound it to vfio-pci (drivers_probe)"));
    Ok(())
}

/// Wait for the group's /dev/vfio node and give it to the user named with `--user`, saying what
/// that user can then do; without one the node stays root's, and the output says how to give it.
fn give_node(host: &Host, addr: &PciAddress, opts: &SetupOptions, ch: &mut Vec<Change>) -> Result<()> {
    // The group link (and for no-IOMMU the group itself) exists once vfio-pci has bound.
    let mut node = None;
    opts.wait_for(|| {
        node = iommu_group_of(host, addr).map(|g| (g, vfio_node(host, g, group_is_noiommu(host, g))));
        node.as_ref().is_some_and(|(_, p)| p.exists())
    });
    let Some((g, node)) = node.filter(|(_, p)| p.exists()) else {
        return Err(Error::Device(format!(
            "{addr} is bound to vfio-pci but its /dev/vfio group node did not appear within {:.0?}: \
             is devtmpfs mounted on /dev? (ls -l /dev/vfio)",
            opts.timeout
        )));
    };
    let noiommu = group_is_noiommu(host, g);
    let shown = format!("/dev/vfio/{}{g}", if noiommu { "noiommu-" } else { "" });
    // Said on every run, not only the one that turned the mode on.
    if noiommu && !ch.iter().any(|c| c.warning.as_deref() == Some(NOIOMMU_WARNING)) {
        ch.push(Change::note(format!("{shown} is a no-IOMMU group"), Some(NOIOMMU_WARNING.to_string())));
    }
    let Some(u) = &opts.user else {
        let (uid, _, _) = opts.system.owner(&node).map_err(|e| Error::io("cannot read the owner of", &node, e))?;
        ch.push(Change::note(
            if uid == 0 {
                format!(
                    "nobody was given {shown}: it stays root's; to let a user open it: sudo pcibench setup {addr} --vfio --user NAME"
                )
            } else {
                format!("{shown} belongs to uid {uid} (given earlier): sudo pcibench setup {addr} --release takes it back")
            },
            None,
        ));
        return Ok(());
    };
    // A node another user was given is theirs until taken back: re-owning it silently would cut
    // them off mid-run, or hand the next user a group the first still holds open.
    let (uid, _, _) = opts.system.owner(&node).map_err(|e| Error::io("cannot read the owner of", &node, e))?;
    if uid != 0 && uid != u.uid {
        if !opts.force {
            return Err(Error::Refused(format!(
                "refusing to give {} {shown}: it belongs to uid {uid}, given earlier; take it back first (sudo \
                 pcibench setup {addr} --release), or --force hands it over",
                u.name
            )));
        }
        let what = format!("--force: took {shown} from uid {uid}");
        if let Some(n) = &opts.notify {
            n(&format!("{addr}: {what}"));
        }
        ch.push(Change::warn(what, format!("uid {uid} can no longer open {shown}")));
    }
    let mut rec = record::load(host, addr)?;
    let (chown, chmod) = super::give(host, addr, opts, &mut rec, &node, &shown, u)?;
    if chown {
        // The node opens every device of the group: each is named, the other members too.
        let members = group_members(host, g);
        ch.push(Change::warn(
            format!("gave {} {shown} (chown {}:{}): group {g} holds {}", u.name, u.uid, u.gid, members.join(", ")),
            grant_warning(addr, &shown, u, noiommu),
        ));
    }
    if chmod {
        ch.push(Change::new(format!("made {shown} read+write for its owner")));
    }
    Ok(())
}

/// The devices of IOMMU group `g`, as sysfs lists them (sorted).
fn group_members(host: &Host, g: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(host.path(format!("/sys/kernel/iommu_groups/{g}/devices")))
        .map(|d| d.flatten().map(|e| crate::text::one_line(&e.file_name().to_string_lossy())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// What a user given the group node can do, and how to take it back.
fn grant_warning(addr: &PciAddress, shown: &str, u: &User, noiommu: bool) -> String {
    let what = if noiommu {
        format!(
            "{} can now open {shown} and point {addr}'s DMA at any physical address: read and write all of host memory \
             with no IOMMU in the way, which is root-equivalent",
            u.name
        )
    } else {
        format!(
            "{} can now open {shown}: map {addr}'s BARs, reset it, and make it DMA to and from their own processes' \
             memory (the IOMMU confines it to that)",
            u.name
        )
    };
    format!("{what}; take it back with: sudo pcibench setup {addr} --release")
}

/// modprobe, never for a fixture root on the real host: the module would load into the real
/// kernel while the fixture's files say what is loaded.
fn modprobe_run(host: &Host, opts: &SetupOptions, args: &[&str]) -> Result<()> {
    if !host.is_real() && opts.system.reaches_host() {
        return Err(Error::Refused(format!(
            "not running `modprobe {}`: {} is a fixture root (--sysroot or PCIBENCH_SYSROOT), and modprobe would change \
             the real kernel; a fixture shows loaded modules as {}",
            args.join(" "),
            host.root().display(),
            host.path("/sys/module/NAME").display()
        )));
    }
    opts.system.run("modprobe", args)
}

fn modprobe(host: &Host, opts: &SetupOptions, args: &[&str], ch: &mut Vec<Change>) -> Result<()> {
    modprobe_run(host, opts, args)?;
    ch.push(Change::new(format!("loaded {} (modprobe {})", args[0], args.join(" "))));
    Ok(())
}

fn load_modules(host: &Host, opts: &SetupOptions, a: &str, has_iommu: bool, ch: &mut Vec<Change>) -> Result<()> {
    if !has_iommu && !module_loaded(host, "vfio") {
        modprobe_run(host, opts, &["vfio", "enable_unsafe_noiommu_mode=1"])?;
        ch.push(Change::warn(
            "loaded vfio in no-IOMMU mode (modprobe vfio enable_unsafe_noiommu_mode=1): this host has no IOMMU",
            NOIOMMU_WARNING,
        ));
    }
    if !module_loaded(host, "vfio_pci") && !host.path("/sys/bus/pci/drivers/vfio-pci").is_dir() {
        modprobe(host, opts, &["vfio-pci"], ch)?;
    }
    if has_iommu && !module_loaded(host, "vfio_iommu_type1") {
        modprobe(host, opts, &["vfio_iommu_type1"], ch)?;
    }
    if has_iommu {
        return Ok(());
    }
    match noiommu_enabled(host) {
        Some(true) => Ok(()),
        Some(false) => {
            write_attr(opts, &host.path(NOIOMMU_PARAM), "1")?;
            ch.push(Change::warn(
                format!("enabled no-IOMMU mode (1 > {NOIOMMU_PARAM}): this host has no IOMMU"),
                NOIOMMU_WARNING,
            ));
            Ok(())
        }
        None => Err(Error::Unsupported(format!(
            "this host has no IOMMU and its vfio has no no-IOMMU mode ({NOIOMMU_PARAM} is missing: \
             CONFIG_VFIO_NOIOMMU is off): enable VT-d/AMD-Vi with intel_iommu=on or amd_iommu=on, \
             or use sysfs: sudo pcibench setup {a} --sysfs-user USER"
        ))),
    }
}

/// Undo `vfio` and `sysfs_user`: give back every owner and mode they changed, unbind from
/// vfio-pci, clear driver_override, give the device back to the driver it had (from the record)
/// or let the kernel choose when there is none, and say what stays (no-IOMMU mode, modules).
pub fn release(host: &Host, addr: &PciAddress, opts: &SetupOptions) -> Result<Vec<Change>> {
    super::refuse_elevated()?;
    let dir = check_device(host, addr)?;
    let a = addr.to_string();
    let mut rec = record::load(host, addr)?;
    let had = rec.clone();
    let record = rec.driver.clone();
    let mut ch = Vec::new();
    let driver = driver_of(host, &a);
    if driver.as_deref() == Some("vfio-pci") {
        // vfio-pci's remove waits until every user closes the device: the write would hang.
        if let Some(g) = iommu_group_of(host, addr) {
            let shown = format!("/dev/vfio/{}{g}", if group_is_noiommu(host, g) { "noiommu-" } else { "" });
            let holders = crate::host::inuse::vfio_group_users(host, &a).map(|u| u.who).unwrap_or_default();
            if !holders.is_empty() && !opts.force {
                return Err(Error::Refused(format!(
                    "{a} is in use: {shown} is held open by {}; stop it first (or pass --force, which \
                     waits until it closes the device)",
                    holders.join(", ")
                )));
            }
        }
        // The group node goes away with the binding: give it back first.
        super::restore_owners(host, opts, &mut rec, |p| p.starts_with("/dev/vfio/"), &mut ch)?;
        write_attr(opts, &host.path("/sys/bus/pci/drivers/vfio-pci/unbind"), &a)?;
        ch.push(Change::new("unbound it from vfio-pci"));
    }
    let released_vfio = !ch.is_empty();
    if override_of(&dir).is_some() {
        // A lone newline clears it (drivers/pci/pci-sysfs.c, driver_override_store).
        write_attr(opts, &dir.join("driver_override"), "\n")?;
        ch.push(Change::new("cleared driver_override"));
    }
    match &record {
        Some(Some(orig)) if driver_of(host, &a).as_deref() != Some(orig.as_str()) => {
            restore(host, opts, &a, orig)?;
            ch.push(Change::new(format!("gave it back to {orig}")));
        }
        // It had no driver before `vfio`: leave it without one.
        Some(_) => {}
        // No record: what vfio-pci held goes back to whatever driver the kernel picks.
        None if !ch.is_empty() => {
            // The probe runs inside the write (drivers/base/bus.c, drivers_probe_store →
            // bus_rescan_devices_helper → device_attach): what is bound after it is the kernel's choice.
            write_attr(opts, &host.path("/sys/bus/pci/drivers_probe"), &a)?;
            let now = driver_of(host, &a);
            ch.push(Change::new(format!(
                "asked the kernel to probe it (drivers_probe): driver now {}",
                now.as_deref().unwrap_or("none")
            )));
        }
        None => {}
    }
    super::restore_owners(host, opts, &mut rec, |_| true, &mut ch)?;
    if let Some(before) = rec.command.take() {
        if let Some(c) = super::sysfs::restore_memory(&dir.join("config"), before, opts)? {
            ch.push(c);
        }
    }
    if !had.is_empty() {
        let p = record::save(host, addr, &Record::default())?;
        let what = if had.driver.is_some() { "the remembered driver" } else { "what it remembered" };
        ch.push(Change::new(format!("forgot {what} ({})", p.display())));
    }
    if released_vfio || had.driver.is_some() {
        ch.extend(what_stays(host));
    }
    Ok(ch)
}

/// What `release` leaves as it is, for other devices that may rely on it, with the command that
/// undoes it.
fn what_stays(host: &Host) -> Vec<Change> {
    let mut notes = Vec::new();
    if noiommu_enabled(host) == Some(true) {
        notes.push(Change::note(
            format!(
                "left no-IOMMU mode on (other devices bound to vfio-pci may use it): turn it off with: \
                 echo 0 | sudo tee {NOIOMMU_PARAM}"
            ),
            None,
        ));
    }
    let loaded: Vec<&str> =
        ["vfio_pci", "vfio_iommu_type1", "vfio"].into_iter().filter(|m| module_loaded(host, m)).collect();
    if !loaded.is_empty() {
        notes.push(Change::note(
            format!(
                "left {} loaded: unload once no device uses them: sudo modprobe -r {}",
                loaded.join(", "),
                loaded.join(" ")
            ),
            None,
        ));
    }
    notes
}

/// Reprobe (the kernel normally picks the original driver again), else bind it explicitly.
fn restore(host: &Host, opts: &SetupOptions, a: &str, orig: &str) -> Result<()> {
    write_attr(opts, &host.path("/sys/bus/pci/drivers_probe"), a)?;
    opts.wait_for(|| driver_of(host, a).is_some());
    if driver_of(host, a).is_none() && host.path(format!("/sys/bus/pci/drivers/{orig}")).is_dir() {
        write_attr(opts, &host.path(format!("/sys/bus/pci/drivers/{orig}/bind")), a)?;
        opts.wait_for(|| driver_of(host, a).is_some());
    }
    let now = driver_of(host, a);
    if now.as_deref() == Some(orig) {
        return Ok(());
    }
    Err(Error::Device(format!(
        "{a} did not go back to {orig} (driver now: {}): see dmesg | tail; by hand: \
         echo {a} | sudo tee /sys/bus/pci/drivers/{orig}/bind",
        now.as_deref().unwrap_or("none")
    )))
}
