//! Results you can keep (issue 14), through the binary: --format csv on every measuring command,
//! --save then plot and compare (the sim card, and a fixture card with a PCIe link for the
//! ceiling), `run --json`, and every bad input refused in one line with exit 2.

use pcibench::pci::fixture::seed_tree;
use std::path::Path;
mod common;
use common::{err, out};
use std::process::{Command, Output};

fn pcibench(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(args)
        .current_dir(dir)
        .env("PCIBENCH_SYSROOT", dir.join("root"))
        .output()
        .expect("run pcibench")
}

/// Exit 2 with one line on stderr containing `want`.
fn refused(o: &Output, want: &str) {
    let e = err(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.contains(want), "wanted {want:?} in: {e}");
}

fn header() -> String {
    pcibench::report::csv::COLUMNS.join(",")
}

#[test]
fn every_measuring_command_writes_csv_and_run_writes_one_json_document() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for args in [
        &["pio", "sim", "--bar", "2", "--size", "4K", "--size", "64K", "--total", "256K", "--format", "csv"][..],
        &["dma", "sim", "--size", "64K", "--total", "1M", "--format", "csv"],
        &["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--format", "csv"],
        &["run", "sim", "--total", "1M", "--format", "csv"],
    ] {
        let o = pcibench(d, args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
        let text = out(&o);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], header(), "{args:?}");
        assert!(lines.len() > 1, "{args:?}: rows");
        let kind = args[0];
        for l in &lines[1..] {
            assert!(l.starts_with(if kind == "run" { "" } else { kind }), "{l}");
        }
    }
    let o = pcibench(d, &["run", "sim", "--total", "1M", "--format", "csv"]);
    let text = out(&o);
    let kinds: Vec<&str> = text.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    assert!(kinds.contains(&"pio") && kinds.contains(&"dma"), "run: PIO and DMA rows under one header");
    let o = pcibench(d, &["run", "sim", "--total", "1M", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).expect("one JSON document");
    assert!(v["pio"]["results"].is_array() && v["dma"]["results"].is_array() && v["info"].is_object());
}

#[test]
fn save_plot_compare_round_trip_on_the_sim_card() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let pio = ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "8..1M", "--total", "256K"];
    for name in ["a.json", "b.json"] {
        let o = pcibench(d, &[&pio[..], &["--save", name]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        assert!(out(&o).contains("BAR map"), "the table is printed as well");
    }
    let a: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("a.json")).unwrap()).unwrap();
    assert_eq!(
        (a["format"].as_str(), a["version"].as_u64(), a["command"].as_str()),
        (Some("pcibench-run"), Some(1), Some("pio"))
    );
    assert_eq!(a["device"]["vendor_id"], "10ee");
    assert_eq!(a["device"]["link"]["current_width"], 4);
    assert!(a["context"]["command_line"].as_array().unwrap().iter().any(|x| x == "--save"));
    // 8 B .. 128 KiB both ways measured (15 sizes), the sizes past BAR2 one skipped row each.
    let rows = a["reports"][0]["results"].as_array().unwrap();
    assert_eq!(rows.iter().filter(|r| r["stats"].is_object()).count(), 30);
    assert_eq!(rows.len(), 33);
    pcibench::results::saved::read(&d.join("a.json")).expect("the library reads it back");

    let o = pcibench(d, &["plot", "a.json", "b.json", "--label", "first", "-o", "ab.svg"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let svg = std::fs::read_to_string(d.join("ab.svg")).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(
        svg.contains(r#"data-label="first: pio BAR2 uc h2c 64-bit""#)
            && svg.contains(r#"data-label="b: pio BAR2 uc c2h 64-bit""#)
    );
    let o = pcibench(d, &["plot", "a.json", "-o", "-"]);
    assert!(out(&o).starts_with("<?xml"), "-o - writes to stdout");

    // Two runs of the same thing: same configurations, the verdicts whatever the host's noise.
    let o = pcibench(d, &["compare", "a.json", "b.json"]);
    assert!(matches!(o.status.code(), Some(0) | Some(5)), "{}", err(&o));
    let text = out(&o);
    assert!(text.starts_with("pcibench compare: B = b.json against A = a.json\n"), "{text}");
    assert!(text.contains("pio BAR2 uc h2c 64-bit 8 B") && text.contains("\nsummary: "));
    let o = pcibench(d, &["compare", "a.json", "b.json", "--format", "csv"]);
    assert_eq!(out(&o).lines().count(), 1 + 2 * 15, "rows measured in both: 8 B .. 128 KiB, both ways");
    let o = pcibench(d, &["compare", "a.json", "b.json", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 30);
    assert_eq!(v["summary"]["questionable"], false);
}

/// `--rate` end to end (issue 41): a sweep on sim-qdma over 1 and 4 queues saved with every row
/// verified, `plot` drawing its curves, and two runs at the same listed rates compared row by row.
/// Where each curve ends depends on this host (a loaded one is named the limit at once), so only
/// what holds on any host is asserted.
#[test]
fn an_offered_load_sweep_is_saved_verified_plotted_and_compared_at_equal_rates() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let sweep = ["dma", "sim-qdma", "--rate", "sweep", "--size", "64", "--queues", "1,4", "--dir", "h2c"];
    let o = pcibench(d, &[&sweep[..], &["--save", "s.json"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("DMA latency under offered load (open loop"), "{}", out(&o));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("s.json")).unwrap()).unwrap();
    let rows = s["reports"][0]["results"].as_array().unwrap();
    for q in [1, 4] {
        let curve: Vec<f64> =
            rows.iter().filter(|r| r["queues"] == q).map(|r| r["rate"]["offered_ops"].as_f64().unwrap()).collect();
        assert!(!curve.is_empty() && curve.windows(2).all(|w| w[1] > w[0]), "q{q}: {curve:?}");
    }
    assert!(rows.iter().all(|r| r["verify"]["status"] == "ok" && r["rate"]["posted_ahead"] == true), "{rows:?}");
    let o = pcibench(d, &["plot", "s.json", "-o", "s.svg"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let svg = std::fs::read_to_string(d.join("s.svg")).unwrap();
    assert!(svg.contains(r#"<g class="panel rate">"#) && svg.contains("achieved throughput (MB/s)"));
    assert_eq!(svg.matches(r#"<polyline class="rate""#).count(), 6, "two curves, three percentiles each");
    for name in ["a.json", "b.json"] {
        let args = ["dma", "sim-qdma", "--rate", "2K,4K", "--size", "64", "--dir", "h2c", "--total", "12800"];
        let o = pcibench(d, &[&args[..], &["--save", name]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    }
    let o = pcibench(d, &["compare", "a.json", "b.json", "--json"]);
    assert!(matches!(o.status.code(), Some(0) | Some(5)), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let labels: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "dma latency qdma dma poll h2c q1 64 B offered 2.000 K/s",
            "dma latency qdma dma poll h2c q1 64 B offered 4.000 K/s"
        ]
    );
}

/// The engine's own figures (its performance counters) are saved with each DMA row, read back,
/// and set beside each other by `compare`.
#[test]
fn engine_figures_are_saved_and_compared() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for name in ["a.json", "b.json"] {
        let o = pcibench(d, &["dma", "sim", "--size", "64K", "--total", "1M", "--save", name]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        assert!(out(&o).contains("the engine's own counters"), "{}", out(&o));
    }
    let a = pcibench::results::saved::read(&d.join("a.json")).expect("the library reads it back");
    let e = a.reports[0].results[0].engine.as_ref().expect("the row's engine figures were saved");
    assert_eq!((e.beats, e.beat_bytes, e.clock_mhz, e.last_run), (8192, Some(8), Some(250.0), true));
    let o = pcibench(d, &["compare", "a.json", "b.json"]);
    assert!(matches!(o.status.code(), Some(0) | Some(5)), "{}", err(&o));
    assert_eq!(out(&o).matches("\n      engine: A ").count(), 2, "{}", out(&o));
    let o = pcibench(d, &["compare", "a.json", "b.json", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert!(v["rows"][0]["engine_a"]["busy_pct"].is_number() && v["rows"][0]["engine_b"]["engine_mbps"].is_number());
}

#[test]
fn a_card_with_a_link_saves_its_link_and_plots_its_ceiling() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    seed_tree(d.join("root"));
    // The fixture's resource files are empty: give BAR2's its size, so reads map it (zeros).
    let dev = d.join("root/sys/devices/pci0000:00/0000:15:00.0");
    for f in ["resource2", "resource2_wc"] {
        std::fs::OpenOptions::new().write(true).open(dev.join(f)).unwrap().set_len(128 << 10).unwrap();
    }
    // Reads need no consent; the fixture's Gen2 x4 link bounds them.
    let o = pcibench(
        d,
        &[
            "pio", "15:00.0", "--bar", "2", "--dir", "c2h", "--size", "4K", "--size", "64K", "--total", "256K",
            "--save", "f.json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let f: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("f.json")).unwrap()).unwrap();
    assert_eq!(f["device"]["link"]["current_gen"], 2);
    assert_eq!(f["device"]["link"]["mps"], 256);
    assert_eq!(f["via"], "sysfs");
    assert_eq!(f["link_health"], serde_json::json!([]), "watched, and nothing changed");
    assert!(f["iommu"].is_object());
    let o = pcibench(d, &["plot", "f.json", "-o", "f.svg"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let svg = std::fs::read_to_string(d.join("f.svg")).unwrap();
    assert!(svg.contains(r#"<g class="ceiling" data-file="0" data-dir="c2h""#), "the ceiling line");
    assert!(svg.contains("Gen2 x4, MPS 256, MRRS 512"), "the link in the title");
}

#[test]
fn bad_input_gets_one_clear_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let o = pcibench(d, &["pio", "sim", "--bar", "2", "--size", "4K", "--total", "64K", "--save", "a.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let o = pcibench(d, &["dma", "sim", "--size", "4K", "--total", "64K", "--save", "d.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = std::fs::read_to_string(d.join("a.json")).unwrap();
    std::fs::write(d.join("cut.json"), &text[..text.len() / 3]).unwrap();
    refused(&pcibench(d, &["plot", "cut.json", "-o", "x.svg"]), "cut.json is truncated: the JSON ends at line");
    assert!(!d.join("x.svg").exists(), "nothing written");
    refused(&pcibench(d, &["compare", "a.json", "cut.json"]), "cut.json is truncated");
    refused(
        &pcibench(d, &["compare", "a.json", "d.json"]),
        "a.json holds a pio run and d.json a dma run: compare needs two runs of the same command",
    );
    let o = pcibench(d, &["info", "sim", "--json"]);
    std::fs::write(d.join("info.json"), o.stdout).unwrap();
    refused(
        &pcibench(d, &["plot", "info.json", "-o", "x.svg"]),
        "info.json is `pcibench info --json` output (no measurement), not a saved run",
    );
    let o = pcibench(d, &["pio", "sim", "--bar", "2", "--size", "4K", "--total", "64K", "--json"]);
    std::fs::write(d.join("pio.json"), o.stdout).unwrap();
    refused(
        &pcibench(d, &["compare", "pio.json", "a.json"]),
        "pio.json is `pcibench pio --json` output, not a saved run",
    );
    let future = text.replacen("\"version\": 1", "\"version\": 7", 1);
    std::fs::write(d.join("future.json"), future).unwrap();
    refused(
        &pcibench(d, &["plot", "future.json", "-o", "x.svg"]),
        "future.json is a version 7 saved run, newer than this pcibench",
    );
    refused(&pcibench(d, &["plot", "missing.json", "-o", "x.svg"]), "missing.json: no such file");
    // Where the output cannot go is said before anything is measured or read.
    let o = pcibench(d, &["pio", "sim", "--total", "64G", "--save", "no/such/dir/a.json"]);
    refused(&o, "--save no/such/dir/a.json: there is no directory no/such/dir");
    assert!(out(&o).is_empty());
    refused(&pcibench(d, &["plot", "a.json", "-o", "."]), "-o . is a directory");
    refused(&pcibench(d, &["plot", "a.json", "--label", "x", "--label", "y", "-o", "x.svg"]), "2 labels for 1 files");
    refused(&pcibench(d, &["compare", "a.json", "a.json", "--threshold=-3"]), "not a percentage");
    refused(&pcibench(d, &["compare", "a.json", "a.json", "--threshold", "five"]), "not a percentage");
}
