//! Issue 43: bounded work. Defaults sized by time (`dma sim --size 1` takes about a second a
//! row, not minutes), an estimate on stderr before a configuration that will take long (what
//! the request's own counts make it), and a progress bar on a terminal only.
//!
//! Long requests are stopped with SIGINT once they said what they will take: nothing here waits
//! for a duration, only for a line to appear.

mod common;

use common::{err, spawn_piped};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn none() -> &'static Path {
    Path::new("/nonexistent-root")
}

/// The whole run's measured time: every row's bytes over its mean rate.
#[test]
fn a_one_byte_dma_run_without_a_total_takes_seconds() {
    let o = common::pcibench(none(), &["dma", "sim", "--size", "1", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v = common::json(&o);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "h2c and c2h");
    let mut secs = 0.0;
    for r in rows {
        let s = &r["stats"];
        assert!(s["samples"].as_u64().unwrap() >= 10, "{s}");
        secs += s["bytes"].as_f64().unwrap() / (s["mean_mbps"].as_f64().unwrap() * 1e6);
    }
    assert!(secs < 10.0, "{secs} s measured");
    // Sized by time, not by the 64 MiB cap: far fewer bytes than 64 MiB of 1-byte transfers.
    assert!(rows.iter().all(|r| r["stats"]["bytes"].as_u64().unwrap() < 64 << 20));
    assert!(err(&o).is_empty(), "nothing long to announce: {}", err(&o));
}

fn interrupt(child: &Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
}

/// Requests whose own counts make them long say so first, on stderr, in one line; in a pipe there
/// is no progress bar.
#[test]
fn a_long_request_is_estimated_before_it_runs_and_shows_no_bar_in_a_pipe() {
    for (args, work) in [
        // Two configurations (h2c, c2h), summed before either runs.
        (
            &["dma", "sim", "--size", "1", "--total", "1G"][..],
            "for 2 configurations, the longest 1 GiB in 1 B transfers; --total sets it",
        ),
        // A size that is fast after one that is slow: each row's own cost, summed.
        (
            &["dma", "sim", "--size", "1,1M", "--dir", "h2c", "--total", "1G"],
            "for 2 configurations, the longest 1 GiB in 1 B transfers; --total sets it",
        ),
        (&["latency", "sim", "--samples", "1000000000"], "for 1000000000 samples; --samples sets it"),
        (&["buffers", "--buffer", "heap", "--size", "64K", "--total", "1T"], "in 64 KiB transfers; --total sets it"),
    ] {
        let (first, rest, code) = first_line_then_ctrl_c(args);
        assert!(first.starts_with("pcibench: about ") && first.trim_end().ends_with(work), "{args:?}: {first}{rest}");
        assert_eq!(code, Some(130), "{args:?}: {first}{rest}");
        assert!(!rest.contains('\r') && !rest.contains("eta"), "{args:?}: a bar in a pipe: {rest:?}");
    }
}

/// Issue 55: an open-loop run's time is known before it starts (transfers over the rate; a
/// sweep's rates from its closed loop, timed first) and said at once; an engine's batch of
/// transfers is not named as the transfer size; `--dma-samples` names itself.
#[test]
fn open_loop_runs_and_batched_transfers_are_estimated_in_their_own_words() {
    for (args, work) in [
        (
            &["dma", "sim-qdma", "--rate", "1K", "--size", "64", "--total", "1G", "--dir", "h2c"][..],
            "for 16777216 transfers of 64 B at 1.000 K/s; --total sets it",
        ),
        (
            &["latency", "sim", "--dma", "--rate", "100", "--size", "64", "--dma-samples", "10000000"],
            "for 2 rows, the longest 10000000 transfers of 64 B at 100.00 /s; --dma-samples sets it",
        ),
        (
            &["latency", "sim", "--dma", "--size", "64", "--dma-samples", "10000000"],
            "for 10000000 samples; --dma-samples sets it",
        ),
        // QDMA runs 1-byte transfers in batches over its ring: the transfers are 1 B.
        (
            &["dma", "sim-qdma", "--size", "1", "--total", "1G"],
            "for 2 configurations, the longest 1 GiB in 1 B transfers; --total sets it",
        ),
    ] {
        let (first, rest, o) = first_line_within(args);
        assert!(first.starts_with("pcibench: about ") && first.trim_end().ends_with(work), "{args:?}: {first}{rest}");
        assert_eq!(o.status.code(), Some(130), "{args:?}: {first}{rest}");
    }
    let args = ["dma", "sim-qdma", "--rate", "sweep", "--size", "64", "--total", "1T", "--dir", "h2c"];
    let (first, rest, o) = first_line_within(&args);
    assert!(first.starts_with("pcibench: about "), "{first}{rest}");
    assert!(
        first.contains(" for 1 curve swept from 5% to 100% of the closed loop's rate (or past it), the longest row ")
            && first.contains(" transfers of 64 B at ")
            && first.trim_end().ends_with("; --total sets it"),
        "{first}{rest}"
    );
    assert_eq!(o.status.code(), Some(130), "{first}{rest}");
}

/// Run pcibench with `args`, its stderr a pipe; once it printed its first stderr line, SIGINT.
/// Returns that line, the rest of stderr and the exit code.
fn first_line_then_ctrl_c(args: &[&str]) -> (String, String, Option<i32>) {
    let mut child = spawn_piped(args);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    interrupt(&child);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let o = child.wait_with_output().unwrap();
    (first, rest, o.status.code())
}

/// On a terminal (a pty from util-linux `script`) the long run shows its bar; the same run's
/// stderr in a pipe (above) does not.
#[test]
fn the_progress_bar_shows_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        // The test hosts have util-linux; say so loudly where one does not.
        eprintln!("SKIPPED: no `script` (util-linux) to give pcibench a terminal");
        return;
    }
    let cmd = format!("{} dma sim --size 1 --total 1G", env!("CARGO_BIN_EXE_pcibench"));
    let mut child = Command::new("script")
        .args(["-qefc", &cmd, "/dev/null"])
        .env("PCIBENCH_SYSROOT", none())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let start = Instant::now();
    while !String::from_utf8_lossy(&seen).contains("eta") {
        assert!(start.elapsed() < Duration::from_secs(300), "no bar: {}", String::from_utf8_lossy(&seen));
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.extend(chunk);
        }
    }
    // Ctrl-C on the terminal: the run stops and reports what it measured.
    child.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
    let status = child.wait().unwrap();
    while let Ok(chunk) = rx.recv_timeout(Duration::from_secs(5)) {
        seen.extend(chunk);
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(
        text.contains("pcibench: about ") && text.contains("the longest 1 GiB in 1 B transfers; --total sets it"),
        "{text}"
    );
    assert!(text.contains("[") && text.contains("eta"), "{text}");
    assert_eq!(status.code(), Some(130), "{text}");
}

/// PIO the same way: no --total, rows sized by time; a --total given is moved whole.
#[test]
fn pio_rows_without_a_total_are_sized_by_time_and_a_given_total_is_kept() {
    let args = ["pio", "sim", "--bar", "2", "--map", "uc", "--width", "8", "--size", "1", "--dir", "c2h", "--json"];
    let o = common::pcibench(none(), &args);
    assert!(o.status.success(), "{}", err(&o));
    let v = common::json(&o);
    let s = &v["results"][0]["stats"];
    assert!(s["samples"].as_u64().unwrap() >= 10, "{s}");
    let secs = s["bytes"].as_f64().unwrap() / (s["mean_mbps"].as_f64().unwrap() * 1e6);
    assert!(secs < 5.0 && s["bytes"].as_u64().unwrap() < 64 << 20, "{secs} s, {s}");

    let o = common::pcibench(none(), &[&args[..], &["--total", "64K"]].concat());
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(common::json(&o)["results"][0]["stats"]["transfers"], 65536, "the total given, whole");
}

/// `pcibench serve sim --no-mmap` on a socket in a fresh directory: every BAR access of the served
/// card is a message round trip (tens of µs here), a device whose reads are slow. Killed when dropped.
struct Served(Child, tempfile::TempDir);

impl Served {
    fn start() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("dev.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .args(["serve", "sim", "--no-mmap", "--socket", socket.to_str().unwrap()])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Bounded wait for the listener (a slow host takes longer, never a different result).
        let until = Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            assert!(Instant::now() < until, "pcibench serve never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Served(child, dir)
    }

    fn device(&self) -> String {
        format!("vfio-user:{}", self.1.path().join("dev.sock").display())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `latency` without --samples sizes each row by time: on a card whose every read is a socket
/// round trip, each row's measured time (samples × mean) is about half a second, whatever the
/// host's speed, where the old fixed 100,000 samples took seconds a row. A count given that would
/// take long is said first, in one line.
#[test]
fn latency_rows_without_samples_are_sized_by_time_and_a_long_count_is_estimated() {
    let served = Served::start();
    let dev = served.device();
    let o = common::pcibench(none(), &["latency", &dev, "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v = common::json(&o);
    let rows = v["results"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        let l = &r["latency"];
        let n = l["samples"].as_u64().unwrap();
        assert!((10..=100_000).contains(&n), "{l}");
        // Sized by time: fewer than the cap, or the whole cap within the half second (the mean has
        // the shells subtracted, so it is at most the row's own time); bounded either way, however
        // loaded the host.
        let secs = n as f64 * l["mean_ns"].as_f64().unwrap() * 1e-9;
        assert!(n < 100_000 || secs < 0.5, "{secs} s measured in {n} samples");
        assert!(secs < 5.0, "{secs} s measured in {n} samples");
    }
    assert!(err(&o).is_empty(), "nothing long to announce: {}", err(&o));

    let (first, rest, code) = first_line_then_ctrl_c(&["latency", &dev, "--samples", "100000000"]);
    assert!(
        first.starts_with("pcibench: about ") && first.trim_end().ends_with("for 100000000 samples; --samples sets it"),
        "{first}{rest}"
    );
    assert_eq!(code, Some(130), "{first}{rest}");
}

/// `first_line_then_ctrl_c` for a request that may say nothing at all (what these tests check):
/// no first line within 60 s (a hang guard: the estimates take a second or two) kills it and fails.
fn first_line_within(args: &[&str]) -> (String, String, std::process::Output) {
    let mut child = spawn_piped(args);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut first = String::new();
        let _ = stderr.read_line(&mut first);
        let _ = tx.send(first);
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let Ok(first) = rx.recv_timeout(Duration::from_secs(60)) else {
        let _ = child.kill();
        panic!("{args:?}: nothing said within 60 s");
    };
    interrupt(&child);
    let o = child.wait_with_output().unwrap();
    let rest = reader.join().unwrap();
    (first, rest, o)
}

/// Issue 55: `run` over a card whose every BAR access is a message says its estimate before the
/// PIO rows run (the probe times each configuration's first accesses: whole transfers of a
/// message per access took minutes before anything was said), and a stop ends a transfer between
/// its accesses instead of after seconds of them: the row says it stopped mid-transfer. The
/// deadline is a hang guard (the estimate takes a second or two; the old probe pass, 100 s).
#[test]
fn run_over_messages_is_estimated_at_once_and_a_stop_cuts_the_transfer() {
    let served = Served::start();
    let dev = served.device();
    let (first, rest, o) = first_line_within(&["run", &dev, "--total", "1M", "--json"]);
    assert!(
        first.starts_with("pcibench: about ")
            && first.contains(" configurations, the longest 1 MiB in ")
            && first.trim_end().ends_with(" transfers; --total sets it"),
        "{first}{rest}"
    );
    assert_eq!(o.status.code(), Some(130), "{first}{rest}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &v["pio"]["results"][0];
    assert_eq!(row["verify"]["reason"], "the stop came mid-transfer: its data was not all moved", "{v}");
    assert!(v["dma"].is_null(), "{v}");
}
