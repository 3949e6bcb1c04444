//! A card that falls off the bus mid-run: the DMA runner stops at once, keeps the rows measured
//! before (verified), names the card as gone in one line, and stops the engine.

use super::*;
use crate::bench::sample::clock::MonotonicClock;
use crate::bench::test_rig::{sampling, FallsOff, SimRig};
use std::sync::atomic::AtomicBool;

#[test]
fn a_card_that_falls_off_the_bus_mid_run_keeps_the_rows_before_and_is_named() {
    let mut rig = SimRig::open("sim", &Default::default());
    let mut engine = FallsOff::new(rig.engine.as_mut(), &rig.dev);
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
    let mut s = sampling(&clock, &stop, &mut progress);
    let setup = DmaSetup { dev: &rig.dev, device: &rig.device, engine: &mut engine, alloc: &rig.alloc, irq: None };
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
