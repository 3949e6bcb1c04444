//! The open loop on a fake clock (time moves only by the clock's cost model and what the test's
//! card does), so every figure is the arithmetic's: a card of fixed service time is flat below
//! saturation and queues past it, with the knee at 1 / service; a 1 ms stall is charged to every
//! transfer scheduled during it; a host too slow for the schedule is named, not the card. Then
//! the whole runner on the stepped sim-qdma card: posted ahead over queues, data verified.

use super::open_loop::{self, Schedule, Submit, LATE_NS};
use super::*;
use crate::access::sim::SimDevice;
use crate::access::{DeviceAccess, IoMode, Mapping, Via};
use crate::bench::sample::clock::FakeClock;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::qdma::{QdmaEngine, QdmaOptions};
use crate::sim::qdma::card::{self as qcard, QdmaCard, QDMA_CONFIG_BAR};
use crate::sim::qdma::model::QdmaModelConfig;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A card that serves one transfer at a time in `service_ns` each, in order, holding at most
/// `depth` posted; time is the fake clock's. `stall` makes the post with that index take so
/// many ns longer before the card sees it (the host's submission stalled).
struct FixedService<'c> {
    clock: &'c FakeClock,
    service_ns: u64,
    depth: usize,
    blocking: bool,
    free_at: u64,
    done_at: VecDeque<u64>,
    posts: u64,
    stall: Option<(u64, u64)>,
}

impl<'c> FixedService<'c> {
    fn new(clock: &'c FakeClock, service_ns: u64) -> FixedService<'c> {
        FixedService {
            clock,
            service_ns,
            depth: 64,
            blocking: false,
            free_at: 0,
            done_at: VecDeque::new(),
            posts: 0,
            stall: None,
        }
    }
}

impl Submit for FixedService<'_> {
    fn queues(&self) -> u16 {
        1
    }
    fn blocking(&self) -> bool {
        self.blocking
    }
    fn post(&mut self, _queue: u16) -> crate::Result<bool> {
        if self.done_at.len() >= self.depth {
            return Ok(false);
        }
        if let Some((at, ns)) = self.stall {
            if self.posts == at {
                self.clock.advance(ns);
            }
        }
        self.posts += 1;
        let now = self.clock.now_ns();
        self.free_at = self.free_at.max(now) + self.service_ns;
        if self.blocking {
            // The engine's own wait: time runs to the completion.
            self.clock.advance(self.free_at - now);
            return Ok(true);
        }
        self.done_at.push_back(self.free_at);
        Ok(true)
    }
    fn reap(&mut self, done: &mut [u32]) -> crate::Result<()> {
        let now = self.clock.now_ns();
        while self.done_at.front().is_some_and(|t| *t <= now) {
            self.done_at.pop_front();
            done[0] += 1;
        }
        Ok(())
    }
}

fn schedule(count: u64, ops: f64) -> Schedule {
    Schedule { count, interval_ns: 1e9 / ops, budget_ns: u64::MAX, timeout: Duration::from_secs(1) }
}

fn run_at(card: &mut FixedService, clock: &FakeClock, count: u64, ops: f64) -> open_loop::OpenLoop {
    open_loop::run(card, clock, &schedule(count, ops), &AtomicBool::new(false)).unwrap()
}

#[test]
fn a_fixed_service_card_is_flat_below_saturation_and_queues_past_it_with_the_knee_at_one_over_service() {
    // 1 µs a transfer: saturation at 1 M/s. The clock costs 10 ns a reading.
    const S: u64 = 1_000;
    let mut knee = None;
    for ops in [250e3, 500e3, 900e3, 950e3, 1.05e6, 1.25e6, 2e6] {
        let clock = FakeClock::new(10, 0, 1);
        let mut card = FixedService::new(&clock, S);
        let r = run_at(&mut card, &clock, 4000, ops);
        let h = r.hist.summary().unwrap();
        assert_eq!((r.completed, r.late, r.dropped), (4000, 0, 0), "{ops}");
        if ops < 1e6 {
            // Each transfer alone: its service and at most a few clock readings of polling.
            assert!(h.min >= S && h.p99 <= S + 100, "{ops}: {h:?}");
            assert!((r.achieved_ops() / ops - 1.0).abs() < 0.01, "{ops}: {}", r.achieved_ops());
        } else {
            // Past it the card serves 1 M/s and transfer k waits k × (S - interval) more: the
            // median one (k = 2000) S + 2000 × (S - 1e9/ops).
            let want = S as f64 + 2000.0 * (S as f64 - 1e9 / ops);
            assert!((h.p50 as f64 / want - 1.0).abs() < 0.03, "{ops}: p50 {} want {want}", h.p50);
            assert!((r.achieved_ops() / 1e6 - 1.0).abs() < 0.01, "{ops}: {}", r.achieved_ops());
            knee.get_or_insert(ops);
        }
        if h.p99 > 2 * S {
            assert!(ops > 1e6, "{ops}: queueing below saturation");
        }
    }
    assert_eq!(knee, Some(1.05e6));
}

#[test]
fn a_1ms_stall_is_charged_to_every_transfer_scheduled_during_it() {
    // 200 K/s (one due every 5 µs), 1 µs of service: idle, each takes 1 µs. The 5000th post
    // stalls 1 ms: the 200 transfers due meanwhile are posted late, all at once, and each
    // counts from its own due time (1 ms down to 0.2 ms), as do those queued behind them.
    const S: u64 = 1_000;
    let clock = FakeClock::new(10, 0, 1);
    let mut card = FixedService::new(&clock, S);
    card.depth = 1024;
    card.stall = Some((5000, 1_000_000));
    let r = run_at(&mut card, &clock, 10_000, 200e3);
    let h = r.hist.summary().unwrap();
    assert_eq!((r.completed, r.dropped), (10_000, 0));
    // Due in the stall and posted more than 1 µs late: 199 (the last is within LATE_NS).
    assert!((195..=200).contains(&r.late), "{}", r.late);
    assert!(r.worst_lag_ns >= 990_000, "{}", r.worst_lag_ns);
    assert!(r.hist.count_above(200_000) >= 200, "{}", r.hist.count_above(200_000));
    // 2% of the transfers waited 0.2 ms or more: the p99 is one of them, the max the stall.
    assert!(h.p99 >= 400_000, "{h:?}");
    assert!(h.max >= 1_000_000, "{h:?}");
    assert!(h.p50 <= S + 100, "{h:?}");
}

#[test]
fn a_card_that_runs_one_at_a_time_past_its_rate_makes_transfers_wait_but_none_late() {
    // Blocking posts at 2 M/s on a 1 µs card: the card, not the host, is behind.
    let clock = FakeClock::new(10, 0, 1);
    let mut card = FixedService::new(&clock, 1_000);
    card.blocking = true;
    let r = run_at(&mut card, &clock, 2000, 2e6);
    let h = r.hist.summary().unwrap();
    assert_eq!((r.completed, r.late), (2000, 0));
    assert!(h.p50 > 400_000, "{h:?}");
    // The card's 1 M/s less the loop's turn between one completion and the next post (three
    // readings of 10 ns: some 3%), as any closed loop.
    assert!((r.achieved_ops() / 1e6 - 1.0).abs() < 0.05, "{}", r.achieved_ops());
}

#[test]
fn a_host_slower_than_the_schedule_is_counted_late() {
    // Each clock reading costs 2 µs: a schedule of 1 M/s cannot be kept by this "host", though
    // the card (100 ns) could.
    let clock = FakeClock::new(2_000, 0, 1);
    let mut card = FixedService::new(&clock, 100);
    let r = run_at(&mut card, &clock, 1000, 1e6);
    assert!(r.late * 100 > r.posted, "{} of {}", r.late, r.posted);
    let f = RateFigures { late: r.late, posted: r.posted, ..Default::default() };
    assert!(f.host_limited());
    assert!(r.worst_lag_ns > LATE_NS);
}

#[test]
fn the_budget_drops_what_the_card_cannot_take_and_stop_ends_the_row() {
    let clock = FakeClock::new(10, 0, 1);
    let mut card = FixedService::new(&clock, 10_000);
    let s = Schedule { count: 1000, interval_ns: 1_000.0, budget_ns: 100_000, timeout: Duration::from_secs(1) };
    let r = open_loop::run(&mut card, &clock, &s, &AtomicBool::new(false)).unwrap();
    assert_eq!(r.posted + r.dropped, 1000);
    assert!(r.dropped > 900 && r.completed == r.posted, "{r:?}");
    let clock = FakeClock::new(10, 0, 1);
    let mut card = FixedService::new(&clock, 1_000);
    let r = open_loop::run(&mut card, &clock, &schedule(100, 1e5), &AtomicBool::new(true)).unwrap();
    assert!(r.interrupted && r.posted == 0 && r.dropped == 100);
}

#[test]
fn a_card_that_never_completes_times_out() {
    let clock = FakeClock::new(1_000, 0, 1);
    let mut card = FixedService::new(&clock, 1_000_000_000_000);
    let s = Schedule { count: 10, interval_ns: 1_000.0, budget_ns: u64::MAX, timeout: Duration::from_millis(1) };
    let e = open_loop::run(&mut card, &clock, &s, &AtomicBool::new(false)).unwrap_err().to_string();
    assert!(e.contains("posted transfers did not complete within 1 ms"), "{e}");
}

#[test]
fn the_loops_own_cost_is_its_clock_readings() {
    // Per transfer: a reading at the top of the turn that posts, and one at the turn that
    // reaps, one after the reap: 3 readings of 10 ns, give or take a turn.
    let cost = open_loop::loop_cost_ns(&FakeClock::new(10, 0, 1), 1000).unwrap();
    assert!((20.0..=40.0).contains(&cost), "{cost}");
}

/// The stepped sim-qdma card (the model moves inside each doorbell write) and its engine.
fn qdma(queues: u16) -> (SimDevice, QdmaEngine, SimAllocator) {
    let (card, _model) = qcard::build(QdmaModelConfig { stepped: true, ..Default::default() }).unwrap();
    let dev = SimDevice::from_card("sim-qdma", &crate::sim::CardSpec::info(&QdmaCard), card);
    crate::access::set_bus_master(&dev, true).unwrap();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let bar = dev.open_bar(QDMA_CONFIG_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    let eng = QdmaEngine::new(bar, &alloc, QdmaOptions { queues, ..Default::default() }).unwrap();
    (dev, eng, alloc)
}

fn plan(rates: Rates, queues: Vec<u16>) -> RatePlan {
    RatePlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        sizes: vec![64, 4096],
        queues,
        rate: RateRequest { rates, until_p99_ns: None },
        transfers: Some(500),
        total: None,
        card_addr: 0,
        timeout: Duration::from_secs(5),
    }
}

#[test]
fn qdma_posts_ahead_over_queues_at_each_rate_and_every_row_verifies() {
    let (_dev, mut eng, alloc) = qdma(4);
    let clock = FakeClock::new(10, 0, 1);
    let mut report = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
    let p = plan(Rates::These(vec![Rate::Ops(1e6), Rate::Bytes(1e9)]), vec![1, 4]);
    let rows = rows(&mut eng, &alloc, &p, &clock, &AtomicBool::new(false), &mut (), &mut report).unwrap();
    // 2 directions × 2 sizes × 2 queue counts × 2 rates.
    assert_eq!(rows.len(), 16);
    for r in &rows {
        let f = r.rate.as_ref().unwrap();
        assert_eq!((f.completed, f.dropped, f.late), (500, 0, 0), "{r:?}");
        assert!(f.posted_ahead);
        assert_eq!(r.verify, Some(Verify::Ok), "{r:?}");
        assert_eq!(r.latency.as_ref().unwrap().samples, 500);
    }
    // 1 GB/s of 4 KiB transfers is 244140.625 a second.
    let bytes_row = rows.iter().find(|r| r.size == 4096 && r.rate.as_ref().unwrap().offered_ops < 1e6).unwrap();
    assert!((bytes_row.rate.as_ref().unwrap().offered_ops - 1e9 / 4096.0).abs() < 1e-6);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn a_sweep_climbs_from_five_percent_of_the_closed_loop_and_stops() {
    let (_dev, mut eng, alloc) = qdma(1);
    // Each transfer costs the fake clock 2 µs (`did` in the closed loop; the stepped card moves
    // in the doorbell write, so open-loop time is the clock's readings only).
    let clock = FakeClock::new(10, 2_000, 1_000_000);
    let mut report = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
    let mut p = plan(Rates::Sweep, vec![1]);
    (p.dirs, p.sizes, p.transfers) = (vec![Direction::H2c], vec![64], Some(200));
    let rows = rows(&mut eng, &alloc, &p, &clock, &AtomicBool::new(false), &mut (), &mut report).unwrap();
    assert!(rows.len() >= 3 && rows.len() <= MAX_STEPS, "{}", rows.len());
    let offered: Vec<f64> = rows.iter().map(|r| r.rate.as_ref().unwrap().offered_ops).collect();
    assert!(offered.windows(2).all(|w| w[1] > w[0]), "{offered:?}");
    // The closed loop: about 2 µs a transfer, so 5% of it is some 25 K/s.
    assert!(offered[0] > 15e3 && offered[0] < 26e3, "{offered:?}");
    assert!(rows.iter().all(|r| r.verify == Some(Verify::Ok)));
}

#[test]
fn refusals_are_one_line_before_anything_runs() {
    let (_dev, mut eng, alloc) = qdma(2);
    let clock = FakeClock::new(10, 0, 1);
    let mut report = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
    let stop = AtomicBool::new(false);
    let e = rows(&mut eng, &alloc, &plan(Rates::Sweep, vec![4]), &clock, &stop, &mut (), &mut report).unwrap_err();
    assert!(e.to_string().starts_with("--queues 4 is more than the 2 queue(s)"), "{e}");
    let mut p = plan(Rates::Sweep, vec![2]);
    p.sizes = vec![eng.card_size()];
    let e = rows(&mut eng, &alloc, &p, &clock, &stop, &mut (), &mut report).unwrap_err().to_string();
    assert!(e.contains("its own 32 MiB of card memory") && !e.contains('\n'), "{e}");
}
