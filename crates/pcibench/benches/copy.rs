//! `cargo bench --bench copy [-- WIDTH... SIZE... wb|wc|uc +SKEW]`: MB/s (10^6 bytes/s) of every copy
//! routine this CPU has beside glibc memcpy, host memory to host memory (what the sim card's
//! BARs, DMA buffers and `buffers --buffer heap` are), both directions, at 4 KiB .. 16 MiB, with
//! the best routine and its ratio to memcpy (above 1: faster than memcpy). The routines run as
//! on write-back memory (`mmio::MemType::Wb`, the default), or as they would on a WC or UC
//! mapping (`wc`: x86-64 reads with streaming loads; `uc`) to show what that choice costs on
//! write-back memory. `+16` puts the host buffer 16 bytes past a page boundary, where glibc's
//! malloc puts large blocks (what the PIO runner's host buffer was before `mmio::HostBuf`).
//!
//! Self-timed, no criterion: for each direction and size the routines take turns, one sample
//! each per round, until the time budget is spent, so a burst of load from another process
//! hits all of them alike. Before each sample a routine copies 32 MiB untimed, so it is
//! measured in its own steady state whatever the previous routine left in the caches. A
//! sample is a batch of copies lasting about 200 us (the clock's overhead is then negligible).
//! Reported: the median and the best (shortest) per-copy time of the samples, as MB/s.

use pcibench::mmio::{self, MemType, Width};
use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;
use std::time::{Duration, Instant};

const SIZES: [usize; 5] = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 16 << 20];
const SAMPLE: Duration = Duration::from_micros(200);
const BUDGET: Duration = Duration::from_millis(1500);
/// Bytes each routine copies untimed before each of its samples.
const WARM_BYTES: usize = 32 << 20;
const MIN_ROUNDS: usize = 15;
const MAX_ROUNDS: usize = 3000;

/// Page-aligned heap memory: the BAR side must be aligned to the widest granule, and a page
/// boundary keeps both sides' alignment identical from run to run.
struct Page {
    /// `skew` bytes past the allocation's page-aligned start.
    ptr: *mut u8,
    base: *mut u8,
    layout: Layout,
}

impl Page {
    fn new(len: usize, fill: u8, skew: usize) -> Page {
        let layout = Layout::from_size_align(len + skew, 4096).expect("valid layout");
        // SAFETY: len > 0 (every size in SIZES).
        let base = unsafe { alloc(layout) };
        assert!(!base.is_null(), "out of memory allocating {len} bytes");
        // SAFETY: base is valid for len + skew bytes; touching every page also faults them in.
        unsafe { base.write_bytes(fill, len + skew) };
        // SAFETY: skew is inside the allocation.
        Page { ptr: unsafe { base.add(skew) }, base, layout }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: allocated in Page::new with this layout.
        unsafe { dealloc(self.base, self.layout) };
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Write,
    Read,
}

/// Run `w` `n` times over the buffers; return the elapsed time.
fn run(w: Width, mem: MemType, dir: Dir, bar: &Page, host: &Page, len: usize, n: usize) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: both buffers are page-aligned, `len` bytes, distinct; `w` passed
        // `mmio::available` (and `reads` for reads). black_box keeps repeated identical copies
        // from being merged into one.
        unsafe {
            match dir {
                Dir::Write => mmio::copy_to_io(w, mem, black_box(bar.ptr), black_box(host.ptr), len),
                Dir::Read => mmio::copy_from_io(w, mem, black_box(host.ptr), black_box(bar.ptr), len),
            }
        }
    }
    t.elapsed()
}

struct Stats {
    median: f64,
    best: f64,
}

/// Per-copy times (seconds) of every routine in `widths` at one size, sampled round-robin.
fn measure(widths: &[Width], mem: MemType, skew: usize, dir: Dir, len: usize) -> Vec<Stats> {
    let bar = Page::new(len, 0x5a, 0);
    let host = Page::new(len, 0xc3, skew);
    // Warm up (caches, TLB, CPU frequency) and calibrate the batch size of each routine.
    let batches: Vec<usize> = widths
        .iter()
        .map(|&w| {
            run(w, mem, dir, &bar, &host, len, 3);
            let one = run(w, mem, dir, &bar, &host, len, 3) / 3;
            (SAMPLE.as_nanos() / one.as_nanos().max(1)).max(1) as usize
        })
        .collect();
    let warm = (WARM_BYTES / len).max(3);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); widths.len()];
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < MIN_ROUNDS || (start.elapsed() < BUDGET && rounds < MAX_ROUNDS) {
        for (i, &w) in widths.iter().enumerate() {
            // Non-temporal stores evict the buffers; after them a single untimed copy of
            // 1-16 MiB left memcpy up to 25% below its steady state, hence `warm` copies.
            run(w, mem, dir, &bar, &host, len, warm);
            let t = run(w, mem, dir, &bar, &host, len, batches[i]);
            samples[i].push(t.as_secs_f64() / batches[i] as f64);
        }
        rounds += 1;
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            Stats { median: s[s.len() / 2], best: s[0] }
        })
        .collect()
}

fn size_name(len: usize) -> String {
    if len >= 1 << 20 {
        format!("{} MiB", len >> 20)
    } else {
        format!("{} KiB", len >> 10)
    }
}

fn mbps(len: usize, secs: f64) -> f64 {
    len as f64 / secs / 1e6
}

fn main() {
    // Optional filters: `cargo bench --bench copy -- 512 nt512 64K 16M wc` (widths by their
    // --width names, sizes with a suffix, the memory type the routines run as); memcpy is always
    // measured. Flags (cargo's `--bench`) are ignored.
    let mut only_widths = Vec::new();
    let mut sizes = Vec::new();
    let mut mem = MemType::Wb;
    let mut skew = 0;
    for arg in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        if let Ok(w) = arg.parse::<Width>() {
            only_widths.push(w);
        } else if let Some(m) = [MemType::Wb, MemType::Wc, MemType::Uc].into_iter().find(|m| m.name() == arg) {
            mem = m;
        } else if let Some(n) = arg.strip_prefix('+').and_then(|n| n.parse().ok()) {
            skew = n;
        } else if let Ok(n) = pcibench::units::parse_size(&arg) {
            // Whole 64-byte granules, at least one, so every width can run.
            sizes.push((n as usize / 64).max(1) * 64);
        } else {
            eprintln!("ignoring argument '{arg}': neither a width, a size such as 64K, nor wb/wc/uc");
        }
    }
    if sizes.is_empty() {
        sizes = SIZES.to_vec();
    }
    let mut widths = vec![Width::Memcpy];
    for w in Width::ALL {
        if w == Width::Memcpy || !(only_widths.is_empty() || only_widths.contains(&w)) {
            continue;
        }
        match mmio::available(w) {
            Ok(()) => widths.push(w),
            Err(e) => println!("skipping {w}: {e}"),
        }
    }
    // Scalar routines are there to measure a width, not to race memcpy: the ratio is the best
    // of the rest.
    let racing = |w: &Width| !w.is_scalar() && *w != Width::Memcpy;

    for dir in [Dir::Write, Dir::Read] {
        let ws: Vec<Width> = widths.iter().copied().filter(|w| dir == Dir::Write || w.reads()).collect();
        let results: Vec<Vec<Stats>> = sizes.iter().map(|&len| measure(&ws, mem, skew, dir, len)).collect();
        let title = match dir {
            Dir::Write => "writes: host buffer -> mapping (copy_to_io)",
            Dir::Read => "reads: mapping -> host buffer (copy_from_io)",
        };
        for (label, pick) in [("median", 0), ("best", 1)] {
            println!(
                "\n{title}, MB/s, {label} of the samples; RAM-backed mapping, routines as on {mem} memory ({} for vector reads), {}",
                mem.vector_loads(),
                if skew == 0 { "page-aligned buffers".to_string() } else { format!("host buffer {skew} bytes past a page") }
            );
            print!("{:>8}", "size");
            for w in &ws {
                print!("{:>10}", w.to_string());
            }
            println!("{:>10}{:>13}", "best", "best/memcpy");
            for (len, stats) in sizes.iter().zip(&results) {
                let secs = |s: &Stats| if pick == 0 { s.median } else { s.best };
                print!("{:>8}", size_name(*len));
                for s in stats {
                    print!("{:>10.0}", mbps(*len, secs(s)));
                }
                let memcpy = secs(&stats[0]);
                let best =
                    ws.iter().zip(stats).filter(|(w, _)| racing(w)).min_by(|a, b| secs(a.1).total_cmp(&secs(b.1)));
                match best {
                    Some((w, s)) => println!("{:>10}{:>13.3}", w.to_string(), memcpy / secs(s)),
                    None => println!(),
                }
            }
        }
    }
}
