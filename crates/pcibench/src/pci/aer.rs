//! AER counters from sysfs (drivers/pci/pcie/aer.c, kernel >= 4.19): `aer_dev_correctable`,
//! `aer_dev_nonfatal`, `aer_dev_fatal` hold one `NAME COUNT` line per error kind and a
//! `TOTAL_ERR_*` line; root ports also have `aer_rootport_total_err_{cor,fatal,nonfatal}`. Names
//! differ between kernels ("Header Log Overflow" vs "HeaderOF"), so the count is each line's
//! last token and the name is everything before it.

use std::path::Path;

/// The per-device counter files and the severity each holds.
pub const DEV_FILES: [(&str, &str); 3] =
    [("aer_dev_correctable", "correctable"), ("aer_dev_nonfatal", "nonfatal"), ("aer_dev_fatal", "fatal")];
/// Root ports: totals of what the port's children reported.
pub const ROOTPORT_FILES: [(&str, &str); 3] = [
    ("aer_rootport_total_err_cor", "correctable"),
    ("aer_rootport_total_err_nonfatal", "nonfatal"),
    ("aer_rootport_total_err_fatal", "fatal"),
];

/// One counter file, parsed: (name, count) per line in file order. A name repeated in the file
/// keeps both entries, the later one suffixed " (2)", so neither hides the other.
pub fn parse(text: &str) -> Result<Vec<(String, u64)>, String> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, count) = match line.rsplit_once(char::is_whitespace) {
            Some((n, c)) => (n.trim(), c),
            None => ("total", line),
        };
        let v: u64 = count.parse().map_err(|_| format!("{line:?} does not end in a count"))?;
        let mut key = name.to_string();
        let mut k = 2;
        while out.iter().any(|(n, _)| *n == key) {
            key = format!("{name} ({k})");
            k += 1;
        }
        out.push((key, v));
    }
    Ok(out)
}

/// The total of a parsed per-device file: its TOTAL_ERR_* line, else the sum of the others.
/// None when the sum does not fit 64 bits (the file is not what the kernel writes).
pub fn total(entries: &[(String, u64)]) -> Option<u64> {
    match entries.iter().find(|(n, _)| n.starts_with("TOTAL_ERR")) {
        Some((_, v)) => Some(*v),
        None => entries.iter().try_fold(0u64, |acc, (_, v)| acc.checked_add(*v)),
    }
}

/// Every counter of a device directory, keyed `severity:name` (`correctable:BadTLP`,
/// `rootport:correctable`); empty when the kernel exposes none. Unparsable files are reported in
/// `warnings` and skipped.
pub fn read_all(dir: &Path, warnings: &mut Vec<String>) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (file, sev) in DEV_FILES {
        let Ok(text) = crate::file::read_string(&dir.join(file), crate::file::read::KERNEL_MAX) else { continue };
        match parse(&text) {
            Ok(entries) => out.extend(entries.into_iter().map(|(n, v)| (format!("{sev}:{n}"), v))),
            Err(e) => warnings.push(format!("{file}: {e}")),
        }
    }
    for (file, sev) in ROOTPORT_FILES {
        let Ok(text) = crate::file::read_string(&dir.join(file), crate::file::read::KERNEL_MAX) else { continue };
        match text.trim().parse::<u64>() {
            Ok(v) => out.push((format!("rootport:{sev}"), v)),
            Err(_) => warnings.push(format!("{file}: {:?} is not a count", text.trim())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kernel_naming_styles() {
        let long = "RxErr 0\nBadTLP 2\nBadDLLP 0\nRollover 0\nTimeout 1\nNonFatalErr 0\nCorrIntErr 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 3\n";
        let e = parse(long).unwrap();
        assert_eq!(e[1], ("BadTLP".into(), 2));
        assert_eq!(e[7], ("Header Log Overflow".into(), 0));
        assert_eq!(total(&e), Some(3));
        let short = "RxErr 1\nBadTLP 2\nHeaderOF 0\n";
        assert_eq!(total(&parse(short).unwrap()), Some(3));
    }

    #[test]
    fn malformed_files_are_caught() {
        assert!(parse("BadTLP two\n").is_err());
        assert!(parse("BadTLP 18446744073709551616\n").is_err(), "2^64 does not wrap to 0");
        let e = parse("BadTLP 1\nBadTLP 2\n").unwrap();
        assert_eq!(e, vec![("BadTLP".into(), 1), ("BadTLP (2)".into(), 2)], "duplicates do not overwrite");
        let huge = parse("A 18446744073709551615\nB 1\n").unwrap();
        assert_eq!(total(&huge), None, "a sum past 2^64 is refused, not wrapped");
    }
}
