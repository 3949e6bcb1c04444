//! `pcibench reset` and `pcibench link` as text: what the kernel offers, what was done (as
//! `setup` reports its changes), and each function or link as read afterwards.

use crate::linkctl::{gen_words, LinkRegs, LinkReport};
use crate::reset::{Offered, ResetReport};
use crate::text::escape_controls as esc;
use std::fmt::Write;

/// The reset kinds `reset --list` shows.
pub fn offered_text(o: &Offered) -> String {
    let mut s = String::new();
    let d = &o.device;
    let _ = writeln!(s, "{d}: driver {}", o.driver.as_deref().unwrap_or("none"));
    let kernel = match (&o.kernel_methods, o.kernel_reset) {
        (Some(m), true) => format!("yes (sysfs reset; reset_method: {})", m.join(" ")),
        (None, true) => "yes (sysfs reset; no reset_method before Linux 5.15)".into(),
        (_, false) => "none (no sysfs reset attribute)".into(),
    };
    let _ = writeln!(s, "  kernel:  {kernel}");
    let _ = writeln!(
        s,
        "  vfio:    {}",
        if o.vfio { "yes (bound to vfio-pci: VFIO_DEVICE_RESET)" } else { "no (not bound to vfio-pci)" }
    );
    let port = match &o.port {
        Some(p) => format!(
            "{p}, a secondary bus reset {} (resets {})",
            if o.port_by_kernel { "by the kernel (reset_subordinate)" } else { "by pcibench (Bridge Control)" },
            o.port_resets.join(", ")
        ),
        None => "none (on a root bus)".into(),
    };
    let _ = writeln!(s, "  port:    {port}");
    let _ = match (&o.auto, &o.no_reset) {
        (Some(m), _) => writeln!(s, "  auto:    {m}: sudo pcibench reset {d} --allow-reset"),
        (None, why) => writeln!(s, "  auto:    none: {}", why.as_deref().unwrap_or("")),
    };
    s
}

pub fn reset_text(r: &ResetReport) -> String {
    let mut s = String::new();
    let d = &r.device;
    for c in &r.steps {
        let _ = writeln!(s, "{d}: {}", esc(&c.what));
        if let Some(w) = &c.warning {
            let _ = writeln!(s, "WARNING: {}", esc(w));
        }
    }
    let _ = writeln!(s, "{d}: reset by {} ({})", r.method, r.how);
    for a in &r.after {
        let cmd = a.command.map(|c| format!(", command {c:#06x}")).unwrap_or_default();
        let state = if a.answers { "answers" } else { "DOES NOT ANSWER (see pcibench health)" };
        let _ = writeln!(s, "  after: {} {state} ({}{cmd})", a.address, a.ids);
    }
    s
}

fn regs_line(r: &LinkRegs) -> String {
    let target = r.target.map(|g| format!(", target {}", gen_words(Some(g)))).unwrap_or_default();
    let training = if r.training { ", training" } else { "" };
    format!(
        "{} x{} (Link Status {:#06x}{training}{target}; max {} x{})",
        gen_words(r.gen),
        r.width,
        r.link_status,
        gen_words(r.max_gen),
        r.max_width
    )
}

pub fn link_text(r: &LinkReport) -> String {
    let mut s = String::new();
    let who = if r.port == r.device { r.port.clone() } else { format!("{} (the port above {})", r.port, r.device) };
    let _ = writeln!(s, "link of {who}");
    let _ = writeln!(s, "  before: {}", regs_line(&r.before));
    for c in &r.steps {
        let _ = writeln!(s, "  {}", esc(&c.what));
        if let Some(w) = &c.warning {
            let _ = writeln!(s, "WARNING: {}", esc(w));
        }
    }
    if let Some(a) = &r.after {
        let took = r.retrain_ms.map(|ms| format!(" ({ms} ms to train)")).unwrap_or_default();
        let _ = writeln!(s, "  after:  {}{took}", regs_line(a));
    }
    let seen = if r.after.is_some() { &r.seen_after } else { &r.seen_before };
    for k in seen {
        let _ = writeln!(
            s,
            "  kernel: {} current_link_speed {}, current_link_width {}",
            k.address,
            k.current_link_speed.as_deref().unwrap_or("-"),
            k.current_link_width.as_deref().unwrap_or("-")
        );
    }
    if r.after.is_some() {
        let aer = if r.aer_grew.is_empty() { "no AER counter grew".to_string() } else { r.aer_grew.join("; ") };
        let _ = writeln!(s, "  AER:    {}", esc(&aer));
    }
    for n in &r.notes {
        let _ = writeln!(s, "  note:   {n}");
    }
    s
}
