//! Golden outputs: every command's stdout, stderr and exit status on the simulated cards, the
//! fixture sysfs tree and the fixture saved runs, in every format, pinned byte for byte apart
//! from the figures. Figures that vary from run to run (throughput, latency, sample and batch
//! counts, the timer's overhead, the CPU the thread ran on, the time, pattern hashes) become `#`;
//! the flags and notes that only say how noisy a run was (`!noisy`, `!few`, "batched") are
//! dropped; everything else (words, units, sizes, columns, flags that follow from the input,
//! exit status) must stay as it is.
//!
//! When an output changes on purpose, regenerate the golden files and review the diff:
//!     PCIBENCH_BLESS=1 cargo test -p pcibench-cli --test golden
//! They live in tests/golden/NAME.txt, one per case below.

mod common;
mod masks;
use masks::{mask_csv, mask_json, mask_text, mask_times, widest_as_word};
use pcibench::pci::fixture::seed_tree;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a case runs: no sysfs at all (the simulated cards alone), the fixture tree (the seeds'
/// cards, see `pci::fixture::seed_tree`), or in the fixture saved runs' folder.
#[derive(Clone, Copy)]
enum Root {
    None,
    Fixture,
    SavedRuns,
}

/// How the output is read for masking.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// Text (table, seed, info, doctor): figures by their shape.
    Text,
    /// One JSON document: figures by their field.
    Json,
    /// CSV: figures by their column.
    Csv,
    /// Output that has no varying figures (list, info, plots and comparisons of fixed files):
    /// compared as is.
    Exact,
    /// health: as is but for the time it ran (an RFC 3339 time, `*_timestamp_seconds N`,
    /// `"timestamp": N`).
    Health,
}

fn fixture_root(dir: &Path) {
    seed_tree(dir);
    // The fixture's resource files are empty: give 0000:15:00.0's their BARs' sizes, so PIO and
    // latency can map them (reads of zeros; writes need consent they are not given).
    let dev = dir.join("sys/devices/pci0000:00/0000:15:00.0");
    for (i, size) in [(0, 1u64 << 20), (2, 128 << 10), (4, 64 << 10)] {
        for f in [format!("resource{i}"), format!("resource{i}_wc")] {
            std::fs::OpenOptions::new().write(true).open(dev.join(f)).unwrap().set_len(size).unwrap();
        }
    }
}

fn saved_runs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pcibench/tests/fixtures/results")
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Run one case and compare its masked output with tests/golden/NAME.txt (or rewrite it).
fn check(name: &str, root: Root, shape: Shape, args: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pcibench"));
    cmd.args(args);
    let sysroot = match root {
        Root::None | Root::SavedRuns => PathBuf::from("/nonexistent"),
        Root::Fixture => {
            fixture_root(tmp.path());
            tmp.path().to_path_buf()
        }
    };
    cmd.env("PCIBENCH_SYSROOT", &sysroot);
    // Whether a row is estimated past 10 s depends on the host's load (sim-nvram's 8 KiB rows
    // take seconds on a busy 2-CPU VM): goldens hold what does not.
    cmd.env("PCIBENCH_LONG_SECS", "1000000");
    if let Root::SavedRuns = root {
        cmd.current_dir(saved_runs());
    }
    let o = cmd.output().expect("run pcibench");
    let root_text = sysroot.to_string_lossy().into_owned();
    let clean = |s: &[u8]| String::from_utf8_lossy(s).replace(&root_text, "<root>");
    let stdout = match shape {
        Shape::Text => mask_text(&clean(&o.stdout)),
        Shape::Json => mask_json(&clean(&o.stdout)),
        Shape::Csv => mask_csv(&clean(&o.stdout)),
        Shape::Exact => clean(&o.stdout),
        Shape::Health => mask_times(&clean(&o.stdout)),
    };
    // The suite measures the widest SIMD routine this CPU has: named in the goldens as <widest>,
    // so they hold on CPUs with other vector units.
    let stdout = if args.first() == Some(&"run") { widest_as_word(&stdout) } else { stdout };
    let stderr = match shape {
        Shape::Exact => clean(&o.stderr),
        Shape::Health => mask_times(&clean(&o.stderr)),
        _ => mask_text(&clean(&o.stderr)),
    };
    let actual = format!(
        "$ pcibench {}\nexit: {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
        args.join(" "),
        o.status.code().map_or("signal".into(), |c| c.to_string())
    );
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os("PCIBENCH_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (PCIBENCH_BLESS=1 writes it)", path.display()));
    if want != actual {
        let line = want
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(actual.lines().count()));
        panic!(
            "{name}: the output differs from tests/golden/{name}.txt at line {}:\n  want: {}\n  got:  {}\n\
             whole output:\n{actual}\n(PCIBENCH_BLESS=1 cargo test -p pcibench-cli --test golden rewrites the golden files if the change is meant)",
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

macro_rules! golden {
    ($($name:ident: $root:ident $shape:ident [$($arg:expr),* $(,)?];)*) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name), Root::$root, Shape::$shape, &[$($arg),*]);
            }
        )*
    };
}

golden! {
    // Devices: list and info.
    list_fixture: Fixture Exact ["list"];
    list_fixture_json: Fixture Exact ["list", "--json"];
    list_filtered: Fixture Exact ["list", "-d", "1332:5425"];
    info_sim: None Exact ["info", "sim"];
    info_sim_qdma: None Exact ["info", "sim-qdma"];
    info_sim_nvram: None Exact ["info", "sim-nvram"];
    info_sim_xdma_st: None Exact ["info", "sim-xdma-st"];
    info_sim_json: None Exact ["info", "sim", "--json"];
    info_sim_qdma_json: None Exact ["info", "sim-qdma", "--json"];
    info_sim_nvram_json: None Exact ["info", "sim-nvram", "--json"];
    info_fixture_xilinx: Fixture Exact ["info", "15:00.0"];
    info_fixture_xilinx_json: Fixture Exact ["info", "15:00.0", "--json"];
    info_fixture_behind_bridge: Fixture Exact ["info", "22:00.0"];
    info_fixture_nvram: Fixture Exact ["info", "2d:00.0"];

    // PIO.
    pio_sim_sizes: None Text ["pio", "sim", "--bar", "2", "--size", "4K", "--size", "64K", "--total", "256K"];
    pio_sim_whole_bars: None Text ["pio", "sim", "--total", "2M"];
    pio_sim_seed: None Text ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K", "--total", "64K", "--format", "seed"];
    pio_sim_json: None Json ["pio", "sim", "--bar", "2", "--map", "wc", "--size", "4K", "--total", "64K", "--json"];
    pio_sim_csv: None Csv ["pio", "sim", "--bar", "2", "--map", "wc", "--size", "4K", "--total", "64K", "--format", "csv"];
    pio_sim_latency: None Text ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K", "--total", "64K", "--latency"];
    pio_sim_range_and_widths: None Text ["pio", "sim", "--bar", "2", "--map", "wc", "--width", "32", "--width", "memcpy", "--size", "8..32", "--total", "1K"];
    pio_sim_size_list: None Text ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K,8..16K", "--total", "64K"];
    pio_sim_syscall: None Text ["pio", "sim", "--io", "syscall"];
    pio_sim_nvram: None Text ["pio", "sim-nvram", "--bar", "2", "--map", "uc", "--size", "64K", "--total", "256K"];
    pio_fixture_reads: Fixture Text ["pio", "15:00.0", "--bar", "2", "--dir", "c2h", "--size", "4K", "--size", "64K", "--total", "256K"];
    pio_fixture_default: Fixture Text ["pio", "15:00.0", "--total", "1M"];
    pio_fixture_json: Fixture Json ["pio", "15:00.0", "--bar", "2", "--map", "uc", "--dir", "c2h", "--size", "4K", "--total", "64K", "--json"];
    pio_fixture_writes_refused: Fixture Text ["pio", "15:00.0", "--dir", "h2c", "--total", "1M"];
    pio_bad_bar: None Text ["pio", "sim", "--bar", "3"];

    // DMA.
    dma_sim_default_size: None Text ["dma", "sim", "--total", "4M"];
    dma_sim_card_addr: None Text ["dma", "sim", "--card-addr", "0x1000", "--total", "4M"];
    dma_sim_seed: None Text ["dma", "sim", "--size", "4K", "--size", "64K", "--total", "256K", "--format", "seed"];
    dma_sim_json: None Json ["dma", "sim", "--size", "64K", "--total", "256K", "--json"];
    dma_sim_csv: None Csv ["dma", "sim", "--size", "64K", "--total", "256K", "--format", "csv"];
    dma_sim_list_sizes: None Text ["dma", "sim", "--size", "4K,16K", "--dir", "c2h", "--total", "64K"];
    dma_sim_qdma_default_size: None Text ["dma", "sim-qdma", "--total", "32M"];
    dma_sim_qdma_queues: None Text ["dma", "sim-qdma", "--queues", "1,4", "--size", "64..128", "--dir", "all", "--total", "256K"];
    dma_sim_qdma_random: None Text ["dma", "sim-qdma", "--pattern", "random", "--window", "1M", "--queues", "2", "--size", "4K", "--total", "256K"];
    dma_sim_qdma_seed: None Text ["dma", "sim-qdma", "--queues", "1..2", "--size", "4K", "--total", "64K", "--format", "seed"];
    dma_sim_qdma_json: None Json ["dma", "sim-qdma", "--size", "4K", "--total", "64K", "--json"];
    dma_sim_xdma_st: None Text ["dma", "sim-xdma-st", "--size", "64,4K,64K", "--dir", "both", "--total", "256K"];
    dma_sim_xdma_st_json: None Json ["dma", "sim-xdma-st", "--size", "4K", "--total", "64K", "--json"];
    dma_sim_xdma_st_card_addr: None Text ["dma", "sim-xdma-st", "--card-addr", "0x10", "--size", "64"];
    dma_sim_xdma_st_csv: None Csv ["dma", "sim-xdma-st", "--size", "64", "--total", "16K", "--format", "csv"];
    dma_sim_xdma_st_completion_both: None Text ["dma", "sim-xdma-st", "--completion", "both", "--size", "64,4K", "--total", "64K"];
    latency_sim_xdma_st_dma_completion_json: None Json ["latency", "sim-xdma-st", "--dma", "--completion", "both", "--samples", "100", "--dma-samples", "20", "--size", "64", "--format", "json"];
    info_sim_qdma_st: None Exact ["info", "sim-qdma-st"];
    dma_sim_qdma_st_queues: None Text ["dma", "sim-qdma-st", "--queues", "1,2", "--size", "64,64K", "--dir", "all", "--total", "256K"];
    dma_sim_qdma_st_seed: None Text ["dma", "sim-qdma-st", "--queues", "1..2", "--size", "4K", "--total", "64K", "--format", "seed"];
    dma_sim_qdma_st_json: None Json ["dma", "sim-qdma-st", "--size", "64K", "--total", "256K", "--json"];
    dma_sim_nvram: None Text ["dma", "sim-nvram", "--size", "8K", "--size", "1M", "--total", "4M"];
    dma_sim_nvram_seed: None Text ["dma", "sim-nvram", "--size", "1M", "--total", "2M", "--format", "seed"];
    dma_sim_nvram_card_size: None Text ["dma", "sim-nvram", "--card-size", "1M", "--total", "2M"];
    dma_sim_completion_both: None Text ["dma", "sim", "--completion", "both", "--size", "4K", "--total", "64K"];
    dma_sim_completion_json: None Json ["dma", "sim", "--completion", "both", "--size", "4K", "--total", "64K", "--format", "json"];
    dma_sim_nvram_completion_both: None Text ["dma", "sim-nvram", "--completion", "both", "--size", "64K", "--total", "512K"];
    dma_sim_qdma_completion_both: None Text ["dma", "sim-qdma", "--completion", "both", "--queues", "1,4", "--size", "4K", "--total", "256K"];
    dma_sim_qdma_aggregated: None Text ["dma", "sim-qdma", "--completion", "both", "--queues", "1,4", "--qdma-intr", "aggregated", "--size", "4K", "--total", "256K"];
    dma_refused_qdma_intr: None Text ["dma", "sim-qdma", "--qdma-intr", "aggregated"];
    dma_refused_engine: None Text ["dma", "sim", "--engine", "edu"];
    dma_refused_size: None Text ["dma", "sim", "--size", "2M"];
    dma_refused_queues: None Text ["dma", "sim", "--queues", "2"];
    dma_refused_bidir: None Text ["dma", "sim", "--dir", "bidir"];
    dma_refused_window: None Text ["dma", "sim", "--window", "1M"];
    dma_refused_total: None Text ["dma", "sim", "--size", "4K", "--total", "1K"];
    dma_fixture_needs_consent: Fixture Text ["dma", "15:00.0", "--engine", "xdma"];
    dma_fixture_no_engine: Fixture Text ["dma", "15:00.0", "--allow-dma"];

    // Latency.
    latency_sim: None Text ["latency", "sim", "--samples", "200"];
    latency_sim_json: None Json ["latency", "sim", "--width", "32", "--width", "64", "--samples", "200", "--json"];
    latency_sim_csv: None Csv ["latency", "sim", "--samples", "200", "--format", "csv"];
    latency_sim_dma: None Text ["latency", "sim", "--dma", "--samples", "100", "--dma-samples", "20", "--size", "64,4K"];
    latency_sim_dma_seed: None Text ["latency", "sim", "--dma", "--samples", "100", "--dma-samples", "20", "--format", "seed"];
    latency_sim_dma_completion_json: None Json ["latency", "sim", "--dma", "--completion", "both", "--samples", "100", "--dma-samples", "20", "--size", "64", "--format", "json"];
    latency_sim_dma_completion_seed: None Text ["latency", "sim", "--completion", "both", "--samples", "100", "--dma-samples", "20", "--size", "64,4K", "--format", "seed"];
    latency_sim_load: None Text ["latency", "sim", "--load", "h2c", "--samples", "200"];
    latency_sim_qdma_load: None Text ["latency", "sim-qdma", "--load", "both", "--samples", "200", "--load-size", "64K"];
    latency_sim_nvram_dma: None Text ["latency", "sim-nvram", "--dma", "--samples", "100", "--dma-samples", "10", "--size", "4K"];
    latency_fixture: Fixture Text ["latency", "15:00.0", "--width", "32", "--samples", "200"];
    latency_refused: None Text ["latency", "sim", "--size", "64"];
    latency_refused_seed: None Text ["latency", "sim", "--format", "seed"];
    latency_fixture_dma_needs_engine: Fixture Text ["latency", "15:00.0", "--dma", "--allow-dma"];

    // Buffers.
    buffers_host: None Text ["buffers", "--size", "64K", "--total", "256K"];
    buffers_heap_seed: None Text ["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--format", "seed"];
    buffers_heap_json: None Json ["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--json"];
    buffers_heap_csv: None Csv ["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--format", "csv"];
    buffers_sim_device: None Text ["buffers", "--device", "sim", "--buffer", "device", "--size", "64K", "--total", "256K"];

    // The suite.
    run_sim: None Text ["run", "sim", "--total", "1M"];
    run_sim_seed: None Text ["run", "sim", "--total", "1M", "--format", "seed"];
    run_sim_json: None Json ["run", "sim", "--total", "1M", "--json"];
    run_sim_csv: None Csv ["run", "sim", "--total", "1M", "--format", "csv"];
    run_sim_qdma: None Text ["run", "sim-qdma", "--total", "1M"];
    run_sim_qdma_small_total: None Text ["run", "sim-qdma", "--total", "512K"];
    run_sim_nvram: None Text ["run", "sim-nvram", "--total", "1M"];
    run_fixture: Fixture Text ["run", "15:00.0", "--total", "1M"];
    run_fixture_writes: Fixture Text ["run", "15:00.0", "--total", "1M", "--allow-write"];

    // Doctor.
    doctor_sim: None Text ["doctor", "sim"];
    doctor_fixture_xilinx: Fixture Text ["doctor", "15:00.0"];
    doctor_fixture_bridge_json: Fixture Json ["doctor", "20:00.0", "--json"];
    doctor_fixture_vfio: Fixture Text ["doctor", "2d:00.0"];

    // Reset and link: what the kernel offers, and every refusal before anything is written.
    reset_fixture_list: Fixture Exact ["reset", "22:00.0", "--list"];
    reset_fixture_list_json: Fixture Exact ["reset", "22:00.0", "--list", "--json"];
    reset_fixture_needs_consent: Fixture Exact ["reset", "22:00.0"];
    reset_fixture_bridge: Fixture Exact ["reset", "20:00.0", "--allow-reset"];
    reset_sim_refused: None Exact ["reset", "sim", "--allow-reset"];
    reset_refused_method: Fixture Exact ["reset", "22:00.0", "--method", "reboot"];
    link_fixture_root_bus: Fixture Exact ["link", "15:00.0"];
    link_fixture_needs_consent: Fixture Exact ["link", "22:00.0", "--speed", "gen1", "--retrain"];
    link_refused_speed: Fixture Exact ["link", "22:00.0", "--speed", "gen9"];
    setup_refused_id_and_device: Fixture Exact ["setup", "15:00.0", "--id", "10ee", "--vfio"];
    setup_refused_id_sysfs_user: Fixture Exact ["setup", "--id", "10ee", "--sysfs-user", "alice"];

    // Saved runs: plot and compare.
    plot_card: SavedRuns Exact ["plot", "card.json", "-o", "-"];
    plot_latency: SavedRuns Exact ["plot", "latency.json", "card.json", "--label", "lat", "--label", "card", "-o", "-"];
    compare_card: SavedRuns Exact ["compare", "card.json", "card.json"];
    compare_card_json: SavedRuns Exact ["compare", "card.json", "card.json", "--json"];
    compare_card_csv: SavedRuns Exact ["compare", "card.json", "card.json", "--format", "csv"];
    compare_refused: SavedRuns Exact ["compare", "card.json", "latency.json"];

    // Link health on the fixture tree, and saved runs exported for Prometheus.
    health_fixture: Fixture Health ["health"];
    health_fixture_json: Fixture Health ["health", "--json"];
    health_fixture_openmetrics: Fixture Health ["health", "--format", "openmetrics"];
    health_fixture_named: Fixture Health ["health", "22:00.0"];
    health_refused: Fixture Health ["health", "--watch", "1"];
    export_card: SavedRuns Exact ["export", "card.json", "--format", "openmetrics"];
    export_latency: SavedRuns Exact ["export", "latency.json"];
}
