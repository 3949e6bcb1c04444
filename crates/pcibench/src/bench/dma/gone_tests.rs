//! A card that falls off the bus mid-run: the DMA runner stops at once, keeps the rows measured
//! before (verified), names the card as gone in one line, and stops the engine.

use super::*;
use crate::access::sim::SimDevice;
use crate::bench::sample::clock::MonotonicClock;
use crate::bench::sample::timer::TimerOverhead;
use crate::dma::engines::{self, EngineOptions};
use std::sync::atomic::AtomicBool;

/// The sim card's XDMA engine, with the card falling off the bus when the C2H row's transfers
/// are prepared (the second C2H batch: the first reads back the H2C row to verify it).
struct FallsOff<'a> {
    inner: Box<dyn Engine>,
    dev: &'a SimDevice,
    c2h_batches: u32,
    stops: u32,
}

impl Engine for FallsOff<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn card_size(&self) -> u64 {
        self.inner.card_size()
    }
    fn max_transfer(&self) -> u64 {
        self.inner.max_transfer()
    }
    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        if t.dir == Direction::C2h {
            self.c2h_batches += 1;
            if self.c2h_batches == 2 {
                self.dev.fall_off_bus();
            }
        }
        self.inner.prepare(buf, t)
    }
    fn run(&mut self, timeout: Duration) -> Result<()> {
        self.inner.run(timeout)
    }
    fn stop(&mut self) -> Result<String> {
        self.stops += 1;
        self.inner.stop()
    }
}

#[test]
fn a_card_that_falls_off_the_bus_mid_run_keeps_the_rows_before_and_is_named() {
    let dev = SimDevice::open(crate::sim::SimId::from_name("sim").unwrap()).unwrap();
    let info = crate::sim::CardSpec::info(&crate::sim::xdma::card::XdmaCard);
    let (driver, found) = engines::resolve(None, &info, &dev).unwrap();
    let alloc = crate::dma::buffers::sim::SimAllocator::new(dev.host_map().clone());
    let opened = driver.open(&found, &info, &dev, &alloc, &EngineOptions::default()).unwrap();
    let mut engine = FallsOff { inner: opened.engine, dev: &dev, c2h_batches: 0, stops: 0 };
    let device = Device::new(crate::device::Target::SIM, info.clone());
    let plan = DmaPlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        bidir: false,
        sizes: vec![4096],
        total: 256 << 10,
        budget_ns: None,
        card_addr: 0,
        timeout: Duration::from_secs(20),
        queues: vec![],
        access: Access::Sequential,
        completions: Vec::new(),
    };
    let (stop, clock) = (AtomicBool::new(false), MonotonicClock);
    let mut progress = |_| {};
    let mut s = Sampling {
        clock: &clock,
        overhead: TimerOverhead::measure(&clock),
        stop: &stop,
        progress: &mut progress,
        health: None,
    };
    let setup = DmaSetup { dev: &dev, device: &device, engine: &mut engine, alloc: &alloc, irq: None };
    let r = run(setup, &plan, &mut s).expect("the report of the rows before, not an error");
    assert_eq!(r.results.len(), 1, "the H2C row, measured before the card went");
    assert_eq!((r.results[0].dir, r.results[0].verify.clone()), (Direction::H2c, Some(Verify::Ok)));
    let line = r.gone.as_deref().expect("the card named as gone");
    assert!(
        line.starts_with("sim no longer answers (surprise removal, link down, or a reset): XDMA c2h channel 0's status and identifier registers read 0xffffffff"),
        "{line}"
    );
    assert!(line.ends_with("run `pcibench health sim`"), "{line}");
    assert_eq!(crate::outcome::Outcome::of_report(&r).code(), 1);
    assert!(engine.stops >= 1, "the engine was stopped");
    let table = crate::report::exporter(crate::report::Format::Table, Default::default()).report(&r).unwrap();
    assert!(table.contains("stopped: the card stopped answering"), "{table}");
}
