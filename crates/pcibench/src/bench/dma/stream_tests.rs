//! The DMA runner against `sim-qdma-st`: stream rows verified by the far end (C2H data against
//! the generator's pattern, H2C by the example design's checker), packets per second, and data
//! corrupted in flight named on both sides.

use super::layout::Access;
use super::*;
use crate::access::sim::SimDevice;
use crate::bench::sample::clock::MonotonicClock;
use crate::bench::test_rig::{sampling, SimRig};
use crate::dma::engines::EngineOptions;
use crate::sim::qdma::model::QdmaModelConfig;
use crate::sim::qdma::stream_card::{self, QdmaStreamCard};
use std::sync::atomic::AtomicBool;

/// The stream card (4 queues) and its rig.
fn stream_rig() -> (SimRig, std::sync::Arc<crate::sim::qdma::model::QdmaModel>) {
    let (card, model) = stream_card::build(QdmaModelConfig::default()).unwrap();
    let info = crate::sim::CardSpec::info(&QdmaStreamCard);
    let opts = EngineOptions { queues: Some(4), ..Default::default() };
    (SimRig::on(SimDevice::from_card("sim-qdma-st", &info, card), info, &opts), model)
}

/// `plan` run on `rig`, polled.
fn go(rig: &mut SimRig, p: &DmaPlan) -> Report {
    let (stop, clock) = (AtomicBool::new(false), MonotonicClock);
    let mut progress = |_| {};
    let mut s = sampling(&clock, &stop, &mut progress);
    let setup =
        DmaSetup { dev: &rig.dev, device: &rig.device, engine: rig.engine.as_mut(), alloc: &rig.alloc, irq: None };
    run(setup, p, &mut s).unwrap()
}

/// Both directions, 64 B, 10 KiB and 64 KiB, on 1 and 4 queues (`bidir`: the two together too).
fn stream_plan(bidir: bool) -> DmaPlan {
    DmaPlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        bidir,
        sizes: vec![64, 10 << 10, 64 << 10],
        total: 1 << 20,
        budget_ns: None,
        card_addr: 0,
        timeout: Duration::from_secs(20),
        queues: vec![1, 4],
        access: Access::Sequential,
        completions: Vec::new(),
    }
}

#[test]
fn stream_rows_are_verified_by_the_far_end_and_corruption_is_named_both_ways() {
    let (mut rig, model) = stream_rig();
    let base = stream_plan(true);
    let r = go(&mut rig, &base);
    assert_eq!(r.results.len(), 24);
    for x in &r.results {
        assert_eq!(x.verify, Some(Verify::Ok), "{} {} q{:?}: {:?}", x.dir, x.size, x.queues, r.warnings);
        // 64 KiB goes as 4 packets of 16 KiB (7 buffers of 4 KiB at most per packet).
        let (bytes, pps) = (x.packet_bytes.unwrap(), x.packets_per_s.unwrap());
        assert_eq!(bytes, if x.size == 64 << 10 { 16 << 10 } else { x.size });
        let mbps = x.stats.as_ref().unwrap().median_mbps;
        assert!((pps - mbps * 1e6 / bytes as f64).abs() <= pps * 1e-9, "{pps} vs {mbps} MB/s");
    }
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    model.corrupt_stream(true);
    let r = go(&mut rig, &DmaPlan { bidir: false, sizes: vec![4096], queues: vec![1], ..base });
    let h2c = r.results.iter().find(|x| x.dir == Direction::H2c).unwrap();
    assert!(h2c.rejected().is_some_and(|w| w.contains("checker reports no match")), "{:?}", h2c.verify);
    let c2h = r.results.iter().find(|x| x.dir == Direction::C2h).unwrap();
    assert_eq!(c2h.mismatch().map(|m| (m.expected, m.found)), Some((0, 1)), "{:?}", c2h.verify);
    assert!(r.mismatched());
}

/// On `pcibench serve`'s clock thread the stream engine's passes are staged (`sim::stage`,
/// lab/findings.md 15): the descriptors and packets a pass reads are fetched before it takes its
/// locks, its writes and interrupt messages sent, in order, after it releases them. The same rows,
/// verified by the far end, with every look this thread makes staged.
#[test]
fn stream_rows_verify_when_every_pass_is_staged_as_on_serves_clock_thread() {
    struct Ordinary;
    impl Drop for Ordinary {
        fn drop(&mut self) {
            crate::sim::stage::set_clock_thread(false);
        }
    }
    crate::sim::stage::set_clock_thread(true);
    let _ordinary = Ordinary;
    let before = crate::sim::stage::passes();
    let (mut rig, model) = stream_rig();
    let r = go(&mut rig, &stream_plan(false));
    assert_eq!(r.results.len(), 12);
    for x in &r.results {
        assert_eq!(x.verify, Some(Verify::Ok), "{} {} q{:?}: {:?}", x.dir, x.size, x.queues, r.warnings);
    }
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert!(crate::sim::stage::passes() > before + 12, "{} staged passes", crate::sim::stage::passes() - before);
}
