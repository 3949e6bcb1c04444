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
