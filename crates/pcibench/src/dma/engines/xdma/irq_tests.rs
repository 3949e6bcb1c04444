//! XDMA completion by interrupt against the sim card's model (stepped, so every interrupt is
//! signalled inside the register write that caused it): each kind the function offers, an error
//! raised by interrupt, an INTx level that is never acknowledged, an interrupt that never comes,
//! and the enables left as found.

use super::tests::{bytes, ch, desc, dev_with, r, run_raw, w, LONG};
use super::{XdmaEngine, XdmaOptions};
use crate::access::{DeviceAccess, IrqKind, IrqRequest};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{Direction, DmaAllocator, Engine, Transfer};
use crate::sim::xdma::model::XdmaModelConfig;
use std::time::Duration;

fn stepped() -> XdmaModelConfig {
    XdmaModelConfig { stepped: true, ..Default::default() }
}

fn transfer(dir: Direction, len: u64) -> Transfer {
    Transfer { dir, buf_offset: 0, card_addr: 0x1000, len }
}

/// An H2C then C2H round trip by interrupt of `kind` (None: the best offered), verified.
fn round_trip(cfg: XdmaModelConfig, kind: Option<IrqKind>) {
    let (card, bar) = dev_with(cfg);
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let req = IrqRequest { kind, ..eng.irq_request() };
    assert_eq!(req.vectors, 2, "a vector per channel bit: H2C 0 is bit 0, C2H 0 bit 1 (after the one H2C channel)");
    let irq = card.interrupts(req).unwrap();
    assert_eq!(irq.kind(), kind.unwrap_or(IrqKind::MsiX), "{}", irq.describe());
    let (src, dst) = (alloc.alloc(8192).unwrap(), alloc.alloc(8192).unwrap());
    for (i, b) in bytes(&*src).iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    for _ in 0..3 {
        eng.prepare(&*src, &transfer(Direction::H2c, 8192)).unwrap();
        eng.run_interrupt(&*irq, LONG).unwrap();
        eng.prepare(&*dst, &transfer(Direction::C2h, 8192)).unwrap();
        eng.run_interrupt(&*irq, LONG).unwrap();
    }
    assert_eq!(bytes(&*src), bytes(&*dst));
    let sent: u64 = card.xdma_model().irq().sent().iter().sum();
    assert_eq!(sent, 6, "one interrupt per run");
    if irq.kind() == IrqKind::MsiX {
        assert_eq!(card.xdma_model().irq().sent(), vec![3, 3], "H2C on vector 0, C2H on vector 1");
    }
    // Polling again in between disarms: no interrupt, and none missed.
    eng.prepare(&*src, &transfer(Direction::H2c, 8192)).unwrap();
    eng.run(LONG).unwrap();
    assert_eq!(card.xdma_model().irq().sent().iter().sum::<u64>(), 6);
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
}

#[test]
fn completes_by_msix_msi_and_intx_as_libxdma_does() {
    for kind in [None, Some(IrqKind::Msi), Some(IrqKind::Intx)] {
        round_trip(stepped(), kind);
    }
    // The time-driven model raises when the waiter's timer has it look: the same.
    round_trip(XdmaModelConfig::default(), None);
}

#[test]
fn an_error_is_raised_by_interrupt_and_named() {
    let (card, bar) = dev_with(stepped());
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let irq = card.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096)).unwrap();
    bytes(eng.descriptor_memory())[2] = 0; // the magic gone
    let e = eng.run_interrupt(&*irq, LONG).unwrap_err().to_string();
    assert!(e.contains("raised its interrupt on an error") && e.contains("magic_stopped"), "{e}");
    assert_eq!(card.xdma_model().irq().sent(), vec![1]);
    // The status was read and cleared by the handler: the line is not left asserted.
    assert!(!card.xdma_model().irq().level());
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
}

#[test]
fn an_intx_level_never_acknowledged_fires_once_per_unmask_and_is_flagged() {
    let (card, bar) = dev_with(stepped());
    let bar = &*bar;
    let irq = card.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    let mem = SimAllocator::new(card.host_map().clone()).alloc(4096).unwrap();
    let b = |off| mem.bus_range(off, 1).unwrap();
    bytes(&*mem)[..32].copy_from_slice(&desc(0x13, 0, 16, b(512), 0, 0));
    w(bar, 0x90, 0x6); // descriptor stopped and completed request the interrupt
    w(bar, 0x2014, 1); // H2C channel 0 enabled in the IRQ block
    assert_eq!(run_raw(bar, Direction::H2c, b(0), 0, b(1024), 1 | 0x6), 0x6);
    // Level asserted, line masked since it fired: one interrupt, however long it stays up.
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 1);
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 0);
    // Unmasked with the status still set: it fires again (once: vfio-pci's re-send), and again at the next
    // unmask with nothing acknowledged, which the model calls a storm.
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 1);
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 1);
    let v = card.xdma_model().violations();
    assert!(v.len() == 1 && v[0].contains("INTx storm"), "{v:?}");
    // The vendor's service (status read through the RC alias) drops the level: unmask is quiet.
    r(bar, ch(Direction::H2c, 0x44));
    irq.unmask().unwrap();
    assert_eq!(irq.wait(Duration::ZERO).unwrap().total(), 0);
    assert_eq!(card.xdma_model().violations().len(), 1);
}

#[test]
fn an_interrupt_that_never_comes_is_ended_by_the_progress_watchdog() {
    let (card, bar) = dev_with(stepped());
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let irq = card.interrupts(IrqRequest::any(2)).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    card.xdma_model().set_stalled(Direction::H2c, 0, true).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096)).unwrap();
    let e = eng.run_interrupt(&*irq, Duration::from_millis(50)).unwrap_err().to_string();
    assert!(e.contains("no interrupt came") && e.contains("0 of 1 descriptors"), "{e}");
}

#[test]
fn a_completion_whose_interrupt_was_disabled_behind_the_driver_is_named() {
    let (card, bar) = dev_with(stepped());
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let irq = card.interrupts(IrqRequest::any(2)).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    let bar = card.open_bar(4, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096)).unwrap();
    eng.run_interrupt(&*irq, LONG).unwrap();
    w(&*bar, 0x2018, 1);
    let e = eng.run_interrupt(&*irq, LONG).unwrap_err().to_string();
    assert!(e.contains("without raising its interrupt") && e.contains("channel enable 0x2"), "{e}");
}

#[test]
fn the_enables_are_left_as_found_when_the_engine_goes() {
    let (card, bar) = dev_with(stepped());
    let alloc = SimAllocator::new(card.host_map().clone());
    let regs = card.open_bar(4, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    let regs = &*regs;
    // Someone else's channel enabled and a vector programmed before we came.
    w(regs, 0x2014, 1 << 3);
    w(regs, 0x20a0, 0x0400_0000);
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let found = [r(regs, 0x2010), r(regs, 0x20a0), r(regs, 0x0090), r(regs, 0x1090)];
    let irq = card.interrupts(eng.irq_request()).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::C2h, 4096)).unwrap();
    eng.run_interrupt(&*irq, LONG).unwrap();
    assert_eq!(r(regs, 0x2010), 1 << 3 | 0b11, "armed: H2C 0 and C2H 0 (bit 1) beside the other");
    assert_eq!(r(regs, 0x20a0), 0x0400_0100, "C2H channel 0 on MSI-X vector 1, the other byte kept");
    // Interrupted mid-run (Ctrl-C: the runner stops the engine, then drops it).
    card.xdma_model().set_stalled(Direction::C2h, 0, true).unwrap();
    eng.prepare(&*buf, &transfer(Direction::C2h, 4096)).unwrap();
    assert!(eng.run_interrupt(&*irq, Duration::from_millis(30)).is_err());
    eng.stop().unwrap();
    drop(eng);
    assert_eq!([r(regs, 0x2010), r(regs, 0x20a0), r(regs, 0x0090), r(regs, 0x1090)], found);
    drop(irq);
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
}

/// An interrupt path whose messages arrive late: the first `late` waits return nothing (as if
/// the message were still on its way: a preempted model worker, a slow interrupt path), then
/// what fired comes through.
struct Late<'a> {
    inner: &'a dyn crate::access::Interrupts,
    late: std::sync::atomic::AtomicU32,
}

impl crate::access::Interrupts for Late<'_> {
    fn kind(&self) -> IrqKind {
        self.inner.kind()
    }
    fn vectors(&self) -> u32 {
        self.inner.vectors()
    }
    fn wait(&self, timeout: Duration) -> crate::Result<crate::access::Fired> {
        use std::sync::atomic::Ordering;
        if !timeout.is_zero()
            && self.late.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
        {
            return Ok(crate::access::Fired::none(self.inner.vectors()));
        }
        self.inner.wait(timeout)
    }
    fn unmask(&self) -> crate::Result<()> {
        self.inner.unmask()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[test]
fn an_interrupt_requested_but_late_is_waited_for_not_called_missing() {
    let (card, bar) = dev_with(stepped());
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let inner = card.interrupts(IrqRequest::any(2)).unwrap();
    let irq = Late { inner: &*inner, late: 5.into() };
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096)).unwrap();
    // Stepped: the channel is idle and requesting before the first wait; five empty waits
    // (more than the two quiet slices) must not end the run.
    eng.run_interrupt(&irq, LONG).unwrap();
    assert_eq!(irq.late.load(std::sync::atomic::Ordering::Acquire), 0, "every late wait was taken");
}
