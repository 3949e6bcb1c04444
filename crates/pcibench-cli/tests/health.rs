//! `pcibench health` and `pcibench export` end to end on fixture trees: exit statuses 0/1/2/3,
//! `--state` across runs, the Prometheus text output parsed by a real parser (Python's
//! prometheus_client, where installed: scripts/test-all installs it), `-o` replaced atomically
//! even when the writer is killed, `--watch` refused off a terminal.

mod common;
use common::{err, out, pcibench};
use pcibench::pci::fixture::{health_degrade, health_errors, health_retrain, health_tree};
use std::path::Path;
use std::process::Command;

fn code(o: &std::process::Output) -> i32 {
    o.status.code().expect("exited")
}

#[test]
fn exit_status_healthy_warning_failure_and_could_not_check() {
    let t = tempfile::tempdir().unwrap();
    let fx = health_tree(t.path());
    let state = t.path().join("health.state");
    let st = state.to_str().unwrap();

    let o = pcibench(t.path(), &["health", "--state", st]);
    assert_eq!(code(&o), 0, "{}{}", out(&o), err(&o));
    assert!(out(&o).contains("Verdict: healthy (exit 0)"), "{}", out(&o));
    assert!(err(&o).contains("no previous run in"), "{}", err(&o));

    health_retrain(&fx);
    let o = pcibench(t.path(), &["health", "--state", st]);
    assert_eq!(code(&o), 1, "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("WARN  link of 0000:00:1d.0 retrained from 8.0 GT/s PCIe x4 to 5.0 GT/s PCIe x4"), "{text}");
    assert!(text.contains("BWMgmt"), "{text}");

    health_errors(&fx, false);
    let o = pcibench(t.path(), &["health", "--state", st]);
    assert_eq!(code(&o), 2, "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("FAIL  2 non-fatal errors (2 CmpltAbrt) on 0000:00:1c.0"), "{text}");
    assert!(text.contains("WARN  3 correctable errors (3 BadTLP) on 0000:03:00.0"), "{text}");

    // Nothing grew since: the retrained link stays degraded (Gen2 where both ends do Gen3).
    let o = pcibench(t.path(), &["health", "--state", st]);
    assert_eq!(code(&o), 1, "{}", out(&o));
    assert!(out(&o).contains("Changes since the previous run") && out(&o).contains("  none\n"), "{}", out(&o));

    // Could not check: 3, never 1 or 2 (which say what health found).
    for args in
        [&["health", "--bogus"][..], &["health", "zz:00.0"], &["health", "09:00.0"], &["health", "--watch", "0"]]
    {
        let o = pcibench(t.path(), args);
        assert_eq!(code(&o), 3, "{args:?}: {}", err(&o));
        assert!(err(&o).starts_with("pcibench: ") && err(&o).lines().count() == 1, "{}", err(&o));
        assert!(out(&o).is_empty());
    }
    std::fs::write(&state, "{\"format\": \"pcibench-run\"}").unwrap();
    let o = pcibench(t.path(), &["health", "--state", st]);
    assert_eq!(code(&o), 3);
    assert!(err(&o).contains("is not a pcibench health state file"), "{}", err(&o));
}

#[test]
fn a_degraded_link_in_the_table_and_in_json() {
    let t = tempfile::tempdir().unwrap();
    let fx = health_tree(t.path());
    health_degrade(&fx);
    let o = pcibench(t.path(), &["health"]);
    assert_eq!(code(&o), 1);
    let text = out(&o);
    let line = text.lines().find(|l| l.starts_with("0000:03:00.0")).unwrap();
    assert!(line.contains("Gen1 x8 DEGRADED") && line.contains("Gen3 x8") && line.ends_with("both ends"), "{line}");
    let nic = text.lines().find(|l| l.starts_with("0000:04:00.0")).unwrap();
    assert!(
        nic.ends_with("speed: both ends, width: the upstream port 0000:00:1d.0") && !nic.contains("DEGRADED"),
        "{nic}"
    );
    assert!(text.contains("1 without a PCIe link not shown"), "{text}");

    let o = pcibench(t.path(), &["health", "--json", "03:00.0"]);
    assert_eq!(code(&o), 1);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["status"], "warning");
    let f = &j["functions"];
    assert_eq!(f.as_array().unwrap().len(), 2, "the device and the port above it");
    assert_eq!(f[1]["address"], "0000:03:00.0");
    assert_eq!(f[1]["link"]["degraded"], true);
    assert_eq!(f[1]["link"]["limit_gen"], 3);
    assert_eq!(f[1]["findings"][0]["level"], "warning");
}

/// Python's prometheus_client text parser (the one Prometheus' own client ships), on the system
/// Python where Debian's python3-prometheus-client installs it.
fn python_with_prometheus() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        Command::new(p).args(["-c", "import prometheus_client.parser"]).output().is_ok_and(|o| o.status.success())
    })
}

/// Parse `text` with prometheus_client and return `name{labels} value` lines, sorted.
fn parse_prometheus(text: &str) -> Option<Vec<String>> {
    let Some(py) = python_with_prometheus() else {
        if std::env::var_os("PCIBENCH_REQUIRE_PROMETHEUS_PARSER").is_some() {
            panic!("prometheus_client is not installed (scripts/test-all installs python3-prometheus-client)");
        }
        eprintln!("note: prometheus_client not installed: the exposition is checked by the Rust assertions only");
        return None;
    };
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    assert fam.documentation, f"{fam.name} has no HELP"
    assert fam.type in ("gauge", "counter", "summary"), f"{fam.name}: {fam.type}"
    for s in fam.samples:
        labels = ",".join(f'{k}={v!r}' for k, v in sorted(s.labels.items()))
        out.append(f"{fam.type} {s.name}{{{labels}}} {s.value}")
print("\n".join(sorted(out)))
"#;
    let mut child = Command::new(py)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "prometheus_client refused the exposition:\n{}\n{text}", err(&o));
    Some(out(&o).lines().map(String::from).collect())
}

#[test]
fn openmetrics_output_is_parsed_by_prometheus_client_with_escaped_labels() {
    let t = tempfile::tempdir().unwrap();
    let fx = health_tree(t.path());
    health_degrade(&fx);
    // A counter name with a quote and a backslash: the label value must be escaped.
    fx.at("0000:03:00.0").file("aer_dev_correctable", "RxErr 0\nBad\"TLP\\x 4\nTOTAL_ERR_COR 4\n");
    let prom = t.path().join("pcibench.prom");
    let o = pcibench(t.path(), &["health", "--format", "openmetrics", "-o", prom.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", err(&o));
    assert!(out(&o).is_empty(), "-o writes the file, not stdout");
    let text = std::fs::read_to_string(&prom).unwrap();
    for want in [
        "# TYPE pcibench_link_speed_gts gauge\n",
        "pcibench_link_speed_gts{device=\"0000:03:00.0\",vendor=\"10ee\",device_id=\"7024\"} 2.5\n",
        "pcibench_link_degraded{device=\"0000:03:00.0\",vendor=\"10ee\",device_id=\"7024\"} 1\n",
        "pcibench_link_limit_speed_gts{device=\"0000:03:00.0\",vendor=\"10ee\",device_id=\"7024\"} 8\n",
        "# TYPE pcibench_aer_errors_total counter\n",
        "kind=\"Bad\\\"TLP\\\\x\"} 4\n",
        "pcibench_aer_errors_total{device=\"0000:00:1c.0\",vendor=\"8086\",device_id=\"a110\",severity=\"correctable\",kind=\"Header Log Overflow\"} 0\n",
        "pcibench_aer_rootport_errors_total{device=\"0000:00:1c.0\",vendor=\"8086\",device_id=\"a110\",severity=\"nonfatal\"} 0\n",
        "pcibench_health_status 1\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("TOTAL_ERR"), "totals are sums, not kinds: summing them would count twice");
    let Some(parsed) = parse_prometheus(&text) else { return };
    assert!(
        parsed.iter().any(|l| l
            == "counter pcibench_aer_errors_total{device='0000:03:00.0',device_id='7024',kind='Bad\"TLP\\\\x',severity='correctable',vendor='10ee'} 4.0"),
        "{parsed:#?}"
    );
    assert!(parsed
        .iter()
        .any(|l| l.starts_with("gauge pcibench_link_degraded{device='0000:03:00.0'") && l.ends_with(" 1.0")));
    // Every sample the text has, the parser read (none lost to a malformed line).
    let samples = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(parsed.len(), samples);
}

#[test]
fn export_renders_a_saved_run_for_prometheus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcibench/tests/fixtures/results");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") || pcibench::results::saved::read(&p).is_err() {
            continue;
        }
        let o = pcibench(Path::new("/nonexistent"), &["export", p.to_str().unwrap(), "--format", "openmetrics"]);
        assert_eq!(code(&o), 0, "{}: {}", p.display(), err(&o));
        let text = out(&o);
        assert!(text.contains("# TYPE pcibench_run_info gauge\n"), "{text}");
        assert!(
            text.contains("# TYPE pcibench_throughput_bytes_per_second gauge")
                || text.contains("# TYPE pcibench_latency_seconds summary"),
            "{}: {text}",
            p.display()
        );
        if let Some(parsed) = parse_prometheus(&text) {
            assert_eq!(parsed.len(), text.lines().filter(|l| !l.starts_with('#')).count(), "{text}");
        }
        seen += 1;
    }
    assert!(seen > 0, "no saved run in {}", dir.display());
    let o = pcibench(Path::new("/nonexistent"), &["export", "/nonexistent/x.json"]);
    assert_eq!(code(&o), 2, "a missing file is bad usage, as for plot and compare");
}

#[test]
fn watch_is_refused_off_a_terminal() {
    let t = tempfile::tempdir().unwrap();
    health_tree(t.path());
    let o = pcibench(t.path(), &["health", "--watch", "1"]);
    assert_eq!(code(&o), 3);
    assert!(err(&o).contains("--watch redraws a terminal, and stdout is not one"), "{}", err(&o));
    let o = pcibench(t.path(), &["health", "--watch", "1", "--json"]);
    assert_eq!(code(&o), 3, "{}", err(&o));
}

#[test]
fn output_targets_that_are_not_regular_files_are_refused() {
    let t = tempfile::tempdir().unwrap();
    health_tree(t.path());
    let o = pcibench(t.path(), &["health", "-o", "/dev/null"]);
    assert_eq!(code(&o), 3);
    assert!(err(&o).contains("is a character device"), "{}", err(&o));
    let fifo = t.path().join("fifo.prom");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();
    let o = pcibench(t.path(), &["health", "--format", "openmetrics", "-o", fifo.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    assert!(err(&o).contains("FIFO"), "{}", err(&o));
}

/// The writer killed at many points of its run, the write included: the target is always the old
/// file or a whole new one, never a part.
#[test]
fn a_writer_killed_mid_write_leaves_the_old_file_or_the_new_one() {
    let t = tempfile::tempdir().unwrap();
    pcibench::pci::fixture::health_fleet(t.path(), 200);
    let prom = t.path().join("out.prom");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .args(["health", "--format", "openmetrics", "-o", prom.to_str().unwrap()])
            .env("PCIBENCH_SYSROOT", t.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // A whole output, and how long a run takes here (the kills spread over it).
    let start = std::time::Instant::now();
    assert!(run().wait().unwrap().code().is_some());
    let took = start.elapsed();
    let mask = |s: &str| {
        s.lines().filter(|l| !l.starts_with("pcibench_health_timestamp_seconds")).collect::<Vec<_>>().join("\n")
    };
    let whole = mask(&std::fs::read_to_string(&prom).unwrap());
    assert!(whole.len() > 50_000, "a long enough file to be caught mid-write");
    let old = "# HELP old a file from before\n# TYPE old gauge\nold 1\n";
    std::fs::write(&prom, old).unwrap();
    let (mut kept, mut replaced) = (0, 0);
    for i in 0..40u32 {
        let mut child = run();
        std::thread::sleep(took * i / 30);
        let _ = child.kill();
        let _ = child.wait();
        let now = std::fs::read_to_string(&prom).unwrap();
        if now == old {
            kept += 1;
        } else {
            assert!(mask(&now) == whole, "killed at {:?}: a partial file ({} bytes)", took * i / 30, now.len());
            replaced += 1;
            std::fs::write(&prom, old).unwrap();
        }
    }
    eprintln!("a run takes {took:?}: {kept} kills left the old file, {replaced} runs had replaced it whole");
}
