//! Self-timed benchmark of the link-health snapshot (`cargo bench -p pcibench --bench health`):
//! what one snapshot of a device and its ports up to the root costs on this host's real sysfs.
//! Runners take snapshots only outside the timed part (before and after each configuration and
//! between samples at most once a second), so this cost never enters a figure; it is reported to
//! show it stays negligible against a configuration's run time.

use pcibench::host::Host;
use pcibench::pci::health::HealthProbe;
use pcibench::pci::PciAddress;
use std::time::Instant;

fn main() {
    let host = Host::with_root("/");
    let Ok(dir) = std::fs::read_dir(host.pci_devices_dir()) else {
        println!("no /sys/bus/pci/devices on this host: nothing to measure");
        return;
    };
    let mut addrs: Vec<PciAddress> =
        dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect();
    addrs.sort();
    println!("{:<14} {:>9} {:>14}", "device", "functions", "µs / snapshot");
    for a in addrs {
        let probe = HealthProbe::new(&host, &a);
        let n = probe.functions().count();
        let iters = 2000;
        let _ = probe.snapshot();
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(probe.snapshot());
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        println!("{:<14} {:>9} {:>14.1}", a.to_string(), n, us);
    }
}
