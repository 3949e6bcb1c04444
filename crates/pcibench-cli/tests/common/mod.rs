//! What the CLI tests share: running the binary on a fixture root, and reading what it printed.

#![allow(dead_code)] // each test crate uses its own subset

pub mod models;
pub mod relay;
pub mod served;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Run `pcibench args` with `root` standing in for / (`PCIBENCH_SYSROOT`).
pub fn pcibench(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(args)
        .env("PCIBENCH_SYSROOT", root)
        .output()
        .expect("run pcibench")
}

/// Start `pcibench args` on no sysfs at all (the simulated cards alone), its stdout and stderr
/// pipes, for a test that reads them as it runs or signals it.
pub fn spawn_piped(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(args)
        .env("PCIBENCH_SYSROOT", "/nonexistent")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pcibench")
}

pub fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON document a successful run printed.
pub fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", err(o));
    serde_json::from_slice(&o.stdout).expect("one JSON document on stdout")
}
