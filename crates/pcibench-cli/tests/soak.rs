//! `dma --duration` (issue 56) end to end: every stream's rows as they come and the run's summary,
//! an engine that writes past its transfers caught at a report with its time (exit 3), and the
//! refusals. No time or rate is asserted.

use std::process::{Command, Output};

fn pcibench(args: &[&str], fault: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcibench"));
    c.args(args).env("PCIBENCH_SYSROOT", "/nonexistent").env("PCIBENCH_LONG_SECS", "100000");
    if fault {
        c.env("PCIBENCH_SIM_FAULT", "overrun");
    } else {
        c.env_remove("PCIBENCH_SIM_FAULT");
    }
    c.output().expect("run pcibench")
}

#[test]
fn every_stream_has_its_rows_then_the_summary() {
    let o =
        pcibench(&["dma", "sim-xdma4", "sim-qdma", "--duration", "600ms", "--every", "200ms", "--size", "16K"], false);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let (live, summary) =
        out.split_once("\npcibench dma sim-xdma4,sim-qdma engine xdma,qdma via sim").expect("the summary");
    assert!(live.starts_with("    from      to  stream"), "{live}");
    for stream in ["sim-xdma4 ch0 h2c", "sim-xdma4 ch3 c2h", "sim-qdma q0 h2c", "sim-qdma q1 c2h"] {
        assert!(live.lines().filter(|l| l.contains(stream)).count() >= 1, "{stream}: {live}");
        let row = summary.lines().find(|l| l.starts_with(stream)).unwrap_or_else(|| panic!("{stream}: {summary}"));
        assert!(row.ends_with("ok"), "{row}");
    }
    for line in ["aggregate sim-xdma4 h2c: 4 streams", "aggregate sim-qdma c2h: 1 stream", "fairness sim-xdma4 c2h:"] {
        assert!(summary.contains(line), "{line}: {summary}");
    }
    assert!(summary.contains("errors: none"), "{summary}");
}

#[test]
fn a_write_past_the_end_is_caught_at_a_report_with_its_time() {
    for dir in ["h2c", "c2h"] {
        let args = ["dma", "sim-xdma4", "--channels", "1", "--dir", dir, "--duration", "400ms", "--every", "200ms"];
        let o = pcibench(&[&args[..], &["--size", "16K"]].concat(), true);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(3), "{dir}: {out}{}", String::from_utf8_lossy(&o.stderr));
        let at = format!("s, sim-xdma4 ch1 {dir}: data check: ");
        let err = out.lines().find(|l| l.starts_with("  at ") && l.contains(&at)).unwrap_or_else(|| panic!("{out}"));
        assert!(err.contains("past the end"), "{err}");
        assert!(out.contains("MISMATCH"), "{out}");
    }
}

#[test]
fn what_the_cli_refuses() {
    let o = pcibench(&["dma", "sim", "sim-qdma"], false);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("several devices run at once with --duration"));
    let o = pcibench(&["dma", "sim", "--every", "1s"], false);
    assert_eq!(o.status.code(), Some(2), "--every needs --duration");
    let o = pcibench(&["dma", "sim", "--duration", "0s"], false);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--duration '0s': give a time such as 60s"));
    let o = pcibench(&["dma", "sim", "--duration", "1s", "--total", "1M"], false);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--duration sets how long the streams run: drop --total"));
    let o = pcibench(&["dma", "sim-xdma4", "--duration", "1s", "--channels", "4"], false);
    assert!(String::from_utf8_lossy(&o.stderr).contains("XDMA channels are 0 to 3"));
}
