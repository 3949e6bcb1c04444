//! Tests of what the XDMA driver must do as the vendor's own driver does (libxdma.c) where our
//! first reading of PG195 differed, and of the model behaviour that makes a difference visible:
//! an alignments register that reads 0, and poll mode that raises no interrupt.

use super::tests::{bus, bytes, dev, dev_with, engine, pattern, r, run_raw, transfer, w, Card, CTRL_ALL, LONG};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::xdma::{self, XdmaOptions};
use crate::dma::{Direction, DmaAllocator, Engine};
use crate::sim::xdma::model::XdmaModelConfig;

/// The interrupt enable mask libxdma.c writes in poll mode: align mismatch, magic stopped,
/// read errors, descriptor errors (engine_init_regs).
const VENDOR_POLL_MASK: u32 = 1 << 3 | 1 << 4 | 0x1f << 9 | 0x1f << 19;

/// What a kernel driver in interrupt mode leaves behind: every channel's interrupt enabled in
/// the IRQ block (W1S at 0x2014) and every event in each channel's interrupt enable mask.
fn leave_in_interrupt_mode(card: &Card, cfg: XdmaModelConfig) {
    use crate::access::{DeviceAccess, IoMode, Mapping};
    use crate::sim::xdma::card::SIM_DMA_BAR;
    let bar = card.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
    w(&*bar, 0x2014, 0xff);
    for (target, n) in [(0u64, cfg.h2c_channels), (1, cfg.c2h_channels)] {
        for c in 0..n as u64 {
            w(&*bar, target << 12 | c << 8 | 0x90, 0x00ff_fe7e);
        }
    }
    assert_eq!(r(&*bar, 0x2010), 0xff);
}

#[test]
fn alignments_register_reading_zero_gets_the_vendor_defaults() {
    let cfg = XdmaModelConfig { addr_align: 0, len_granularity: 0, addr_bits: 0, ..Default::default() };
    let (card, bar) = dev_with(cfg);
    assert_eq!(r(&*bar, 0x4c), 0, "the model presents an alignments register of 0");
    let info = xdma::probe(&*bar).unwrap();
    let c = &info.h2c[0];
    assert_eq!((c.addr_align, c.len_granularity, c.addr_bits), (1, 1, 64), "libxdma.c engine_alignments defaults");
    assert!(info.warnings.iter().any(|w| w.contains("+0x4C) reads 0")), "{:?}", info.warnings);
    // The driver takes every address and length, as the vendor's would.
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = engine(&card, &alloc, XdmaOptions::default());
    let src = alloc.alloc(4099).unwrap();
    pattern(5, bytes(&*src));
    eng.prepare(&*src, &transfer(Direction::H2c, 4099, 3)).unwrap();
    eng.run(LONG).unwrap();
    let mut got = vec![0u8; 4099];
    card.xdma_model().card_read(3, &mut got).unwrap();
    assert!(got == bytes(&*src)[..4099]);
}

#[test]
fn poll_mode_writes_the_vendor_interrupt_mask_and_clears_its_channels_irq_enables() {
    let cfg = XdmaModelConfig { h2c_channels: 2, c2h_channels: 2, ..Default::default() };
    let (card, bar) = dev_with(cfg);
    leave_in_interrupt_mode(&card, cfg);
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = engine(&card, &alloc, XdmaOptions { channel: 1, ..Default::default() });
    assert_eq!((r(&*bar, 0x0190), r(&*bar, 0x1190)), (VENDOR_POLL_MASK, VENDOR_POLL_MASK));
    assert_eq!((r(&*bar, 0x0090), r(&*bar, 0x1090)), (0x00ff_fe7e, 0x00ff_fe7e), "other channels untouched");
    // IRQ block bits: H2C 0, 1 then C2H 0, 1 at bits 2, 3. Channel 1's are H2C bit 1, C2H bit 3.
    assert_eq!(r(&*bar, 0x2010), 0xff & !0b1010, "only channel 1's interrupt enables were cleared");
    let buf = alloc.alloc(8192).unwrap();
    for dir in [Direction::H2c, Direction::C2h] {
        eng.prepare(&*buf, &transfer(dir, 8192, 0)).unwrap();
        eng.run(LONG).unwrap();
        let control = r(&*bar, if dir == Direction::H2c { 0x0104 } else { 0x1104 });
        assert_eq!(control & 0x6, 0, "{dir}: descriptor stopped/completed enables stay clear ({control:#x})");
        assert_ne!(control & 1 << 26, 0, "{dir}: poll-mode writeback on ({control:#x})");
    }
}

#[test]
fn a_card_left_in_interrupt_mode_raises_no_interrupt_on_success_or_error() {
    let cfg = XdmaModelConfig::default();
    let (card, _bar) = dev_with(cfg);
    leave_in_interrupt_mode(&card, cfg);
    let alloc = SimAllocator::new(card.host_map().clone());
    let mut eng = engine(&card, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(4096).unwrap();
    for dir in [Direction::H2c, Direction::C2h] {
        eng.prepare(&*buf, &transfer(dir, 4096, 0)).unwrap();
        eng.run(LONG).unwrap();
    }
    // An error the vendor's mask does report (magic stopped): the IRQ block still keeps it quiet.
    eng.prepare(&*buf, &transfer(Direction::H2c, 4096, 0)).unwrap();
    bytes(eng.descriptor_memory())[2] = 0;
    assert!(eng.run(LONG).unwrap_err().to_string().contains("magic_stopped"));
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
}

#[test]
fn model_raises_a_channel_interrupt_only_where_mask_and_irq_block_both_enable_it() {
    // Stepped: the chain completes, and its interrupt is raised, inside the run write, so each
    // count below is read after the interrupt, whenever the host looks.
    let (card, bar) = dev_with(XdmaModelConfig { stepped: true, ..Default::default() });
    let bar = &*bar;
    let mem = SimAllocator::new(card.host_map().clone()).alloc(4096).unwrap();
    bytes(&*mem)[..32].copy_from_slice(&super::tests::desc(0x13, 0, 16, bus(&*mem, 512), 0, 0));
    let run = || run_raw(bar, Direction::H2c, bus(&*mem, 0), 0, bus(&*mem, 1024), CTRL_ALL);
    assert_eq!(run(), 0x6, "descriptor stopped and completed logged");
    assert!(card.xdma_model().violations().is_empty(), "mask 0: no interrupt");
    w(bar, 0x90, 0x6);
    run();
    assert!(card.xdma_model().violations().is_empty(), "IRQ block channel enable 0: no interrupt");
    // The request holds while the status stays set (nothing read it through the RC alias): the
    // enable alone raises it, and the next run's completion raises it again.
    w(bar, 0x2014, 0x1);
    let v = card.xdma_model().violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("H2C channel 0 raised its interrupt") && v[0].contains("nothing services"), "{}", v[0]);
    run();
    assert_eq!(card.xdma_model().violations().len(), 2);
    // The C2H channel's bit is the one after the H2C channels': enabling bit 0 does not wake it.
    w(bar, 0x1090, 0x6);
    bytes(&*mem)[..32].copy_from_slice(&super::tests::desc(0x13, 0, 16, 0, bus(&*mem, 512), 0));
    let c2h = run_raw(bar, Direction::C2h, bus(&*mem, 0), 0, bus(&*mem, 1024), CTRL_ALL);
    assert_eq!(c2h, 0x6);
    assert_eq!(card.xdma_model().violations().len(), 2);
}

#[test]
fn xdma_is_looked_for_only_on_xilinx_devices() {
    use crate::dma::engines::EngineDriver;
    let (card, _bar) = dev();
    let mut info = crate::sim::CardSpec::info(&crate::sim::xdma::card::XdmaCard);
    info.simulated = false;
    let found = xdma::XdmaDriver.detect(&info, &*card).unwrap().expect("found on a Xilinx device");
    assert_eq!(found.register_bars, [4]);
    info.vendor_id = 0x1234;
    assert!(xdma::XdmaDriver.detect(&info, &*card).unwrap().is_none(), "another vendor's registers are not read");
}

#[test]
fn c3_a_timeout_and_stop_wait_for_the_descriptor_in_flight_and_say_when_it_never_ends() {
    let (dev, _bar) = dev();
    let m = dev.xdma_model();
    let alloc = SimAllocator::new(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::C2h, 4096, 0)).unwrap();
    m.set_stalled(Direction::C2h, 0, true).unwrap();
    // Once run is cleared, the channel reads busy for five more status reads.
    m.set_linger(Direction::C2h, 0, 5).unwrap();
    let e = eng.run(std::time::Duration::from_millis(30)).unwrap_err().to_string();
    assert!(e.contains("cleared run and waited for the channel to go idle"), "{e}");
    assert!(!m.busy(Direction::C2h, 0).unwrap(), "the timeout returned with a descriptor in flight");
    eng.submit().unwrap();
    m.set_linger(Direction::C2h, 0, 5).unwrap();
    let stop = eng.stop().unwrap();
    assert!(!m.busy(Direction::C2h, 0).unwrap(), "stop returned with a descriptor in flight: {stop}");
    assert!(stop.starts_with("c2h channel 0: 0x") && !stop.contains("still busy"), "{stop}");
    // A channel that never goes idle is reported, not taken for stopped.
    eng.submit().unwrap();
    m.set_linger(Direction::C2h, 0, u32::MAX).unwrap();
    let stop = eng.stop().unwrap();
    assert!(
        stop.contains("still busy after run was cleared") && stop.contains("may still write host memory"),
        "{stop}"
    );
    m.set_linger(Direction::C2h, 0, 0).unwrap();
    m.set_stalled(Direction::C2h, 0, false).unwrap();
    eng.run(LONG).unwrap();
}
