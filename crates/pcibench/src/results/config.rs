//! A row's configuration: everything that says what was measured, nothing that says how fast.
//! Rows of two runs are the same measurement when their configurations are equal (`compare`),
//! and rows that differ only in transfer size form one curve (`plot`).

use crate::access::IoMode;
use crate::bench::result::{Completion, Kind, MapMode, Probe, Report, Row};
use crate::direction::Direction;
use crate::dma::cpu::{Access, Sync};
use crate::mmio::Width;
use crate::units::human_size;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Config {
    pub kind: Kind,
    /// DMA: the engine (a report-wide fact, part of what was measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bar: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map: Option<MapMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<Width>,
    pub dir: Direction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub concurrent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<Sync>,
    /// Latency rows measure something else than throughput rows of the same shape.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub latency: bool,
    /// Latency: what one sample timed, how completion was seen, and the DMA load behind it
    /// (the directions streamed; empty: idle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub load: Vec<Direction>,
    /// Open loop (`--rate`): the offered rate, transfers a second to three significant digits,
    /// so rows of two runs match at equal offered rates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_ops: Option<u64>,
    pub size: u64,
}

/// `ops` to three significant digits (a rate typed as `1M` and one computed from `2GB/s` of 2 KB
/// transfers are the same).
fn three_digits(ops: f64) -> u64 {
    if !(ops.is_finite() && ops >= 1.0) {
        return 0;
    }
    let scale = 10f64.powi(ops.log10().floor() as i32 - 2);
    ((ops / scale).round() * scale) as u64
}

impl Config {
    pub fn of(report: &Report, row: &Row) -> Config {
        // Names from a file are clipped: a label is a line, whatever the file holds.
        let clip = |s: &Option<String>| s.as_deref().map(|s| crate::text::clip(s, 100).into_owned());
        Config {
            kind: report.kind,
            engine: clip(&report.engine),
            bar: row.bar,
            map: row.map,
            io: row.io,
            width: row.width,
            dir: row.dir,
            offset: row.offset.filter(|o| *o != 0),
            queues: row.queues,
            window: row.window,
            concurrent: row.concurrent,
            buffer: clip(&row.buffer),
            access: row.access,
            sync: row.sync,
            latency: row.latency.is_some(),
            probe: row.probe,
            completion: row.completion,
            load: row.load.as_ref().map(|l| l.dirs.clone()).unwrap_or_default(),
            offered_ops: row.rate.as_ref().map(|f| three_digits(f.offered_ops)),
            size: row.size,
        }
    }

    /// The configuration without its transfer size: one curve of a plot.
    pub fn series(&self) -> Config {
        Config { size: 0, ..self.clone() }
    }

    /// In words: `pio BAR2 uc h2c 64-bit 1 MiB`, `dma xdma c2h 4 KiB`,
    /// `dma qdma h2c q4 random in 1 GiB 64 B`. A size of 0 is left out (a series).
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = vec![self.kind.name().to_string()];
        if self.latency && self.kind.name() != "latency" {
            parts.push("latency".into());
        }
        parts.extend(self.engine.clone());
        parts.extend(self.probe.map(|p| p.name().to_string()));
        parts.extend(self.completion.map(|c| c.name().to_string()));
        parts.extend(self.buffer.clone());
        parts.extend(self.bar.map(|b| format!("BAR{b}")));
        if let Some(m) = self.map {
            let io = if self.io == Some(IoMode::Syscall) { "-sys" } else { "" };
            parts.push(format!("{}{io}", m.name()));
        }
        parts.extend(self.access.map(|a| a.name().to_string()));
        parts.extend(self.sync.and_then(|s| serde_name(&s)));
        parts.push(if self.concurrent { format!("{} (bidir)", self.dir) } else { self.dir.to_string() });
        // `64-bit`, so a width never reads as a size.
        parts.extend(self.width.map(|w| {
            if w.to_string().parse::<u32>().is_ok() {
                format!("{w}-bit")
            } else {
                w.to_string()
            }
        }));
        parts.extend(self.queues.map(|q| format!("q{q}")));
        parts.extend(self.window.map(|w| format!("random in {}", human_size(w))));
        parts.extend(self.offset.map(|o| format!("at {o:#x}")));
        if !self.load.is_empty() {
            let dirs: Vec<String> = self.load.iter().map(|d| d.to_string()).collect();
            parts.push(format!("under {} load", dirs.join("+")));
        }
        if self.size > 0 {
            parts.push(human_size(self.size));
        }
        parts.extend(self.offered_ops.map(|o| format!("offered {}", crate::bench::rate::ops_words(o as f64))));
        parts.join(" ")
    }
}

/// An enum's name as JSON spells it (`o-sync`).
pub(crate) fn serde_name<T: Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v).ok()?.as_str().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;

    #[test]
    fn labels_and_series() {
        let mut r = Report::new(Kind::Pio, "sim", true, Via::Sim, 20.0);
        let mut row = Row::new(Direction::H2c, 1 << 20);
        row.bar = Some(2);
        row.map = Some(MapMode::Wc);
        row.io = Some(IoMode::Mmap);
        row.width = Some(Width::B64);
        row.offset = Some(0);
        let c = Config::of(&r, &row);
        assert_eq!(c.label(), "pio BAR2 wc h2c 64-bit 1 MiB");
        assert_eq!(c.series().label(), "pio BAR2 wc h2c 64-bit");
        let mut other = row.clone();
        other.size = 8;
        assert_eq!(Config::of(&r, &other).series(), c.series());
        assert_ne!(Config::of(&r, &other), c);

        r.kind = Kind::Dma;
        r.engine = Some("qdma".into());
        let mut q = Row::new(Direction::C2h, 64);
        q.queues = Some(4);
        q.window = Some(1 << 30);
        assert_eq!(Config::of(&r, &q).label(), "dma qdma c2h q4 random in 1 GiB 64 B");
    }

    #[test]
    fn open_loop_rows_match_at_equal_offered_rates() {
        use crate::bench::result::RateFigures;
        let r = Report::new(Kind::Dma, "sim-qdma", true, Via::Sim, 0.0);
        let at = |ops: f64| {
            let mut x = Row::new(Direction::H2c, 2000);
            x.rate = Some(RateFigures { offered_ops: ops, ..Default::default() });
            Config::of(&r, &x)
        };
        // `1M` and 2 GB/s of 2 KB transfers (1e6 computed) are one rate; 1.01M is another.
        assert_eq!(at(1e6), at(2e9 / 2000.0 + 1e-7));
        assert_eq!(at(1e6), at(1.0004e6));
        assert_ne!(at(1e6), at(1.01e6));
        assert_eq!(at(1e6).label(), "dma h2c 2000 B offered 1.000 M/s");
        assert_eq!(at(12_345.0).offered_ops, Some(12_300));
        assert_eq!(three_digits(0.5), 0);
    }
}
