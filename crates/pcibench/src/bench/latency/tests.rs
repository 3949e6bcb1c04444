//! The latency runner on the simulated cards: exact figures from the fake clock, every row's data
//! verified, refusals before anything runs, the load stopped and its data checked, Ctrl-C.

use super::*;
use crate::bench::latency::load::LoadMode;
use crate::bench::result::Completion;
use crate::bench::sample::clock::{FakeClock, MonotonicClock};
use crate::bench::sample::sampler::Progress;
use crate::bench::test_rig::{sampling, FallsOff, SimRig};
use crate::host::Host;
use crate::session::{EngineRequest, Session};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn session(card: &str) -> Session {
    Session::open(&Host::with_root("/nonexistent-root"), &card.parse().unwrap(), None).unwrap()
}

fn plan(widths: Vec<Width>, allow_write: bool) -> LatencyPlan {
    LatencyPlan {
        bar: 0,
        offset: 0x40,
        widths,
        strict_width: false,
        allow_write,
        samples: 500,
        budget_ns: None,
        warmup: Some(7),
        dma: None,
        load: None,
    }
}

/// DMA rows both ways at `sizes`, 20 polled samples each at card address 0x1000.
fn dma_both_ways(sizes: Vec<u64>) -> DmaLatency {
    DmaLatency {
        dirs: vec![Direction::H2c, Direction::C2h],
        sizes,
        completions: vec![Completion::Poll],
        samples: Some(20),
        card_addr: 0x1000,
        timeout: Duration::from_secs(20),
        rate: None,
    }
}

fn target<'a>(s: &'a Session) -> LatencyTarget<'a> {
    LatencyTarget { dev: s.dev.as_ref(), device: &s.device, engine: None, irq: None }
}

#[test]
fn mmio_rows_are_exact_under_the_fake_clock() {
    let s = session("sim");
    // A reading costs 9 ns; each access 40 ns by the cost model, whatever its size.
    let clock = FakeClock::new(9, 40, u64::MAX);
    let stop = AtomicBool::new(false);
    let mut moved = 0u64;
    let mut count = |n: u64| moved += n;
    let r = run(target(&s), &plan(ALL_WIDTHS.to_vec(), true), &mut sampling(&clock, &stop, &mut count)).unwrap();
    assert_eq!(r.kind, Kind::Latency);
    let measured: Vec<&Row> = r.results.iter().filter(|x| x.latency.is_some()).collect();
    let has512 = mmio::available(Width::V512).is_ok();
    assert_eq!(measured.len(), if has512 { 10 } else { 8 }, "read and write-read per width");
    for x in &measured {
        let l = x.latency.as_ref().unwrap();
        assert_eq!((l.samples, l.warmup, l.overhead_ns, l.clock.as_str()), (500, 7, 9.0, "fake clock"));
        assert_eq!(
            (l.min_ns, l.p50_ns, l.p9999_ns, l.max_ns, l.mean_ns, l.outliers),
            (40.0, 40.0, 40.0, 40.0, 40.0, 0)
        );
        assert_eq!(
            (x.bar, x.offset, x.dir, x.size),
            (Some(0), Some(0x40), Direction::C2h, x.width.unwrap().bytes() as u64)
        );
        match x.probe {
            // Host memory reads back what was written.
            Some(Probe::WriteRead) => assert_eq!(x.verify, Some(Verify::Ok)),
            Some(Probe::MmioRead) => match &x.verify {
                Some(Verify::Unverified { reason }) => assert!(reason.contains("read 0x0 every time"), "{reason}"),
                v => panic!("{v:?}"),
            },
            p => panic!("{p:?}"),
        }
    }
    assert_eq!(moved, measured.iter().map(|x| 500 * x.size).sum::<u64>());
    if !has512 {
        assert!(r.results.iter().any(|x| x.skipped() && x.width == Some(Width::V512)));
    }
    assert_eq!(crate::outcome::Outcome::of_report(&r).code(), 0);
}

/// What a run said it would take.
#[derive(Default)]
struct Said(Vec<(f64, String, String)>);

impl Progress for Said {
    fn estimate(&mut self, secs: f64, work: &str, flag: &str) {
        self.0.push((secs, work.into(), flag.into()));
    }
}

/// Issue 43: with no --samples a row is sized by time. An access of 1 ms (the fake clock's cost
/// model) makes a half-second row of 500 samples, not the 100,000 the cap allows; the first ten
/// samples are the calibration, and what the row will take is said after them.
#[test]
fn rows_without_a_sample_count_are_sized_by_time() {
    let s = session("sim");
    let clock = FakeClock::new(9, 1_000_000, u64::MAX);
    let stop = AtomicBool::new(false);
    let mut said = Said::default();
    let mut p = plan(vec![Width::B32], false);
    (p.samples, p.budget_ns, p.warmup) = (DEFAULT_SAMPLES, Some(super::super::sample::sampler::ROW_BUDGET_NS), None);
    let r = run(target(&s), &p, &mut sampling(&clock, &stop, &mut said)).unwrap();
    let l = r.results[0].latency.as_ref().unwrap();
    assert_eq!((l.samples, l.min_ns, l.max_ns), (500, 1e6, 1e6));
    // One sample is the access and one reading (9 ns): 1,000,009 ns; 490 follow the calibration.
    assert_eq!(said.0.len(), 1);
    let (secs, work, flag) = &said.0[0];
    assert!((secs - 490.0 * 1_000_009e-9).abs() < 1e-9, "{secs}");
    assert_eq!((work.as_str(), flag.as_str()), ("500 samples", "--samples"));
    // A count given is kept whole, however long it takes.
    p.budget_ns = None;
    p.samples = 2000;
    let r = run(target(&s), &p, &mut sampling(&clock, &stop, &mut said)).unwrap();
    assert_eq!(r.results[0].latency.as_ref().unwrap().samples, 2000);
    assert_eq!(said.0[1].1, "2000 samples");
}

#[test]
fn widths_and_offsets_are_refused_before_anything_runs() {
    let s = session("sim");
    let clock = MonotonicClock;
    let stop = AtomicBool::new(false);
    let mut none = |_| {};
    let mut p = plan(vec![Width::B64], false);
    p.offset = 0x44;
    p.strict_width = true;
    let e = run(target(&s), &p, &mut sampling(&clock, &stop, &mut none)).unwrap_err().to_string();
    assert!(e.contains("multiples of 8"), "{e}");
    let mut p = plan(vec![Width::V128], false);
    p.strict_width = true;
    let e = run(target(&s), &p, &mut sampling(&clock, &stop, &mut none)).unwrap_err().to_string();
    assert!(e.contains("latency times one access") && !e.contains('\n'), "{e}");
    // The engine's register BAR of the sim card has no CPU mapping: no 64-byte read there.
    let mut p = plan(vec![Width::V512], false);
    p.bar = 4;
    p.offset = 0;
    p.strict_width = true;
    if mmio::available(Width::V512).is_ok() {
        let e = run(target(&s), &p, &mut sampling(&clock, &stop, &mut none)).unwrap_err().to_string();
        assert!(e.contains("needs a CPU mapping"), "{e}");
    }
    // 32-bit reads of it go to the register model, which answers the XDMA identifier.
    p.widths = vec![Width::B32];
    p.offset = 0x2000;
    let r = run(target(&s), &p, &mut sampling(&clock, &stop, &mut none)).unwrap();
    match &r.results[0].verify {
        Some(Verify::Unverified { reason }) => assert!(reason.contains("read 0x1fc2"), "{reason}"),
        v => panic!("{v:?}"),
    }
}

#[test]
fn dma_rows_on_the_sim_card_are_verified_and_exact() {
    let s = session("sim");
    let mut rig = s.open_dma(&EngineRequest::default(), None).unwrap();
    let clock = FakeClock::new(5, 100, 64);
    let stop = AtomicBool::new(false);
    let mut none = |_| {};
    let mut p = plan(vec![Width::B32], false);
    p.dma = Some(dma_both_ways(vec![64, 4096]));
    let t = LatencyTarget { engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())), ..target(&s) };
    let r = run(t, &p, &mut sampling(&clock, &stop, &mut none)).unwrap();
    let dma: Vec<&Row> = r.results.iter().filter(|x| x.probe == Some(Probe::Dma)).collect();
    assert_eq!(dma.len(), 4);
    for x in dma {
        let l = x.latency.as_ref().unwrap();
        // 100 ns per transfer plus size at 64 B/us.
        let want = 100.0 + (x.size * 1000 / 64) as f64;
        assert_eq!((l.samples, l.min_ns, l.max_ns), (20, want, want), "{x:?}");
        assert_eq!((x.completion, x.verify.clone()), (Some(Completion::Poll), Some(Verify::Ok)));
    }
    assert_eq!(r.engine.as_deref(), Some("xdma"));
    // Bus Master was put back off.
    let mut cmd = [0u8; 2];
    s.dev.config_read(4, &mut cmd).unwrap();
    assert_eq!(u16::from_le_bytes(cmd) & 4, 0);
}

#[test]
fn dma_at_offered_rates_on_an_engine_that_runs_one_at_a_time_says_its_closed_loop_bounds_it() {
    use crate::bench::rate::{Rate, RateRequest, Rates};
    let s = session("sim");
    let mut rig = s.open_dma(&EngineRequest::default(), None).unwrap();
    let clock = FakeClock::new(5, 100, 64);
    let stop = AtomicBool::new(false);
    let mut none = |_| {};
    let mut p = plan(vec![Width::B32], false);
    let dma = DmaLatency {
        rate: Some(RateRequest { rates: Rates::These(vec![Rate::Ops(1e5), Rate::Ops(1e6)]), until_p99_ns: None }),
        ..dma_both_ways(vec![64])
    };
    p.dma = Some(dma.clone());
    let t = LatencyTarget { engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())), ..target(&s) };
    let r = run(t, &p, &mut sampling(&clock, &stop, &mut none)).unwrap();
    let rated: Vec<&Row> = r.results.iter().filter(|x| x.rate.is_some()).collect();
    assert_eq!(rated.len(), 4);
    for x in &rated {
        let f = x.rate.as_ref().unwrap();
        assert_eq!((f.completed, f.dropped, f.posted_ahead), (20, 0, false), "{x:?}");
        assert_eq!((x.verify.clone(), x.latency.as_ref().unwrap().samples), (Some(Verify::Ok), 20));
    }
    assert!(r.warnings.iter().any(|w| w.contains("the xdma engine runs one transfer at a time")), "{:?}", r.warnings);
    // Completion by MSI is not what an open loop reaps: refused in one line.
    p.dma = Some(DmaLatency { completions: vec![Completion::Poll, Completion::Irq], ..dma });
    let t = LatencyTarget { engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())), ..target(&s) };
    let e = run(t, &p, &mut sampling(&clock, &stop, &mut none)).unwrap_err().to_string();
    assert!(e.starts_with("--rate reaps completions by polling"), "{e}");
}

#[test]
fn dma_rows_by_polling_and_by_interrupt_are_both_verified() {
    let s = session("sim");
    let mut rig = s.open_dma(&EngineRequest::default(), None).unwrap();
    let irq = s.dev.interrupts(rig.engine.irq_request()).unwrap();
    let clock = MonotonicClock;
    let stop = AtomicBool::new(false);
    let mut none = |_| {};
    let mut p = plan(vec![Width::B32], false);
    p.dma = Some(DmaLatency {
        completions: vec![Completion::Poll, Completion::Irq],
        card_addr: 0,
        timeout: Duration::from_secs(20),
        ..dma_both_ways(vec![256])
    });
    // Without the interrupt the plan is refused before anything runs.
    let t = LatencyTarget { engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())), ..target(&s) };
    let e = run(t, &p, &mut sampling(&clock, &stop, &mut none)).unwrap_err();
    assert!(matches!(e, Error::Usage(_)) && e.to_string().contains("needs the device's interrupt"), "{e}");
    let t = LatencyTarget {
        engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())),
        irq: Some(irq.as_ref()),
        ..target(&s)
    };
    let r = run(t, &p, &mut sampling(&clock, &stop, &mut none)).unwrap();
    let dma: Vec<&Row> = r.results.iter().filter(|x| x.probe == Some(Probe::Dma)).collect();
    let modes: Vec<_> = dma.iter().map(|x| (x.dir, x.completion)).collect();
    use Completion::*;
    assert_eq!(
        modes,
        [
            (Direction::H2c, Some(Poll)),
            (Direction::H2c, Some(Irq)),
            (Direction::C2h, Some(Poll)),
            (Direction::C2h, Some(Irq))
        ]
    );
    assert!(dma.iter().all(|x| x.verify == Some(Verify::Ok) && x.latency.as_ref().unwrap().samples == 20));
}

#[test]
fn reads_under_load_carry_the_load_and_its_verified_data() {
    for card in ["sim", "sim-qdma"] {
        let s = session(card);
        let mut rig = s.open_dma(&EngineRequest::default(), None).unwrap();
        let clock = MonotonicClock;
        let stop = AtomicBool::new(false);
        let mut none = |_| {};
        let mut p = plan(vec![Width::B64], false);
        p.bar = s.pio_bars(&[]).unwrap()[0];
        p.offset = 0;
        p.samples = 2000;
        p.load = Some(LoadPlan {
            modes: LoadMode::ALL.to_vec(),
            width: Width::B64,
            size: Some(64 << 10),
            cpu: None,
            rate: None,
            card_addr: 0,
            timeout: Duration::from_secs(20),
        });
        let t = LatencyTarget { engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())), ..target(&s) };
        let r = run(t, &p, &mut sampling(&clock, &stop, &mut none)).unwrap();
        let loaded: Vec<&Row> = r.results.iter().filter(|x| x.load.is_some()).collect();
        assert_eq!(loaded.len(), 3, "{card}");
        for (x, want) in loaded.iter().zip(["h2c", "c2h", "both"]) {
            let l = x.load.as_ref().unwrap();
            assert_eq!(l.label(), want);
            assert!(l.transfers > 0 && l.elapsed_s > 0.0, "{card} {l:?}");
            assert_eq!(l.h2c_mbps.is_some(), want != "c2h");
            assert_eq!(l.c2h_mbps.is_some(), want != "h2c");
            assert!(l.h2c_mbps.unwrap_or(1.0) > 0.0 && l.c2h_mbps.unwrap_or(1.0) > 0.0, "{l:?}");
            // qdma runs both directions in one batch; xdma alternates.
            assert_eq!(l.concurrent, want == "both" && card == "sim-qdma");
            assert_eq!(x.verify, Some(Verify::Ok), "{card} {want}");
            assert_eq!(x.latency.as_ref().unwrap().samples, 2000);
        }
        // The idle row comes first, then the load rows; the engine is idle again (a DMA works).
        assert!(r.results[0].load.is_none());
        let one = crate::dma::Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 4096 };
        let buf = rig.alloc.alloc(4096).unwrap();
        rig.engine.prepare(buf.as_ref(), &one).unwrap();
        let _bm = crate::access::BusMaster::enable(s.dev.as_ref()).unwrap();
        rig.engine.run(Duration::from_secs(20)).unwrap();
    }
}

#[test]
fn a_load_held_at_a_rate_never_runs_ahead_of_it() {
    // 64 KiB transfers held at 2 MB/s: one every 32.8 ms, the first at once. However the
    // threads are scheduled, the load moves at most one transfer more than its schedule allows.
    let s = session("sim");
    let mut rig = s.open_dma(&EngineRequest::default(), None).unwrap();
    let _bm = crate::access::BusMaster::enable(s.dev.as_ref()).unwrap();
    let plan = LoadPlan {
        modes: vec![LoadMode::H2c],
        width: Width::B32,
        size: Some(64 << 10),
        cpu: None,
        rate: Some(crate::bench::rate::Rate::Bytes(2e6)),
        card_addr: 0,
        timeout: Duration::from_secs(20),
    };
    let mut load = super::load::Rig::new(rig.engine.as_mut(), rig.alloc.as_ref(), &plan).unwrap();
    let stop = AtomicBool::new(false);
    // The measurement under the load: 100 ms of nothing (the load's schedule is what is tested).
    let (_, l, v) = load
        .under(LoadMode::H2c, &stop, || {
            std::thread::sleep(Duration::from_millis(100));
            Ok(())
        })
        .unwrap();
    assert_eq!((v, l.held_mbps), (Verify::Ok, Some(2.0)));
    let allowed = (l.elapsed_s * 2e6 / 65536.0).floor() as u64 + 1;
    assert!(l.transfers >= 1 && l.transfers <= allowed, "{} transfers in {} s", l.transfers, l.elapsed_s);
}

#[test]
fn a_stop_request_ends_the_run_with_what_was_measured() {
    let s = session("sim");
    let clock = MonotonicClock;
    let stop = AtomicBool::new(false);
    let mut progress = |_: u64| {
        // The first progress report comes after the first run of 256 samples of the first row.
        stop.store(true, Ordering::Relaxed);
    };
    let mut p = plan(vec![Width::B32, Width::B64], false);
    p.samples = 100_000;
    let r = run(target(&s), &p, &mut sampling(&clock, &stop, &mut progress)).unwrap();
    assert!(r.interrupted);
    assert_eq!(r.results.len(), 1, "the second width never ran");
    let l = r.results[0].latency.as_ref().unwrap();
    assert_eq!(l.samples, 256);
    assert_eq!(crate::outcome::Outcome::of_report(&r).code(), 130);
}

/// A card that stops answering during `latency` ends the run with the card-gone line (exit 1),
/// the rows before kept and the engine stopped, as `dma` does: not a plain error.
#[test]
fn a_card_that_falls_off_the_bus_keeps_the_rows_before_and_is_named() {
    let mut rig = SimRig::open("sim", &Default::default());
    let mut engine = FallsOff::new(rig.engine.as_mut(), &rig.dev);
    let clock = FakeClock::new(5, 100, 64);
    let stop = AtomicBool::new(false);
    let mut none = |_| {};
    let mut p = plan(vec![Width::B32], false);
    p.dma = Some(DmaLatency { timeout: Duration::from_secs(20), ..dma_both_ways(vec![64]) });
    let t = LatencyTarget { dev: &rig.dev, device: &rig.device, engine: Some((&mut engine, &rig.alloc)), irq: None };
    let r = run(t, &p, &mut sampling(&clock, &stop, &mut none)).expect("the report of the rows before, not an error");
    let dma: Vec<&Row> = r.results.iter().filter(|x| x.probe == Some(Probe::Dma)).collect();
    assert_eq!(dma.len(), 1, "the H2C row, measured before the card went");
    assert_eq!((dma[0].dir, dma[0].verify.clone()), (Direction::H2c, Some(Verify::Ok)));
    let line = r.gone.as_deref().expect("the card named as gone");
    assert!(
        line.starts_with("sim no longer answers (surprise removal, link down, or a reset): XDMA c2h channel 0's status and identifier registers read 0xffffffff"),
        "{line}"
    );
    assert_eq!(crate::outcome::Outcome::of_report(&r).code(), 1);
    assert!(engine.stops >= 1, "the engine was stopped");
}
