//! Checks on the device itself: presence, bound driver, command register bits, link training
//! and AER counters.

use super::{Ctx, Finding, Severity};
use crate::access::Via;
use crate::host::state::class_is_bridge;
use crate::pci::device::LinkStatus;

pub(super) fn exists(c: &Ctx) -> Finding {
    let i = &c.info;
    Finding::new(
        "device",
        Severity::Pass,
        format!("{} [{}] {} {}, {}", c.addr, i.ids(), i.vendor_label(), i.device_label(), i.class_name),
    )
}

pub(super) fn checks(c: &Ctx) -> Vec<Finding> {
    vec![driver(c), memory_space(c), bus_master(c)]
}

fn driver(c: &Ctx) -> Finding {
    let addr = c.addr;
    let mut f = match c.driver.as_deref() {
        None => {
            Finding::new("driver", Severity::Pass, "no driver bound: sysfs can reach the BARs; VFIO needs vfio-pci")
                .fix(format!("for VFIO bind it to vfio-pci: {}", c.setup_vfio()))
                .blocks(c.vfio, Some(c.setup_vfio()))
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
        }
    };
    if class_is_bridge(c.info.class_code) {
        // vfio_pci_core_register_device refuses anything but a type 0 header.
        f.evidence.push_str("; it is a bridge, which vfio-pci does not take");
        f.blocks.retain(|(v, _)| *v == Via::Sysfs);
        f = f.blocks(c.vfio, None);
    }
    f
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
    if !LinkStatus::degraded(l) {
        return Finding::new("link", Severity::Pass, format!("{cur}, its maximum"));
    }
    let model = c.info.model.as_ref().map(|m| format!(": the link model allows {:.0} MB/s writes", m.write_mbps));
    let parent =
        c.info.parent.as_deref().map(|p| format!(", and the upstream port {p} (lspci -vv -s {p})")).unwrap_or_default();
    Finding::new(
        "link",
        Severity::Warn,
        format!("trained at {cur}, below its maximum {max}{}", model.unwrap_or_default()),
    )
    .fix(format!(
        "reseat the card or use a slot wired for the full width; check the firmware's link-speed setting{parent}"
    ))
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
