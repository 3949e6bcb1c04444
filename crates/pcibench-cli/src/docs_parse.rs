//! The docs' ```sh blocks (commands that need real hardware, root or the lab, so no test runs
//! them) are parsed with the CLI definition itself: a renamed or removed flag in one fails here.
//! Their ```console blocks run in tests/docs.rs; the block reader is shared with it.

#[path = "../tests/docs_blocks/mod.rs"]
mod docs_blocks;

use super::Cli;
use clap::error::ErrorKind;
use clap::Parser;
use docs_blocks::{blocks, markdown_files, repo, sh_lines, sh_pcibench};

/// Placeholders the guides write for the user's own card, and what stands in for them here.
const PLACEHOLDERS: &[(&str, &str)] = &[("ADDR", "0000:03:00.0"), ("DEVICE", "0000:03:00.0")];

/// A file to write that this host has no place for (`--state /var/lib/pcibench/...` where there is
/// no such directory): the parsers check where an output goes before anything runs, which says
/// nothing of the docs' syntax on the user's host.
fn names_a_place(e: &clap::Error) -> bool {
    use clap::error::ContextKind;
    e.kind() == ErrorKind::ValueValidation
        && e.get(ContextKind::InvalidArg).is_some_and(|a| {
            let a = a.to_string();
            a.contains("<FILE") || a.contains("<OUT")
        })
}

#[test]
fn every_pcibench_line_in_the_docs_sh_blocks_parses() {
    let root = repo();
    let (mut checked, mut failures) = (0, Vec::new());
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        for b in blocks(&file, &text).iter().filter(|b| matches!(b.lang.as_str(), "sh" | "bash" | "shell")) {
            for (line, cmd) in sh_lines(b) {
                let words = match sh_pcibench(&cmd) {
                    Ok(Some(w)) => w,
                    Ok(None) => continue,
                    Err(e) => {
                        failures.push(format!("{rel}:{line}: {e}"));
                        continue;
                    }
                };
                checked += 1;
                let words = words
                    .into_iter()
                    .map(|w| PLACEHOLDERS.iter().find(|(p, _)| *p == w).map_or(w, |(_, v)| v.to_string()));
                if let Err(e) = Cli::try_parse_from(words) {
                    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) && !names_a_place(&e) {
                        failures.push(format!("{rel}:{line}: `{cmd}`: {}", e.to_string().lines().next().unwrap_or("")));
                    }
                }
            }
        }
    }
    eprintln!("docs: {checked} pcibench lines in sh blocks parsed");
    assert!(failures.is_empty(), "{} docs command line(s) do not parse:\n{}", failures.len(), failures.join("\n"));
    assert!(checked >= 10, "only {checked} pcibench lines found in the docs' sh blocks");
}

/// Every `--flag` the docs name inside an inline `pcibench COMMAND ...` span (the command table,
/// prose) is one that COMMAND has: the man pages come from the same definitions, so a flag renamed
/// in the code and not in the docs fails here.
#[test]
fn every_flag_the_docs_name_for_a_command_exists() {
    let root = repo();
    let cli = <Cli as clap::CommandFactory>::command();
    let (mut checked, mut failures) = (0, Vec::new());
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        // Inline code spans: the odd pieces between single backticks, fences aside.
        let prose: String = text.split("```").step_by(2).collect::<Vec<_>>().join("\n");
        for span in prose.split('`').skip(1).step_by(2) {
            let mut words = span.split_whitespace();
            if words.next() != Some("pcibench") {
                continue;
            }
            let Some(sub) = words.next().and_then(|w| cli.find_subcommand(w)) else { continue };
            for w in words {
                for flag in w.split(['[', ']', '|', '(', ')']).filter(|f| f.starts_with("--")) {
                    let name = flag.trim_start_matches("--").split(['=', '.']).next().unwrap_or("");
                    if name.is_empty() || name == "help" {
                        continue;
                    }
                    checked += 1;
                    let known = sub.get_arguments().chain(cli.get_arguments()).any(|a| a.get_long() == Some(name));
                    if !known {
                        failures.push(format!("{rel}: `{span}`: pcibench {} has no --{name}", sub.get_name()));
                    }
                }
            }
        }
    }
    eprintln!("docs: {checked} flags named for a command checked");
    assert!(
        failures.is_empty(),
        "{} flag(s) in the docs that the command lacks:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 50, "only {checked} flags found in the docs");
}
