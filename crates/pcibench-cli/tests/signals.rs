//! Interruption as scripts and CI deliver it (issue 28): `timeout -s INT`, `timeout -s TERM` (which
//! signal the command and then their own process group, so pcibench gets the signal twice,
//! microseconds apart) and `kill -INT -PGID`, 20 times each over the measuring commands. Every run
//! must print its partial document (valid JSON, `"interrupted": true`), the one stderr line, and
//! exit 130. No timing is asserted: the signal comes after two seconds (with `kill`, once the
//! handlers are in place), whatever the run is doing then.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const RUNS: usize = 20;

/// Long runs of every measuring command (each would take hours uninterrupted). The DMA engine
/// model's threads may starve on a loaded host: its no-progress limit is raised past any stall.
const COMMANDS: [&[&str]; 7] = [
    &["pio", "sim", "--bar", "0", "--map", "uc", "--size", "4K", "--total", "1T", "--json"],
    &["latency", "sim", "--samples", "1000000000", "--json"],
    &["dma", "sim", "--size", "4K", "--total", "1T", "--timeout-ms", "600000", "--json"],
    // Completion by interrupt: the thread asleep on the eventfd when the signal comes.
    &["dma", "sim", "--completion", "irq", "--size", "4K", "--total", "1T", "--timeout-ms", "600000", "--json"],
    // A stream pair's batch by interrupt: both channels armed, both enables put back on the way out.
    &["dma", "sim-xdma-st", "--completion", "irq", "--size", "4K", "--total", "1T", "--timeout-ms", "600000", "--json"],
    &["buffers", "--buffer", "heap", "--size", "64K", "--total", "1T", "--json"],
    &["run", "sim", "--total", "1T", "--json"],
];

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pcibench")
}

/// The run printed what it measured, said so in one line, and exited 130.
fn check(o: &Output, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{what}: {:?} {err}", o.status);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{what}: no JSON document ({e}): {:?} {err}", String::from_utf8_lossy(&o.stdout)));
    let interrupted = [&v, &v["pio"], &v["dma"]].iter().any(|r| r["interrupted"] == serde_json::Value::Bool(true));
    assert!(interrupted, "{what}: not marked interrupted: {v}");
    assert_eq!(err.lines().filter(|l| l.contains("interrupted")).count(), 1, "{what}: {err}");
}

fn under_timeout(signal: &str) {
    for i in 0..RUNS {
        let args = COMMANDS[i % COMMANDS.len()];
        // --preserve-status: timeout exits with the command's status, not its own 124.
        let o = Command::new("timeout")
            .args(["--preserve-status", "-s", signal, "2", bin()])
            .args(args)
            .env("PCIBENCH_SYSROOT", "/nonexistent")
            .output()
            .expect("run timeout(1)");
        check(&o, &format!("timeout -s {signal} run {i}: {args:?}"));
    }
}

#[test]
fn timeout_sigint_keeps_the_results_every_time() {
    under_timeout("INT");
}

#[test]
fn timeout_sigterm_keeps_the_results_every_time() {
    under_timeout("TERM");
}

#[test]
fn sigint_to_the_process_group_keeps_the_results_every_time() {
    for i in 0..RUNS {
        let args = COMMANDS[i % COMMANDS.len()];
        let child = Command::new(bin())
            .args(args)
            .env("PCIBENCH_SYSROOT", "/nonexistent")
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        caught_sigint(child.id());
        std::thread::sleep(Duration::from_millis(500));
        // kill -INT -PGID: the group is the child's own.
        let group = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process_group(group, rustix::process::Signal::INT).unwrap();
        let o = child.wait_with_output().unwrap();
        check(&o, &format!("kill -INT -PGID run {i}: {args:?}"));
    }
}

/// Wait until process `pid` catches SIGINT (its handlers are installed: /proc/PID/status SigCgt),
/// so a loaded host's slow start is not mistaken for a lost result.
fn caught_sigint(pid: u32) {
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0);
        // SIGINT is signal 2: bit 1. A process that ended first is judged by its output.
        if caught & 2 != 0 || status.is_empty() || status.contains("State:\tZ") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `run` stopped during PIO says why DMA did not run instead of printing an empty section.
#[test]
fn run_interrupted_before_dma_says_so() {
    let o = Command::new("timeout")
        .args(["--preserve-status", "-s", "INT", "1", bin(), "run", "sim", "--total", "1T"])
        .env("PCIBENCH_SYSROOT", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(130));
    let out = String::from_utf8_lossy(&o.stdout);
    let dma = out.split("\n== DMA\n").nth(1).unwrap_or_else(|| panic!("no DMA section: {out}"));
    assert!(dma.starts_with("DMA not run: the run was interrupted before it"), "{out}");
}

/// A soak (`dma --duration`) stopped by Ctrl-C keeps every stream's rows (issue 56): the interval
/// lines it printed as they came (JSON lines), and its report, one line more, with a row per
/// stream, marked interrupted, exit 130. The signal comes once every stream has a line out.
#[test]
fn a_soak_stopped_keeps_every_streams_rows() {
    use std::io::BufRead;
    let mut child = Command::new(bin())
        .args(["dma", "sim-xdma4", "--duration", "1h", "--every", "200ms", "--size", "16K", "--json"])
        .env("PCIBENCH_SYSROOT", "/nonexistent")
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut shown: Vec<serde_json::Value> = Vec::new();
    let streams = |v: &[serde_json::Value]| {
        let mut s: Vec<String> = v.iter().filter_map(|l| l["interval"]["label"].as_str().map(String::from)).collect();
        s.sort();
        s.dedup();
        s
    };
    while streams(&shown).len() < 8 {
        let l = lines.next().expect("a line per stream before the stop").unwrap();
        shown.push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")));
    }
    caught_sigint(child.id());
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    for l in lines {
        let l = l.unwrap();
        shown.push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")));
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("interrupted")).count(), 1, "{err}");
    let (report, intervals) = shown.split_last().unwrap();
    assert!(intervals.iter().all(|v| v.get("interval").is_some()), "interval lines, then the report");
    assert_eq!(report["interrupted"], serde_json::Value::Bool(true), "{report}");
    let rows: Vec<&str> = report["results"].as_array().unwrap().iter().map(|r| r["stream"].as_str().unwrap()).collect();
    assert_eq!(rows.len(), 8, "a row per stream: {rows:?}");
    let mut sorted: Vec<String> = rows.iter().map(|s| s.to_string()).collect();
    sorted.sort();
    assert_eq!(sorted, streams(intervals), "the report's streams are those shown");
    let kept = report["soak"]["intervals"].as_array().unwrap();
    assert_eq!(kept.len(), intervals.len(), "every interval shown is kept in the report");
    for r in report["results"].as_array().unwrap() {
        assert!(r["stats"]["transfers"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["verify"]["status"], "ok", "{r}");
    }
}
