//! Self-timed benchmark of the in-use inventory (`cargo bench -p pcibench --bench inuse`): what
//! `setup` and `doctor` pay to learn what uses a device, on a fixture host of 2,000 processes with
//! 10,000 open descriptors (5 each: a device node, a pipe, a socket, a log file, a terminal) and 12
//! mappings each, one of them holding the device's disk open. The first inventory of a command
//! includes the /proc scan; every further device of the same command reuses it (`Host::procs`); the
//! difference, over 2,000, is the walk's cost per process. Read-only commands walk nothing
//! (`Host::without_process_walk`): measured too.
//! Then, where it can, the same on this machine's own /proc, for its first PCI device.
//!
//! A fixture's links resolve inside its tree, one component at a time: somewhat more work than the
//! kernel's own lookup on a real /proc, so the fixture figure is the pessimistic one.
//!
//! Then the kernel's own answers (issue 35) on a fixture host with 200 network namespaces (one
//! process each) and 1,000 block devices below one storage function (a SAN HBA's LUNs, each asked
//! whether it is held exclusively, one held in another mount namespace): a NIC's inventory walks every
//! namespace once per command; the storage function's probes each device nothing else explains.
//! Fixture namespaces and probes are files read, not netlink dumps and opens: the real costs on this
//! machine follow, for its first network and storage functions.

use pcibench::host::Host;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Instant;

const F: &str = "0000:01:00.0";
const FDIR: &str = "sys/devices/pci0000:00/0000:00:1c.0/0000:01:00.0";
const PROCESSES: u32 = 2_000;
const FDS_EACH: u32 = 5;

fn write(root: &Path, rel: &str, data: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    symlink(target, p).unwrap();
}

/// The function with a virtio disk (two partitions), its resource files, and the processes.
fn fixture(root: &Path) {
    let vde = format!("{FDIR}/virtio3/block/vde");
    write(root, &format!("{FDIR}/vendor"), "0x1af4\n");
    for f in ["resource", "resource0", "resource4", "config"] {
        write(root, &format!("{FDIR}/{f}"), "");
    }
    link(root, &format!("sys/bus/pci/devices/{F}"), &root.join(FDIR).display().to_string());
    write(root, &format!("{vde}/dev"), "254:64\n");
    link(root, "sys/class/block/vde", &root.join(&vde).display().to_string());
    for p in 1..=2 {
        let d = format!("{vde}/vde{p}");
        write(root, &format!("{d}/dev"), &format!("254:{}\n", 64 + p));
        write(root, &format!("{d}/partition"), &format!("{p}\n"));
        link(root, &format!("sys/class/block/vde{p}"), &root.join(&d).display().to_string());
    }
    for (node, what) in [("vde", "block 254:64"), ("null", "char 1:3"), ("pts/0", "char 136:0")] {
        write(root, &format!("dev/{node}"), &format!("{what}\n"));
    }
    fs::create_dir_all(root.join("var/log")).unwrap();
    write(root, "proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n");
    write(root, "proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
    let maps: String = (0..12)
        .map(|i| {
            format!(
                "7f{i:02x}00000000-7f{i:02x}00100000 r-xp 00000000 08:01 {} /usr/lib/x86_64-linux-gnu/lib{i}.so\n",
                1000 + i
            )
        })
        .collect();
    link(root, "proc/self/ns/net", "net:[4026531840]");
    link(root, "proc/self/ns/mnt", "mnt:[4026531841]");
    for pid in 100..100 + PROCESSES {
        let base = format!("proc/{pid}");
        write(root, &format!("{base}/comm"), "worker\n");
        // In this host's namespaces, as most processes are: read, nothing to look into.
        link(root, &format!("{base}/ns/net"), "net:[4026531840]");
        link(root, &format!("{base}/ns/mnt"), "mnt:[4026531841]");
        write(root, &format!("{base}/maps"), &maps);
        let first = if pid == 100 + PROCESSES / 2 { "/dev/vde" } else { "/dev/null" };
        let targets = [
            first.to_string(),
            format!("pipe:[{pid}]"),
            format!("socket:[{pid}]"),
            format!("/var/log/w{pid}.log"),
            "/dev/pts/0".into(),
        ];
        for (fd, t) in targets.iter().enumerate() {
            link(root, &format!("{base}/fd/{fd}"), t);
            write(root, &format!("{base}/fdinfo/{fd}"), "pos:\t0\nflags:\t0100002\nmnt_id:\t25\n");
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// This thread's CPU time in nanoseconds: on a shared, loaded machine the wall time includes
/// waiting for a CPU, this does not.
fn cpu_ns() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

/// Milliseconds of `f` over `n` runs: (median wall time, min wall time, median CPU time).
fn time(n: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..n {
        let (t, c) = (Instant::now(), cpu_ns());
        f();
        cpu.push((cpu_ns() - c) / 1e6);
        wall.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let min = wall.iter().copied().fold(f64::INFINITY, f64::min);
    (median(&mut wall), min, median(&mut cpu))
}

fn main() {
    // tmpfs where there is one: making 10,000 symlinks on a discard-mounted ext4 takes long.
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    fixture(dir.path());
    let inv = pcibench::host::inuse::inventory(&Host::with_root(dir.path()), F).unwrap();
    let want = format!("held open by PID {} (worker) for reading and writing: /dev/vde", 100 + PROCESSES / 2);
    assert_eq!(inv.reasons(), [want.as_str()], "the fixture's holder must be found");
    let fds = PROCESSES * FDS_EACH;
    let (first, first_min, first_cpu) = time(15, || {
        pcibench::host::inuse::inventory(&Host::with_root(dir.path()), F).unwrap();
    });
    let host = Host::with_root(dir.path());
    pcibench::host::inuse::inventory(&host, F).unwrap();
    let (again, again_min, again_cpu) = time(50, || {
        pcibench::host::inuse::inventory(&host, F).unwrap();
    });
    println!("in-use inventory, fixture /proc of {PROCESSES} processes, {fds} open fds, 12 mappings each:");
    println!(
        "  first device of a command (the /proc scan included): median {first:.1} ms (min {first_min:.1}), CPU {first_cpu:.1} ms"
    );
    println!(
        "  each further device (the scan reused):               median {again:.2} ms (min {again_min:.2}), CPU {again_cpu:.2} ms"
    );
    // What the walk costs per process (issue 55): bounded by a fixed number of lookups (its directory,
    // its two namespace links, its fd directory), one per descriptor and one read of its maps.
    let per = |a: f64, b: f64| (a - b) * 1e3 / PROCESSES as f64;
    println!(
        "  the /proc walk per process ({FDS_EACH} fds, 12 mappings): {:.1} us (min {:.1}), CPU {:.1} us",
        per(first, again),
        per(first_min, again_min),
        per(first_cpu, again_cpu)
    );
    // A read-only command (list, info, health) walks nothing: its inventory is incomplete by its words.
    let (ro, ro_min, ro_cpu) = time(15, || {
        let inv = pcibench::host::inuse::inventory(&Host::with_root(dir.path()).without_process_walk(), F).unwrap();
        assert!(inv.is_empty() && !inv.unchecked.is_empty());
    });
    println!("  the same host without the walk (info's): median {ro:.2} ms (min {ro_min:.2}), CPU {ro_cpu:.2} ms");
    namespaces_and_disks();
    real_host();
}

const NIC: &str = "0000:02:00.0";
const NIC_DIR: &str = "sys/devices/pci0000:00/0000:00:1d.0/0000:02:00.0";
const HBA: &str = "0000:03:00.0";
const HBA_DIR: &str = "sys/devices/pci0000:00/0000:00:1e.0/0000:03:00.0";
const NAMESPACES: u32 = 200;
const DISKS: u32 = 1_000;

/// A NIC whose interface is up in the 137th of 200 network namespaces, and an HBA with 1,000 disks,
/// the 500th mounted only in another mount namespace.
fn ns_fixture(root: &Path) {
    let abs = |rel: &str| root.join(rel).display().to_string();
    write(root, &format!("{NIC_DIR}/class"), "0x020000\n");
    fs::create_dir_all(root.join(format!("{NIC_DIR}/virtio0/net"))).unwrap();
    link(root, &format!("sys/bus/pci/devices/{NIC}"), &abs(NIC_DIR));
    link(root, "sys/bus/virtio/devices/virtio0", &abs(&format!("{NIC_DIR}/virtio0")));
    link(root, "proc/self/ns/net", "net:[4026531840]");
    link(root, "proc/self/ns/mnt", "mnt:[4026531841]");
    write(root, "proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n");
    write(root, "proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
    for i in 0..NAMESPACES {
        let pid = 5000 + i;
        let eth = if i == 137 {
            r#"{"index":2,"name":"eth1","up":true,"parent_bus":"virtio","parent":"virtio0"}"#
        } else {
            r#"{"index":2,"name":"eth0","up":true}"#
        };
        let view = format!(r#"{{"links":[{{"index":1,"name":"lo","up":true}},{eth}],"addrs":[[2,"10.0.0.2/24"]]}}"#);
        write(root, &format!("proc/{pid}/ns/net"), &format!("net:[{}]\n{view}\n", 4026533000 + i));
        write(root, &format!("proc/{pid}/comm"), "pause\n");
        link(root, &format!("proc/{pid}/ns/mnt"), &format!("mnt:[{}]", 4026543000 + i));
        let mounted = if i == 3 {
            format!("40 30 {}:{} / /data rw - ext4 /dev/sd500 rw\n", 65 + 500 / 16, (500 % 16) * 16)
        } else {
            String::new()
        };
        write(root, &format!("proc/{pid}/mountinfo"), &format!("30 1 0:40 / / rw - overlay overlay rw\n{mounted}"));
    }
    write(root, &format!("{HBA_DIR}/class"), "0x010700\n");
    link(root, &format!("sys/bus/pci/devices/{HBA}"), &abs(HBA_DIR));
    for d in 0..DISKS {
        let name = format!("sd{d}");
        let dir = format!("{HBA_DIR}/host0/target0:0:{d}/0:0:{d}:0/block/{name}");
        let (major, minor) = (65 + d / 16, (d % 16) * 16);
        write(root, &format!("{dir}/dev"), &format!("{major}:{minor}\n"));
        link(root, &format!("sys/class/block/{name}"), &abs(&dir));
        let busy = if d == 500 { " busy" } else { "" };
        write(root, &format!("dev/{name}"), &format!("block {major}:{minor}{busy}\n"));
    }
}

fn namespaces_and_disks() {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    ns_fixture(dir.path());
    let nic = pcibench::host::inuse::inventory(&Host::with_root(dir.path()), NIC).unwrap();
    assert_eq!(nic.reasons(), ["eth1 is up with 10.0.0.2/24 in the network namespace of PID 5137 (pause)"]);
    let hba = pcibench::host::inuse::inventory(&Host::with_root(dir.path()), HBA).unwrap();
    assert_eq!(hba.reasons(), ["it backs /data in the mount namespace of PID 5003 (pause) through sd500"]);
    let (nic_first, nic_min, nic_cpu) = time(15, || {
        pcibench::host::inuse::inventory(&Host::with_root(dir.path()), NIC).unwrap();
    });
    let host = Host::with_root(dir.path());
    pcibench::host::inuse::inventory(&host, NIC).unwrap();
    let (nic_again, _, _) = time(50, || {
        pcibench::host::inuse::inventory(&host, NIC).unwrap();
    });
    let (hba_first, hba_min, hba_cpu) = time(15, || {
        pcibench::host::inuse::inventory(&Host::with_root(dir.path()), HBA).unwrap();
    });
    println!("fixture host of {NAMESPACES} network and mount namespaces and {DISKS} block devices:");
    println!(
        "  a NIC whose interface is in the 137th namespace: median {nic_first:.1} ms (min {nic_min:.1}), CPU {nic_cpu:.1} ms; \
         a further device of the command (the walks reused; the {DISKS} /sys/class/block links resolved again): median {nic_again:.1} ms"
    );
    println!(
        "  an HBA with {DISKS} disks, each asked whether it is held, one held in another mount namespace: median {hba_first:.1} ms (min {hba_min:.1}), CPU {hba_cpu:.1} ms"
    );
}

/// The same on this machine's /proc: its first PCI device, its first network function (every other
/// network namespace looked into) and its first storage function (its disks asked about).
fn real_host() {
    let mut all: Vec<String> = fs::read_dir("/sys/bus/pci/devices")
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    all.sort();
    let Some(first) = all.first().cloned() else {
        println!("this host: no PCI devices in /sys/bus/pci/devices: not measured");
        return;
    };
    let of_class = |c: &str| {
        all.iter()
            .find(|a| fs::read_to_string(format!("/sys/bus/pci/devices/{a}/class")).is_ok_and(|k| k.starts_with(c)))
            .cloned()
    };
    let mut procs = 0;
    let mut fds = 0;
    let mut netns = std::collections::BTreeSet::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        if e.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok()) {
            procs += 1;
            fds += fs::read_dir(e.path().join("fd")).map(|rd| rd.count()).unwrap_or(0);
            netns.extend(fs::read_link(e.path().join("ns/net")).ok());
        }
    }
    let who = if rustix::process::geteuid().is_root() { "root" } else { "this user" };
    println!("this host ({procs} processes, {fds} open fds, {} network namespaces readable as {who}):", netns.len());
    let picks = [("first device", Some(first)), ("network", of_class("0x02")), ("storage", of_class("0x01"))];
    for (what, addr) in picks {
        let Some(addr) = addr else { continue };
        let mut result = Ok(());
        let (med, min, cpu) = time(15, || {
            result = pcibench::host::inuse::inventory(&Host::with_root("/"), &addr).map(|_| ());
        });
        match &result {
            Ok(()) => println!("  {what} {addr}: median {med:.1} ms (min {min:.1}), CPU {cpu:.1} ms"),
            Err(e) => println!("  {what} {addr}: the inventory failed: {e}"),
        }
        if what == "first device" && result.is_ok() && procs > 0 {
            // The walk's share, per process: the same inventory without it (a read-only command's).
            let (ro, ro_min, ro_cpu) = time(15, || {
                let _ = pcibench::host::inuse::inventory(&Host::with_root("/").without_process_walk(), &addr);
            });
            let per = |a: f64, b: f64| (a - b).max(0.0) * 1e3 / procs as f64;
            println!(
                "    without the /proc walk (info's): median {ro:.1} ms; the walk per process: {:.1} us (min {:.1}), CPU {:.1} us",
                per(med, ro),
                per(min, ro_min),
                per(cpu, ro_cpu)
            );
        }
    }
}
