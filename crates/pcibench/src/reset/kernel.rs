//! The kernel's own function reset through sysfs (Documentation/ABI/testing/sysfs-bus-pci):
//! writing 1 to `reset` runs pci_reset_function (drivers/pci/pci.c), which saves the function's
//! config space, tries the methods `reset_method` lists in order, and restores it. One method is
//! chosen by writing its name to `reset_method` first (reset_method_store); the list read before
//! is written back afterwards, whatever happened, so the function keeps the methods it had.

use super::{Method, Offered};
use crate::host::state::device_dir;
use crate::host::Host;
use crate::pci::PciAddress;
use crate::setup::{write_attr, Change, SetupOptions};
use crate::{Error, Result};

pub(super) fn reset(
    host: &Host,
    addr: &PciAddress,
    method: Method,
    o: &Offered,
    opts: &SetupOptions,
    steps: &mut Vec<Change>,
) -> Result<String> {
    let dir = device_dir(host, addr);
    if !o.kernel_reset {
        let port = match &o.port {
            Some(p) => format!(
                "; a bus reset of its port {p} reaches it (pcibench reset {addr} --method port --allow-reset, which \
                 resets {} as well)",
                others(o, addr)
            ),
            None => String::new(),
        };
        return Err(Error::Unsupported(format!(
            "the kernel offers no reset for {addr} ({} has no reset attribute: no FLR, PM or bus reset it can do \
             alone){port}",
            dir.display()
        )));
    }
    let Method::Named(m) = method else {
        write_attr(opts, &dir.join("reset"), "1").map_err(|e| explain(addr, e))?;
        return Ok(format!("the kernel's reset (sysfs reset; its methods: {})", super::methods_words(o)));
    };
    let Some(before) = &o.kernel_methods else {
        return Err(Error::Unsupported(format!(
            "this kernel has no reset_method for {addr} (Linux 5.15 added it): choosing {} needs it; --method kernel \
             resets it the kernel's way",
            m.name()
        )));
    };
    let file = dir.join("reset_method");
    // The kernel refuses a method the function cannot do (EINVAL): say which it can.
    opts.system.write(&file, m.name()).map_err(|e| {
        Error::Unsupported(format!(
            "the kernel does not offer {} for {addr} (writing it to {} failed: {e}); it offers: {}",
            m.name(),
            file.display(),
            super::methods_words(o)
        ))
    })?;
    steps.push(Change::new(format!("set reset_method to {} for this reset (it was: {})", m.name(), before.join(" "))));
    let done = write_attr(opts, &dir.join("reset"), "1").map_err(|e| explain(addr, e));
    // Put the list back even when the reset failed; an empty list cannot be written back (the
    // kernel reads it as "no reset"), and "default" is what an unchanged function had.
    let back = if before.is_empty() { "default".to_string() } else { before.join(" ") };
    let restored = write_attr(opts, &file, &back);
    steps.push(Change::new(format!("put reset_method back to {back}")));
    done?;
    restored?;
    Ok(format!("the kernel's {} reset (sysfs reset with reset_method {})", m.name(), m.name()))
}

/// The functions other than `addr` a bus reset of its port reaches, in words.
fn others(o: &Offered, addr: &PciAddress) -> String {
    let a = addr.to_string();
    let v: Vec<&str> = o.port_resets.iter().map(String::as_str).filter(|f| *f != a).collect();
    if v.is_empty() {
        "nothing else".into()
    } else {
        v.join(", ")
    }
}

/// A failed `reset` write in words: the kernel's errno says why (ENOTTY: no method worked;
/// EAGAIN/EBUSY: the device lock was held by someone resetting or probing it).
fn explain(addr: &PciAddress, e: Error) -> Error {
    match e {
        Error::Io { source, path, .. } => {
            use rustix::io::Errno;
            let why = match source.raw_os_error().map(Errno::from_raw_os_error) {
                Some(Errno::NOTTY) => "no method the kernel tried worked (ENOTTY)",
                Some(Errno::AGAIN | Errno::BUSY) => {
                    "the device is busy (another reset, a probe or a VFIO user holds its lock): try again"
                }
                Some(Errno::ACCESS | Errno::PERM) => "run it as root: sudo pcibench reset ...",
                _ => "see dmesg | tail for the kernel's reason",
            };
            Error::Device(format!("the kernel could not reset {addr} ({}: {source}): {why}", path.display()))
        }
        e => e,
    }
}
