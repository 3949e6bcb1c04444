//! `pcibench health --state FILE`: what one run read (per function: AER counters, link speed and
//! width, Device and Link Status), kept for the next run to compare. Versioned JSON, replaced
//! whole or not at all (`file::Destination`), so a run killed half-way leaves the previous state.

use crate::pci::health::FunctionState;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

pub const FORMAT: &str = "pcibench-health-state";
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub format: String,
    pub version: u32,
    /// When it was read (RFC 3339, UTC).
    pub time: String,
    pub functions: Vec<FunctionState>,
}

impl State {
    /// This run's state: `current` for the functions it read, and the previous run's entries for
    /// the functions it did not (a run on named devices keeps the others' history).
    pub fn next(time: &str, current: &[FunctionState], previous: Option<&State>) -> State {
        let mut functions = current.to_vec();
        if let Some(p) = previous {
            // A set, not a scan of `current` per entry: a state file of n functions is n lookups.
            let read: std::collections::HashSet<&str> = current.iter().map(|c| c.addr.as_str()).collect();
            functions.extend(p.functions.iter().filter(|f| !read.contains(f.addr.as_str())).cloned());
        }
        functions.sort_by(|a, b| a.addr.cmp(&b.addr));
        State { format: FORMAT.into(), version: VERSION, time: time.into(), functions }
    }
}

/// The previous run's state: None when the file does not exist yet or is empty (the first run).
/// A file that is not a health state is refused rather than overwritten.
pub fn read(path: &Path) -> Result<Option<State>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read the health state", path, e)),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let shown = path.display();
    let not_state = || {
        Error::usage(format!(
            "--state {shown} is not a pcibench health state file: it is left as it is; name another file (it is created on the first run)"
        ))
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| not_state())?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(not_state());
    }
    match value.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v > u64::from(VERSION) => {
            return Err(Error::usage(format!(
                "--state {shown} is a version {v} state, newer than this pcibench reads (version {VERSION}): use a newer pcibench or another file"
            )))
        }
        Some(v) if v >= 1 => {}
        _ => return Err(not_state()),
    }
    serde_json::from_value(value).map(Some).map_err(|e| {
        Error::usage(format!("--state {shown} is a damaged health state ({e}): remove it to start afresh"))
    })
}

/// Replace the state file with `state`, atomically.
pub fn write(path: &Path, state: &State) -> Result<()> {
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| Error::Device(format!("cannot encode the health state as JSON: {e}")))?;
    crate::file::Destination::check("--state", "health-state.json", path)?.write_with(|f| {
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")
    })
}
