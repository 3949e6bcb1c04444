//! The DMA runner against a mock engine (a memcpy "card"): statistics, verification, bus
//! mastering restored, timeouts stop the engine, Ctrl-C keeps the samples so far.

use super::*;
use crate::access::{BarRegion, IoMode, Mapping, Via};
use crate::bench::dma::layout::Access;
use crate::bench::sample::clock::{Clock, FakeClock, MonotonicClock};
use crate::dma::Addressing;
use crate::dma::{EngineCounters, Segment, Transfer, Work};
use crate::pci::config::COMMAND;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

struct HeapBuf {
    mem: Vec<u8>,
    seg: [Segment; 1],
}

impl DmaBuffer for HeapBuf {
    fn as_ptr(&self) -> *mut u8 {
        self.mem.as_ptr() as *mut u8
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn segments(&self) -> &[Segment] {
        &self.seg
    }
    fn addressing(&self) -> Addressing {
        Addressing::Sim
    }
    fn describe(&self) -> String {
        "test heap".into()
    }
}

struct HeapAlloc;

impl DmaAllocator for HeapAlloc {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let mem = vec![0u8; len];
        let bus = mem.as_ptr() as u64;
        Ok(Box::new(HeapBuf { mem, seg: [Segment { offset: 0, bus, len: len as u64 }] }))
    }
    fn dma_bits(&self) -> u32 {
        64
    }
}

#[derive(Default)]
struct MockEngine {
    card: Vec<u8>,
    jobs: Vec<(usize, Transfer)>,
    /// Queues, for an engine that takes batches; 0: one transfer at a time.
    queues: u16,
    corrupt: bool,
    hang: bool,
    stops: u32,
    /// Raise the stop flag after this many runs.
    interrupt_after: Option<(u32, &'static AtomicBool)>,
    /// Panic in this run (a bug anywhere in the measuring path).
    panic_at_run: Option<u32>,
    runs: u32,
    /// Counters like XDMA's auto mode over the clock's time: the last run only, the engine
    /// running half of each run's wall time at 250 MHz, 8-byte beats; (clock, start, runs then).
    perf: Option<(&'static FakeClock, u64, u32)>,
    /// The counts saturate.
    maxed: bool,
    /// Called at this run (1: the first, the untimed write of the card's data or guards).
    at_run: Option<(u32, Box<dyn FnMut() + Send>)>,
}

impl Engine for MockEngine {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn card_size(&self) -> u64 {
        self.card.len() as u64
    }
    fn max_transfer(&self) -> u64 {
        self.card.len() as u64
    }
    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        self.jobs = vec![(buf.bus_range(t.buf_offset, t.len).unwrap() as usize, *t)];
        Ok(())
    }
    fn queues(&self) -> u16 {
        self.queues.max(1)
    }
    fn max_batch(&self) -> usize {
        if self.queues > 0 {
            1 << 20
        } else {
            1
        }
    }
    fn prepare_batch(&mut self, work: &[Work]) -> Result<()> {
        if self.queues == 0 && work.len() != 1 {
            return Err(Error::Unsupported("one at a time".into()));
        }
        assert!(work.iter().all(|w| w.queue < self.queues()), "queue within the engine's");
        self.jobs = work.iter().map(|w| (w.buf.bus_range(w.t.buf_offset, w.t.len).unwrap() as usize, w.t)).collect();
        Ok(())
    }
    fn run(&mut self, _timeout: Duration) -> Result<()> {
        self.runs += 1;
        if let Some((n, f)) = &mut self.at_run {
            if *n == self.runs {
                f();
            }
        }
        if self.panic_at_run == Some(self.runs) {
            panic!("mock engine: a bug mid-run");
        }
        if let Some((n, flag)) = self.interrupt_after {
            if self.runs >= n {
                flag.store(true, Ordering::Relaxed);
            }
        }
        if self.hang {
            return Err(Error::Device("mock engine timed out after 1 ms".into()));
        }
        for &(host, t) in &self.jobs {
            let card = &mut self.card[t.card_addr as usize..(t.card_addr + t.len) as usize];
            // SAFETY: `host` is the bus (= virtual) address of a live HeapBuf of at least t.len bytes.
            unsafe {
                match t.dir {
                    Direction::H2c => std::ptr::copy_nonoverlapping(host as *const u8, card.as_mut_ptr(), card.len()),
                    Direction::C2h => std::ptr::copy_nonoverlapping(card.as_ptr(), host as *mut u8, card.len()),
                }
            }
        }
        if let Some(&(host, _)) = self.jobs.iter().find(|(_, t)| self.corrupt && t.dir == Direction::C2h) {
            // SAFETY: as above; offset 5 < t.len in these tests.
            unsafe { *(host as *mut u8).add(5) ^= 1 };
        }
        Ok(())
    }
    fn stop(&mut self) -> Result<String> {
        self.stops += 1;
        Ok("idle".into())
    }
    fn has_counters(&self) -> bool {
        self.perf.is_some()
    }
    fn counters_start(&mut self) -> Result<()> {
        if let Some((clock, t0, runs)) = &mut self.perf {
            (*t0, *runs) = (clock.now_ns(), self.runs);
        }
        Ok(())
    }
    fn counters_read(&mut self) -> Result<Vec<EngineCounters>> {
        let Some((clock, t0, runs)) = self.perf else { return Ok(Vec::new()) };
        let per_run_ns = (clock.now_ns() - t0) as f64 / (self.runs - runs) as f64;
        let bytes = self.jobs.iter().map(|(_, t)| t.len).sum::<u64>();
        Ok(self
            .jobs
            .iter()
            .map(|(_, t)| EngineCounters {
                beat_bytes: Some(8),
                clock_hz: Some(250e6),
                last_run: true,
                maxed: self.maxed,
                ..EngineCounters::counts(t.dir, (per_run_ns / 2.0 * 0.25) as u64, bytes / 8)
            })
            .collect())
    }
}

struct CfgDev {
    command: Mutex<u16>,
}

impl DeviceAccess for CfgDev {
    fn via(&self) -> Via {
        Via::Sim
    }
    fn open_bar(&self, _i: u8, _m: Mapping, _io: IoMode) -> Result<Box<dyn BarRegion>> {
        Err(Error::Unsupported("no BARs".into()))
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        assert_eq!(offset, COMMAND as u64);
        buf.copy_from_slice(&self.command.lock().unwrap().to_le_bytes());
        Ok(())
    }
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        assert_eq!(offset, COMMAND as u64);
        *self.command.lock().unwrap() = u16::from_le_bytes([data[0], data[1]]);
        Ok(())
    }
}

fn plan() -> DmaPlan {
    // One transfer at a time, sequential, both directions in turn: the plan of engines without queues.
    DmaPlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        bidir: false,
        sizes: vec![],
        total: 1 << 20,
        budget_ns: None,
        card_addr: 0,
        // A stall bound, not a time limit: progress extends every wait, so only a hung model spends
        // it (a loaded 1-CPU host or qemu-user can starve a model thread for a second).
        timeout: Duration::from_secs(20),
        queues: vec![],
        access: crate::bench::dma::layout::Access::Sequential,
        completions: Vec::new(),
    }
}

/// Run `p` with the real clock; returns the report and the bytes reported as moved.
fn go(dev: &CfgDev, e: &mut MockEngine, p: &DmaPlan, stop: &AtomicBool) -> Result<(Report, u64)> {
    go_with(dev, e, p, stop, &MonotonicClock)
}

fn go_with(
    dev: &CfgDev,
    e: &mut MockEngine,
    p: &DmaPlan,
    stop: &AtomicBool,
    clock: &dyn Clock,
) -> Result<(Report, u64)> {
    let mut moved = 0;
    let mut progress = |n| moved += n;
    let mut s = Sampling::new(clock, stop, &mut progress, None);
    let r = run(setup(dev, e), p, &mut s)?;
    Ok((r, moved))
}

fn setup<'a>(dev: &'a CfgDev, e: &'a mut MockEngine) -> DmaSetup<'a> {
    static DEVICE: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    let device = DEVICE
        .get_or_init(|| Device::for_test("test", true, Some(Link { gen: 2, width: 4, mps: 256, mrrs: 512 }), &[]));
    DmaSetup { dev, device, engine: e, alloc: &HeapAlloc, irq: None }
}

#[test]
fn both_directions_verified_and_bus_master_restored() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 0x10000], ..Default::default() };
    let stop = AtomicBool::new(false);
    // 10 ns per clock reading, 2 µs per engine run plus 2000 bytes per µs: one 64 KiB transfer
    // takes 34768 ns, one per sample, 16 samples for 1 MiB.
    let clock = FakeClock::new(10, 2000, 2000);
    let (r, moved) = go_with(&dev, &mut e, &plan(), &stop, &clock).unwrap();
    assert_eq!(r.results.len(), 2);
    let mut timed = 0;
    for x in &r.results {
        assert_eq!(x.size, 0x10000);
        assert_eq!(x.verify, Some(Verify::Ok));
        let st = x.stats.as_ref().unwrap();
        assert_eq!((st.transfers, st.samples, st.batch), (16, 16, 1), "{st:?}");
        assert!((st.median_mbps - 65536.0 / 34778e-9 / 1e6).abs() < 1e-6, "{st:?}");
        timed += st.bytes;
    }
    assert_eq!(moved, timed);
    // h2c is a read by the card: its limit is the model's read limit.
    let l = Link { gen: 2, width: 4, mps: 256, mrrs: 512 };
    assert!((r.results[0].limit_mbps.unwrap() - l.read_bps(0x10000) / 1e6).abs() < 1e-6);
    assert_eq!(*dev.command.lock().unwrap(), 0x0002, "bus master restored");
    assert!(!r.interrupted);
}

/// The engine's counters say it ran half of each run's wall time: the row says it was busy 50%,
/// idle half the time because the host did not keep it fed; its own rate is twice the host's.
#[test]
fn an_engine_busy_half_the_wall_time_is_reported_as_such() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let clock: &'static FakeClock = Box::leak(Box::new(FakeClock::new(10, 2000, 2000)));
    let mut e = MockEngine { card: vec![0; 0x10000], perf: Some((clock, 0, 0)), ..Default::default() };
    let stop = AtomicBool::new(false);
    let (r, _) = go_with(&dev, &mut e, &plan(), &stop, clock).unwrap();
    assert_eq!(r.engine_counters, None, "an engine with counters needs no word about having none");
    for x in &r.results {
        let f = x.engine.as_ref().expect("the engine's own figures");
        let busy = f.busy_pct.unwrap();
        assert!((busy - 50.0).abs() < 0.1, "{busy}");
        assert_eq!(f.host_bytes, 0x10000, "the last run's bytes");
        let host = x.stats.as_ref().unwrap().mean_mbps;
        assert!((f.engine_mbps.unwrap() / host - 2.0).abs() < 0.01, "{f:?} against {host}");
        let words = crate::report::counters::gap(f).join(" ");
        assert!(words.contains("The engine was idle 50% of the time: the host did not post descriptors fast enough"));
        assert!(!crate::report::notes::flags(x).contains("!maxed"));
    }
    e.maxed = true;
    let (r, _) = go_with(&dev, &mut e, &plan(), &stop, clock).unwrap();
    for x in &r.results {
        assert!(x.engine.as_ref().unwrap().maxed);
        assert!(crate::report::notes::flags(x).ends_with(" !maxed"));
        assert!(crate::report::counters::gap(x.engine.as_ref().unwrap())[0].starts_with("MAXED: a counter saturated"));
    }
}

/// An engine without counters is said to have none, once per report.
#[test]
fn an_engine_without_counters_is_said_to_have_none() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 0x10000], ..Default::default() };
    let (r, _) = go_with(&dev, &mut e, &plan(), &AtomicBool::new(false), &FakeClock::new(10, 2000, 2000)).unwrap();
    assert_eq!(r.engine_counters, Some(false));
    assert!(r.results.iter().all(|x| x.engine.is_none()));
    let table = crate::report::exporter(crate::report::Format::Table, Default::default()).report(&r).unwrap();
    let said = table.matches("the mock engine has no performance counters").count();
    assert_eq!(said, 1, "{table}");
}

#[test]
fn corruption_is_named() {
    let dev = CfgDev { command: Mutex::new(0x0006) };
    let mut e = MockEngine { card: vec![0; 4096], corrupt: true, ..Default::default() };
    let p = DmaPlan { dirs: vec![Direction::C2h], sizes: vec![64], total: 256, ..plan() };
    let (r, _) = go(&dev, &mut e, &p, &AtomicBool::new(false)).unwrap();
    assert_eq!(r.results[0].mismatch().unwrap().offset, 5);
}

#[test]
fn timeout_stops_the_engine_and_reports() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 4096], hang: true, ..Default::default() };
    let err = go(&dev, &mut e, &plan(), &AtomicBool::new(false)).unwrap_err().to_string();
    assert!(err.contains("timed out") && err.contains("engine stopped; status: idle"), "{err}");
    assert_eq!(e.stops, 1);
    assert_eq!(*dev.command.lock().unwrap(), 0x0002, "bus master restored after an error");
}

#[test]
fn a_panic_mid_run_stops_the_engine_and_restores_bus_master() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 4096], panic_at_run: Some(5), ..Default::default() };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = go(&dev, &mut e, &plan(), &AtomicBool::new(false));
    }));
    assert!(r.is_err(), "the panic goes on up");
    assert_eq!(e.stops, 1, "the engine was stopped before the buffers were freed");
    assert_eq!(*dev.command.lock().unwrap(), 0x0002, "bus master restored");
}

#[test]
fn ctrl_c_keeps_samples_and_stops_engine() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 4096], interrupt_after: Some((20_000, &STOP)), ..Default::default() };
    let p = DmaPlan { dirs: vec![Direction::H2c], total: 4096 << 20, ..plan() };
    let (r, _) = go(&dev, &mut e, &p, &STOP).unwrap();
    assert!(r.interrupted);
    assert_eq!(e.stops, 1);
    let st = r.results[0].stats.as_ref().unwrap();
    assert!(st.samples >= 1 && st.transfers < 1 << 20, "{st:?}");
}

#[test]
fn sizes_outside_card_memory_are_refused() {
    let dev = CfgDev { command: Mutex::new(0) };
    let mut e = MockEngine { card: vec![0; 4096], ..Default::default() };
    let p = DmaPlan { sizes: vec![8192], ..plan() };
    assert!(go(&dev, &mut e, &p, &AtomicBool::new(false)).is_err());
    let p = DmaPlan { card_addr: 4096, ..plan() };
    let e2 = go(&dev, &mut e, &p, &AtomicBool::new(false)).unwrap_err();
    assert!(e2.to_string().contains("--card-addr"));
    assert_eq!(*dev.command.lock().unwrap(), 0, "no bus mastering when nothing ran");
}

#[test]
fn queued_runs_verify_sequential_random_and_both_at_once() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 1 << 20], queues: 8, ..Default::default() };
    let clock = FakeClock::new(10, 200, 4000);
    for access in [Access::Sequential, Access::Random { window: 4 << 20 }] {
        let p = DmaPlan { bidir: true, sizes: vec![64, 4096], queues: vec![1, 8], total: 1 << 20, access, ..plan() };
        let (r, _) = go_with(&dev, &mut e, &p, &AtomicBool::new(false), &clock).unwrap();
        // (h2c, c2h, both at once: two rows) × 2 sizes × 2 queue counts.
        assert_eq!(r.results.len(), 16, "{access:?}");
        for x in &r.results {
            assert_eq!(x.verify, Some(Verify::Ok), "{access:?} {} {} q{:?}", x.dir, x.size, x.queues);
            assert!(x.queues.is_some());
            assert_eq!(x.window, if let Access::Random { window } = access { Some(window) } else { None });
            let in_flight = x.notes.iter().find_map(|n| match n {
                Note::InFlight { transfers, queues } => Some((*transfers, *queues)),
                _ => None,
            });
            let (n, q) = in_flight.expect("several transfers per run");
            assert_eq!((n % q as u64, Some(q)), (0, x.queues));
        }
        assert_eq!(r.results.iter().filter(|x| x.concurrent).count(), 8);
        // Both-at-once rows share their samples: each direction's bytes over the same times.
        let both: Vec<&Row> = r.results.iter().filter(|x| x.concurrent).take(2).collect();
        assert_eq!((both[0].dir, both[1].dir), (Direction::H2c, Direction::C2h));
        assert_eq!(both[0].stats.as_ref().unwrap().samples, both[1].stats.as_ref().unwrap().samples);
    }
    assert_eq!(e.stops, 0);
}

#[test]
fn random_corruption_is_named_at_its_host_offset() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 1 << 20], queues: 4, corrupt: true, ..Default::default() };
    let p = DmaPlan {
        dirs: vec![Direction::C2h],
        sizes: vec![256],
        queues: vec![4],
        total: 1 << 20,
        access: Access::Random { window: 64 << 20 },
        ..plan()
    };
    let (r, _) = go(&dev, &mut e, &p, &AtomicBool::new(false)).unwrap();
    let m = r.results[0].mismatch().expect("the flipped byte is found");
    assert_eq!((m.offset % 256, m.count), (5, 1), "{m}");
    assert!(m.offset < 64 << 20);
    assert_eq!(m.offset, e.jobs[0].1.buf_offset + 5, "byte 5 of the first packet, at its random host offset");
}

#[test]
fn queue_counts_and_batch_only_modes_are_refused_up_front() {
    let dev = CfgDev { command: Mutex::new(0) };
    let stop = AtomicBool::new(false);
    let cases: [(DmaPlan, &str); 3] = [
        (DmaPlan { queues: vec![2], ..plan() }, "--queues 2 is more than the 1 queue the mock engine was opened with"),
        (
            DmaPlan { access: Access::Random { window: 1 << 20 }, ..plan() },
            "--pattern random needs an engine that runs batches",
        ),
        (DmaPlan { bidir: true, ..plan() }, "--dir bidir needs an engine that runs both directions in one batch"),
    ];
    for (p, want) in cases {
        let mut e = MockEngine { card: vec![0; 4096], ..Default::default() };
        let err = go(&dev, &mut e, &p, &stop).unwrap_err().to_string();
        assert_eq!(err, want.to_string() + &err[want.len()..], "{err}");
        assert!(!err.contains('\n') && e.runs == 0);
    }
    assert_eq!(*dev.command.lock().unwrap(), 0, "no bus mastering when nothing ran");
    // Transfers that do not fit one per queue are skipped rows, not errors.
    let mut e = MockEngine { card: vec![0; 8192], queues: 4, ..Default::default() };
    let p = DmaPlan { dirs: vec![Direction::H2c], sizes: vec![4096], queues: vec![1, 4], total: 8192, ..plan() };
    let (r, _) = go(&dev, &mut e, &p, &stop).unwrap();
    assert_eq!(r.results[0].verify, Some(Verify::Ok));
    assert!(r.results[1].skipped(), "4 x 4 KiB do not fit 8 KiB");
}

#[test]
fn the_random_window_follows_available_memory() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("proc")).unwrap();
    std::fs::write(t.path().join("proc/meminfo"), "MemTotal: 2097152 kB\nMemAvailable: 1048576 kB\n").unwrap();
    let host = Host::with_root(t.path());
    let (w, note) = random_window(&host, None).unwrap();
    assert_eq!(w, 256 << 20, "a quarter of 1 GiB available");
    assert!(note.unwrap().contains("1 GiB would take more than half of the 1.0 GiB available"));
    let e = random_window(&host, Some(1 << 30)).unwrap_err().to_string();
    assert_eq!(
        e,
        "--window 1 GiB needs 2 GiB of host buffers (a source and a destination window), more than the 1.0 GiB this host \
         has available (MemAvailable): use --window 512 MiB or less"
    );
    assert_eq!(random_window(&host, Some(128 << 20)).unwrap(), (128 << 20, None));
    assert!(random_window(&host, Some(0)).is_err());
    let none = Host::with_root("/nonexistent");
    assert_eq!(random_window(&none, None).unwrap(), (DEFAULT_WINDOW, None), "unknown memory: the default");
}

#[test]
fn sim_qdma_end_to_end_over_queues_both_ways_and_at_random() {
    use crate::bench::test_rig::{sampling, SimRig};
    let opts = crate::dma::engines::EngineOptions { queues: Some(8), ..Default::default() };
    let mut rig = SimRig::open("sim-qdma", &opts);
    assert_eq!(rig.engine.name(), "qdma");
    for access in [Access::Sequential, Access::Random { window: 8 << 20 }] {
        let p = DmaPlan { bidir: true, sizes: vec![64, 4096], queues: vec![1, 8], total: 1 << 20, access, ..plan() };
        let stop = AtomicBool::new(false);
        let clock = MonotonicClock;
        let mut progress = |_| {};
        let mut s = sampling(&clock, &stop, &mut progress);
        let setup =
            DmaSetup { dev: &rig.dev, device: &rig.device, engine: rig.engine.as_mut(), alloc: &rig.alloc, irq: None };
        let r = run(setup, &p, &mut s).unwrap();
        assert_eq!(r.results.len(), 16);
        for x in &r.results {
            assert_eq!(x.verify, Some(Verify::Ok), "{access:?} {} {} q{:?}: {:?}", x.dir, x.size, x.queues, r.warnings);
            let e = x.engine.as_ref().expect("the QDMA engine's own figures");
            assert!(e.beats > 0 && !e.last_run && e.busy_pct.is_none() && e.engine_mbps.is_none());
            assert_eq!((e.beat_bytes, e.clock_mhz), (Some(64), Some(1000.0)));
        }
    }
}

/// Issue 52: on the sim card the engine's counters summarise the samples the host's figures do,
/// so no row's engine rate is below its host rate, its busy share is the host's rate over the
/// engine's, the engine's rate is the model's datapath, and each row's limit is the model's.
#[test]
fn the_sim_engines_figures_agree_with_the_hosts_over_the_same_samples() {
    use crate::bench::test_rig::{sampling, SimRig};
    let mut rig = SimRig::open("sim", &Default::default());
    let p = DmaPlan { sizes: vec![4096, 64 << 10, 1 << 20], total: 8 << 20, ..plan() };
    let stop = AtomicBool::new(false);
    let clock = MonotonicClock;
    let mut progress = |_| {};
    let mut s = sampling(&clock, &stop, &mut progress);
    let setup =
        DmaSetup { dev: &rig.dev, device: &rig.device, engine: rig.engine.as_mut(), alloc: &rig.alloc, irq: None };
    let r = run(setup, &p, &mut s).unwrap();
    assert_eq!(r.results.len(), 6);
    assert!(r.limit_note.as_deref().is_some_and(|n| n.starts_with("sim card model: 2,000 MB/s per direction")));
    for x in &r.results {
        let e = x.engine.as_ref().expect("the XDMA engine's own figures");
        let host = x.stats.as_ref().unwrap().median_mbps;
        let engine = e.engine_mbps.unwrap();
        // The model's rate: a beat a cycle, less its descriptor's beats. The shaker holds single
        // runs' completions back by design (docs/determinism.md), and XDMA's counters keep the
        // sample's last run only: that run may then be slower than the sample's average run, which
        // the host's figure is, so the three hold only where completions come when due.
        let model = 2000.0 * x.size as f64 / (x.size + 32) as f64;
        if crate::sim::shake::seed().is_none() {
            assert_eq!(e.contradiction(), None, "{} {}: {e:?}", x.dir, x.size);
            assert!(engine >= host * 0.99, "{} {}: engine {engine} below the host's median {host}", x.dir, x.size);
            assert!((engine / model - 1.0).abs() < 0.01, "{} {}: engine {engine}, model {model}", x.dir, x.size);
        }
        assert!((x.limit_mbps.unwrap() / model - 1.0).abs() < 1e-9, "the limit column is the model's");
        assert!(host <= x.limit_mbps.unwrap() * 1.01, "{} {}: no host figure above the model's", x.dir, x.size);
    }
}

/// Issue 43: the whole run is estimated by what each configuration costs. A probe pass takes each
/// to the end of its calibration; on the fake clock (10 ns a reading, 2 µs a run, 2000 bytes a
/// µs) a 64 B transfer and its reading take 2042 ns and a 64 KiB one 34778 ns, so 1 MiB in each,
/// both ways, is 2 × (16384 × 2042 + 16 × 34778) ns, not four times the first row's time.
#[test]
fn a_probe_pass_sums_what_each_configuration_costs() {
    use crate::bench::sample::estimate::Probe;
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 0x10000], ..Default::default() };
    let clock = FakeClock::new(10, 2000, 2000);
    let stop = AtomicBool::new(false);
    let mut probe = Probe::default();
    let mut s = Sampling::new(&clock, &stop, &mut probe, None);
    let p = DmaPlan { sizes: vec![64, 0x10000], ..plan() };
    let r = run(setup(&dev, &mut e), &p, &mut s).unwrap();
    assert_eq!(r.results.len(), 4, "every configuration probed");
    let works: Vec<&str> = probe.rows.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        works,
        [
            "1 MiB in 64 B transfers",
            "1 MiB in 64 KiB transfers",
            "1 MiB in 64 B transfers",
            "1 MiB in 64 KiB transfers"
        ]
    );
    let (secs, work) = probe.total().unwrap();
    assert!((secs - 2.0 * (16384.0 * 2042e-9 + 16.0 * 34778e-9)).abs() < 1e-9, "{secs}");
    assert_eq!(work, "4 configurations, the longest 1 MiB in 64 B transfers");
    // A probe moves a configuration's calibration and a few batches, not its total.
    let runs = r.results.iter().map(|x| x.stats.as_ref().unwrap().transfers).sum::<u64>();
    assert!(runs < 2 * (16384 + 16), "{runs}");
}

/// AER errors while the card's data and guards are written, untimed, before the row's samples, make
/// that row suspect (the row's window is its whole configuration), and the next row stays clean.
#[test]
fn link_errors_while_a_rows_data_is_placed_mark_that_row() {
    let t = tempfile::tempdir().unwrap();
    let fx = std::sync::Arc::new(crate::pci::fixture::health_tree(t.path()));
    let host = crate::host::Host::with_root(t.path());
    let probe = crate::pci::health::HealthProbe::new(&host, &"0000:03:00.0".parse().unwrap());
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let f = fx.clone();
    let at_run: Option<(u32, Box<dyn FnMut() + Send>)> =
        Some((1, Box::new(move || crate::pci::fixture::health_errors(&f, false))));
    let mut e = MockEngine { card: vec![0; 0x10000], at_run, ..Default::default() };
    let stop = AtomicBool::new(false);
    let clock = FakeClock::new(10, 2000, 2000);
    let mut progress = ();
    let mut s = Sampling::new(&clock, &stop, &mut progress, Some(&probe));
    let r = run(setup(&dev, &mut e), &plan(), &mut s).unwrap();
    let health = |x: &Row| {
        x.notes.iter().find_map(|n| match n {
            Note::LinkHealth { changes } => Some(changes.clone()),
            _ => None,
        })
    };
    let h2c = health(&r.results[0]).expect("the h2c row marked suspect");
    assert!(h2c.iter().any(|c| c.contains("2 non-fatal errors (2 CmpltAbrt) on 0000:00:1c.0")), "{h2c:?}");
    assert_eq!(health(&r.results[1]), None, "nothing happened during the c2h row");
    assert!(r.results.iter().all(|x| x.verify == Some(Verify::Ok)));
}
