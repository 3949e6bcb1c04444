//! Soaks on the simulated cards through the measuring API, as `dma --duration` runs them. Nothing
//! here asserts a time or a rate: the fairness asserted is a ratio between streams of one run,
//! which the one polling loop and the model's shared datapath decide, not the host's speed.

use super::figures::{Interval, Lane};
use crate::bench::result::{Report, Verify};
use crate::bench::sample::sampler::Progress;
use crate::direction::Direction;
use crate::host::Host;
use crate::measure::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the progress saw: each interval's rows as they came; it raises `stop` after `stop_after`
/// intervals (a Ctrl-C mid-run).
struct Seen<'a> {
    rows: Vec<Interval>,
    calls: usize,
    stop_after: Option<usize>,
    stop: &'a AtomicBool,
}

impl Progress for Seen<'_> {
    fn interval(&mut self, rows: &[Interval]) {
        self.rows.extend_from_slice(rows);
        self.calls += 1;
        if self.stop_after == Some(self.calls) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn request(device: &str, more: &[&str], dirs: DmaDirs, queues: Option<u16>, channels: Option<Vec<u8>>) -> Request {
    Request::Dma(DmaRequest {
        device: device.parse().unwrap(),
        via: None,
        engine: EngineRequest::default(),
        dirs,
        queues: queues.into_iter().collect(),
        pattern: DmaPattern::Seq,
        window: None,
        // Small transfers: many per interval, so one transfer more or less is a small share.
        sizes: vec![16 << 10],
        default_size: DefaultSize::Window,
        total: None,
        row_budget_ms: None,
        timeout_ms: 60_000,
        allow_dma: false,
        completion: None,
        irq_kind: None,
        rate: None,
        soak: Some(SoakRequest {
            duration_ms: 600,
            every_ms: 200,
            more: more.iter().map(|m| m.parse().unwrap()).collect(),
            channels,
        }),
        common: Common { cpu: None, command_line: vec!["pcibench".into()] },
    })
}

/// Equal streams share evenly: the ratio holds of the models as declared. The shaker
/// (`PCIBENCH_SIM_SHAKE`, docs/determinism.md) holds back each engine part's completions by
/// amounts of its own by design, so there the streams are unequal and only the rest is asserted.
fn fair(f: &[super::figures::Fairness]) {
    if crate::sim::shake::seed().is_none() {
        assert!(f.iter().all(|f| f.slowest_over_fastest >= 0.9), "streams within 10% of each other: {f:?}");
    }
}

fn soak(r: &Request, stop_after: Option<usize>) -> (Report, Vec<Interval>, usize) {
    let host = Host::with_root("/nonexistent-root");
    let stop = AtomicBool::new(false);
    let mut seen = Seen { rows: Vec::new(), calls: 0, stop_after, stop: &stop };
    let m = measure(&host, r, &mut Hooks { stop: &stop, progress: &mut seen, trace: None }).unwrap();
    let Measured::Report(report) = m.measured else { panic!("a report") };
    (report, seen.rows, seen.calls)
}

/// Every stream moved data, every interval's check passed, and the progress had each interval's
/// rows as the report keeps them.
fn all_verified(r: &Report, seen: &[Interval]) {
    let k = r.soak.as_ref().expect("a soak");
    assert_eq!(seen, &k.intervals[..], "the rows shown as they came are the rows kept");
    assert_eq!(r.results.len(), k.streams.len());
    for (row, st) in r.results.iter().zip(&k.streams) {
        assert_eq!(row.stream.as_deref(), Some(st.label().as_str()));
        assert_eq!(row.verify, Some(Verify::Ok), "{}: {:?}", st.label(), row.verify);
        assert!(row.stats.as_ref().is_some_and(|s| s.transfers > 0), "{} moved nothing", st.label());
    }
    assert!(k.intervals.iter().filter(|v| v.transfers > 0).all(|v| v.verified == Some(true)));
    assert!(k.errors.is_empty(), "{:?}", k.errors);
}

#[test]
fn two_xdma_channels_take_turns_on_the_datapath() {
    let (r, seen, _) = soak(&request("sim-xdma4", &[], DmaDirs::H2c, None, Some(vec![0, 1])), None);
    all_verified(&r, &seen);
    let k = r.soak.as_ref().unwrap();
    let lanes: Vec<(Lane, Direction)> = k.streams.iter().map(|s| (s.lane, s.dir)).collect();
    assert_eq!(lanes, [(Lane::Channel(0), Direction::H2c), (Lane::Channel(1), Direction::H2c)]);
    let f = &k.fairness[..];
    assert_eq!(f.len(), 1, "one direction shared by two streams");
    fair(f);
    assert_eq!(k.aggregates.len(), 1);
    assert!(k.aggregates[0].limit_mbps.is_some(), "the model's datapath bounds the sim card");
}

#[test]
fn every_channel_both_ways_by_default() {
    let mut req = request("sim-xdma4", &[], DmaDirs::Both, None, None);
    if let Request::Dma(d) = &mut req {
        d.sizes.clear();
    }
    let (r, seen, _) = soak(&req, None);
    all_verified(&r, &seen);
    let k = r.soak.as_ref().unwrap();
    assert_eq!(k.streams.len(), 8, "four channel pairs, each both ways");
    assert!(k.streams.iter().all(|s| s.size == 144 << 10), "the window shared out: 1184 KiB over 8, less guards");
    fair(&k.fairness);
}

#[test]
fn qdma_queues_both_ways_share_evenly() {
    let (r, seen, _) = soak(&request("sim-qdma", &[], DmaDirs::Both, Some(2), None), None);
    all_verified(&r, &seen);
    let k = r.soak.as_ref().unwrap();
    let lanes: Vec<(Lane, Direction)> = k.streams.iter().map(|s| (s.lane, s.dir)).collect();
    assert_eq!(
        lanes,
        [
            (Lane::Queue(0), Direction::H2c),
            (Lane::Queue(1), Direction::H2c),
            (Lane::Queue(2), Direction::C2h),
            (Lane::Queue(3), Direction::C2h)
        ]
    );
    assert_eq!(k.fairness.len(), 2);
    fair(&k.fairness);
}

#[test]
fn several_cards_at_once_each_with_its_aggregate() {
    let (r, seen, _) = soak(&request("sim-xdma4", &["sim-qdma", "sim-nvram"], DmaDirs::C2h, None, Some(vec![2])), None);
    all_verified(&r, &seen);
    let k = r.soak.as_ref().unwrap();
    let labels: Vec<String> = k.streams.iter().map(|s| s.label()).collect();
    assert_eq!(labels, ["sim-xdma4 ch2 c2h", "sim-qdma q0 c2h", "sim-nvram c2h"]);
    let devices: Vec<&str> = k.aggregates.iter().map(|a| a.device.as_str()).collect();
    assert_eq!(devices, ["sim-xdma4", "sim-qdma", "sim-nvram"]);
    assert_eq!(k.serial.len(), 1, "the NVRAM's engine cannot start a transfer and look later: {:?}", k.serial);
    assert!(r.warnings.iter().any(|w| w.contains("umem")), "{:?}", r.warnings);
}

#[test]
fn a_stop_keeps_every_streams_rows() {
    let mut req = request("sim-xdma4", &[], DmaDirs::Both, None, Some(vec![0, 3]));
    if let Request::Dma(d) = &mut req {
        d.soak.as_mut().unwrap().duration_ms = 3_600_000;
    }
    let (r, seen, calls) = soak(&req, Some(2));
    assert!(r.interrupted, "the stop ended it");
    assert_eq!(calls, 2, "the interval the stop came in was the last");
    all_verified(&r, &seen);
    let k = r.soak.as_ref().unwrap();
    assert_eq!(k.intervals.len(), 2 * 4, "two intervals of four streams");
    assert!(k.ran_s < 3600.0);
}

#[test]
fn what_a_soak_refuses() {
    let host = Host::with_root("/nonexistent-root");
    let refused = |r: Request| {
        let stop = AtomicBool::new(false);
        let e = measure(&host, &r, &mut Hooks { stop: &stop, progress: &mut (), trace: None }).expect_err("refused");
        assert!(matches!(e, crate::Error::Usage(_)), "{e}");
        e.to_string()
    };
    let e = refused(request("sim-nvram", &[], DmaDirs::Both, None, None));
    assert!(e.contains("one direction (--dir h2c or --dir c2h)"), "{e}");
    let e = refused(request("sim-xdma-st", &[], DmaDirs::H2c, None, None));
    assert!(e.contains("measure streams with dma without --duration"), "{e}");
    let e = refused(request("sim-xdma4", &["sim-xdma4"], DmaDirs::H2c, None, None));
    assert!(e.contains("named twice"), "{e}");
    let e = refused(request("sim", &[], DmaDirs::H2c, None, Some(vec![2])));
    assert!(e.contains("has no memory-mapped h2c channel 2"), "{e}");
    let mut big = request("sim-xdma4", &[], DmaDirs::Both, None, None);
    if let Request::Dma(d) = &mut big {
        d.sizes = vec![1 << 20];
    }
    let e = refused(big);
    assert!(e.contains("8 streams of 1 MiB transfers do not fit the 1184 KiB of card memory"), "{e}");
}

/// An interval in which a stream moved nothing (a loaded host let the interval pass before the
/// stream started a transfer: qemu-aarch64 with two CPU hogs did) is not checked: its H2C slot
/// still holds the last pattern it was sent (here only the seeded guard) and its C2H buffer only
/// its guard, which a check would call a mismatch of data no transfer carried.
#[test]
fn a_stream_that_moved_nothing_in_an_interval_is_not_checked() {
    use super::{check, data::Data, lane::Unit};
    use crate::bench::test_rig::SimRig;
    use std::time::Duration;
    for dir in [Direction::H2c, Direction::C2h] {
        let SimRig { dev, alloc, engine, .. } = SimRig::open("sim", &crate::dma::engines::EngineOptions::default());
        let _bus = crate::access::BusMaster::enable(&dev).unwrap();
        let timeout = Duration::from_secs(20);
        let pattern = crate::bench::pattern::Pattern::fresh();
        let mut datas = vec![Data::new(&alloc, dir, 16 << 10, 0, 20 << 10, 0, pattern).unwrap()];
        let mut unit = Unit::new(engine, vec![0], 0, timeout).unwrap();
        datas[0].seed(&mut *unit.engine, timeout).unwrap();
        let idle = Interval {
            stream: 0,
            label: format!("ch0 {dir}"),
            from_s: 0.0,
            to_s: 0.2,
            transfers: 0,
            bytes: 0,
            mbps: 0.0,
            verified: None,
            mismatch: None,
            errors: 0,
            partial: false,
        };
        let (mut rows, mut errors) = (vec![idle], Vec::new());
        check(std::slice::from_mut(&mut unit), &mut datas, timeout, 0.2, &mut rows, &mut errors).unwrap();
        assert_eq!(rows[0].verified, None, "{dir}: nothing moved, nothing checked");
        assert!(errors.is_empty(), "{dir}: {errors:?}");
    }
}
