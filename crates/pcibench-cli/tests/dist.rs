//! The packaging steps (dist/build-deb): the completions each shell parses (`bash -n`, `zsh -n`),
//! a man page per visible command that man renders without a warning. The tools are Debian's
//! (bash, zsh, man-db with groff); scripts/test-all installs the missing ones and sets
//! PCIBENCH_REQUIRE_DIST_TOOLS, so CI never skips what a developer's machine may lack.

use std::path::Path;
use std::process::Command;

fn pcibench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench")).args(args).output().expect("run pcibench")
}

/// Whether `tool` runs here; when it does not, fail under test-all, else say so and skip.
fn have(tool: &str) -> bool {
    let ok = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("PCIBENCH_REQUIRE_DIST_TOOLS").is_none(),
            "{tool} is not installed (scripts/test-all installs it)"
        );
        eprintln!("note: {tool} is not installed: that check is skipped");
    }
    ok
}

#[test]
fn completions_parse_in_their_shells() {
    let t = tempfile::tempdir().unwrap();
    for (shell, check) in [("bash", Some("bash")), ("zsh", Some("zsh")), ("fish", None)] {
        let o = pcibench(&["completions", shell]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        for cmd in ["health", "export", "dma", "compare"] {
            assert!(text.contains(cmd), "{shell}: no {cmd}");
        }
        assert!(!text.contains("completions") && !text.contains("mangen"), "{shell}: the packaging steps stay hidden");
        let path = t.path().join(format!("pcibench.{shell}"));
        std::fs::write(&path, &text).unwrap();
        if let Some(sh) = check.filter(|s| have(s)) {
            let o = Command::new(sh).arg("-n").arg(&path).output().unwrap();
            assert!(o.status.success(), "{sh} -n: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    let o = pcibench(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_man_page_per_command_without_warnings() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("man");
    let o = pcibench(&["man", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut pages: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    pages.sort();
    for want in ["pcibench.1", "pcibench-health.1", "pcibench-export.1", "pcibench-dma.1", "pcibench-doctor.1"] {
        assert!(pages.iter().any(|p| p == want), "no {want} in {pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("help") || p.contains("completions") || p.contains("-man.")), "{pages:?}");
    let health = std::fs::read_to_string(dir.join("pcibench-health.1")).unwrap();
    assert!(health.contains("could not check"), "the exit statuses are in the page");
    if !have("man") {
        return;
    }
    for p in &pages {
        let path = dir.join(p);
        let o = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(Path::new(&path))
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        assert!(o.status.success(), "man -l {p} failed");
        assert!(o.stderr.is_empty(), "man --warnings -l {p}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("NAME"), "{p} renders no NAME section");
    }
}
