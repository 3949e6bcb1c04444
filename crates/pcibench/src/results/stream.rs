//! A saved run read one row at a time, for what needs every row once and none of them whole
//! (`export` of 10^6 rows held them all, 3.4 GB for a 290 MB file): the file is checked as
//! `saved::read` checks it (the same refusals), then walked; each row is checked (`sanity`) and
//! handed to the caller, which keeps what it needs of it, and dropped. The run's and each
//! report's other fields are read whole (they are small), their `results` left empty.

use super::saved::{self, SavedRun};
use crate::bench::result::{Report, Row};
use crate::{Error, Result};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::path::Path;

/// What the walk calls: `row(i, j, row)` for row `j` of report `i` as it is read, then
/// `report(i, report)` once report `i` is whole (its `results` empty).
pub trait Rows {
    fn row(&mut self, report: usize, index: usize, row: Row);
    fn report(&mut self, index: usize, report: &Report);
}

/// Read the saved run at `path`, row by row into `rows`; the run with every report's `results`
/// empty. Refusals are `saved::read`'s, each in one line.
pub fn read(path: &Path, rows: &mut dyn Rows) -> Result<SavedRun> {
    let (name, mut bytes) = saved::read_bytes(path)?;
    let version = saved::admit(&name, &mut bytes)?;
    let mut walk = Walk { name: &name, rows, refused: None, reports: 0 };
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let run = match (&mut walk).deserialize(&mut de).and_then(|r| de.end().map(|_| r)) {
        Ok(run) => run,
        // A row's figures refused: the refusal, not the parser's report of the stop.
        Err(e) => match walk.refused.take() {
            Some(refusal) => return Err(refusal),
            None => return Err(Error::usage(format!("{name} is a damaged saved run (version {version}): {e}"))),
        },
    };
    if walk.reports == 0 {
        return Err(Error::usage(format!("{name} holds no results (its \"reports\" list is empty)")));
    }
    Ok(run)
}

struct Walk<'a> {
    name: &'a str,
    rows: &'a mut dyn Rows,
    /// The first row or report whose figures were refused (the walk stops there).
    refused: Option<Error>,
    reports: usize,
}

/// The top-level object: every field read whole but `reports`, which is walked.
impl<'de> DeserializeSeed<'de> for &mut Walk<'_> {
    type Value = SavedRun;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<SavedRun, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for &mut Walk<'_> {
    type Value = SavedRun;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a saved run")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<SavedRun, A::Error> {
        let mut head = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if head.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate field `{key}`")));
            }
            let value = if key == "reports" { map.next_value_seed(Reports(&mut *self))? } else { map.next_value()? };
            head.insert(key, value);
        }
        // The head as a saved run (every field's own checks), its reports empty.
        head.insert("reports".into(), Value::Array(Vec::new()));
        serde_json::from_value(Value::Object(head)).map_err(de::Error::custom)
    }
}

/// The `reports` list: each report walked in turn. Stands for an empty list in the head.
struct Reports<'w, 'a>(&'w mut Walk<'a>);

impl<'de> DeserializeSeed<'de> for Reports<'_, '_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Reports<'_, '_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of reports")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let walk = self.0;
        while let Some(report) = seq.next_element_seed(OneReport { walk: &mut *walk })? {
            let i = walk.reports;
            if let Err(e) = super::sanity::check_report(walk.name, i, &report) {
                return Err(walk.refuse(e));
            }
            walk.rows.report(i, &report);
            walk.reports += 1;
        }
        Ok(Value::Array(Vec::new()))
    }
}

impl Walk<'_> {
    fn refuse<E: de::Error>(&mut self, e: Error) -> E {
        self.refused = Some(e);
        E::custom("refused")
    }
}

/// One report: its `results` walked row by row, its other fields read whole.
struct OneReport<'w, 'a> {
    walk: &'w mut Walk<'a>,
}

impl<'de> DeserializeSeed<'de> for OneReport<'_, '_> {
    type Value = Report;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Report, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OneReport<'_, '_> {
    type Value = Report;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a report")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Report, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if fields.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate field `{key}`")));
            }
            let value = if key == "results" {
                map.next_value_seed(Results { walk: &mut *self.walk })?
            } else {
                map.next_value()?
            };
            fields.insert(key, value);
        }
        serde_json::from_value(Value::Object(fields)).map_err(de::Error::custom)
    }
}

/// A report's `results`: each row read, checked and handed over. Stands for an empty list.
struct Results<'w, 'a> {
    walk: &'w mut Walk<'a>,
}

impl<'de> DeserializeSeed<'de> for Results<'_, '_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Results<'_, '_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of rows")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let walk = self.walk;
        let i = walk.reports;
        let mut j = 0;
        while let Some(row) = seq.next_element::<Row>()? {
            if let Err(e) = super::sanity::check_row(walk.name, i, j, &row) {
                return Err(walk.refuse(e));
            }
            walk.rows.row(i, j, row);
            j += 1;
        }
        Ok(Value::Array(Vec::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Kept(Vec<(usize, usize, Row)>, Vec<usize>);

    impl Rows for Kept {
        fn row(&mut self, report: usize, index: usize, row: Row) {
            self.0.push((report, index, row));
        }
        fn report(&mut self, index: usize, report: &Report) {
            assert!(report.results.is_empty());
            self.1.push(index);
        }
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results").join(name)
    }

    /// The walk sees what `saved::read` reads, row for row, and refuses what it refuses.
    #[test]
    fn the_walk_reads_what_read_reads_and_refuses_alike() {
        let path = fixture("card.json");
        let whole = saved::read(&path).unwrap();
        let mut kept = Kept(Vec::new(), Vec::new());
        let head = read(&path, &mut kept).unwrap();
        assert_eq!((head.command.as_str(), head.reports.len()), (whole.command.as_str(), 0));
        assert_eq!(kept.1, (0..whole.reports.len()).collect::<Vec<_>>());
        let rows: Vec<(usize, usize)> =
            whole.reports.iter().enumerate().flat_map(|(i, r)| (0..r.results.len()).map(move |j| (i, j))).collect();
        assert_eq!(kept.0.iter().map(|(i, j, _)| (*i, *j)).collect::<Vec<_>>(), rows);
        for (i, j, row) in &kept.0 {
            let want = serde_json::to_value(&whole.reports[*i].results[*j]).unwrap();
            assert_eq!(serde_json::to_value(row).unwrap(), want);
        }
        let dir = tempfile::tempdir().unwrap();
        let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["reports"][1]["results"][2]["engine"] = serde_json::json!({"cycles": 1, "beats": 1, "host_bytes": 1,
            "wall_s": 1.0, "implied_clock_mhz": 1.0, "busy_pct": -1e308});
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, serde_json::to_vec(&v).unwrap()).unwrap();
        let (a, b) = (saved::read(&bad).unwrap_err().to_string(), read(&bad, &mut kept).unwrap_err().to_string());
        assert_eq!(a, b);
        assert!(a.contains("report 2, row 3: engine busy_pct is -1e308"), "{a}");
        for text in ["", "{\"format\": \"pcibench-run\", \"version\": 1, \"reports\": [", "[1, 2]"] {
            std::fs::write(&bad, text).unwrap();
            let (a, b) = (saved::read(&bad).unwrap_err().to_string(), read(&bad, &mut kept).unwrap_err().to_string());
            assert_eq!(a, b, "{text:?}");
        }
    }
}
