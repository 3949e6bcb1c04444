//! The sim engines progress with time, not with a thread of their own (issue #52): on a fake
//! clock an engine completes exactly the descriptors its datapath has finished by then, however
//! late the host looks, and an interrupt fires at its modeled completion time (the waiter's
//! timer), with the host thread busy elsewhere meanwhile.

use super::xdma::tests::{bytes, ch, desc, r, w, Card, LONG};
use super::xdma::XdmaOptions;
use crate::access::{BarRegion, DeviceAccess, IoMode, IrqKind, IrqRequest, Mapping};
use crate::clock::{Clock, FakeClock};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine, Transfer};
use crate::sim::datapath::ModelClock;
use crate::sim::xdma::card::SIM_DMA_BAR;
use crate::sim::xdma::model::XdmaModelConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// XDMA's 2 bytes a nanosecond and 32-byte descriptors: a 4 KiB descriptor takes 2064 ns.
const PAGE_NS: u64 = (4096 + 32) / 2;

fn fake() -> (Arc<FakeClock>, ModelClock) {
    // Reading the clock costs nothing: time moves only when the test says.
    let clock = Arc::new(FakeClock::new(0, 0, 1));
    (clock.clone(), ModelClock::new(clock))
}

fn card(clock: ModelClock) -> (Card, Box<dyn BarRegion>) {
    let card = Card::with_xdma_on(XdmaModelConfig::default(), clock).unwrap();
    crate::access::set_bus_master(&*card, true).unwrap();
    let bar = card.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    (card, bar)
}

/// Completed-descriptor count of H2C channel 0 (+0x48): reading it is the host looking.
fn completed(bar: &dyn BarRegion) -> u32 {
    r(bar, ch(Direction::H2c, 0x48))
}

#[test]
fn a_model_on_a_fake_clock_completes_exactly_the_descriptors_due() {
    let (clock, model_clock) = fake();
    let (card, _) = card(model_clock);
    let alloc = SimAllocator::scattered(card.host_map().clone());
    let bar = card.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    let mut eng = super::xdma::XdmaEngine::new(bar, &alloc, XdmaOptions::default()).unwrap();
    let src = alloc.alloc(4 * 4096).unwrap();
    for (i, b) in bytes(&*src).iter_mut().enumerate() {
        *b = (i * 5 + 1) as u8;
    }
    eng.prepare(&*src, &Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: 4 * 4096 }).unwrap();
    assert_eq!(eng.chain().unwrap().descriptors.len(), 4, "one descriptor per scattered page");
    eng.submit().unwrap();
    let look = card.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    let card_page = |k: u64| {
        let mut got = vec![0u8; 4096];
        card.xdma_model().card_read(k * 4096, &mut got).unwrap();
        got == bytes(&*src)[(k * 4096) as usize..((k + 1) * 4096) as usize]
    };
    assert_eq!(completed(&*look), 0, "nothing is due at the run's start");
    for k in 1..=4u32 {
        clock.advance(PAGE_NS - 1);
        assert_eq!(completed(&*look), k - 1, "one nanosecond before descriptor {k} is due");
        clock.advance(1);
        assert_eq!(completed(&*look), k, "descriptor {k} is due");
        // Its data moved when it completed, not before: the next page is still untouched.
        assert!(card_page(u64::from(k) - 1), "page {k} on the card");
        if k < 4 {
            assert!(!card_page(u64::from(k)), "page {} not yet", k + 1);
        }
    }
    // The channel idles; the host looking much later changes nothing.
    clock.advance(1_000_000);
    assert_eq!(completed(&*look), 4);
    assert_eq!(r(&*look, ch(Direction::H2c, 0x40)) & 1, 0, "not busy");
    // The driver sees its writeback and ends the run.
    eng.wait(LONG).unwrap_or_else(|e| panic!("the run's completion: {e}"));
}

/// The H2C run of `len` bytes from `src` into card address 0 with its interrupt armed (H2C
/// channel 0 is bit 0 of the IRQ block, on vector 0): one descriptor with STOP and COMPLETED.
fn start_with_interrupt(
    bar: &dyn BarRegion,
    alloc: &dyn DmaAllocator,
    src: &dyn DmaBuffer,
    len: u32,
) -> Box<dyn DmaBuffer> {
    let ring = alloc.alloc(4096).unwrap();
    let bus = |b: &dyn DmaBuffer| b.bus_range(0, 1).unwrap();
    bytes(&*ring)[..32].copy_from_slice(&desc(0x3, 0, len, bus(src), 0, 0));
    let (ring_bus, wb) = (bus(&*ring), bus(&*ring) + 2048);
    w(bar, ch(Direction::H2c, 0x0c), 1); // run cleared (the run before), status read-cleared
    r(bar, ch(Direction::H2c, 0x44));
    w(bar, 0x2010, 1); // IRQ block channel interrupt enable: H2C 0
    w(bar, ch(Direction::H2c, 0x90), 0x6); // interrupt on descriptor stopped / completed
    w(bar, ch(Direction::H2c, 0x88), wb as u32);
    w(bar, ch(Direction::H2c, 0x8c), (wb >> 32) as u32);
    w(bar, 0x4080, ring_bus as u32);
    w(bar, 0x4084, (ring_bus >> 32) as u32);
    w(bar, 0x4088, 0);
    // Run, ie_desc_stopped and ie_desc_completed, poll-mode writeback.
    w(bar, ch(Direction::H2c, 0x04), 1 | 0x6 | 1 << 26);
    ring
}

#[test]
fn an_interrupt_fires_at_its_modeled_time_however_late_the_host_looks() {
    let (clock, model_clock) = fake();
    let (card, bar) = card(model_clock);
    let alloc = SimAllocator::new(card.host_map().clone());
    let irq = card.interrupts(IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
    let src = alloc.alloc(64 << 10).unwrap();
    let _ring = start_with_interrupt(&*bar, &alloc, &*src, 64 << 10);
    let due = crate::sim::xdma::model::DATAPATH.desc_ns(64 << 10);
    assert!(irq.wait(Duration::ZERO).unwrap().is_empty(), "nothing at the run's start");
    clock.advance(due - 1);
    assert!(irq.wait(Duration::ZERO).unwrap().is_empty(), "a nanosecond early");
    // The host was busy elsewhere for a millisecond past the completion: when it looks, the
    // interrupt has fired, and the engine's own clock counted the run's modeled time alone.
    clock.advance(1 + 1_000_000);
    assert_eq!(irq.wait(Duration::ZERO).unwrap().vector(0), 1, "fired");
    assert_eq!(card.xdma_model().irq().sent()[0], 1);
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
}

#[test]
fn on_the_real_clock_the_waiters_timer_fires_the_interrupt_while_the_host_thread_is_busy() {
    let (card, bar) = card(ModelClock::real());
    let alloc = SimAllocator::new(card.host_map().clone());
    let irq = card.interrupts(IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
    let src = alloc.alloc(1 << 20).unwrap();
    // A 1 MiB run takes 524 µs of modeled time. The waiter sleeps on its timer until then: no
    // thread of the model's needs the CPU, so it fires (well before the long timeout).
    let _ring = start_with_interrupt(&*bar, &alloc, &*src, 1 << 20);
    assert_eq!(irq.wait(LONG).unwrap().vector(0), 1, "fired by the waiter's timer, not the timeout");
    // Again, with the host thread busy past the completion time without looking: it finds the
    // interrupt there at once.
    let _ring = start_with_interrupt(&*bar, &alloc, &*src, 1 << 20);
    // Its modeled completion (524 µs; later under the shaker), read without looking.
    let due = card.due_in().expect("a run under way");
    let t = Instant::now();
    while t.elapsed() < due + Duration::from_millis(1) {
        std::hint::spin_loop();
    }
    assert_eq!(irq.wait(Duration::ZERO).unwrap().vector(0), 1);
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
}

#[test]
fn a_qdma_model_on_a_fake_clock_completes_exactly_the_descriptors_due_and_writes_back_the_burst() {
    use super::qdma::testkit::{self as k, bus, ring_doorbell, status, take};
    let (clock, model_clock) = fake();
    let card = k::Card::on(crate::sim::qdma::model::QdmaModelConfig::default(), model_clock);
    let bar = &*card.bar();
    let alloc = card.alloc();
    let (ring, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(8192).unwrap());
    for (i, b) in k::bytes(&*data).iter_mut().enumerate() {
        *b = (i * 3 + 7) as u8;
    }
    take(bar, 4);
    k::start(bar, Direction::H2c, 3, bus(&*ring, 0));
    // Three descriptors of queue 3: 100, 4000 and 4092 bytes, the second at card 0x1000.
    for (i, (off, card_at, len)) in
        [(0u64, 0u64, 100u32), (100, 0x1000, 4000), (4100, 0x2000, 4092)].into_iter().enumerate()
    {
        k::bytes(&*ring)[i * 32..i * 32 + 32].copy_from_slice(&k::desc(bus(&*data, off), card_at, len, true));
    }
    ring_doorbell(bar, Direction::H2c, 3, 3);
    // QDMA's 16 bytes a nanosecond and 32-byte descriptors: 132, 4032 and 4124 bytes, each rounded
    // up to a nanosecond: due at 9, 261 and 519 ns after the doorbell.
    let completed = || k::r(bar, 0x1248);
    let second_on_card = || {
        let mut got = vec![0u8; 4000];
        card.model.card_read(0x1000, &mut got).unwrap();
        got[..] == k::bytes(&*data)[100..4100]
    };
    for (at, done) in [(8, 0), (9, 1), (260, 1), (261, 2), (518, 2)] {
        clock.advance(at - clock.now_ns());
        assert_eq!(completed(), done, "at {at} ns");
        assert_eq!(second_on_card(), done >= 2, "the second descriptor's data at {at} ns");
        assert_eq!(status(&*ring), (0, 0), "the burst's status is written back at its end, not at {at} ns");
    }
    clock.advance(1);
    assert_eq!(completed(), 3);
    assert_eq!(status(&*ring), (3, 3), "written back when the burst's last descriptor was due");
    assert_eq!(card.model.violations(), Vec::<String>::new());
}
