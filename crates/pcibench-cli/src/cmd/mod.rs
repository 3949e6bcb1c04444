pub mod dma;
pub mod doctor;
pub mod info;
pub mod list;
pub mod peek;
pub mod pio;
pub mod run;
pub mod setup;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pcibench::target::Target;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Parse a DEVICE argument (`DDDD:BB:DD.F`, `BB:DD.F`, or a simulated card such as `sim`).
pub fn parse_target(s: &str) -> Result<Target, String> {
    s.parse::<Target>().map_err(|e| e.to_string())
}

/// Print a JSON document on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// A byte-progress bar on stderr that appears only for runs longer than about 2 s, and only
/// when stderr is a terminal.
pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: bool,
    tty: bool,
}

pub fn progress_bar(total: u64, what: &str) -> Progress {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    if let Ok(style) =
        ProgressStyle::with_template("{prefix} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    Progress { bar, start: Instant::now(), shown: false, tty: std::io::stderr().is_terminal() }
}

impl Progress {
    pub fn inc(&mut self, n: u64) {
        self.bar.inc(n);
        if !self.shown && self.tty && self.start.elapsed() > Duration::from_secs(2) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}
