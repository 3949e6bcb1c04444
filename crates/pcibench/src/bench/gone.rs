//! A card that stops answering mid-run (surprise removal, link down, a reset, its Memory Space
//! Enable cleared): the runners stop at once, keep the rows measured before, and put the one line
//! that says so in `Report::gone` (the CLI prints it and exits 1).

use super::sample::sampler::Sampling;
use crate::access::DeviceAccess;
use crate::pci::health::gone_line;

/// Whether a BAR mapping of `dev` faulted (`access::guard`), whether `dev` still answers config
/// reads (a function's vendor id is never 0xffff, PCI Local Bus 3.0 §6.2.1: all-ones is what a
/// read of a function that is not there completes with), and,
/// where the sampler watches the device in sysfs, whether its Memory Space Enable is still set.
/// Some(what read wrong) when it no longer answers.
pub fn check(dev: &dyn DeviceAccess, s: &Sampling) -> Option<String> {
    // A BAR mapping that faulted (access::guard): it reads all-ones now because the card went.
    if let Some(what) = s.health.and_then(|h| h.functions().next()).and_then(crate::access::guard::gone) {
        return Some(what);
    }
    let mut id = [0u8; 2];
    if dev.config_read(0, &mut id).is_ok() && id == [0xff, 0xff] {
        return Some("its config space reads vendor id 0xffff".into());
    }
    s.health.and_then(|h| h.not_answering())
}

/// The one line for `what` read all-ones on `device`: with the upstream port's state where the
/// sampler watches the device's ports.
pub fn line(device: &str, what: &str, s: &Sampling) -> String {
    match s.health {
        Some(h) => h.gone_line(what),
        None => gone_line(device, what, None),
    }
}
