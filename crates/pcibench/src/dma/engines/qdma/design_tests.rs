//! Issue 50 item 12: a QDMA stream card that is not the simulated one runs once the user asserts
//! the example design (`--design qdma-example`, which also consents to writing its user BAR),
//! and is refused in one line without it; a QDMA with both kinds of engine runs the kind
//! `--mode` asks for. The fixture is the stream model presented as an ordinary card (not
//! `sim-qdma-st`, so nothing but the assertion says what is behind its queues).

use crate::access::sim::SimDevice;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::qdma::st::{self, Design, Mode};
use crate::dma::engines::{self, EngineOptions};
use crate::dma::{Direction, DmaAllocator, Engine, Transfer, Work};
use crate::pci::DeviceInfo;
use crate::sim::qdma::model::QdmaModelConfig;
use crate::sim::qdma::stream_card::{self, QdmaStreamCard};
use crate::sim::CardSpec;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(20);

/// The stream model as a card named `name` (its example design in BAR 2).
fn fixture(name: &'static str) -> (SimDevice, DeviceInfo) {
    let (card, _model) = stream_card::build(QdmaModelConfig::default()).unwrap();
    let mut info = QdmaStreamCard.info();
    info.address = name.into();
    let dev = SimDevice::from_card(name, &info, card);
    crate::access::set_bus_master(&dev, true).unwrap();
    (dev, info)
}

fn open(dev: &SimDevice, info: &DeviceInfo, opts: &EngineOptions) -> crate::Result<Box<dyn Engine>> {
    let (driver, found) = engines::resolve(None, info, dev).unwrap();
    driver.check_options(opts)?;
    let alloc = SimAllocator::new(dev.host_map().clone());
    Ok(driver.open(&found, info, dev, &alloc, opts)?.engine)
}

#[test]
fn item12_a_card_with_the_example_design_runs_once_asserted_and_is_refused_without() {
    let (dev, info) = fixture("qdma-st-fixture");
    let err = open(&dev, &info, &EngineOptions::default()).err().expect("refused without --design").to_string();
    assert!(err.contains("--design qdma-example") && !err.contains('\n'), "{err}");
    let opts = EngineOptions { design: Some(Design::QdmaExample), ..Default::default() };
    let mut e = open(&dev, &info, &opts).unwrap();
    // C2H: the generator's packets land verified; H2C: the checker matches what was sent.
    let alloc = SimAllocator::new(dev.host_map().clone());
    let size = 10 << 10;
    let stride = e.stream_end().unwrap().c2h_stride(size);
    let (rx, tx) = (alloc.alloc(stride as usize).unwrap(), alloc.alloc(size as usize).unwrap());
    let want = st::transfer_bytes(size);
    let t = |dir| Transfer { dir, buf_offset: 0, card_addr: 0, len: size };
    e.prepare_batch(&[Work { buf: &*rx, t: t(Direction::C2h), queue: 0 }]).unwrap();
    e.run(LONG).unwrap();
    // SAFETY: the engine is idle; the buffer lives for the slice's use.
    let got = unsafe { std::slice::from_raw_parts(rx.as_ptr(), size as usize) };
    assert!(got == &want[..], "the generator's packets came back");
    // SAFETY: as above, to fill the H2C source.
    unsafe { std::slice::from_raw_parts_mut(tx.as_ptr(), size as usize) }.copy_from_slice(&want);
    e.stream_end().unwrap().clear_checker().unwrap();
    e.prepare_batch(&[Work { buf: &*tx, t: t(Direction::H2c), queue: 0 }]).unwrap();
    e.run(LONG).unwrap();
    assert_eq!(e.stream_end().unwrap().checker().unwrap(), Ok(()));
    // Asserted on another engine, or with memory-mapped queues: refused, not ignored.
    let mm = EngineOptions { design: Some(Design::QdmaExample), qdma_mode: Some(Mode::Mm), ..Default::default() };
    let err = open(&dev, &info, &mm).err().expect("no MM engine here").to_string();
    assert!(err.contains("--mode mm"), "{err}");
}

/// `sim-qdma` has both MM and stream engines: MM by default, stream queues with `--mode st`,
/// which need the far end asserted there (its user BAR is plain memory, not the design).
#[test]
fn item12_mode_chooses_the_engines_of_a_qdma_with_both() {
    let id = crate::sim::SimId::from_name("sim-qdma").unwrap();
    let (dev, info) = (SimDevice::open(id).unwrap(), id.spec().info());
    let mut e = open(&dev, &info, &EngineOptions::default()).unwrap();
    assert!(e.stream_end().is_none(), "memory-mapped by default");
    let st = EngineOptions { qdma_mode: Some(Mode::St), ..Default::default() };
    let err = open(&dev, &info, &st).err().expect("no far end known").to_string();
    assert!(err.contains("--design qdma-example"), "{err}");
    // The other engines refuse both options in one line.
    let id = crate::sim::SimId::from_name("sim").unwrap();
    let (xdev, xinfo) = (SimDevice::open(id).unwrap(), id.spec().info());
    for opts in [st, EngineOptions { design: Some(Design::QdmaExample), ..Default::default() }] {
        let err = open(&xdev, &xinfo, &opts).err().expect("refused on xdma").to_string();
        assert!(err.contains("not xdma"), "{err}");
    }
}
