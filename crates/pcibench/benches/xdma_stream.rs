//! Self-timed benchmark of the XDMA AXI4-Stream driver's host side
//! (`cargo bench -p pcibench --bench xdma_stream`), issue 40: ns per 64-byte packet on one core
//! against a card that costs nothing.
//!
//! The card is a register block in this process that completes each run inside the run-bit write:
//! it walks the chain it was given (one descriptor for a 64-byte packet), writes each C2H record
//! (magic, length, EOP on the last) and the poll-mode writeback, and moves no data. What is timed
//! is then the driver alone: records zeroed, both channels started (a dozen register accesses each),
//! both writebacks polled, every record checked. Measured idle and beside two CPU hogs (threads
//! spinning on other cores, or sharing this one where the host has fewer).

use pcibench::access::{BarRegion, Mapping, Via};
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::xdma::stream::XdmaStreamEngine;
use pcibench::dma::{Direction, DmaAllocator, Engine, Transfer};
use pcibench::mmio::Width;
use pcibench::sim::host_map::HostMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::median;

const BAR_LEN: u64 = 64 << 10;

/// The costless card: identifiers of one AXI4-Stream channel pair, every other register plain
/// storage, runs completed inline. Bus addresses are process addresses (the sim allocator's).
struct NullCard {
    regs: Vec<AtomicU32>,
}

impl NullCard {
    fn new() -> NullCard {
        NullCard { regs: (0..BAR_LEN / 4).map(|_| AtomicU32::new(0)).collect() }
    }

    fn reg(&self, off: u64) -> u32 {
        self.regs[off as usize / 4].load(Ordering::Relaxed)
    }

    fn pair(&self, lo: u64) -> u64 {
        u64::from(self.reg(lo)) | u64::from(self.reg(lo + 4)) << 32
    }

    /// Walk the chain of `dir`'s channel 0, write C2H records, then the writeback.
    fn complete(&self, c2h: bool) {
        let (sg, ch) = if c2h { (0x5080, 0x1000) } else { (0x4080, 0) };
        let (mut addr, wb) = (self.pair(sg), self.pair(ch + 0x88));
        let mut n = 0u32;
        loop {
            let d = addr as *const u32;
            // SAFETY: the driver put a 32-byte descriptor at this address (bus = process address
            // with the sim allocator), and it stays allocated while the engine lives.
            let (w0, len, src, next) = unsafe {
                (
                    d.read_volatile(),
                    d.add(1).read_volatile(),
                    (d.add(2) as *const u64).read_unaligned(),
                    (d.add(6) as *const u64).read_unaligned(),
                )
            };
            n += 1;
            if c2h {
                let rec = src as *mut u32;
                // SAFETY: the C2H descriptor's source is its 32-byte writeback record.
                unsafe {
                    rec.add(1).write_volatile(len);
                    rec.write_volatile(0x52b4 << 16 | u32::from(w0 & 1 != 0));
                }
            }
            if w0 & 1 != 0 {
                break;
            }
            addr = next;
        }
        // SAFETY: the writeback word the driver programmed, 4-byte aligned.
        unsafe { AtomicU32::from_ptr(wb as *mut u32).store(n, Ordering::Release) };
    }
}

impl BarRegion for NullCard {
    fn index(&self) -> u8 {
        4
    }
    fn len(&self) -> u64 {
        BAR_LEN
    }
    fn mapping(&self) -> Mapping {
        Mapping::Uc
    }
    fn via(&self) -> Via {
        Via::Sim
    }
    fn ptr(&self) -> Option<*mut u8> {
        None
    }
    fn read(&self, offset: u64, _width: Width) -> pcibench::Result<u64> {
        let v = match offset {
            0x0000 => 0x1fc0_8006,
            0x1000 => 0x1fc1_8006,
            0x2000 => 0x1fc2_0006,
            0x3000 => 0x1fc3_0006,
            0x4000 => 0x1fc4_0006,
            0x5000 => 0x1fc5_0006,
            // Alignments: address alignment 1, length granularity 1, 64 address bits.
            0x004c | 0x104c => 0x0001_0140,
            // Status: never busy (every run is over before the control write returns).
            0x0040 | 0x0044 | 0x1040 | 0x1044 => 0,
            o => self.reg(o),
        };
        Ok(u64::from(v))
    }
    fn write(&self, offset: u64, _width: Width, value: u64) -> pcibench::Result<()> {
        self.regs[offset as usize / 4].store(value as u32, Ordering::Relaxed);
        if value & 1 != 0 && matches!(offset, 0x0004 | 0x1004) {
            self.complete(offset == 0x1004);
        }
        Ok(())
    }
    fn read_bulk(&self, _offset: u64, _buf: &mut [u8], _width: Width) -> pcibench::Result<()> {
        Err(pcibench::Error::Unsupported("registers only".into()))
    }
    fn write_bulk(&self, _offset: u64, _buf: &[u8], _width: Width) -> pcibench::Result<()> {
        Err(pcibench::Error::Unsupported("registers only".into()))
    }
}

/// Median ns per run of `size`-byte packets in `dir`, over `runs` runs in batches of 1000.
fn per_packet(size: u64, dir: Direction, runs: usize) -> f64 {
    let alloc = SimAllocator::new(HostMap::new());
    let mut e = XdmaStreamEngine::new(Box::new(NullCard::new()), &alloc, 0, 1 << 20).expect("engine");
    let buf = alloc.alloc(1 << 20).expect("buffer");
    e.prepare(&*buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len: size }).expect("prepare");
    for _ in 0..1000 {
        e.run(Duration::from_secs(1)).expect("warm-up");
    }
    let batch = 1000;
    let mut v: Vec<f64> = (0..runs / batch)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..batch {
                e.run(Duration::from_secs(1)).expect("run");
            }
            t0.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    median(&mut v)
}

fn table(label: &str) {
    println!("  {label}");
    println!("   {:>8} {:>4} {:>12} {:>14}", "packet", "dir", "ns/packet", "M packets/s");
    for size in [64u64, 4096] {
        for dir in [Direction::H2c, Direction::C2h] {
            let ns = per_packet(size, dir, 200_000);
            println!("   {size:>8} {dir:>4} {ns:>12.1} {:>14.2}", 1e3 / ns);
        }
    }
}

fn main() {
    println!("XDMA AXI4-Stream driver, host side per packet against a card that costs nothing");
    println!("(one packet per run: records zeroed, C2H and H2C started, both writebacks polled, records checked)");
    table("idle");
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    table("with two CPU hogs");
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
}
