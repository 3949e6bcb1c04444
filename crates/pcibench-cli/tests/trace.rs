//! `--trace FILE` on `dma`, `latency`, `run` and `info`: a file of JSON lines, first the trace's
//! own line, last how the run ended, in between every register access, DMA buffer, descriptor and
//! writeback; refused up front where the name is not a regular file or a new one; bounded by
//! `--trace-limit`; complete after a Ctrl-C.

mod common;

use common::err;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn none() -> &'static Path {
    Path::new("/nonexistent-root")
}

fn pcibench(args: &[&str]) -> Output {
    common::pcibench(none(), args)
}

/// Every line of the trace, each of which must be JSON.
fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {l}", i + 1)))
        .collect()
}

fn count(l: &[Value], ev: &str) -> usize {
    l.iter().filter(|x| x["ev"] == ev).count()
}

/// A trace that begins with its own line and ends saying how the run ended.
fn framed(l: &[Value], outcome: &str) {
    assert_eq!(l[0]["ev"], "trace", "{}", l[0]);
    assert_eq!(l[0]["version"], 1);
    assert!(l[0]["command"].as_array().unwrap().iter().any(|a| a == "--trace"), "{}", l[0]);
    let end = l.last().unwrap();
    assert_eq!((end["ev"].as_str(), end["outcome"].as_str()), (Some("end"), Some(outcome)), "{end}");
    assert_eq!(count(l, "end"), 1);
}

#[test]
fn dma_on_each_sim_card_traces_its_registers_buffers_descriptors_and_writebacks() {
    let t = tempfile::tempdir().unwrap();
    for (card, engine) in [("sim", "xdma"), ("sim-qdma", "qdma"), ("sim-nvram", "umem")] {
        let path = t.path().join(format!("{card}.jsonl"));
        let o = pcibench(&["dma", card, "--size", "4K", "--total", "8K", "--trace", path.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{card}: {}", err(&o));
        let l = lines(&path);
        framed(&l, "ok");
        assert!(
            err(&o).contains(&format!("pcibench: trace: {} lines in {}", l.len() - 2, path.display())),
            "{}",
            err(&o)
        );
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(report["warnings"].to_string().contains("traced to"), "{card}: the report says it was traced");
        // Each row says what tracing cost it, from a calibration (issue 43): a positive cost per
        // line, the lines its timed samples wrote (fewer than the whole trace), a share.
        for row in report["results"].as_array().unwrap() {
            let notes = row["notes"].as_array().unwrap();
            let n = notes.iter().find(|n| n["note"] == "tracing").unwrap_or_else(|| panic!("{card}: {row}"));
            let (events, ns, pct) =
                (n["events"].as_u64().unwrap(), n["ns_per_event"].as_f64().unwrap(), n["share_pct"].as_f64().unwrap());
            assert!(events > 0 && events < l.len() as u64 && ns > 0.0 && pct > 0.0 && pct <= 100.0, "{card}: {n}");
        }
        assert_eq!(count(&l, "measure"), 1);
        assert_eq!(l.iter().find(|x| x["ev"] == "measure").unwrap()["kind"], "dma");
        // Both directions, each verified: descriptors for every transfer, the writebacks seen.
        let descs: Vec<&Value> = l.iter().filter(|x| x["ev"] == "desc").collect();
        assert!(descs.len() >= 4 && descs.iter().all(|d| d["engine"] == engine), "{card}: {descs:?}");
        assert!(l.iter().any(|x| x["ev"] == "wb" && x["engine"] == engine), "{card}");
        assert!(count(&l, "buffer") >= 2 && count(&l, "write") > 0 && count(&l, "read") > 0, "{card}");
        // Bus Master on for the run, put back after it.
        assert!(count(&l, "config-write") >= 2, "{card}");
        for x in l.iter().filter(|x| x["ev"] == "read" || x["ev"] == "write") {
            assert!(
                x["t"].is_u64() && x["bar"].is_u64() && [8, 16, 32, 64].contains(&x["w"].as_u64().unwrap()),
                "{card}: {x}"
            );
            assert!(x["off"].as_str().unwrap().starts_with("0x") && x["v"].as_str().unwrap().starts_with("0x"), "{x}");
        }
    }
}

#[test]
fn completion_by_interrupt_traces_the_routing_every_signal_and_the_teardown() {
    // A line per wait that collected signals, so a host can hold a run and set the trace's count beside the
    // kernel's for the same vectors (/proc/interrupts), as the lab does on served cards.
    let t = tempfile::tempdir().unwrap();
    for (card, kind, extra) in [
        ("sim", "MSI-X", &[][..]),
        ("sim", "MSI", &[][..]),
        ("sim-nvram", "INTx", &[][..]),
        ("sim-qdma", "MSI-X", &["--qdma-intr", "aggregated"][..]),
    ] {
        let path = t.path().join(format!("{card}-{kind}.jsonl"));
        let k = kind.to_lowercase().replace('-', "");
        let mut args = vec!["dma", card, "--size", "4K", "--total", "16K", "--completion", "irq", "--irq-kind", &k];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--trace", path.to_str().unwrap()]);
        let o = pcibench(&args);
        assert!(o.status.success(), "{card} {kind}: {}", err(&o));
        let l = lines(&path);
        framed(&l, "ok");
        let at = |ev: &str| l.iter().enumerate().filter(|(_, x)| x["ev"] == ev).map(|(i, _)| i).collect::<Vec<_>>();
        let (routes, irqs, offs) = (at("irq-route"), at("irq"), at("irq-off"));
        assert!(!routes.is_empty() && routes.len() == offs.len(), "{card} {kind}: each routing torn down: {l:?}");
        assert!(!irqs.is_empty(), "{card} {kind}: completions by interrupt, each traced");
        for (r, o) in routes.iter().zip(&offs) {
            assert!(r < o && l[*r]["kind"] == kind && l[*o]["kind"] == kind, "{card}: {} .. {}", l[*r], l[*o]);
        }
        for i in &irqs {
            // Each signal lies inside a routing, on a routed vector, and the line's total is its vectors' sum.
            let r = routes.iter().zip(&offs).find(|(r, o)| *r < i && i < *o);
            let (r, _) = r.unwrap_or_else(|| panic!("{card} {kind}: a signal outside any routing: {}", l[*i]));
            let vectors = l[*r]["vectors"].as_u64().unwrap();
            let pairs = l[*i]["vectors"].as_array().unwrap();
            let sum: u64 = pairs.iter().map(|p| p[1].as_u64().unwrap()).sum();
            assert!(sum > 0 && sum == l[*i]["n"].as_u64().unwrap(), "{}", l[*i]);
            assert!(pairs.iter().all(|p| p[0].as_u64().unwrap() < vectors), "{} of {vectors}", l[*i]);
        }
    }
}

#[test]
fn info_latency_and_run_trace_what_they_do_to_the_card() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("info.jsonl");
    let o = pcibench(&["info", "sim", "--trace", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let l = lines(&path);
    framed(&l, "ok");
    // The XDMA probe: the IRQ and config block identifiers in BAR4, nothing written.
    assert!(l.iter().any(|x| x["ev"] == "read" && x["bar"] == 4 && x["off"] == "0x2000" && x["v"] == "0x1fc20006"));
    assert_eq!(count(&l, "write"), 0, "info only reads");

    let path = t.path().join("latency.jsonl");
    let o = pcibench(&[
        "latency",
        "sim",
        "--samples",
        "100",
        "--dma",
        "--size",
        "4K",
        "--dma-samples",
        "3",
        "--trace",
        path.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let l = lines(&path);
    framed(&l, "ok");
    // Each direction's descriptor is built once (warm-up and samples run it again), and every run's
    // writeback is seen.
    assert!(count(&l, "desc") >= 2 && count(&l, "wb") >= 6, "{:?}", l);

    let path = t.path().join("run.jsonl");
    let o = pcibench(&["run", "sim-qdma", "--total", "1M", "--trace", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let l = lines(&path);
    framed(&l, "ok");
    let kinds: Vec<&str> = l.iter().filter(|x| x["ev"] == "measure").map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run", "pio", "dma"], "the suite, then each of its parts, is a line");
    assert!(count(&l, "desc") > 0 && l.iter().any(|x| x["ev"] == "wb" && x["what"] == "status"));
}

#[test]
fn a_trace_past_its_limit_says_so_and_the_run_goes_on() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("t.jsonl");
    let o = pcibench(&[
        "dma",
        "sim",
        "--size",
        "4K",
        "--total",
        "64K",
        "--trace",
        path.to_str().unwrap(),
        "--trace-limit",
        "20",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let l = lines(&path);
    framed(&l, "ok");
    assert_eq!(l.len(), 1 + 20 + 2, "the first line, 20 events, capped, end");
    assert_eq!(l[21]["ev"], "capped");
    let dropped = l[22]["dropped"].as_u64().unwrap();
    assert!(
        dropped > 0 && err(&o).contains(&format!("{dropped} later events left out (--trace-limit)")),
        "{}",
        err(&o)
    );
}

#[test]
fn a_trace_file_that_is_not_a_regular_file_or_a_new_name_is_refused_before_anything_runs() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = t.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let hard = t.path().join("hard.jsonl");
    std::fs::hard_link(&target, &hard).unwrap();
    let fifo = t.path().join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0)
        .unwrap();
    let dir = t.path().to_str().unwrap().to_string();
    for (path, why) in [
        (link.to_str().unwrap(), "is a symbolic link"),
        (hard.to_str().unwrap(), "other hard links"),
        (fifo.to_str().unwrap(), "is a FIFO"),
        (&dir, "is a directory"),
        ("/dev/null", "is a device node"),
        ("/nonexistent-dir/t.jsonl", "there is no directory /nonexistent-dir"),
    ] {
        for cmd in [&["dma", "sim"][..], &["info", "sim"], &["latency", "sim"], &["run", "sim"]] {
            let args: Vec<&str> = cmd.iter().copied().chain(["--trace", path]).collect();
            let o = pcibench(&args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
            assert!(o.stdout.is_empty(), "{args:?}: nothing measured");
            let e = err(&o);
            assert!(e.contains(why) && e.lines().count() == 1, "{args:?}: {e}");
        }
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    let o = pcibench(&["dma", "sim", "--trace-limit", "10"]);
    assert_eq!(o.status.code(), Some(2), "--trace-limit needs --trace: {}", err(&o));
    let o = pcibench(&["dma", "sim", "--trace", t.path().join("n.jsonl").to_str().unwrap(), "--trace-limit", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
}

/// Ctrl-C mid-run: the trace is whole, every line JSON, the engine's stop in it, and its last
/// line says the run was interrupted. (`run` is interrupted in its PIO part: no engine is open.)
#[test]
fn a_run_interrupted_by_sigint_leaves_a_complete_trace() {
    let t = tempfile::tempdir().unwrap();
    for (args, wait_for, engine) in [
        (&["dma", "sim", "--size", "64K", "--total", "1T"][..], "\"ev\":\"wb\"", Some("xdma")),
        (&["dma", "sim-nvram", "--size", "64K", "--total", "1T"], "\"ev\":\"wb\"", Some("umem")),
        (&["dma", "sim-qdma", "--size", "64K", "--total", "1T"], "\"ev\":\"wb\"", Some("qdma")),
        (&["run", "sim", "--total", "1T"], "\"kind\":\"pio\"", None),
    ] {
        let path = t.path().join(format!("{}.jsonl", args[1]));
        let mut child = Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .args(args)
            .args(["--trace", path.to_str().unwrap()])
            .env("PCIBENCH_SYSROOT", none())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Interrupt once the engine is moving data (a writeback in the file), however long that takes.
        let start = Instant::now();
        while !std::fs::read_to_string(&path).is_ok_and(|s| s.contains(wait_for)) {
            assert!(start.elapsed() < Duration::from_secs(300), "{args:?}: no {wait_for} traced");
            assert!(child.try_wait().unwrap().is_none(), "{args:?}: ended before the interrupt");
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{args:?}: {}", err(&o));
        let l = lines(&path);
        framed(&l, "interrupted");
        // Issue 43: the trace's summary is folded into the one line that says the run was stopped.
        let e = err(&o);
        let last = e.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("pcibench: interrupted")
                && last.contains(&format!("(trace: {} lines in {}", l.len() - 2, path.display())),
            "{args:?}: {e}"
        );
        assert_eq!(e.matches("trace:").count(), 1, "{args:?}: {e}");
        if let Some(engine) = engine {
            let stop = l.iter().position(|x| x["ev"] == "stop" && x["engine"] == engine);
            assert!(stop.is_some_and(|i| i < l.len() - 1), "{args:?}: the engine's stop is traced before the end");
        }
    }
}

/// Issue 43: a request the device refuses (a --total below one transfer of the sim card's
/// 0x128000-byte window, known only once its engine is open) is one stderr line, exit 2, and
/// leaves no trace file; a run that fails on the device keeps its trace, named in that one line.
#[test]
fn a_refused_request_makes_no_trace_and_prints_one_line() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("t.jsonl");
    let o = pcibench(&["dma", "sim", "--total", "1M", "--trace", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("pcibench: --total 1 MiB is less than one") && !e.contains("trace"), "{e}");
    assert!(!path.exists(), "no trace file for a refused request");
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0, "nor any other file");
    // Refused by the card (a queue count past what the engine was opened with) after its
    // engine was open: the same.
    let o =
        pcibench(&["dma", "sim", "--size", "4K", "--total", "8K", "--dir", "bidir", "--trace", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(!path.exists());
}
