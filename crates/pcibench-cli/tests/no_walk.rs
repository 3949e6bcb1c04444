//! Read-only commands walk no /proc (issue 55): `info`, `list` and `health` open nothing under
//! /proc/PID/, traced with `strace -f -e trace=openat`, on a fixture host with processes and on this
//! host. `doctor`, which needs the walk to know what uses a device, opens them on the same fixture:
//! the trace sees a walk where there is one. strace is Debian's; scripts/test-all installs it and sets
//! PCIBENCH_REQUIRE_STRACE, so CI never skips what a developer's machine may lack.

use pcibench::pci::fixture::seed_tree;
use std::path::Path;
use std::process::Command;

/// Whether strace runs here; when it does not, fail under test-all, else say so and skip.
fn have_strace() -> bool {
    let ok = Command::new("strace").arg("-V").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("PCIBENCH_REQUIRE_STRACE").is_none(),
            "strace is not installed (scripts/test-all installs it)"
        );
        eprintln!("note: strace is not installed: the trace of read-only commands is skipped");
    }
    ok
}

/// The files `pcibench args` opened, each as `PATH FLAGS` (openat's arguments), on `root` (None: this
/// host).
fn opened(root: Option<&Path>, args: &[&str]) -> Vec<String> {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("trace");
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-e", "trace=openat", "-o"]).arg(&log).arg(env!("CARGO_BIN_EXE_pcibench")).args(args);
    match root {
        Some(r) => c.env("PCIBENCH_SYSROOT", r),
        None => c.env_remove("PCIBENCH_SYSROOT"),
    };
    let o = c.output().expect("run strace");
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| {
        panic!("no trace from strace ({e}): {}", String::from_utf8_lossy(&o.stderr));
    });
    // `1234  openat(AT_FDCWD, "/proc/812/fd", O_RDONLY|O_CLOEXEC) = 4`: the quoted path and the flags.
    text.lines()
        .filter(|l| l.contains("openat("))
        .filter_map(|l| {
            let mut q = l.splitn(3, '"');
            let (_, path, rest) = (q.next()?, q.next()?, q.next()?);
            let flags = rest.trim_start_matches(", ").split([',', ')']).next()?;
            Some(format!("{path} {flags}"))
        })
        .collect()
}

/// The opens under `proc`/PID/ (a process's directory, not /proc/self): what a walk opens.
fn under_proc_pid(opens: &[String], proc: &str) -> Vec<String> {
    opens
        .iter()
        .filter(|p| {
            let Some(rest) = p.strip_prefix(proc).and_then(|r| r.strip_prefix('/')) else { return false };
            let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
            !pid.is_empty() && matches!(rest[pid.len()..].chars().next(), Some('/' | ' '))
        })
        .cloned()
        .collect()
}

/// `opens` less those in `baseline` (the same path with the same flags).
fn beyond(opens: Vec<String>, baseline: &[String]) -> Vec<String> {
    opens.into_iter().filter(|o| !baseline.contains(o)).collect()
}

/// The seed fixture's card, with 50 processes each holding a descriptor and a mapping.
fn host_with_processes(dir: &Path) {
    seed_tree(dir);
    for pid in 100..150 {
        let p = dir.join(format!("proc/{pid}"));
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::os::unix::fs::symlink("/dev/null", p.join("fd/0")).unwrap();
        std::fs::write(p.join("comm"), "worker\n").unwrap();
        std::fs::write(p.join("maps"), "7f0000000000-7f0000001000 r-xp 00000000 08:01 1000 /usr/lib/libc.so.6\n")
            .unwrap();
    }
}

#[test]
fn read_only_commands_open_nothing_under_proc_pid_on_a_fixture_host() {
    if !have_strace() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    host_with_processes(t.path());
    let proc = t.path().join("proc").display().to_string();
    // Run as root on a fixture root, every command first checks that root owns the whole tree
    // (`os::privilege::refuse_sysroot_for_root`), listing each directory: what a command that asks
    // about no device (doctor of a missing one) opens is that check, not a walk of the processes.
    let baseline = under_proc_pid(&opened(Some(t.path()), &["doctor", "99:00.0"]), &proc);
    for args in [&["info", "15:00.0"][..], &["info", "15:00.0", "--json"], &["list"], &["health"]] {
        let walked = beyond(under_proc_pid(&opened(Some(t.path()), args), &proc), &baseline);
        assert_eq!(walked, Vec::<String>::new(), "pcibench {} walked /proc", args.join(" "));
    }
    // doctor asks what uses the card: it reads every process, and the trace shows it.
    let walked = beyond(under_proc_pid(&opened(Some(t.path()), &["doctor", "15:00.0"]), &proc), &baseline);
    assert!(walked.iter().any(|p| p.contains("/proc/149 ")), "doctor's walk not seen: {walked:?}");
}

#[test]
fn info_opens_nothing_under_proc_pid_on_this_host() {
    if !have_strace() {
        return;
    }
    // A function no driver holds is one `info` opens to look for engines, where the inventory ran
    // (and walked /proc) before; any function where there is none.
    let mut funcs: Vec<(bool, String)> = std::fs::read_dir("/sys/bus/pci/devices")
        .map(|rd| {
            rd.flatten()
                .map(|e| (e.path().join("driver").exists(), e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    funcs.sort();
    let mut runs: Vec<Vec<&str>> = vec![vec!["list"], vec!["health"]];
    if let Some((_, f)) = funcs.first() {
        runs.push(vec!["info", f.as_str()]);
    }
    for args in runs {
        let walked = under_proc_pid(&opened(None, &args), "/proc");
        assert_eq!(walked, Vec::<String>::new(), "pcibench {} walked /proc", args.join(" "));
    }
}

#[test]
fn the_filter_finds_process_directories_only() {
    let p: Vec<String> = [
        "/proc/812/fd O_RDONLY",
        "/proc/1 O_PATH",
        "/proc/self/mountinfo O_RDONLY",
        "/proc/sys/kernel/osrelease O_RDONLY",
        "/proc/12x O_RDONLY",
        "/sys/proc/4/fd O_RDONLY",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(under_proc_pid(&p, "/proc"), ["/proc/812/fd O_RDONLY", "/proc/1 O_PATH"]);
}
