//! `--format json` / `--json`: one JSON document (field names in docs/json.md).

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
        to_json(r)
    }
    fn suite(&self, s: &SuiteReport) -> Result<String> {
        to_json(s)
    }
}
