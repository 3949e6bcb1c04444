//! Random saved runs into `plot` and `compare` (issue 28): the fixture saved runs mutated with
//! their structure in mind (numbers swapped for subnormal, negative, huge and edge values, strings
//! for control characters and long text, rows duplicated by the thousand, fields dropped or given
//! the wrong type), read as `plot` and `compare` read them, then drawn and compared. No case may
//! panic or abort, and what they write stays bounded: a plot at most `PLOT_MAX` bytes whatever
//! the input, a comparison a fixed size per row. A small seeded mutator: the same cases every run.

use pcibench::report::compare as render;
use pcibench::report::plot::{self, Input};
use pcibench::results::compare;
use pcibench::results::saved::{self, SavedRun};
use serde_json::Value;
use std::path::Path;

/// Cases per fixture.
const CASES: u64 = 250;
/// A plot is at most this, whatever it draws (64 curves of at most ~1,700 points, their bands
/// and legends).
const PLOT_MAX: usize = 4 << 20;

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values no measurement gives (the reader must refuse or survive them)...
const HOSTILE: [f64; 7] = [5e-324, -1.0, 1e308, 1e-300, 1e18, 18446744073709551615.0, -9.2e18];
/// ... and values at the edges of what it accepts (what the axes and ratios must survive).
const EDGES: [f64; 8] = [0.0, 1e-9, 1e12, 0.5, 1.0, 3.0, 4096.0, 2.5e6];

/// Counts and sizes: integers, from none to the most a u64 holds.
const INTEGERS: [u64; 7] = [0, 1, 7, 4096, 1 << 53, u64::MAX - 1, u64::MAX];

/// A value for a number that was `old`: an integer for an integer field (most of the time).
fn like(old: &Value, rng: &mut Rng) -> Value {
    if old.is_u64() && rng.below(4) != 0 {
        INTEGERS[rng.below(INTEGERS.len())].into()
    } else {
        number(rng).into()
    }
}

fn number(rng: &mut Rng) -> f64 {
    if rng.below(3) == 0 {
        HOSTILE[rng.below(HOSTILE.len())]
    } else {
        EDGES[rng.below(EDGES.len())]
    }
}
const STRINGS: [&str; 7] = ["", "\u{1b}[2J\u{0}\u{7}", "h2c", "sideways", "uc", "\u{9b}31m\u{7f}", "x\ny"];

/// Every node's path (object keys and array indices) in `v`.
fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(k.clone());
                paths(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(i.to_string());
                paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match v {
        Value::Object(m) => m.get_mut(k).expect("path"),
        Value::Array(a) => &mut a[k.parse::<usize>().expect("index")],
        _ => unreachable!("paths lead through objects and arrays"),
    })
}

/// Set every number under `key` (every figure, the counts and sizes left alone: None) to `to` (an
/// integer where there was one): every row's median, or every figure.
fn set_everywhere(v: &mut Value, key: Option<&str>, to: f64) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if x.is_number() && key.map_or(!x.is_u64(), |key| key == k) {
                    *x = if x.is_u64() && to >= 0.0 && to.fract() == 0.0 && to < 1.8e19 {
                        (to as u64).into()
                    } else {
                        to.into()
                    };
                } else {
                    set_everywhere(x, key, to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| set_everywhere(x, key, to)),
        _ => {}
    }
}

fn mutate(doc: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    match rng.below(8) {
        // Every figure of the file the same (every median, limit and band 5e-324, or 1e308).
        0 => return set_everywhere(doc, None, number(rng)),
        // One field in every row at once: every row's median.
        1 => {
            let keys = ["median_mbps", "limit_mbps", "p5_mbps", "p95_mbps", "size", "samples", "min_ns", "max_ns"];
            return set_everywhere(doc, Some(keys[rng.below(keys.len())]), number(rng));
        }
        _ => {}
    }
    let path = all[rng.below(all.len())].clone();
    let v = node(doc, &path);
    let pick = rng.below(8);
    *v = match (v.take(), pick) {
        (old @ Value::Number(_), _) => like(&old, rng),
        (Value::String(_), 0) => "A".repeat(20_000).into(),
        (Value::String(_), _) => STRINGS[rng.below(STRINGS.len())].into(),
        (Value::Bool(b), _) => (!b).into(),
        // Rows by the thousand (bounded output must not depend on how many).
        (Value::Array(a), 0..=2) if !a.is_empty() => {
            let k = 1 + rng.below(3000);
            let mut out = Vec::with_capacity(a.len() * k);
            for i in 0..k {
                for x in &a {
                    let mut x = x.clone();
                    // Distinct sizes, so a curve gets thousands of points.
                    if let Some(s) = x.get_mut("size").filter(|s| s.is_u64()) {
                        *s = (s.as_u64().unwrap_or(1).saturating_add(i as u64 * 7)).into();
                    }
                    out.push(x);
                }
            }
            Value::Array(out)
        }
        (Value::Array(mut a), 3) => {
            a.truncate(rng.below(a.len() + 1));
            Value::Array(a)
        }
        (Value::Object(mut m), 0..=2) if !m.is_empty() => {
            let k = m.keys().nth(rng.below(m.len())).cloned().unwrap_or_default();
            m.remove(&k);
            Value::Object(m)
        }
        (_, 4) => Value::Null,
        (_, 5) => number(rng).into(),
        (_, 6) => STRINGS[rng.below(STRINGS.len())].into(),
        (old, _) => old,
    };
}

fn fixture(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results").join(name);
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Read `bytes` as `plot` and `compare` read a file; draw and compare what reads. Returns how
/// many of the cases read as saved runs.
fn exercise(case: &str, bytes: &[u8], other: &SavedRun) -> bool {
    let Ok(run) = saved::parse("fuzz.json", bytes) else { return false };
    let rows: usize = run.reports.iter().map(|r| r.results.len()).sum();
    match plot::svg(&[Input { label: "fuzz".into(), run: &run }], None) {
        Ok(svg) => assert!(svg.len() <= PLOT_MAX, "{case}: a {} byte plot of {rows} rows", svg.len()),
        Err(e) => assert!(!e.to_string().contains('\n'), "{case}: {e}"),
    }
    let inputs = [Input { label: "fuzz".into(), run: &run }, Input { label: "other".into(), run: other }];
    if let Ok(svg) = plot::svg(&inputs, Some("two")) {
        assert!(svg.len() <= PLOT_MAX, "{case}: overlay of {} bytes", svg.len());
    }
    for (a, b) in [(&run, other), (other, &run), (&run, &run)] {
        let Ok(c) = compare::compare(("a.json", a), ("b.json", b), 5.0) else { continue };
        let rows_out = (c.rows.len() + c.only_a.len() + c.only_b.len() + c.unmeasured.len()).max(1);
        // A line per row (labels are clipped), plus the context and the summary.
        let bound = 64 * 1024 + rows_out * 2048;
        let table = render::table(&c);
        assert!(table.len() <= bound, "{case}: a {} byte table for {rows_out} rows", table.len());
        assert!(render::csv(&c).len() <= bound, "{case}: csv");
        assert!(render::json(&c).unwrap().len() <= 2 * bound, "{case}: json");
        assert!(!table.contains('\u{1b}') && !table.contains('\0'), "{case}: a raw control character");
    }
    true
}

#[test]
fn random_saved_runs_never_panic_and_plot_to_a_bounded_size() {
    let card_run = saved::parse("card.json", &serde_json::to_vec(&fixture("card.json")).unwrap()).unwrap();
    let mut read = 0;
    for name in ["card.json", "latency.json"] {
        let base = fixture(name);
        for i in 0..CASES {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i + 1).wrapping_mul(0x1000_0000_01b3));
            let mut doc = base.clone();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut doc, &mut rng);
            }
            let bytes = serde_json::to_vec(&doc).unwrap();
            let case = format!("{name} case {i}");
            // A panic fails the test naming the case (an abort would end the run: a failure too).
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(&case, &bytes, &card_run)));
            match ok {
                Ok(true) => read += 1,
                Ok(false) => {}
                Err(_) => panic!("{case} panicked ({} bytes of JSON)", bytes.len()),
            }
        }
    }
    // Many mutations leave a readable run, or the test would only exercise the refusals.
    assert!(read > CASES as usize / 2, "only {read} of {} cases read as saved runs", 2 * CASES);
}
