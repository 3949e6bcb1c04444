//! DMA latency on a stream engine (sim-qdma-st: the QDMA example design's generator and checker
//! at the far end, no card memory): every row verified against what the far end makes and by
//! its checker's verdict, by polling and by interrupt; offered load refused in one line.

use super::*;
use crate::bench::rate::{Rate, RateRequest, Rates};
use crate::bench::result::Completion;
use crate::bench::sample::clock::MonotonicClock;
use crate::bench::sample::sampler::Progress;
use crate::host::Host;
use crate::session::{EngineRequest, Session};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn plan(dma: DmaLatency) -> LatencyPlan {
    LatencyPlan {
        bar: 0,
        offset: 0,
        widths: vec![Width::B32],
        strict_width: false,
        allow_write: false,
        samples: 50,
        budget_ns: None,
        warmup: Some(2),
        dma: Some(dma),
        load: None,
    }
}

#[test]
fn stream_rows_are_verified_by_the_far_end_by_polling_and_by_interrupt() {
    let s = Session::open(&Host::with_root("/nonexistent-root"), &"sim-qdma-st".parse().unwrap(), None).unwrap();
    let mut rig = s.open_dma(&EngineRequest::default(), None).unwrap();
    let irq = s.dev.interrupts(rig.engine.irq_request()).unwrap();
    let (clock, stop) = (MonotonicClock, AtomicBool::new(false));
    let mut none = |_| {};
    let progress: &mut dyn Progress = &mut none;
    let dma = DmaLatency {
        dirs: vec![Direction::H2c, Direction::C2h],
        sizes: vec![64, 4096],
        completions: vec![Completion::Poll, Completion::Irq],
        samples: Some(10),
        card_addr: 0,
        timeout: Duration::from_secs(20),
        rate: None,
    };
    let mut sampling = Sampling::new(&clock, &stop, progress, None);
    let t = LatencyTarget {
        dev: s.dev.as_ref(),
        device: &s.device,
        engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())),
        irq: Some(irq.as_ref()),
    };
    let r = run(t, &plan(dma.clone()), &mut sampling).unwrap();
    let rows: Vec<&Row> = r.results.iter().filter(|x| x.probe == Some(Probe::Dma)).collect();
    assert_eq!(rows.len(), 8, "{rows:?}");
    for x in &rows {
        assert_eq!(x.verify, Some(Verify::Ok), "{} {} {:?}: {:?}", x.dir, x.size, x.completion, r.warnings);
        assert_eq!(x.latency.as_ref().unwrap().samples, 10);
    }
    // Offered load posts memory-mapped transfers: refused before anything runs.
    let rated = DmaLatency {
        completions: vec![Completion::Poll],
        rate: Some(RateRequest { rates: Rates::These(vec![Rate::Ops(1e4)]), until_p99_ns: None }),
        ..dma
    };
    let t = LatencyTarget {
        dev: s.dev.as_ref(),
        device: &s.device,
        engine: Some((rig.engine.as_mut(), rig.alloc.as_ref())),
        irq: None,
    };
    let e = run(t, &plan(rated), &mut sampling).unwrap_err();
    assert!(
        matches!(e, Error::Usage(_)) && e.to_string().starts_with("--rate offers load on memory-mapped queues"),
        "{e}"
    );
}

/// Issue 55: a load on a stream engine is checked as `dma` checks streams (its C2H data against
/// the far end's generator, its H2C data by the checker's verdict): every mode verifies, and data
/// corrupted in flight is named in both directions.
#[test]
fn a_stream_load_is_verified_by_the_far_end_and_corruption_is_named() {
    use crate::access::sim::SimDevice;
    use crate::bench::latency::load::{LoadMode, LoadPlan, Rig};
    use crate::bench::test_rig::SimRig;
    use crate::dma::engines::EngineOptions;
    use crate::sim::qdma::model::QdmaModelConfig;
    use crate::sim::qdma::stream_card::{self, QdmaStreamCard};

    let (card, model) = stream_card::build(QdmaModelConfig::default()).unwrap();
    let info = crate::sim::CardSpec::info(&QdmaStreamCard);
    let mut rig = SimRig::on(SimDevice::from_card("sim-qdma-st", &info, card), info, &EngineOptions::default());
    let _bm = crate::access::BusMaster::enable(&rig.dev).unwrap();
    let plan = LoadPlan {
        modes: LoadMode::ALL.to_vec(),
        width: Width::B32,
        // Not a whole number of receive buffers: the C2H side takes whole ones.
        size: Some(10 << 10),
        cpu: None,
        rate: None,
        card_addr: 0,
        timeout: Duration::from_secs(20),
    };
    let mut load = Rig::new(rig.engine.as_mut(), &rig.alloc, &plan).unwrap();
    let stop = AtomicBool::new(false);
    for mode in LoadMode::ALL {
        let (_, l, v) = load.under(mode, &stop, || Ok(())).unwrap();
        assert_eq!(v, Verify::Ok, "{mode:?}");
        assert!(l.transfers >= 1, "{mode:?}");
    }
    model.corrupt_stream(true);
    let (_, _, v) = load.under(LoadMode::H2c, &stop, || Ok(())).unwrap();
    assert!(matches!(&v, Verify::Rejected { reason } if reason.contains("checker reports no match")), "{v:?}");
    let (_, _, v) = load.under(LoadMode::C2h, &stop, || Ok(())).unwrap();
    assert!(matches!(&v, Verify::Mismatch { mismatch } if mismatch.offset == 0), "{v:?}");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}
