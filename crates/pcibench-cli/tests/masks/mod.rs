//! The golden tests' masks: what varies from run to run in a command's output (figures, sample
//! and batch counts, noise notes and flags, times, the widest copy routine) made `#` or a word,
//! per output shape (text, JSON, CSV), so the rest is compared byte for byte.

/// The suite's widest copy routine (`suite::widest`) named as `<widest>` where it is a row's width.
pub fn widest_as_word(text: &str) -> String {
    use pcibench::mmio::{available, Width};
    let Some(w) = [Width::V512, Width::V256, Width::V128].into_iter().find(|w| available(*w).is_ok()) else {
        return text.to_string();
    };
    let mut t = text.to_string();
    for dir in ["h2c", "c2h"] {
        t = t.replace(&format!(" {dir} {w} "), &format!(" {dir} <widest> "));
        t = t.replace(&format!(",{dir},{w},"), &format!(",{dir},<widest>,"));
    }
    t.replace(&format!("\"width\": \"{w}\""), "\"width\": \"<widest>\"")
}

// ---- masking ----

/// Notes whose presence depends on how noisy the run was, not on what was asked.
const NOISE_NOTES: [&str; 4] = ["note: noisy:", "note: few samples:", "note: batched ", "note: above the link model"];
const NOISE_FLAGS: [&str; 3] = ["!noisy", "!few", "!model"];
const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "bytes", "KiB)", "MiB)", "B)"];

/// Every decimal fraction (`12.5`, `0.89x`, `11.0K`) becomes `#`.
fn mask_fractions(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < c.len() {
        // Not inside a word, a PCI address (0000:15:00.0) or a version (0.1.0).
        if c[i].is_ascii_digit() && (i == 0 || !(c[i - 1].is_ascii_alphanumeric() || "_:.".contains(c[i - 1]))) {
            let mut j = i;
            while j < c.len() && c[j].is_ascii_digit() {
                j += 1;
            }
            if j + 1 < c.len() && c[j] == '.' && c[j + 1].is_ascii_digit() {
                let mut k = j + 1;
                while k < c.len() && c[k].is_ascii_digit() {
                    k += 1;
                }
                // An exponent (1e-3) belongs to the figure.
                if k + 1 < c.len() && (c[k] == 'e' || c[k] == 'E') {
                    let mut e = k + 1;
                    if e < c.len() && (c[e] == '-' || c[e] == '+') {
                        e += 1;
                    }
                    if e < c.len() && c[e].is_ascii_digit() {
                        while e < c.len() && c[e].is_ascii_digit() {
                            e += 1;
                        }
                        k = e;
                    }
                }
                out.push('#');
                i = k;
                continue;
            }
            out.extend(&c[i..j]);
            i = j;
            continue;
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

fn is_int(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// Replace the integer after `phrase` (e.g. "timer overhead ") with `#`, everywhere in the line.
fn mask_after(line: &str, phrase: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(phrase) {
        let (head, tail) = rest.split_at(at + phrase.len());
        out.push_str(head);
        let mut digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push('#');
            // A range, "40-90".
            let more = tail[digits..].strip_prefix('-').map_or(0, |r| r.bytes().take_while(u8::is_ascii_digit).count());
            if more > 0 {
                digits += 1 + more;
            }
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// Whole numbers right before `%` are figures (an efficiency, a share).
fn mask_percents(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        if c == '%' && !digits.is_empty() {
            out.push('#');
        } else {
            out.push_str(&digits);
        }
        digits.clear();
        out.push(c);
    }
    out.push_str(&digits);
    out
}

/// Whitespace next to a masked figure is the figure's padding: one space.
fn squeeze(line: &str) -> String {
    let indent = line.len() - line.trim_start().len();
    let mut out = line[..indent].to_string();
    let toks: Vec<&str> = line[indent..].split(' ').filter(|t| !t.is_empty()).collect();
    let runs: Vec<&str> = {
        // The gaps between tokens, as they were.
        let mut gaps = Vec::new();
        let mut rest = &line[indent..];
        for t in &toks {
            let at = rest.find(t).unwrap_or(0);
            gaps.push(&rest[..at]);
            rest = &rest[at + t.len()..];
        }
        gaps
    };
    for (i, t) in toks.iter().enumerate() {
        if i > 0 {
            let figure = |x: &str| x.contains('#');
            out.push_str(if figure(toks[i - 1]) || figure(t) { " " } else { runs[i] });
        }
        out.push_str(t);
    }
    out
}

/// Is this a 64-digit hex hash (a test pattern's SHA-256)?
fn is_hash(t: &str) -> bool {
    t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

fn mask_line(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if NOISE_NOTES.iter().any(|n| trimmed.starts_with(n)) {
        return None;
    }
    let mut l = mask_percents(&mask_fractions(line));
    for f in NOISE_FLAGS {
        l = l.replace(&format!(" {f}"), "");
    }
    for p in ["timer overhead ", "CPU ", "NUMA node ", "clock's cost (", "for ", "batched ", "time=", "of "] {
        // "for N transfers", "of N transfers": counts that follow the calibration.
        if matches!(p, "for " | "of ") {
            l = mask_counts(&l, p);
        } else {
            l = mask_after(&l, p);
        }
    }
    // The caller's capabilities (doctor) are the test runner's.
    if let Some(at) = l.find("CapEff ") {
        let from = at + "CapEff ".len();
        let n = l[from..].bytes().take_while(u8::is_ascii_hexdigit).count();
        l.replace_range(from..from + n, "#");
    }
    // Whether the engine's counters found it idle or busy depends on the host's timing: the
    // sentence after its figures goes.
    if let Some(at) = l.find(". The engine ") {
        l.truncate(at);
    }
    if l.contains("engine counters") || l.contains("data beats") || l.contains("streamed") {
        l = l
            .split(' ')
            .map(|t| if is_int(t.trim_end_matches([',', ')', ':'])) { "#" } else { t })
            .collect::<Vec<_>>()
            .join(" ");
    }
    // Runs of bare integers (a latency row's figures, a count beside a masked figure) are figures.
    let toks: Vec<&str> = l.split(' ').collect();
    let bare = |i: usize| {
        let t = toks[i];
        is_int(t) && !toks[i + 1..].iter().find(|x| !x.is_empty()).is_some_and(|n| UNITS.contains(n))
    };
    let mut masked: Vec<bool> = toks.iter().map(|t| t.contains('#') || is_hash(t)).collect();
    loop {
        let mut changed = false;
        for i in 0..toks.len() {
            if masked[i] || !bare(i) {
                continue;
            }
            let prev = (0..i).rev().find(|j| !toks[*j].is_empty());
            let next = (i + 1..toks.len()).find(|j| !toks[*j].is_empty());
            let near = |j: Option<usize>| j.is_some_and(|j| masked[j] || bare(j));
            if near(prev) || near(next) {
                masked[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let out: Vec<String> = toks
        .iter()
        .zip(&masked)
        .map(|(t, m)| match (*m, is_hash(t)) {
            (_, true) => "<sha256>".to_string(),
            (true, _) if is_int(t) => "#".to_string(),
            // "11.0K" operations: the unit follows the magnitude.
            _ if matches!(*t, "#K" | "#M" | "#G") => "#".to_string(),
            _ => t.to_string(),
        })
        .collect();
    Some(squeeze(&out.join(" ")))
}

/// "for 16 transfers", "of 8 transfers": the count becomes `#`.
fn mask_counts(line: &str, phrase: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(phrase) {
        let (head, tail) = rest.split_at(at + phrase.len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(" transfers") {
            out.push('#');
            rest = &tail[digits..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// RFC 3339 times (`2026-11-26T18:54:25Z`) and a health run's timestamp in seconds become `<time>`.
pub fn mask_times(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.to_string();
        if let Some(at) = l.find("_timestamp_seconds ").or_else(|| l.find("\"timestamp\": ")) {
            let head = l[..at].to_string();
            let rest = &l[at..];
            let sep = rest.find(' ').unwrap_or(rest.len());
            let digits = rest[sep + 1..].bytes().take_while(u8::is_ascii_digit).count();
            l = format!("{head}{}<time>{}", &rest[..=sep], &rest[sep + 1 + digits..]);
        }
        let b = l.as_bytes();
        let mut i = 0;
        let mut masked = String::new();
        while i < b.len() {
            let is_time = b.len() - i >= 20
                && b[i + 4] == b'-'
                && b[i + 10] == b'T'
                && b[i + 19] == b'Z'
                && b[i..i + 4].iter().all(u8::is_ascii_digit);
            if is_time {
                masked.push_str("<time>");
                i += 20;
            } else {
                masked.push(b[i] as char);
                i += 1;
            }
        }
        out.push_str(&masked);
        out.push('\n');
    }
    out
}

pub fn mask_text(text: &str) -> String {
    text.lines().filter_map(mask_line).map(|l| l + "\n").collect()
}

/// Fields whose values are figures of the run (their whole value becomes `#`).
const JSON_FIGURES: [&str; 20] = [
    "stats",
    "timer_overhead_ns",
    "pattern_sha256",
    "time",
    "cpu",
    "cpu_numa_node",
    "overhead_ns",
    "cdf",
    "parts",
    "counters",
    "elapsed_s",
    "outliers",
    "throughput_mbps",
    "transfers",
    "efficiency_pct",
    "seconds",
    "bytes",
    "cycles",
    "beats",
    "host_bytes",
];

fn mask_value(key: Option<&str>, v: &mut serde_json::Value) {
    use serde_json::Value;
    if key
        .is_some_and(|k| JSON_FIGURES.contains(&k) || k.ends_with("_ns") || k.ends_with("_mbps") || k.ends_with("_us"))
        && !v.is_null()
    {
        *v = Value::String("#".into());
        return;
    }
    match v {
        Value::Number(n) if n.is_f64() => *v = Value::String("#".into()),
        Value::Array(a) => {
            if key == Some("notes") {
                a.retain(|n| {
                    !matches!(
                        n.get("note").and_then(Value::as_str),
                        Some("few_samples" | "noisy" | "batched" | "above_link_model")
                    )
                });
            }
            if key == Some("command_line") {
                if let Some(first) = a.first_mut() {
                    *first = Value::String("pcibench".into());
                }
            }
            for x in a {
                mask_value(None, x);
            }
        }
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                mask_value(Some(k), x);
            }
        }
        _ => {}
    }
}

pub fn mask_json(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(mut v) => {
            mask_value(None, &mut v);
            serde_json::to_string_pretty(&v).unwrap() + "\n"
        }
        // Not JSON (an error before anything was printed): as text.
        Err(_) => mask_text(text),
    }
}

/// Split one CSV line into its fields (quoted fields may hold commas and doubled quotes).
fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn csv_quote(f: &str) -> String {
    if f.contains([',', '"', '\n']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// Columns whose values are figures of the run.
fn csv_figure(col: &str) -> bool {
    matches!(
        col,
        "transfers"
            | "samples"
            | "batch"
            | "bytes"
            | "pattern_sha256"
            | "latency_outliers"
            | "engine_cycles"
            | "engine_beats"
    ) || col.ends_with("_mbps")
        || col.ends_with("_us")
        || col.ends_with("_ns")
        || col.ends_with("_pct")
}

pub fn mask_csv(text: &str) -> String {
    let mut lines = text.lines();
    let Some(header) = lines.next() else { return String::new() };
    let cols = csv_fields(header);
    if cols.len() < 3 {
        return mask_text(text);
    }
    let mut out = format!("{header}\n");
    for line in lines {
        let fields: Vec<String> = csv_fields(line)
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let col = cols.get(i).map_or("", String::as_str);
                match col {
                    _ if f.is_empty() => f,
                    "flags" => {
                        f.split(' ').filter(|x| !matches!(*x, "noisy" | "few" | "model")).collect::<Vec<_>>().join(" ")
                    }
                    "notes" => f
                        .split("; ")
                        .filter(|n| {
                            !["noisy:", "few samples:", "batched ", "above the link model"]
                                .iter()
                                .any(|p| n.starts_with(p))
                        })
                        .map(|n| mask_line(n).unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join("; "),
                    _ if csv_figure(col) => "#".into(),
                    _ => mask_fractions(&f),
                }
            })
            .collect();
        out.push_str(&fields.iter().map(|f| csv_quote(f)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

#[test]
fn the_masks_hide_figures_and_keep_words() {
    let row = "  2 uc       h2c 64           64 KiB       4      12.24      41.27     196.20     197.20 136.8          -      -  ok !few !noisy";
    assert_eq!(mask_line(row).unwrap(), "  2 uc       h2c 64           64 KiB # # # # # # -      -  ok");
    let lat = "mmio-read    0      0x0    32 c2h      4 B idle       200        10        10        20        21       230       230       230        14      1  unverified";
    let m = mask_line(lat).unwrap();
    assert!(m.starts_with("mmio-read    0      0x0    32 c2h      4 B idle #"), "{m}");
    assert!(m.ends_with("# unverified") && !m.contains("230"), "{m}");
    assert_eq!(mask_line("      note: noisy: the samples vary (CV 1.5%)"), None);
    assert_eq!(
        mask_line("pcibench pio sim via sim; timer overhead 40 ns; MB = 10^6 bytes").unwrap(),
        "pcibench pio sim via sim; timer overhead # ns; MB = 10^6 bytes"
    );
    assert_eq!(
        mask_line("host-to-card PIO mapped with uncached-minus timing for 16 transfers of 4096 bytes:").unwrap(),
        "host-to-card PIO mapped with uncached-minus timing for # transfers of 4096 bytes:"
    );
    let j =
        mask_json(r#"{"size": 4096, "stats": {"transfers": 4}, "notes": [{"note": "noisy"}, {"note": "skipped"}]}"#);
    assert!(j.contains("\"size\": 4096") && j.contains("\"stats\": \"#\"") && !j.contains("noisy"), "{j}");
    let c = mask_csv("kind,size_bytes,median_mbps,flags,notes\npio,4096,271.2,few noisy,\"few samples: 4; x, y\"\n");
    assert_eq!(c.lines().nth(1), Some("pio,4096,#,,\"x, y\""));
}
