//! `pcibench list` lines and the `pcibench info` block.

use crate::dma::engines::Detected;
use crate::pci::DeviceInfo;
use crate::units::human_size;
use std::fmt::Write;

/// The `DMA engine:` lines of the `info` block, one entry per engine found on the device.
pub fn engines_text(engines: &[Detected]) -> String {
    let mut s = String::new();
    for e in engines {
        let _ = writeln!(s, "  DMA engine:    {}", e.summary.replace('\n', "\n                 "));
    }
    s
}

/// One lspci-like line: `0000:00:04.0 Unclassified device [00ff]: Vendor Device [1234:11e8] (rev 10) driver=none`.
pub fn list_line(d: &DeviceInfo) -> String {
    let mut s = format!(
        "{:<12} {} [{:04x}]: {} {} [{}]",
        d.address,
        d.class_name,
        d.class_code >> 8,
        d.vendor_label(),
        d.device_label(),
        d.ids()
    );
    if d.revision != 0 {
        let _ = write!(s, " (rev {:02x})", d.revision);
    }
    if d.simulated {
        s.push_str(" (simulated)");
    } else {
        let _ = write!(s, " driver={}", d.driver.as_deref().unwrap_or("none"));
    }
    s
}

fn gen_width(gen: Option<u8>, width: Option<u8>) -> String {
    let g = gen.map(|g| format!("Gen{g}")).unwrap_or_else(|| "Gen?".into());
    let w = width.map(|w| format!("x{w}")).unwrap_or_else(|| "x?".into());
    format!("{g} {w}")
}

/// The `pcibench info` block (warnings are returned separately, for stderr).
pub fn info_text(d: &DeviceInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", list_line(d));
    if d.simulated {
        let _ = writeln!(
            s,
            "  SIMULATED CARD: its BARs are host memory; its figures are host-memory figures, not PCIe figures"
        );
    }
    // lspci -v's words ("Red Hat, Inc. Device 1100"), then the ids as lspci -nn adds them.
    let ids = format!("{:04x}:{:04x}", d.subsystem_vendor_id, d.subsystem_device_id);
    let _ = match d.subsystem_name.as_deref() {
        Some(n) => writeln!(s, "  Subsystem:     {n} [{ids}]"),
        None => writeln!(s, "  Subsystem:     {ids}"),
    };
    let _ = writeln!(s, "  Class:         {:06x} {}", d.class_code, d.class_name);
    let _ = writeln!(s, "  Revision:      {:02x}", d.revision);
    let _ = writeln!(s, "  Driver:        {}", d.driver.as_deref().unwrap_or("none"));
    let _ = writeln!(
        s,
        "  IOMMU group:   {}",
        d.iommu_group.map(|g| g.to_string()).unwrap_or_else(|| "none (no IOMMU, or not in a group)".into())
    );
    let _ = writeln!(s, "  NUMA node:     {}", d.numa_node.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()));
    if let Some(p) = &d.parent {
        let _ = writeln!(s, "  Upstream:      {p}");
    }
    if let Some(slot) = &d.physical_slot {
        let _ = writeln!(s, "  Physical slot: {}", slot.words());
    }
    match &d.command {
        Some(c) => {
            let _ = writeln!(s, "  Control:       {} (command {:#06x})", c.describe(), c.raw);
        }
        None => {
            let _ = writeln!(s, "  Control:       unknown (config space not readable)");
        }
    }
    bars_text(d, &mut s);
    link_text(d, &mut s);
    if let Some(m) = &d.model {
        let assumed = if m.assumed_payload_sizes { " (MPS/MRRS unknown: assumed 128/512)" } else { "" };
        let _ = writeln!(
            s,
            "  Link model:    raw {:.0} MB/s per direction; write limit {:.0} MB/s, read limit {:.0} MB/s for transfers >= 1 MiB{assumed}",
            m.raw_mbps, m.write_mbps, m.read_mbps
        );
    }
    if let Some(p) = &d.datapath {
        let _ = writeln!(
            s,
            "  Engine model:  {} MB/s per direction, each {}-byte descriptor fetched over it too ({}): what bounds its DMA",
            crate::units::group_thousands(p.mbps.round() as u64),
            p.desc_bytes,
            p.basis
        );
    }
    if let Some(a) = &d.aer {
        let n = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "n/a".into());
        let mut line = format!("correctable {}, nonfatal {}, fatal {}", n(a.correctable), n(a.nonfatal), n(a.fatal));
        if !a.nonzero.is_empty() {
            let parts: Vec<String> = a.nonzero.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = write!(line, " ({})", parts.join(", "));
        }
        let _ = writeln!(s, "  AER:           {line}");
    }
    if !d.capabilities.is_empty() {
        let caps: Vec<String> = d.capabilities.iter().map(|c| format!("[{:02x}] {}", c.offset, c.name)).collect();
        let _ = writeln!(s, "  Capabilities:  {}", caps.join(", "));
    }
    if !d.extended_capabilities.is_empty() {
        let caps: Vec<String> = d
            .extended_capabilities
            .iter()
            .map(|c| format!("[{:03x}] {} v{}", c.offset, c.name, c.version.unwrap_or(0)))
            .collect();
        let _ = writeln!(s, "  Extended caps: {}", caps.join(", "));
    }
    if let Some(i) = &d.interrupts {
        interrupts_text(i, &mut s);
    }
    s
}

/// The `Interrupts:` line, in lspci -vvv's terms: MSI-X with its table and PBA (BAR and offset),
/// MSI, the INTx pin.
fn interrupts_text(i: &crate::pci::intr::IrqCaps, s: &mut String) {
    let mut kinds = Vec::new();
    if let Some(x) = i.msix {
        kinds.push(format!(
            "MSI-X {} vectors (table BAR{} at {:#x}, PBA BAR{} at {:#x})",
            x.vectors, x.table_bar, x.table_offset, x.pba_bar, x.pba_offset
        ));
    }
    if let Some(m) = i.msi {
        let bits = if m.addr64 { "64-bit" } else { "32-bit" };
        kinds.push(format!("MSI {} vector{} ({bits})", m.vectors, if m.vectors == 1 { "" } else { "s" }));
    }
    if let Some(pin) = i.pin_name() {
        kinds.push(format!("INTx pin {}", &pin[3..]));
    }
    if !kinds.is_empty() {
        let _ = writeln!(s, "  Interrupts:    {}", kinds.join(", "));
    }
}

/// One line per BAR.
fn bars_text(d: &DeviceInfo, s: &mut String) {
    if d.bars.is_empty() {
        let _ = writeln!(s, "  BARs:          none");
    }
    for b in &d.bars {
        let start = if d.simulated { "host memory".to_string() } else { format!("{:#x}", b.start) };
        let files = if d.simulated {
            "files: n/a (simulated)".to_string()
        } else if b.files.is_empty() {
            "files: none".to_string()
        } else {
            format!("files: {}", b.files.join(" "))
        };
        let _ = writeln!(
            s,
            "  BAR{}: {start} size {} ({:#x}) {} {files}",
            b.index,
            human_size(b.size),
            b.size,
            b.describe()
        );
    }
    if let Some(rom) = &d.expansion_rom {
        let _ = writeln!(s, "  {}", rom.rom_line());
    }
}

/// The link, its verdict against the partner (lspci's rule), and the payload sizes.
fn link_text(d: &DeviceInfo, s: &mut String) {
    if let Some(l) = &d.link {
        let cur = gen_width(l.current_gen, l.current_width);
        let max = gen_width(l.max_gen, l.max_width);
        let speed = l.current_speed.as_deref().map(|x| format!(" ({x})")).unwrap_or_default();
        let verdict = if l.degraded {
            let limit = gen_width(l.limit_gen, l.limit_width);
            let who = l.limited_by_words().unwrap_or_else(|| "this device".into());
            if l.partner.is_some() {
                format!(" -- DEGRADED: below {limit}, what both ends support (the limit is set by {who})")
            } else {
                format!(" -- DEGRADED: below {limit}, its own maximum (its link partner is unknown)")
            }
        } else {
            String::new()
        };
        let _ = writeln!(s, "  Link:          {cur}{speed}, max {max}{verdict}");
        if let Some(p) = &l.partner {
            let who = l.limited_by_words().unwrap_or_default();
            let _ = writeln!(
                s,
                "  Link partner:  {} ({}), max {}; the link can train to {} (set by {who})",
                p.address,
                p.role,
                gen_width(p.max_gen, p.max_width),
                gen_width(l.limit_gen, l.limit_width)
            );
        } else if l.limit_gen.is_none() && l.limit_width.is_none() && !d.simulated {
            let _ = writeln!(
                s,
                "  Link partner:  none found below it (an empty slot, or the link is down): no verdict on its own maximum"
            );
        }
        let mps = l.mps.map(|m| m.to_string()).unwrap_or_else(|| "unknown".into());
        let sup = l.mps_supported.map(|m| format!(" (supports {m})")).unwrap_or_default();
        let mrrs = l.mrrs.map(|m| m.to_string()).unwrap_or_else(|| "unknown".into());
        let _ = writeln!(s, "  Payload:       MPS {mps}{sup}, MRRS {mrrs}");
    } else {
        let _ = writeln!(s, "  Link:          not PCI Express (no link status)");
    }
}

/// What `info` says of a device that is a model served over vfio-user: the server's protocol and
/// capabilities, which BARs it maps, interrupts, reset. Empty for any other device.
pub fn served_text(d: &DeviceInfo) -> String {
    let Some(v) = &d.served else { return String::new() };
    let mut s = String::new();
    let who = match (&v.pcibench_card, &v.claim_refused) {
        (Some(card), _) => format!("pcibench's simulated card {card}, served by pcibench serve"),
        (None, Some(why)) => format!("a device model in another process ({why}: not taken as a simulated card)"),
        (None, None) => "a device model in another process".to_string(),
    };
    let _ = writeln!(s, "  vfio-user:     {who}");
    let _ = writeln!(s, "  Server:        protocol {}, socket {}", v.protocol, v.socket);
    let _ = writeln!(s, "  Capabilities:  {}", v.capabilities);
    let mut mapped: Vec<String> = v.mapped_bars.iter().map(|b| format!("BAR{b}")).collect();
    for (b, areas) in &v.partly_mapped {
        let a: Vec<String> = areas.iter().map(|&(o, n)| format!("{o:#x}-{:#x}", o + n - 1)).collect();
        mapped.push(format!("BAR{b} in part ({})", a.join(", ")));
    }
    let mapped = if mapped.is_empty() {
        "none (every BAR access is a region read/write message)".to_string()
    } else {
        mapped.join(", ") + " (the rest: region read/write messages)"
    };
    let _ = writeln!(s, "  Mapped BARs:   {mapped}");
    for (b, why) in &v.unmapped {
        let _ = writeln!(s, "                 BAR{b} not mapped: {why}");
    }
    let irqs = if v.interrupts.is_empty() {
        "none".to_string()
    } else {
        v.interrupts.iter().map(|(k, n)| format!("{k} x{n}")).collect::<Vec<_>>().join(", ")
    };
    let _ = writeln!(s, "  Interrupts:    {irqs}");
    let _ = writeln!(s, "  Reset:         {}", if v.resettable { "yes" } else { "no" });
    s
}
