//! Completion by interrupt across a process boundary: `pcibench serve` in a child process raises
//! its sim card's MSI-X, MSI and INTx, and `dma` / `latency --dma` in another complete by them,
//! every row verified; a client killed mid-transfer (SIGINT, SIGKILL) leaves the served card's
//! interrupt enables as found, and the server takes the next client. Every wait is on a
//! condition (a row, a doctor line, the child's exit), bounded; nothing depends on timing.

mod common;

use common::served::Served;
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn pcibench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench")).args(args).output().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// How the report names the routed kind: "MSI-X vectors 0-1 (vfio-user eventfd)".
fn routed_as(kind: &str) -> &'static str {
    match kind {
        "msix" => "MSI-X vector",
        "msi" => "MSI vector",
        _ => "INTx (vfio-user eventfd",
    }
}

/// Every row verified, polled and by interrupt side by side, the interrupt the kind asked for.
fn check_both(report: &Value, kind: &str, what: &str) {
    assert_eq!(report["via"], "vfio-user", "{what}");
    let irq = report["interrupts"].as_str().unwrap_or_default();
    assert!(irq.starts_with(routed_as(kind)) && irq.contains("vfio-user eventfd"), "{what}: {irq}");
    let rows = report["results"].as_array().unwrap();
    let dma: Vec<&Value> = rows.iter().filter(|r| r["completion"].is_string()).collect();
    assert!(!dma.is_empty(), "{what}: {report}");
    for r in &dma {
        assert_eq!(r["verify"]["status"], "ok", "{what}: {r}");
    }
    for mode in ["poll", "irq"] {
        assert!(dma.iter().any(|r| r["completion"] == mode), "{what}: no {mode} row");
    }
    assert_eq!(dma.iter().filter(|r| r["completion"] == "poll").count() * 2, dma.len(), "{what}: paired rows");
}

#[test]
fn dma_completes_by_each_kind_the_served_card_offers() {
    let cases: [(&str, &[&str], &[&str]); 3] = [
        ("sim", &[], &["msix", "msi", "intx"]),
        ("sim-qdma", &["--queues", "1,4"], &["msix"]),
        ("sim-nvram", &[], &["intx"]),
    ];
    for (card, extra, kinds) in cases {
        let s = Served::start(card, &[]);
        let dev = s.device();
        for kind in kinds {
            let args = [&["dma", dev.as_str(), "--size", "4K,64K", "--total", "256K"], extra].concat();
            let args = [&args[..], &["--completion", "both", "--irq-kind", kind, "--json"]].concat();
            check_both(&json(&pcibench(&args)), kind, &format!("{card} {kind}"));
        }
        if card == "sim-qdma" {
            // libqdma's indirect mode too: every queue through the interrupt ring, over the socket.
            let args = ["dma", &dev, "--size", "4K", "--total", "64K", "--queues", "1,4", "--completion", "both"];
            let report = json(&pcibench(&[&args[..], &["--qdma-intr", "aggregated", "--json"]].concat()));
            check_both(&report, "msix", "sim-qdma aggregated");
            assert!(report["interrupts"].as_str().unwrap().contains("interrupt ring"), "{}", report["interrupts"]);
            // A kind the card does not have is refused in one line, before anything runs.
            let out =
                pcibench(&["dma", &dev, "--completion", "irq", "--irq-kind", "intx", "--size", "4K", "--total", "16K"]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && err.contains("offers no INTx vectors"), "{err}");
            assert!(err.contains("it offers: MSI-X"), "{err}");
        }
    }
}

#[test]
fn latency_dma_prints_both_histograms_for_each_kind() {
    for (card, kinds) in [("sim", &["msix", "msi", "intx"][..]), ("sim-qdma", &["msix"]), ("sim-nvram", &["intx"])] {
        let s = Served::start(card, &[]);
        let dev = s.device();
        for kind in kinds {
            let out = pcibench(&[
                "latency",
                &dev,
                "--dma",
                "--size",
                "4K",
                "--samples",
                "50",
                "--dma-samples",
                "50",
                "--completion",
                "both",
                "--irq-kind",
                kind,
                "--json",
            ]);
            let report = json(&out);
            check_both(&report, kind, &format!("latency {card} {kind}"));
            for r in report["results"].as_array().unwrap().iter().filter(|r| r["completion"].is_string()) {
                assert!(r["latency"].is_object(), "a histogram per mode: {r}");
            }
        }
    }
}

/// The served card's interrupts as `doctor` reads them: "none enabled now", or what is. Asked
/// while no other client holds the card (the server has one client at a time).
fn enables(dev: &str) -> String {
    let out = pcibench(&["doctor", dev]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.contains("interrupts")).unwrap_or_else(|| panic!("{text}"));
    line.split("; ").find(|p| p.contains("enabled now")).unwrap_or_else(|| panic!("{line}")).to_string()
}

#[test]
fn a_client_killed_mid_transfer_leaves_the_enables_as_found_and_serve_takes_the_next() {
    let s = Served::start("sim", &[]);
    let dev = s.device();
    assert_eq!(enables(&dev), "none enabled now");
    for (signal, kind, label) in [("INT", "msix", "MSI-X"), ("KILL", "msi", "MSI")] {
        let from = s.logged();
        let mut client = Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .args(["dma", &dev, "--size", "64K", "--total", "64G", "--completion", "irq", "--irq-kind", kind])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Routed (SET_IRQS enabled it at the card): the transfers are running by interrupt. The
        // card is the client's alone now, so the server's log says so, not `doctor`.
        let routed = format!("{label} x");
        let (_, from) = s.wait_log(from, "the routing", |l| l.contains("interrupts (") && l.contains(&routed));
        let status = Command::new("kill").args(["-s", signal, &client.id().to_string()]).status().unwrap();
        assert!(status.success());
        let pid = client.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(client.wait().unwrap()));
        let code = rx.recv_timeout(Duration::from_secs(300)).unwrap_or_else(|_| {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("pcibench dma did not end after SIG{signal}")
        });
        if signal == "INT" {
            assert_eq!(code.code(), Some(130), "Ctrl-C ends the run as interrupted");
        }
        // The client's teardown (SIGINT) or the server's when the connection drops (SIGKILL),
        // done before the session's last line.
        s.wait_log(from, "the client's end", |l| l.contains("a client disconnected") || l.contains("was dropped"));
        assert_eq!(enables(&dev), "none enabled now", "after SIG{signal}");
        // The next client completes by interrupt, every row verified.
        let args =
            ["dma", &dev, "--size", "4K", "--total", "64K", "--completion", "both", "--irq-kind", kind, "--json"];
        check_both(&json(&pcibench(&args)), kind, &format!("after SIG{signal}"));
    }
}
