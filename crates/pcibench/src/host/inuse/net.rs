//! Network interfaces of a PCI function that the running system uses: up (IFF_UP in `flags`, or
//! `operstate` up), with addresses, enslaved to a bond, bridge or team (`master` link), or carrying
//! an upper device (VLAN, macvlan: `upper_*` links) that is up. Read from sysfs and procfs only
//! (Documentation/ABI/testing/sysfs-class-net): IPv6 addresses from /proc/net/if_inet6, IPv4 ones
//! from the local entries of /proc/net/fib_trie matched to the connected routes of
//! /proc/net/route. An IPv4 address on an interface that is down has no route, so it is not seen:
//! such an interface carries no traffic.
//!
//! Only the interfaces of this network namespace are visible (/sys/class/net is per namespace).

use super::walk::{entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::Error;
use std::net::{Ipv4Addr, Ipv6Addr};

/// IFF_UP (include/uapi/linux/if.h).
const IFF_UP: u32 = 0x1;

struct Iface {
    name: String,
    up: bool,
    addrs: Vec<String>,
    master: Option<String>,
    uppers_up: Vec<String>,
    function: Option<String>,
}

fn is_up(host: &crate::host::Host, name: &str) -> bool {
    let dir = host.path(format!("/sys/class/net/{name}"));
    let flags = read_trim(&dir.join("flags")).and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
    flags.is_some_and(|f| f & IFF_UP != 0) || read_trim(&dir.join("operstate")).as_deref() == Some("up")
}

/// Local IPv4 addresses (`/32 host LOCAL` entries of /proc/net/fib_trie) with the interface and
/// prefix of the connected route (gateway 0) that covers each, most specific first.
pub(super) fn ipv4_addresses(fib_trie: &str, route: &str) -> Vec<(String, String)> {
    let mut locals: Vec<Ipv4Addr> = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in fib_trie.lines() {
        let t = line.trim_start().trim_start_matches(['|', '+', '-', ' ']);
        if let Ok(a) = t.split_whitespace().next().unwrap_or("").parse::<Ipv4Addr>() {
            if line.trim_start().starts_with("|--") {
                last = Some(a);
            }
            continue;
        }
        if line.trim().starts_with("/32 host LOCAL") {
            if let Some(a) = last {
                if !locals.contains(&a) {
                    locals.push(a);
                }
            }
        }
    }
    // Iface Destination Gateway Flags RefCnt Use Metric Mask ...: addresses as the kernel's native u32.
    let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(|v| Ipv4Addr::from(v.to_ne_bytes()));
    let routes: Vec<(String, Ipv4Addr, Ipv4Addr)> = route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dst, gw, mask) = (hex(f.get(1)?)?, hex(f.get(2)?)?, hex(f.get(7)?)?);
            (gw.is_unspecified() && !mask.is_unspecified()).then(|| (f[0].to_string(), dst, mask))
        })
        .collect();
    let mut out = Vec::new();
    for a in locals {
        let best = routes
            .iter()
            .filter(|(_, dst, mask)| u32::from(a) & u32::from(*mask) == u32::from(*dst))
            .max_by_key(|(_, _, mask)| u32::from(*mask).count_ones());
        if let Some((ifname, _, mask)) = best {
            out.push((ifname.clone(), format!("{a}/{}", u32::from(*mask).count_ones())));
        }
    }
    out
}

/// Global and site addresses from /proc/net/if_inet6 (`addr ifindex prefixlen scope flags name`);
/// link-local ones are left out: every interface that is up has one.
pub(super) fn ipv6_addresses(if_inet6: &str) -> Vec<(String, String)> {
    if_inet6
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let raw = u128::from_str_radix(f.first()?, 16).ok()?;
            let plen = u8::from_str_radix(f.get(2)?, 16).ok()?;
            let scope = u8::from_str_radix(f.get(3)?, 16).ok()?;
            // IPV6_ADDR_LINKLOCAL 0x20, IPV6_ADDR_LOOPBACK (host) 0x10.
            let name = f.get(5)?.to_string();
            (scope & 0x30 == 0).then(|| (name, format!("{}/{plen}", Ipv6Addr::from(raw))))
        })
        .collect()
}

/// What the running system uses the function's network interfaces for.
pub(super) fn holders(scope: &Scope) -> Result<Vec<Holder>, Error> {
    let host = scope.host;
    let mut ifaces = Vec::new();
    for (name, link) in entries(&host.path("/sys/class/net"))? {
        let Some(real) = resolve(&link)? else { continue };
        if !real.starts_with(&scope.dir) {
            continue;
        }
        let master = match resolve(&real.join("master")) {
            Ok(Some(m)) => Some(name_of(&m)),
            Ok(None) => None,
            Err(e) => return Err(e),
        };
        let mut uppers_up = Vec::new();
        for (entry, _) in entries(&real)? {
            if let Some(u) = entry.strip_prefix("upper_") {
                if is_up(host, u) {
                    uppers_up.push(u.to_string());
                }
            }
        }
        ifaces.push(Iface {
            up: is_up(host, &name),
            name,
            addrs: Vec::new(),
            master,
            uppers_up,
            function: real.ancestors().map(name_of).find(|n| n.len() == 12 && n.as_bytes()[4] == b':'),
        });
    }
    if ifaces.is_empty() {
        return Ok(Vec::new());
    }
    let read = |p: &str| crate::file::read_string(&host.path(p), super::procs::PROC_TABLE_MAX).unwrap_or_default();
    let mut all = ipv4_addresses(&read("/proc/net/fib_trie"), &read("/proc/net/route"));
    all.extend(ipv6_addresses(&read("/proc/net/if_inet6")));
    for (ifname, a) in all {
        if let Some(i) = ifaces.iter_mut().find(|i| i.name == ifname) {
            if !i.addrs.contains(&a) {
                i.addrs.push(a);
            }
        }
    }
    let mut out = Vec::new();
    for i in ifaces {
        let below = match &i.function {
            Some(f) if *f != scope.addr => format!(" (on {f} below it)"),
            _ => String::new(),
        };
        let with = if i.addrs.is_empty() { String::new() } else { format!(" with {}", i.addrs.join(", ")) };
        let n = &i.name;
        if let Some(m) = &i.master {
            out.push(Holder {
                kind: HolderKind::Net,
                why: format!("{n} is enslaved to {m}{below}"),
                free: vec![format!("ip link set {n} nomaster")],
            });
        }
        if i.up {
            out.push(Holder {
                kind: HolderKind::Net,
                why: format!("{n} is up{with}{below}"),
                free: vec![format!("ip link set {n} down")],
            });
        } else if !i.addrs.is_empty() {
            out.push(Holder {
                kind: HolderKind::Net,
                why: format!("{n} is down but has {}{below}", i.addrs.join(", ")),
                free: vec![format!("ip addr flush dev {n}")],
            });
        }
        if !i.uppers_up.is_empty() {
            out.push(Holder {
                kind: HolderKind::Net,
                why: format!("{n} carries {}, up{below}", i.uppers_up.join(", ")),
                free: i.uppers_up.iter().map(|u| format!("ip link set {u} down")).collect(),
            });
        }
    }
    Ok(out)
}
