//! `pcibench doctor`'s text: aligned `PASS  name  evidence` lines, `fix:` lines under anything
//! not passing, then the recommendation and its commands.

use crate::doctor::Report;
use std::fmt::Write;

/// The report for people: `PASS  name  evidence` lines aligned, `fix:` lines under them for
/// anything not passing, then the recommendation and the command.
pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "doctor: {}", r.device);
    let w = r.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in &r.checks {
        let _ = writeln!(s, "{}  {:<w$}  {}", c.severity.label(), c.name, c.evidence);
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "{:6}{:<w$}  fix: {fix}", "", "");
        }
    }
    let rec = &r.recommended;
    let _ = writeln!(s, "recommended: {}", rec.summary);
    if let Some(c) = &rec.command {
        let _ = writeln!(s, "  run: {c}");
    }
    for t in &rec.then {
        let _ = writeln!(s, "  then: {t}");
    }
    s
}
