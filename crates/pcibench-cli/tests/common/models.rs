//! The example device models (examples/models/) and the rule-breaking test models
//! (tests/models/), built with their own Makefiles into the test target folder, as a user
//! builds them; and `pcibench serve --model` on them in a child process.

use super::served::Served;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One build at a time in this test binary (make itself keeps builds across binaries).
static BUILDING: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `make -C DIR O=OUT TARGET` for the model in `dir` (relative to the repository), returning
/// OUT/`file`.
fn make(dir: &str, file: &str) -> PathBuf {
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("models").join(dir.replace('/', "-"));
    let target = out.join(file);
    let run = Command::new("make")
        .args(["-s", "-C"])
        .arg(repo().join(dir))
        .arg(format!("O={}", out.display()))
        .arg(&target)
        .output()
        .expect("run make (install make and a C compiler: apt-get install build-essential)");
    assert!(
        run.status.success(),
        "building {dir} failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    target
}

/// examples/models/edu-c: QEMU's edu as a C model.
pub fn edu_c() -> PathBuf {
    make("examples/models/edu-c", "edu.so")
}

/// A rule-breaking model: `bad-RULE.so` (tests/models/bad.c).
pub fn bad(rule: &str) -> PathBuf {
    make("crates/pcibench-cli/tests/models", &format!("bad-{rule}.so"))
}

/// examples/models/edu-rtl: the Verilog design under Verilator, where Verilator is installed.
/// None (the test says so) when it is not, unless PCIBENCH_REQUIRE_VERILATOR is set, as
/// scripts/test-all sets it after installing Verilator.
pub fn edu_rtl() -> Option<PathBuf> {
    let have = Command::new("verilator").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var_os("PCIBENCH_REQUIRE_VERILATOR").is_none(),
            "PCIBENCH_REQUIRE_VERILATOR is set but verilator is not installed (apt-get install verilator)"
        );
        eprintln!("note: verilator is not installed: the RTL example is not tested (apt-get install verilator)");
        return None;
    }
    Some(make("examples/models/edu-rtl", "edu_rtl.so"))
}

impl Served {
    /// `pcibench serve --model SPEC` on a socket in a fresh directory; killed when dropped.
    pub fn model(spec: &str, extra: &[&str]) -> Served {
        Served::start_with(&["--model", spec], extra)
    }
}
