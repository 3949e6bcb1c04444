//! Notes on rows, in words.

use crate::bench::result::{Note, Row, Verify};

pub fn text(n: &Note) -> String {
    match n {
        Note::Skipped { reason } => format!("skipped: {reason}"),
        Note::Batched { transfers, timer_overhead_ns } => format!(
            "batched {transfers} transfers per sample: one transfer is too short to time alone (timer overhead {timer_overhead_ns:.0} ns)"
        ),
        Note::AllOnes => "the BAR reads all-ones end to end: the device may be gone, or Memory Space is disabled \
             (check `pcibench info`: Control Mem-)"
            .into(),
        Note::Interrupted { engine: Some(status) } => format!("interrupted: engine stopped ({status})"),
        Note::Interrupted { engine: None } => "interrupted: the figures cover the samples before the stop".into(),
    }
}

/// Every note of a row, plus why it is unverified, one per line.
pub fn lines(r: &Row) -> Vec<String> {
    let mut v: Vec<String> = r.notes.iter().map(text).collect();
    if let Some(Verify::Unverified { reason }) = &r.verify {
        v.push(reason.clone());
    }
    v
}

/// The verify column.
pub fn verify_text(v: &Option<Verify>) -> String {
    match v {
        None => "-".into(),
        Some(Verify::Ok) => "ok".into(),
        Some(Verify::Mismatch { mismatch }) => format!("MISMATCH: {mismatch}"),
        Some(Verify::Unverified { .. }) => "unverified".into(),
    }
}
