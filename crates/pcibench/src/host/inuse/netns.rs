//! The function's network interfaces in other network namespaces (a container's or pod's NIC, an
//! SR-IOV VF handed to one). sysfs shows only this namespace's interfaces: the function's `net/`
//! directory is there, empty, while its interface lives in another (drivers/base/core.c makes that
//! directory per class, its entries tagged by namespace). So a function with a `net/` directory below
//! it, or a network controller (class 02) bound to a driver, has every other namespace looked into
//! (`namespaces::net_scan`, once per command), each interface whose parent device
//! (IFLA_PARENT_DEV_BUS_NAME / IFLA_PARENT_DEV_NAME) is the function or a device below it is held
//! to the same rules as here (`net`): up, addressed, enslaved, carrying an upper device that is up.
//!
//! A namespace that could not be looked into (not root, a kernel before 5.16) is "could not
//! check", never taken as holding nothing; so is a `net/` directory whose interfaces are in no
//! namespace pcibench found (one kept only by an open descriptor).

use super::kernel::{NsError, NsLink};
use super::walk::{dirs_below, entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::Error;

/// How far below the function a `net/` directory sits (pci → virtio0 → net).
const DEPTH: usize = 4;

/// The function's `net/` directories (below it, not followed through links).
fn net_dirs(scope: &Scope) -> Result<Vec<std::path::PathBuf>, Error> {
    let mut v: Vec<_> = dirs_below(&scope.dir, DEPTH)?.into_iter().filter(|d| name_of(d) == "net").collect();
    v.sort();
    Ok(v)
}

/// Drivers that hand a function to user space or hold it unused: they make no network interface.
const NOT_NETWORK_DRIVERS: [&str; 3] = ["vfio-pci", "uio_pci_generic", "pci-stub"];

/// Whether the function may have network interfaces: a `net/` directory below it, or a network
/// controller (PCI class 02, PCI Code and ID Assignment §1.3) bound to a network driver.
fn is_network(scope: &Scope, dirs: &[std::path::PathBuf]) -> bool {
    let class = read_trim(&scope.dir.join("class")).unwrap_or_default();
    let driver = crate::host::state::link_name(&scope.dir.join("driver"));
    !dirs.is_empty()
        || (class.starts_with("0x02") && driver.is_some_and(|d| !NOT_NETWORK_DRIVERS.contains(&d.as_str())))
}

/// Whether interface `l` belongs to the function: its parent device, looked up by bus and name in
/// this host's sysfs, lies below the function.
fn is_ours(scope: &Scope, l: &NsLink) -> Result<bool, Error> {
    let (Some(bus), Some(name)) = (&l.parent_bus, &l.parent) else { return Ok(false) };
    // A name from netlink is one path component; anything else is not a device name.
    if bus.contains('/') || name.contains('/') || bus.starts_with('.') || name.starts_with('.') {
        return Ok(false);
    }
    let link = scope.host.path(format!("/sys/bus/{bus}/devices/{name}"));
    Ok(resolve(&link)?.is_some_and(|d| d.starts_with(&scope.dir)))
}

/// The holders in other namespaces, and what could not be checked, in words.
pub(super) fn holders(scope: &Scope) -> Result<(Vec<Holder>, Vec<String>), Error> {
    let dirs = net_dirs(scope)?;
    if !is_network(scope, &dirs) {
        return Ok((Vec::new(), Vec::new()));
    }
    let scan = scope.host.net_namespaces();
    let mut out = Vec::new();
    let mut unchecked: Vec<String> = scan.unchecked.clone();
    let mut seen_elsewhere = false;
    for ns in &scan.namespaces {
        let where_ = ns.name.words("network");
        let view = match &ns.view {
            Ok(v) => v,
            Err(NsError::Gone) => continue,
            Err(NsError::NoPermission(w) | NsError::Failed(w)) => {
                unchecked.push(format!("could not look into {where_} ({w})"));
                continue;
            }
        };
        let ip = ns.name.ip();
        for l in &view.links {
            if !is_ours(scope, l)? {
                continue;
            }
            seen_elsewhere = true;
            let n = &l.name;
            let addrs: Vec<&str> = view.addrs.iter().filter(|(i, _)| *i == l.index).map(|(_, a)| a.as_str()).collect();
            if let Some(m) = l.master {
                let master = view.links.iter().find(|o| o.index == m).map(|o| o.name.clone());
                out.push(Holder {
                    kind: HolderKind::Net,
                    why: format!(
                        "{n} is enslaved to {} in {where_}",
                        master.unwrap_or_else(|| format!("interface {m}"))
                    ),
                    free: vec![format!("{ip} link set {n} nomaster")],
                });
            }
            let with = if addrs.is_empty() { String::new() } else { format!(" with {}", addrs.join(", ")) };
            if l.up {
                out.push(Holder {
                    kind: HolderKind::Net,
                    why: format!("{n} is up{with} in {where_}"),
                    free: vec![format!("{ip} link set {n} down")],
                });
            } else if !addrs.is_empty() {
                out.push(Holder {
                    kind: HolderKind::Net,
                    why: format!("{n} is down but has {} in {where_}", addrs.join(", ")),
                    free: vec![format!("{ip} addr flush dev {n}")],
                });
            }
            let uppers: Vec<&str> =
                view.links.iter().filter(|o| o.link == Some(l.index) && o.up).map(|o| o.name.as_str()).collect();
            if !uppers.is_empty() {
                out.push(Holder {
                    kind: HolderKind::Net,
                    why: format!("{n} carries {}, up, in {where_}", uppers.join(", ")),
                    free: uppers.iter().map(|u| format!("{ip} link set {u} down")).collect(),
                });
            }
        }
    }
    // Its interfaces are somewhere: not here, not in any namespace looked into.
    let visible_here = dirs.iter().try_fold(false, |acc, d| Ok::<_, Error>(acc || !entries(d)?.is_empty()))?;
    if !dirs.is_empty() && !visible_here && !seen_elsewhere && unchecked.is_empty() {
        unchecked.push(
            "its network interfaces are in no network namespace pcibench could find (one kept only by an open \
             descriptor or a socket): find them with `lsns -t net` and `ip -n NAME link`"
                .to_string(),
        );
    }
    Ok((out, unchecked))
}
