//! Privilege boundaries, run as an ordinary user would: a `cap_sys_rawio=ep` copy of the binary
//! in a scratch directory, run by `nobody` through setpriv, refuses a fixture root (the variable
//! and the flag) and gives its capability up once the device is open; setup under a fixture root
//! runs no host command.
//!
//! The capability tests need root (setcap, setpriv) and libcap2-bin's setcap (scripts/test-all
//! installs it); without them they say so on stderr and check nothing else.

mod common;

use pcibench::pci::fixture::Fixture;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory `nobody` can enter, holding a root-owned copy of the binary with `mode`
/// (04755: setuid root); None (said on stderr) where this cannot be set up.
fn set_id_copy(mode: u32) -> Option<(tempfile::TempDir, PathBuf)> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("privilege: not root: a set-id root copy needs it; the set-id tests did not run");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("pcibench");
    std::fs::copy(env!("CARGO_BIN_EXE_pcibench"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(mode)).unwrap();
    Some((dir, bin))
}

/// A scratch directory `nobody` can enter, holding a copy of the binary with cap_sys_rawio=ep;
/// None (said on stderr) where this cannot be set up.
fn capability_copy() -> Option<(tempfile::TempDir, PathBuf)> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("privilege: not root: setcap and setpriv need it; the capability tests did not run");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("pcibench");
    std::fs::copy(env!("CARGO_BIN_EXE_pcibench"), &bin).unwrap();
    match Command::new("setcap").arg("cap_sys_rawio=ep").arg(&bin).output() {
        Ok(o) if o.status.success() => Some((dir, bin)),
        Ok(o) => {
            eprintln!("privilege: setcap failed ({}): the capability tests did not run", common::err(&o).trim());
            None
        }
        Err(e) => {
            eprintln!("privilege: no setcap ({e}; apt-get install libcap2-bin): the capability tests did not run");
            None
        }
    }
}

/// `bin args` as nobody (uid/gid 65534, no supplementary groups), with `env` and no other PCIBENCH_*.
fn as_nobody(bin: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(bin).args(args).current_dir("/");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PCIBENCH_") {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run setpriv")
}

fn fixture() -> (tempfile::TempDir, Fixture) {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = Fixture::new(t.path());
    f.device("0000:00:04.0").ids(0x1234, 0x11e8, 0x1af4, 0x1100).class(0x00ff00).bars(&[(
        0,
        0xfea0_0000,
        1 << 20,
        0x200,
    )]);
    (t, f)
}

#[test]
fn a_capability_copy_refuses_a_fixture_root_in_one_line() {
    let Some((_d, bin)) = capability_copy() else { return };
    let (_t, f) = fixture();
    let want = "pcibench runs with more privilege than its caller (AT_SECURE is set; capabilities CapEff 0000000000020000 (cap_sys_rawio) for uid 65534)";
    let o = as_nobody(&bin, &["list"], &[("PCIBENCH_SYSROOT", f.root())]);
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("pcibench: refusing $PCIBENCH_SYSROOT: ") && e.contains(want), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(common::out(&o).is_empty(), "nothing listed from the fixture");
    let root = f.root().to_str().unwrap();
    let o = as_nobody(&bin, &["--sysroot", root, "info", "00:04.0"], &[]);
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("pcibench: refusing --sysroot: ") && e.contains(want), "{e}");
    // Setup is root's: a capability copy refuses it before reading anything.
    let o = as_nobody(&bin, &["setup", "00:04.0", "--vfio", "--user", "nobody"], &[]);
    assert!(
        common::err(&o).starts_with("pcibench: refusing setup: pcibench runs with more privilege"),
        "{}",
        common::err(&o)
    );
    // The same binary without the capability takes the fixture: only privilege makes the difference.
    let plain = env!("CARGO_BIN_EXE_pcibench");
    let o = as_nobody(Path::new(plain), &["list"], &[("PCIBENCH_SYSROOT", f.root())]);
    assert!(o.status.success() && common::out(&o).contains("0000:00:04.0"), "{}", common::err(&o));
}

/// /proc/self/status of the running process (as `--debug` prints it right after the drop): no
/// capability left in any set, and no_new_privs set, once the device is open.
#[test]
fn a_capability_copy_drops_its_capability_once_the_device_is_open() {
    let Some((_d, bin)) = capability_copy() else { return };
    let args = ["pio", "sim", "--bar", "2", "--map", "uc", "--width", "64", "--dir", "c2h", "--size", "4K"];
    let o = as_nobody(&bin, &[&args[..], &["--total", "16K", "--debug"]].concat(), &[]);
    let e = common::err(&o);
    assert!(o.status.success(), "{e}");
    let line = e.lines().find(|l| l.starts_with("pcibench: debug: privilege: ")).unwrap_or_else(|| panic!("{e}"));
    assert!(line.contains("dropped cap_sys_rawio after describing sim, a simulated card, kept none"), "{line}");
    for field in [
        "CapInh: 0000000000000000",
        "CapPrm: 0000000000000000",
        "CapEff: 0000000000000000",
        "CapAmb: 0000000000000000",
        "NoNewPrivs: 1",
    ] {
        assert!(line.contains(field), "{field}: {line}");
    }
    // Run without the capability, there is nothing to drop and nothing is said.
    let o = as_nobody(
        Path::new(env!("CARGO_BIN_EXE_pcibench")),
        &[&args[..], &["--total", "16K", "--debug"]].concat(),
        &[],
    );
    assert!(o.status.success() && !common::err(&o).contains("privilege:"), "{}", common::err(&o));
}

/// `setup --vfio` on a fixture root: vfio is not loaded there, and the real modprobe would load it
/// into the real kernel, so none runs. A fake modprobe first in PATH records any call.
#[test]
fn setup_under_a_fixture_root_runs_no_host_command() {
    let (t, f) = fixture();
    let bin = t.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let called = t.path().join("modprobe-was-called");
    let fake = bin.join("modprobe");
    std::fs::write(&fake, format!("#!/bin/sh\necho \"$@\" >> {}\n", called.display())).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let o = Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(["setup", "00:04.0", "--vfio"])
        .env("PCIBENCH_SYSROOT", f.root())
        .env("PATH", path)
        .output()
        .unwrap();
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("pcibench: not running `modprobe vfio enable_unsafe_noiommu_mode=1`: "), "{e}");
    assert!(e.contains("is a fixture root"), "{e}");
    assert!(!called.exists(), "the fake modprobe was called: {:?}", std::fs::read_to_string(&called));
    // Nothing was written into the fixture either (no record, no driver_override).
    assert!(!f.root().join("run/pcibench").exists());
}

/// H1: a setuid-root (or setgid-root) copy run by nobody refuses every command, before it reads
/// its command line, in one line naming the safe install; it writes nothing.
#[test]
fn a_set_id_copy_refuses_every_command_in_one_line() {
    for mode in [0o4755, 0o2755] {
        let Some((d, bin)) = set_id_copy(mode) else { return };
        let probe = as_nobody(&bin, &["--version"], &[]);
        if probe.status.success() {
            // A nosuid mount runs the copy as nobody: nothing set-id to refuse here.
            eprintln!("privilege: {} is on a nosuid mount: the set-id test did not run", d.path().display());
            return;
        }
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o700)).unwrap();
        let o = |n: &str| out.join(n).to_str().unwrap().to_string();
        let (prom, save, svg, man) = (o("new.prom"), o("run.json"), o("ld.so.preload"), o("man"));
        let commands: Vec<Vec<&str>> = vec![
            vec!["--version"],
            vec!["--help"],
            vec!["list"],
            vec!["info", "sim"],
            vec!["health", "-o", &prom],
            vec!["pio", "sim", "--total", "16K", "--save", &save],
            vec!["plot", "a.json", "-o", &svg, "--title", " /tmp/x/evil.so "],
            vec!["compare", "a.json", "b.json"],
            vec!["export", "a.json"],
            vec!["man", &man],
            vec!["completions", "bash"],
            vec!["setup", "00:04.0", "--release"],
            vec!["no-such-command"],
        ];
        let which = if mode == 0o4755 {
            "effective uid 0 is not the caller's 65534"
        } else {
            "effective gid 0 is not the caller's 65534"
        };
        for args in &commands {
            let r = as_nobody(&bin, args, &[]);
            let e = common::err(&r);
            assert_eq!(r.status.code(), Some(1), "{args:?}: {e}");
            assert!(
                e.starts_with(&format!("pcibench: refusing to run set-user-ID or set-group-ID ({which}")),
                "{args:?}: {e}"
            );
            assert!(e.trim_end().ends_with("sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench"), "{e}");
            assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
            assert!(common::out(&r).is_empty(), "{args:?}: nothing on stdout");
        }
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "a set-id copy wrote a file");
    }
}

/// /proc/PID/status lines of a running process, None once it is gone.
fn status_of(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("")
}

/// The errno of `attempt` run in a forked child that has become nobody (uid and gid 65534), the
/// caller of the capability copy; Ok(()) when the attempt succeeded. The attempt runs between
/// fork and exec, and a failure comes back as spawn's error (std passes the errno through).
fn as_nobody_child(attempt: fn(i32) -> std::io::Result<()>, pid: i32) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("/bin/true");
    // SAFETY: only async-signal-safe syscalls run in the child between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(65534, 65534, 65534) != 0
                || libc::setresuid(65534, 65534, 65534) != 0
            {
                return Err(std::io::Error::from_raw_os_error(libc::ECHILD));
            }
            attempt(pid)
        });
    }
    c.status().map(drop)
}

fn ptrace_attach(pid: i32) -> std::io::Result<()> {
    // SAFETY: PTRACE_ATTACH with no address or data; a success is detached when the child execs and exits.
    if unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0usize, 0usize) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn pidfd_getfd(pid: i32) -> std::io::Result<()> {
    // SAFETY: raw syscalls with integer arguments (pidfd_open(2), pidfd_getfd(2)).
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Descriptor 3 and up: whatever the copy opened beside stdio.
    for fd in 3..16 {
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
        if got >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBADF) {
            return Err(e);
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EBADF))
}

/// M1: once a capability copy has dropped its capability it runs with nobody's uids only, yet
/// nobody can neither PTRACE_ATTACH it nor take its descriptors with pidfd_getfd (it is not
/// dumpable: kernel/ptrace.c, __ptrace_may_access), and it holds no capability.
#[test]
fn a_capability_copy_cannot_be_traced_by_its_caller_after_the_drop() {
    let Some((_d, bin)) = capability_copy() else { return };
    // A run long enough to be looked at; killed as soon as it has been.
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["pio", "sim", "--bar", "2", "--map", "uc", "--width", "64", "--dir", "c2h", "--size", "4K"])
        .args(["--total", "1T"])
        .current_dir("/")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // A privileged copy refuses every PCIBENCH_* its caller sets (scripts/test-all sets some).
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PCIBENCH_") {
            c.env_remove(k);
        }
    }
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    // Wait for the state, not for a time: pcibench itself (setpriv has exec'ed it) with its
    // permitted set emptied. The deadline only ends a broken run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("pcibench ended early: {st} (run it as nobody with a cap_sys_rawio=ep copy to see why)");
        }
        let s = status_of(pid).unwrap_or_else(|| panic!("pcibench ended early: {:?}", child.try_wait()));
        if field(&s, "Name:") == "pcibench" && field(&s, "CapPrm:") == "0000000000000000" {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "no capability drop seen: {s}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let attach = as_nobody_child(ptrace_attach, pid as i32);
    let getfd = as_nobody_child(pidfd_getfd, pid as i32);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(field(&status, "Uid:").split_whitespace().next(), Some("65534"), "{status}");
    for f in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        if f != "CapBnd:" {
            assert_eq!(field(&status, f), "0000000000000000", "{f} {status}");
        }
    }
    assert_eq!(attach.map_err(|e| e.raw_os_error()), Err(Some(libc::EPERM)), "PTRACE_ATTACH as nobody");
    assert_eq!(getfd.map_err(|e| e.raw_os_error()), Err(Some(libc::EPERM)), "pidfd_getfd as nobody");
}

/// L7: commands that open no device give every capability up before they read anything.
#[test]
fn commands_that_open_no_device_hold_no_capability() {
    let Some((d, bin)) = capability_copy() else { return };
    let run = d.path().join("run.json");
    let o = Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(["pio", "sim", "--bar", "2", "--map", "uc", "--width", "64", "--dir", "c2h", "--size", "4K"])
        .args(["--total", "16K", "--save"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o644)).unwrap();
    let svg = d.path().join("out.svg");
    let runs = run.to_str().unwrap();
    for args in [vec!["plot", runs, "-o", "-"], vec!["health"], vec!["list"], vec!["export", runs]] {
        let o = as_nobody(&bin, &[&args[..], &["--debug"]].concat(), &[]);
        let e = common::err(&o);
        let line = e
            .lines()
            .find(|l| l.starts_with("pcibench: debug: privilege: "))
            .unwrap_or_else(|| panic!("{args:?}: {e}"));
        assert!(
            line.contains("dropped cap_sys_rawio after starting a command that opens no device, kept none"),
            "{line}"
        );
        for f in ["CapPrm: 0000000000000000", "CapEff: 0000000000000000", "NoNewPrivs: 1"] {
            assert!(line.contains(f), "{args:?}: {f}: {line}");
        }
    }
    assert!(!svg.exists());
}

/// M2, sudo-shaped: root with SUDO_UID set takes no fixture root, and root without sudo takes
/// only a tree root owns throughout; a root-owned tree's link out of it is never followed.
#[test]
fn root_takes_no_fixture_root_through_sudo_nor_a_users_tree() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("privilege: not root: the sudo-shaped sysroot test did not run");
        return;
    }
    let (_t, f) = fixture();
    let bin = env!("CARGO_BIN_EXE_pcibench");
    let o =
        Command::new(bin).args(["list"]).env("PCIBENCH_SYSROOT", f.root()).env("SUDO_UID", "65534").output().unwrap();
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.starts_with("pcibench: refusing $PCIBENCH_SYSROOT ") && e.contains("through sudo (SUDO_UID=65534)"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(common::out(&o).is_empty());
    // A secret outside the tree, and a link to it where info reads the link speed.
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("shadow");
    std::fs::write(&secret, "root:$6$secret\n").unwrap();
    let dev = f.root().join("sys/bus/pci/devices/0000:00:04.0");
    let _ = std::fs::remove_file(dev.join("current_link_speed"));
    std::os::unix::fs::symlink(&secret, dev.join("current_link_speed")).unwrap();
    let root = f.root().to_str().unwrap();
    let o = Command::new(bin)
        .args(["--sysroot", root, "info", "00:04.0", "--json"])
        .env_remove("SUDO_UID")
        .output()
        .unwrap();
    assert!(!common::out(&o).contains("secret") && !common::err(&o).contains("secret"), "{}", common::out(&o));
    // The same tree with one file of another user's: refused as a whole, before anything is read.
    std::os::unix::fs::lchown(dev.join("current_link_speed"), Some(65534), None).unwrap();
    let o = Command::new(bin).args(["--sysroot", root, "list"]).env_remove("SUDO_UID").output().unwrap();
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("current_link_speed belongs to uid 65534") && e.contains("root owns all of it"), "{e}");
}

/// pcibench as root under sudo by uid/gid 65534 (`SUDO_UID`/`SUDO_GID` set, as sudo sets them).
fn sudo_shaped(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(args)
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .env("SUDO_USER", "nobody")
        .env_remove("PCIBENCH_SYSROOT")
        .output()
        .unwrap()
}

/// A directory of `uid` with `mode`, in a scratch directory everyone can enter.
fn dir_of(t: &tempfile::TempDir, name: &str, uid: u32, mode: u32) -> PathBuf {
    let d = t.path().join(name);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// M3/L4/L5, sudo-shaped: outputs are created as the user who ran sudo, so a directory only root
/// may write refuses them (nothing written), and what is written belongs to that user, 0600 for
/// saved runs and traces; `man DIR` goes the same way.
#[test]
fn under_sudo_outputs_are_written_as_the_invoking_user() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("privilege: not root: the sudo-shaped output test did not run");
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root_only = dir_of(&t, "etc", 0, 0o755);
    let users = dir_of(&t, "home", 65534, 0o755);
    let p = |d: &Path, n: &str| d.join(n).to_str().unwrap().to_string();
    let pio = ["dma", "sim", "--size", "4K", "--total", "8K"];
    for (flag, name) in [("--save", "x.json"), ("--trace", "x.so")] {
        let o = sudo_shaped(&[&pio[..], &[flag, &p(&root_only, name)]].concat());
        let e = common::err(&o);
        assert_eq!(o.status.code(), Some(2), "{flag}: {e}");
        assert!(e.contains("permission denied"), "{flag}: {e}");
    }
    let o = sudo_shaped(&["man", &p(&root_only, "man")]);
    assert_eq!(o.status.code(), Some(1), "{}", common::err(&o));
    assert_eq!(std::fs::read_dir(&root_only).unwrap().count(), 0, "written where the user could not write");
    // Where the user may write: their files, saved run and trace readable by them alone.
    let o = sudo_shaped(&[&pio[..], &["--save", &p(&users, "run.json"), "--trace", &p(&users, "t.jsonl")]].concat());
    assert!(o.status.success(), "{}", common::err(&o));
    for (n, mode) in [("run.json", 0o600), ("t.jsonl", 0o600)] {
        let m = std::fs::metadata(users.join(n)).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (65534, 65534, mode), "{n}");
    }
    let o = sudo_shaped(&["man", &p(&users, "man")]);
    assert!(o.status.success(), "{}", common::err(&o));
    let m = std::fs::metadata(users.join("man/pcibench.1")).unwrap();
    assert_eq!(m.uid(), 65534);
}

/// L4: root (no sudo) does not write a trace into a file another user planted in a sticky
/// directory; a new trace is created 0600.
#[test]
fn a_trace_refuses_a_file_root_does_not_own() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("privilege: not root: the planted-trace test did not run");
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let tmp = dir_of(&t, "tmp", 0, 0o1777);
    let planted = tmp.join("trace.jsonl");
    std::fs::write(&planted, "theirs\n").unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let bin = env!("CARGO_BIN_EXE_pcibench");
    let o = Command::new(bin).args(["info", "sim", "--trace"]).arg(&planted).env_remove("SUDO_UID").output().unwrap();
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("belongs to uid 65534, not to the user writing the trace (uid 0)"), "{e}");
    assert_eq!(std::fs::read_to_string(&planted).unwrap(), "theirs\n");
    let new = tmp.join("new.jsonl");
    let o = Command::new(bin).args(["info", "sim", "--trace"]).arg(&new).env_remove("SUDO_UID").output().unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    assert_eq!(std::fs::metadata(&new).unwrap().mode() & 0o777, 0o600);
}

/// The capability lines of every thread of `pid` (capabilities are per thread): None once gone.
fn caps_of_every_thread(pid: u32) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let s = std::fs::read_to_string(t.ok()?.path().join("status")).ok()?;
        if field(&s, "Name:") != "pcibench" {
            return Some(Vec::new()); // setpriv has not exec'ed it yet
        }
        out.extend(["CapPrm:", "CapEff:"].map(|f| format!("{f} {}", field(&s, f))));
    }
    Some(out)
}

/// S7 (issue 51): a capability copy holds no capability in any thread while it serves, nor while
/// it talks to a vfio-user server: /proc/PID/task/*/status, read while `serve` listens and while
/// `info vfio-user:...` waits for this test's server to answer its first message.
#[test]
fn a_capability_copy_holds_no_capability_serving_or_talking_to_a_vfio_user_server() {
    use std::os::unix::net::UnixListener;
    let Some((d, bin)) = capability_copy() else { return };
    let run = dir_of(&d, "run", 65534, 0o755);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let zero = ["CapPrm: 0000000000000000", "CapEff: 0000000000000000"];
    let spawn = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin).args(args).current_dir("/");
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("PCIBENCH_") {
                c.env_remove(k);
            }
        }
        c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap()
    };
    // serve: once it listens (after the drop at start), every thread's sets are empty.
    let socket = run.join("s.sock");
    let mut server = spawn(&["serve", "sim", "--socket", socket.to_str().unwrap()]);
    while !socket.exists() {
        assert!(server.try_wait().unwrap().is_none(), "serve ended early");
        assert!(std::time::Instant::now() < deadline, "serve never listened");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let caps = caps_of_every_thread(server.id()).unwrap();
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGINT) };
    let o = server.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", common::err(&o));
    assert!(!caps.is_empty() && caps.iter().all(|c| zero.contains(&c.as_str())), "serve: {caps:?}");
    assert!(!socket.exists(), "serve removes its socket");
    // info vfio-user:: a server of this test's that accepts and never answers.
    let fake = run.join("fake.sock");
    let listener = UnixListener::bind(&fake).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let target = format!("vfio-user:{}", fake.display());
    let mut client = spawn(&["info", &target, "--debug"]);
    let conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        assert!(client.try_wait().unwrap().is_none(), "info ended before it connected");
        assert!(std::time::Instant::now() < deadline, "info never connected");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let caps = caps_of_every_thread(client.id()).unwrap();
    drop(conn);
    let o = client.wait_with_output().unwrap();
    let e = common::err(&o);
    assert!(!caps.is_empty() && caps.iter().all(|c| zero.contains(&c.as_str())), "info: {caps:?}");
    let line = e.lines().find(|l| l.starts_with("pcibench: debug: privilege: ")).unwrap_or_else(|| panic!("{e}"));
    assert!(line.contains(&format!("dropped cap_sys_rawio after choosing the vfio-user target {target}")), "{line}");
}
