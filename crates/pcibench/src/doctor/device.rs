//! Checks on the device itself: presence, bound driver, command register bits, link training
//! and AER counters.

use super::{Ctx, Finding, InUse, Severity};
use crate::access::Via;
use crate::pci::device::LinkEnd;

pub(super) fn exists(c: &Ctx) -> Finding {
    let i = &c.info;
    Finding::new(
        "device",
        Severity::Pass,
        format!("{} [{}] {} {}, {}", c.addr, i.ids(), i.vendor_label(), i.device_label(), i.class_name),
    )
}

pub(super) fn checks(c: &Ctx) -> Vec<Finding> {
    let mut v = vec![driver(c), in_use(c), memory_space(c), bus_master(c)];
    v.extend(resource_owners(c));
    v
}

/// A bound device (a driver or vfio-pci) whose resource files are not root's: a `--sysfs-user`
/// grant that outlived the binding lets its holder rewrite the registers under the driver, or
/// the DMA engine's addresses under a VFIO user. Said only when there is one.
fn resource_owners(c: &Ctx) -> Option<Finding> {
    c.driver.as_ref()?;
    let foreign = crate::host::state::foreign_resource_files(c.host, &c.addr);
    if foreign.is_empty() {
        return None;
    }
    let mut f = Finding::new(
        "resource-owners",
        Severity::Fail,
        format!(
            "bound to {}, yet its resource files belong to another user: {}; whoever holds them can rewrite the \
             card's registers (a DMA engine's addresses once Bus Master is on)",
            c.driver.as_deref().unwrap_or("?"),
            foreign.join(", ")
        ),
    )
    .fix(format!("take the grant back: sudo pcibench setup {} --release", c.addr));
    for v in [Via::Vfio, Via::VfioNoiommu] {
        f = f.blocks(v, None);
    }
    Some(f)
}

/// What the running system uses the device for (`host::inuse`): any holder fails it.
fn in_use(c: &Ctx) -> Finding {
    match &c.in_use {
        InUse::Free => Finding::new(
            "in-use",
            Severity::Pass,
            "the running system does not use it: no filesystem, swap, stacked block device, network \
             interface, console, driver reference, process holding it open or SR-IOV function in use on it",
        ),
        // Not a pass: what it could not look at may hold it, and nothing that takes it is offered
        // (`finish_incomplete`). Never "as root" to root: something denied it even that.
        InUse::Unverified(inv) => Finding::new(
            "in-use",
            Severity::Warn,
            format!("the in-use check was incomplete: no use found, but {}", inv.unchecked.words()),
        )
        .fix(super::complete_check(c).1),
        InUse::Used(inv) => {
            let steps = inv.free_steps();
            let fix = if !inv.can_be_freed() {
                "pick another device: this one cannot be freed while the system runs from it".to_string()
            } else {
                format!("pick another device, or free it first: {}", steps.join("; "))
            };
            let mut evidence = format!("in use by the running system: {}", inv.summary());
            if !inv.unchecked.is_empty() {
                evidence.push_str(&format!("; {}", inv.unchecked.words()));
            }
            let mut f = Finding::new("in-use", Severity::Fail, evidence).fix(fix);
            for v in [Via::Sysfs, Via::Vfio, Via::VfioNoiommu] {
                f = f.blocks(v, None);
            }
            f
        }
        InUse::Unknown(e) => {
            let mut f =
                Finding::new("in-use", Severity::Fail, format!("cannot tell what the running system uses it for: {e}"))
                    .fix("pick another device; run it again, and if this persists see dmesg");
            for v in [Via::Sysfs, Via::Vfio, Via::VfioNoiommu] {
                f = f.blocks(v, None);
            }
            f
        }
    }
}

fn driver(c: &Ctx) -> Finding {
    let addr = c.addr;
    match c.driver.as_deref() {
        None => {
            Finding::new("driver", Severity::Pass, "no driver bound: sysfs can reach the BARs; VFIO needs vfio-pci")
                .fix(format!("for VFIO bind it to vfio-pci: {}", c.setup_vfio()))
                .blocks(c.vfio, Some(c.setup_vfio()))
                .takes()
        }
        Some("vfio-pci") => Finding::new("driver", Severity::Pass, "vfio-pci"),
        Some(d) => {
            let dir = c.sysfs_dir();
            Finding::new(
                "driver",
                Severity::Warn,
                format!(
                    "bound to {d}: pcibench does not write to the BARs of a device a kernel driver owns, \
                     and VFIO needs vfio-pci"
                ),
            )
            .fix(format!(
                "{} (by hand: echo {addr} | sudo tee /sys/bus/pci/drivers/{d}/unbind; \
                 echo vfio-pci | sudo tee {dir}/driver_override; echo {addr} | sudo tee /sys/bus/pci/drivers_probe)",
                c.setup_vfio()
            ))
            .blocks(c.vfio, Some(c.setup_vfio()))
            .blocks(Via::Sysfs, Some(format!("echo {addr} | sudo tee /sys/bus/pci/drivers/{d}/unbind")))
            .takes()
        }
    }
}

fn has_memory_bars(c: &Ctx) -> bool {
    c.info.bars.iter().any(|b| b.is_memory())
}

fn memory_space(c: &Ctx) -> Finding {
    let Some(cmd) = &c.info.command else {
        return Finding::new(
            "memory-space",
            Severity::Warn,
            format!("cannot read the command register from {}/config", c.sysfs_dir()),
        );
    };
    if !has_memory_bars(c) {
        return Finding::new("memory-space", Severity::Info, format!("no memory BARs ({})", cmd.describe()));
    }
    if cmd.memory {
        return Finding::new(
            "memory-space",
            Severity::Pass,
            format!("Memory Space enabled (command {:#06x}: {})", cmd.raw, cmd.describe()),
        );
    }
    let base = if c.bound_to_vfio() { Severity::Info } else { Severity::Warn };
    let mut ev = format!(
        "Memory Space disabled (command {:#06x}: {}): BAR reads through sysfs return all-ones",
        cmd.raw,
        cmd.describe()
    );
    if c.bound_to_vfio() {
        ev.push_str("; vfio-pci enables it when the device is opened");
    }
    Finding::new("memory-space", base, ev)
        .fix(format!("{} sets it (or: sudo setpci -s {} COMMAND=0x02:0x02)", c.setup_sysfs(), c.addr))
        .blocks(Via::Sysfs, Some(c.setup_sysfs()))
        .takes()
}

fn bus_master(c: &Ctx) -> Finding {
    match &c.info.command {
        None => Finding::new("bus-master", Severity::Info, "command register unreadable"),
        Some(cmd) if cmd.bus_master => Finding::new("bus-master", Severity::Pass, "Bus Master enabled"),
        Some(_) => Finding::new(
            "bus-master",
            Severity::Info,
            "Bus Master disabled: the card cannot DMA until it is set; pcibench sets it through VFIO before DMA",
        ),
    }
}

pub(super) fn link_checks(c: &Ctx) -> Vec<Finding> {
    vec![link(c), aer(c)]
}

/// How the device can be reset (`pcibench reset`): what to type when its engine stays busy.
/// Information only, and dropped with the other taking commands while the system uses it.
pub(super) fn reset(c: &Ctx) -> Finding {
    let o = match crate::reset::offered(c.host, &c.addr) {
        Ok(o) => o,
        Err(e) => return Finding::new("reset", Severity::Info, format!("cannot tell how it can be reset: {e}")),
    };
    let mut ways = Vec::new();
    if o.vfio {
        ways.push("VFIO_DEVICE_RESET through vfio-pci".to_string());
    }
    if o.kernel_reset {
        ways.push(format!("the kernel's reset ({})", crate::reset::methods_words(&o)));
    }
    if let Some(p) = &o.port {
        ways.push(format!("a secondary bus reset of its port {p}"));
    }
    match (&o.auto, &o.no_reset) {
        (Some(m), _) => {
            Finding::new("reset", Severity::Info, format!("it can be reset by {}; auto takes {m}", ways.join(", ")))
                .fix(format!("when its DMA engine stays busy: sudo pcibench reset {} --allow-reset", c.addr))
                .takes()
        }
        (None, why) => Finding::new("reset", Severity::Info, why.clone().unwrap_or_default()),
    }
}

fn gen_width(gen: Option<u8>, speed: &Option<String>, width: Option<u8>) -> String {
    let g = gen.map(|g| format!("Gen{g}")).unwrap_or_else(|| "Gen?".into());
    let w = width.map(|w| format!("x{w}")).unwrap_or_else(|| "x?".into());
    match speed {
        Some(s) => format!("{g} {w} ({s})"),
        None => format!("{g} {w}"),
    }
}

fn link(c: &Ctx) -> Finding {
    let Some(l) = &c.info.link else {
        return Finding::new(
            "link",
            Severity::Info,
            "no PCIe link information (a conventional PCI device, or not exposed in sysfs)",
        );
    };
    let cur = gen_width(l.current_gen, &l.current_speed, l.current_width);
    let max = gen_width(l.max_gen, &l.max_speed, l.max_width);
    let limit = gen_width(l.limit_gen, &None, l.limit_width);
    let who = l.limited_by_words().unwrap_or_default();
    let partner = l.partner.as_ref().map(|p| (p, gen_width(p.max_gen, &p.max_speed, p.max_width)));
    if l.degraded {
        let model = c.info.model.as_ref().map(|m| format!(": the link model allows {:.0} MB/s writes", m.write_mbps));
        let (ev, other) = match &partner {
            Some((p, pmax)) => (
                format!(
                    "trained at {cur}, below {limit} that both ends support (this device: {max}; {} {}: {pmax}; \
                     the limit is set by {who}){}",
                    p.role,
                    p.address,
                    model.unwrap_or_default()
                ),
                format!(", and the other end {} (lspci -vv -s {})", p.address, p.address),
            ),
            None => (
                format!(
                    "trained at {cur}, below its maximum {max} (its link partner is unknown){}",
                    model.unwrap_or_default()
                ),
                String::new(),
            ),
        };
        return Finding::new("link", Severity::Warn, ev).fix(format!(
            "retrain it (sudo pcibench link {} --retrain --allow-retrain: a card loaded over JTAG after boot trains \
             again at full speed); else reseat the card or use a slot wired for the full width; check the firmware's \
             link-speed setting{other}",
            c.addr
        ));
    }
    match (&partner, l.limit_gen.or(l.limit_width.map(|_| 0))) {
        // A port with nothing known below it: its own LnkCap says nothing about the link.
        (None, None) => Finding::new(
            "link",
            Severity::Info,
            format!("{cur}, max {max}: nothing found below it (an empty slot, or the link is down), so no verdict"),
        ),
        (Some((p, pmax)), _)
            if l.speed_limited_by == Some(LinkEnd::Partner) || l.width_limited_by == Some(LinkEnd::Partner) =>
        {
            let facing_up = p.role == "upstream port";
            if facing_up {
                Finding::new(
                    "link",
                    Severity::Info,
                    format!(
                        "{cur}, the most this link allows: the upstream port {} supports {pmax}, this device {max}",
                        p.address
                    ),
                )
                .fix(format!("for this device's full {max}, put it in a slot that supports it"))
            } else {
                Finding::new(
                    "link",
                    Severity::Pass,
                    format!(
                        "{cur}, the most this link allows: the {} {} supports {pmax}, this port {max}",
                        p.role, p.address
                    ),
                )
            }
        }
        (Some((p, pmax)), _) => Finding::new(
            "link",
            Severity::Pass,
            format!("{cur}, its maximum (the {} {} supports {pmax})", p.role, p.address),
        ),
        (None, Some(_)) => Finding::new("link", Severity::Pass, format!("{cur}, its maximum")),
    }
}

fn aer(c: &Ctx) -> Finding {
    let Some(a) = &c.info.aer else {
        return Finding::new("aer", Severity::Info, "no AER counters in sysfs (no AER capability, or not exposed)");
    };
    let n = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    let mut ev = format!("correctable {}, non-fatal {}, fatal {}", n(a.correctable), n(a.nonfatal), n(a.fatal));
    let total = a.correctable.unwrap_or(0) + a.nonfatal.unwrap_or(0) + a.fatal.unwrap_or(0);
    if total == 0 && a.nonzero.is_empty() {
        return Finding::new("aer", Severity::Pass, format!("no errors counted ({ev})"));
    }
    if !a.nonzero.is_empty() {
        let named: Vec<String> = a.nonzero.iter().map(|(k, v)| format!("{k} {v}")).collect();
        ev.push_str(&format!(" ({})", named.join(", ")));
    }
    Finding::new("aer", Severity::Warn, format!("errors counted since boot: {ev}")).fix(format!(
        "see whether they grow during a run (pcibench info {}); RxErr, BadTLP and BadDLLP point to signal \
         integrity: reseat the card or try another slot",
        c.addr
    ))
}
