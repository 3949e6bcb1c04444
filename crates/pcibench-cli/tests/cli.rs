//! The `pcibench` binary on fixture trees: output, JSON, exit codes, one-line errors.

use pcibench::pci::fixture::seed_tree;
mod common;
use common::{err as stderr, out as stdout, pcibench};

#[test]
fn list_prints_a_line_per_device() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let o = pcibench(t.path(), &["list"]);
    assert!(o.status.success());
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 11, "{out}");
    assert!(lines[0].starts_with("sim ") && lines[0].contains("(simulated)"));
    assert!(lines[1].starts_with("sim-qdma ") && lines[1].contains("[10ee:903f] (simulated)"), "{out}");
    assert!(lines[2].starts_with("sim-nvram ") && lines[2].contains("[1332:5425] (simulated)"), "{out}");
    assert!(lines[3].starts_with("sim-xdma-st ") && lines[3].contains("AXI4-Stream"), "{out}");
    assert!(lines[4].starts_with("sim-qdma-st ") && lines[4].contains("[10ee:903f] (simulated)"), "{out}");
    assert!(lines[5].starts_with("sim-xdma4 ") && lines[5].contains("four memory-mapped channel pairs"), "{out}");
    assert_eq!(
        lines[6],
        "0000:15:00.0 Memory controller [0580]: Xilinx Corporation Device 7024 [10ee:7024] driver=none"
    );
    assert!(lines[10].contains("[1332:5425]") && lines[10].ends_with("driver=vfio-pci"));

    // The sim-nvram card has seed 001's ids too: -d matches it and the fixture card.
    let o = pcibench(t.path(), &["list", "-d", "1332:5425"]);
    let out = stdout(&o);
    assert_eq!(
        out.lines().map(|l| l.split(' ').next().unwrap()).collect::<Vec<_>>(),
        ["sim-nvram", "0000:2d:00.0"],
        "{out}"
    );
    let o = pcibench(t.path(), &["list", "-s", "22:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["address"], "0000:22:00.0");
    assert_eq!(v[0]["parent"], "0000:20:00.0");
}

#[test]
fn info_text_and_json_agree() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let o = pcibench(t.path(), &["info", "0000:15:00.0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("  Control:       I/O- Mem+ BusMaster- (command 0x0002)"), "{text}");
    assert!(text.contains(
        "  BAR2: 0x387f80100000 size 128 KiB (0x20000) memory 64-bit prefetchable files: resource2 resource2_wc"
    ));
    assert!(text.contains("  Link:          Gen2 x4 (5.0 GT/s PCIe), max Gen2 x4\n"));
    assert!(text.contains("  Payload:       MPS 256 (supports 512), MRRS 512"));
    assert!(text.contains("write limit 1651 MB/s, read limit 1675 MB/s"));
    assert!(text.contains("  AER:           correctable 2, nonfatal 0, fatal 0 (BadTLP 2)"));
    assert!(text.contains("[100] Advanced Error Reporting v2"));

    let o = pcibench(t.path(), &["info", "15:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["bars"][1]["size"], 0x20000);
    assert_eq!(v["bars"][1]["prefetchable"], true);
    assert_eq!(v["link"]["mps"], 256);

    let o = pcibench(t.path(), &["info", "22:00.0"]);
    assert!(stdout(&o).contains("Gen3 x1 (8.0 GT/s PCIe), max Gen3 x8 -- DEGRADED"));
    assert!(stdout(&o).contains("  Upstream:      0000:20:00.0"));
}

#[test]
fn info_sim_is_marked_simulated() {
    let o = pcibench(std::path::Path::new("/nonexistent"), &["info", "sim"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("SIMULATED CARD"));
    let o = pcibench(std::path::Path::new("/nonexistent"), &["info", "sim", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["simulated"], true);
    assert_eq!(v["bars"].as_array().unwrap().len(), 3);
}

#[test]
fn bad_input_gets_one_line_and_nonzero_exit() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let o = pcibench(t.path(), &["info", "15:00"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("use DDDD:BB:DD.F or BB:DD.F"), "{}", stderr(&o));

    let o = pcibench(t.path(), &["info", "0000:99:00.0"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "pcibench: no PCI device 0000:99:00.0: run `pcibench list` to see the devices present\n");
    let o = pcibench(t.path(), &["list", "-d", "xyz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid id filter"));
}

#[test]
fn pio_on_sim_verifies_and_prints_the_seed_format() {
    let none = std::path::Path::new("/nonexistent");
    let o = pcibench(none, &["pio", "sim", "--bar", "2", "--map", "uc", "--size", "64K", "--total", "256K", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["simulated"], true);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["verify"]["status"], "ok");
        assert_eq!(r["stats"]["transfers"], 4);
    }
    let o = pcibench(none, &["pio", "sim", "--bar", "0", "--map", "wc", "--total", "2M", "--format", "seed"]);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Simulated card sim: host-memory figures, not PCIe figures");
    assert_eq!(lines[1], "Testing BAR 0 memory size 0x100000 for sim");
    assert_eq!(lines[2], "Test pattern pass");
    assert_eq!(lines[3], "host-to-card PIO mapped with write-combining timing for 2 transfers of 1048576 bytes:");
    assert!(lines[4].starts_with("   Min = ") && lines[4].ends_with(" (Mbytes/sec)"), "{}", lines[4]);
    assert!(lines[5].starts_with("  Mean = ") && lines[6].starts_with("   Max = "));
    // The header names the BAR's size, not the transfer's.
    let o = pcibench(
        none,
        &["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K", "--total", "64K", "--format", "seed"],
    );
    assert!(stdout(&o).contains("Testing BAR 2 memory size 0x20000 for sim"), "{}", stdout(&o));
    // The DMA register BAR is not a PIO target by default.
    let o = pcibench(none, &["pio", "sim", "--map", "uc", "--total", "1M", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let bars: std::collections::BTreeSet<u64> =
        v["results"].as_array().unwrap().iter().map(|r| r["bar"].as_u64().unwrap()).collect();
    assert_eq!(bars.into_iter().collect::<Vec<_>>(), vec![0, 2]);
}

#[test]
fn dma_on_sim_round_trips() {
    let none = std::path::Path::new("/nonexistent");
    let o = pcibench(
        none,
        &["dma", "sim", "--engine", "sim", "--size", "4K", "--size", "0x128000", "--total", "8M", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["engine"], "xdma");
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["verify"]["status"] == "ok"));
    let o = pcibench(none, &["dma", "sim", "--engine", "edu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("has no edu engine"), "{}", stderr(&o));
}

#[test]
fn dma_on_sim_nvram_with_the_umem_engine() {
    let none = std::path::Path::new("/nonexistent");
    let o = pcibench(none, &["dma", "sim-nvram", "--size", "8K", "--size", "1M", "--total", "4M", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["engine"], "umem");
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["verify"]["status"] == "ok"), "{rows:?}");
    let o = pcibench(none, &["dma", "sim-nvram", "--size", "1M", "--total", "2M", "--format", "seed"]);
    let out = stdout(&o);
    assert!(
        out.contains("Test pattern pass\nhost-to-card DMA timing for 2 transfers of 1048576 bytes:\n   Min = "),
        "{out}"
    );
    assert!(out.contains("card-to-host DMA timing for 2 transfers of 1048576 bytes:"), "{out}");
    let o = pcibench(none, &["info", "sim-nvram"]);
    assert!(stdout(&o).contains("umem: MM-5425CN NVRAM DMA engine in BAR0, magic 0x5c"), "{}", stdout(&o));
    for (args, code, want) in [
        (&["dma", "sim-nvram", "--size", "2G"][..], 2, "does not fit the umem engine's card memory"),
        (&["dma", "sim-nvram", "--size", "12", "--total", "48"], 2, "multiple of 8"),
        (&["dma", "sim-nvram", "--buffer", "reserved:0x10000000,64M"], 2, "does not apply to sim-nvram"),
        (&["dma", "sim-nvram", "--buffer", "reserved:0x10000800,64M"], 2, "multiples of the"),
        (&["dma", "sim", "--engine", "umem"], 2, "has no umem engine"),
    ] {
        let o = pcibench(none, args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn dma_on_sim_qdma_over_queues_random_and_refusals() {
    let none = std::path::Path::new("/nonexistent");
    let o =
        pcibench(none, &["dma", "sim-qdma", "--queues", "1,4", "--size", "64..128", "--dir", "all", "--total", "256K"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("### Sequential throughput (GB/s): H2C and C2H at once"), "{out}");
    assert!(out.lines().filter(|l| l.starts_with("c2h (bidir)")).count() == 4, "{out}");
    let o = pcibench(
        none,
        &[
            "dma",
            "sim-qdma",
            "--queues",
            "1..4",
            "--size",
            "256",
            "--pattern",
            "random",
            "--window",
            "4M",
            "--total",
            "1M",
            "--format",
            "seed",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("### Random access throughput (GB/s), host window 4 MiB: C2H"), "{out}");
    assert!(out.contains("| package size (Bytes) | Qs = 1 | 2 | 4 |  |"), "{out}");
    assert!(out.contains("Test pattern pass (6 rows verified)"), "{out}");
    // Bad input: one line each, usage exit code, nothing run.
    for (args, want) in [
        (&["dma", "sim", "--engine", "qdma"][..], "sim (10ee:7024) has no qdma engine"),
        (&["dma", "sim-qdma", "--queues", "4096"][..], "--queues 4096 is more than function 0 has"),
        (
            &["dma", "sim-qdma", "--ring-size", "1000"][..],
            "--ring-size 1000 is not in the card's global ring-size table",
        ),
        (&["dma", "sim", "--pattern", "random"][..], "--pattern random needs an engine that runs batches"),
        // Issue 55: either QDMA interrupt mode, named on another engine, is refused alike.
        (
            &["dma", "sim", "--completion", "irq", "--qdma-intr", "direct"][..],
            "--qdma-intr applies to the qdma engine, not xdma: drop it",
        ),
        (
            &["dma", "sim-nvram", "--completion", "irq", "--qdma-intr", "direct"][..],
            "--qdma-intr applies to the qdma engine, not umem: drop it",
        ),
        (
            &["latency", "sim", "--dma", "--completion", "irq", "--qdma-intr", "direct"][..],
            "--qdma-intr applies to the qdma engine, not xdma: drop it",
        ),
    ] {
        let o = pcibench(none, args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("pcibench: ") && err.contains(want) && err.lines().count() == 1, "{args:?}: {err}");
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("proc")).unwrap();
    std::fs::write(t.path().join("proc/meminfo"), "MemAvailable: 1048576 kB\n").unwrap();
    let o = pcibench(t.path(), &["dma", "sim-qdma", "--pattern", "random", "--window", "1G"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--window 1 GiB needs 2 GiB of host buffers"), "{}", stderr(&o));
}

/// A fixture QDMA function: BAR0 (256 KiB) is a resource file holding the registers the driver
/// reads first (identifier, version, engines, queues, function, ring sizes).
fn qdma_fixture(root: &std::path::Path) -> Vec<u8> {
    use pcibench::pci::fixture::{endpoint_config, Fixture};
    let mut bar = vec![0u8; 256 << 10];
    let mut put = |off: usize, v: u32| bar[off..off + 4].copy_from_slice(&v.to_le_bytes());
    put(0x0, 0x1fd3_0000);
    put(0x118, 0x0003_0101);
    put(0x120, 512);
    put(0x134, 0x0200_0000);
    for (i, v) in [2049u32, 65, 129].into_iter().enumerate() {
        put(0x204 + 4 * i, v);
    }
    Fixture::new(root)
        .device("0000:30:00.0")
        .ids(0x10ee, 0x903f, 0x10ee, 0x0007)
        .class(0x058000)
        .bars(&[(0, 0xc000_0000, 256 << 10, 0x0004_0200)])
        .config(&endpoint_config(0x10ee, 0x903f, 0x0002, 3, 16, 256, 512, 4096))
        .file("resource0", &bar);
    bar
}

#[test]
fn info_finds_qdma_by_its_config_bar_and_dma_refuses_before_writing() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let bar = qdma_fixture(t.path());
    let o = pcibench(t.path(), &["info", "30:00.0"]);
    let out = stdout(&o);
    assert!(out.contains("DMA engine:    QDMA (AMD/Xilinx queue DMA, PG302) config registers in BAR0"), "{out}");
    assert!(out.contains("queues: 512 in the IP") && out.contains("ring sizes (descriptors): 2048, 64, 128"), "{out}");
    let o = pcibench(t.path(), &["info", "30:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["engines"][0]["engine"].as_str(), v["engines"][0]["details"]["ip"].as_str()),
        (Some("qdma"), Some("qdma-soft"))
    );
    // A Xilinx function without the identifier is not taken for a QDMA (the vendor id alone never decides).
    let o = pcibench(t.path(), &["info", "15:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["engines"].as_array().unwrap().iter().all(|e| e["engine"] != "qdma"), "{v}");
    // DMA needs VFIO: refused in one line, and the registers were never written.
    let o = pcibench(t.path(), &["dma", "30:00.0", "--engine", "qdma", "--allow-dma"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("DMA is not available through sysfs") && stderr(&o).lines().count() == 1,
        "{}",
        stderr(&o)
    );
    assert!(std::fs::read(t.path().join("sys/bus/pci/devices/0000:30:00.0/resource0")).unwrap() == bar);
}

#[test]
fn safety_refusals_on_fixture_devices() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    // Writes need consent.
    let o = pcibench(t.path(), &["poke", "15:00.0", "0", "0", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--allow-write"));
    let o = pcibench(t.path(), &["dma", "15:00.0", "--engine", "xdma"]);
    assert!(stderr(&o).contains("--allow-dma"));
    // A kernel driver owns the bridge's BARs.
    let o = pcibench(t.path(), &["peek", "20:00.0", "0", "0"]);
    assert!(stderr(&o).contains("bound to driver pcieport"), "{}", stderr(&o));
    // I/O BARs cannot be mapped; BARs that do not exist are named.
    let o = pcibench(t.path(), &["pio", "15:00.0", "--bar", "1"]);
    assert!(stderr(&o).contains("has no BAR1"));
}

#[test]
fn doctor_exit_code_reflects_the_worst_finding() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    let o = pcibench(t.path(), &["doctor", "20:00.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["worst"], "fail");
    assert_eq!(o.status.code(), Some(2));
    let o = pcibench(std::path::Path::new("/nonexistent"), &["doctor", "sim"]);
    assert_eq!(o.status.code(), Some(0));
}

/// Issue #26: `run` prints each kind of note once, after every part, with the rows it applies to,
/// whatever the host's noise makes of the figures (which notes appear varies; each at most once).
#[test]
fn run_prints_each_kind_of_note_once() {
    let t = tempfile::tempdir().unwrap();
    seed_tree(t.path());
    for card in ["sim", "sim-qdma"] {
        let o = pcibench(t.path(), &["run", card, "--total", "4M"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        let notes: Vec<&str> = out.lines().filter(|l| l.contains("note:")).collect();
        assert!(notes.iter().all(|l| l.starts_with("note: ")), "no note under a row:\n{out}");
        // Notes only after the parts, in their own section (none at all on a quiet enough host).
        let parts = out.split_once("\n== notes\n").map_or(out.as_str(), |(p, _)| p);
        assert!(!parts.contains("note: "), "notes only after the parts:\n{out}");
        // A kind is its words up to the first figure or colon: "noisy", "batched", "engine counters, ...".
        let kind = |l: &str| {
            l["note: ".len()..]
                .split([':', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
                .next()
                .unwrap()
                .to_string()
        };
        let mut kinds: Vec<String> = notes.iter().map(|l| kind(l)).collect();
        let n = kinds.len();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), n, "{card}: a kind of note twice:\n{out}");
    }
}

/// Issue 55: an engine's register BAR named with --bar is read at the widths it decodes: the
/// default width is refused once, up front, naming the one to use, and that one runs (reads only,
/// the writes skipped with the reason), on the cards and through `serve` (mapped or messages).
#[test]
fn pio_on_a_register_bar_runs_at_its_widths_or_is_refused_with_one_that_works() {
    let none = std::path::Path::new("/nonexistent");
    let served = common::served::Served::start("sim-qdma", &[]);
    let messages = common::served::Served::start("sim-nvram", &["--no-mmap"]);
    let cases = [
        ("sim-qdma".to_string(), "0", "the qdma engine's registers, which take 32-bit accesses", "32"),
        ("sim-nvram".to_string(), "0", "the umem engine's registers, which take 8, 16 or 32-bit accesses", "32"),
        ("sim".to_string(), "4", "the xdma engine's registers, which take 32-bit accesses", "32"),
        (served.device(), "0", "the qdma engine's registers, which take 32-bit accesses", "32"),
        (messages.device(), "0", "the umem engine's registers, which take 8, 16 or 32-bit accesses", "32"),
    ];
    for (dev, bar, held, width) in cases {
        let args = ["pio", &dev, "--bar", bar, "--map", "uc", "--size", "4K", "--total", "16K"];
        let o = pcibench(none, &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{dev}: {err}");
        assert_eq!(err.lines().count(), 1, "{dev}: {err}");
        let want = format!("BAR{bar} of {dev} holds {held}: --width 64 does not apply; use --width {width}");
        assert!(err.contains(&want), "{dev}: {err}");
        // The width it names works: reads, not compared; the writes skipped, saying why.
        let o = pcibench(none, &[&args[..], &["--width", width, "--json"]].concat());
        assert!(o.status.success(), "{dev}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let rows = v["results"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{dev}: {v}");
        assert_eq!(rows[0]["dir"], "h2c");
        assert!(rows[0]["notes"][0]["reason"].as_str().unwrap().contains("pio reads them only"), "{dev}: {v}");
        assert_eq!((rows[1]["dir"].as_str(), rows[1]["stats"]["transfers"].as_u64()), (Some("c2h"), Some(4)), "{dev}");
        assert_eq!(rows[1]["verify"]["status"], "unverified", "{dev}: {v}");
        // Writes alone are refused up front.
        let o = pcibench(none, &[&args[..], &["--width", width, "--dir", "h2c"]].concat());
        assert_eq!(o.status.code(), Some(2), "{dev}: {}", stderr(&o));
        assert!(stderr(&o).contains("pio reads them only") && stderr(&o).contains("use --dir c2h"), "{}", stderr(&o));
    }
    // A register access the server refuses says which access and why, not the bare errno.
    let o = pcibench(none, &["peek", &served.device(), "0", "0", "--width", "64"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused REGION_READ (8 bytes of BAR0 at 0x0): ")
            && err.contains("BAR0 does not take 8-byte accesses there")
            && err.contains("--width 32"),
        "{err}"
    );
}
