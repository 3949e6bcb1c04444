//! The conformance tables (`docs/engines/<engine>.md`) against the code, so neither drifts: every
//! `const` an engine declares in `src/dma/engines/<engine>/regs.rs` outside `#[cfg(test)]` has a
//! row whose first column is the constant's name in backticks, every row names a constant that
//! exists, and every row's "model test" column names at least one `#[test]` function that exists
//! in the crate's test sources.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Engines whose table may not exist yet: they are skipped, saying so, until it does (none now:
/// a new engine's table lands with its driver).
const TABLE_MAY_BE_MISSING: &[&str] = &[];

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn repo_dir() -> PathBuf {
    crate_dir().join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `src` with comments removed and string and character literals emptied (their quotes kept),
/// so braces and `const` inside them do not count.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'"' => {
                out.push('"');
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push('"');
                i += 1;
            }
            // A character literal ('{', '\n'); a lifetime ('a) has no closing quote after one char.
            b'\'' if b.get(i + 2) == Some(&b'\'') || (b.get(i + 1) == Some(&b'\\') && b.get(i + 3) == Some(&b'\'')) => {
                out.push_str("' '");
                i += if b[i + 1] == b'\\' { 4 } else { 3 };
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// `code` without the items that follow `#[cfg(test)]`: up to the first `;` at depth 0, or the
/// brace that closes the item's first `{`.
fn without_test_items(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The names of the `const` items `src` declares outside `#[cfg(test)]` (not `const fn`, not `_`).
fn constants(src: &str) -> BTreeSet<String> {
    let code = without_test_items(&code_only(src));
    let words: Vec<&str> =
        code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    words
        .windows(2)
        .filter(|w| w[0] == "const" && w[1].starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|w| w[1].to_string())
        .collect()
}

/// A table row: the first column's constant name and the tests its "model test" column names.
#[derive(Debug, PartialEq)]
struct Row {
    line: usize,
    name: String,
    tests: Vec<String>,
}

/// The cells of a Markdown table line, split at `|` not escaped as `\|`.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut prev = ' ';
    for c in inner.chars() {
        if c == '|' && prev != '\\' {
            out.push(String::new());
        } else {
            out.last_mut().unwrap().push(c);
        }
        prev = c;
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Every table row of `md` whose first column is a name in backticks; the "model test" column is
/// found by its header in each table.
fn rows(md: &str) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    let mut test_col = None;
    for (i, line) in md.lines().enumerate() {
        if !line.trim_start().starts_with('|') {
            test_col = None;
            continue;
        }
        let c = cells(line);
        if c.iter().all(|x| x.chars().all(|ch| ch == '-' || ch == ':')) {
            continue;
        }
        if test_col.is_none() {
            // A table without a "model test" column is prose (e.g. which IPs are driven), not a
            // conformance table: skipped. A constant's row in it would not count, so a mislabelled
            // conformance table still fails as missing rows.
            test_col = Some(c.iter().position(|x| x == "model test").unwrap_or(usize::MAX));
            continue;
        }
        if test_col == Some(usize::MAX) {
            continue;
        }
        let name = match backticked(&c[0]).as_slice() {
            [one] if c[0] == format!("`{one}`") => one.clone(),
            _ => return Err(format!("line {}: the first column is not one `CONSTANT`: {line}", i + 1)),
        };
        let tests = c.get(test_col.unwrap_or(usize::MAX)).map(|t| backticked(t)).unwrap_or_default();
        out.push(Row { line: i + 1, name, tests });
    }
    Ok(out)
}

/// Every `#[test]` function name in the crate's sources and integration tests.
fn test_functions() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&crate_dir().join("src"), &mut files);
    walk(&crate_dir().join("tests"), &mut files);
    let mut names = BTreeSet::new();
    for f in files {
        let code = code_only(&read(&f));
        for (i, part) in code.split("#[test]").enumerate().skip(1) {
            let after = part.trim_start();
            let after =
                after.strip_prefix("fn ").unwrap_or_else(|| panic!("#[test] {i} in {} is not on a fn", f.display()));
            names.insert(after.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap().to_string());
        }
    }
    names
}

/// What is wrong between `engine`'s regs.rs and its table, one line each; None when the table
/// does not exist and may not yet.
fn problems(engine: &str) -> Option<Vec<String>> {
    let regs_rel = format!("crates/pcibench/src/dma/engines/{engine}/regs.rs");
    let table_rel = format!("docs/engines/{engine}.md");
    let table = repo_dir().join(&table_rel);
    if !table.exists() && TABLE_MAY_BE_MISSING.contains(&engine) {
        eprintln!("skipping {engine}: {table_rel} does not exist yet (TABLE_MAY_BE_MISSING in tests/conformance.rs)");
        return None;
    }
    let declared = constants(&read(&repo_dir().join(&regs_rel)));
    let rows = match rows(&read(&table)) {
        Ok(r) => r,
        Err(e) => return Some(vec![format!("{table_rel}: {e}")]),
    };
    let tests = test_functions();
    let listed: BTreeSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let mut out = Vec::new();
    for name in declared.iter().filter(|n| !listed.contains(n.as_str())) {
        out.push(format!(
            "`{name}` (declared in {regs_rel}) has no row in {table_rel}: add `| `{name}` | offset / bits | what it is | \
             our value or use | vendor source | model test |` to {table_rel}"
        ));
    }
    for r in &rows {
        if !declared.contains(&r.name) {
            out.push(format!(
                "{table_rel}:{}: `{}` is not declared in {regs_rel}: remove the row or fix its name",
                r.line, r.name
            ));
        }
        if r.tests.is_empty() {
            out.push(format!(
                "{table_rel}:{}: `{}` names no model test: name the #[test] fn that exercises it",
                r.line, r.name
            ));
        }
        for t in r.tests.iter().filter(|t| !tests.contains(*t)) {
            out.push(format!(
                "{table_rel}:{}: `{}` names model test `{t}`, which is no #[test] fn in crates/pcibench",
                r.line, r.name
            ));
        }
    }
    Some(out)
}

fn check(engine: &str) {
    if let Some(p) = problems(engine) {
        assert!(p.is_empty(), "{engine}'s conformance table does not match its regs.rs:\n{}", p.join("\n"));
    }
}

#[test]
fn xdma_table_has_a_row_with_a_model_test_for_every_register_constant() {
    check("xdma");
}

#[test]
fn umem_table_has_a_row_with_a_model_test_for_every_register_constant() {
    check("umem");
}

#[test]
fn qdma_table_has_a_row_with_a_model_test_for_every_register_constant() {
    check("qdma");
}

#[test]
fn constants_outside_test_items_are_found_and_the_rest_ignored() {
    let src = r#"
        pub(crate) const A_REG: u64 = 0x10; // const IN_COMMENT: u8 = 0;
        pub const B: u32 = 1 << 3;
        const fn helper() -> u32 { 0 }
        const _: () = assert!(B != 0);
        /* const IN_BLOCK: u8 = 1; */
        fn words() -> &'static str { "const IN_STRING: u8 = 2; {" }
        #[cfg(test)]
        const ONLY_IN_TESTS: u8 = 3;
        #[cfg(test)]
        mod tests {
            const INNER: u8 = '{' as u8;
            fn f() { let _ = "}"; }
        }
        const AFTER_TESTS: [u8; 2] = [1, 2];
    "#;
    let names: Vec<String> = constants(src).into_iter().collect();
    assert_eq!(names, ["AFTER_TESTS", "A_REG", "B"]);
}

#[test]
fn rows_take_the_first_column_and_the_model_test_column_by_its_header() {
    let md = "intro\n\n| constant | offset / bits | model test |\n|---|---|---|\n| `GO` | 0x68 \\| bit 0 | `a`, `b` |\n| `X` | x | |\n";
    let r = rows(md).unwrap();
    assert_eq!(
        r,
        [
            Row { line: 5, name: "GO".into(), tests: vec!["a".into(), "b".into()] },
            Row { line: 6, name: "X".into(), tests: vec![] }
        ]
    );
    assert!(rows("| constant | model test |\n|---|---|\n| GO | `a` |\n").unwrap_err().contains("not one `CONSTANT`"));
    // A table without a "model test" column is prose, not rows.
    assert_eq!(rows("| constant | x |\n|---|---|\n| `GO` | y |\n").unwrap(), []);
}
