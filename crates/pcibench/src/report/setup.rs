//! `pcibench setup`'s text: one line per change, warnings after `WARNING:`.

use crate::setup::Change;
use crate::text::escape_controls as esc;
use std::fmt::Write;

/// One line per change (warnings after `WARNING:`), or that nothing changed; notes (what the
/// user must know about the state left) follow in the same form. What a change names comes from
/// the system (a process's comm, a mount point): control characters are escaped.
pub fn render_changes(device: &str, changes: &[Change]) -> String {
    let mut s = String::new();
    if changes.iter().all(|c| c.note) {
        let _ = writeln!(s, "{device}: nothing to change, already set up");
    }
    for c in changes {
        let _ = writeln!(s, "{device}: {}", esc(&c.what));
        if let Some(w) = &c.warning {
            let _ = writeln!(s, "WARNING: {}", esc(w));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    /// L2 (issue 36): a process name or a mount point with a terminal escape is printed escaped.
    #[test]
    fn outside_strings_reach_the_terminal_escaped() {
        let ch = [crate::setup::Change::warn("held by PID 7 (\u{1b}]0;owned\u{7})", "mounted on /mnt/\u{1b}[2J")];
        let s = super::render_changes("0000:00:04.0", &ch);
        assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}");
        assert!(s.contains("PID 7 (\\x1b]0;owned\\x07)") && s.contains("/mnt/\\x1b[2J"), "{s}");
    }
}
