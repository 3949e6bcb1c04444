//! umem completion by interrupt against the sim NVRAM (stepped: the chain runs, and the line
//! rises, inside the GO write): umem.c's enables serviced by its clear sequence, an error raised
//! by interrupt, a line never acknowledged, an interrupt that never comes, teardown as found.

use super::tests::{bus, bytes, card_with, desc, t, Card, CHAIN_COMP, GO, LONG, READ, SEM};
use crate::access::{DeviceAccess, IrqKind, IrqRequest};
use crate::dma::{Direction, DmaAllocator, Engine};
use crate::sim::nvram::model::NvramModelConfig;
use std::time::Duration;

fn stepped() -> Card {
    card_with(NvramModelConfig { stepped: true, ..Default::default() })
}

fn command(c: &Card) -> u16 {
    let mut b = [0u8; 2];
    c.dev.config_read(4, &mut b).unwrap();
    u16::from_le_bytes(b)
}

#[test]
fn completes_by_intx_with_umem_c_enables_serviced() {
    for c in [stepped(), card_with(NvramModelConfig::default())] {
        let a = c.alloc();
        let mut e = c.engine(&a);
        assert_ne!(command(&c) & 0x400, 0, "Interrupt Disable set at open (polling)");
        let irq = c.dev.interrupts(e.irq_request()).unwrap();
        assert_eq!(irq.kind(), IrqKind::Intx, "the card has INTx only");
        let (src, dst) = (a.alloc(1 << 20).unwrap(), a.alloc(1 << 20).unwrap());
        bytes(&*src).iter_mut().enumerate().for_each(|(i, b)| *b = (i * 13 + 5) as u8);
        // 2 MiB in 1 MiB pieces is one chain; 130 pages scattered would be two: a transfer of
        // the whole buffer is one chain here, each run one interrupt.
        for _ in 0..2 {
            e.prepare(&*src, &t(Direction::H2c, 1 << 20, 0)).unwrap();
            e.run_interrupt(&*irq, LONG).unwrap();
            assert_eq!(command(&c) & 0x400, 0, "armed: Interrupt Disable cleared");
            e.prepare(&*dst, &t(Direction::C2h, 1 << 20, 0)).unwrap();
            e.run_interrupt(&*irq, LONG).unwrap();
        }
        assert!(bytes(&*src) == bytes(&*dst));
        assert_eq!(c.model.irq().sent(), vec![4], "one interrupt per chain");
        // Polling again: no enables in the descriptors, Interrupt Disable back as found.
        e.prepare(&*src, &t(Direction::H2c, 4096, 0)).unwrap();
        e.run(LONG).unwrap();
        assert_ne!(command(&c) & 0x400, 0);
        assert_eq!(c.model.irq().sent(), vec![4]);
        drop(e);
        drop(irq);
        assert_eq!(c.model.violations(), Vec::<String>::new());
    }
}

#[test]
fn an_error_is_raised_by_interrupt_and_cleared_as_umem_c_clears_it() {
    let c = stepped();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let irq = c.dev.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    let buf = a.alloc(4096).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
    c.model.inject_status(0x1_0000); // target abort
    let err = e.run_interrupt(&*irq, LONG).unwrap_err().to_string();
    assert!(err.contains("stopped after 0 of 1 descriptors") && err.contains("target abort"), "{err}");
    assert!(!c.model.irq().level(), "cleared before the unmask");
    assert_eq!(c.model.irq().sent(), vec![1]);
    // The next run is clean.
    e.run_interrupt(&*irq, LONG).unwrap();
    assert_eq!(c.model.violations(), Vec::<String>::new());
}

#[test]
fn a_line_never_acknowledged_fires_once_per_unmask_and_is_flagged() {
    let c = stepped();
    let irq = c.dev.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    let a = c.alloc();
    let (data, mem) = (a.alloc(4096).unwrap(), a.alloc(64).unwrap());
    bytes(&*mem)[..64].copy_from_slice(&desc(
        bus(&*data, 0),
        0,
        4096,
        0,
        bus(&*mem, 0x38),
        GO | SEM | READ | CHAIN_COMP,
    ));
    c.run_chain(bus(&*mem, 0));
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 1);
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 0, "masked while CHAIN_COMPLETE stays set");
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 1);
    assert!(c.model.violations().is_empty(), "one re-send is vfio-pci's: {:?}", c.model.violations());
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 1);
    assert!(c.model.violations().iter().any(|v| v.contains("INTx storm")));
    c.clear();
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 0);
}

#[test]
fn an_interrupt_that_never_comes_is_ended_by_the_progress_watchdog() {
    let c = stepped();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let irq = c.dev.interrupts(e.irq_request()).unwrap();
    let buf = a.alloc(4096).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
    c.model.set_stalled(true);
    let err = e.run_interrupt(&*irq, Duration::from_millis(50)).unwrap_err().to_string();
    assert!(err.contains("0 of 1 descriptors"), "{err}");
    drop(e);
    assert_ne!(command(&c) & 0x400, 0, "Interrupt Disable back as found after the failed run");
}

/// A signal pending before a run (a line raised and cleared with nobody servicing it, as a guest
/// kernel's vfio-pci re-signals at an unmask while Status still reads pending) is dropped, and the
/// line unmasked: vfio-pci masks INTx at each signal, so a dropped one left unanswered kept the
/// line masked and the run's own interrupt never came (the lab's q35-vu, served sim-nvram).
#[test]
fn a_stale_signal_before_a_run_is_dropped_and_the_line_unmasked() {
    let c = stepped();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let irq = c.dev.interrupts(e.irq_request()).unwrap();
    let (data, mem) = (a.alloc(4096).unwrap(), a.alloc(64).unwrap());
    bytes(&*mem)[..64].copy_from_slice(&desc(
        bus(&*data, 0),
        0,
        4096,
        0,
        bus(&*mem, 0x38),
        GO | SEM | READ | CHAIN_COMP,
    ));
    c.run_chain(bus(&*mem, 0));
    c.clear();
    let buf = a.alloc(4096).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
    e.run_interrupt(&*irq, LONG).unwrap();
    assert_eq!(c.model.irq().sent(), vec![2], "the stale fire and the run's own");
}
