//! The command-line contract (issue 12), through the binary: exit codes, interruption, a closed
//! stdout, clap errors that name the argument, refused options, and malformed sysfs trees that
//! get one clear line and no wrong advice.

use pcibench::pci::fixture::{endpoint_config, seed_tree, Fixture};
mod common;
use common::{err, pcibench as run, spawn_piped};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcibench"))
}

fn none() -> &'static Path {
    Path::new("/nonexistent")
}

fn one_line(o: &Output) -> String {
    let e = err(o);
    assert_eq!(e.lines().count(), 1, "not one line: {e}");
    e
}

#[test]
fn exit_codes_say_what_happened() {
    // 0: measured and verified.
    let o = run(none(), &["pio", "sim", "--bar", "2", "--size", "64K", "--total", "256K"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // 2: bad usage, the same code for the same mistake wherever it is made.
    for args in [
        &["pio", "sim", "--bar", "3"][..],
        &["peek", "sim", "3", "0"],
        &["peek", "sim", "0", "0x100000"],
        &["peek", "sim", "0", "2"],
        &["pio", "sim", "--bar", "0", "--offset", "0x100000"],
    ] {
        let o = run(none(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        one_line(&o);
    }
    let o = run(none(), &["pio", "sim", "--bar", "0", "--offset", "0x100000"]);
    assert!(err(&o).contains("--offset 0x100000 is past the end"), "blames the offset: {}", err(&o));
    // 4: nothing could be measured (every configuration skipped).
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let o = run(t.path(), &["pio", "15:00.0", "--dir", "h2c", "--total", "1M"]);
    assert_eq!(o.status.code(), Some(4), "{}", err(&o));
    assert!(err(&o).contains("nothing was measured"), "{}", err(&o));
    // 1: an error that is not the user's input, with what to do.
    let o = run(t.path(), &["peek", "20:00.0", "0", "0"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn clap_errors_name_the_argument_and_the_values() {
    let o = run(none(), &["peek", "sim"]);
    assert_eq!(o.status.code(), Some(2));
    let e = one_line(&o);
    assert!(e.contains("<BAR>") && e.contains("<OFFSET>"), "{e}");
    let e = one_line(&run(none(), &["pio", "sim", "--map", "foo"]));
    assert!(e.contains("uc, wc, wc-flush, all"), "{e}");
    let e = one_line(&run(none(), &["pio", "sim", "--widht", "64"]));
    assert!(e.contains("--width"), "did you mean: {e}");
}

#[test]
fn options_that_do_not_apply_are_refused() {
    for (args, why) in [
        (&["dma", "sim", "--buffer", "u-dma-buf:foo"][..], "--buffer"),
        (&["dma", "sim", "--dma-bits", "32"], "--dma-bits does not apply"),
        (&["dma", "sim", "--dma-bits", "12"], "24 to 64"),
        (&["pio", "sim", "--io", "syscall"], "no such path"),
        (&["pio", "sim", "--format", "seed", "--json"], "cannot be used with"),
        (&["setup", "sim", "--vfio"], "needs no setup"),
        (&["dma", "sim-qdma", "--engine", "qdma", "--channel", "1"], "--channel"),
    ] {
        let o = run(none(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(one_line(&o).contains(why), "{args:?}: {}", err(&o));
    }
}

#[test]
fn a_closed_stdout_is_a_quiet_exit() {
    for args in [
        &["list"][..],
        &["info", "sim"],
        &["run", "sim", "--total", "4M"],
        &["pio", "sim", "--bar", "2", "--total", "1M"],
        &["dma", "sim", "--total", "8M"],
        &["buffers", "--buffer", "heap", "--size", "1M"],
        &["doctor", "sim"],
    ] {
        let mut child = spawn_piped(args);
        // Read one byte, then close the pipe, as `| head -c1` does.
        let mut out = child.stdout.take().unwrap();
        let mut b = [0u8; 1];
        let _ = out.read(&mut b);
        drop(out);
        let o = child.wait_with_output().unwrap();
        assert!(!err(&o).contains("panicked"), "{args:?}: {}", err(&o));
        assert!(matches!(o.status.code(), Some(0) | Some(141)), "{args:?}: {:?} {}", o.status, err(&o));
    }
}

/// SIGINT mid-run: the rows measured so far, valid JSON, exit 130.
#[test]
fn an_interrupted_run_prints_what_it_measured() {
    for (args, what) in [
        (&["pio", "sim", "--bar", "0", "--map", "uc", "--size", "4K", "--total", "1T", "--json"][..], "pio"),
        (&["dma", "sim", "--size", "4K", "--total", "1T", "--json"], "dma"),
        (&["run", "sim", "--total", "1T", "--json"], "run"),
    ] {
        let child = spawn_piped(args);
        std::thread::sleep(Duration::from_millis(1500));
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::INT,
        )
        .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{what}: {}", err(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{what}: {e}"));
        let report = if what == "run" { v["pio"].clone() } else { v };
        assert_eq!(report["interrupted"], true, "{what}");
        let rows = report["results"].as_array().unwrap();
        assert!(!rows.is_empty(), "{what}: the rows so far");
        let last = rows.last().unwrap();
        assert!(
            last["notes"].as_array().unwrap().iter().any(|n| n["note"] == "interrupted"),
            "{what}: the partial row is marked: {last}"
        );
    }
}

#[test]
fn malformed_sysfs_trees_get_one_clear_line() {
    let t = tempfile::tempdir().unwrap();
    let f = Fixture::new(t.path());
    // A resource line ending at the top of the address space; ids wider than 16 bits; a link
    // speed code the spec does not define; a config file that is a FIFO.
    f.device("0000:05:00.0")
        .ids(0x10ee, 0x7024, 0, 0)
        .class(0x058000)
        .file("resource", "0x0000000000000000 0xffffffffffffffff 0x0000000000040200\n")
        .config(&endpoint_config(0x10ee, 0x7024, 2, 7, 4, 256, 512, 256));
    f.device("0000:06:00.0").ids(0x10ee, 0x7024, 0, 0).file("vendor", "0x1ffff\n");
    let fifo = t.path().join("sys/devices/pci0000:00/0000:07:00.0");
    f.device("0000:07:00.0").ids(0x10ee, 0x7024, 0, 0);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fifo.join("config"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    // A dangling link, as a device being hot-removed leaves.
    std::os::unix::fs::symlink("/nonexistent/0000:09:00.0", t.path().join("sys/bus/pci/devices/0000:09:00.0")).unwrap();

    let o = run(t.path(), &["list"]);
    assert_eq!(o.status.code(), Some(0), "one bad entry does not hide the others: {}", err(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.lines().next().unwrap().starts_with("sim ") && out.contains("0000:05:00.0"), "{out}");
    assert!(err(&o).contains("0000:09:00.0") && err(&o).contains("gone"), "{}", err(&o));

    let o = run(t.path(), &["info", "05:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = v["warnings"].to_string();
    assert!(w.contains("impossible BAR") && w.contains("link speed code 7"), "{w}");
    assert_eq!(v["bars"].as_array().unwrap().len(), 0);
    assert!(v["link"]["current_gen"].is_null());

    let v: serde_json::Value = serde_json::from_slice(&run(t.path(), &["info", "06:00.0", "--json"]).stdout).unwrap();
    assert!(v["warnings"].to_string().contains("not a 16-bit PCI id"), "{v}");

    // The FIFO is not read (that would block): the command ends with a warning.
    let mut child = bin()
        .args(["info", "07:00.0", "--json"])
        .env("PCIBENCH_SYSROOT", t.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "reading a FIFO as config blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("not a regular file"), "{}", err(&o));

    // PCIBENCH_SYSROOT="" means the real root, not a hidden flag's error.
    let o = bin().args(["info", "sim"]).env("PCIBENCH_SYSROOT", "").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}

#[test]
fn read_only_commands_need_only_read_permission() {
    // As root the mode bits do not stop us, so check what is opened: a BAR file without write
    // permission for anyone still serves peek and a read-only pio.
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let res = t.path().join("sys/devices/pci0000:00/0000:15:00.0/resource2");
    std::fs::write(&res, vec![0u8; 128 << 10]).unwrap();
    std::fs::set_permissions(&res, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let o = run(t.path(), &["peek", "15:00.0", "2", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let o = run(
        t.path(),
        &["pio", "15:00.0", "--bar", "2", "--map", "uc", "--dir", "c2h", "--size", "4K", "--total", "64K"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
}
