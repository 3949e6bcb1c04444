//! The link partner and lspci's rule for a degraded link (REFERENCE.md, "Link health").
//!
//! A link trains to the lower of what its two ends support, so "degraded" means trained below
//! the lower of both ends' Link Capabilities, and the report says which end sets that limit. A
//! root or downstream port is never judged by its own LnkCap alone: its partner (the device
//! below) limits the link, and a port whose partner is unknown gets no verdict. pciutils'
//! ls-caps.c (link_compare) has the same exemption for root and downstream ports and PCIe-to-PCI
//! bridges. For an endpoint or upstream port whose partner is unknown (read access to it failed,
//! or it sits on the root bus) its own LnkCap is the limit, as lspci does it. Where the partner's
//! LnkCap is the lower one (an x8 card in a slot wired x4), the link is not degraded: the slot
//! limits it, and pcibench says so rather than flagging it (lspci flags such an endpoint, which
//! it judges by its own LnkCap only).
//!
//! Who is whose partner: an endpoint's or upstream port's is the port above it (sysfs parent); a
//! root or downstream port's is a function below it. The port type comes from the PCI Express
//! capability (root only can read past 64 bytes of config space); without it a bridge is taken
//! as a root port when nothing bridges above it, and the ports of a switch alternate below it
//! (upstream, downstream, upstream ...).

use super::device::{LinkEnd, LinkPartner, LinkStatus};
use super::link::gen_from_speed;
use crate::host::state::read_trim;
use std::fs;
use std::path::Path;

/// Which way the device faces its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Facing {
    /// Endpoint, upstream switch port: the partner is the port above.
    Up,
    /// Root port, downstream switch port: the partner is the device below.
    Down,
    /// PCIe-to-PCI bridge, root complex integrated devices: never judged by their own LnkCap.
    Neither,
}

fn facing(port_type: Option<&str>, is_bridge: bool, bridges_above: usize) -> Facing {
    match port_type {
        Some("Endpoint" | "Legacy Endpoint" | "Upstream Port") => Facing::Up,
        Some("Root Port" | "Downstream Port" | "PCI-to-PCIe Bridge") => Facing::Down,
        Some("PCIe-to-PCI Bridge" | "Root Complex Integrated Endpoint" | "Root Complex Event Collector") => {
            Facing::Neither
        }
        _ if !is_bridge => Facing::Up,
        _ if bridges_above % 2 == 0 => Facing::Down,
        _ => Facing::Up,
    }
}

/// A function's Link Capabilities from sysfs (`max_link_speed`, `max_link_width`).
fn caps_of(dir: &Path) -> Option<(Option<u8>, Option<u8>, Option<String>)> {
    let speed = read_trim(&dir.join("max_link_speed")).filter(|s| !s.is_empty() && !s.starts_with("Unknown"));
    let width = read_trim(&dir.join("max_link_width")).and_then(|w| w.parse::<u8>().ok()).filter(|w| *w > 0);
    let gen = speed.as_deref().and_then(gen_from_speed);
    (gen.is_some() || width.is_some()).then_some((gen, width, speed))
}

fn name_of(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}

fn is_function(name: &str) -> bool {
    name.parse::<super::PciAddress>().is_ok()
}

fn is_bridge_dir(dir: &Path) -> bool {
    read_trim(&dir.join("class"))
        .and_then(|c| u32::from_str_radix(c.trim_start_matches("0x"), 16).ok())
        .is_some_and(crate::host::state::class_is_bridge)
}

fn smaller(a: Option<u8>, b: Option<u8>) -> (Option<u8>, Option<LinkEnd>) {
    match (a, b) {
        (Some(x), Some(y)) if x < y => (Some(x), Some(LinkEnd::Device)),
        (Some(x), Some(y)) if y < x => (Some(y), Some(LinkEnd::Partner)),
        (Some(x), Some(_)) => (Some(x), Some(LinkEnd::Both)),
        (Some(x), None) => (Some(x), Some(LinkEnd::Device)),
        (None, Some(y)) => (Some(y), Some(LinkEnd::Partner)),
        (None, None) => (None, None),
    }
}

/// Fill in the partner, the limit and the verdict of the link of the function at `dir` (its
/// /sys/bus/pci/devices entry).
pub(super) fn assess(dir: &Path, class_code: u32, link: &mut LinkStatus) {
    let real = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let above: Vec<&Path> = real
        .ancestors()
        .skip(1)
        .take_while(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(is_function))
        .collect();
    let is_bridge = crate::host::state::class_is_bridge(class_code);
    let f = facing(link.port_type.as_deref(), is_bridge, above.len());
    let partner = match f {
        Facing::Up | Facing::Neither => above.first().and_then(|p| {
            let (g, w, s) = caps_of(p)?;
            Some(LinkPartner {
                address: name_of(p),
                role: "upstream port".into(),
                max_gen: g,
                max_width: w,
                max_speed: s,
            })
        }),
        Facing::Down => {
            let mut below: Vec<_> = fs::read_dir(&real)
                .map(|rd| {
                    rd.flatten()
                        .filter(|e| e.file_name().to_str().is_some_and(is_function))
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path())
                        .collect()
                })
                .unwrap_or_default();
            below.sort();
            below.iter().find_map(|p| {
                let (g, w, s) = caps_of(p)?;
                let role = if is_bridge_dir(p) { "switch port below it" } else { "device below it" };
                Some(LinkPartner { address: name_of(p), role: role.into(), max_gen: g, max_width: w, max_speed: s })
            })
        }
    };
    let (limit_gen, gen_by, limit_width, width_by) = match (&partner, f) {
        (Some(p), _) => {
            let (g, gb) = smaller(link.max_gen, p.max_gen);
            let (w, wb) = smaller(link.max_width, p.max_width);
            (g, gb, w, wb)
        }
        // No partner: an endpoint's own LnkCap is the limit (lspci's rule); a port gets no verdict.
        (None, Facing::Up) => (link.max_gen, Some(LinkEnd::Device), link.max_width, Some(LinkEnd::Device)),
        (None, _) => (None, None, None, None),
    };
    link.degraded = matches!((link.current_gen, limit_gen), (Some(c), Some(l)) if c < l)
        || matches!((link.current_width, limit_width), (Some(c), Some(l)) if c < l && c > 0);
    link.partner = partner;
    link.limit_gen = limit_gen;
    link.limit_width = limit_width;
    link.speed_limited_by = limit_gen.and(gen_by);
    link.width_limited_by = limit_width.and(width_by);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facing_from_port_type_or_position() {
        assert_eq!(facing(Some("Root Port"), true, 0), Facing::Down);
        assert_eq!(facing(Some("Endpoint"), false, 1), Facing::Up);
        assert_eq!(facing(Some("Upstream Port"), true, 1), Facing::Up);
        assert_eq!(facing(Some("Downstream Port"), true, 2), Facing::Down);
        assert_eq!(facing(Some("PCIe-to-PCI Bridge"), true, 1), Facing::Neither);
        // Without config space: a bridge on the root bus is a root port, then switch ports alternate.
        assert_eq!(facing(None, true, 0), Facing::Down);
        assert_eq!(facing(None, true, 1), Facing::Up);
        assert_eq!(facing(None, true, 2), Facing::Down);
        assert_eq!(facing(None, false, 3), Facing::Up);
    }

    #[test]
    fn the_lower_end_limits() {
        assert_eq!(smaller(Some(3), Some(4)), (Some(3), Some(LinkEnd::Device)));
        assert_eq!(smaller(Some(4), Some(3)), (Some(3), Some(LinkEnd::Partner)));
        assert_eq!(smaller(Some(4), Some(4)), (Some(4), Some(LinkEnd::Both)));
        assert_eq!(smaller(None, None), (None, None));
    }
}
