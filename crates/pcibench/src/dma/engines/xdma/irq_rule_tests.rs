//! Issue 50 items 3 and 5: INTx on the function's own pin, and the user interrupts kept quiet
//! while pcibench runs by interrupt. The sim model enforces both: an INTx interrupt whose vector
//! field names another line than the pin reaches nobody (PG195 "Legacy Interrupts"), and a user
//! interrupt the design keeps requesting holds the INTx level asserted, which the model flags as
//! a storm once it is unmasked with no cause cleared. Each failed on the driver before the fix
//! (vector fields always 0; the user interrupt enables left as found).

use super::tests::{bytes, dev_with, r, w, Card, LONG};
use crate::access::{DeviceAccess, IrqKind, IrqRequest};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::{self, EngineOptions};
use crate::dma::{Direction, DmaAllocator, Engine, Transfer};
use crate::sim::xdma::model::XdmaModelConfig;

/// The `sim` card built from `cfg` with its engine opened as `dma` opens it (the registry's
/// driver, which reads the pin from config space).
fn opened(cfg: XdmaModelConfig) -> (Card, SimAllocator, Box<dyn Engine>) {
    let (card, _bar) = dev_with(cfg);
    let info = crate::sim::CardSpec::info(&crate::sim::xdma::card::XdmaCard);
    let (driver, found) = engines::resolve(None, &info, &*card).unwrap();
    let alloc = SimAllocator::new(card.host_map().clone());
    let engine = driver.open(&found, &info, &*card, &alloc, &EngineOptions::default()).unwrap().engine;
    (card, alloc, engine)
}

/// A round trip of two transfers by INTx.
fn round_trip(card: &Card, alloc: &SimAllocator, engine: &mut dyn Engine) {
    let irq = card.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    let (src, dst) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    super::tests::pattern(4, bytes(&*src));
    for (dir, buf) in [(Direction::H2c, &src), (Direction::C2h, &dst)] {
        engine.prepare(&**buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len: 4096 }).unwrap();
        engine.run_interrupt(&*irq, LONG).unwrap();
    }
    assert_eq!(bytes(&*src), bytes(&*dst));
}

/// Item 3: on a function whose pin is INTB, every channel and user vector field gets 1 while
/// armed (libxdma.c irq_legacy_setup writes pin - 1 into both); the run completes by INTx, and
/// the fields are put back as found afterwards.
#[test]
fn item3_intx_on_pin_b_programs_pin_minus_1_into_the_vector_fields() {
    let (card, alloc, mut engine) = opened(XdmaModelConfig { stepped: true, intx_pin: 2, ..Default::default() });
    let bar = card.open_bar(4, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    let mut pin = [0u8];
    card.config_read(0x3d, &mut pin).unwrap();
    assert_eq!(pin[0], 2, "the model's config space says INTB");
    round_trip(&card, &alloc, &mut *engine);
    assert_eq!(card.xdma_model().irq().sent(), vec![2], "one INTx per run");
    assert_eq!(r(&*bar, 0x20a0) & 0x1f1f, 0x0101, "H2C 0 and C2H 0 on INTB while armed");
    for off in [0x2080, 0x2084, 0x2088, 0x208c] {
        assert_eq!(r(&*bar, off), 0x0101_0101, "user vectors at {off:#x} on INTB");
    }
    assert_eq!(card.xdma_model().violations(), Vec::<String>::new());
    drop(engine);
    assert_eq!((r(&*bar, 0x20a0), r(&*bar, 0x2080)), (0, 0), "the vector fields as found");
}

/// Item 5: a design that requests user interrupt 0, enabled when pcibench arrives: the user
/// enables are cleared while the run is armed (so INTx is not held asserted by it) and put back
/// afterwards.
#[test]
fn item5_user_interrupts_are_disabled_while_armed_and_restored() {
    let (card, alloc, mut engine) = opened(XdmaModelConfig { stepped: true, ..Default::default() });
    let bar = card.open_bar(4, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
    w(&*bar, 0x2008, 0x1);
    assert_eq!(r(&*bar, 0x2004), 1);
    let model = card.xdma_model();
    round_trip_with_user_irq(&card, &alloc, &mut *engine);
    assert_eq!(r(&*bar, 0x2004), 0, "user interrupt enables cleared while armed");
    assert_eq!(model.violations(), Vec::<String>::new());
    drop(engine);
    assert_eq!(r(&*bar, 0x2004), 1, "the user interrupt enable as found");
    model.set_user_irq(0);
}

/// `round_trip`, with the design requesting user interrupt 0 once INTx is routed.
fn round_trip_with_user_irq(card: &Card, alloc: &SimAllocator, engine: &mut dyn Engine) {
    let irq = card.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
    card.xdma_model().set_user_irq(1);
    let (src, dst) = (alloc.alloc(4096).unwrap(), alloc.alloc(4096).unwrap());
    super::tests::pattern(6, bytes(&*src));
    for _ in 0..3 {
        for (dir, buf) in [(Direction::H2c, &src), (Direction::C2h, &dst)] {
            engine.prepare(&**buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len: 4096 }).unwrap();
            engine.run_interrupt(&*irq, LONG).unwrap();
        }
    }
    assert_eq!(bytes(&*src), bytes(&*dst));
}
