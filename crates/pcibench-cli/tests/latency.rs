//! `pcibench latency` end to end: the simulated cards (JSON figures, load rows, DMA rows), a
//! fixture device over sysfs, and every option that does not apply refused in one line (exit 2).

use pcibench::pci::fixture::seed_tree;
mod common;
use common::{err, json, out, pcibench};

#[test]
fn sim_reads_as_json_with_histogram_figures() {
    let t = tempfile::tempdir().unwrap();
    let v =
        json(&pcibench(t.path(), &["latency", "sim", "--width", "32", "--width", "64", "--samples", "3000", "--json"]));
    assert_eq!(
        (v["kind"].as_str(), v["device"].as_str(), v["simulated"].as_bool()),
        (Some("latency"), Some("sim"), Some(true))
    );
    let rows = v["results"].as_array().unwrap();
    // Reads and (the sim card needs no consent) write-then-read, per width.
    let probes: Vec<&str> = rows.iter().map(|r| r["probe"].as_str().unwrap()).collect();
    assert_eq!(probes, ["mmio-read", "write-read", "mmio-read", "write-read"]);
    for r in rows {
        let l = &r["latency"];
        assert_eq!(l["samples"], 3000);
        assert_eq!(l["warmup"], 30, "1% of the samples");
        assert!(l["overhead_ns"].as_f64().unwrap() > 0.0);
        assert_eq!(l["clock"], v["context"]["clock"]);
        let f = |k: &str| l[k].as_f64().unwrap();
        assert!(f("min_ns") <= f("p50_ns") && f("p50_ns") <= f("p90_ns") && f("p99_ns") <= f("p999_ns"));
        assert!(f("p9999_ns") <= f("max_ns") && f("min_ns") <= f("mean_ns") && f("mean_ns") <= f("max_ns"));
        let cdf = l["cdf"].as_array().unwrap();
        assert_eq!(cdf.last().unwrap()[1].as_f64(), Some(1.0));
        assert_eq!(cdf.last().unwrap()[0].as_f64(), Some(f("max_ns")));
        assert_eq!((r["bar"].as_u64(), r["offset"].as_u64()), (Some(0), Some(0)));
    }
    assert_eq!(rows[1]["verify"]["status"], "ok");
    assert_eq!(rows[0]["verify"]["status"], "unverified");
    // No --width: 32-bit accesses only (what register blocks decode); `all` adds every width.
    let v = json(&pcibench(t.path(), &["latency", "sim", "--samples", "100", "--json"]));
    let widths: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["width"].as_str().unwrap()).collect();
    assert_eq!(widths, ["32", "32"]);
    let v = json(&pcibench(t.path(), &["latency", "sim", "--width", "all", "--samples", "100", "--json"]));
    let has512 = pcibench::mmio::available(pcibench::mmio::Width::V512).is_ok();
    // Read and write-read at 8, 16, 32, 64 and 512 bits, or one skipped row for 512 without AVX-512F.
    assert_eq!(v["results"].as_array().unwrap().len(), if has512 { 10 } else { 9 });
}

#[test]
fn sim_under_load_prints_seed_004s_table() {
    let t = tempfile::tempdir().unwrap();
    let o = pcibench(t.path(), &["latency", "sim", "--width", "32", "--samples", "2000", "--load", "all"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.contains("MMIO read latency under DMA load (the shape of the QDMA benchmark's AXI-Lite table): BAR0+0x0, 32-bit reads"),
        "{text}"
    );
    for under in ["idle", "h2c", "c2h", "both"] {
        assert!(text.lines().any(|l| l.starts_with(&format!("{under:<6} "))), "{under}: {text}");
    }
    assert!(text.contains("note: load: xdma streamed both (alternating"), "{text}");
    assert!(text.contains("warning: simulated card: its engine model runs on a thread of its own"), "{text}");
    let o = pcibench(
        t.path(),
        &["latency", "sim-qdma", "--width", "32", "--samples", "2000", "--load", "both", "--format", "seed"],
    );
    assert!(o.status.success(), "{}", err(&o));
    let seed = out(&o);
    assert!(seed.contains("| mmio read(yes/no)     | latency(us) | read(GBps)     | write(GBps) |"), "{seed}");
    assert!(seed.contains("| (2000 reads' average) |"), "{seed}");
    assert_eq!(seed.lines().filter(|l| l.starts_with("| yes ")).count(), 2, "idle and both: {seed}");
}

/// Issue 55: a stream card's load is checked as `dma` checks streams (C2H against the far end's
/// generator, H2C by its checker): every mode verifies. (Served, the card's stream queues are
/// not driven: nothing names its example design over vfio-user.)
#[test]
fn a_stream_cards_load_verifies() {
    let t = tempfile::tempdir().unwrap();
    let args = ["latency", "sim-qdma-st", "--width", "32", "--samples", "1000", "--load", "all", "--json"];
    let o = pcibench(t.path(), &args);
    assert!(o.status.success(), "{}", err(&o));
    let v = json(&o);
    let loaded: Vec<&serde_json::Value> =
        v["results"].as_array().unwrap().iter().filter(|r| !r["load"].is_null()).collect();
    assert_eq!(loaded.len(), 3, "h2c, c2h, both: {v}");
    for r in loaded {
        assert_eq!(r["verify"]["status"], "ok", "{r}");
    }
    assert!(!err(&o).contains("did not verify"), "{}", err(&o));
}

#[test]
fn sim_dma_latency_rows_are_verified() {
    let t = tempfile::tempdir().unwrap();
    let v = json(&pcibench(
        t.path(),
        &[
            "latency",
            "sim",
            "--width",
            "32",
            "--samples",
            "100",
            "--dma",
            "--size",
            "64,4K",
            "--dma-samples",
            "50",
            "--json",
        ],
    ));
    let dma: Vec<&serde_json::Value> =
        v["results"].as_array().unwrap().iter().filter(|r| r["probe"] == "dma").collect();
    assert_eq!(dma.len(), 4, "two sizes, two directions");
    for r in &dma {
        assert_eq!((r["completion"].as_str(), r["verify"]["status"].as_str()), (Some("poll"), Some("ok")), "{r}");
        assert_eq!(r["latency"]["samples"], 50);
    }
    assert_eq!(v["engine"], "xdma");
}

#[test]
fn options_that_do_not_apply_are_refused_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let cases: &[(&[&str], &str)] = &[
        (&["latency", "sim", "--completion", "both", "--irq"], "cannot be used with"),
        (&["latency", "sim", "--dma", "--irq-kind", "intx"], "--irq-kind applies to completion by interrupt"),
        (
            &["latency", "sim", "--completion", "poll", "--irq-kind", "msi"],
            "--irq-kind applies to completion by interrupt",
        ),
        (&["latency", "sim", "--format", "seed"], "--format seed prints the QDMA benchmark's latency tables"),
        (&["latency", "sim", "--load-size", "1M"], "--load-size applies to DMA latency or load"),
        (&["latency", "sim", "--dma", "--load-cpu", "0"], "--load-cpu applies to --load"),
        (&["latency", "sim", "--size", "64"], "--size applies to DMA latency or load"),
        (&["latency", "sim", "--width", "128"], "latency times one access of 8, 16, 32 or 64 bits, or 512"),
        (&["latency", "sim", "--offset", "0x3"], "multiples of"),
        (&["latency", "sim", "--samples", "0"], "--samples 0"),
        (&["latency", "sim", "--dma", "--size", "8M"], "the xdma engine takes 1 to"),
        (&["latency", "sim", "--load", "h2c", "--load-size", "8M"], "--load-size 0x800000"),
        (&["latency", "0000:15:00.0", "--irq", "--allow-dma"], "--dma needs a DMA engine pcibench drives"),
        (&["latency", "0000:15:00.0", "--dma", "--allow-dma"], "--dma needs a DMA engine pcibench drives"),
        (&["latency", "0000:15:00.0", "--load", "all", "--allow-dma"], "--load needs a DMA engine pcibench drives"),
    ];
    for (args, want) in cases {
        let o = pcibench(t.path(), args);
        let e = err(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want) && e.trim_end().lines().count() == 1, "{args:?}: {e}");
    }
    // DMA on a real device needs consent first (as `pcibench dma`).
    let o = pcibench(t.path(), &["latency", "0000:15:00.0", "--dma"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("add --allow-dma"), "{}", err(&o));
}

#[test]
fn a_fixture_device_is_read_over_sysfs_without_writes() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    // The fixture's resource file stands in for the BAR: sized as the BAR, holding zeros.
    let bar0 = t.path().join("sys/bus/pci/devices/0000:15:00.0/resource0");
    std::fs::OpenOptions::new().write(true).open(&bar0).unwrap().set_len(1 << 20).unwrap();
    let v = json(&pcibench(t.path(), &["latency", "0000:15:00.0", "--width", "32", "--samples", "500", "--json"]));
    assert_eq!(v["via"], "sysfs");
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "no write-then-read without --allow-write");
    assert_eq!(rows[0]["probe"], "mmio-read");
    assert_eq!(rows[0]["latency"]["samples"], 500);
    assert!(rows[0]["verify"]["reason"].as_str().unwrap().contains("read 0x0 every time"), "{}", rows[0]);
    assert_eq!(std::fs::read(&bar0).unwrap(), vec![0u8; 1 << 20], "nothing written");
}
