//! Golden outputs: every command's stdout, stderr and exit status on the simulated cards, the
//! fixture sysfs tree and the fixture saved runs, in every format, pinned byte for byte apart
//! from the figures. Figures that vary from run to run (throughput, latency, sample and batch
//! counts, the timer's overhead, the CPU the thread ran on, the time, pattern hashes) become `#`;
//! the flags and notes that only say how noisy a run was (`!noisy`, `!few`, "batched") are
//! dropped; everything else (words, units, sizes, columns, flags that follow from the input,
//! exit status) must stay as it is.
//!
//! When an output changes on purpose, regenerate the golden files and review the diff:
//!     PCIBENCH_BLESS=1 cargo test -p pcibench-cli --test golden
//! They live in tests/golden/NAME.txt, one per case below.

mod common;
use pcibench::pci::fixture::seed_tree;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a case runs: no sysfs at all (the simulated cards alone), the fixture tree (the seeds'
/// cards, see `pci::fixture::seed_tree`), or in the fixture saved runs' folder.
#[derive(Clone, Copy)]
enum Root {
    None,
    Fixture,
    SavedRuns,
}

/// How the output is read for masking.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// Text (table, seed, info, doctor): figures by their shape.
    Text,
    /// One JSON document: figures by their field.
    Json,
    /// CSV: figures by their column.
    Csv,
    /// Output that has no varying figures (list, info, plots and comparisons of fixed files):
    /// compared as is.
    Exact,
    /// health: as is but for the time it ran (an RFC 3339 time, `*_timestamp_seconds N`,
    /// `"timestamp": N`).
    Health,
}

fn fixture_root(dir: &Path) {
    seed_tree(dir);
    // The fixture's resource files are empty: give 0000:15:00.0's their BARs' sizes, so PIO and
    // latency can map them (reads of zeros; writes need consent they are not given).
    let dev = dir.join("sys/devices/pci0000:00/0000:15:00.0");
    for (i, size) in [(0, 1u64 << 20), (2, 128 << 10), (4, 64 << 10)] {
        for f in [format!("resource{i}"), format!("resource{i}_wc")] {
            std::fs::OpenOptions::new().write(true).open(dev.join(f)).unwrap().set_len(size).unwrap();
        }
    }
}

fn saved_runs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pcibench/tests/fixtures/results")
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Run one case and compare its masked output with tests/golden/NAME.txt (or rewrite it).
fn check(name: &str, root: Root, shape: Shape, args: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pcibench"));
    cmd.args(args);
    let sysroot = match root {
        Root::None | Root::SavedRuns => PathBuf::from("/nonexistent"),
        Root::Fixture => {
            fixture_root(tmp.path());
            tmp.path().to_path_buf()
        }
    };
    cmd.env("PCIBENCH_SYSROOT", &sysroot);
    // Whether a row is estimated past 10 s depends on the host's load (sim-nvram's 8 KiB rows
    // take seconds on a busy 2-CPU VM): goldens hold what does not.
    cmd.env("PCIBENCH_LONG_SECS", "1000000");
    if let Root::SavedRuns = root {
        cmd.current_dir(saved_runs());
    }
    let o = cmd.output().expect("run pcibench");
    let root_text = sysroot.to_string_lossy().into_owned();
    let clean = |s: &[u8]| String::from_utf8_lossy(s).replace(&root_text, "<root>");
    let stdout = match shape {
        Shape::Text => mask_text(&clean(&o.stdout)),
        Shape::Json => mask_json(&clean(&o.stdout)),
        Shape::Csv => mask_csv(&clean(&o.stdout)),
        Shape::Exact => clean(&o.stdout),
        Shape::Health => mask_times(&clean(&o.stdout)),
    };
    // The suite measures the widest SIMD routine this CPU has: named in the goldens as <widest>,
    // so they hold on CPUs with other vector units.
    let stdout = if args.first() == Some(&"run") { widest_as_word(&stdout) } else { stdout };
    let stderr = match shape {
        Shape::Exact => clean(&o.stderr),
        Shape::Health => mask_times(&clean(&o.stderr)),
        _ => mask_text(&clean(&o.stderr)),
    };
    let actual = format!(
        "$ pcibench {}\nexit: {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
        args.join(" "),
        o.status.code().map_or("signal".into(), |c| c.to_string())
    );
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os("PCIBENCH_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (PCIBENCH_BLESS=1 writes it)", path.display()));
    if want != actual {
        let line = want
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(actual.lines().count()));
        panic!(
            "{name}: the output differs from tests/golden/{name}.txt at line {}:\n  want: {}\n  got:  {}\n\
             whole output:\n{actual}\n(PCIBENCH_BLESS=1 cargo test -p pcibench-cli --test golden rewrites the golden files if the change is meant)",
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

/// The suite's widest copy routine (`suite::widest`) named as `<widest>` where it is a row's width.
fn widest_as_word(text: &str) -> String {
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
fn mask_times(text: &str) -> String {
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

fn mask_text(text: &str) -> String {
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

fn mask_json(text: &str) -> String {
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

fn mask_csv(text: &str) -> String {
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

macro_rules! golden {
    ($($name:ident: $root:ident $shape:ident [$($arg:expr),* $(,)?];)*) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name), Root::$root, Shape::$shape, &[$($arg),*]);
            }
        )*
    };
}

golden! {
    // Devices: list and info.
    list_fixture: Fixture Exact ["list"];
    list_fixture_json: Fixture Exact ["list", "--json"];
    list_filtered: Fixture Exact ["list", "-d", "1332:5425"];
    info_sim: None Exact ["info", "sim"];
    info_sim_qdma: None Exact ["info", "sim-qdma"];
    info_sim_nvram: None Exact ["info", "sim-nvram"];
    info_sim_xdma_st: None Exact ["info", "sim-xdma-st"];
    info_sim_json: None Exact ["info", "sim", "--json"];
    info_sim_qdma_json: None Exact ["info", "sim-qdma", "--json"];
    info_sim_nvram_json: None Exact ["info", "sim-nvram", "--json"];
    info_fixture_xilinx: Fixture Exact ["info", "15:00.0"];
    info_fixture_xilinx_json: Fixture Exact ["info", "15:00.0", "--json"];
    info_fixture_behind_bridge: Fixture Exact ["info", "22:00.0"];
    info_fixture_nvram: Fixture Exact ["info", "2d:00.0"];

    // PIO.
    pio_sim_sizes: None Text ["pio", "sim", "--bar", "2", "--size", "4K", "--size", "64K", "--total", "256K"];
    pio_sim_whole_bars: None Text ["pio", "sim", "--total", "2M"];
    pio_sim_seed: None Text ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K", "--total", "64K", "--format", "seed"];
    pio_sim_json: None Json ["pio", "sim", "--bar", "2", "--map", "wc", "--size", "4K", "--total", "64K", "--json"];
    pio_sim_csv: None Csv ["pio", "sim", "--bar", "2", "--map", "wc", "--size", "4K", "--total", "64K", "--format", "csv"];
    pio_sim_latency: None Text ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K", "--total", "64K", "--latency"];
    pio_sim_range_and_widths: None Text ["pio", "sim", "--bar", "2", "--map", "wc", "--width", "32", "--width", "memcpy", "--size", "8..32", "--total", "1K"];
    pio_sim_size_list: None Text ["pio", "sim", "--bar", "2", "--map", "uc", "--size", "4K,8..16K", "--total", "64K"];
    pio_sim_syscall: None Text ["pio", "sim", "--io", "syscall"];
    pio_sim_nvram: None Text ["pio", "sim-nvram", "--bar", "2", "--map", "uc", "--size", "64K", "--total", "256K"];
    pio_fixture_reads: Fixture Text ["pio", "15:00.0", "--bar", "2", "--dir", "c2h", "--size", "4K", "--size", "64K", "--total", "256K"];
    pio_fixture_default: Fixture Text ["pio", "15:00.0", "--total", "1M"];
    pio_fixture_json: Fixture Json ["pio", "15:00.0", "--bar", "2", "--map", "uc", "--dir", "c2h", "--size", "4K", "--total", "64K", "--json"];
    pio_fixture_writes_refused: Fixture Text ["pio", "15:00.0", "--dir", "h2c", "--total", "1M"];
    pio_bad_bar: None Text ["pio", "sim", "--bar", "3"];

    // DMA.
    dma_sim_default_size: None Text ["dma", "sim", "--total", "4M"];
    dma_sim_card_addr: None Text ["dma", "sim", "--card-addr", "0x1000", "--total", "4M"];
    dma_sim_seed: None Text ["dma", "sim", "--size", "4K", "--size", "64K", "--total", "256K", "--format", "seed"];
    dma_sim_json: None Json ["dma", "sim", "--size", "64K", "--total", "256K", "--json"];
    dma_sim_csv: None Csv ["dma", "sim", "--size", "64K", "--total", "256K", "--format", "csv"];
    dma_sim_list_sizes: None Text ["dma", "sim", "--size", "4K,16K", "--dir", "c2h", "--total", "64K"];
    dma_sim_qdma_default_size: None Text ["dma", "sim-qdma", "--total", "32M"];
    dma_sim_qdma_queues: None Text ["dma", "sim-qdma", "--queues", "1,4", "--size", "64..128", "--dir", "all", "--total", "256K"];
    dma_sim_qdma_random: None Text ["dma", "sim-qdma", "--pattern", "random", "--window", "1M", "--queues", "2", "--size", "4K", "--total", "256K"];
    dma_sim_qdma_seed: None Text ["dma", "sim-qdma", "--queues", "1..2", "--size", "4K", "--total", "64K", "--format", "seed"];
    dma_sim_qdma_json: None Json ["dma", "sim-qdma", "--size", "4K", "--total", "64K", "--json"];
    dma_sim_xdma_st: None Text ["dma", "sim-xdma-st", "--size", "64,4K,64K", "--dir", "both", "--total", "256K"];
    dma_sim_xdma_st_json: None Json ["dma", "sim-xdma-st", "--size", "4K", "--total", "64K", "--json"];
    dma_sim_xdma_st_card_addr: None Text ["dma", "sim-xdma-st", "--card-addr", "0x10", "--size", "64"];
    dma_sim_xdma_st_csv: None Csv ["dma", "sim-xdma-st", "--size", "64", "--total", "16K", "--format", "csv"];
    dma_sim_xdma_st_completion_both: None Text ["dma", "sim-xdma-st", "--completion", "both", "--size", "64,4K", "--total", "64K"];
    latency_sim_xdma_st_dma_completion_json: None Json ["latency", "sim-xdma-st", "--dma", "--completion", "both", "--samples", "100", "--dma-samples", "20", "--size", "64", "--format", "json"];
    info_sim_qdma_st: None Exact ["info", "sim-qdma-st"];
    dma_sim_qdma_st_queues: None Text ["dma", "sim-qdma-st", "--queues", "1,2", "--size", "64,64K", "--dir", "all", "--total", "256K"];
    dma_sim_qdma_st_seed: None Text ["dma", "sim-qdma-st", "--queues", "1..2", "--size", "4K", "--total", "64K", "--format", "seed"];
    dma_sim_qdma_st_json: None Json ["dma", "sim-qdma-st", "--size", "64K", "--total", "256K", "--json"];
    dma_sim_nvram: None Text ["dma", "sim-nvram", "--size", "8K", "--size", "1M", "--total", "4M"];
    dma_sim_nvram_seed: None Text ["dma", "sim-nvram", "--size", "1M", "--total", "2M", "--format", "seed"];
    dma_sim_nvram_card_size: None Text ["dma", "sim-nvram", "--card-size", "1M", "--total", "2M"];
    dma_sim_completion_both: None Text ["dma", "sim", "--completion", "both", "--size", "4K", "--total", "64K"];
    dma_sim_completion_json: None Json ["dma", "sim", "--completion", "both", "--size", "4K", "--total", "64K", "--format", "json"];
    dma_sim_nvram_completion_both: None Text ["dma", "sim-nvram", "--completion", "both", "--size", "64K", "--total", "512K"];
    dma_sim_qdma_completion_both: None Text ["dma", "sim-qdma", "--completion", "both", "--queues", "1,4", "--size", "4K", "--total", "256K"];
    dma_sim_qdma_aggregated: None Text ["dma", "sim-qdma", "--completion", "both", "--queues", "1,4", "--qdma-intr", "aggregated", "--size", "4K", "--total", "256K"];
    dma_refused_qdma_intr: None Text ["dma", "sim-qdma", "--qdma-intr", "aggregated"];
    dma_refused_engine: None Text ["dma", "sim", "--engine", "edu"];
    dma_refused_size: None Text ["dma", "sim", "--size", "2M"];
    dma_refused_queues: None Text ["dma", "sim", "--queues", "2"];
    dma_refused_bidir: None Text ["dma", "sim", "--dir", "bidir"];
    dma_refused_window: None Text ["dma", "sim", "--window", "1M"];
    dma_refused_total: None Text ["dma", "sim", "--size", "4K", "--total", "1K"];
    dma_fixture_needs_consent: Fixture Text ["dma", "15:00.0", "--engine", "xdma"];
    dma_fixture_no_engine: Fixture Text ["dma", "15:00.0", "--allow-dma"];

    // Latency.
    latency_sim: None Text ["latency", "sim", "--samples", "200"];
    latency_sim_json: None Json ["latency", "sim", "--width", "32", "--width", "64", "--samples", "200", "--json"];
    latency_sim_csv: None Csv ["latency", "sim", "--samples", "200", "--format", "csv"];
    latency_sim_dma: None Text ["latency", "sim", "--dma", "--samples", "100", "--dma-samples", "20", "--size", "64,4K"];
    latency_sim_dma_seed: None Text ["latency", "sim", "--dma", "--samples", "100", "--dma-samples", "20", "--format", "seed"];
    latency_sim_dma_completion_json: None Json ["latency", "sim", "--dma", "--completion", "both", "--samples", "100", "--dma-samples", "20", "--size", "64", "--format", "json"];
    latency_sim_dma_completion_seed: None Text ["latency", "sim", "--completion", "both", "--samples", "100", "--dma-samples", "20", "--size", "64,4K", "--format", "seed"];
    latency_sim_load: None Text ["latency", "sim", "--load", "h2c", "--samples", "200"];
    latency_sim_qdma_load: None Text ["latency", "sim-qdma", "--load", "both", "--samples", "200", "--load-size", "64K"];
    latency_sim_nvram_dma: None Text ["latency", "sim-nvram", "--dma", "--samples", "100", "--dma-samples", "10", "--size", "4K"];
    latency_fixture: Fixture Text ["latency", "15:00.0", "--width", "32", "--samples", "200"];
    latency_refused: None Text ["latency", "sim", "--size", "64"];
    latency_refused_seed: None Text ["latency", "sim", "--format", "seed"];
    latency_fixture_dma_needs_engine: Fixture Text ["latency", "15:00.0", "--dma", "--allow-dma"];

    // Buffers.
    buffers_host: None Text ["buffers", "--size", "64K", "--total", "256K"];
    buffers_heap_seed: None Text ["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--format", "seed"];
    buffers_heap_json: None Json ["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--json"];
    buffers_heap_csv: None Csv ["buffers", "--buffer", "heap", "--size", "64K", "--total", "256K", "--format", "csv"];
    buffers_sim_device: None Text ["buffers", "--device", "sim", "--buffer", "device", "--size", "64K", "--total", "256K"];

    // The suite.
    run_sim: None Text ["run", "sim", "--total", "1M"];
    run_sim_seed: None Text ["run", "sim", "--total", "1M", "--format", "seed"];
    run_sim_json: None Json ["run", "sim", "--total", "1M", "--json"];
    run_sim_csv: None Csv ["run", "sim", "--total", "1M", "--format", "csv"];
    run_sim_qdma: None Text ["run", "sim-qdma", "--total", "1M"];
    run_sim_qdma_small_total: None Text ["run", "sim-qdma", "--total", "512K"];
    run_sim_nvram: None Text ["run", "sim-nvram", "--total", "1M"];
    run_fixture: Fixture Text ["run", "15:00.0", "--total", "1M"];
    run_fixture_writes: Fixture Text ["run", "15:00.0", "--total", "1M", "--allow-write"];

    // Doctor.
    doctor_sim: None Text ["doctor", "sim"];
    doctor_fixture_xilinx: Fixture Text ["doctor", "15:00.0"];
    doctor_fixture_bridge_json: Fixture Json ["doctor", "20:00.0", "--json"];
    doctor_fixture_vfio: Fixture Text ["doctor", "2d:00.0"];

    // Saved runs: plot and compare.
    plot_card: SavedRuns Exact ["plot", "card.json", "-o", "-"];
    plot_latency: SavedRuns Exact ["plot", "latency.json", "card.json", "--label", "lat", "--label", "card", "-o", "-"];
    compare_card: SavedRuns Exact ["compare", "card.json", "card.json"];
    compare_card_json: SavedRuns Exact ["compare", "card.json", "card.json", "--json"];
    compare_card_csv: SavedRuns Exact ["compare", "card.json", "card.json", "--format", "csv"];
    compare_refused: SavedRuns Exact ["compare", "card.json", "latency.json"];

    // Link health on the fixture tree, and saved runs exported for Prometheus.
    health_fixture: Fixture Health ["health"];
    health_fixture_json: Fixture Health ["health", "--json"];
    health_fixture_openmetrics: Fixture Health ["health", "--format", "openmetrics"];
    health_fixture_named: Fixture Health ["health", "22:00.0"];
    health_refused: Fixture Health ["health", "--watch", "1"];
    export_card: SavedRuns Exact ["export", "card.json", "--format", "openmetrics"];
    export_latency: SavedRuns Exact ["export", "latency.json"];
}
