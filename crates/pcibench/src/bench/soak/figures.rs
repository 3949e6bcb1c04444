//! What a soak (`dma --duration`) found, as data: its streams, a row per stream and interval as
//! they come (the progress hands them to the caller at once: table rows or JSON lines), each
//! direction's aggregate against the link (or a simulated card's model), the fairness between
//! streams, and every error with its time. Plain data, so the saved run and every exporter take
//! it as it is.

use crate::bench::pattern::Mismatch;
use crate::direction::Direction;
use serde::{Deserialize, Serialize};

/// Which of an engine's ways carries a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "index")]
pub enum Lane {
    /// An XDMA channel (its H2C or C2H half).
    Channel(u8),
    /// A queue of an engine with queues (QDMA).
    Queue(u16),
    /// The engine's one way (edu, the NVRAM's engine).
    Engine,
}

/// One stream: a direction on one channel or queue of one device's engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stream {
    pub device: String,
    pub engine: String,
    pub lane: Lane,
    pub dir: Direction,
    /// Bytes each transfer moves.
    pub size: u64,
}

impl Stream {
    /// "sim ch1 h2c", "sim-qdma q2 c2h", "sim-nvram h2c".
    pub fn label(&self) -> String {
        match self.lane {
            Lane::Channel(c) => format!("{} ch{c} {}", self.device, self.dir),
            Lane::Queue(q) => format!("{} q{q} {}", self.device, self.dir),
            Lane::Engine => format!("{} {}", self.device, self.dir),
        }
    }
}

/// What one stream moved in one reporting interval, and what its data check found at the end of
/// it (the interval's time leaves the check out: the streams are idle while it runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The stream's index in `Soak::streams`.
    pub stream: usize,
    /// Its label, so a line read alone says whose it is.
    pub label: String,
    /// The interval's start and end, seconds from the start of the run.
    pub from_s: f64,
    pub to_s: f64,
    pub transfers: u64,
    pub bytes: u64,
    pub mbps: f64,
    /// The data check after the interval: None when it was not checked (the stream moved nothing
    /// in it: it had stopped on errors, the stop came first, or the host let the interval pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<Mismatch>,
    /// Transfers that failed in the interval.
    pub errors: u64,
    /// The last interval, cut short by the end of the run, a stop or an error that ended it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// One direction's streams together on one device, beside what bounds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    pub device: String,
    pub dir: Direction,
    pub streams: usize,
    /// The streams' bytes over the run's time, MB/s.
    pub mbps: f64,
    /// The link model's limit for this direction at the streams' size (a simulated card: its
    /// engine model's datapath), where one applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_mbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_pct: Option<f64>,
}

/// How evenly one direction's streams shared what they shared (the same link or model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    pub device: String,
    pub dir: Direction,
    pub streams: usize,
    /// The slowest stream's MB/s over the fastest's (1: equal).
    pub slowest_over_fastest: f64,
    /// Jain's fairness index of their MB/s: 1 when equal, 1/n when one stream had it all.
    pub jain: f64,
}

/// An error, with when it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakError {
    /// Seconds from the start of the run.
    pub at_s: f64,
    /// The stream it hit (None: the whole engine or run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<usize>,
    pub what: String,
}

/// The soak's own part of a DMA report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Soak {
    /// What was asked: the run's length and the reporting interval, seconds.
    pub duration_s: f64,
    pub every_s: f64,
    /// How long it ran (shorter after a stop or an error that ended it).
    pub ran_s: f64,
    pub streams: Vec<Stream>,
    pub intervals: Vec<Interval>,
    pub aggregates: Vec<Aggregate>,
    pub fairness: Vec<Fairness>,
    pub errors: Vec<SoakError>,
    /// Streams whose engine cannot start a transfer without waiting for it: they ran one
    /// transfer at a time between the others' looks, not beside them (why, in words).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serial: Vec<String>,
}

/// Jain's fairness index (Jain, Chiu, Hawe 1984): (Σx)² / (n Σx²).
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_one_taking_all() {
        assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[9.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((jain(&[0.0, 0.0]) - 1.0).abs() < 1e-12, "nothing moved: nothing unfair");
        let s = Stream {
            device: "sim".into(),
            engine: "xdma".into(),
            lane: Lane::Channel(1),
            dir: Direction::H2c,
            size: 4096,
        };
        assert_eq!(s.label(), "sim ch1 h2c");
        assert_eq!(Stream { lane: Lane::Queue(3), dir: Direction::C2h, ..s.clone() }.label(), "sim q3 c2h");
        assert_eq!(Stream { lane: Lane::Engine, ..s }.label(), "sim h2c");
    }
}
