//! `--format json` / `--json`: one JSON document (field names in docs/json.md); a soak's, one line
//! after its interval lines (JSON lines).

use super::Exporter;
use crate::bench::result::Report;
use crate::measure::SuiteReport;
use crate::{Error, Result};

pub struct Json;

/// Pretty JSON of anything serializable, newline-terminated.
pub fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string_pretty(v)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| Error::Device(format!("cannot encode the result as JSON: {e}")))
}

impl Exporter for Json {
    fn report(&self, r: &Report) -> Result<String> {
        if r.soak.is_some() {
            // A soak's intervals went out as JSON lines while it ran: the report is one more.
            return serde_json::to_string(r)
                .map(|s| s + "\n")
                .map_err(|e| crate::Error::Device(format!("cannot encode the result as JSON: {e}")));
        }
        to_json(r)
    }
    fn suite(&self, s: &SuiteReport) -> Result<String> {
        to_json(s)
    }
}
