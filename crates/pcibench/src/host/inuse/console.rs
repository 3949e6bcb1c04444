//! The console: the boot VGA device (`boot_vga`, drivers/pci/pci-sysfs.c: the device the firmware
//! drew on, whose memory efifb/simpledrm keep using) and framebuffers of the function
//! (/sys/class/graphics/fbN/device) while fbcon is bound to a virtual console
//! (/sys/class/vtconsole/vtconN/bind, Documentation/driver-api/console.rst).

use super::walk::{entries, name_of, resolve};
use super::{Holder, HolderKind, Scope};
use crate::host::state::read_trim;
use crate::Error;

pub(super) fn holders(scope: &Scope) -> Result<Vec<Holder>, Error> {
    let host = scope.host;
    let mut out = Vec::new();
    if read_trim(&scope.dir.join("boot_vga")).as_deref() == Some("1") {
        out.push(Holder {
            kind: HolderKind::Console,
            why: "it is the boot VGA device (boot_vga = 1): the firmware's and the kernel's console draw through it"
                .into(),
            // Nothing frees it while the system runs: choose another device.
            free: Vec::new(),
        });
    }
    let mut fbcon = Vec::new();
    for (name, p) in entries(&host.path("/sys/class/vtconsole"))? {
        let bound = read_trim(&p.join("bind")).as_deref() == Some("1");
        let is_fb = read_trim(&p.join("name")).is_some_and(|n| n.contains("frame buffer"));
        if bound && is_fb {
            fbcon.push(name);
        }
    }
    for (fb, link) in entries(&host.path("/sys/class/graphics"))? {
        if !fb.starts_with("fb") || fb == "fbcon" {
            continue;
        }
        let Some(real) = resolve(&link)? else { continue };
        let Some(dev) = resolve(&real.join("device"))? else { continue };
        if !dev.starts_with(&scope.dir) {
            continue;
        }
        let below = if name_of(&dev) != scope.addr && dev != scope.dir {
            format!(" (on {} below it)", name_of(&dev))
        } else {
            String::new()
        };
        if fbcon.is_empty() {
            continue;
        }
        out.push(Holder {
            kind: HolderKind::Console,
            why: format!("{fb} on it carries the text console (fbcon bound to {}){below}", fbcon.join(", ")),
            free: vec![format!("echo 0 > /sys/class/vtconsole/{}/bind", fbcon[0])],
        });
    }
    Ok(out)
}
