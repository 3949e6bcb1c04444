//! `pcibench setup`'s text: one line per change, warnings after `WARNING:`.

use crate::setup::Change;
use std::fmt::Write;

/// One line per change (warnings after `WARNING:`), or that nothing changed; notes (what the
/// user must know about the state left) follow in the same form.
pub fn render_changes(device: &str, changes: &[Change]) -> String {
    let mut s = String::new();
    if changes.iter().all(|c| c.note) {
        let _ = writeln!(s, "{device}: nothing to change, already set up");
    }
    for c in changes {
        let _ = writeln!(s, "{device}: {}", c.what);
        if let Some(w) = &c.warning {
            let _ = writeln!(s, "WARNING: {w}");
        }
    }
    s
}
