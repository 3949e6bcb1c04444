//! Where and how a measurement ran, so a reader can judge it later: the CPU (pinned or not), its
//! NUMA node against the device's, the CPU model, frequency governor and clock, the host, kernel
//! and pcibench version, the command line and the time. Filled before the first sample.

use crate::host::Host;
use crate::os::cpu;
use serde::{Deserialize, Serialize};

/// How the measuring thread is placed (`--cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Pin to this CPU.
    Cpu(u32),
    /// A CPU on the device's NUMA node when sysfs names one; else leave the thread where it is.
    #[default]
    Default,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Context {
    pub pcibench_version: String,
    pub command_line: Vec<String>,
    /// UTC, RFC 3339.
    pub time: String,
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    /// The CPU the measuring thread ran on, and whether pcibench pinned it there.
    pub cpu: Option<u32>,
    pub pinned: bool,
    pub cpu_numa_node: Option<i32>,
    pub device_numa_node: Option<i32>,
    /// cpufreq governor of that CPU, where readable.
    pub governor: Option<String>,
    /// The clock samples are timed with, and whether the TSC behind it is invariant.
    pub clock: String,
    pub tsc_invariant: Option<bool>,
    /// Things that make the figures less trustworthy, in words.
    pub warnings: Vec<String>,
    /// What changed in the link's health (the device and every port up to the root) from the
    /// start of the measurement to its end, in words; empty when nothing did, absent where no
    /// link is watched (a simulated card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_health: Option<Vec<String>>,
    /// Where the DMA buffers' pages are against the device's NUMA node; absent where the device
    /// has no node (or the run made no DMA buffer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_buffers: Option<crate::dma::buffers::numa::BufferNode>,
}

fn read(host: &Host, p: &str) -> Option<String> {
    crate::file::read_trim(&host.path(p)).filter(|s| !s.is_empty())
}

/// From /proc/cpuinfo: the model name and whether the TSC is invariant (constant_tsc and
/// nonstop_tsc: it ticks at a fixed rate through frequency changes and idle states).
fn cpuinfo(host: &Host) -> (Option<String>, Option<bool>) {
    let text = read(host, "/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        text.lines().find(|l| l.split(':').next().is_some_and(|n| n.trim() == k)).and_then(|l| l.split_once(':'))
    };
    let model = field("model name").or_else(|| field("Model")).map(|(_, v)| v.trim().to_string());
    let tsc = field("flags").map(|(_, f)| {
        let has = |x: &str| f.split_whitespace().any(|w| w == x);
        has("constant_tsc") && has("nonstop_tsc")
    });
    (model, tsc)
}

/// RFC 3339 UTC from seconds since the epoch (civil-from-days, H. Hinnant's algorithm).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Place the calling (measuring) thread and describe where it runs. `device_node` is the
/// device's NUMA node from sysfs, if any.
pub fn place(host: &Host, placement: Placement, device_node: Option<i32>, args: &[String]) -> crate::Result<Context> {
    let chosen = match placement {
        Placement::Cpu(c) => Some(c),
        Placement::Default => {
            let allowed = cpu::allowed_cpus();
            device_node
                .and_then(|n| cpu::node_cpus(host, n))
                .and_then(|cpus| cpus.into_iter().find(|c| allowed.is_empty() || allowed.contains(c)))
        }
    };
    if let Some(c) = chosen {
        cpu::pin_current_thread(c)?;
    }
    let running = chosen.or_else(cpu::current_cpu);
    let (cpu_model, tsc_invariant) = cpuinfo(host);
    let governor =
        running.and_then(|c| read(host, &format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")));
    let cpu_numa_node = running.and_then(|c| cpu::cpu_node(host, c));
    let mut warnings = Vec::new();
    if governor.as_deref() == Some("powersave") {
        warnings.push(format!(
            "CPU {} runs the powersave governor: figures may be low and noisy (sudo cpupower frequency-set -g performance)",
            running.unwrap_or(0)
        ));
    }
    if let (Some(c), Some(d)) = (cpu_numa_node, device_node.filter(|n| *n >= 0)) {
        if c != d {
            warnings.push(format!(
                "the measuring CPU is on NUMA node {c} but the device is on node {d}: pick a CPU of node {d} with --cpu"
            ));
        }
    }
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(Context {
        pcibench_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: args.to_vec(),
        time: rfc3339(secs),
        hostname: read(host, "/proc/sys/kernel/hostname"),
        kernel: read(host, "/proc/sys/kernel/osrelease"),
        cpu_model,
        cpu: running,
        pinned: chosen.is_some(),
        cpu_numa_node,
        device_numa_node: device_node.filter(|n| *n >= 0),
        governor,
        clock: "CLOCK_MONOTONIC (vDSO)".into(),
        tsc_invariant,
        warnings,
        link_health: None,
        dma_buffers: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_349_113), "2026-11-22T12:05:13Z");
    }

    #[test]
    fn context_from_a_fixture_host() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        fs::create_dir_all(h.path("/proc/sys/kernel")).unwrap();
        fs::write(
            h.path("/proc/cpuinfo"),
            "processor\t: 0\nmodel name\t: Test CPU @ 3.0GHz\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n",
        )
        .unwrap();
        fs::write(h.path("/proc/sys/kernel/hostname"), "bench1\n").unwrap();
        // Run in a thread of its own: placing pins the calling thread.
        let c = std::thread::spawn(move || {
            let cpu = *cpu::allowed_cpus().first().unwrap();
            fs::create_dir_all(h.path(format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq"))).unwrap();
            fs::create_dir_all(h.path(format!("/sys/devices/system/cpu/cpu{cpu}/node0"))).unwrap();
            fs::write(h.path(format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")), "powersave\n")
                .unwrap();
            (cpu, place(&h, Placement::Cpu(cpu), Some(1), &["pcibench".into(), "pio".into()]).unwrap())
        })
        .join()
        .unwrap();
        let (cpu, c) = c;
        assert_eq!((c.cpu, c.pinned, c.cpu_numa_node, c.device_numa_node), (Some(cpu), true, Some(0), Some(1)));
        assert_eq!(c.cpu_model.as_deref(), Some("Test CPU @ 3.0GHz"));
        assert_eq!((c.tsc_invariant, c.hostname.as_deref()), (Some(true), Some("bench1")));
        assert!(c.warnings.iter().any(|w| w.contains("powersave")), "{:?}", c.warnings);
        assert!(c.warnings.iter().any(|w| w.contains("NUMA node 0 but the device is on node 1")), "{:?}", c.warnings);
        assert_eq!(c.command_line, vec!["pcibench", "pio"]);
    }
}
