//! Issue 50 item 10: no option accepted and then not applied. Every combination of the options
//! that shape a `dma` or `latency --dma` row (completion, offered rate, queues, access pattern,
//! direction) on every simulated card either is refused in one line (exit 2) or runs, and then
//! each row records what was asked: its direction and size, its queue count, its way of seeing
//! completion, its random window, its offered rate. `dma --rate R --completion irq` used to exit 0
//! having polled, with no interrupt even set up.

use serde_json::Value;
use std::process::Command;

const CARDS: [&str; 5] = ["sim", "sim-xdma-st", "sim-qdma", "sim-qdma-st", "sim-nvram"];

/// What one combination asks for.
#[derive(Debug, Clone, Copy)]
struct Ask {
    completion: Option<&'static str>,
    rate: bool,
    queues: Option<u64>,
    random: bool,
}

impl Ask {
    fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(c) = self.completion {
            a.extend(["--completion".into(), c.into()]);
        }
        if self.rate {
            a.extend(["--rate".into(), "20K".into()]);
        }
        if let Some(q) = self.queues {
            a.extend(["--queues".into(), q.to_string()]);
        }
        if self.random {
            a.extend(["--pattern".into(), "random".into(), "--window".into(), "1M".into()]);
        }
        a
    }
}

/// Run `pcibench args`: Some(report) when it ran, None when refused in one line (asserted).
fn run(args: &[String]) -> Option<Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(args)
        .env("PCIBENCH_SYSROOT", "/nonexistent")
        .env_remove("PCIBENCH_SIM_FAULT")
        .output()
        .expect("run pcibench");
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        Some(0) => Some(serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))),
        Some(2) => {
            let lines: Vec<&str> = err.lines().filter(|l| !l.contains("warning:")).collect();
            assert!(lines.len() == 1 && lines[0].starts_with("pcibench: "), "{args:?} refused, not in one line: {err}");
            None
        }
        c => panic!("{args:?}: exit {c:?}: {err}"),
    }
}

/// Every row of `report` records what `ask` asked for; `what` names the run in failures.
fn check_rows(report: &Value, ask: Ask, dirs: &[&str], what: &str) {
    let rows = report["results"].as_array().unwrap_or_else(|| panic!("{what}: no rows"));
    assert!(!rows.is_empty(), "{what}: no rows");
    let mut ways = std::collections::BTreeSet::new();
    for row in rows {
        let dir = row["dir"].as_str().unwrap_or("");
        assert!(dirs.contains(&dir), "{what}: a {dir} row, {dirs:?} asked");
        assert_eq!(row["size"], 4096, "{what}: size");
        let completion = row["completion"].as_str();
        match ask.completion {
            Some("both") => assert!(matches!(completion, Some("poll" | "irq")), "{what}: completion {completion:?}"),
            Some(c) => assert_eq!(completion, Some(c), "{what}: completion"),
            None => assert!(matches!(completion, None | Some("poll")), "{what}: completion {completion:?}"),
        }
        ways.insert(completion.unwrap_or("poll"));
        let queues = row["queues"].as_u64();
        match ask.queues {
            Some(q) => assert_eq!(queues, Some(q), "{what}: queues"),
            None => assert!(matches!(queues, None | Some(1)), "{what}: queues {queues:?}"),
        }
        if ask.random {
            assert_eq!(row["window"], 1 << 20, "{what}: the random window");
        } else {
            assert!(row["window"].is_null(), "{what}: a window where none was asked");
        }
        if ask.rate {
            assert_eq!(row["rate"]["offered_ops"], 20000.0, "{what}: offered rate");
        } else {
            assert!(row["rate"].is_null(), "{what}: an offered rate where none was asked");
        }
    }
    if ask.completion == Some("both") {
        assert_eq!(ways.len(), 2, "{what}: --completion both gave {ways:?}");
    }
}

fn asks() -> Vec<Ask> {
    let mut v = Vec::new();
    for completion in [None, Some("poll"), Some("irq"), Some("both")] {
        for rate in [false, true] {
            for queues in [None, Some(2)] {
                for random in [false, true] {
                    v.push(Ask { completion, rate, queues, random });
                }
            }
        }
    }
    v
}

#[test]
fn item10_every_dma_row_records_what_was_asked() {
    let mut ran = 0;
    for card in CARDS {
        for ask in asks() {
            let mut args: Vec<String> =
                ["dma", card, "--dir", "both", "--size", "4K", "--total", "16K", "--format", "json"]
                    .map(String::from)
                    .into();
            args.extend(ask.args());
            if let Some(report) = run(&args) {
                check_rows(&report, ask, &["h2c", "c2h"], &args.join(" "));
                ran += 1;
            }
        }
    }
    assert!(ran > 40, "most combinations run somewhere: {ran}");
    // The one that used to be silently substituted is refused now.
    let args: Vec<String> =
        ["dma", "sim", "--size", "4K", "--rate", "20K", "--completion", "irq"].map(String::from).into();
    assert!(run(&args).is_none(), "dma --rate --completion irq is refused");
    // A stream has no card address: refused, not ignored.
    let args: Vec<String> = ["dma", "sim-qdma-st", "--size", "4K", "--card-addr", "0x1000"].map(String::from).into();
    assert!(run(&args).is_none(), "--card-addr on QDMA stream queues is refused");
}

#[test]
fn item10_every_latency_dma_row_records_what_was_asked() {
    for card in CARDS {
        for ask in asks().into_iter().filter(|a| !a.random && a.queues.is_none()) {
            for dir in ["h2c", "c2h"] {
                let mut args: Vec<String> =
                    ["latency", card, "--dma", "--dir", dir, "--size", "4K", "--dma-samples", "8", "--format", "json"]
                        .map(String::from)
                        .into();
                args.extend(ask.args());
                if let Some(mut report) = run(&args) {
                    // The register-read rows beside the DMA ones are `latency`'s own.
                    let rows = report["results"].as_array_mut().unwrap();
                    rows.retain(|r| r["probe"] == "dma");
                    check_rows(&report, ask, &[dir], &args.join(" "));
                }
            }
        }
    }
}

/// Issue 50 item 13: `--cmpt-trigger` on QDMA stream queues is applied and each row records it
/// (as an engine setting, so `compare` sees it); everywhere it could not apply it is refused in
/// one line.
#[test]
fn item13_every_stream_row_records_its_completion_trigger_and_elsewhere_it_is_refused() {
    const KEY: &str = "C2H completion trigger (CMPT context trig_mode)";
    for spec in ["every", "user", "timer:3", "count:2"] {
        for cmd in ["dma", "latency"] {
            let mut args: Vec<String> = if cmd == "dma" {
                ["dma", "sim-qdma-st", "--dir", "c2h", "--size", "4K", "--total", "16K"].map(String::from).into()
            } else {
                ["latency", "sim-qdma-st", "--dma", "--dir", "c2h", "--size", "64", "--dma-samples", "8"]
                    .map(String::from)
                    .into()
            };
            args.extend(["--cmpt-trigger", spec, "--format", "json"].map(String::from));
            let report = run(&args).unwrap_or_else(|| panic!("{args:?} refused"));
            let rows: Vec<&Value> =
                report["results"].as_array().unwrap().iter().filter(|r| cmd == "dma" || r["probe"] == "dma").collect();
            assert!(!rows.is_empty(), "{args:?}");
            for row in rows {
                let set = row["engine_settings"][KEY].as_str().unwrap_or_else(|| panic!("{args:?}: {row}"));
                assert!(set.starts_with(spec), "{args:?}: {set}");
            }
        }
    }
    for refused in [
        "dma sim-qdma --cmpt-trigger timer",
        "dma sim --cmpt-trigger user",
        "dma sim-xdma-st --cmpt-trigger count",
        "dma sim-qdma-st --dir h2c --cmpt-trigger timer",
        "dma sim-qdma-st --cmpt-trigger timer:16",
        "latency sim-qdma-st --cmpt-trigger timer",
        "latency sim-qdma-st --dma --dir h2c --cmpt-trigger user",
    ] {
        let args: Vec<String> = refused.split(' ').map(String::from).collect();
        assert!(run(&args).is_none(), "{refused} is refused");
    }
}
