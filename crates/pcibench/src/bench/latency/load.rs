//! DMA load for latency under load (seed 004's AXI-Lite table): an engine streams transfers on a
//! thread of its own, pinned to another CPU than the measuring thread, in one direction or both,
//! while the measuring thread times accesses; then the load stops, its throughput over its whole
//! run (which spans the measurement) is reported beside the latency, and the data it moved is
//! verified. Both directions go at once on engines that run batches (qdma: one batch holds an
//! H2C and a C2H transfer); engines that run one transfer at a time alternate them.
//!
//! A stream engine's load has no card memory behind it (bench/dma/stream.rs): H2C carries what
//! the far end's checker expects and its verdict is the load's, C2H brings what the far end
//! generates into whole receive buffers, compared in place.
//!
//! Every exit path stops the load: the measurement's end, its error or panic (a guard raises the
//! quit flag, and the scope joins the thread), Ctrl-C (the stop flag), and the load's own error
//! (the engine is stopped as in `dma::timed_run`) or panic (a guard stops the engine).

use super::super::dma::{bytes, bytes_mut, card_copy, put, timed_run};
use super::super::pattern::{verify, Pattern};
use super::super::rate::Rate;
use super::super::result::{LoadFigures, Verify};
use crate::direction::Direction;
use crate::dma::{Addressing, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::mmio::Width;
use crate::os::cpu;
use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Bytes per load transfer by default (less where the engine or its card window takes less).
pub const DEFAULT_SIZE: u64 = 1 << 20;

/// Which directions the load streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
    H2c,
    C2h,
    Both,
}

impl LoadMode {
    pub const ALL: [LoadMode; 3] = [LoadMode::H2c, LoadMode::C2h, LoadMode::Both];

    fn dirs(self) -> Vec<Direction> {
        match self {
            LoadMode::H2c => vec![Direction::H2c],
            LoadMode::C2h => vec![Direction::C2h],
            LoadMode::Both => vec![Direction::H2c, Direction::C2h],
        }
    }
}

/// What the load does.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub modes: Vec<LoadMode>,
    /// The MMIO read timed under the load.
    pub width: Width,
    /// Bytes per transfer; None: 1 MiB, or what the engine and half its card window take.
    pub size: Option<u64>,
    /// The load thread's CPU; None: one the process may use other than the measuring CPU.
    pub cpu: Option<u32>,
    /// Hold the load at this rate in each direction (None: flat out).
    pub rate: Option<Rate>,
    /// Card offset of the load's window (H2C uses its first half, C2H the second).
    pub card_addr: u64,
    pub timeout: Duration,
}

/// Raises the flag when dropped: the load stops however the measurement ends.
struct QuitOnDrop<'a>(&'a AtomicBool);

impl Drop for QuitOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Stops the engine if the load thread panics mid-transfer.
struct StopOnPanic<'a>(&'a mut dyn Engine);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.stop();
        }
    }
}

const STARTING: u8 = 0;
const RUNNING: u8 = 1;
const ENDED: u8 = 2;

/// What the load thread did.
struct Streamed {
    bytes: [u64; 2],
    transfers: u64,
    elapsed: Duration,
}

/// An engine set up to stream: its buffers, windows and CPU.
pub struct Rig<'a> {
    engine: &'a mut dyn Engine,
    src: Box<dyn DmaBuffer>,
    dst: Box<dyn DmaBuffer>,
    size: u64,
    /// Card offsets of the H2C and C2H windows.
    card: [u64; 2],
    cpu: Option<u32>,
    warning: Option<String>,
    timeout: Duration,
    pattern: Pattern,
    /// Bytes a second per direction to hold the load at (None: flat out).
    pace: Option<f64>,
}

/// The load thread's CPU: the one asked for, else the first the process may use that is not
/// the measuring thread's; with a single CPU, that one, and a warning.
fn load_cpu(asked: Option<u32>) -> (Option<u32>, Option<String>) {
    if asked.is_some() {
        return (asked, None);
    }
    let here = cpu::current_cpu();
    match cpu::process_cpus().into_iter().find(|c| Some(*c) != here) {
        Some(c) => (Some(c), None),
        None => (
            here,
            Some("one CPU only: the load thread shares it with the measuring thread, so the figures under load include time slices lost to it".into()),
        ),
    }
}

impl<'a> Rig<'a> {
    pub fn new(engine: &'a mut dyn Engine, alloc: &dyn DmaAllocator, plan: &LoadPlan) -> Result<Rig<'a>> {
        let room = engine.card_size().saturating_sub(plan.card_addr);
        let most = (room / 2).min(engine.max_transfer());
        let size = plan.size.unwrap_or(DEFAULT_SIZE.min(most));
        if size == 0 || size > most {
            return Err(Error::usage(format!(
                "--load-size {size:#x}: the load streams each direction through half of the {} engine's card window from {:#x}: 1 to {most:#x} bytes",
                engine.name(),
                plan.card_addr
            )));
        }
        let len = size.max(4096) as usize;
        // A stream engine's C2H transfer takes whole receive buffers of the host's memory.
        let c2h_len = engine.stream_end().map_or(len, |e| (e.c2h_stride(size) as usize).max(len));
        let (src, dst) = (alloc.alloc(len)?, alloc.alloc(c2h_len)?);
        let (cpu, warning) = load_cpu(plan.cpu);
        let card = [plan.card_addr, plan.card_addr + room / 2];
        let pace = plan.rate.map(|r| r.ops(size) * size as f64);
        Ok(Rig { engine, src, dst, size, card, cpu, warning, timeout: plan.timeout, pattern: Pattern::fresh(), pace })
    }

    pub fn addressing(&self) -> Addressing {
        self.src.addressing()
    }

    pub fn describe(&self) -> String {
        self.src.describe()
    }

    pub fn warning(&self) -> Option<String> {
        self.warning.clone()
    }

    /// Run `measure` while the engine streams `mode`; its result, the load's figures and
    /// whether the load's data verified.
    pub fn under<R>(
        &mut self,
        mode: LoadMode,
        stop: &AtomicBool,
        measure: impl FnOnce() -> Result<R>,
    ) -> Result<(R, LoadFigures, Verify)> {
        let dirs = mode.dirs();
        let expected = self.seed(&dirs)?;
        let concurrent = dirs.len() > 1 && self.engine.max_batch() >= dirs.len();
        let (quit, state) = (AtomicBool::new(false), AtomicU8::new(STARTING));
        let (cpu, timeout, size, card, pace) = (self.cpu, self.timeout, self.size, self.card, self.pace);
        let (src, dst): (&dyn DmaBuffer, &dyn DmaBuffer) = (&*self.src, &*self.dst);
        let work: Vec<Work> = dirs
            .iter()
            .map(|d| match d {
                Direction::H2c => {
                    Work { buf: src, t: Transfer { dir: *d, buf_offset: 0, card_addr: card[0], len: size }, queue: 0 }
                }
                Direction::C2h => {
                    Work { buf: dst, t: Transfer { dir: *d, buf_offset: 0, card_addr: card[1], len: size }, queue: 0 }
                }
            })
            .collect();
        let engine = &mut *self.engine;
        let (q, st, w) = (&quit, &state, &work);
        let (measured, streamed) = std::thread::scope(|sc| {
            let load = sc.spawn(move || stream(engine, w, concurrent, [q, stop], st, cpu, timeout, pace));
            let guard = QuitOnDrop(&quit);
            // The load must be running before the measurement starts.
            while state.load(Ordering::Acquire) == STARTING && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(100));
            }
            let measured = (state.load(Ordering::Acquire) == RUNNING).then(measure);
            drop(guard);
            let streamed =
                load.join().unwrap_or_else(|_| Err(Error::Device("the load thread panicked (engine stopped)".into())));
            (measured, streamed)
        });
        let streamed = streamed?;
        let measured =
            measured.ok_or_else(|| Error::Device("the load stopped before the measurement started".into()))??;
        let figures = LoadFigures {
            engine: self.engine.name().to_string(),
            dirs: dirs.clone(),
            concurrent,
            size,
            h2c_mbps: dirs.contains(&Direction::H2c).then(|| mbps(streamed.bytes[0], streamed.elapsed)),
            c2h_mbps: dirs.contains(&Direction::C2h).then(|| mbps(streamed.bytes[1], streamed.elapsed)),
            transfers: streamed.transfers,
            elapsed_s: streamed.elapsed.as_secs_f64(),
            cpu,
            held_mbps: pace.map(|b| b / 1e6),
        };
        Ok((measured, figures, self.check(&dirs, &expected)?))
    }

    /// Put fresh patterns in place (untimed): H2C's in the source buffer, C2H's on the card. A
    /// stream engine's far end makes and checks the data: H2C sends its bytes (its checker
    /// cleared first), C2H expects them.
    fn seed(&mut self, dirs: &[Direction]) -> Result<[Vec<u8>; 2]> {
        self.pattern = self.pattern.successor();
        let n = self.size as usize;
        if let Some(end) = self.engine.stream_end() {
            let bytes = end.transfer_bytes(self.size);
            if dirs.contains(&Direction::H2c) {
                end.clear_checker()?;
            }
            bytes_mut(&mut *self.dst).fill(0);
            put(&mut *self.src, 0, &bytes);
            return Ok([bytes.clone(), bytes]);
        }
        let expected = [self.pattern.generate(n), Pattern::with_seed(!self.pattern.seed).generate(n)];
        if dirs.contains(&Direction::C2h) {
            put(&mut *self.src, 0, &expected[1]);
            card_copy(self.engine, Direction::H2c, &*self.src, self.card[1], self.size, self.timeout)?;
            bytes_mut(&mut *self.dst)[..n].fill(0);
        }
        put(&mut *self.src, 0, &expected[0]);
        Ok(expected)
    }

    /// The host side in place (C2H), then the card side read back (H2C), as the DMA runner does;
    /// on a stream engine, H2C is the far end checker's verdict (`dma::stream::verdict`).
    fn check(&mut self, dirs: &[Direction], expected: &[Vec<u8>; 2]) -> Result<Verify> {
        let n = self.size as usize;
        if dirs.contains(&Direction::C2h) {
            if let Err(m) = verify(&expected[1], &bytes(&*self.dst)[..n], 0) {
                return Ok(Verify::Mismatch { mismatch: m });
            }
        }
        if dirs.contains(&Direction::H2c) {
            if let Some(v) = super::super::dma::stream::verdict(self.engine) {
                return v;
            }
            bytes_mut(&mut *self.dst)[..n].fill(0);
            card_copy(self.engine, Direction::C2h, &*self.dst, self.card[0], self.size, self.timeout)?;
            if let Err(m) = verify(&expected[0], &bytes(&*self.dst)[..n], self.card[0]) {
                return Ok(Verify::Mismatch { mismatch: m });
            }
        }
        Ok(Verify::Ok)
    }
}

fn mbps(bytes: u64, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if s > 0.0 {
        bytes as f64 / s / 1e6
    } else {
        0.0
    }
}

/// The load thread: pin, prepare, then run until told to quit (or Ctrl-C), counting bytes; held
/// at `pace` bytes a second per direction, if given, by waiting after each run until the bytes
/// moved so far are due (paced at transfer granularity: a 1 MiB transfer at 6 GB/s is 175 µs, so
/// over a row of thousands of them the rate is the one asked; an engine slower than it runs flat
/// out, and the figures beside the row say what it reached).
#[allow(clippy::too_many_arguments)]
fn stream(
    engine: &mut dyn Engine,
    work: &[Work],
    concurrent: bool,
    flags: [&AtomicBool; 2],
    state: &AtomicU8,
    cpu: Option<u32>,
    timeout: Duration,
    pace: Option<f64>,
) -> Result<Streamed> {
    let ended = QuitState(state);
    if let Some(c) = cpu {
        cpu::pin_current_thread(c)?;
    }
    let guard = StopOnPanic(engine);
    let engine = &mut *guard.0;
    if concurrent || work.len() == 1 {
        engine.prepare_batch(work)?;
    }
    let (mut bytes, mut transfers) = ([0u64; 2], 0u64);
    let t0 = Instant::now();
    loop {
        if concurrent || work.len() == 1 {
            timed_run(engine, timeout)?;
            count(work, &mut bytes, &mut transfers);
        } else {
            for w in work {
                engine.prepare_batch(std::slice::from_ref(w))?;
                timed_run(engine, timeout)?;
                count(std::slice::from_ref(w), &mut bytes, &mut transfers);
            }
        }
        state.store(RUNNING, Ordering::Release);
        if flags.iter().any(|f| f.load(Ordering::Acquire)) {
            break;
        }
        if let Some(rate) = pace {
            let due = t0 + Duration::from_secs_f64(bytes[0].max(bytes[1]) as f64 / rate);
            // Told to quit while waiting: no transfer ahead of its time.
            if hold_until(due, flags) {
                break;
            }
        }
    }
    drop(ended);
    // A held load owns its schedule: a row shorter than the time its bytes were due at (the end
    // of the last transfer's interval) counts that time, so one quick transfer does not read as
    // faster than the rate it was held at.
    let due = pace.map_or(Duration::ZERO, |r| Duration::from_secs_f64(bytes[0].max(bytes[1]) as f64 / r));
    Ok(Streamed { bytes, transfers, elapsed: t0.elapsed().max(due) })
}

/// Wait until `due`, or a flag (then true): sleep while more than 200 µs off (a sleep wakes some
/// 50 µs late), then spin.
fn hold_until(due: Instant, flags: [&AtomicBool; 2]) -> bool {
    loop {
        if flags.iter().any(|f| f.load(Ordering::Acquire)) {
            return true;
        }
        let now = Instant::now();
        if now >= due {
            return false;
        }
        match due - now {
            // In slices of at most 10 ms, so a quit is seen soon.
            left if left > Duration::from_micros(200) => {
                std::thread::sleep((left - Duration::from_micros(100)).min(Duration::from_millis(10)))
            }
            _ => std::hint::spin_loop(),
        }
    }
}

fn count(work: &[Work], bytes: &mut [u64; 2], transfers: &mut u64) {
    for w in work {
        bytes[(w.t.dir == Direction::C2h) as usize] += w.t.len;
        *transfers += 1;
    }
}

/// Marks the load ended (failed, panicked or done) when dropped, so the measuring thread never
/// waits for a load that is not coming.
struct QuitState<'a>(&'a AtomicU8);

impl Drop for QuitState<'_> {
    fn drop(&mut self) {
        self.0.store(ENDED, Ordering::Release);
    }
}
