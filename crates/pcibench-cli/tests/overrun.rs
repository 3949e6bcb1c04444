//! Issue 50 item 11 end to end: every simulated card built with the overrun fault
//! (`PCIBENCH_SIM_FAULT=overrun`: each descriptor also writes one byte past its end) makes `dma`
//! exit 3, the offset of the byte past the transfer named, on both sides (card memory read back
//! for h2c, the host buffer for c2h). Without the fault the same runs verify.

use std::process::{Command, Output};

fn dma(card: &str, dir: &str, size: &str, fault: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcibench"));
    c.args(["dma", card, "--dir", dir, "--size", size, "--total", "64K"]).env("PCIBENCH_SYSROOT", "/nonexistent");
    if fault {
        c.env("PCIBENCH_SIM_FAULT", "overrun");
    } else {
        c.env_remove("PCIBENCH_SIM_FAULT");
    }
    c.output().expect("run pcibench")
}

#[test]
fn item11_a_write_past_the_end_exits_3_with_the_offset_named() {
    for (card, size) in [("sim", "4097"), ("sim-xdma-st", "4097"), ("sim-qdma", "4097"), ("sim-nvram", "4104")] {
        for dir in ["h2c", "c2h"] {
            let o = dma(card, dir, size, true);
            let err = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            assert_eq!(o.status.code(), Some(3), "{card} {dir}: {err}");
            assert!(err.contains("first mismatch at offset 0x") && err.contains("past the end"), "{card} {dir}: {err}");
            let o = dma(card, dir, size, false);
            assert_eq!(o.status.code(), Some(0), "{card} {dir}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    // The QDMA stream card's C2H packets land in host buffers; its H2C packets the example
    // design's checker judges (nothing there to write past).
    let o = dma("sim-qdma-st", "c2h", "1500", true);
    let err = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("byte 1 past the end of transfer"), "{err}");
}
