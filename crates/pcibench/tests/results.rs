//! Saved runs, CSV and SVG plots on fixed inputs (tests/fixtures/results, made by its make.py):
//! golden outputs byte for byte (`PCIBENCH_BLESS=1 cargo test -p pcibench --test results`
//! rewrites them), the SVG parsed as XML and checked for its series, axes and ceiling lines with
//! the right values, and every bad file refused in one line.

use pcibench::pci::link::Link;
use pcibench::report::plot::{self, Input};
use pcibench::results::saved::{self, SavedRun};
use pcibench::Error;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results").join(name)
}

fn load(name: &str) -> SavedRun {
    saved::read(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Compare with the golden file, or rewrite it under PCIBENCH_BLESS=1.
fn golden(name: &str, actual: &str) {
    let path = fixture(name);
    if std::env::var_os("PCIBENCH_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if want != actual {
        let line = want.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{name} differs from the golden file at line {}:\n  want: {}\n  got:  {}\n(PCIBENCH_BLESS=1 rewrites it if the change is meant)",
            line + 1,
            want.lines().nth(line).unwrap_or(""),
            actual.lines().nth(line).unwrap_or("")
        );
    }
}

fn svg_of(files: &[(&str, &SavedRun)]) -> String {
    let inputs: Vec<Input> = files.iter().map(|(l, r)| Input { label: l.to_string(), run: r }).collect();
    plot::svg(&inputs, None).unwrap()
}

#[test]
fn a_saved_run_renders_to_the_golden_csv() {
    let card = load("card.json");
    let csv = pcibench::report::csv::document(&card.reports);
    golden("card.csv", &csv);
    let lines: Vec<&str> = csv.lines().collect();
    // One header, one line per row: 7 PIO (one skipped), 10 DMA.
    assert_eq!(lines.len(), 1 + card.reports.iter().map(|r| r.results.len()).sum::<usize>());
    assert!(lines[0].starts_with("kind,device,via,engine,bar,bar_size_bytes,map,mem,io,dir,width,size_bytes,"));
    assert!(lines[0].contains(",median_mbps,") && lines[0].contains(",limit_mbps,efficiency_pct,"));
    // The skipped row: no figures, its reason in the last column, the notes (it holds no comma, so
    // bare: a file without stream or open-loop rows has nothing after them). A run saved before
    // rows carried their memory type leaves `mem` empty.
    assert!(lines.iter().any(|l| l.starts_with("pio,0000:03:00.0,vfio,,2,1048576,wc,,mmap,h2c,64,2097152,")
        && l.ends_with(",skipped: 2 MiB does not fit in BAR2 (1 MiB)")));
    // Latency rows fill the latency columns (and leave the throughput ones empty).
    let lat = load("latency.json");
    let csv = pcibench::report::csv::document(&lat.reports);
    golden("latency.csv", &csv);
    let cols = pcibench::report::csv::COLUMNS;
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row.len(), cols.len());
    let at = |name: &str| row[cols.iter().position(|c| *c == name).unwrap()];
    assert_eq!((at("latency_samples"), at("latency_p99_ns"), at("latency_outliers")), ("100000", "1470", "12"));
    assert_eq!(at("median_mbps"), "");
}

#[test]
fn a_saved_run_renders_to_the_golden_svg_every_time() {
    let card = load("card.json");
    let one = svg_of(&[("card", &card)]);
    assert_eq!(one, svg_of(&[("card", &card)]), "the same input gives the same bytes");
    golden("card.svg", &one);
    let lat = load("latency.json");
    golden("latency.svg", &svg_of(&[("latency", &lat)]));
}

fn attr<'a>(n: &roxmltree::Node<'a, '_>, name: &str) -> &'a str {
    n.attribute(name).unwrap_or_else(|| panic!("<{}> has no {name}", n.tag_name().name()))
}

fn nums(s: &str) -> Vec<f64> {
    s.split_whitespace().map(|v| v.parse().unwrap()).collect()
}

fn class_is(n: &roxmltree::Node, class: &str) -> bool {
    n.attribute("class")
        .is_some_and(|c| c.split_whitespace().collect::<Vec<_>>() == class.split(' ').collect::<Vec<_>>())
}

/// An axis as the SVG states it: map a value to its pixel.
struct AxisAttrs {
    scale: String,
    min: f64,
    max: f64,
    px0: f64,
    px1: f64,
}

impl AxisAttrs {
    fn of(doc: &roxmltree::Document, panel: &str, class: &str) -> AxisAttrs {
        let p = doc.descendants().find(|n| class_is(n, panel)).unwrap_or_else(|| panic!("no {panel}"));
        let a = p.descendants().find(|n| class_is(n, class)).unwrap_or_else(|| panic!("no {class}"));
        AxisAttrs {
            scale: attr(&a, "data-scale").into(),
            min: attr(&a, "data-min").parse().unwrap(),
            max: attr(&a, "data-max").parse().unwrap(),
            px0: attr(&a, "data-px0").parse().unwrap(),
            px1: attr(&a, "data-px1").parse().unwrap(),
        }
    }

    fn px(&self, v: f64) -> f64 {
        let t = |v: f64| match self.scale.as_str() {
            "log2" => v.log2(),
            "log10" => v.log10(),
            _ => v,
        };
        self.px0 + (t(v) - t(self.min)) / (t(self.max) - t(self.min)) * (self.px1 - self.px0)
    }
}

fn polyline_points(n: &roxmltree::Node) -> Vec<(f64, f64)> {
    attr(n, "points")
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

#[test]
fn the_svg_has_the_series_axes_and_ceilings_with_the_right_values() {
    let card = load("card.json");
    let text = svg_of(&[("card", &card)]);
    let doc = roxmltree::Document::parse(&text).expect("the plot is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    // The title names the link: generation, width, MPS, MRRS; the line under it the path and IOMMU mode.
    let title = doc.descendants().find(|n| class_is(n, "title")).unwrap().text().unwrap();
    assert_eq!(title, "pcibench run 0000:03:00.0, Gen3 x8, MPS 256, MRRS 512");
    let subtitle = doc.descendants().find(|n| class_is(n, "subtitle")).unwrap().text().unwrap();
    assert!(subtitle.contains("via vfio (IOVA addresses); IOMMU translated, DMA-FQ"), "{subtitle}");

    let x = AxisAttrs::of(&doc, "panel bandwidth", "axis x");
    let y = AxisAttrs::of(&doc, "panel bandwidth", "axis y");
    assert_eq!(x.scale, "log2");
    assert!(x.min < 64.0 && x.max > 1048576.0, "{} {}", x.min, x.max);
    // PIO reads at ~60 MB/s beside DMA at ~6400 MB/s: more than 50x, so a log axis.
    assert_eq!(y.scale, "log10");
    let ticks: Vec<&str> = doc
        .descendants()
        .filter(|n| class_is(n, "axis x"))
        .flat_map(|a| a.descendants().filter(|n| class_is(n, "tick")).filter_map(|n| n.text()))
        .collect();
    assert!(ticks.contains(&"64 B") && ticks.contains(&"1 MiB"), "{ticks:?}");

    // One series per configuration without its size, each with its median line and band.
    let series: Vec<roxmltree::Node> = doc.descendants().filter(|n| class_is(n, "series")).collect();
    let labels: Vec<&str> = series.iter().map(|s| attr(s, "data-label")).collect();
    assert_eq!(
        labels,
        ["card: pio BAR2 wc h2c 64-bit", "card: pio BAR2 wc c2h 64-bit", "card: dma xdma h2c", "card: dma xdma c2h"]
    );
    let dma = &card.reports[1];
    let h2c = series.iter().find(|s| attr(s, "data-label") == "card: dma xdma h2c").unwrap();
    let median = h2c.children().find(|n| class_is(n, "median")).unwrap();
    let rows: Vec<_> = dma.results.iter().filter(|r| r.dir == pcibench::direction::Direction::H2c).collect();
    assert_eq!(nums(attr(&median, "data-sizes")), rows.iter().map(|r| r.size as f64).collect::<Vec<_>>());
    let medians: Vec<f64> = rows.iter().map(|r| r.stats.as_ref().unwrap().median_mbps).collect();
    assert_eq!(nums(attr(&median, "data-mbps")), medians);
    // Each point sits where the axes put its value (pixels are written to 0.1).
    for ((px, py), r) in polyline_points(&median).into_iter().zip(&rows) {
        assert!((px - x.px(r.size as f64)).abs() <= 0.06, "x of {}", r.size);
        assert!((py - y.px(r.stats.as_ref().unwrap().median_mbps)).abs() <= 0.06, "y of {}", r.size);
    }
    let band = h2c.children().find(|n| class_is(n, "band")).unwrap();
    assert_eq!(polyline_points(&band).len(), 2 * rows.len());
    assert_eq!(
        nums(attr(&band, "data-p5")),
        rows.iter().map(|r| r.stats.as_ref().unwrap().p5_mbps).collect::<Vec<_>>()
    );

    // The ceilings: the link model's limits for each direction, as pci::link computes them for
    // Gen3 x8, MPS 256, MRRS 512 (the card reads host memory for DMA h2c).
    let link = Link { gen: 3, width: 8, mps: 256, mrrs: 512 };
    let ceilings: Vec<roxmltree::Node> =
        doc.descendants().filter(|n| class_is(n, "ceiling") && n.tag_name().name() == "g").collect();
    assert_eq!(ceilings.len(), 4, "PIO h2c/c2h and DMA h2c/c2h");
    let dma_h2c = ceilings.iter().find(|c| attr(c, "data-label").ends_with("dma xdma h2c")).unwrap();
    let line = dma_h2c.children().find(|n| class_is(n, "ceiling")).unwrap();
    let want: Vec<f64> = rows.iter().map(|r| link.read_bps(r.size) / 1e6).collect();
    for (got, want) in nums(attr(&line, "data-mbps")).iter().zip(&want) {
        assert!((got - want).abs() < 1e-6, "ceiling {got} vs the model's {want}");
    }
    assert!(attr(dma_h2c, "data-label").contains("5513..6711 MB/s"));
    for ((_, py), w) in polyline_points(&line).into_iter().zip(&want) {
        assert!((py - y.px(*w)).abs() <= 0.06);
    }
    let pio_h2c = ceilings.iter().find(|c| attr(c, "data-label").ends_with("pio BAR2 wc h2c 64-bit")).unwrap();
    let line = pio_h2c.children().find(|n| class_is(n, "ceiling")).unwrap();
    assert!(nums(attr(&line, "data-mbps")).iter().all(|v| (v - link.write_bps(64) / 1e6).abs() < 1e-6));
    // No latency data, no latency panel.
    assert!(!doc.descendants().any(|n| class_is(&n, "panel latency")));
}

#[test]
fn latency_rows_plot_as_a_cdf_and_files_overlay() {
    let lat = load("latency.json");
    let text = svg_of(&[("latency", &lat)]);
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert!(!doc.descendants().any(|n| class_is(&n, "panel bandwidth")), "no throughput rows: no bandwidth panel");
    let x = AxisAttrs::of(&doc, "panel latency", "axis x");
    assert_eq!(x.scale, "log10");
    let cdfs: Vec<roxmltree::Node> =
        doc.descendants().filter(|n| class_is(n, "cdf") && n.tag_name().name() == "polyline").collect();
    assert_eq!(cdfs.len(), 2);
    let row = &lat.reports[0].results[0];
    let cdf = &row.latency.as_ref().unwrap().cdf;
    assert_eq!(nums(attr(&cdfs[0], "data-ns")), cdf.iter().map(|p| p[0]).collect::<Vec<_>>());
    assert_eq!(nums(attr(&cdfs[0], "data-fraction")), cdf.iter().map(|p| p[1]).collect::<Vec<_>>());
    let ticks: Vec<&str> = doc
        .descendants()
        .filter(|n| class_is(n, "axis y"))
        .flat_map(|a| a.descendants().filter(|n| class_is(n, "tick")).filter_map(|n| n.text()))
        .collect();
    assert_eq!(ticks, ["0%", "50%", "90%", "99%", "99.9%", "99.99%"], "down to the deepest fraction the data has");

    // Two files: every curve twice, labelled by file, the second dashed.
    let card = load("card.json");
    let text = svg_of(&[("before", &card), ("after", &card)]);
    let doc = roxmltree::Document::parse(&text).unwrap();
    let series: Vec<roxmltree::Node> = doc.descendants().filter(|n| class_is(n, "series")).collect();
    assert_eq!(series.len(), 8);
    assert_eq!(series.iter().filter(|s| attr(s, "data-label").starts_with("before: ")).count(), 4);
    assert_eq!(series.iter().filter(|s| attr(s, "data-label").starts_with("after: ")).count(), 4);
    let dashed = |s: &roxmltree::Node| {
        s.children().find(|n| class_is(n, "median")).unwrap().attribute("stroke-dasharray").is_some()
    };
    assert!(!dashed(&series[0]) && dashed(&series[4]));
}

#[test]
fn nothing_to_plot_is_said() {
    let mut card = load("card.json");
    for r in &mut card.reports {
        r.results.retain(|x| x.stats.is_none());
    }
    let inputs = [Input { label: "empty".into(), run: &card }];
    match plot::svg(&inputs, None) {
        Err(Error::NothingToMeasure(m)) => assert_eq!(m, "nothing to plot: empty holds no measured rows"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

fn refusal(bytes: &[u8]) -> String {
    match saved::parse("x.json", bytes) {
        Err(Error::Usage(m)) => {
            assert!(!m.contains('\n'), "one line: {m}");
            m
        }
        other => panic!("not refused as usage: {:?}", other.map(|r| r.command)),
    }
}

#[test]
fn bad_files_are_refused_in_one_line_each() {
    let text = std::fs::read_to_string(fixture("card.json")).unwrap();
    let m = refusal(&text.as_bytes()[..text.len() / 2]);
    assert!(m.starts_with("x.json is truncated: the JSON ends at line "), "{m}");
    assert!(refusal(b"").starts_with("x.json is empty"));
    assert!(refusal(b"BAR0 uc h2c\n").starts_with("x.json is not JSON (line 1, column 1)"));
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let report = serde_json::to_vec(&v["reports"][1]).unwrap();
    assert!(
        refusal(&report).starts_with("x.json is `pcibench dma --json` output, not a saved run"),
        "{}",
        refusal(&report)
    );
    assert!(refusal(br#"{"address":"sim","vendor_id":"10ee","bars":[]}"#).contains("`pcibench info --json` output"));
    assert!(refusal(br#"{"device":"x","checks":[],"recommended":{}}"#).contains("`pcibench doctor --json` output"));
    assert!(refusal(br#"{"hello":1}"#).contains("not a pcibench saved run"));
    v["version"] = 2.into();
    let m = refusal(&serde_json::to_vec(&v).unwrap());
    assert!(m.starts_with("x.json is a version 2 saved run, newer than this pcibench"), "{m}");
    v["version"] = "one".into();
    assert!(refusal(&serde_json::to_vec(&v).unwrap()).contains("no valid format version"));
    v["version"] = 1.into();
    v["reports"][0]["results"][0]["dir"] = "sideways".into();
    let m = refusal(&serde_json::to_vec(&v).unwrap());
    assert!(m.starts_with("x.json is a damaged saved run (version 1): unknown variant `sideways`"), "{m}");
    v["reports"] = serde_json::json!([]);
    assert!(refusal(&serde_json::to_vec(&v).unwrap()).contains("holds no results"));
}

#[test]
fn a_saved_run_cut_anywhere_is_truncated_never_not_json() {
    // A cut inside a literal or a number ("tru", "0.", "1e") is a syntax error to serde_json;
    // the lab met one (`head -c 3000 a.json` ending in "1.") as "is not JSON".
    for name in ["card.json", "latency.json"] {
        let text = std::fs::read(fixture(name)).unwrap();
        let end = text.iter().rposition(|b| !b.is_ascii_whitespace()).unwrap();
        for cut in 1..=end {
            let m = refusal(&text[..cut]);
            let whitespace = text[..cut].iter().all(u8::is_ascii_whitespace);
            assert!(
                m.starts_with("x.json is truncated: the JSON ends at line ") || whitespace,
                "{name} cut at {cut} ({:?}): {m}",
                String::from_utf8_lossy(&text[cut.saturating_sub(12)..cut])
            );
        }
    }
    // What follows a syntax error is not a cut: still "not JSON".
    assert!(refusal(b"{\"format\": tru }").starts_with("x.json is not JSON"));
    assert!(refusal(b"{\"a\": 1.,\n \"b\": 2}\n").starts_with("x.json is not JSON (line 1, "));
}

#[test]
fn a_saved_run_survives_a_write_and_a_read() {
    let card = load("card.json");
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("again.json");
    let dest = |p: &std::path::Path| pcibench::file::Destination::check("--save", "run.json", p);
    saved::write(&dest(&p).unwrap(), &card).unwrap();
    let back = saved::read(&p).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(&card).unwrap());
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1, "no temporary file left beside it");
    // Where it cannot be written, it says so before anything runs.
    let m = dest(&t.path().join("no/such/dir/a.json")).unwrap_err().to_string();
    assert!(m.contains("there is no directory") && m.contains("mkdir -p"), "{m}");
    let m = dest(t.path()).unwrap_err().to_string();
    assert!(m.contains("is a directory"), "{m}");
    dest(&p).unwrap();
    // Labels: --label first, then the file names, paths where names collide.
    let files = [PathBuf::from("a/run.json"), PathBuf::from("b/run.json"), PathBuf::from("c.json")];
    assert_eq!(saved::labels(&files, &["base".into()]).unwrap(), ["base", "b/run.json", "c"]);
    assert!(saved::labels(&files[..1], &["x".into(), "y".into()]).is_err());
}
