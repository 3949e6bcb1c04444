//! Every example in README.md and docs/**/*.md is a test: each ```console block's commands run
//! against the built binary and their output must match what the block shows (figures written
//! `[..]`, varying lines `...`; the convention is in tests/docs_blocks/mod.rs). A renamed flag or
//! a changed output fails here instead of rotting in the docs. ```sh blocks (hardware, root, the
//! lab) are parsed by the binary's own test (src/docs_parse.rs).
//!
//! Each block runs in a fresh directory holding copies of the fixture saved runs (card.json,
//! latency.json, crates/pcibench/tests/fixtures/results), so a block may compare or plot them and
//! make files of its own; on a host with no PCI devices (only the simulated cards), or on the
//! fixture sysfs tree when the fence says `console fixture-host`.

mod docs_blocks;

use docs_blocks::{blocks, markdown_files, output_matches, repo, steps, words, words_and_rest, Block};
use pcibench::pci::fixture::seed_tree;
use std::path::Path;
use std::process::Command;

/// Run one console block; the failures found, one message each.
fn run_block(b: &Block, root: &Path) -> Vec<String> {
    let rel = b.file.strip_prefix(root).unwrap_or(&b.file).display().to_string();
    let steps = match steps(b) {
        Ok(s) => s,
        Err(e) => return vec![e],
    };
    let dir = tempfile::tempdir().unwrap();
    let results = root.join("crates/pcibench/tests/fixtures/results");
    for f in ["card.json", "latency.json"] {
        std::fs::copy(results.join(f), dir.path().join(f)).unwrap();
    }
    let sysroot = if b.attrs.iter().any(|a| a == "fixture-host") {
        let host = dir.path().join("host");
        std::fs::create_dir(&host).unwrap();
        seed_tree(&host);
        host
    } else {
        dir.path().join("no-host")
    };
    let mut failures = Vec::new();
    for s in steps {
        let at = format!("{rel}:{}", s.line);
        let w = match words_and_rest(&s.command) {
            Ok((w, false)) => w,
            Ok((_, true)) => Vec::new(),
            Err(e) => {
                failures.push(format!("{at}: {e}"));
                continue;
            }
        };
        if w.first().map(String::as_str) != Some("pcibench") {
            failures.push(format!(
                "{at}: `{}`: a console block runs pcibench alone (no pipes or redirections); put other commands in a ```sh block",
                s.command
            ));
            continue;
        }
        let o = Command::new(env!("CARGO_BIN_EXE_pcibench"))
            .args(&w[1..])
            .current_dir(dir.path())
            .env("PCIBENCH_SYSROOT", &sysroot)
            .output()
            .expect("run pcibench");
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
            .replace(&sysroot.to_string_lossy().into_owned(), "<root>");
        let got: Vec<String> = text.lines().map(str::to_string).collect();
        let status = o.status.code().unwrap_or(-1);
        if status != s.status || !output_matches(&s.expected, &got) {
            failures.push(format!(
                "{at}: `{}` exited {status} (the block wants {}) and printed:\n{text}--- where the block shows:\n{}\n",
                s.command,
                s.status,
                s.expected.join("\n")
            ));
        }
    }
    failures
}

#[test]
fn every_console_block_in_the_docs_runs_as_shown() {
    let root = repo();
    let (mut blocks_run, mut commands, mut failures) = (0, 0, Vec::new());
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for b in blocks(&file, &text).iter().filter(|b| b.lang == "console") {
            blocks_run += 1;
            commands += b.lines.iter().filter(|l| l.starts_with("$ ")).count();
            failures.extend(run_block(b, &root));
        }
    }
    eprintln!("docs: {blocks_run} console blocks, {commands} commands run");
    assert!(failures.is_empty(), "{} docs example(s) do not match:\n\n{}", failures.len(), failures.join("\n"));
    // The README's own samples are among them: a docs tree that lost its blocks fails too.
    assert!(blocks_run >= 10 && commands >= 20, "only {blocks_run} console blocks ({commands} commands) found");
}

#[test]
fn the_matcher_takes_wildcards_and_nothing_else() {
    use docs_blocks::line_matches;
    assert!(line_matches("h2c [..] MB/s ok", "h2c 123.4 MB/s ok"));
    assert!(line_matches("[..]", ""));
    assert!(!line_matches("h2c [..] MB/s ok", "c2h 123.4 MB/s ok"));
    assert!(!line_matches("a[..]b[..]c", "a b"));
    let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(output_matches(&l(&["a", "...", "z"]), &l(&["a", "b", "c", "z"])));
    assert!(output_matches(&l(&["a", "...", "z"]), &l(&["a", "z"])));
    assert!(!output_matches(&l(&["a", "...", "z"]), &l(&["a", "b"])));
    assert!(!output_matches(&l(&["a"]), &l(&["a", "extra"])));
    let w = words("pcibench plot a.json -o 'a b.svg' --title \"x y\" | head -1").unwrap();
    assert_eq!(w, ["pcibench", "plot", "a.json", "-o", "a b.svg", "--title", "x y"]);
}
