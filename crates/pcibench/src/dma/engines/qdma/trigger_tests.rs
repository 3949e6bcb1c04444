//! Issue 50 item 13: the completion ring's triggers on `sim-qdma-st`, on a fake clock so that
//! when each entry is written and when the status descriptor and interrupt come are exact. The
//! rings are programmed by hand as libqdma programs them (the C2H tables, the tick, the
//! completion context's mode and indexes), then the driver runs each trigger on each IP.

use super::st_ctx::{CmptCtx, PrefetchCtx};
use super::testkit::{bus, bytes, ctx_read, ctx_write, r, w, CPM5, EQDMA, SOFT3};
use super::{IpKind, QdmaEngine, QdmaOptions, SwCtx};
use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess, Interrupts, IoMode, IrqKind, IrqRequest, Mapping};
use crate::clock::FakeClock;
use crate::direction::Direction;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{DmaAllocator, DmaBuffer, Engine, Transfer, Work};
use crate::sim::datapath::Datapath;
use crate::sim::datapath::ModelClock;
use crate::sim::qdma::model::{QdmaModel, QdmaModelConfig};
use crate::sim::qdma::stream_card::{self, QdmaStreamCard};
use std::sync::Arc;
use std::time::Duration;

/// The stream card's declared datapath.
fn datapath() -> Datapath {
    stream_card::SHAPE.datapath.expect("a sim card declares its datapath")
}

/// Model time a 64-byte packet takes on the datapath (its fetch and bytes: 6 ns).
fn small() -> u64 {
    datapath().desc_ns(64)
}

struct Ring {
    clock: Arc<FakeClock>,
    _dev: SimDevice,
    model: Arc<QdmaModel>,
    cfg: Box<dyn BarRegion>,
    user: Box<dyn BarRegion>,
    irq: Box<dyn Interrupts>,
    cmpt: Box<dyn DmaBuffer>,
    _mem: [Box<dyn DmaBuffer>; 2],
}

/// A C2H ST queue 0 with a 64-entry completion ring in `mode` (timer index 2, counter index 1),
/// its interrupt on MSI-X vector 1 and armed, 63 receive buffers of 4 KiB posted; the C2H
/// tables and tick written as the vendor writes them unless `tick` says otherwise.
fn ring(mode: u8, tick: u32) -> Ring {
    let clock = Arc::new(FakeClock::new(0, 0, 1));
    let (card, model) = stream_card::build_with(QdmaModelConfig::default(), ModelClock::new(clock.clone())).unwrap();
    let dev = SimDevice::from_card("sim-qdma-st", &crate::sim::CardSpec::info(&QdmaStreamCard), card);
    crate::access::set_bus_master(&dev, true).unwrap();
    let irq = dev.interrupts(IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
    let (cfg, user) =
        (dev.open_bar(0, Mapping::Uc, IoMode::Mmap).unwrap(), dev.open_bar(2, Mapping::Uc, IoMode::Mmap).unwrap());
    let alloc = SimAllocator::new(dev.host_map().clone());
    let (desc, cmpt, data) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap(), alloc.alloc(64 << 12).unwrap());
    let bar = &*cfg;
    ctx_write(bar, 12, 0, &[0, 4]);
    for i in 0..16 {
        w(bar, 0xa00 + 4 * i, super::regs::VENDOR_C2H_TIMERS[i as usize]);
        w(bar, 0xa40 + 4 * i, super::regs::VENDOR_C2H_COUNTERS[i as usize]);
        w(bar, 0xab0 + 4 * i, super::regs::VENDOR_C2H_BUF_SIZES[i as usize]);
    }
    w(bar, 0xb0c, tick);
    let sw = SwCtx {
        enabled: true,
        fetch_credit: true,
        fetch_max: 7,
        ring_idx: 1,
        ring_base: bus(&*desc, 0),
        ..Default::default()
    };
    ctx_write(bar, 0, 0, &sw.words());
    ctx_write(bar, 7, 0, &PrefetchCtx { valid: true, ..Default::default() }.words());
    let cm = CmptCtx {
        en_stat_desc: true,
        en_int: true,
        trig_mode: mode,
        timer_idx: 2,
        counter_idx: 1,
        color: true,
        ring_idx: 1,
        base: bus(&*cmpt, 0),
        valid: true,
        vec: 1,
        ..Default::default()
    };
    ctx_write(bar, 6, 0, &cm.words(IpKind::QdmaSoft));
    for k in 0..63u64 {
        bytes(&*desc)[k as usize * 8..k as usize * 8 + 8].copy_from_slice(&bus(&*data, k << 12).to_le_bytes());
    }
    w(bar, 0x18008, 63);
    // The first CIDX update, as the driver's at queue start: index 0, the interrupt armed.
    w(bar, 0x1800c, (mode as u32) << 24 | 2 << 20 | 1 << 16 | 1 << 27 | 1 << 28);
    Ring { clock, _dev: dev, model, cfg, user, irq, cmpt, _mem: [desc, data] }
}

impl Ring {
    /// The example design's generator: `count` packets of `len` bytes to queue 0.
    fn generate(&self, len: u32, count: u32) {
        for (off, v) in [(0x0, 0), (0x4, len), (0x20, count), (0x8, 2)] {
            w(&*self.user, off, v);
        }
    }

    /// Time moves to `t` (model ns); the host looks (a register read): what is due happens.
    fn at(&self, t: u64) {
        let now = crate::clock::Clock::now_ns(&*self.clock);
        self.clock.advance(t.checked_sub(now).expect("time moves forward"));
        r(&*self.cfg, 0x248);
    }

    /// Completion entries written so far.
    fn written(&self) -> u64 {
        self.model.stream_counts().2
    }

    /// The producer index the status descriptor (after the 64th entry) reports.
    fn reported(&self) -> u32 {
        u32::from_le_bytes(bytes(&*self.cmpt)[64 * 8..64 * 8 + 4].try_into().unwrap()) & 0xffff
    }

    /// Interrupts on the ring's vector since the last look.
    fn fired(&self) -> u64 {
        self.irq.wait(Duration::ZERO).unwrap().vector(1)
    }

    /// The driver takes entries up to `cidx` and re-arms the interrupt, carrying `mode`.
    fn give_back(&self, cidx: u32, mode: u32) {
        w(&*self.cfg, 0x1800c, cidx | mode << 24 | 2 << 20 | 1 << 16 | 1 << 27 | 1 << 28);
    }
}

#[test]
fn item13_every_entry_is_reported_when_it_is_written() {
    let s = ring(1, 25);
    s.generate(64, 3);
    for k in 1..=3u64 {
        s.at(k * small() - 1);
        assert_eq!((s.written(), s.reported()), (k - 1, k as u32 - 1), "a nanosecond before entry {k}");
        s.at(k * small());
        assert_eq!((s.written(), s.reported()), (k, k as u32), "entry {k} and its report together");
    }
    // One interrupt outstanding: the first entry's, the other two remembered until the CIDX update,
    // which finds entries unread and reports again.
    assert_eq!(s.fired(), 1);
    s.give_back(1, 1);
    assert_eq!(s.fired(), 1, "entries 2 and 3 unread: reported again");
    s.give_back(3, 1);
    assert_eq!(s.fired(), 0, "nothing unread: no interrupt");
    assert!(s.model.violations().is_empty(), "{:?}", s.model.violations());
}

#[test]
fn item13_user_trigger_reports_the_completions_the_design_marks() {
    let s = ring(3, 25);
    // C2H_COMPLETION_SIZE bit 3 clear: the design asks for nothing, and nothing is reported,
    // however long the host waits.
    s.generate(64, 2);
    s.at(1_000_000);
    assert_eq!((s.written(), s.reported(), s.fired()), (2, 0, 0));
    // Set: each completion carries the user trigger.
    w(&*s.user, 0x50, 1 << 3);
    assert_eq!(r(&*s.user, 0x50), 1 << 3);
    s.generate(64, 2);
    s.at(1_000_000 + small());
    assert_eq!((s.written(), s.reported(), s.fired()), (3, 3, 1), "the first marked entry reports all three");
    s.at(1_000_000 + 2 * small());
    assert_eq!((s.written(), s.reported(), s.fired()), (4, 4, 0), "reported; its interrupt waits for a CIDX update");
    s.give_back(3, 3);
    assert_eq!(s.fired(), 1, "the remembered trigger, with an entry unread");
    s.give_back(4, 3);
    assert_eq!(s.fired(), 0);
    assert!(s.model.violations().is_empty(), "{:?}", s.model.violations());
}

#[test]
fn item13_timer_trigger_fires_its_table_time_after_the_first_unreported_entry() {
    // Timer index 2: C2H_TIMER_CNT[2] = 4 ticks of 25 cycles of the 250 MHz clock, 400 ns.
    let s = ring(4, 25);
    let timer = 4 * 25 * 4;
    s.generate(64, 3);
    s.at(3 * small());
    assert_eq!((s.written(), s.reported(), s.fired()), (3, 0, 0), "entries written, nothing reported");
    s.at(small() + timer - 1);
    assert_eq!((s.reported(), s.fired()), (0, 0), "a nanosecond before the timer");
    s.at(small() + timer);
    assert_eq!((s.reported(), s.fired()), (3, 1), "the timer, 400 ns after the first entry");
    s.give_back(3, 4);
    assert_eq!(s.fired(), 0, "nothing unread");
    // 4 KiB packets, 258 ns each, and a host that looks late: the report is the timer's moment's.
    let t0 = 10_000;
    s.at(t0);
    s.generate(4096, 5);
    let pkt = datapath().desc_ns(4096);
    s.at(t0 + 4 * pkt + 10);
    // The first timer ran from entry 1 and fired before entry 3; entry 3 started the next,
    // which has not fired: 4 entries written, 2 reported.
    assert!(pkt + timer < 3 * pkt && 3 * pkt + timer > 4 * pkt + 10);
    assert_eq!((s.written(), s.reported()), (3 + 4, 3 + 2));
    s.at(t0 + 10 * pkt);
    assert_eq!((s.written(), s.reported()), (8, 8), "the rest, by the timers");
    assert!(s.model.violations().is_empty(), "{:?}", s.model.violations());
    // The tick unwritten (0): the model flags a timer that counts no time.
    let s = ring(4, 0);
    s.generate(64, 1);
    s.at(small());
    let v = s.model.violations();
    assert!(v.len() == 1 && v[0].contains("C2H_INT_TIMER_TICK (0xb0c) 0 cycles"), "{v:?}");
}

#[test]
fn item13_count_trigger_reports_at_its_threshold_and_the_timer_the_rest() {
    // Timer_Count, counter index 1: C2H_CNT_TH[1] = 4 unread entries; the timer as above.
    let s = ring(5, 25);
    s.generate(64, 6);
    s.at(3 * small());
    assert_eq!((s.written(), s.reported(), s.fired()), (3, 0, 0), "3 unread: under the threshold");
    s.at(4 * small());
    assert_eq!((s.written(), s.reported(), s.fired()), (4, 4, 1), "4 unread");
    s.at(6 * small());
    assert_eq!((s.written(), s.reported()), (6, 6), "at least 4 unread at each entry since");
    // Given back, carrying "every" in the update: without `full_upd` only the index counts.
    s.give_back(6, 1);
    let t0 = 1000;
    s.at(t0);
    s.generate(64, 2);
    s.at(t0 + small() + 399);
    assert_eq!((s.written(), s.reported()), (8, 6), "2 unread: the count waits, and so does the timer");
    s.at(t0 + small() + 400);
    assert_eq!((s.reported(), s.fired()), (8, 1), "the timer reports the rest");
    assert!(s.model.violations().is_empty(), "{:?}", s.model.violations());
}

#[test]
fn item13_the_driver_runs_each_trigger_on_each_ip_and_programs_it_as_libqdma_does() {
    for misc in [SOFT3, EQDMA, CPM5] {
        for spec in ["every", "user", "timer:2", "count:1"] {
            let t: super::CmptTrigger = spec.parse().unwrap();
            let (card, model) = stream_card::build(QdmaModelConfig { misc_cap: misc, ..Default::default() }).unwrap();
            let dev = SimDevice::from_card("sim-qdma-st", &crate::sim::CardSpec::info(&QdmaStreamCard), card);
            crate::access::set_bus_master(&dev, true).unwrap();
            let alloc = SimAllocator::new(dev.host_map().clone());
            let bar = |b| dev.open_bar(b, Mapping::Uc, IoMode::Mmap).unwrap();
            let opts =
                QdmaOptions { queues: 2, ring_size: Some(64), simulated: true, trigger: t, ..Default::default() };
            let mut e = QdmaEngine::new_stream(bar(0), bar(2), &alloc, opts).unwrap();
            let irq = dev.interrupts(e.irq_request()).unwrap();
            let dst = alloc.alloc(40 << 12).unwrap();
            let work: Vec<Work> = (0..40u64)
                .map(|k| Work {
                    buf: &*dst,
                    t: Transfer { dir: Direction::C2h, buf_offset: k << 12, card_addr: 0, len: 1000 },
                    queue: (k % 2) as u16,
                })
                .collect();
            // Polled, then by interrupt: every packet arrives and verifies either way.
            for by_irq in [false, true] {
                bytes(&*dst).fill(0);
                e.prepare_batch(&work).unwrap();
                if by_irq {
                    e.run_interrupt(&*irq, Duration::from_secs(20)).unwrap();
                } else {
                    e.run(Duration::from_secs(20)).unwrap();
                }
                let one = crate::dma::StreamEnd::transfer_bytes(&e, 1000);
                for k in 0..40 {
                    assert!(bytes(&*dst)[k << 12..(k << 12) + 1000] == one[..], "{misc:#x} {spec} {k}");
                }
            }
            // The contexts, the design's user trigger and the per-IP tick, as libqdma sets them.
            let cm = CmptCtx::from_words(&ctx_read(&*bar(0), 6, 1), IpKind::from_misc_cap(misc));
            assert_eq!((cm.trig_mode as u32, cm.timer_idx, cm.counter_idx), (t.trig_mode(), t.timer_idx, t.count_idx));
            let tick = if misc == CPM5 { 50 } else { 25 };
            assert_eq!((r(&*bar(0), 0xb0c), r(&*bar(2), 0x50)), (tick, t.cmpt_size()), "{misc:#x} {spec}");
            let set = e.settings().unwrap();
            assert!(set[super::trigger::CMPT_TRIGGER].starts_with(spec.split(':').next().unwrap()), "{set:?}");
            drop(e);
            drop(irq);
            assert_eq!((r(&*bar(0), 0xb0c), r(&*bar(2), 0x50)), (0, 0), "{misc:#x} {spec}: put back as found");
            assert!(model.violations().is_empty(), "{misc:#x} {spec}: {:?}", model.violations());
        }
    }
}
