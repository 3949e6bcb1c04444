//! `pcibench setup`'s text: one line per change, warnings after `WARNING:`.

use crate::setup::Change;
use std::fmt::Write;

/// One line per change (warnings after `WARNING:`), or that nothing changed.
pub fn render_changes(device: &str, changes: &[Change]) -> String {
    if changes.is_empty() {
        return format!("{device}: nothing to change, already set up\n");
    }
    let mut s = String::new();
    for c in changes {
        let _ = writeln!(s, "{device}: {}", c.what);
        if let Some(w) = &c.warning {
            let _ = writeln!(s, "WARNING: {w}");
        }
    }
    s
}
