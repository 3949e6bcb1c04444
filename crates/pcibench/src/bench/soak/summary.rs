//! A soak's whole-run figures from its intervals: a row per stream (each interval one sample, so
//! min, median and max are its slowest, middle and fastest interval), each direction's aggregate
//! per card against what bounds it, and the fairness between the streams that share it.

use super::figures::{jain, Aggregate, Fairness, Interval, Soak};
use super::SoakDevice;
use crate::bench::result::{Report, Row, Verify};
use crate::bench::sample::stats::Samples;
use crate::direction::Direction;

/// The report's rows, aggregates and fairness, from `soak`'s intervals.
pub(super) fn finish(devices: &[SoakDevice], soak: &mut Soak, report: &mut Report) {
    for (i, st) in soak.streams.iter().enumerate() {
        let ivs: Vec<&Interval> = soak.intervals.iter().filter(|v| v.stream == i).collect();
        let mut row = Row::new(st.dir, st.size);
        row.stream = Some(st.label());
        row.concurrent = soak.streams.len() > 1;
        row.stats = stats(&ivs, st.size);
        row.limit_mbps = devices.iter().find(|d| d.device.name() == st.device).and_then(|d| limit(d, st.dir, st.size));
        row.efficiency_pct = match (&row.stats, row.limit_mbps) {
            (Some(s), Some(l)) if l > 0.0 => Some(s.mean_mbps / l * 100.0),
            _ => None,
        };
        row.verify = verdict(&ivs);
        report.results.push(row);
    }
    let span = total_span(&soak.intervals);
    for d in devices {
        for dir in [Direction::H2c, Direction::C2h] {
            let ids: Vec<usize> = (0..soak.streams.len())
                .filter(|&i| soak.streams[i].device == d.device.name() && soak.streams[i].dir == dir)
                .collect();
            let Some(&first) = ids.first() else { continue };
            let per: Vec<f64> = ids
                .iter()
                .map(|&i| {
                    soak.intervals.iter().filter(|v| v.stream == i).map(|v| v.bytes).sum::<u64>() as f64 / span / 1e6
                })
                .collect();
            let mbps: f64 = per.iter().sum();
            let limit_mbps = limit(d, dir, soak.streams[first].size);
            soak.aggregates.push(Aggregate {
                device: d.device.name().to_string(),
                dir,
                streams: ids.len(),
                mbps,
                limit_mbps,
                efficiency_pct: limit_mbps.filter(|l| *l > 0.0).map(|l| mbps / l * 100.0),
            });
            if per.len() > 1 {
                let (lo, hi) = per.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
                soak.fairness.push(Fairness {
                    device: d.device.name().to_string(),
                    dir,
                    streams: per.len(),
                    slowest_over_fastest: if hi > 0.0 { lo / hi } else { 1.0 },
                    jain: jain(&per),
                });
            }
        }
    }
    if !soak.serial.is_empty() {
        report.warnings.extend(soak.serial.iter().cloned());
    }
}

/// What bounds a direction's streams on a card at `size`: its link's model (the card reads host
/// memory for H2C, writes it for C2H), or a simulated card's datapath.
fn limit(d: &SoakDevice, dir: Direction, size: u64) -> Option<f64> {
    d.device
        .bounding_link()
        .map(|k| match dir {
            Direction::H2c => k.read_bps(size) / 1e6,
            Direction::C2h => k.write_bps(size) / 1e6,
        })
        .or(d.device.info.datapath.as_ref().map(|p| p.limit_mbps(size)))
}

/// The time the streams moved in: each interval once (every stream shares them).
fn total_span(ivs: &[Interval]) -> f64 {
    let mut seen: Vec<(u64, u64)> = ivs.iter().map(|v| (v.from_s.to_bits(), v.to_s.to_bits())).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.iter().map(|(a, b)| f64::from_bits(*b) - f64::from_bits(*a)).sum::<f64>().max(1e-9)
}

/// A stream's figures over the run: each interval that moved something is a sample (its time
/// per transfer); the mean is every byte over every interval's time.
fn stats(ivs: &[&Interval], size: u64) -> Option<crate::bench::sample::stats::Stats> {
    let moved: Vec<&&Interval> = ivs.iter().filter(|v| v.transfers > 0 && v.to_s > v.from_s).collect();
    let secs = moved.iter().map(|v| (v.to_s - v.from_s) / v.transfers as f64).collect();
    let mut st = Samples { size, batch: 1, secs, extra: 0 }.stats()?;
    let bytes: u64 = ivs.iter().map(|v| v.bytes).sum();
    let span: f64 = ivs.iter().map(|v| v.to_s - v.from_s).sum();
    st.transfers = ivs.iter().map(|v| v.transfers).sum();
    st.bytes = bytes;
    st.mean_mbps = bytes as f64 / span.max(1e-9) / 1e6;
    Some(st)
}

/// The first interval whose check failed, else ok where any was checked.
fn verdict(ivs: &[&Interval]) -> Option<Verify> {
    if let Some(m) = ivs.iter().find_map(|v| v.mismatch.clone()) {
        return Some(Verify::Mismatch { mismatch: m });
    }
    ivs.iter().any(|v| v.verified == Some(true)).then_some(Verify::Ok)
}
