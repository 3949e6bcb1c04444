//! The command blocks of README.md and docs/**/*.md, as the docs tests read them (shared by
//! tests/docs.rs, which runs the ```console blocks, and the binary's own test in src/docs_parse.rs,
//! which parses the ```sh blocks' pcibench lines with the CLI definition).
//!
//! The convention is trycmd's (https://docs.rs/trycmd, "Markdown"): a ```console block holds
//! `$ pcibench ...` lines, each followed by its expected output (stdout, then stderr); `[..]`
//! stands for any text within a line and a line `...` for any number of lines; a line `? N`
//! right after the command is the exit status it must have (0 without one). Words after `console`
//! in the fence say where the block runs: `fixture-host` on the fixture sysfs tree (the seeds'
//! cards), else on a host with no PCI devices (the simulated cards alone). ```sh blocks hold what
//! needs real hardware, root or the lab: their pcibench lines are only parsed.

#![allow(dead_code)] // each user takes the part it needs

use std::path::{Path, PathBuf};

/// The repository's root (two levels above the CLI crate).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// README.md and every Markdown file under docs/, in a stable order: files that other branches
/// add later are picked up without naming them here.
pub fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                found.push(p);
            }
        }
    }
    found.sort();
    out.extend(found);
    out
}

/// One fenced block: its language, the words after it, its first content line (1-based) and its
/// lines with the fence's indentation removed.
pub struct Block {
    pub file: PathBuf,
    pub lang: String,
    pub attrs: Vec<String>,
    pub line: usize,
    pub lines: Vec<String>,
}

/// Every fenced block of a Markdown text (``` fences, indented ones inside list items too).
pub fn blocks(file: &Path, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Block)> = None;
    for (i, raw) in text.lines().enumerate() {
        let indent = raw.len() - raw.trim_start().len();
        let t = raw.trim_start();
        match &mut open {
            None if t.starts_with("```") => {
                let mut words = t.trim_start_matches('`').split_whitespace().map(str::to_string);
                let lang = words.next().unwrap_or_default();
                let attrs = words.collect();
                open = Some((indent, Block { file: file.to_path_buf(), lang, attrs, line: i + 2, lines: Vec::new() }));
            }
            None => {}
            Some((_, _)) if t == "```" => out.push(open.take().unwrap().1),
            Some((ind, b)) => {
                let cut = raw.len() - raw.trim_start().len();
                b.lines.push(raw[cut.min(*ind)..].to_string());
            }
        }
    }
    out
}

/// A console block's step: the command line, the exit status it must have, the expected output.
pub struct Step {
    pub line: usize,
    pub command: String,
    pub status: i32,
    pub expected: Vec<String>,
}

/// A console block as steps; a first line that is not a command is an error in the block.
pub fn steps(b: &Block) -> Result<Vec<Step>, String> {
    let mut out: Vec<Step> = Vec::new();
    for (i, l) in b.lines.iter().enumerate() {
        if let Some(cmd) = l.strip_prefix("$ ") {
            out.push(Step { line: b.line + i, command: cmd.to_string(), status: 0, expected: Vec::new() });
            continue;
        }
        let Some(step) = out.last_mut() else {
            return Err(format!("{}:{}: a console block starts with `$ COMMAND`", b.file.display(), b.line + i));
        };
        if let (Some(s), true) = (l.strip_prefix("? "), step.expected.is_empty()) {
            step.status =
                s.trim().parse().map_err(|_| format!("{}:{}: `? N` wants a number", b.file.display(), b.line + i))?;
            continue;
        }
        step.expected.push(l.clone());
    }
    Ok(out)
}

/// A command line as words, the way sh splits it for the simple lines the docs hold: single and
/// double quotes, backslash escapes; it stops at an unquoted `|`, `>`, `<`, `;`, `&` or ` #`
/// (what follows is the shell's, not pcibench's).
pub fn words(line: &str) -> Result<Vec<String>, String> {
    words_and_rest(line).map(|(w, _)| w)
}

/// The words, and whether the line goes on past them (a pipe, a redirection, a comment).
pub fn words_and_rest(line: &str) -> Result<(Vec<String>, bool), String> {
    let mut out = Vec::new();
    let mut more = false;
    let mut cur: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => w.push(x),
                        None => return Err(format!("unclosed ' in `{line}`")),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(x) => w.push(x),
                        None => return Err(format!("unclosed \" in `{line}`")),
                    }
                }
            }
            '\\' => cur.get_or_insert_with(String::new).extend(chars.next()),
            '|' | '>' | '<' | ';' | '&' => {
                more = true;
                break;
            }
            '#' if cur.is_none() => {
                more = true;
                break;
            }
            c if c.is_whitespace() => out.extend(cur.take()),
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(cur);
    Ok((out, more))
}

/// The pcibench command a ```sh line runs, as words from `pcibench` on: past `sudo` and
/// `NAME=value` assignments; None for any other line (cargo, setcap, comments).
pub fn sh_pcibench(line: &str) -> Result<Option<Vec<String>>, String> {
    let line = line.strip_prefix("$ ").unwrap_or(line);
    let w = words(line)?;
    let assignment = |x: &str| x.contains('=') && !x.starts_with('-');
    let start = w.iter().position(|x| x != "sudo" && !assignment(x));
    Ok(start.filter(|&s| w[s] == "pcibench").map(|s| w[s..].to_vec()))
}

/// The command lines of a ```sh block: the `$ ` lines where it has any (the rest is output),
/// else every line; `\` at a line's end joins the next.
pub fn sh_lines(b: &Block) -> Vec<(usize, String)> {
    let prompted = b.lines.iter().any(|l| l.starts_with("$ "));
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut cont = false;
    for (i, l) in b.lines.iter().enumerate() {
        if cont {
            let last = out.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(l.trim_end_matches('\\'));
        } else if !prompted || l.starts_with("$ ") {
            out.push((b.line + i, l.trim_end_matches('\\').to_string()));
        } else {
            continue;
        }
        cont = l.ends_with('\\');
    }
    out
}

/// Whether one output line matches its expected line, where `[..]` stands for any text.
pub fn line_matches(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.split("[..]").collect();
    if parts.len() == 1 {
        return want == got;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !got.starts_with(first) || got.len() < first.len() + last.len() || !got.ends_with(last) {
        return false;
    }
    // Each middle piece at its first place after the one before: the earliest match leaves the
    // most room for the rest, so this finds a match whenever one exists.
    let mut rest = &got[first.len()..got.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the output matches the expected lines (`...` lines stand for any number of lines);
/// trailing blanks are not compared.
pub fn output_matches(want: &[String], got: &[String]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w.trim() == "..." => (0..=got.len()).any(|k| output_matches(rest, &got[k..])),
        Some((w, rest)) => {
            got.first().is_some_and(|g| line_matches(w.trim_end(), g.trim_end())) && output_matches(rest, &got[1..])
        }
    }
}
