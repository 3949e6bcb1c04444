//! The vfio-user access path against `pcibench serve` in a child process: every sim card served
//! and measured through the socket, the rows the same as the in-process card's and verified; and
//! the faults: a server killed mid-run, a server that answers garbage, a socket path that is a
//! regular file or a FIFO. Every wait is on a condition (the socket appearing, a log line), bounded.

mod common;

use common::served::Served;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn pcibench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench")).args(args).output().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each row's configuration (what the row measured, without its figures), and that it verified.
fn configs(report: &Value) -> Vec<Value> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            // A latency read row checks nothing it could verify ("reads only"); the rest verify.
            let reads_only = r["verify"]["reason"].as_str().is_some_and(|w| w.starts_with("reads only"));
            assert!(r["verify"]["status"] == "ok" || reads_only, "{r}");
            let mut c = r.clone();
            // Figures (the engine's own counters too), and the pattern (new every run, as the rules say).
            for k in ["stats", "notes", "limit_mbps", "efficiency_pct", "latency", "batch", "pattern_sha256", "engine"]
            {
                c.as_object_mut().unwrap().remove(k);
            }
            // Packets per second is a figure too; that a stream row has one is configuration.
            if c.as_object_mut().unwrap().remove("packets_per_s").is_some() {
                c["packets"] = Value::Bool(true);
            }
            c
        })
        .collect()
}

/// The same command on the in-process card and on the served one: the same rows, all verified.
fn same_rows(card: &str, served: &Served, args: &[&str]) {
    let local = json(&pcibench(&[&[args[0], card], &args[1..], &["--json"]].concat()));
    let dev = served.device();
    let remote = json(&pcibench(&[&[args[0], dev.as_str()], &args[1..], &["--json"]].concat()));
    assert_eq!(remote["via"], "vfio-user");
    assert!(!configs(&local).is_empty());
    assert_eq!(configs(&local), configs(&remote), "{card}: {args:?}");
}

const CARDS: [&str; 4] = ["sim", "sim-qdma", "sim-nvram", "sim-xdma-st"];

#[test]
fn info_names_the_server_and_finds_the_same_engine() {
    for card in CARDS {
        let s = Served::start(card, &[]);
        let out = pcibench(&["info", &s.device()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(&format!("vfio-user:     pcibench's simulated card {card}, served by pcibench serve")),
            "{text}"
        );
        assert!(text.contains("Server:        protocol 0.1"), "{text}");
        assert!(text.contains(r#""pcibench":{"card":""#), "{text}");
        let local = String::from_utf8(pcibench(&["info", card]).stdout).unwrap();
        let engine = |t: &str| t.lines().find(|l| l.contains("DMA engine:")).map(str::to_string);
        assert_eq!(engine(&text), engine(&local), "{card}");
        assert!(engine(&text).is_some(), "{text}");
    }
}

#[test]
fn pio_mapped_and_message_only_match_the_in_process_card() {
    let mapped = Served::start("sim", &[]);
    let info = String::from_utf8(pcibench(&["info", &mapped.device()]).stdout).unwrap();
    assert!(info.contains("Mapped BARs:   BAR0, BAR2"), "{info}");
    same_rows("sim", &mapped, &["pio", "--bar", "2", "--size", "4K", "--total", "64K"]);
    let messages = Served::start("sim", &["--no-mmap"]);
    let info = String::from_utf8(pcibench(&["info", &messages.device()]).stdout).unwrap();
    assert!(info.contains("Mapped BARs:   none (every BAR access is a region read/write message)"), "{info}");
    // Every access a message: labelled as the syscall path is (one round trip per access).
    let args = ["pio", "--bar", "2", "--size", "256", "--total", "4K", "--width", "32", "--json"];
    let local = json(&pcibench(&[&["pio", "sim"], &args[1..]].concat()));
    let remote = json(&pcibench(&[&["pio", messages.device().as_str()], &args[1..]].concat()));
    let unlabelled = |r: &Value| {
        configs(r)
            .into_iter()
            .map(|mut c| {
                let io = c.as_object_mut().unwrap().remove("io").unwrap();
                (c, io)
            })
            .collect::<Vec<_>>()
    };
    let (local, remote) = (unlabelled(&local), unlabelled(&remote));
    assert_eq!(local.iter().map(|(c, _)| c).collect::<Vec<_>>(), remote.iter().map(|(c, _)| c).collect::<Vec<_>>());
    assert!(local.iter().all(|(_, io)| io == "mmap") && remote.iter().all(|(_, io)| io == "syscall"), "{remote:?}");
}

#[test]
fn peek_and_poke_reach_the_served_card_and_it_keeps_them() {
    for extra in [&[][..], &["--no-mmap"][..]] {
        let s = Served::start("sim", extra);
        let dev = s.device();
        let out = pcibench(&["poke", &dev, "2", "0x100", "0xabcd1234"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = pcibench(&["peek", &dev, "2", "0x100"]);
        assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("{dev} BAR2+0x100 = 0xabcd1234"));
        // The engine's registers are messages, served by the model: XDMA's H2C identifier.
        let out = pcibench(&["peek", &dev, "4", "0x0"]);
        assert!(String::from_utf8(out.stdout).unwrap().contains("= 0x1fc0"), "{extra:?}");
    }
}

#[test]
fn dma_on_every_engine_both_ways_matches_the_in_process_card() {
    for card in CARDS {
        let s = Served::start(card, &[]);
        same_rows(card, &s, &["dma", "--size", "4K,64K", "--total", "256K"]);
    }
}

#[test]
fn dma_latency_through_the_socket() {
    let s = Served::start("sim", &[]);
    same_rows("sim", &s, &["latency", "--dma", "--size", "4K", "--samples", "200", "--dma-samples", "200"]);
}

#[test]
fn a_server_killed_mid_dma_is_one_line_and_exit_1() {
    let mut s = Served::start("sim", &[]);
    let dev = s.device();
    let client = Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(["dma", &dev, "--size", "64K", "--total", "64G"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    s.wait_log(0, "a client connected", |l| l.contains("a client connected"));
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The client's own waits are bounded (a reply in 10 s, the engine's watchdog); this bound only
    // turns a hang into a failure that says so, rather than a stuck test run.
    let pid = client.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(client.wait_with_output().unwrap()));
    let out = rx.recv_timeout(Duration::from_secs(300)).unwrap_or_else(|_| {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        panic!("pcibench dma hung after its vfio-user server was killed")
    });
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().filter(|l| l.starts_with("pcibench:")).collect::<Vec<_>>();
    assert_eq!(last.len(), 1, "{err}");
    assert!(last[0].contains("vfio-user server at"), "{err}");
}

#[test]
fn a_server_that_answers_garbage_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let t = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        // A header claiming 4 GiB, then noise: the client must refuse it without allocating.
        let _ = c.write_all(&[0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0]);
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
        // Open until the client leaves, so what it sees is the garbage, not a closed socket.
        let _ = std::io::Read::read_to_end(&mut c, &mut Vec::new());
    });
    let out = pcibench(&["info", &format!("vfio-user:{}", path.display())]);
    t.join().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("sent a malformed reply") && err.contains("is it a vfio-user server?"), "{err}");
}

#[test]
fn socket_paths_that_are_not_sockets_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a socket").unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();
    for (p, what) in [(&file, "a regular file"), (&fifo, "a FIFO")] {
        let out = pcibench(&["pio", &format!("vfio-user:{}", p.display())]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("is {what}, not a vfio-user server's UNIX socket")), "{err}");
        // serve refuses to replace it.
        let out = pcibench(&["serve", "sim", "--socket", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        assert!(Path::new(p).exists());
    }
}

#[test]
fn a_model_that_is_not_pcibench_s_own_needs_consent_and_is_read_from_config_space() {
    let s = Served::start("sim", &["--anonymous"]);
    let dev = s.device();
    let out = pcibench(&["info", &dev]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[10ee:7024] driver=none") && !text.contains("SIMULATED"), "{text}");
    assert!(text.contains("vfio-user:     a device model in another process"), "{text}");
    assert!(text.contains("BAR4: 0x0 size 64 KiB (0x10000) memory 64-bit prefetchable"), "{text}");
    let out = pcibench(&["dma", &dev, "--size", "4K", "--total", "16K"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("add --allow-dma to consent"), "{err}");
    let out = pcibench(&["poke", &dev, "2", "0", "1"]);
    assert_ne!(out.status.code(), Some(0), "a write needs --allow-write");
    let out = pcibench(&["dma", &dev, "--size", "4K", "--total", "16K", "--allow-dma", "--json"]);
    let report = json(&out);
    assert_eq!(report["simulated"], false);
    assert_eq!(configs(&report).len(), 2, "h2c and c2h, verified");
}
