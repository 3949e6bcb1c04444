//! `pcibench link`: a link's target speed and a retrain, as fpga_sio's pcie_set_speed (after
//! alexforencich's pcie_set_speed.sh) and the kernel's pcie_retrain_link (drivers/pci/pci.c) do
//! it, at the downstream end of the link: an endpoint's or upstream port's link is trained by the
//! port above it (Retrain Link is reserved in endpoints and upstream ports, PCIe Base 6.0
//! §7.5.3.7). The Target Link Speed goes into the port's Link Control 2 (§7.5.3.19, bits 3:0) and
//! is read back (a port may hardwire it); a retrain sets Link Control's Retrain Link (bit 5) once
//! Link Training (Link Status bit 11) is clear, then waits for it to clear again (and, where the
//! port reports it, for Data Link Layer Link Active), bounded as the kernel bounds it (1 s).
//! Before and after: Link Status as read, the kernel's `current_link_speed`/`current_link_width`
//! and the AER counters of the port and the device, so a retrain that counted errors says so.
//! `setup`'s rules apply: nothing the running system uses below the port (`host::inuse`), no
//! more privilege than the caller, `--force` says what it overrides first.

use crate::host::state::device_dir;
use crate::host::Host;
use crate::pci::{config, PciAddress};
use crate::setup::{Change, SetupOptions};
use crate::{Error, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Offsets in the PCI Express capability (PCIe Base 6.0 §7.5.3).
const LNKCAP: usize = 0x0c;
const LNKCTL: usize = 0x10;
const LNKSTA: usize = 0x12;
const LNKCAP2: usize = 0x2c;
const LNKCTL2: usize = 0x30;
const LNKCTL_RL: u16 = 1 << 5;
const LNKSTA_LT: u16 = 1 << 11;
const LNKSTA_DLLLA: u16 = 1 << 13;
const LNKCAP_DLLLARC: u32 = 1 << 20;
const LNKCTL2_TLS: u16 = 0x000f;
/// How long a retrain may take (the kernel's PCIE_LINK_RETRAIN_TIMEOUT_MS).
pub const RETRAIN_WAIT: Duration = Duration::from_secs(1);

/// What to change (nothing: show the link).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkChange {
    /// Target Link Speed to set, as a generation (1 = 2.5 GT/s ... 6 = 64 GT/s).
    pub speed: Option<u8>,
    pub retrain: bool,
}

/// A port's link registers as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkRegs {
    pub link_status: u16,
    /// Current Link Speed and Negotiated Link Width from Link Status.
    pub gen: Option<u8>,
    pub width: u8,
    /// Link Training is set.
    pub training: bool,
    /// Target Link Speed in Link Control 2 (None: a version 1 capability has none).
    pub target: Option<u8>,
    /// Link Capabilities' Max Link Speed and Maximum Link Width.
    pub max_gen: Option<u8>,
    pub max_width: u8,
    /// Link Capabilities 2's Supported Link Speeds (generations), where it lists them.
    pub supported: Vec<u8>,
}

/// The kernel's view of a function's link (sysfs), and its AER counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Seen {
    pub address: String,
    pub current_link_speed: Option<String>,
    pub current_link_width: Option<String>,
    /// `severity:name` and count (`pci::aer::read_all`).
    pub aer: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    pub device: String,
    /// The port whose registers train the link (the device itself when it is a root or
    /// downstream port).
    pub port: String,
    pub asked: LinkChange,
    pub before: LinkRegs,
    /// Read again after a change; None when nothing was asked.
    pub after: Option<LinkRegs>,
    /// How long the retrain took to finish, in milliseconds.
    pub retrain_ms: Option<u64>,
    pub seen_before: Vec<Seen>,
    pub seen_after: Vec<Seen>,
    /// AER counters that grew meanwhile, in words.
    pub aer_grew: Vec<String>,
    pub steps: Vec<Change>,
    /// What the result means, in words (a link that trained below the target, and why).
    pub notes: Vec<String>,
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn gen_of(code: u32) -> Option<u8> {
    (1..=6).contains(&code).then_some(code as u8)
}

/// `Gen3 (8.0 GT/s)`.
pub fn gen_words(gen: Option<u8>) -> String {
    match gen.and_then(|g| crate::pci::link::gen_gts(g).map(|s| (g, s))) {
        Some((g, s)) => format!("Gen{g} ({s:.1} GT/s)"),
        None => "unknown speed".into(),
    }
}

/// A port's config space and where its PCI Express capability is.
struct Port {
    addr: PciAddress,
    path: PathBuf,
    cap: usize,
    version: u8,
}

impl Port {
    fn read(&self) -> Result<LinkRegs> {
        let b = crate::reset::read_config(&self.path, 256).map_err(|e| Error::io("cannot read", &self.path, e))?;
        let c = self.cap;
        let (Some(cap), Some(sta)) = (u32_at(&b, c + LNKCAP), u16_at(&b, c + LNKSTA)) else {
            return Err(Error::Device(format!("{}'s link registers are beyond its readable config space", self.addr)));
        };
        let cap2 = if self.version >= 2 { u32_at(&b, c + LNKCAP2).unwrap_or(0) } else { 0 };
        Ok(LinkRegs {
            link_status: sta,
            gen: gen_of(u32::from(sta & 0xf)),
            width: ((sta >> 4) & 0x3f) as u8,
            training: sta & LNKSTA_LT != 0,
            target: if self.version >= 2 {
                u16_at(&b, c + LNKCTL2).and_then(|v| gen_of(u32::from(v & LNKCTL2_TLS)))
            } else {
                None
            },
            max_gen: gen_of(cap & 0xf),
            max_width: ((cap >> 4) & 0x3f) as u8,
            supported: (1..=6u8).filter(|g| cap2 & (1 << g) != 0).collect(),
        })
    }

    fn word(&self, off: usize) -> Result<u16> {
        let b = crate::reset::read_config(&self.path, 256).map_err(|e| Error::io("cannot read", &self.path, e))?;
        u16_at(&b, self.cap + off).ok_or_else(|| Error::Device(format!("{}: register {off:#x} unreadable", self.addr)))
    }

    fn write(&self, opts: &SetupOptions, off: usize, v: u16) -> Result<()> {
        opts.system
            .write_at(&self.path, (self.cap + off) as u64, &v.to_le_bytes())
            .map_err(|e| Error::io("cannot write", &self.path, e))
    }
}

/// The port that trains `addr`'s link: the device itself for a root or downstream port, the port
/// above it for an endpoint or upstream port.
fn port_of(host: &Host, addr: &PciAddress) -> Result<Port> {
    let cfg_of = |a: &PciAddress| -> Result<(PathBuf, Vec<u8>)> {
        let p = device_dir(host, a).join("config");
        let b = crate::reset::read_config(&p, 256).map_err(|e| Error::io("cannot read", &p, e))?;
        if b.len() < 256 {
            return Err(Error::Refused(format!(
                "only {} bytes of {a}'s config space are readable: the link registers lie past 64 bytes, which the \
                 kernel shows root only: sudo pcibench link ...",
                b.len()
            )));
        }
        Ok((p, b))
    };
    if !device_dir(host, addr).is_dir() {
        return Err(Error::NoDevice(addr.to_string()));
    }
    let (path, b) = cfg_of(addr)?;
    let Some(p) = config::parse(&b).pcie else {
        return Err(Error::Unsupported(format!(
            "{addr} is not PCI Express (no PCI Express capability): it has no link to train"
        )));
    };
    let (port, path, b) = match p.port_type {
        "Root Port" | "Downstream Port" => (*addr, path, b),
        "Endpoint" | "Legacy Endpoint" | "Upstream Port" => {
            let real =
                std::fs::canonicalize(device_dir(host, addr)).map_err(|e| Error::io("cannot resolve", &path, e))?;
            let up = real.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).and_then(|n| n.parse().ok());
            let Some(up) = up else {
                return Err(Error::Unsupported(format!(
                    "{addr} has no port above it (it sits on a root bus): no link to train"
                )));
            };
            let (path, b) = cfg_of(&up)?;
            (up, path, b)
        }
        t => {
            return Err(Error::Unsupported(format!(
                "{addr} is a {t}: it has no link of its own to train (name the endpoint or the port of a link)"
            )))
        }
    };
    let Some(pc) = config::parse(&b).pcie else {
        return Err(Error::Unsupported(format!("{port}, the port above {addr}, is not PCI Express: no link to train")));
    };
    Ok(Port { addr: port, path, cap: pc.offset as usize, version: b[pc.offset as usize + 2] & 0x0f })
}

fn seen(host: &Host, a: &str) -> Seen {
    let dir = host.pci_devices_dir().join(a);
    let mut ignored = Vec::new();
    Seen {
        address: a.to_string(),
        current_link_speed: crate::file::read_trim(&dir.join("current_link_speed")),
        current_link_width: crate::file::read_trim(&dir.join("current_link_width")),
        aer: crate::pci::aer::read_all(&dir, &mut ignored),
    }
}

/// Show (`asked` empty) or change the link of `addr`.
pub fn link(host: &Host, addr: &PciAddress, asked: LinkChange, opts: &SetupOptions) -> Result<LinkReport> {
    let port = port_of(host, addr)?;
    let before = port.read()?;
    let mut ends = vec![port.addr.to_string()];
    if port.addr != *addr {
        ends.push(addr.to_string());
    }
    let seen_before: Vec<Seen> = ends.iter().map(|a| seen(host, a)).collect();
    let mut r = LinkReport {
        device: addr.to_string(),
        port: port.addr.to_string(),
        asked,
        before: before.clone(),
        after: None,
        retrain_ms: None,
        seen_before,
        seen_after: Vec::new(),
        aer_grew: Vec::new(),
        steps: Vec::new(),
        notes: Vec::new(),
    };
    if asked.speed.is_none() && !asked.retrain {
        return Ok(r);
    }
    if let Some(g) = asked.speed {
        check_speed(&port, &before, g)?;
    }
    crate::setup::refuse_elevated()?;
    let what = match (asked.speed, asked.retrain) {
        (Some(g), true) => format!("retrain the link of {} at Gen{g}", port.addr),
        (Some(g), false) => format!("set the target link speed of {} to Gen{g}", port.addr),
        (None, _) => format!("retrain the link of {}", port.addr),
    };
    r.steps.extend(crate::setup::guard(host, &port.addr, &what, opts)?);
    if let Some(g) = asked.speed {
        let ctl2 = port.word(LNKCTL2)?;
        port.write(opts, LNKCTL2, (ctl2 & !LNKCTL2_TLS) | u16::from(g))?;
        let now = port.word(LNKCTL2)? & LNKCTL2_TLS;
        if now != u16::from(g) {
            return Err(Error::Unsupported(format!(
                "{} kept Target Link Speed {} after Gen{g} was written to its Link Control 2 ({ctl2:#06x}): the port \
                 does not let software choose its speed (the field is hardwired); nothing else was changed",
                port.addr,
                gen_words(gen_of(u32::from(now)))
            )));
        }
        r.steps.push(Change::new(format!(
            "set {}'s Target Link Speed to {} (Link Control 2 {ctl2:#06x} -> {:#06x}; it was {})",
            port.addr,
            gen_words(Some(g)),
            (ctl2 & !LNKCTL2_TLS) | u16::from(g),
            gen_words(before.target)
        )));
        if !asked.retrain {
            r.notes.push(format!(
                "the link trains to it at its next training: add --retrain to retrain now (pcibench link {addr} --retrain \
                 --allow-retrain)"
            ));
        }
    }
    if asked.retrain {
        r.retrain_ms = Some(retrain(&port, opts, &mut r.steps)?);
    }
    let after = port.read()?;
    r.seen_after = ends.iter().map(|a| seen(host, a)).collect();
    r.aer_grew = grew(&r.seen_before, &r.seen_after);
    if asked.retrain {
        r.notes.extend(judge(&before, &after, asked.speed));
    }
    r.after = Some(after);
    Ok(r)
}

/// A speed the port cannot run is refused before anything is written (fpga_sio clamps it to the
/// maximum without saying; a user measuring Gen1 against Gen3 must know which ran).
fn check_speed(port: &Port, regs: &LinkRegs, g: u8) -> Result<()> {
    if port.version < 2 {
        return Err(Error::Unsupported(format!(
            "{} has a version 1 PCI Express capability: no Link Control 2, so no Target Link Speed to set",
            port.addr
        )));
    }
    let fits = match (regs.supported.is_empty(), regs.max_gen) {
        (false, _) => regs.supported.contains(&g),
        (true, Some(m)) => g <= m,
        (true, None) => false,
    };
    if fits {
        return Ok(());
    }
    let can: Vec<String> = if regs.supported.is_empty() {
        (1..=regs.max_gen.unwrap_or(0)).map(|g| format!("gen{g}")).collect()
    } else {
        regs.supported.iter().map(|g| format!("gen{g}")).collect()
    };
    Err(Error::usage(format!(
        "{} cannot run at Gen{g}: it supports {} (Link Capabilities{})",
        port.addr,
        if can.is_empty() { "no speed it names".to_string() } else { can.join(", ") },
        if regs.supported.is_empty() { "" } else { " 2" }
    )))
}

/// Retrain as pcie_retrain_link does; the time it took, in milliseconds.
fn retrain(port: &Port, opts: &SetupOptions, steps: &mut Vec<Change>) -> Result<u64> {
    // A retrain requested while one is in progress may be lost (the kernel waits first too).
    wait(port, opts, "before retraining", |s| s & LNKSTA_LT == 0)?;
    let was = port.word(LNKSTA)?;
    let ctl = port.word(LNKCTL)?;
    let start = Instant::now();
    port.write(opts, LNKCTL, ctl | LNKCTL_RL)?;
    steps.push(Change::new(format!("retrained {}'s link (Link Control {ctl:#06x} | Retrain Link 0x0020)", port.addr)));
    let b = crate::reset::read_config(&port.path, 256).map_err(|e| Error::io("cannot read", &port.path, e))?;
    // Data Link Layer Link Active is waited for where the port reports it (Link Capabilities) and
    // did so before: a port that claims the capability but never sets the bit on a working link
    // (QEMU's pcie-root-port) would otherwise fail every retrain.
    let dll = u32_at(&b, port.cap + LNKCAP).is_some_and(|c| c & LNKCAP_DLLLARC != 0) && was & LNKSTA_DLLLA != 0;
    wait(port, opts, "after Retrain Link", |s| s & LNKSTA_LT == 0 && (!dll || s & LNKSTA_DLLLA != 0))?;
    Ok(start.elapsed().as_millis() as u64)
}

fn wait(port: &Port, opts: &SetupOptions, when: &str, done: impl Fn(u16) -> bool) -> Result<()> {
    let bound = RETRAIN_WAIT.min(opts.timeout);
    let start = Instant::now();
    loop {
        let s = port.word(LNKSTA)?;
        if done(s) {
            return Ok(());
        }
        if start.elapsed() >= bound {
            let state = if s & LNKSTA_LT != 0 {
                "is still training"
            } else {
                "is not up again (Data Link Layer Link Active stays clear)"
            };
            return Err(Error::Device(format!(
                "{}'s link {state} {bound:?} {when} (Link Status {s:#06x}): see pcibench health {} and dmesg",
                port.addr, port.addr
            )));
        }
        opts.system.sleep(Duration::from_millis(1));
    }
}

/// What the retrain came to, in words: the speed and width it trained at against what was asked.
fn judge(before: &LinkRegs, after: &LinkRegs, asked: Option<u8>) -> Vec<String> {
    let mut v = Vec::new();
    let was = format!("{} x{}", gen_words(before.gen), before.width);
    let now = format!("{} x{}", gen_words(after.gen), after.width);
    v.push(if was == now {
        format!("the link trained at {now}, as before")
    } else {
        format!("the link trained at {now} (was {was})")
    });
    if let (Some(g), Some(got)) = (asked, after.gen) {
        if got < g {
            v.push(format!(
                "below the Gen{g} asked: the device at the other end, or the channel, limits it (pcibench info shows \
                 what both ends support)"
            ));
        } else if got > g {
            v.push(format!("above the Gen{g} asked: the port did not apply its Target Link Speed to this training"));
        }
    }
    if after.width == 0 {
        v.push("the link is down after the retrain (width 0): see pcibench health and dmesg".into());
    }
    v
}

/// AER counters that grew between two readings, in words.
fn grew(before: &[Seen], after: &[Seen]) -> Vec<String> {
    let mut v = Vec::new();
    for (b, a) in before.iter().zip(after) {
        for (k, n) in &a.aer {
            let was = b.aer.iter().find(|(x, _)| x == k).map_or(0, |(_, c)| *c);
            if *n > was && !k.contains("TOTAL_ERR") {
                v.push(format!("{}: {k} {was} -> {n}", a.address));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests;
