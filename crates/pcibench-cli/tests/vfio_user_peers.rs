//! pcibench against vfio-user peers it did not write, and peers that mean harm: a server that,
//! like libvfio-user, takes one client at a time (every command completes: one command is one
//! connection); several clients at once on one served card (one owner, the rest refused naming
//! it); and a hostile relay that impersonates `pcibench serve`, swaps in memfds it truncates,
//! asks for more memory than it was given, or trickles its replies. Every wait is bounded on a
//! condition (a child's exit, a log line); nothing depends on the host's speed.

mod common;

use common::relay::{Mode, Relay};
use common::served::Served;
use pcibench::access::vfio_user::wire::{self, cmd, Header, Put, Wait};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for `child`, failing (and killing it) if it has not ended within `bound`: a hang is a
/// failure that says so, not a stuck test run. The bound is generous; no result depends on it.
fn finish(child: Child, what: &str, bound: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    rx.recv_timeout(bound).unwrap_or_else(|_| {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        panic!("{what} did not end within {} s", bound.as_secs())
    })
}

fn run(args: &[&str]) -> Output {
    finish(spawn(args), &args.join(" "), Duration::from_secs(300))
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", err(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One line on stderr, exit 1, containing `want`.
fn one_line(o: &Output, want: &str) {
    let e = err(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("pcibench:")).collect();
    assert_eq!(lines.len(), 1, "{e}");
    assert!(lines[0].contains(want), "{e}");
}

/// Every command that takes a `vfio-user:` device completes against a server that answers one
/// client at a time and leaves the next unanswered in its backlog (libvfio-user's way): before,
/// `poke` and `doctor` opened a second connection while holding the first and waited out 10 s.
#[test]
fn every_command_completes_against_a_server_that_takes_one_client_at_a_time() {
    let s = Served::start("sim", &[]);
    let relay = Relay::start(&s.socket, Mode::Plain);
    let dev = relay.device();
    let d = dev.as_str();
    let info = ok(&["info", d]);
    assert!(info.contains("[10ee:7024]"), "{info}");
    let doctor = ok(&["doctor", d]);
    assert!(!doctor.contains("interrupts are unknown") && doctor.contains("MSI-X 32"), "{doctor}");
    ok(&["poke", d, "2", "0x100", "0xabcd1234", "--allow-write"]);
    assert!(ok(&["peek", d, "2", "0x100"]).contains("= 0xabcd1234"));
    ok(&["pio", d, "--bar", "2", "--size", "4K", "--total", "64K", "--allow-write"]);
    ok(&["dma", d, "--size", "4K", "--total", "64K", "--allow-dma"]);
    ok(&["latency", d, "--size", "4K", "--samples", "50", "--dma", "--dma-samples", "50", "--allow-dma"]);
    ok(&["buffers", "--device", d, "--buffer", "device", "--size", "64K"]);
    ok(&["run", d, "--total", "1M", "--allow-write", "--allow-dma"]);
}

/// The relay's VERSION reply is serve's, self-description and all; the process at the other end
/// is not pcibench, so nothing is waived.
#[test]
fn a_relay_that_says_it_is_pcibench_serve_is_not_taken_at_its_word() {
    let s = Served::start("sim", &[]);
    let relay = Relay::start(&s.socket, Mode::Plain);
    let dev = relay.device();
    let info = ok(&["info", &dev]);
    assert!(info.contains("it says it is pcibench serve with sim, but the server process (pid"), "{info}");
    assert!(info.contains("is not this pcibench executable") && !info.contains("SIMULATED"), "{info}");
    one_line(&run(&["dma", &dev, "--size", "4K", "--total", "16K"]), "add --allow-dma to consent");
    let o = run(&["poke", &dev, "2", "0", "1"]);
    assert_ne!(o.status.code(), Some(0), "a write needs --allow-write: {}", err(&o));
    // Straight to serve, the same card is pcibench's own: no consent needed.
    ok(&["dma", &s.device(), "--size", "4K", "--total", "16K"]);
}

#[test]
fn memfds_a_peer_could_shrink_are_never_mapped_and_the_other_side_stays_up() {
    let s = Served::start("sim", &[]);
    // A server that hands out unsealed BAR memory and truncates it: not mapped, reached by message.
    let relay = Relay::start(&s.socket, Mode::UnsealedBars);
    let info = ok(&["info", &relay.device()]);
    assert!(info.contains("BAR2 not mapped: the descriptor is not sealed against shrinking"), "{info}");
    ok(&["pio", &relay.device(), "--bar", "2", "--size", "4K", "--total", "64K", "--allow-write"]);
    assert!(relay.events.lock().unwrap().iter().any(|e| e.contains("truncated a BAR memfd: Ok")));
    drop(relay);
    // A server that tries to truncate the client's DMA buffers: they are sealed.
    let relay = Relay::start(&s.socket, Mode::TruncateDmaFds);
    ok(&["dma", &relay.device(), "--size", "4K", "--total", "64K", "--allow-dma"]);
    let events = relay.events.lock().unwrap().clone();
    assert!(!events.is_empty() && events.iter().all(|e| e.contains("Err")), "{events:?}");
    drop(relay);
    // A client that maps more than the memfd it passes holds: refused, one line, serve alive.
    let relay = Relay::start(&s.socket, Mode::OversizeDmaMaps);
    one_line(&run(&["dma", &relay.device(), "--size", "4K", "--total", "16K", "--allow-dma"]), "refused DMA_MAP");
    drop(relay);
    s.wait_log(0, "the refused map", |l| l.contains("too short"));
    ok(&["peek", &s.device(), "2", "0x0"]);
}

/// A server trickling its reply a byte at a time cannot hold a client past its per-request
/// deadline, and a stop (SIGTERM) ends a run at the next request.
#[test]
fn a_trickling_server_is_cut_off_by_the_client_s_deadline_and_its_stop() {
    let s = Served::start("sim", &[]);
    let relay = Relay::start(&s.socket, Mode::TrickleAfter(0));
    // BAR4 holds the engine's registers: messages, never mapped.
    one_line(&run(&["peek", &relay.device(), "4", "0x0"]), "did not answer REGION_READ within 10 s");
    drop(relay);
    // A run that trickles part-way (once its engine runs), then a SIGTERM: it stops (130) or
    // fails in one line, at once rather than after one 10 s wait per teardown request.
    let relay = Relay::start(&s.socket, Mode::TrickleAfter(300));
    let child = spawn(&["dma", &relay.device(), "--size", "4K", "--total", "64G", "--allow-dma"]);
    let until = std::time::Instant::now() + Duration::from_secs(300);
    while !relay.events.lock().unwrap().iter().any(|e| e == "trickling") {
        assert!(std::time::Instant::now() < until, "the run never got to its 300th register read");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill").args(["-s", "TERM", &child.id().to_string()]).status();
    let o = finish(child, "dma after SIGTERM", Duration::from_secs(120));
    assert!(matches!(o.status.code(), Some(130) | Some(1)), "{}", err(&o));
}

/// A client that starts a message and trickles the rest is dropped by serve at the whole
/// message's deadline, and the card goes to the next client.
#[test]
fn a_trickling_client_is_dropped_and_the_next_is_served() {
    use std::io::Write;
    let s = Served::start("sim", &[]);
    let mut c = UnixStream::connect(&s.socket).unwrap();
    let t = std::thread::spawn(move || {
        let _ = c.write_all(&[1, 0, 1, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        for _ in 0..300 {
            if c.write_all(&[0]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    s.wait_log(0, "the trickler dropped", |l| l.contains("was dropped") && l.contains("whole within 10 s"));
    ok(&["peek", &s.device(), "2", "0x0"]);
    drop(s);
    t.join().unwrap();
}

/// Raw connections flooding serve while a client holds the card: each is refused or closed,
/// the holder's run is undisturbed, and serve takes the next client.
#[test]
fn a_flood_of_clients_is_refused_and_bounded() {
    let s = Served::start("sim", &[]);
    let holder = spawn(&["dma", &s.device(), "--size", "4K", "--total", "64G"]);
    s.wait_log(0, "the holder", |l| l.contains("a client connected"));
    let wait = Wait {
        idle: Some(std::time::Instant::now() + Duration::from_secs(120)),
        whole: Duration::from_secs(60),
        stop: &|| false,
    };
    let flood: Vec<UnixStream> = (0..40).filter_map(|_| UnixStream::connect(&s.socket).ok()).collect();
    let mut refused = 0;
    for c in &flood {
        let v = Put::default().u16(0).u16(0).bytes(b"{}\0").0;
        let _ = wire::send(c, Header { id: 1, command: cmd::VERSION, size: 0, flags: 0, error: 0 }, &v, &[], None);
    }
    for c in &flood {
        // Each is told the card is busy, or closed at once (more than the refusals in progress).
        if let Ok(Some(m)) = wire::recv(c, &wait) {
            assert_eq!((m.header.flags & wire::FLAG_ERROR != 0, m.header.error), (true, 16), "EBUSY");
            refused += 1;
        }
    }
    assert!(refused >= 1, "at least the first were told the card is busy");
    drop(flood);
    let _ = Command::new("kill").args(["-s", "INT", &holder.id().to_string()]).status();
    let o = finish(holder, "the holder after SIGINT", Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    ok(&["peek", &s.device(), "2", "0x0"]);
}

#[test]
fn a_client_s_dma_maps_are_bounded() {
    let s = Served::start("sim", &["--max-dma", "256K"]);
    one_line(&run(&["dma", &s.device(), "--size", "512K", "--total", "1M"]), "refused DMA_MAP");
    s.wait_log(0, "the limit named", |l| l.contains("serve --max-dma"));
}

/// Eight `dma` runs at once on one served card: one holds it, every other is refused in one line
/// naming the holder's pid; the holder's rows verify. Then eight short runs at once: each either
/// completes verified or is refused so.
#[test]
fn eight_clients_at_once_one_owner_the_rest_refused_naming_it() {
    let s = Served::start("sim", &[]);
    let holder = spawn(&["dma", &s.device(), "--size", "4K", "--total", "64G", "--json"]);
    s.wait_log(0, "the holder", |l| l.contains("a client connected"));
    let others: Vec<Child> = (0..7).map(|_| spawn(&["dma", &s.device(), "--size", "4K", "--total", "64K"])).collect();
    for c in others {
        let o = finish(c, "a refused dma", Duration::from_secs(300));
        one_line(&o, &format!("is serving its card to another client (pid {})", holder.id()));
    }
    let _ = Command::new("kill").args(["-s", "INT", &holder.id().to_string()]).status();
    let o = finish(holder, "the holder", Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for r in report["results"].as_array().unwrap() {
        // Every row measured verified; the one Ctrl-C cut short measured nothing.
        assert!(r["verify"]["status"] == "ok" || r["stats"].is_null(), "{r}");
    }
    let runs: Vec<Child> =
        (0..8).map(|_| spawn(&["dma", &s.device(), "--size", "4K", "--total", "256K", "--json"])).collect();
    let mut verified = 0;
    for c in runs {
        let o = finish(c, "one of eight", Duration::from_secs(300));
        if o.status.success() {
            let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert!(report["results"].as_array().unwrap().iter().all(|r| r["verify"]["status"] == "ok"));
            verified += 1;
        } else {
            one_line(&o, "is serving its card to another client (pid");
        }
    }
    assert!(verified >= 1);
}
