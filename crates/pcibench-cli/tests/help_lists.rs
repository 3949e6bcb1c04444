//! Every list `--help` shows (engines, simulated cards, DMA buffer sources, buffer kinds, copy
//! routines) is the registry the code uses, no more and no less: `dma --help` once listed its
//! engines as "edu, xdma, or sim" while qdma and umem were registered. The man pages and shell
//! completions are generated from the same definitions (`pcibench man`, `completions`).

use pcibench::bench::latency::ALL_WIDTHS;
use pcibench::dma::{cpu::KINDS, engines, BUFFER_SOURCES};
use pcibench::mmio::Width;
use pcibench::sim::SimId;
use std::collections::BTreeSet;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_pcibench")).args(args).arg("--help").output().unwrap();
    assert!(o.status.success(), "pcibench {args:?} --help failed");
    String::from_utf8(o.stdout).unwrap()
}

/// The help text's line holding `start` (after the option's name where help is one line a flag).
fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .map(str::trim)
        .find(|l| l.contains(start))
        .unwrap_or_else(|| panic!("no help line starting {start:?} in:\n{text}"))
}

/// The items of the list that follows `after` in `text` and ends at `until`: separated by ", ",
/// " or " or spaces (an item may hold a comma: reserved:START,SIZE).
fn list(text: &str, after: &str, until: &str) -> BTreeSet<String> {
    let from = text.find(after).unwrap_or_else(|| panic!("{after:?} not in {text:?}")) + after.len();
    let rest = &text[from..];
    let to = rest.find(until).unwrap_or_else(|| panic!("{until:?} not after {after:?} in {text:?}"));
    rest[..to].replace(", ", " ").replace(" or ", " ").split_whitespace().map(str::to_string).collect()
}

fn set<'a>(items: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    items.into_iter().map(str::to_string).collect()
}

#[test]
fn engine_lists_are_the_registered_engines() {
    let registered = set(engines::names().split(", "));
    assert!(registered.len() >= 4, "{registered:?}");
    for cmd in ["dma", "latency"] {
        let h = help(&[cmd]);
        let mut want = registered.clone();
        want.insert("sim".into());
        assert_eq!(list(line(&h, "DMA engine driver ("), "DMA engine driver (", " for a"), want, "{cmd} --engine");
    }
    let top = help(&[]);
    assert_eq!(list(line(&top, "dma "), "verified (", ";"), registered, "the dma command's summary");
}

#[test]
fn device_lists_name_every_simulated_card() {
    let cards = set(SimId::all().map(SimId::name));
    assert!(cards.contains("sim-nvram"), "{cards:?}");
    for cmd in [&["info"][..], &["pio"], &["dma"], &["latency"], &["doctor"], &["peek"], &["poke"]] {
        let h = help(cmd);
        assert_eq!(list(line(&h, "The device: "), "a simulated card (", ")"), cards, "{cmd:?} DEVICE");
    }
    let top = help(&[]);
    assert_eq!(list(line(&top, "Devices: "), "a simulated card (", ")"), cards, "pcibench --help");
}

#[test]
fn buffer_lists_are_what_the_parsers_take() {
    for cmd in ["dma", "latency"] {
        let h = help(&[cmd]);
        assert_eq!(
            list(line(&h, "Host buffer: "), "Host buffer: ", " (default"),
            set(BUFFER_SOURCES.iter().copied()),
            "{cmd}"
        );
    }
    let h = help(&["buffers"]);
    assert_eq!(list(line(&h, "Buffer kind: "), "Buffer kind: ", " (udmabuf"), set(KINDS.iter().copied()));
    let top = help(&[]);
    assert_eq!(list(line(&top, "buffers "), "DMA buffers (", ")"), set(KINDS.iter().copied()));
}

#[test]
fn width_lists_are_the_routines_each_command_runs() {
    let all: BTreeSet<String> = Width::ALL.iter().map(Width::to_string).collect();
    let h = help(&["pio"]);
    assert_eq!(list(line(&h, "Copy routine: "), "Copy routine: ", ", or all"), all, "pio --width");
    let h = help(&["buffers"]);
    assert_eq!(list(line(&h, "Copy routine for mmap"), "mmap access: ", " (repeatable"), all, "buffers --width");
    let h = help(&["latency"]);
    let latency: BTreeSet<String> = ALL_WIDTHS.iter().map(Width::to_string).collect();
    assert_eq!(list(line(&h, "Access width: "), "Access width: ", ", or all"), latency, "latency --width");
    // And each name the help shows is one the parser takes.
    for w in all.iter().chain(&latency) {
        assert!(w.parse::<Width>().is_ok(), "{w}");
    }
}

#[test]
fn reset_methods_are_the_ones_the_parser_takes() {
    let h = help(&["reset"]);
    let methods = set(pcibench::reset::METHODS);
    assert_eq!(list(line(&h, "How: "), "How: ", " (auto:"), methods, "reset --method");
    for m in &methods {
        assert!(m.parse::<pcibench::reset::Method>().is_ok(), "{m}");
    }
}

/// Every command `pcibench --help` lists has its row in docs/commands.md (issue 56: new commands
/// come with their documentation).
#[test]
fn every_command_is_in_the_commands_page() {
    let top = help(&[]);
    let from = top.find("Commands:").expect("a Commands: section") + "Commands:".len();
    let names: Vec<&str> = top[from..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .collect();
    assert!(names.contains(&"reset") && names.contains(&"link"), "{names:?}");
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/commands.md")).unwrap();
    for n in names {
        let row = page.contains(&format!("`pcibench {n} ")) || page.contains(&format!("/ `{n} "));
        assert!(row, "docs/commands.md has no row for `pcibench {n}`");
    }
}
