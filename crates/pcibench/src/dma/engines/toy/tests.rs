//! The toy engine, registered in one line, driven by `info`, `dma`, `latency` and `run` through
//! the library calls the CLI makes (`Session::engines`, `Session::measure`), with no other change.

use super::{DEVICE, MAGIC, MAX_TRANSFER, VENDOR};
use crate::access::sim::SimDevice;
use crate::bench::result::{Report, Verify};
use crate::device::{Device, Target};
use crate::direction::Direction;
use crate::host::Host;
use crate::measure::{
    Common, DefaultSize, DmaDirs, DmaLatencyRequest, DmaPattern, DmaRequest, EngineRequest, Hooks, LatencyRequest,
    LoadMode, LoadRequest, Measured, Request, RunRequest,
};
use crate::session::Session;
use crate::sim::mem::Pages;
use crate::sim::{card_info, CardShape, SimBar, SimCard};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const SHAPE: CardShape = CardShape {
    name: "sim-toy",
    vendor: VENDOR,
    device: DEVICE,
    device_name: "toy card",
    subsystem: (0, 0),
    class: (0x058000, "Memory controller"),
    bars: &[(0, 4096), (2, 64 << 10)],
    link: (3, 4),
    mps: 256,
    mps_supported: 256,
    mrrs: 512,
    irq: None,
    datapath: None,
};

/// The toy card, opened: its identifier in BAR0, memory in BAR2.
fn session() -> Session {
    let regs = Pages::new("BAR0", 4096).unwrap();
    regs.write_scalar(0, 4, MAGIC as u64).unwrap();
    let card = SimCard {
        bars: vec![
            (0, SimBar::Memory(Arc::new(regs))),
            (2, SimBar::Memory(Arc::new(Pages::new("BAR2", 64 << 10).unwrap()))),
        ],
        host: crate::sim::host_map::HostMap::new(),
        irq: None,
    };
    let info = card_info(&SHAPE);
    let dev = SimDevice::from_card(SHAPE.name, &info, card);
    Session::with_device(&Host::with_root("/nonexistent-root"), Device::new(Target::SIM, info), Box::new(dev))
}

fn measure(s: &Session, r: Request) -> Measured {
    let stop = AtomicBool::new(false);
    let mut progress = ();
    s.measure(&r, &mut Hooks { stop: &stop, progress: &mut progress, trace: None }).unwrap()
}

fn report(m: Measured) -> Report {
    match m {
        Measured::Report(r) => r,
        Measured::Suite(_) => panic!("a report, not a suite"),
    }
}

fn common() -> Common {
    Common { cpu: None, command_line: vec!["pcibench".into()] }
}

fn verified(r: &Report) {
    assert!(!r.results.is_empty());
    assert!(r.results.iter().all(|x| x.verify == Some(Verify::Ok)), "{:?} {:?}", r.results, r.warnings);
    assert_eq!(r.engine.as_deref(), Some("toy"));
}

#[test]
fn info_shows_the_toy_engine_and_pio_leaves_its_registers_alone() {
    let s = session();
    let engines = s.engines();
    assert_eq!(engines.iter().map(|e| e.engine).collect::<Vec<_>>(), ["toy"]);
    let text = crate::report::info::engines_text(&engines);
    assert_eq!(text, "  DMA engine:    toy engine in BAR0: 64 KiB of card memory\n");
    assert_eq!(s.pio_bars(&[]).unwrap(), [2], "BAR0 holds the engine's registers");
}

#[test]
fn dma_drives_it_both_ways_at_its_default_size() {
    let s = session();
    let r = report(measure(
        &s,
        Request::Dma(DmaRequest {
            device: Target::SIM,
            via: None,
            engine: EngineRequest::default(),
            dirs: DmaDirs::Both,
            queues: Vec::new(),
            pattern: DmaPattern::Seq,
            window: None,
            sizes: Vec::new(),
            default_size: DefaultSize::Window,
            total: None,
            row_budget_ms: None,
            timeout_ms: 2000,
            allow_dma: false,
            completion: None,
            irq_kind: None,
            rate: None,
            soak: None,
            common: common(),
        }),
    ));
    verified(&r);
    // The one default size: its window (64 KiB), up to its largest transfer (16 KiB); its own
    // default total (16 transfers), which the sampling never exceeds.
    let rows: Vec<(Direction, u64)> = r.results.iter().map(|x| (x.dir, x.size)).collect();
    assert_eq!(rows, [(Direction::H2c, MAX_TRANSFER), (Direction::C2h, MAX_TRANSFER)]);
    assert!(r.results.iter().all(|x| (1..=16).contains(&x.stats.as_ref().unwrap().transfers)));
}

#[test]
fn latency_times_its_transfers_and_reads_under_its_load() {
    let s = session();
    let r = report(measure(
        &s,
        Request::Latency(LatencyRequest {
            device: Target::SIM,
            via: None,
            bar: Some(2),
            offset: 0,
            widths: None,
            allow_write: false,
            samples: 200,
            samples_by_time: false,
            warmup: None,
            dma: Some(DmaLatencyRequest {
                dirs: vec![Direction::H2c, Direction::C2h],
                sizes: vec![64, 4096],
                completion: None,
                irq: false,
                irq_kind: None,
                samples: Some(20),
                rate: None,
            }),
            load: Some(LoadRequest { modes: LoadMode::ALL.to_vec(), size: None, cpu: None, rate: None }),
            engine: EngineRequest::default(),
            timeout_ms: 2000,
            allow_dma: false,
            common: common(),
        }),
    ));
    assert_eq!(r.engine.as_deref(), Some("toy"));
    let dma: Vec<_> = r.results.iter().filter(|x| x.probe == Some(crate::bench::result::Probe::Dma)).collect();
    assert_eq!(dma.len(), 4, "two sizes, both directions");
    assert!(dma.iter().all(|x| x.verify == Some(Verify::Ok)), "{:?}", r.warnings);
    let loads: Vec<_> = r.results.iter().filter_map(|x| x.load.as_ref().map(|l| (l, &x.verify))).collect();
    assert_eq!(loads.len(), 3, "h2c, c2h and both");
    assert!(loads.iter().all(|(l, v)| l.engine == "toy" && **v == Some(Verify::Ok)), "{:?}", r.warnings);
}

#[test]
fn run_measures_pio_then_dma_with_it() {
    let s = session();
    let Measured::Suite(suite) = measure(
        &s,
        Request::Run(RunRequest {
            device: Target::SIM,
            allow_write: false,
            allow_dma: false,
            total: Some(256 << 10),
            common: common(),
        }),
    ) else {
        panic!("a suite")
    };
    assert_eq!(suite.engines.len(), 1);
    let pio = suite.pio.as_ref().unwrap();
    assert!(pio.results.iter().all(|x| x.bar == Some(2)), "PIO leaves the engine's BAR0 alone");
    verified(suite.dma.as_ref().unwrap());
    assert!(suite.notes.is_empty(), "{:?}", suite.notes);
}
