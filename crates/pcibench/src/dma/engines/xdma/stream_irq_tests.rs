//! XDMA stream channels completing by interrupt against `sim-xdma-st`'s model (stepped where the
//! test fixes the order of events: every interrupt is signalled inside the register write that
//! caused it): each kind, one interrupt per channel per batch, an error raised by interrupt, an
//! interrupt that never comes, one disabled behind the driver, and the enables left as found.

use super::super::tests::{bytes, dev_with, pattern, r, w, Card, LONG};
use super::XdmaStreamEngine;
use crate::access::{DeviceAccess, IoMode, IrqKind, IrqRequest, Mapping};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::sim::xdma::model::XdmaModelConfig;
use std::time::Duration;

fn card(stepped: bool) -> (Card, SimAllocator, XdmaStreamEngine) {
    let (dev, _) = dev_with(XdmaModelConfig { stepped, stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    let bar = dev.open_bar(4, Mapping::Uc, IoMode::Mmap).unwrap();
    let e = XdmaStreamEngine::new(bar, &alloc, 0, 1 << 20).unwrap();
    (dev, alloc, e)
}

/// Four packets of one batch (`(host offset, window offset, length)`): a short one, one over two
/// C2H buffers, a 1-byte one, one larger than the loopback's FIFO.
const BATCH: [(u64, u64, u64); 4] = [(0, 0, 64), (100, 64, 5000), (6000, 6000, 1), (8192, 8192, 40_000)];

fn batch(buf: &dyn DmaBuffer, dir: Direction) -> Vec<Work<'_>> {
    BATCH
        .iter()
        .map(|&(buf_offset, card_addr, len)| Work { buf, t: Transfer { dir, buf_offset, card_addr, len }, queue: 0 })
        .collect()
}

/// A batch out and back by interrupt of `kind` (None: the best offered): the bytes survive,
/// and each run raised one interrupt on H2C and one on C2H, whatever its packets.
fn round_trip(stepped: bool, kind: Option<IrqKind>) {
    let (dev, alloc, mut e) = card(stepped);
    let req = IrqRequest { kind, ..e.irq_request() };
    assert_eq!(req.vectors, 2, "H2C 0 is IRQ block bit 0, C2H 0 bit 1 (after the one H2C channel)");
    let irq = dev.interrupts(req).unwrap();
    assert_eq!(irq.kind(), kind.unwrap_or(IrqKind::MsiX), "{}", irq.describe());
    let (src, dst) = (alloc.alloc(1 << 16).unwrap(), alloc.alloc(1 << 16).unwrap());
    pattern(11, &mut bytes(&*src)[..1 << 16]);
    for _ in 0..2 {
        bytes(&*dst).fill(0);
        e.prepare_batch(&batch(&*src, Direction::H2c)).unwrap();
        e.run_interrupt(&*irq, LONG).unwrap();
        e.prepare_batch(&batch(&*dst, Direction::C2h)).unwrap();
        e.run_interrupt(&*irq, LONG).unwrap();
        for (off, _, len) in BATCH {
            let at = off as usize..(off + len) as usize;
            assert!(bytes(&*src)[at.clone()] == bytes(&*dst)[at], "packet at {off} ({kind:?}, stepped {stepped})");
        }
    }
    let sent = dev.xdma_model().irq().sent();
    // MSI-X and MSI send a message per rising request: one per channel per run. INTx is one level
    // for both: stepped, both channels request before the handler runs, so it rises once a run.
    let per_run = if irq.kind() == IrqKind::Intx && stepped { 1 } else { 2 };
    let total = sent.iter().sum::<u64>();
    assert_eq!(total, 4 * per_run, "4 runs of 4 packets ({kind:?})");
    if irq.kind() == IrqKind::MsiX {
        assert_eq!(sent, vec![4, 4], "H2C on MSI-X vector 0, C2H on vector 1");
    }
    // Polling again disarms first: no interrupt raised, none missed.
    e.prepare_batch(&batch(&*src, Direction::H2c)).unwrap();
    e.run(LONG).unwrap();
    assert_eq!(dev.xdma_model().irq().sent().iter().sum::<u64>(), total);
    assert_eq!(dev.xdma_model().violations(), Vec::<String>::new());
}

#[test]
fn a_batch_completes_by_msix_msi_and_intx_with_one_interrupt_per_channel() {
    for kind in [None, Some(IrqKind::Msi), Some(IrqKind::Intx)] {
        round_trip(true, kind);
    }
    // Threaded, the channels raise from their workers: the same, the wake-ups across threads.
    round_trip(false, None);
}

/// A full batch (1024 packets of 64 B, as the runner keeps in flight) raises once per channel:
/// the packets' EOPs raise nothing, only the chain's last descriptor carries COMPLETED.
#[test]
fn a_batch_of_1024_packets_raises_once_per_channel() {
    let (dev, alloc, mut e) = card(true);
    let irq = dev.interrupts(e.irq_request()).unwrap();
    let buf = alloc.alloc(1024 * 64).unwrap();
    let work: Vec<Work> = (0..1024u64)
        .map(|i| Work {
            buf: &*buf,
            t: Transfer { dir: Direction::H2c, buf_offset: i * 64, card_addr: i * 64, len: 64 },
            queue: 0,
        })
        .collect();
    e.prepare_batch(&work).unwrap();
    e.run_interrupt(&*irq, LONG).unwrap();
    assert_eq!(dev.xdma_model().irq().sent(), vec![1, 1], "one MSI-X message on H2C's vector, one on C2H's");
    assert_eq!(dev.xdma_model().violations(), Vec::<String>::new());
}

/// A C2H descriptor the engine refuses (its magic gone) stops C2H with an error it raises; the
/// handler reads and clears it, the run fails naming it, and no request is left asserted.
#[test]
fn an_error_is_raised_by_interrupt_and_named() {
    let (dev, alloc, mut e) = card(true);
    let irq = dev.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 64 }).unwrap();
    bytes(&*e.c2h_desc)[2] = 0; // the first C2H descriptor's magic gone
    let err = e.run_interrupt(&*irq, LONG).unwrap_err().to_string();
    assert!(err.contains("c2h stream channel 0 raised its interrupt on an error"), "{err}");
    assert!(err.contains("magic_stopped") && err.contains("#0 not written"), "{err}");
    assert!(!dev.xdma_model().irq().level(), "the handler cleared every cause it serviced");
    assert_eq!(dev.xdma_model().violations(), Vec::<String>::new());
}

/// C2H hung (the loopback returns nothing): H2C raises, C2H never does, and the progress
/// watchdog ends the run with both channels stopped and what the records said.
#[test]
fn an_interrupt_that_never_comes_is_ended_by_the_progress_watchdog() {
    let (dev, alloc, mut e) = card(false);
    let irq = dev.interrupts(e.irq_request()).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    dev.xdma_model().set_stalled(Direction::C2h, 0, true).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 4096 }).unwrap();
    let err = e.run_interrupt(&*irq, Duration::from_millis(50)).unwrap_err().to_string();
    // C2H never raises; H2C has raised unless its worker had not run yet when the watchdog fired
    // (a loaded host), so the words name c2h last either way.
    assert!(err.contains("no interrupt came from") && err.contains("c2h and"), "{err}");
    assert!(err.contains("loopback example design"), "{err}");
    assert!(err.contains("C2H writeback records: #0 not written"), "{err}");
    assert!(!dev.xdma_model().busy(Direction::C2h, 0).unwrap(), "the engine was stopped");
    assert_eq!(dev.xdma_model().violations(), Vec::<String>::new());
}

/// A channel enable cleared behind the driver's back: the run goes idle with no interrupt, and
/// the error names the enables it reads.
#[test]
fn a_completion_whose_interrupt_was_disabled_behind_the_driver_is_named() {
    let (dev, alloc, mut e) = card(true);
    let irq = dev.interrupts(e.irq_request()).unwrap();
    let regs = dev.open_bar(4, Mapping::Uc, IoMode::Mmap).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 256 }).unwrap();
    e.run_interrupt(&*irq, LONG).unwrap();
    w(&*regs, 0x2018, 0b10); // C2H 0's enable cleared
    let err = e.run_interrupt(&*irq, LONG).unwrap_err().to_string();
    assert!(err.contains("c2h stream channel 0 went idle after 1 of 1 descriptors without raising"), "{err}");
    assert!(err.contains("channel enable 0x1"), "{err}");
}

/// Armed for the run, and after a run interrupted mid-way (Ctrl-C: the runner stops the engine,
/// then drops it) every register arming changed is as it was found, another channel's included.
#[test]
fn the_enables_are_left_as_found_when_the_engine_goes() {
    let (dev, _) = dev_with(XdmaModelConfig { stream: true, ..Default::default() });
    let alloc = SimAllocator::new(dev.host_map().clone());
    let regs = dev.open_bar(4, Mapping::Uc, IoMode::Mmap).unwrap();
    let regs = &*regs;
    // Someone else's channel enabled and a vector programmed before we came.
    w(regs, 0x2014, 1 << 3);
    w(regs, 0x20a0, 0x0400_0000);
    let mut e = XdmaStreamEngine::new(dev.open_bar(4, Mapping::Uc, IoMode::Mmap).unwrap(), &alloc, 0, 1 << 16).unwrap();
    let found = [r(regs, 0x2010), r(regs, 0x20a0), r(regs, 0x0090), r(regs, 0x1090)];
    let irq = dev.interrupts(e.irq_request()).unwrap();
    let buf = alloc.alloc(4096).unwrap();
    e.prepare(&*buf, &Transfer { dir: Direction::C2h, buf_offset: 0, card_addr: 0, len: 4096 }).unwrap();
    e.run_interrupt(&*irq, LONG).unwrap();
    assert_eq!(r(regs, 0x2010), 1 << 3 | 0b11, "armed: H2C 0 and C2H 0 (bit 1) beside the other");
    assert_eq!(r(regs, 0x20a0), 0x0400_0100, "C2H channel 0 on MSI-X vector 1, the other byte kept");
    dev.xdma_model().set_stalled(Direction::C2h, 0, true).unwrap();
    assert!(e.run_interrupt(&*irq, Duration::from_millis(30)).is_err());
    e.stop().unwrap();
    drop(e);
    assert_eq!([r(regs, 0x2010), r(regs, 0x20a0), r(regs, 0x0090), r(regs, 0x1090)], found);
    drop(irq);
    assert_eq!(dev.xdma_model().violations(), Vec::<String>::new());
}
