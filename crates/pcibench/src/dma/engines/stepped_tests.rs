//! Failure reports against stepped (deterministic) sim models (issue #34): the engine runs inside
//! the driver's own register writes, so what it has done when the driver reports is fixed by the
//! test, and the report must state progress from the freshest source the card offers.

use super::xdma::tests::{bytes, dev_with, engine, transfer, LONG};
use super::xdma::XdmaOptions;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::{Direction, DmaAllocator, Engine};
use crate::sim::xdma::model::XdmaModelConfig;

/// A 4-page scattered H2C transfer on the stepped `sim` card whose third descriptor has a bad
/// magic: the engine completes two descriptors and stops on the third in the driver's run write.
fn xdma_stops_on_the_third(withhold: bool) -> String {
    let (dev, _bar) = dev_with(XdmaModelConfig { stepped: true, ..Default::default() });
    let alloc = SimAllocator::scattered(dev.host_map().clone());
    let mut eng = engine(&dev, &alloc, XdmaOptions::default());
    let buf = alloc.alloc(4 * 4096).unwrap();
    eng.prepare(&*buf, &transfer(Direction::H2c, 4 * 4096, 0)).unwrap();
    assert_eq!(eng.chain().unwrap().descriptors.len(), 4, "one descriptor per scattered page");
    bytes(eng.descriptor_memory())[2 * 32 + 2] = 0x00; // descriptor 2: magic 0xAD4B -> 0xAD00
    dev.xdma_model().withhold_writebacks(Direction::H2c, 0, withhold).unwrap();
    eng.run(LONG).unwrap_err().to_string()
}

#[test]
fn an_xdma_report_names_the_completed_count_when_the_writeback_lags() {
    // The error writeback withheld: the word still says 0, the channel's count (+0x48) says 2.
    let e = xdma_stops_on_the_third(true);
    assert!(
        e.starts_with(
            "XDMA h2c channel 0 stopped after 2 of 4 descriptors by the completed-descriptor count (+0x48); the last \
             writeback said 0: status "
        ),
        "{e}"
    );
    assert!(e.contains("magic_stopped"), "{e}");
    // The writeback came: both agree and the report says so once.
    let e = xdma_stops_on_the_third(false);
    assert!(e.starts_with("XDMA h2c channel 0 stopped after 2 of 4 descriptors: status "), "{e}");
}
