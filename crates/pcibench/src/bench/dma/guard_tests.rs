//! Issue 50 item 11: every simulated engine built with the overrun fault (`sim::overrun`: each
//! descriptor's data also lands one byte past its end) fails verification in every direction,
//! the offset named as past a transfer's end, where comparing the transfers alone said `ok`. The
//! same cards without the fault verify, the guard untouched. `dma` rows of every card, and
//! `latency --dma` and `--rate` rows on one.

use super::layout::Access;
use super::*;
use crate::access::sim::SimDevice;
use crate::bench::result::Verify;
use crate::bench::sample::clock::MonotonicClock;
use crate::bench::test_rig::{sampling, SimRig};
use crate::dma::engines::EngineOptions;
use crate::pci::DeviceInfo;
use crate::sim::{CardSpec, SimCard};
use std::sync::atomic::AtomicBool;

/// A card built with its model's overrun fault on or off, as `name` would be.
fn card(name: &'static str, overrun: bool) -> (SimCard, DeviceInfo) {
    use crate::sim::{nvram, qdma, xdma};
    let (card, info): (SimCard, DeviceInfo) = match name {
        "sim" | "sim-xdma-st" => {
            let stream = name == "sim-xdma-st";
            let (c, m) = xdma::card::build(xdma::model::XdmaModelConfig { stream, ..Default::default() }).unwrap();
            m.set_overrun(overrun);
            let info = if stream { xdma::card::XdmaStreamCard.info() } else { xdma::card::XdmaCard.info() };
            (c, info)
        }
        "sim-qdma" => {
            let (c, m) = qdma::card::build(Default::default()).unwrap();
            m.set_overrun(overrun);
            (c, qdma::card::QdmaCard.info())
        }
        "sim-qdma-st" => {
            let (c, m) = qdma::stream_card::build(Default::default()).unwrap();
            m.set_overrun(overrun);
            (c, qdma::stream_card::QdmaStreamCard.info())
        }
        _ => {
            let (c, m) = nvram::card::build(Default::default()).unwrap();
            m.set_overrun(overrun);
            (c, nvram::card::NvramCard.info())
        }
    };
    (card, info)
}

fn rig(name: &'static str, overrun: bool) -> SimRig {
    let (c, info) = card(name, overrun);
    SimRig::on(SimDevice::from_card(name, &info, c), info, &EngineOptions::default())
}

/// One `dma` row per direction of `size` bytes.
fn rows(rig: &mut SimRig, size: u64) -> Report {
    let (stop, clock) = (AtomicBool::new(false), MonotonicClock);
    let mut progress = |_| {};
    let mut s = sampling(&clock, &stop, &mut progress);
    let setup =
        DmaSetup { dev: &rig.dev, device: &rig.device, engine: rig.engine.as_mut(), alloc: &rig.alloc, irq: None };
    let plan = DmaPlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        bidir: false,
        sizes: vec![size],
        total: size * 4,
        budget_ns: None,
        card_addr: 0,
        timeout: Duration::from_secs(20),
        queues: vec![1],
        access: Access::Sequential,
        completions: Vec::new(),
    };
    run(setup, &plan, &mut s).unwrap()
}

#[test]
fn item11_a_write_past_the_end_is_caught_on_every_engine_and_direction() {
    for name in ["sim", "sim-xdma-st", "sim-qdma", "sim-qdma-st", "sim-nvram"] {
        // Not a multiple of a page or a beat; the NVRAM moves whole 8-byte words.
        let size = if name == "sim-nvram" { 4104 } else { 4097 };
        let clean = rows(&mut rig(name, false), size);
        assert!(clean.results.iter().all(|r| r.verify == Some(Verify::Ok)), "{name}: {:?}", clean.warnings);
        let r = rows(&mut rig(name, true), size);
        for row in &r.results {
            // The QDMA example design's checker judges H2C packets; its far end has no memory to
            // overrun (the overrun is a write).
            if name == "sim-qdma-st" && row.dir == Direction::H2c {
                continue;
            }
            let m = row.mismatch().unwrap_or_else(|| panic!("{name} {}: {:?} {:?}", row.dir, row.verify, r.warnings));
            let outside = m.outside.as_deref().unwrap_or_else(|| panic!("{name} {}: {m}", row.dir));
            assert!(outside.contains("past the end of transfer"), "{name} {}: {m}", row.dir);
            assert!(m.to_string().contains(&format!("offset {:#x}", m.offset)), "{m}");
        }
        assert!(!r.warnings.is_empty(), "{name}: the mismatch is named in a warning");
    }
}

/// `latency --dma` and `--rate` rows verify the same way (the engine's one-transfer runs).
#[test]
fn item11_latency_and_rate_rows_catch_a_write_past_the_end() {
    use crate::bench::latency::dma::{rows as latency_rows, DmaLatency};
    use crate::bench::rate::{spec::Rate, spec::Rates, RatePlan, RateRequest};
    for overrun in [false, true] {
        let mut rig = rig("sim", overrun);
        let _bm = crate::access::BusMaster::enable(&rig.dev).unwrap();
        let (stop, clock) = (AtomicBool::new(false), MonotonicClock);
        let mut progress = |_| {};
        let mut s = sampling(&clock, &stop, &mut progress);
        let plan = DmaLatency {
            dirs: vec![Direction::H2c, Direction::C2h],
            sizes: vec![4097],
            completions: vec![crate::bench::result::Completion::Poll],
            samples: Some(4),
            card_addr: 0,
            timeout: Duration::from_secs(20),
            rate: None,
        };
        let mut report = Report::new(Kind::Dma, "sim", true, rig.dev.via(), 0.0);
        let mut out = latency_rows(rig.engine.as_mut(), &rig.alloc, None, &plan, &mut s, &mut report).unwrap();
        let rate = RatePlan {
            dirs: vec![Direction::H2c, Direction::C2h],
            sizes: vec![4097],
            queues: vec![1],
            rate: RateRequest { rates: Rates::These(vec![Rate::Ops(10_000.0)]), until_p99_ns: None },
            transfers: Some(8),
            total: None,
            card_addr: 0,
            timeout: Duration::from_secs(20),
        };
        let rated =
            crate::bench::rate::rows(rig.engine.as_mut(), &rig.alloc, &rate, &clock, &stop, &mut (), &mut report)
                .unwrap();
        assert_eq!(rated.len(), 2);
        out.extend(rated);
        for row in &out {
            match overrun {
                false => assert_eq!(row.verify, Some(Verify::Ok), "{:?}", report.warnings),
                true => assert!(
                    row.mismatch().and_then(|m| m.outside.clone()).is_some_and(|o| o.contains("past the end")),
                    "{:?}",
                    row.verify
                ),
            }
        }
    }
}

/// Issue 50 item 9: on QDMA the writeback interval (GLBL_DSC_CFG[2:0]) is whatever the previous
/// driver left on soft 3.x and EQDMA 4.0, and part of every open-loop latency: each DMA row
/// records it, and `compare` names it among the runs' differences.
#[test]
fn item9_every_qdma_row_records_the_writeback_interval_and_compare_names_a_change() {
    let at = |interval: u32| {
        let mut r = rig("sim-qdma", false);
        let bar = rig_bar(&r);
        bar.write(0x250, crate::mmio::Width::B32, u64::from(interval)).unwrap();
        let report = rows(&mut r, 4096);
        let key = crate::dma::engines::qdma::WRITEBACK_INTERVAL;
        for row in &report.results {
            assert_eq!(
                row.engine_settings.get(key).map(String::as_str),
                Some(interval.to_string().as_str()),
                "{row:?}"
            );
        }
        report
    };
    let (a, b) = (at(1), at(3));
    let host = crate::host::Host::with_root("/nonexistent");
    let (sa, sb) = (
        crate::results::saved::SavedRun::of_report(&host, None, &a),
        crate::results::saved::SavedRun::of_report(&host, None, &b),
    );
    let d = crate::results::context_diff::diffs(&sa, &sb);
    let w = d.iter().find(|d| d.what == "engine settings").expect("the interval named");
    assert!(w.questionable && w.a.ends_with(" 1") && w.b.ends_with(" 3"), "{w:?}");
}

/// The sim card's register BAR, as the engine opened it.
fn rig_bar(r: &SimRig) -> Box<dyn crate::access::BarRegion> {
    use crate::access::DeviceAccess;
    r.dev.open_bar(0, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap()
}
