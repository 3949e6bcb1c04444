//! CPUs and NUMA nodes: pinning the measuring thread (sched_setaffinity), which CPU it runs on
//! (sched_getcpu), and the CPUs of a NUMA node from sysfs (Documentation/ABI/stable/sysfs-devices-node).

use crate::host::Host;
use crate::{Error, Result};
use rustix::thread::{sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};
use std::fs;

/// Parse a kernel CPU list such as `0-3,8,10-11` (lib/bitmap.c's list format).
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let v = part.parse::<u32>().ok()?;
                (v, v)
            }
        };
        if b < a || b - a > 65535 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// The CPUs of NUMA node `node`.
pub fn node_cpus(host: &Host, node: i32) -> Option<Vec<u32>> {
    if node < 0 {
        return None;
    }
    parse_cpu_list(&crate::file::read_trim(&host.path(format!("/sys/devices/system/node/node{node}/cpulist")))?)
}

/// The NUMA node of `cpu` (the `nodeN` link in its sysfs directory); None on a machine without
/// NUMA information.
pub fn cpu_node(host: &Host, cpu: u32) -> Option<i32> {
    let dir = fs::read_dir(host.path(format!("/sys/devices/system/cpu/cpu{cpu}"))).ok()?;
    dir.flatten().find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
}

/// The CPUs this thread may run on.
pub fn allowed_cpus() -> Vec<u32> {
    // None: the calling thread.
    let Ok(set) = sched_getaffinity(None) else { return Vec::new() };
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).map(|c| c as u32).collect()
}

/// The CPUs the process could use before pcibench pinned any thread: recorded at the first call
/// (pinning calls it first), so a thread started after the measuring thread was pinned, which
/// inherits that one CPU, can still be placed on another.
pub fn process_cpus() -> Vec<u32> {
    static START: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    START.get_or_init(allowed_cpus).clone()
}

/// Pin the calling thread to `cpu`, one of the CPUs the process may use.
pub fn pin_current_thread(cpu: u32) -> Result<()> {
    let allowed = process_cpus();
    if !allowed.is_empty() && !allowed.contains(&cpu) {
        return Err(Error::usage(format!(
            "CPU {cpu} is not available to this process (allowed: {}): choose one of them with --cpu",
            cpu_list(&allowed)
        )));
    }
    if cpu as usize >= CpuSet::MAX_CPU {
        return Err(Error::usage(format!("CPU {cpu} is beyond what this build can pin (CPU_SETSIZE)")));
    }
    let mut set = CpuSet::new();
    set.set(cpu as usize);
    sched_setaffinity(None, &set).map_err(|e| {
        Error::Unsupported(format!("cannot pin the measuring thread to CPU {cpu}: {}", std::io::Error::from(e)))
    })
}

/// Let the calling thread run on `cpus` only (each below CPU_SETSIZE).
pub fn set_current_thread_cpus(cpus: &[u32]) -> Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus.iter().filter(|c| (**c as usize) < CpuSet::MAX_CPU) {
        set.set(c as usize);
    }
    sched_setaffinity(None, &set).map_err(|e| {
        Error::Unsupported(format!("cannot move a thread to CPUs {}: {}", cpu_list(cpus), std::io::Error::from(e)))
    })
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<u32> {
    u32::try_from(sched_getcpu()).ok()
}

/// `0-3,8` from a sorted list.
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn nodes_from_a_fixture() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        fs::create_dir_all(h.path("/sys/devices/system/node/node1")).unwrap();
        fs::write(h.path("/sys/devices/system/node/node1/cpulist"), "4-7\n").unwrap();
        fs::create_dir_all(h.path("/sys/devices/system/cpu/cpu5/node1")).unwrap();
        assert_eq!(node_cpus(&h, 1), Some(vec![4, 5, 6, 7]));
        assert_eq!(node_cpus(&h, -1), None);
        assert_eq!(cpu_node(&h, 5), Some(1));
        assert_eq!(cpu_node(&h, 6), None);
    }

    #[test]
    fn pinning_shows_in_the_affinity() {
        // In a thread of its own so the test runner's other threads keep their CPUs.
        std::thread::spawn(|| {
            let allowed = allowed_cpus();
            let cpu = *allowed.last().expect("some CPU");
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus(), vec![cpu]);
            assert_eq!(current_cpu(), Some(cpu));
            let e = pin_current_thread(100_000).unwrap_err().to_string();
            assert!(e.contains("not available") && e.contains("--cpu"), "{e}");
        })
        .join()
        .unwrap();
    }
}
