//! A model's `describe`, checked and turned into what the server serves: the function's
//! `DeviceInfo` (ids, class, BARs, link), its interrupts (`sim::irq::Offers`) and capabilities of
//! its own. A description that contradicts itself (a BAR size that is no power of two, a 64-bit
//! BAR without the slot for its upper half, an MSI-X table outside its BAR, capabilities over
//! pcibench's) is refused with one line naming the field.

use super::abi;
use crate::pci::device::{Command, DeviceInfo, LinkEnd, LinkStatus};
use crate::pci::resource::{Bar, BarKind};
use crate::sim::irq::Offers;
use crate::{Error, Result};

/// Where capabilities of the model's own may start: pcibench's end at 0xac (MSI at 0x48, MSI-X at
/// 0x60, PCI Express at 0x70, 0x3c bytes: `sim::config_space`).
pub const OWN_CAPS_START: u32 = 0xb0;
/// The config space served (the vfio-user region 7 of pcibench's server).
const CONFIG_SIZE: u32 = 256;
/// The most MSI-X vectors a function has (Table Size is 11 bits: PCI Local Bus 3.0 §6.8.2.3).
const MAX_MSIX: u32 = 2048;

/// A description checked.
#[derive(Debug, Clone)]
pub struct Described {
    pub info: DeviceInfo,
    pub offers: Option<Offers>,
    /// The BAR holding the MSI-X table (the first BAR where there is none).
    pub msix_bar: u8,
    pub own_caps: Option<(u8, Vec<u8>)>,
    /// The most vectors of any kind it has: what it may raise.
    pub vectors: u32,
}

/// The bytes behind `describe`'s pointers, copied by the caller (on the model thread).
pub struct Raw {
    pub dev: abi::Device,
    pub config: Vec<u8>,
    pub name: String,
}

/// What contradicts what, in words.
type Bad<T> = std::result::Result<T, String>;

/// Check `raw` (from the model file `file`) and build what is served.
pub fn check(raw: &Raw, file: &str) -> Result<Described> {
    checked(raw, file).map_err(|what| {
        Error::Refused(format!(
            "the model {file}'s describe contradicts itself: {what}: fix its pcibench_model_describe"
        ))
    })
}

fn checked(raw: &Raw, fallback_name: &str) -> Bad<Described> {
    let d = &raw.dev;
    if d.vendor_id == 0xffff || d.vendor_id == 0 {
        return Err(format!(
            "vendor_id {:#06x} is what an absent function reads (PCI Local Bus 3.0 §6.2.1)",
            d.vendor_id
        ));
    }
    if d.class_code > 0xff_ffff {
        return Err(format!("class_code {:#x} is wider than 24 bits", d.class_code));
    }
    let bars = bars(d)?;
    let link = link(d)?;
    let offers = interrupts(d, &bars)?;
    let own_caps = own_caps(d, &raw.config)?;
    let name = if raw.name.trim().is_empty() { fallback_name.to_string() } else { raw.name.clone() };
    let name = crate::text::one_line(&crate::text::clip(name.trim(), 80));
    let mut info = DeviceInfo {
        address: name.clone(),
        simulated: true,
        vendor_id: d.vendor_id,
        vendor_name: None,
        device_id: d.device_id,
        device_name: Some(name),
        subsystem_vendor_id: d.subsystem_vendor_id,
        subsystem_device_id: d.subsystem_id,
        subsystem_name: None,
        class_code: d.class_code,
        class_name: crate::pci::names::class(d.class_code),
        revision: d.revision,
        driver: None,
        iommu_group: None,
        numa_node: None,
        parent: None,
        command: Some(Command::from_raw(crate::pci::config::CMD_MEMORY)),
        bars,
        expansion_rom: None,
        link,
        model: None,
        aer: None,
        config_bytes: CONFIG_SIZE as usize,
        capabilities: Vec::new(),
        extended_capabilities: Vec::new(),
        interrupts: None,
        warnings: Vec::new(),
        served: None,
        datapath: None,
        physical_slot: None,
    };
    info.fill_model();
    let vectors = offers.map_or(0, |o| o.msix.max(o.msi).max(o.intx as u32));
    let msix_bar = if d.msix_vectors > 0 { d.msix_bar as u8 } else { info.bars.first().map_or(0, |b| b.index) };
    Ok(Described { info, offers, msix_bar, own_caps, vectors })
}

fn bars(d: &abi::Device) -> Bad<Vec<Bar>> {
    let mut out = Vec::new();
    let mut upper_of = None;
    for (i, b) in d.bars.iter().enumerate() {
        if let Some(lower) = upper_of.take() {
            if b.size != 0 || b.flags != 0 {
                return Err(format!("BAR{i} is the upper half of 64-bit BAR{lower}, yet describes a BAR of its own"));
            }
            continue;
        }
        if b.size == 0 {
            if b.flags != 0 {
                return Err(format!("BAR{i} has flags {:#x} but size 0 (no BAR)", b.flags));
            }
            continue;
        }
        let known = abi::BAR_IO | abi::BAR_64 | abi::BAR_PREFETCH;
        if b.flags & !known != 0 || b.reserved != 0 {
            return Err(format!("BAR{i} has unknown flags {:#x} (or reserved {:#x} is not 0)", b.flags, b.reserved));
        }
        let io = b.flags & abi::BAR_IO != 0;
        let (is_64bit, prefetchable) = (b.flags & abi::BAR_64 != 0, b.flags & abi::BAR_PREFETCH != 0);
        if !b.size.is_power_of_two() || b.size < if io { 4 } else { 16 } {
            return Err(format!(
                "BAR{i} size {:#x} is not a power of two of at least {} bytes (PCI Local Bus 3.0 §6.2.5.1)",
                b.size,
                if io { 4 } else { 16 }
            ));
        }
        if io && (is_64bit || prefetchable || b.size > 256) {
            return Err(format!(
                "BAR{i} is I/O space, which is 32-bit, not prefetchable and at most 256 bytes (flags {:#x}, size {:#x})",
                b.flags, b.size
            ));
        }
        if !is_64bit && b.size > 1 << 31 {
            return Err(format!("BAR{i} is 32-bit but {:#x} bytes: set PCIBENCH_BAR_64", b.size));
        }
        if is_64bit {
            if i == 5 {
                return Err("BAR5 is 64-bit, but there is no BAR6 for its upper half".into());
            }
            upper_of = Some(i);
        }
        out.push(Bar {
            index: i as u8,
            start: 0,
            size: b.size,
            kind: if io { BarKind::Io } else { BarKind::Memory },
            is_64bit,
            prefetchable,
            flags: 0,
            files: Vec::new(),
        });
    }
    Ok(out)
}

fn link(d: &abi::Device) -> Bad<Option<LinkStatus>> {
    match (d.link_gen, d.link_width) {
        (0, 0) => Ok(None),
        (g @ 1..=6, w @ (1 | 2 | 4 | 8 | 12 | 16 | 32)) => {
            let speed = crate::pci::link::speed_name(g);
            let mut l = LinkStatus::new(
                (speed.clone(), Some(g), Some(w)),
                (speed, Some(g), Some(w)),
                (Some(128), Some(128), Some(512)),
                Some("Endpoint".into()),
            );
            (l.limit_gen, l.limit_width) = (Some(g), Some(w));
            (l.speed_limited_by, l.width_limited_by) = (Some(LinkEnd::Device), Some(LinkEnd::Device));
            Ok(Some(l))
        }
        (g, w) => Err(format!(
            "link_gen {g} and link_width {w}: a PCI Express link is generation 1-6 and 1, 2, 4, 8, 12, 16 or 32 lanes (both 0: conventional PCI)"
        )),
    }
}

fn interrupts(d: &abi::Device, bars: &[Bar]) -> Bad<Option<Offers>> {
    if d.intx > 1 {
        return Err(format!("intx is {}: 1 for INTA#, 0 for none", d.intx));
    }
    if !matches!(d.msi_vectors, 0 | 1 | 2 | 4 | 8 | 16 | 32) {
        return Err(format!(
            "msi_vectors {} is not 0, 1, 2, 4, 8, 16 or 32 (Multiple Message Capable, PCI Local Bus 3.0 §6.8.1.3)",
            d.msi_vectors
        ));
    }
    if d.msix_vectors > MAX_MSIX {
        return Err(format!("msix_vectors {} is above MSI-X's {MAX_MSIX}", d.msix_vectors));
    }
    if d.msix_vectors > 0 {
        let n = d.msix_vectors as u64;
        let Some(bar) = bars.iter().find(|b| b.index as u32 == d.msix_bar && b.kind == BarKind::Memory) else {
            return Err(format!("msix_bar {} is not one of its memory BARs", d.msix_bar));
        };
        let (table, pba) = (d.msix_table_offset as u64, d.msix_pba_offset as u64);
        let (table_end, pba_end) = (table + 16 * n, pba + n.div_ceil(64) * 8);
        if table % 8 != 0 || pba % 8 != 0 {
            return Err(format!(
                "the MSI-X table ({table:#x}) and PBA ({pba:#x}) offsets must be 8-byte aligned (§6.8.2.4)"
            ));
        }
        if table_end > bar.size || pba_end > bar.size {
            return Err(format!(
                "the MSI-X table ({table:#x}..{table_end:#x}) or PBA ({pba:#x}..{pba_end:#x}) runs past BAR{} ({:#x} bytes)",
                bar.index, bar.size
            ));
        }
        if table < pba_end && pba < table_end {
            return Err(format!(
                "the MSI-X table ({table:#x}..{table_end:#x}) and PBA ({pba:#x}..{pba_end:#x}) overlap"
            ));
        }
    }
    if d.msix_vectors == 0 && d.msi_vectors == 0 && d.intx == 0 {
        return Ok(None);
    }
    Ok(Some(Offers {
        msix: d.msix_vectors,
        msi: d.msi_vectors,
        intx: d.intx == 1,
        // The header offers INTA# only (pcibench_model.h: `intx`).
        pin: 1,
        // Every function since PCI 2.3 masks INTx with Interrupt Disable.
        intx_maskable: true,
        msix_table: d.msix_table_offset,
        msix_pba: d.msix_pba_offset,
    }))
}

fn own_caps(d: &abi::Device, bytes: &[u8]) -> Bad<Option<(u8, Vec<u8>)>> {
    if d.config_len == 0 {
        return Ok(None);
    }
    let (at, len) = (d.config_offset, d.config_len);
    if d.config.is_null() {
        return Err(format!("config_len is {len} but config is NULL"));
    }
    if at < OWN_CAPS_START || at % 4 != 0 || at + len > CONFIG_SIZE {
        return Err(format!(
            "its capabilities at {at:#x}, {len} bytes, must start DWORD-aligned at {OWN_CAPS_START:#x} or above and end by {CONFIG_SIZE:#x}"
        ));
    }
    // Walk the list the bytes hold: each next pointer 0 or inside them, DWORD-aligned, no loop.
    let (start, end) = (at as usize, (at + len) as usize);
    let mut seen = Vec::new();
    let mut cap = start;
    loop {
        if cap < start || cap + 2 > end || cap % 4 != 0 || seen.contains(&cap) {
            return Err(format!(
                "its capability list reaches {cap:#x}, outside its bytes {start:#x}..{end:#x}, unaligned or in a loop"
            ));
        }
        seen.push(cap);
        match bytes[cap - start + 1] as usize {
            0 => break,
            next => cap = next,
        }
    }
    Ok(Some((at as u8, bytes.to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edu() -> Raw {
        let mut dev = abi::Device { vendor_id: 0x1234, device_id: 0x11e8, class_code: 0xff0000, ..Default::default() };
        dev.bars[0].size = 1 << 20;
        dev.intx = 1;
        dev.msi_vectors = 1;
        Raw { dev, config: Vec::new(), name: "edu".into() }
    }

    fn refused(raw: &Raw) -> String {
        let e = check(raw, "x.so").unwrap_err().to_string();
        assert!(e.starts_with("the model x.so's describe contradicts itself: "), "{e}");
        e
    }

    #[test]
    fn a_plain_description_is_served_as_given() {
        let d = check(&edu(), "edu.so").unwrap();
        assert_eq!((d.info.vendor_id, d.info.device_id, d.info.class_code), (0x1234, 0x11e8, 0xff0000));
        let b = &d.info.bars[0];
        assert_eq!((b.index, b.size, b.kind, b.is_64bit, b.prefetchable), (0, 1 << 20, BarKind::Memory, false, false));
        assert!(d.info.link.is_none(), "no link: conventional PCI");
        let o = d.offers.unwrap();
        assert_eq!((o.msix, o.msi, o.intx, d.vectors), (0, 1, true, 1));
        assert_eq!(d.info.device_name.as_deref(), Some("edu"));
    }

    #[test]
    fn contradictions_are_named() {
        let mut r = edu();
        r.dev.bars[0].size = 3000;
        assert!(refused(&r).contains("BAR0 size 0xbb8 is not a power of two"));
        let mut r = edu();
        r.dev.bars[5] = abi::Bar { size: 4096, flags: abi::BAR_64, reserved: 0 };
        assert!(refused(&r).contains("BAR5 is 64-bit, but there is no BAR6"));
        let mut r = edu();
        r.dev.bars[0].flags = abi::BAR_64;
        r.dev.bars[1].size = 4096;
        assert!(refused(&r).contains("BAR1 is the upper half of 64-bit BAR0"));
        let mut r = edu();
        r.dev.msi_vectors = 3;
        assert!(refused(&r).contains("msi_vectors 3"));
        let mut r = edu();
        r.dev.msix_vectors = 4;
        r.dev.msix_bar = 2;
        assert!(refused(&r).contains("msix_bar 2 is not one of its memory BARs"));
        r.dev.msix_bar = 0;
        r.dev.msix_table_offset = 0xfffd0;
        r.dev.msix_pba_offset = 0x1000;
        assert!(refused(&r).contains("runs past BAR0"));
        r.dev.msix_table_offset = 0x1000;
        assert!(refused(&r).contains("overlap"));
        let mut r = edu();
        r.dev.vendor_id = 0xffff;
        assert!(refused(&r).contains("vendor_id 0xffff"));
        let mut r = edu();
        r.dev.link_gen = 3;
        assert!(refused(&r).contains("link_gen 3 and link_width 0"));
    }

    #[test]
    fn own_capabilities_must_keep_to_their_bytes() {
        let mut r = edu();
        // A vendor-specific capability (id 9) at 0xb0 followed by one at 0xc0, then the end.
        r.config = vec![0; 0x20];
        (r.config[0], r.config[1], r.config[0x10], r.config[0x11]) = (0x09, 0xc0, 0x09, 0x00);
        r.dev.config = r.config.as_ptr();
        (r.dev.config_offset, r.dev.config_len) = (0xb0, 0x20);
        assert_eq!(check(&r, "x").unwrap().own_caps.unwrap().0, 0xb0);
        r.config[0x11] = 0xb0;
        assert!(refused(&r).contains("in a loop"));
        r.config[0x11] = 0xe0;
        assert!(refused(&r).contains("outside its bytes"));
        r.dev.config_offset = 0x60;
        assert!(refused(&r).contains("must start DWORD-aligned at 0xb0"));
    }
}
