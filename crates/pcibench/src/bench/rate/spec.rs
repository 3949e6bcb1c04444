//! `--rate` and `--until-p99` as users type them: transfers a second (`1M`, `500K`, `2.5M`,
//! decimal suffixes as seed 004's "Mops"), bytes a second (`2GB/s`, `500MB/s`; MB = 10^6 bytes,
//! as every throughput pcibench prints), a comma-separated list of either, or `sweep`; a latency
//! bound as `100us`, `1ms`, `500ns`.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// One offered rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rate {
    /// Transfers a second.
    Ops(f64),
    /// Bytes a second (the transfer size turns it into transfers).
    Bytes(f64),
}

impl Rate {
    /// Transfers a second for transfers of `size` bytes.
    pub fn ops(&self, size: u64) -> f64 {
        match *self {
            Rate::Ops(n) => n,
            Rate::Bytes(b) => b / size.max(1) as f64,
        }
    }
}

/// What `--rate` asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rates {
    /// From 5% of the closed loop's rate up past saturation, in steps (`sweep`).
    Sweep,
    These(Vec<Rate>),
}

/// The most rates one `--rate` list takes.
pub const MAX_RATES: usize = 64;

fn bad(s: &str) -> Error {
    Error::usage(format!(
        "invalid rate '{s}': give transfers a second (5, 500K, 1M, 2.5M), bytes a second (500MB/s, 2GB/s), a list (1M,2M) or sweep"
    ))
}

/// A decimal number with an optional K/M/G suffix (10^3, 10^6, 10^9).
fn decimal(body: &str) -> Option<f64> {
    let body = body.trim();
    let (num, mult) = match body.chars().last()? {
        'k' | 'K' => (&body[..body.len() - 1], 1e3),
        'm' | 'M' => (&body[..body.len() - 1], 1e6),
        'g' | 'G' => (&body[..body.len() - 1], 1e9),
        _ => (body, 1.0),
    };
    let n: f64 = num.trim().parse().ok()?;
    (n.is_finite() && n > 0.0).then_some(n * mult)
}

impl FromStr for Rate {
    type Err = Error;
    fn from_str(s: &str) -> Result<Rate> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        let rate = match lower.strip_suffix("b/s") {
            Some(body) => Rate::Bytes(decimal(body).ok_or_else(|| bad(s))?),
            None => Rate::Ops(decimal(lower.strip_suffix("/s").unwrap_or(&lower)).ok_or_else(|| bad(s))?),
        };
        // Above a billion transfers a second no loop keeps a schedule: a typo, not a rate.
        match rate {
            Rate::Ops(n) if n > 1e9 => Err(Error::usage(format!(
                "--rate {s}: more than 1G transfers a second is beyond any host's loop; give a rate such as 1M"
            ))),
            _ => Ok(rate),
        }
    }
}

impl FromStr for Rates {
    type Err = Error;
    fn from_str(s: &str) -> Result<Rates> {
        if s.trim().eq_ignore_ascii_case("sweep") {
            return Ok(Rates::Sweep);
        }
        let v: Vec<Rate> =
            s.split(',').map(str::trim).filter(|i| !i.is_empty()).map(str::parse).collect::<Result<_>>()?;
        match v.len() {
            0 => Err(bad(s)),
            n if n > MAX_RATES => Err(Error::usage(format!(
                "{n} rates in --rate: pcibench takes at most {MAX_RATES}; or use --rate sweep"
            ))),
            _ => Ok(Rates::These(v)),
        }
    }
}

/// A latency bound in nanoseconds: `100us`, `1ms`, `500ns`, `0.5ms` (a bare number is µs).
pub fn parse_latency(s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        (t.as_str(), 1e3)
    };
    match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n * mult <= 60e9 => Ok((n * mult).round().max(1.0) as u64),
        _ => Err(Error::usage(format!("invalid latency '{s}': give a time such as 100us, 1ms or 500ns (at most 60s)"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_transfers_or_bytes_a_second() {
        assert_eq!("1M".parse::<Rate>().unwrap(), Rate::Ops(1e6));
        assert_eq!("2.5m".parse::<Rate>().unwrap(), Rate::Ops(2.5e6));
        assert_eq!("5".parse::<Rate>().unwrap(), Rate::Ops(5.0));
        assert_eq!("500K/s".parse::<Rate>().unwrap(), Rate::Ops(5e5));
        assert_eq!("2GB/s".parse::<Rate>().unwrap(), Rate::Bytes(2e9));
        assert_eq!("500MB/s".parse::<Rate>().unwrap(), Rate::Bytes(5e8));
        assert_eq!(Rate::Bytes(2e9).ops(4000), 5e5);
        assert_eq!("sweep".parse::<Rates>().unwrap(), Rates::Sweep);
        assert_eq!("1M, 2GB/s".parse::<Rates>().unwrap(), Rates::These(vec![Rate::Ops(1e6), Rate::Bytes(2e9)]));
        for bad in ["", "0", "-1M", "fast", "1X", "2GB", "nan", "2G", ","] {
            let e = bad.parse::<Rates>();
            assert!(e.is_err(), "{bad} parsed as {e:?}");
        }
        let e = "2G".parse::<Rates>().unwrap_err().to_string();
        assert!(e.contains("beyond any host"), "{e}");
    }

    #[test]
    fn latency_bounds_take_their_unit() {
        assert_eq!(parse_latency("100us").unwrap(), 100_000);
        assert_eq!(parse_latency("1ms").unwrap(), 1_000_000);
        assert_eq!(parse_latency("500ns").unwrap(), 500);
        assert_eq!(parse_latency("0.5ms").unwrap(), 500_000);
        assert_eq!(parse_latency("20").unwrap(), 20_000);
        for bad in ["", "x", "-1us", "0", "100h", "61s"] {
            assert!(parse_latency(bad).is_err(), "{bad}");
        }
    }
}
