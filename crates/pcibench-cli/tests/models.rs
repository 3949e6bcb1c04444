//! `pcibench serve --model`: users' own device models behind pcibench_model.h, each served in a
//! child process and measured through its socket (the C model of QEMU's edu driven by pcibench's
//! edu engine: DMA both ways, latency, completion by MSI and by INTx, reset), and the models that
//! break the ABI's rules: each gives its one line and exit status, a crash names its call, and
//! DMA outside the client's mappings fails the run with the fault named. Waits are on conditions.

mod common;

use common::models;
use common::served::Served;
use pcibench::access::vfio_user::version::DmaLayout;
use pcibench::access::vfio_user::wire;
use pcibench::model::abi;
use serde_json::Value;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn pcibench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcibench")).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every row of a JSON report verified (a latency read row checks what it read instead: "reads
/// only"), and the rows.
fn verified_rows(out: &Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", stderr(out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["results"].as_array().unwrap().clone();
    assert!(rows.iter().any(|r| r["verify"]["status"] == "ok"), "{report}");
    for r in &rows {
        let reads_only = r["verify"]["reason"].as_str().is_some_and(|w| w.starts_with("reads only"));
        assert!(r["verify"]["status"] == "ok" || reads_only, "{r}");
    }
    rows
}

/// The edu C model, with edu's own 28-bit DMA mask (the client's IOVAs fit it, as a guest's
/// do behind an IOMMU: `--dma-bits` defaults to the engine's 28).
fn edu() -> Served {
    Served::model(models::edu_c().to_str().unwrap(), &[])
}

#[test]
fn the_header_and_the_rust_mirror_agree_on_the_layout() {
    // A C program built against the header prints its sizes and offsets; the Rust structs match.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <stddef.h>
#include "pcibench_model.h"
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct pcibench_device), sizeof(struct pcibench_host),
        offsetof(struct pcibench_device, bars), offsetof(struct pcibench_device, msi_vectors),
        offsetof(struct pcibench_device, config), offsetof(struct pcibench_device, name),
        offsetof(struct pcibench_host, dma_read), offsetof(struct pcibench_host, thread_declare),
        (size_t)PCIBENCH_MODEL_ABI_VERSION);
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("layout");
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../pcibench/include");
    let cc = Command::new("cc").arg("-I").arg(include).arg(&src).arg("-o").arg(&exe).output().unwrap();
    assert!(cc.status.success(), "{}", stderr(&cc));
    let printed = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let ours = [
        std::mem::size_of::<abi::Device>(),
        std::mem::size_of::<abi::Host>(),
        std::mem::offset_of!(abi::Device, bars),
        std::mem::offset_of!(abi::Device, msi_vectors),
        std::mem::offset_of!(abi::Device, config),
        std::mem::offset_of!(abi::Device, name),
        std::mem::offset_of!(abi::Host, dma_read),
        std::mem::offset_of!(abi::Host, thread_declare),
        abi::ABI_VERSION as usize,
    ];
    let ours: Vec<String> = ours.iter().map(|n| n.to_string()).collect();
    assert_eq!(printed.trim(), ours.join(" "));
}

#[test]
fn the_edu_model_is_a_pci_function_the_edu_engine_finds() {
    let s = edu();
    let out = pcibench(&["info", &s.device()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "[1234:11e8] (rev 10)",
        "BAR0: 0x0 size 1 MiB (0x100000) memory 32-bit non-prefetchable",
        "Link:          not PCI Express",
        "Capabilities:  [48] MSI",
        r#""pcibench":{"model":"edu.so""#,
        "Interrupts:    INTx x1, MSI x1",
        "Reset:         yes",
        "DMA engine:    edu DMA engine (QEMU) in BAR0",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // Registers as the spec has them: the identification, the liveness check's inversion.
    let dev = s.device();
    let peek = |off: &str| String::from_utf8(pcibench(&["peek", &dev, "0", off]).stdout).unwrap();
    assert!(peek("0x0").contains("= 0x010000ed"));
    let out = pcibench(&["poke", &dev, "0", "0x4", "0x12345678"]);
    assert!(
        !out.status.success() && stderr(&out).contains("add --allow-write"),
        "a model stands for hardware: {}",
        stderr(&out)
    );
    let out = pcibench(&["poke", &dev, "0", "0x4", "0x12345678", "--allow-write"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(peek("0x4").contains("= 0xedcba987"), "{}", peek("0x4"));
    // A width the spec does not decode reads all-ones (an Unsupported Request).
    let out = pcibench(&["peek", &dev, "0", "0x0", "--width", "16"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("= 0xffff"), "{}", stderr(&out));
    // DEVICE_RESET reaches the model: the liveness register is back to its reset value.
    pcibench::access::vfio_user::VfioUserDevice::open(&s.socket).unwrap().reset().unwrap();
    assert!(peek("0x4").contains("= 0x00000000"), "{}", peek("0x4"));
}

#[test]
fn the_edu_engine_moves_verified_data_both_ways_through_the_model() {
    let s = edu();
    let dev = s.device();
    let args = ["dma", &dev, "--size", "1K,4000", "--total", "16K", "--allow-dma", "--json"];
    let rows = verified_rows(&pcibench(&args));
    let dirs: Vec<&str> = rows.iter().map(|r| r["dir"].as_str().unwrap()).collect();
    assert_eq!(dirs, ["h2c", "h2c", "c2h", "c2h"], "{rows:?}");
    let args = ["latency", &dev, "--dma", "--size", "256", "--dma-samples", "20", "--allow-dma"];
    let out = pcibench(&[&args[..], &["--json"]].concat());
    verified_rows(&out);
}

#[test]
fn the_model_completes_by_msi_and_by_intx_as_the_client_enables_them() {
    let s = edu();
    let dev = s.device();
    for kind in ["msi", "intx"] {
        let args = ["dma", &dev, "--size", "512", "--total", "4K", "--completion", "both", "--irq-kind", kind];
        let out = pcibench(&[&args[..], &["--allow-dma", "--json"]].concat());
        let rows = verified_rows(&out);
        let by: Vec<&str> = rows.iter().map(|r| r["completion"].as_str().unwrap_or("?")).collect();
        assert!(by.contains(&"irq") && by.contains(&"poll"), "{kind}: {rows:?}");
    }
    let out = pcibench(&["dma", &dev, "--size", "512", "--completion", "irq", "--irq-kind", "msix", "--allow-dma"]);
    assert!(!out.status.success() && stderr(&out).contains("MSI-X"), "edu has no MSI-X: {}", stderr(&out));
}

/// `pcibench serve --model bad-RULE.so`: its stderr and status, the server run to its end (a
/// poke of BAR0+0x10 first where it listens, which is what the runtime rules break on).
fn serve_bad(rule: &str) -> (String, std::process::ExitStatus, Option<Output>) {
    let so = models::bad(rule);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("bad.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcibench"))
        .args(["serve", "--model", so.to_str().unwrap(), "--socket", socket.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let mut poke = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (err, status, poke);
        }
        if poke.is_none() && socket.exists() {
            let dev = format!("vfio-user:{}", socket.display());
            poke = Some(pcibench(&["poke", &dev, "0", "0x10", "0x1000", "--width", "64", "--allow-write"]));
        }
        assert!(Instant::now() < until, "pcibench serve --model bad-{rule}.so never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines pcibench printed, without the ones every server prints.
fn said(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| {
            !l.starts_with("pcibench: serving")
                && !l.contains("a client connected")
                && !l.contains("a client disconnected")
        })
        .collect()
}

#[test]
fn a_model_that_breaks_the_abi_at_load_gets_one_line_and_exit_1() {
    for (rule, want) in [
        ("no-reset", "does not export pcibench_model_reset: implement it"),
        ("abi", "was built for pcibench model ABI version 99; this pcibench speaks version 1"),
        ("describe", "bad-describe.so's describe contradicts itself: BAR0 size 0xbb8 is not a power of two"),
        ("refuse", "bad-refuse.so refused to start: no license for this model"),
    ] {
        let (err, status, poke) = serve_bad(rule);
        assert_eq!(status.code(), Some(1), "{rule}: {err}");
        assert!(poke.is_none(), "{rule}: a model that does not load leaves no socket");
        let lines = said(&err);
        assert_eq!(lines.len(), 1, "{rule}: {err}");
        assert!(lines[0].starts_with("pcibench: the model ") && lines[0].contains(want), "{rule}: {err}");
    }
    let out = pcibench(&["serve", "--model", "/nonexistent/m.so", "--socket", "/tmp/never.sock"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no model at /nonexistent/m.so: build it first"), "{}", stderr(&out));
}

#[test]
fn a_callback_the_abi_forbids_stops_the_server_with_its_line() {
    for (rule, want) in [
        ("length", "called dma_read at IOVA 0x1000 with an impossible length (1099511627776 bytes)"),
        ("thread", "called raise_irq from a thread pcibench does not know: call host->thread_declare on it first"),
    ] {
        let (err, status, poke) = serve_bad(rule);
        let poke = poke.expect("it listened");
        assert!(poke.status.success(), "{rule}: the access itself completed: {}", stderr(&poke));
        assert_eq!(status.code(), Some(1), "{rule}: {err}");
        let lines = said(&err);
        assert_eq!(lines, [format!("pcibench: the model bad-{rule}.so {want}")], "{rule}");
    }
}

#[test]
fn a_model_call_that_never_returns_is_named_and_the_server_ends() {
    let (err, status, poke) = serve_bad("hang");
    let poke = poke.expect("it listened");
    assert_eq!(poke.status.code(), Some(1), "the access fails (EIO): {}", stderr(&poke));
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(
        said(&err),
        ["pcibench: the model bad-hang.so has not returned from pcibench_model_bar_write (BAR0, offset 0x10, 8 bytes) (or its advance) in 5 s: a model call must return"]
    );
}

#[test]
fn a_crash_inside_the_model_names_its_call_and_ends_by_its_signal() {
    let (err, status, poke) = serve_bad("crash");
    assert_eq!(status.signal(), Some(SIGSEGV), "{err}");
    let lines = said(&err);
    assert_eq!(
        lines,
        ["pcibench serve: the model bad-crash.so crashed (SIGSEGV at address 0x0) in pcibench_model_bar_write (BAR0, offset 0x10, 8 bytes): the server stops; fix the model and start it again"]
    );
    // The client's access fails with the server gone, in its own one line.
    let poke = poke.expect("it listened");
    assert_eq!(poke.status.code(), Some(1));
    assert!(stderr(&poke).contains("closed the connection during REGION_WRITE"), "{}", stderr(&poke));
}

/// SIGSEGV's number on Linux (every architecture pcibench builds for).
const SIGSEGV: i32 = 11;

#[test]
fn dma_outside_the_clients_mappings_fails_the_run_with_the_fault_named() {
    let so = models::edu_c();
    // bug=iova: the model DMAs 1 MiB past the address it was given, where the client mapped nothing.
    let mut s = Served::model(&format!("{}:bug=iova", so.display()), &["--once"]);
    let out = pcibench(&["dma", &s.device(), "--size", "1K", "--allow-dma"]);
    assert_eq!(out.status.code(), Some(3), "the data did not arrive: {}", stderr(&out));
    let status = s.child.wait().unwrap();
    s.wait_log(0, "the run's end", |l| l.starts_with("pcibench: the model"));
    let err = s.log.lock().unwrap().join("\n");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("pcibench serve: IOMMU fault 1: the model's dma_"), "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with("pcibench: the model edu.so made ")
            && last.contains("DMA accesses the IOMMU refused; the first: dma_")
            && last.contains("is outside every DMA mapping the client made"),
        "{err}"
    );
}

#[test]
fn the_verilator_design_answers_pio_peek_poke_latency_and_dma_every_row_verified() {
    let Some(so) = models::edu_rtl() else { return };
    let s = Served::model(so.to_str().unwrap(), &[]);
    let dev = s.device();
    let out = pcibench(&["info", &dev]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("BAR2: 0x0 size 16 KiB") && text.contains("DMA engine:    edu"), "{text}");
    // Registers (BAR0) and RAM (BAR2) through the design's host port.
    let peek = |args: &[&str]| String::from_utf8(pcibench(&[&["peek", &dev], args].concat()).stdout).unwrap();
    assert!(peek(&["0", "0x0"]).contains("= 0x010000ed"));
    let poke = |args: &[&str]| pcibench(&[&["poke", &dev], args, &["--allow-write"]].concat());
    assert!(poke(&["0", "0x4", "0xf0f0"]).status.success());
    assert!(peek(&["0", "0x4"]).contains("= 0xffff0f0f"));
    assert!(poke(&["2", "0x100", "0x1122334455667788", "--width", "64"]).status.success());
    assert!(peek(&["2", "0x104"]).contains("= 0x11223344"));
    assert!(peek(&["2", "0x102", "--width", "16"]).contains("= 0x5566"));
    // The factorial the design computes, a multiplication a cycle: 10! = 0x375f00.
    assert!(poke(&["0", "0x8", "10"]).status.success());
    assert!(peek(&["0", "0x8"]).contains("= 0x00375f00"), "{}", peek(&["0", "0x8"]));
    // PIO skips BAR0 (the edu engine's registers) and measures BAR2, every row verified.
    let pio = ["pio", &dev, "--size", "256", "--total", "2K", "--width", "64", "--map", "uc", "--allow-write"];
    let rows = verified_rows(&pcibench(&[&pio[..], &["--json"]].concat()));
    assert!(rows.iter().all(|r| r["bar"] == 2) && rows.len() == 2, "{rows:?}");
    let dma = ["dma", &dev, "--size", "100,4095", "--total", "8K", "--allow-dma", "--json"];
    assert_eq!(verified_rows(&pcibench(&dma)).len(), 4);
    let lat = ["latency", &dev, "--bar", "2", "--samples", "100", "--dma", "--size", "512", "--dma-samples", "20"];
    verified_rows(&pcibench(&[&lat[..], &["--allow-write", "--allow-dma", "--json"]].concat()));
    let irq = ["dma", &dev, "--size", "512", "--total", "2K", "--completion", "irq", "--irq-kind", "intx"];
    verified_rows(&pcibench(&[&irq[..], &["--allow-dma", "--json"]].concat()));
}

#[test]
fn msix_from_a_model_reaches_the_client_vector_by_vector_and_its_table_is_pcibenchs() {
    use pcibench::access::{DeviceAccess, IoMode, IrqKind, IrqRequest, Mapping};
    use pcibench::mmio::Width;
    let s = Served::model(models::bad("plain").to_str().unwrap(), &[]);
    let out = pcibench(&["info", &s.device()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Interrupts:    MSI x1, MSI-X x4"), "{text}");
    let dev = pcibench::access::vfio_user::VfioUserDevice::open(&s.socket).unwrap();
    let irq = dev.interrupts(IrqRequest::only(IrqKind::MsiX, 4)).unwrap();
    assert_eq!((irq.kind(), irq.vectors()), (IrqKind::MsiX, 4));
    let bar = dev.open_bar(0, Mapping::Uc, IoMode::Mmap).unwrap();
    for v in [2u32, 0, 3] {
        bar.write(0x18, Width::B64, v as u64).unwrap();
        let fired = irq.wait(Duration::from_secs(10)).unwrap();
        assert_eq!(fired.vectors().collect::<Vec<_>>(), [v], "raise_irq({v}): {fired:?}");
        bar.write(0x20, Width::B64, v as u64).unwrap();
    }
    // The table is pcibench's, as vfio-pci's is: the client reads all-ones there, the model never
    // sees the access (its scratch registers would read back 0).
    assert_eq!(bar.read(0x800, Width::B64).unwrap(), u64::MAX);
    assert_eq!(bar.read(0x28, Width::B64).unwrap(), 0);
}

/// A client speaking the wire by hand, as QEMU does for guest RAM that is not a shared memfd:
/// DMA_MAP without a descriptor, and the server's DMA_READ and DMA_WRITE answered from its own
/// memory while it waits for a reply.
struct ByMessage {
    sock: std::os::unix::net::UnixStream,
    id: u16,
    /// The memory it mapped at `IOVA`, and the DMA commands it answered.
    mem: Vec<u8>,
    answered: usize,
}

const IOVA: u64 = 0x10_0000;

impl ByMessage {
    fn recv(&self) -> wire::Message {
        let wait = wire::Wait {
            idle: Some(Instant::now() + Duration::from_secs(30)),
            whole: Duration::from_secs(30),
            stop: &|| false,
        };
        wire::recv(&self.sock, &wait).unwrap().expect("a message")
    }

    /// A command, its reply; DMA commands of the server's that come first are answered.
    fn call(&mut self, command: u16, payload: &[u8]) -> wire::Message {
        self.id += 1;
        let h = wire::Header { id: self.id, command, size: 0, flags: 0, error: 0 };
        wire::send(&self.sock, h, payload, &[], None).unwrap();
        loop {
            let m = self.recv();
            if m.header.is_reply() {
                assert!(m.header.id == self.id && m.header.flags & wire::FLAG_ERROR == 0, "{:?}", m.header);
                return m;
            }
            // The spec's layout (minor 1): address, count, then the data.
            let layout = DmaLayout::Spec;
            let (address, count) = layout.parse(&m.payload).unwrap();
            let at = (address - IOVA) as usize..(address - IOVA + count) as usize;
            let reply = match m.header.command {
                wire::cmd::DMA_READ => layout.preamble(address, count).bytes(&self.mem[at]).0,
                wire::cmd::DMA_WRITE => {
                    self.mem[at].copy_from_slice(&m.payload[layout.data_at()..]);
                    layout.preamble(address, count).0
                }
                c => panic!("the server sent command {c}"),
            };
            wire::send(&self.sock, m.header.reply(), &reply, &[], None).unwrap();
            self.answered += 1;
        }
    }

    fn write(&mut self, region: u32, offset: u64, data: &[u8]) {
        let p = wire::Put::default().u64(offset).u32(region).u32(data.len() as u32).bytes(data).0;
        self.call(wire::cmd::REGION_WRITE, &p);
    }
}

#[test]
fn a_model_s_dma_reaches_memory_mapped_without_a_descriptor_by_message() {
    // dma_ns=0: the transfer runs on the model thread inside the command's REGION_WRITE, whose
    // reply the client waits for while the server asks it for the data.
    let s = Served::model(&format!("{}:dma_ns=0", models::edu_c().display()), &[]);
    let sock = std::os::unix::net::UnixStream::connect(&s.socket).unwrap();
    let mut c = ByMessage { sock, id: 0, mem: (0..4096).map(|i| (i * 13 + 5) as u8).collect(), answered: 0 };
    c.call(wire::cmd::VERSION, &wire::Put::default().u16(0).u16(1).bytes(b"{}\0").0);
    let map = wire::Put::default().u32(32).u32(3).u64(0).u64(IOVA).u64(4096).0;
    c.call(wire::cmd::DMA_MAP, &map);
    c.write(7, 4, &0x0006u16.to_le_bytes()); // Memory Space and Bus Master
    let sent = c.mem.clone();
    // H2C: 4000 bytes from the client's memory into edu's buffer, then C2H back over a cleared copy.
    for (src, dst, cmd) in [(IOVA, 0x40000, 1u32), (0x40000, IOVA, 3)] {
        if cmd == 3 {
            c.mem.iter_mut().for_each(|b| *b = 0);
        }
        c.write(0, 0x80, &src.to_le_bytes());
        c.write(0, 0x88, &dst.to_le_bytes());
        c.write(0, 0x90, &4000u64.to_le_bytes());
        c.write(0, 0x98, &cmd.to_le_bytes());
    }
    assert!(c.answered >= 2, "the model's DMA went by message: {} answered", c.answered);
    assert_eq!(&c.mem[..4000], &sent[..4000], "the data went out and came back by message");
}
