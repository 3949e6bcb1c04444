//! What a command's exit status says, one policy for every command (documented in the README and
//! in `pcibench --help`): 0 everything asked for was measured and verified; 1 an error (the
//! message says what failed and what to type); 2 bad usage; 3 data did not verify; 4 nothing
//! could be measured (every configuration skipped, or nothing to measure); 5 `compare`: a row got
//! significantly slower; 130 interrupted. `health` says what it found instead (`health::Status`:
//! 0 healthy, 1 warnings, 2 failures; `health::EXIT_UNKNOWN`, 3, when it could not check).

use crate::bench::result::Report;
use crate::measure::SuiteReport;
use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    Usage,
    Mismatch,
    NothingMeasured,
    /// `compare`: some configuration got significantly slower (for scripts and CI).
    Slower,
    Interrupted,
}

impl Outcome {
    pub fn code(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Failed => 1,
            Outcome::Usage => 2,
            Outcome::Mismatch => 3,
            Outcome::NothingMeasured => 4,
            Outcome::Slower => 5,
            Outcome::Interrupted => 130,
        }
    }

    /// How bad: a mismatch (wrong data) outranks an interruption, which outranks a run that
    /// measured nothing.
    fn rank(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::NothingMeasured => 1,
            Outcome::Slower => 2,
            Outcome::Interrupted => 2,
            Outcome::Failed | Outcome::Usage => 3,
            Outcome::Mismatch => 4,
        }
    }

    pub fn worst(self, other: Outcome) -> Outcome {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    pub fn of_error(e: &Error) -> Outcome {
        match e {
            Error::Usage(_) => Outcome::Usage,
            Error::NothingToMeasure(_) => Outcome::NothingMeasured,
            _ => Outcome::Failed,
        }
    }

    pub fn of_report(r: &Report) -> Outcome {
        // A card that stopped answering is an error whatever its earlier rows found.
        if r.gone.is_some() {
            Outcome::Failed
        } else if r.mismatched() {
            Outcome::Mismatch
        } else if r.interrupted {
            Outcome::Interrupted
        } else if r.measured() == 0 {
            Outcome::NothingMeasured
        } else {
            Outcome::Ok
        }
    }

    /// `run`: the worst of its parts; nothing measured when no part measured anything.
    pub fn of_suite(s: &SuiteReport) -> Outcome {
        let parts: Vec<Outcome> = s.parts().map(Outcome::of_report).collect();
        if parts.iter().all(|o| *o == Outcome::NothingMeasured) {
            return Outcome::NothingMeasured;
        }
        parts.into_iter().filter(|o| *o != Outcome::NothingMeasured).fold(Outcome::Ok, Outcome::worst)
    }

    /// `compare`: slower when any row got significantly slower; nothing measured when no
    /// configuration was measured in both runs.
    pub fn of_comparison(c: &crate::results::compare::Comparison) -> Outcome {
        use crate::results::compare::Verdict;
        if c.rows.is_empty() {
            Outcome::NothingMeasured
        } else if c.count(Verdict::Slower) > 0 {
            Outcome::Slower
        } else {
            Outcome::Ok
        }
    }

    /// One word for it (a trace's last line says how the run ended with it).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "error",
            Outcome::Usage => "usage",
            Outcome::Mismatch => "mismatch",
            Outcome::NothingMeasured => "nothing-measured",
            Outcome::Slower => "slower",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// The line for stderr that explains a non-zero outcome of a finished run.
    pub fn explain(self) -> Option<&'static str> {
        match self {
            Outcome::Mismatch => Some("data did not verify: see the MISMATCH rows (offset, expected, found)"),
            Outcome::NothingMeasured => {
                Some("nothing was measured: every configuration was skipped (the notes say why) or there was nothing to measure")
            }
            Outcome::Interrupted => Some("interrupted: the rows above cover what was measured before the stop"),
            Outcome::Slower => Some("slower: at least one configuration got slower beyond the noise of the two runs (the SLOWER rows)"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Via;
    use crate::bench::pattern::Mismatch;
    use crate::bench::result::{Kind, Note, Row, Verify};
    use crate::bench::sample::stats::Samples;
    use crate::direction::Direction;

    fn row(measured: bool, verify: Option<Verify>) -> Row {
        let mut r = Row::new(Direction::H2c, 8);
        if measured {
            r.stats = Samples { size: 8, batch: 1, secs: vec![1e-6], extra: 0 }.stats();
        } else {
            r.notes.push(Note::Skipped { reason: "x".into() });
        }
        r.verify = verify;
        r
    }

    fn report(rows: Vec<Row>, interrupted: bool) -> Report {
        let mut r = Report::new(Kind::Pio, "t", false, Via::Sim, 1.0);
        r.results = rows;
        r.interrupted = interrupted;
        r
    }

    #[test]
    fn codes_follow_what_happened() {
        let bad = Verify::Mismatch { mismatch: Mismatch { offset: 0, expected: 1, found: 2, count: 1, outside: None } };
        assert_eq!(Outcome::of_report(&report(vec![row(true, Some(Verify::Ok))], false)), Outcome::Ok);
        assert_eq!(Outcome::of_report(&report(vec![row(false, None)], false)).code(), 4);
        assert_eq!(Outcome::of_report(&report(vec![], false)).code(), 4);
        assert_eq!(Outcome::of_report(&report(vec![row(true, Some(bad.clone()))], true)).code(), 3);
        assert_eq!(Outcome::of_report(&report(vec![row(true, Some(Verify::Ok))], true)).code(), 130);
        assert_eq!(Outcome::Interrupted.worst(Outcome::Mismatch), Outcome::Mismatch);
        assert_eq!(Outcome::Ok.worst(Outcome::NothingMeasured), Outcome::NothingMeasured);
        assert_eq!(Outcome::of_error(&Error::usage("x")).code(), 2);
        assert_eq!(Outcome::of_error(&Error::Refused("x".into())).code(), 1);
    }
}
