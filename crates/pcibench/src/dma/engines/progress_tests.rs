//! Every poll-mode engine's wait against its sim model on a slow host (`HostMap::set_pace`): a
//! transfer that takes several timeouts but keeps moving is waited for to the end; one that stops
//! moving part-way is stopped one timeout later and reported with how far it got. The drivers
//! are reached through the registry, as `pcibench dma` reaches them.

use crate::access::sim::SimDevice;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::{self, EngineOptions, Opened};
use crate::dma::{Direction, DmaAllocator, Transfer};
use crate::sim::{CardSpec, SimCard};
use crate::testing::scaled;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pages of the (scattered) buffer: one descriptor each on every engine.
const PAGES: usize = 192;
/// How long every access to host memory takes: each descriptor costs two or three of them.
const PACE: Duration = Duration::from_millis(4);
/// The progress timeout: a fraction of the whole transfer, 50-75 descriptors' time, so a wait is
/// cut short only if the model's thread goes unscheduled that long (issue 34: loaded hosts,
/// qemu-user, the shaker), never by one slow descriptor.
const TIMEOUT: Duration = Duration::from_millis(600);
const ONE_BY_ONE: Shape = Shape { pages: PAGES, pace: PACE, timeout: TIMEOUT };

#[derive(Clone, Copy)]
struct Shape {
    pages: usize,
    pace: Duration,
    timeout: Duration,
}

impl Shape {
    /// Every page costs at least one paced access: the run cannot end sooner.
    fn slowest_possible(&self) -> Duration {
        scaled(self.pace) * self.pages as u32
    }
}

struct Rig {
    dev: SimDevice,
    alloc: SimAllocator,
    opened: Opened,
}

fn rig(name: &'static str, spec: &dyn CardSpec, card: SimCard) -> Rig {
    let dev = SimDevice::from_card(name, &spec.info(), card);
    crate::access::set_bus_master(&dev, true).unwrap();
    let info = spec.info();
    let (driver, found) = engines::resolve(None, &info, &dev).unwrap();
    // The engine's own memory (rings, descriptors) contiguous, as drivers need it; the data in
    // scattered pages, one descriptor each, so progress is seen page by page.
    let rings = SimAllocator::new(dev.host_map().clone());
    let opened = driver.open(&found, &info, &dev, &rings, &EngineOptions::default()).unwrap();
    let alloc = SimAllocator::scattered(dev.host_map().clone());
    Rig { dev, alloc, opened }
}

fn xdma() -> (Rig, Arc<crate::sim::xdma::model::XdmaModel>) {
    let (card, model) = crate::sim::xdma::card::build(Default::default()).unwrap();
    (rig("sim", &crate::sim::xdma::card::XdmaCard, card), model)
}

fn qdma() -> Rig {
    let (card, _) = crate::sim::qdma::card::build(Default::default()).unwrap();
    rig("sim-qdma", &crate::sim::qdma::card::QdmaCard, card)
}

fn nvram() -> (Rig, Arc<crate::sim::nvram::model::NvramModel>) {
    let (card, model) = crate::sim::nvram::card::build(Default::default()).unwrap();
    (rig("sim-nvram", &crate::sim::nvram::card::NvramCard, card), model)
}

/// Move PAGES pages host → card with every host access paced; the run's outcome and how long
/// it took.
fn paced_run(r: &mut Rig, shape: Shape, stall: impl FnOnce(&AtomicBool) + Send) -> (crate::Result<()>, Duration) {
    let len = shape.pages * crate::sim::mem::PAGE;
    let buf = r.alloc.alloc(len).unwrap();
    let t = Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: r.opened.card_offset, len: len as u64 };
    r.opened.engine.prepare(&*buf, &t).unwrap();
    r.dev.host_map().set_pace(scaled(shape.pace));
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let res = std::thread::scope(|s| {
        s.spawn(|| stall(&done));
        let res = r.opened.engine.run(scaled(shape.timeout));
        done.store(true, Ordering::Release);
        res
    });
    r.dev.host_map().set_pace(Duration::ZERO);
    (res, start.elapsed())
}

#[test]
fn a_slow_xdma_transfer_that_keeps_moving_outlasts_its_timeout_and_succeeds() {
    const SHAPE: Shape = ONE_BY_ONE;
    let (mut r, _) = xdma();
    let (res, took) = paced_run(&mut r, SHAPE, |_| {});
    res.unwrap();
    assert!(took >= SHAPE.slowest_possible() && SHAPE.slowest_possible() > scaled(SHAPE.timeout));
}

#[test]
fn a_slow_qdma_transfer_that_keeps_moving_outlasts_its_timeout_and_succeeds() {
    const SHAPE: Shape = ONE_BY_ONE;
    let mut r = qdma();
    let (res, took) = paced_run(&mut r, SHAPE, |_| {});
    res.unwrap();
    assert!(took >= SHAPE.slowest_possible() && SHAPE.slowest_possible() > scaled(SHAPE.timeout));
}

#[test]
fn a_slow_umem_transfer_that_keeps_moving_outlasts_its_timeout_and_succeeds() {
    const SHAPE: Shape = ONE_BY_ONE;
    let (mut r, _) = nvram();
    let (res, took) = paced_run(&mut r, SHAPE, |_| {});
    res.unwrap();
    assert!(took >= SHAPE.slowest_possible() && SHAPE.slowest_possible() > scaled(SHAPE.timeout));
}

/// Wait until `moved()` says some descriptors completed, then stall the engine.
fn stall_part_way(done: &AtomicBool, moved: impl Fn() -> bool, stall: impl FnOnce()) {
    while !done.load(Ordering::Acquire) {
        if moved() {
            stall();
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// "k of N descriptors ..." from a timeout report.
fn progress_in(report: &str) -> (u64, u64) {
    let words: Vec<&str> = report.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "of").expect(report);
    let k = words[i - 1].trim_start_matches('(').parse().expect(report);
    (k, words[i + 1].parse().expect(report))
}

/// The report of a transfer whose engine stalls (`stall`) after its first few dozen host
/// accesses (some descriptors done, most not).
fn stalled_part_way(r: &mut Rig, stall: impl FnOnce() + Send) -> String {
    let map = Arc::clone(r.dev.host_map());
    let (res, _) = paced_run(r, ONE_BY_ONE, |done| stall_part_way(done, || map.paced_accesses() >= 24, stall));
    let e = res.unwrap_err().to_string();
    // In the watchdog's own words: a scaled timeout of whole seconds (qemu-user) reads "3 s".
    assert!(e.contains(&crate::dma::watchdog::no_progress(scaled(TIMEOUT))), "{e}");
    let (k, n) = progress_in(&e);
    assert!((4..PAGES as u64).contains(&k) && n == PAGES as u64, "{e}");
    e
}

#[test]
fn an_xdma_transfer_that_stops_part_way_is_stopped_one_timeout_later_with_its_progress() {
    let (mut r, model) = xdma();
    let m = Arc::clone(&model);
    let e = stalled_part_way(&mut r, move || m.set_stalled(Direction::H2c, 0, true).unwrap());
    // The count is the channel's (+0x48): the writeback holds one only at the chain's end.
    assert!(e.contains("descriptors completed by the completed-descriptor count (+0x48)"), "{e}");
    assert!(e.contains("); cleared run"), "{e}");
    model.set_stalled(Direction::H2c, 0, false).unwrap();
}

#[test]
fn a_umem_transfer_that_stops_part_way_is_stopped_one_timeout_later_with_its_progress() {
    let (mut r, model) = nvram();
    let m = Arc::clone(&model);
    let e = stalled_part_way(&mut r, move || m.set_stalled(true));
    assert!(e.contains("descriptors done;") && e.contains("cleared GO"), "{e}");
    model.set_stalled(false);
}
