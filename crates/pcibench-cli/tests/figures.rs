//! Figures a performance engineer can trust (issue 11), through the binary: no link limit or
//! efficiency on the simulated card's host memory (with the reason), its engine model's rate as
//! the limit of its DMA rows (issue 52), the context of every report, sample
//! accounting, and `--total` checked before anything runs.

mod common;
use common::json;
use std::process::Output;

/// On a host without PCI: only the simulated cards.
fn pcibench(args: &[&str]) -> Output {
    common::pcibench(std::path::Path::new("/nonexistent"), args)
}

#[test]
fn the_sim_card_has_no_link_limit_and_says_why() {
    for args in [
        &["pio", "sim", "--bar", "2", "--map", "uc", "--size", "64K", "--total", "1M", "--json"][..],
        &["dma", "sim", "--size", "64K", "--total", "1M", "--json"][..],
    ] {
        let v = json(&pcibench(args));
        let note = v["limit_note"].as_str().unwrap();
        // PIO on its BARs: host memory, no limit. DMA: the engine model's rate is the limit
        // (issue 52), said in the header.
        let dma = args[0] == "dma";
        if dma {
            assert!(note.starts_with("sim card model: 2,000 MB/s per direction"), "{note}");
        } else {
            assert!(note.contains("simulated card"), "{note}");
        }
        for r in v["results"].as_array().unwrap() {
            if dma {
                // 64 KiB of data and a 32-byte descriptor at 2,000 MB/s.
                let limit = r["limit_mbps"].as_f64().unwrap();
                assert!((limit - 2000.0 * 65536.0 / 65568.0).abs() < 1e-6, "{r}");
                assert!(r["efficiency_pct"].as_f64().unwrap() <= 101.0, "{r}");
            } else {
                assert!(r["limit_mbps"].is_null() && r["efficiency_pct"].is_null(), "{r}");
            }
            let st = &r["stats"];
            // 1 MiB of 64 KiB transfers: samples of `batch` transfers (at least 100 µs each, so a
            // short transfer is batched), the last also moving what no whole batch holds: all 16.
            let (n, batch) = (st["transfers"].as_u64().unwrap(), st["batch"].as_u64().unwrap());
            assert!(n == 16 && batch <= 16 && st["samples"].as_u64().unwrap() == 16 / batch, "{st}");
            assert!(st["p5_mbps"].as_f64().unwrap() <= st["p95_mbps"].as_f64().unwrap());
            assert!(st["cv_pct"].as_f64().unwrap() >= 0.0);
        }
        let c = &v["context"];
        assert!(c["cpu"].is_u64() && c["clock"].as_str().unwrap().contains("CLOCK_MONOTONIC"), "{c}");
        assert_eq!(c["command_line"][1], args[0]);
    }
}

#[test]
fn totals_that_cannot_run_are_refused_before_anything_does() {
    for total in ["0", "0x100000000000000", "0xffffffffffffffff", "1K"] {
        let o = pcibench(&["pio", "sim", "--bar", "2", "--size", "4K", "--total", total]);
        assert_eq!(o.status.code(), Some(2), "--total {total}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--total") && err.lines().count() == 1, "{err}");
        assert!(o.stdout.is_empty(), "nothing measured for --total {total}");
        let o = pcibench(&["dma", "sim", "--size", "4K", "--total", total]);
        assert_eq!(o.status.code(), Some(2), "dma --total {total}");
    }
}

#[test]
fn pinning_shows_in_the_report() {
    let v = json(&pcibench(&["pio", "sim", "--bar", "2", "--size", "64K", "--total", "1M", "--cpu", "0", "--json"]));
    assert_eq!((v["context"]["cpu"].as_u64(), v["context"]["pinned"].as_bool()), (Some(0), Some(true)));
    let o = pcibench(&["pio", "sim", "--cpu", "100000", "--total", "1M"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cpu"));
}
