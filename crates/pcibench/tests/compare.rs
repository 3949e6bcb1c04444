//! `compare` on crafted pairs of saved runs (from tests/fixtures/results/card.json): identical
//! runs show no change, a 10% slowdown with tight noise is flagged, the same change inside wide
//! noise is not, too few samples are not judged, and a different link or IOMMU mode is called out
//! first, loudly; runs of different commands are refused.

use pcibench::outcome::Outcome;
use pcibench::report::compare as render;
use pcibench::results::compare::{compare, Comparison, Verdict, DEFAULT_THRESHOLD_PCT};
use pcibench::results::saved::{self, SavedRun};
use std::path::PathBuf;

fn card() -> SavedRun {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/card.json");
    saved::read(&p).unwrap()
}

/// Every measured row's median times `factor`, its p5..p95 band at +-`spread` of the median.
fn shaped(mut run: SavedRun, factor: f64, spread: f64) -> SavedRun {
    for r in &mut run.reports {
        for x in &mut r.results {
            if let Some(s) = &mut x.stats {
                s.median_mbps *= factor;
                s.p5_mbps = s.median_mbps * (1.0 - spread);
                s.p95_mbps = s.median_mbps * (1.0 + spread);
            }
        }
    }
    run
}

fn cmp(a: &SavedRun, b: &SavedRun) -> Comparison {
    compare(("A", a), ("B", b), DEFAULT_THRESHOLD_PCT).unwrap()
}

fn measured(run: &SavedRun) -> usize {
    run.rows().filter(|(_, x)| x.stats.is_some()).count()
}

#[test]
fn identical_runs_show_no_change() {
    let a = card();
    let c = cmp(&a, &a);
    assert!(c.context.is_empty(), "{:?}", c.context);
    assert_eq!(c.rows.len(), measured(&a));
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Same && r.ratio == 1.0));
    assert_eq!(c.unmeasured, ["pio BAR2 wc h2c 64-bit 2 MiB"], "the skipped row is listed, not judged");
    assert_eq!(Outcome::of_comparison(&c).code(), 0);
    let t = render::table(&c);
    assert!(t.contains("context: the same device, link, access path, IOMMU mode, CPU, kernel and pcibench version"));
    assert!(t.contains("summary: 0 slower, 0 faster, 16 within noise, 0 with too few samples"), "{t}");
}

#[test]
fn a_ten_percent_slowdown_with_tight_noise_is_flagged() {
    let a = shaped(card(), 1.0, 0.01);
    let b = shaped(card(), 0.9, 0.01);
    let c = cmp(&a, &b);
    assert!(
        c.rows.iter().all(|r| r.verdict == Verdict::Slower),
        "{:?}",
        c.rows.iter().map(|r| r.verdict).collect::<Vec<_>>()
    );
    let r = &c.rows[0];
    assert!((r.ratio - 0.9).abs() < 1e-9);
    assert!((r.ratio_high - 0.9 * 1.01 / 0.99).abs() < 1e-9 && r.ratio_high < 1.0);
    assert_eq!(Outcome::of_comparison(&c).code(), 5, "exit 5: a row got slower");
    assert!(render::table(&c).contains("SLOWER"));
    // And the other way round: faster, which is not a failure.
    let c = cmp(&b, &a);
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Faster));
    assert_eq!(Outcome::of_comparison(&c).code(), 0);
}

#[test]
fn a_ten_percent_change_inside_wide_noise_is_not_flagged() {
    let a = shaped(card(), 1.0, 0.15);
    let b = shaped(card(), 0.9, 0.15);
    let c = cmp(&a, &b);
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Same));
    assert!(c.rows.iter().all(|r| r.ratio_low < 1.0 && r.ratio_high > 1.0));
    assert_eq!(Outcome::of_comparison(&c), Outcome::Ok);
    // Tight bands but a change below the threshold: not flagged either.
    let c = cmp(&shaped(card(), 1.0, 0.001), &shaped(card(), 0.98, 0.001));
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Same));
    let c = compare(("A", &shaped(card(), 1.0, 0.001)), ("B", &shaped(card(), 0.98, 0.001)), 1.0).unwrap();
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Slower), "--threshold 1 flags a 2% change");
}

#[test]
fn too_few_samples_are_not_judged() {
    let mut b = shaped(card(), 0.5, 0.01);
    for r in &mut b.reports {
        for x in r.results.iter_mut().filter_map(|x| x.stats.as_mut()) {
            x.samples = 4;
        }
    }
    let c = cmp(&shaped(card(), 1.0, 0.01), &b);
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::FewSamples));
    assert_eq!(Outcome::of_comparison(&c), Outcome::Ok);
}

#[test]
fn a_different_link_or_iommu_mode_is_called_out_first() {
    let a = card();
    let mut b = card();
    b.device.as_mut().unwrap().link.as_mut().unwrap().current_width = Some(4);
    b.iommu.as_mut().unwrap().group_type = Some("identity".into());
    b.context.as_mut().unwrap().kernel = Some("6.1.0-27-amd64".into());
    let c = cmp(&a, &b);
    let what: Vec<(&str, bool)> = c.context.iter().map(|d| (d.what.as_str(), d.questionable)).collect();
    assert_eq!(what, [("link", true), ("IOMMU", true), ("kernel", false)]);
    assert_eq!(c.context[0].a, "Gen3 x8, MPS 256, MRRS 512");
    assert_eq!(c.context[0].b, "Gen3 x4, MPS 256, MRRS 512");
    assert!(c.questionable());
    let t = render::table(&c);
    let lines: Vec<&str> = t.lines().collect();
    let link = lines.iter().position(|l| l.starts_with("!! link")).expect("the link line, marked");
    let header = lines.iter().position(|l| l.starts_with("configuration")).unwrap();
    assert!(link < header, "context differences lead:\n{t}");
    assert!(
        lines[link + 1].starts_with("!! IOMMU")
            && lines[link + 1]
                .contains("translated, DMA-FQ (lazy invalidation) [intel_iommu=on] -> passthrough (identity domain)")
    );
    assert!(lines[link + 2].starts_with("   kernel         6.1.0-26-amd64 -> 6.1.0-27-amd64"));
    assert!(t.contains("QUESTIONABLE: the runs differ in link, IOMMU: the rows do not compare like for like"));
    assert_eq!(
        render::questionable_line(&c).as_deref(),
        Some("QUESTIONABLE: the runs differ in link, IOMMU: the rows do not compare like for like")
    );
    // A link that misbehaved during a run is called out too.
    let mut sick = card();
    sick.link_health = Some(vec!["2 correctable errors (2 BadTLP) on 0000:03:00.0".into()]);
    let c = cmp(&a, &sick);
    assert_eq!(c.context[0].what, "link health");
    assert!(c.context[0].questionable);
}

#[test]
fn runs_of_different_commands_are_refused_and_rows_match_by_configuration() {
    let mut pio = card();
    pio.command = "pio".into();
    pio.reports.truncate(1);
    let mut dma = card();
    dma.command = "dma".into();
    dma.reports.remove(0);
    let e = compare(("a.json", &pio), ("b.json", &dma), 5.0).unwrap_err().to_string();
    assert_eq!(e, "a.json holds a pio run and b.json a dma run: compare needs two runs of the same command");
    // `run` against `dma`: the DMA rows match, the PIO rows are A's alone.
    let c = cmp(&card(), &dma);
    assert_eq!(c.rows.len(), 10);
    assert_eq!(c.only_a.len(), 7);
    assert!(c.only_b.is_empty());
    // Rows measured at other sizes in B are told apart, never matched to the wrong size.
    let mut b = card();
    for x in &mut b.reports[1].results {
        x.size *= 2;
    }
    let c = cmp(&card(), &b);
    assert!(c.rows.iter().all(|r| r.config.kind.name() == "pio"));
    assert!(c.only_b.contains(&"dma xdma h2c 2 MiB".to_string()));
}

#[test]
fn json_and_csv_carry_every_row() {
    let c = cmp(&shaped(card(), 1.0, 0.01), &shaped(card(), 0.9, 0.01));
    let v: serde_json::Value = serde_json::from_str(&render::json(&c).unwrap()).unwrap();
    assert_eq!(v["summary"]["slower"], 16);
    assert_eq!(v["rows"].as_array().unwrap().len(), 16);
    assert_eq!(v["rows"][0]["verdict"], "slower");
    assert_eq!(v["rows"][0]["config"]["kind"], "pio");
    let csv = render::csv(&c);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 17);
    assert_eq!(lines[0].split(',').count(), render::CSV_COLUMNS.len());
    assert!(lines[1].starts_with("pio BAR2 wc h2c 64-bit 4 KiB,pio,h2c,4096,3150.5,"), "{}", lines[1]);
    assert!(lines[1].contains(",slower,"));
}

#[test]
fn a_different_interrupt_path_is_called_out() {
    let direct = "MSI-X, 9 vectors (VFIO eventfd); qdma direct (--qdma-intr): each queue on its own vector";
    let aggregated = "MSI-X, 2 vectors (VFIO eventfd); qdma aggregated (--qdma-intr): every queue through the ring";
    let with = |s: &str| {
        let mut r = card();
        r.reports[0].interrupts = Some(s.into());
        r
    };
    let c = cmp(&with(direct), &with(aggregated));
    let d = c.context.iter().find(|d| d.what == "interrupts").expect("the interrupt path differs");
    assert!(d.questionable && d.a == direct && d.b == aggregated, "{d:?}");
    // Polling only on one side: named as such, listed plainly (its irq rows match nothing).
    let c = cmp(&card(), &with(direct));
    let d = c.context.iter().find(|d| d.what == "interrupts").unwrap();
    assert_eq!((d.a.as_str(), d.questionable), ("none (completion by polling)", false));
    // The same path on both sides, or none on either: nothing to say.
    assert!(cmp(&with(direct), &with(direct)).context.is_empty());
    assert!(cmp(&card(), &card()).context.is_empty());
}
