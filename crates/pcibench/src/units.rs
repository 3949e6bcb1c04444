//! Sizes and rates as users type and read them: `4K`, `1M`, `0x128000`, `8..1M`, `64,4K`;
//! MB = 10^6 bytes. Every option that takes sizes (`--size` of every command, `--queues`) reads
//! them with `parse_size_list`, so they all take the same grammar.

use crate::{Error, Result};

/// Parse a byte count: decimal or 0x-hex, with an optional K/M/G suffix (powers of 1024),
/// as in `4K`, `1M`, `0x128000`, `64KiB`.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let bad = || Error::usage(format!("invalid size '{s}': use bytes such as 4096, 4K, 1M, 2G, 1T or 0x128000"));
    if t.is_empty() {
        return Err(bad());
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| bad());
    }
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        Some('t') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    n.checked_mul(mult).ok_or_else(bad)
}

/// The most sizes one option takes (each is a configuration, measured in turn).
pub const MAX_LIST: usize = 1024;

fn too_many(n: usize) -> Error {
    Error::usage(format!("{n} sizes in one option: pcibench takes at most {MAX_LIST}; measure fewer at once"))
}

/// Parse a list of sizes: comma-separated items, each a single size or `A..B` meaning every
/// power of two from A to B (`64,4K`, `8..1M`, `64..256,1M`); at most `MAX_LIST` of them.
pub fn parse_size_list(s: &str) -> Result<Vec<u64>> {
    let mut v = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        v.extend(parse_size_item(item)?);
        if v.len() > MAX_LIST {
            return Err(too_many(s.split(',').count().max(v.len())));
        }
    }
    if v.is_empty() {
        // Nothing but commas or blanks: the same refusal as any other malformed size.
        return Err(parse_size(s).err().unwrap_or_else(|| Error::usage(format!("invalid size '{s}'"))));
    }
    Ok(v)
}

/// Every size of a repeated option (`--size 4K --size 8..64,1M`), in order.
pub fn parse_sizes<S: AsRef<str>>(args: &[S]) -> Result<Vec<u64>> {
    let mut v = Vec::new();
    for a in args {
        v.extend(parse_size_list(a.as_ref())?);
        if v.len() > MAX_LIST {
            return Err(too_many(v.len()));
        }
    }
    Ok(v)
}

/// One item of a size list: a size, or a power-of-two range.
fn parse_size_item(s: &str) -> Result<Vec<u64>> {
    if let Some((a, b)) = s.split_once("..") {
        let (lo, hi) = (parse_size(a)?, parse_size(b)?);
        if lo == 0 || hi < lo {
            return Err(Error::usage(format!(
                "invalid size range '{s}': write LOW..HIGH with 0 < LOW <= HIGH, e.g. 8..1M"
            )));
        }
        let mut v = Vec::new();
        let mut x = lo;
        while x <= hi {
            v.push(x);
            match x.checked_mul(2) {
                Some(n) => x = n,
                None => break,
            }
        }
        return Ok(v);
    }
    Ok(vec![parse_size(s)?])
}

/// A size the way lspci shows it: `1 MiB`, `128 KiB`, `4 KiB`, and exact bytes otherwise (`4095 B`).
pub fn human_size(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, unit) in UNITS {
        if n >= unit && n % unit == 0 {
            return format!("{} {name}", n / unit);
        }
    }
    // Not a whole number of any unit: exact bytes, so 4095 never reads as "4.0 KiB".
    format!("{n} B")
}

/// A size in words for an estimate: `human_size` where it is whole, else to a tenth of the largest
/// unit it reaches (`953.7 MiB`).
pub fn approx_size(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, u)| n >= *u) {
        Some((name, unit)) if n % unit != 0 => format!("{:.1} {name}", n as f64 / *unit as f64),
        _ => human_size(n),
    }
}

/// A whole number with its thousands grouped: `2,000`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// MB/s with MB = 10^6 bytes, as the seeds' "Mbytes/sec".
pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return f64::INFINITY;
    }
    bytes as f64 / secs / 1e6
}

/// The longest run a duration may ask for: 30 days.
pub const MAX_DURATION_MS: u64 = 30 * 86_400_000;

/// A time span for `flag` (`--duration`, `--every`) in milliseconds: `500ms`, `60s`, `10m`,
/// `2h`, `1d`, or a plain number of seconds.
pub fn parse_duration(s: &str, flag: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let (num, ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("min").or_else(|| t.strip_suffix('m')) {
        (n, 60e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600e3)
    } else if let Some(n) = t.strip_suffix('d') {
        (n, 86_400e3)
    } else {
        (t.as_str(), 1e3)
    };
    match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n * ms <= MAX_DURATION_MS as f64 => Ok((n * ms).round().max(1.0) as u64),
        _ => Err(Error::usage(format!(
            "{flag} '{s}': give a time such as 60s, 10m, 2h or 500ms (more than 0, at most 30 days)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(parse_duration("60", "--duration").unwrap(), 60_000);
        assert_eq!(parse_duration("60s", "--duration").unwrap(), 60_000);
        assert_eq!(parse_duration("1.5m", "--duration").unwrap(), 90_000);
        assert_eq!(parse_duration("2h", "--duration").unwrap(), 7_200_000);
        assert_eq!(parse_duration("250ms", "--every").unwrap(), 250);
        assert_eq!(parse_duration("10min", "--every").unwrap(), 600_000);
        let e = parse_duration("0", "--duration").unwrap_err().to_string();
        assert!(e.starts_with("--duration '0': give a time such as 60s"), "{e}");
        assert!(parse_duration("31d", "--duration").is_err());
        assert!(parse_duration("soon", "--every").is_err());
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(
            (group_thousands(0), group_thousands(999), group_thousands(2000)),
            ("0".into(), "999".into(), "2,000".into())
        );
        assert_eq!(group_thousands(16_000_000), "16,000,000");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("0x128000").unwrap(), 0x128000);
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn ranges_are_powers_of_two() {
        assert_eq!(parse_size_list("8..64").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_size_list("1M").unwrap(), vec![1 << 20]);
        assert!(parse_size_list("64..8").is_err());
        assert!(parse_size_list("0..8").is_err());
    }

    #[test]
    fn lists_take_items_and_ranges() {
        assert_eq!(parse_size_list("64,4K").unwrap(), vec![64, 4096]);
        assert_eq!(parse_size_list(" 8..32 , 1K,").unwrap(), vec![8, 16, 32, 1024]);
        assert_eq!(parse_sizes(&["4K", "1..2,8"]).unwrap(), vec![4096, 1, 2, 8]);
        assert_eq!(parse_sizes::<&str>(&[]).unwrap(), Vec::<u64>::new());
        let e = parse_size_list(",").unwrap_err().to_string();
        assert!(e.contains("invalid size ','"), "{e}");
        assert!(parse_size_list("4K,x").is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(1 << 20), "1 MiB");
        assert_eq!(human_size(128 << 10), "128 KiB");
        assert_eq!(human_size(0x128000), "1184 KiB");
        assert_eq!(human_size(100), "100 B");
        assert_eq!(human_size(4095), "4095 B");
    }
}
