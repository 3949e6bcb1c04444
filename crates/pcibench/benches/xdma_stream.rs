//! Self-timed benchmark of the XDMA AXI4-Stream driver's host side
//! (`cargo bench -p pcibench --bench xdma_stream`), issue 40: ns per 64-byte packet on one core
//! against a card that costs nothing.
//!
//! The card is a register block in this process that completes each run inside the run-bit write:
//! it writes each C2H record (magic, length, EOP on each packet's last buffer) and the poll-mode
//! writeback, and moves no data. It walks a chain once and keeps what it found while the chain's
//! address stays the same (the bench never rewrites descriptors between runs), since a real card
//! reads descriptors by DMA, not with the host's CPU. What is timed is then the driver and the
//! card's record writes (stores the host's caches see, as a card's DMA writes are): records
//! zeroed, both channels started (about twenty register accesses a run), both writebacks polled,
//! every record checked. One packet per run (the old driver's shape) and a batch of packets per run
//! (1024 of 64 bytes, as the runner's sequential runs hold). Measured idle and beside two CPU hogs (threads spinning on
//! other cores, or sharing this one where the host has fewer).

use pcibench::access::{BarRegion, Mapping, Via};
use pcibench::dma::buffers::sim::SimAllocator;
use pcibench::dma::engines::xdma::stream::XdmaStreamEngine;
use pcibench::dma::{Direction, DmaAllocator, Engine, Transfer, Work};
use pcibench::mmio::Width;
use pcibench::sim::host_map::HostMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
use common::median;

const BAR_LEN: u64 = 64 << 10;

/// The costless card: identifiers of one AXI4-Stream channel pair, every other register plain
/// storage, runs completed inline. Bus addresses are process addresses (the sim allocator's).
struct NullCard {
    regs: Vec<AtomicU32>,
    /// Per channel (H2C, C2H): the chain last walked (first descriptor's address), its
    /// descriptor count and C2H records (address, status, length).
    walked: [Mutex<Walk>; 2],
}

#[derive(Default)]
struct Walk {
    first: u64,
    count: u32,
    records: Vec<(u64, u32, u32)>,
}

impl NullCard {
    fn new() -> NullCard {
        NullCard { regs: (0..BAR_LEN / 4).map(|_| AtomicU32::new(0)).collect(), walked: Default::default() }
    }

    fn reg(&self, off: u64) -> u32 {
        self.regs[off as usize / 4].load(Ordering::Relaxed)
    }

    fn pair(&self, lo: u64) -> u64 {
        u64::from(self.reg(lo)) | u64::from(self.reg(lo + 4)) << 32
    }

    /// Complete the chain of channel 0 (`c2h` or H2C): its records, then the writeback.
    fn complete(&self, c2h: bool) {
        let (sg, ch) = if c2h { (0x5080, 0x1000) } else { (0x4080, 0) };
        let (first, wb) = (self.pair(sg), self.pair(ch + 0x88));
        let mut walk = self.walked[usize::from(c2h)].lock().unwrap_or_else(|e| e.into_inner());
        if walk.first != first || walk.count == 0 {
            *walk = Self::walk(first, c2h);
        }
        for &(rec, status, len) in &walk.records {
            let rec = rec as *mut u32;
            // SAFETY: the C2H descriptor's source is its 32-byte writeback record, allocated for
            // as long as the engine lives.
            unsafe {
                rec.add(1).write_volatile(len);
                rec.write_volatile(status);
            }
        }
        // SAFETY: the writeback word the driver programmed, 4-byte aligned.
        unsafe { AtomicU32::from_ptr(wb as *mut u32).store(walk.count, Ordering::Release) };
    }

    /// Follow a chain from `addr` to its STOP descriptor: the count and (C2H) each record's
    /// address and contents (magic, EOP where the packet ends: here every packet fits a buffer,
    /// so each buffer holds one packet).
    fn walk(mut addr: u64, c2h: bool) -> Walk {
        let mut w = Walk { first: addr, ..Walk::default() };
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
            w.count += 1;
            if c2h {
                w.records.push((src, 0x52b4 << 16 | 1, len));
            }
            if w0 & 1 != 0 {
                return w;
            }
            addr = next;
        }
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

/// Median ns per packet of `size`-byte packets in `dir`, `batch` packets a run, over about
/// `packets` packets timed in groups of about 100 000.
fn per_packet(size: u64, dir: Direction, batch: usize, packets: usize) -> f64 {
    let alloc = SimAllocator::new(HostMap::new());
    let bytes = size * batch as u64;
    let mut e = XdmaStreamEngine::new(Box::new(NullCard::new()), &alloc, 0, bytes).expect("engine");
    let buf = alloc.alloc(bytes as usize).expect("buffer");
    let work: Vec<Work> = (0..batch as u64)
        .map(|i| Work {
            buf: &*buf,
            t: Transfer { dir, buf_offset: i * size, card_addr: i * size, len: size },
            queue: 0,
        })
        .collect();
    e.prepare_batch(&work).expect("prepare");
    let runs = (100_000 / batch).max(10);
    for _ in 0..runs {
        e.run(Duration::from_secs(1)).expect("warm-up");
    }
    let mut v: Vec<f64> = (0..(packets / (runs * batch)).max(5))
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..runs {
                e.run(Duration::from_secs(1)).expect("run");
            }
            t0.elapsed().as_nanos() as f64 / (runs * batch) as f64
        })
        .collect();
    median(&mut v)
}

fn table(label: &str) {
    println!("  {label}");
    println!("   {:>8} {:>4} {:>6} {:>12} {:>14}", "packet", "dir", "batch", "ns/packet", "M packets/s");
    for (size, batch) in [(64u64, 1usize), (64, 1024), (4096, 1), (4096, 256)] {
        for dir in [Direction::H2c, Direction::C2h] {
            let ns = per_packet(size, dir, batch, 2_000_000);
            println!("   {size:>8} {dir:>4} {batch:>6} {ns:>12.1} {:>14.2}", 1e3 / ns);
        }
    }
}

fn main() {
    println!("XDMA AXI4-Stream driver, host side per packet against a card that costs nothing");
    println!(
        "(a run: records zeroed, C2H and H2C started once, both writebacks polled, every packet's records checked)"
    );
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
