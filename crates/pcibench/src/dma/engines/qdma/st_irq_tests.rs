//! Stream queues completing by interrupt against `sim-qdma-st`, in both of libqdma's interrupt
//! modes: H2C ST queues by their software context's interrupt fields (as MM queues), C2H ST
//! queues by their completion context's interrupt enable (trigger mode "every entry") and vector
//! or interrupt ring, re-armed by the CMPT CIDX update's interrupt enable.

use super::st_ctx::CmptCtx;
use super::testkit::{bytes, ctx_read, r, EQDMA, SOFT3};
use super::{IpKind, QdmaEngine, QdmaIntr, QdmaOptions, SwCtx};
use crate::access::{DeviceAccess, IoMode, Mapping};
use crate::direction::Direction;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{DmaAllocator, Engine, Transfer, Work};
use crate::sim::qdma::model::QdmaModelConfig;
use crate::sim::qdma::stream_card::{self, QdmaStreamCard};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(20);

#[test]
fn stream_queues_complete_by_interrupt_direct_and_aggregated() {
    for (misc, intr) in [(SOFT3, QdmaIntr::Direct), (SOFT3, QdmaIntr::Aggregated), (EQDMA, QdmaIntr::Aggregated)] {
        let (card, model) = stream_card::build(QdmaModelConfig { misc_cap: misc, ..Default::default() }).unwrap();
        let dev =
            crate::access::sim::SimDevice::from_card("sim-qdma-st", &crate::sim::CardSpec::info(&QdmaStreamCard), card);
        crate::access::set_bus_master(&dev, true).unwrap();
        let alloc = SimAllocator::new(dev.host_map().clone());
        let opts = QdmaOptions { queues: 2, ring_size: Some(64), simulated: true, intr, ..Default::default() };
        let bar = |b| dev.open_bar(b, Mapping::Uc, IoMode::Mmap).unwrap();
        let mut e = QdmaEngine::new_stream(bar(0), bar(2), &alloc, opts).unwrap();
        assert!(e.completes_by_interrupt());
        let irq = dev.interrupts(e.irq_request()).unwrap();
        let size = 3000u64;
        let stride = super::st::Packets::of(size).stride();
        // H2C: 20 packets the checker compares with the pattern, over 2 queues.
        let src = alloc.alloc((20 * size) as usize).unwrap();
        let one = crate::dma::StreamEnd::transfer_bytes(&e, size);
        for k in 0..20 {
            bytes(&*src)[(k * size) as usize..((k + 1) * size) as usize].copy_from_slice(&one);
        }
        let work = |buf, dir, step| -> Vec<Work> {
            (0..20u64)
                .map(|k| Work {
                    buf,
                    t: Transfer { dir, buf_offset: k * step, card_addr: 0, len: size },
                    queue: (k % 2) as u16,
                })
                .collect()
        };
        crate::dma::StreamEnd::clear_checker(&mut e).unwrap();
        e.prepare_batch(&work(&*src, Direction::H2c, size)).unwrap();
        e.run_interrupt(&*irq, LONG).unwrap();
        assert_eq!(crate::dma::StreamEnd::checker(&mut e).unwrap(), Ok(()), "{intr:?}");
        // C2H: 20 generated packets, each verified, twice (the completion rings re-armed).
        let dst = alloc.alloc((20 * stride) as usize).unwrap();
        for _ in 0..2 {
            e.prepare_batch(&work(&*dst, Direction::C2h, stride)).unwrap();
            e.run_interrupt(&*irq, LONG).unwrap();
            for k in 0..20 {
                let at = (k * stride) as usize;
                assert!(bytes(&*dst)[at..at + size as usize] == one[..], "{intr:?} packet {k}");
            }
        }
        let sent = model.irq().sent();
        let ip = IpKind::from_misc_cap(misc);
        let cm = CmptCtx::from_words(&ctx_read(&*bar(0), 6, 1), ip);
        let h2c = SwCtx::from_words(&ctx_read(&*bar(0), 1, 1));
        let aggregated = intr == QdmaIntr::Aggregated;
        // libqdma's contexts: the completion ring interrupts (en_int, trigger every entry) on its
        // vector or through the interrupt ring; the H2C queue as an MM queue does.
        assert!(cm.en_int && cm.trig_mode == 1 && cm.int_aggr == aggregated, "{intr:?} {cm:?}");
        assert!(h2c.irq && h2c.intr_aggr == aggregated, "{intr:?} {h2c:?}");
        if aggregated {
            assert!(cm.vec == 0 && h2c.vec == 0, "ring index 0: {cm:?} {h2c:?}");
            assert!(sent[1] > 0 && sent[2..].iter().all(|n| *n == 0), "{intr:?}: {sent:?}");
        } else {
            // Rings in order: q0 H2C, q0 C2H, q1 H2C, q1 C2H on vectors 1-4.
            assert!(h2c.vec == 3 && cm.vec == 4, "{h2c:?} {cm:?}");
            assert!(sent[1..5].iter().all(|n| *n > 0), "{intr:?}: {sent:?}");
        }
        assert_eq!(sent[0], 0, "no error interrupt: {sent:?}");
        // Polling again: the completion context loses its interrupt enable.
        e.prepare_batch(&work(&*dst, Direction::C2h, stride)).unwrap();
        e.run(LONG).unwrap();
        assert!(!CmptCtx::from_words(&ctx_read(&*bar(0), 6, 1), ip).en_int);
        drop(e);
        drop(irq);
        assert!(model.violations().is_empty(), "{intr:?}: {:?}", model.violations());
    }
}

#[test]
fn a_stream_queue_whose_interrupt_never_comes_is_stopped_by_the_watchdog() {
    for intr in [QdmaIntr::Direct, QdmaIntr::Aggregated] {
        let (card, model) = stream_card::build(QdmaModelConfig::default()).unwrap();
        let dev =
            crate::access::sim::SimDevice::from_card("sim-qdma-st", &crate::sim::CardSpec::info(&QdmaStreamCard), card);
        crate::access::set_bus_master(&dev, true).unwrap();
        let alloc = SimAllocator::new(dev.host_map().clone());
        let opts = QdmaOptions { queues: 1, ring_size: Some(64), simulated: true, intr, ..Default::default() };
        let bar = |b| dev.open_bar(b, Mapping::Uc, IoMode::Mmap).unwrap();
        let mut e = QdmaEngine::new_stream(bar(0), bar(2), &alloc, opts).unwrap();
        let irq = dev.interrupts(e.irq_request()).unwrap();
        let dst = alloc.alloc(4096).unwrap();
        let t = Transfer { dir: Direction::C2h, buf_offset: 0, card_addr: 0, len: 1024 };
        e.prepare_batch(&[Work { buf: &*dst, t, queue: 0 }]).unwrap();
        // The generator holds: no completion entry, so no interrupt.
        model.set_stalled(Direction::C2h, true);
        let err = e.run_interrupt(&*irq, Duration::from_millis(40)).unwrap_err().to_string();
        assert!(err.contains("no interrupt came") && err.contains("stopped and cleared"), "{intr:?}: {err}");
        // Stopped: the completion context and, aggregated, the ring's context are cleared.
        let ip = IpKind::QdmaSoft;
        assert!(!CmptCtx::from_words(&ctx_read(&*bar(0), 6, 0), ip).en_int, "{intr:?}");
        assert_eq!(ctx_read(&*bar(0), 8, 0)[0] & 1, 0, "{intr:?}: the interrupt ring's context is invalid");
        model.set_stalled(Direction::C2h, false);
    }
}

#[test]
fn a_stream_error_raises_the_error_interrupt_in_either_mode() {
    for intr in [QdmaIntr::Direct, QdmaIntr::Aggregated] {
        let (card, model) = stream_card::build(QdmaModelConfig::default()).unwrap();
        let dev =
            crate::access::sim::SimDevice::from_card("sim-qdma-st", &crate::sim::CardSpec::info(&QdmaStreamCard), card);
        crate::access::set_bus_master(&dev, true).unwrap();
        let alloc = SimAllocator::new(dev.host_map().clone());
        let opts = QdmaOptions { queues: 1, ring_size: Some(64), simulated: true, intr, ..Default::default() };
        let bar = |b| dev.open_bar(b, Mapping::Uc, IoMode::Mmap).unwrap();
        let mut e = QdmaEngine::new_stream(bar(0), bar(2), &alloc, opts).unwrap();
        let irq = dev.interrupts(e.irq_request()).unwrap();
        // An H2C packet from a buffer freed before the run: the card's read fails.
        let src = alloc.alloc(4096).unwrap();
        let t = Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 1024 };
        e.prepare_batch(&[Work { buf: &*src, t, queue: 0 }]).unwrap();
        drop(src);
        let err = e.run_interrupt(&*irq, LONG).unwrap_err().to_string();
        assert!(err.contains("the error interrupt (GLBL_ERR_INT, MSI-X vector 0) fired"), "{intr:?}: {err}");
        assert!(err.contains("DMA engine error"), "{intr:?}: {err}");
        assert_eq!(model.irq().sent()[0], 1, "{intr:?}");
        assert_eq!(r(&*bar(0), 0x248), 0, "{intr:?}: read and cleared");
        let v = model.violations();
        assert!(v.len() == 1 && v[0].contains("descriptor or data read failed"), "{intr:?}: {v:?}");
    }
}
