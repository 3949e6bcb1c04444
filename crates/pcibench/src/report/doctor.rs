//! `pcibench doctor`'s text: aligned `PASS  name  evidence` lines, `fix:` lines under anything
//! not passing, then the recommendation and its commands.

use crate::doctor::Report;
use crate::text::escape_controls as esc;
use std::fmt::Write;

/// The report for people: `PASS  name  evidence` lines aligned, `fix:` lines under them for
/// anything not passing, then the recommendation and the command. Evidence quotes the system
/// (process names from /proc/PID/comm, mount points, paths), which anyone can choose: every
/// string is printed with its control characters escaped, so none reaches the terminal raw.
pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "doctor: {}", esc(&r.device));
    let w = r.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in &r.checks {
        let _ = writeln!(s, "{}  {:<w$}  {}", c.severity.label(), c.name, esc(&c.evidence));
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "{:6}{:<w$}  fix: {}", "", "", esc(fix));
        }
    }
    let rec = &r.recommended;
    let _ = writeln!(s, "recommended: {}", esc(&rec.summary));
    if let Some(c) = &rec.command {
        let _ = writeln!(s, "  run: {}", esc(c));
    }
    for t in &rec.then {
        let _ = writeln!(s, "  then: {}", esc(t));
    }
    s
}
