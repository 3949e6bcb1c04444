//! `pcibench memtest` end to end (issue 56 item 2): every simulated card built with the aliasing
//! fault (`PCIBENCH_SIM_FAULT=alias`: its card memory answers at half its size, as DDR with an
//! address line unconnected does) fails with exit 3, the bad range named with whose data it holds,
//! and the size that answers; without the fault the same runs pass.

use std::process::{Command, Output};

fn memtest(args: &[&str], alias: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcibench"));
    c.arg("memtest").args(args).env("PCIBENCH_SYSROOT", "/nonexistent");
    if alias {
        c.env("PCIBENCH_SIM_FAULT", "alias");
    } else {
        c.env_remove("PCIBENCH_SIM_FAULT");
    }
    c.output().expect("run pcibench")
}

#[test]
fn the_aliasing_fault_is_caught_and_the_size_that_answers_named() {
    // (card, chunk, its memory, half of it); sim's 0x128000 halves to 0x94000, no power of two:
    // the address pass finds it where the power-of-two markers cannot.
    for (card, chunk, whole, half) in [
        ("sim", "256K", 0x12_8000u64, 0x9_4000u64),
        ("sim-xdma4", "1M", 0x12_8000, 0x9_4000),
        ("sim-qdma", "8M", 32 << 20, 16 << 20),
    ] {
        let o = memtest(&[card, "--chunk", chunk, "--json"], true);
        assert_eq!(o.status.code(), Some(3), "{card}: {}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let t = &v["memtest"];
        assert_eq!(t["size"], whole, "{card}");
        assert_eq!(t["answers"], half, "{card}: {t}");
        for p in t["passes"].as_array().unwrap() {
            assert_eq!(p["bad_bytes"], half, "{card}: the lower half holds the upper half's data: {p}");
            assert_eq!(p["bad_ranges"][0]["start"], 0, "{card}");
            assert_eq!(p["bad_ranges"][0]["end"], half, "{card}");
            assert_eq!(p["bad_ranges"][0]["holds_from"], half, "{card}");
        }
        if half.is_power_of_two() {
            assert_eq!(t["aliasing"]["found_elsewhere"][0], serde_json::json!([0, half]), "{card}: {t}");
        }
        let o = memtest(&[card, "--chunk", chunk], false);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{card}: {out}");
        assert!(out.contains("the memory answers at its whole"), "{card}: {out}");
    }
    let o = memtest(&["sim-qdma", "--chunk", "8M"], true);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("  0x0-0xffffff (16 MiB): holds the data written 0x1000000 bytes above it"), "{out}");
    assert!(out.contains("the memory answers at 16 MiB (0x1000000), not 32 MiB"), "{out}");
    assert!(out.contains("aliasing pass: the marker written at +0x1000000 reads back at +0x0"), "{out}");
}
