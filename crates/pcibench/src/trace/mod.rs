//! `--trace FILE`: what pcibench did to a card, one JSON line per event, written as it happens,
//! so a card owner whose run fails can send the file back. Every register read and write (BAR,
//! offset, width, value, time), config-space access, DMA buffer, descriptor built and writeback
//! seen is one line (docs/trace.md has each line's fields).
//!
//! A `Tracer` is the sink; the access layer (`access::traced`) and the engines report into it. With
//! tracing off nothing is wrapped and an engine's check is one branch on an `Option`. With it on,
//! each line is one write(2) of a line formatted into a reused buffer, so what was written before
//! a hang or a crash is in the file; the file is synced before an engine is stopped (`stop`) and
//! at the end (`finish`). Identical consecutive reads of one register (a status poll) are one line
//! and a count (`repeat`), and the file holds at most `limit` event lines: then one `capped` line,
//! and only the count of what was left out goes to the last line (`end`), which every trace ends
//! with, saying how the run ended (`interrupted` when the user stopped it).

mod file;

pub use self::file::{check_destination, create};

use crate::mmio::Width;
use crate::{Error, Result};
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

thread_local! {
    /// Event lines this thread has had written to any trace.
    static EVENTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Event lines this thread has had written to a trace so far (a read folded into a repeat line
/// costs a lock, not a line): the sampler takes the difference over a row's timed samples, and the
/// row says what tracing them cost (issue 43). Per thread, so what an engine's load thread or
/// another test traces is not counted.
pub fn events_here() -> u64 {
    EVENTS.with(|e| e.get())
}

fn counted() {
    EVENTS.with(|e| e.set(e.get() + 1));
}

/// The trace format's version (the first line's `version`): raised when a line changes meaning.
pub const VERSION: u32 = 1;
/// Event lines a trace holds unless told otherwise (`--trace-limit`): about 100 MB.
pub const DEFAULT_LIMIT: u64 = 1_000_000;
/// A run of identical reads is written as a `repeat` line at the latest after this many, so a
/// poll that never ends still shows in the file.
const REPEAT_EVERY: u64 = 1 << 16;

/// A register read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Where a traced access went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Bar(u8),
    Config,
}

/// How many lines a finished trace holds, and how many events it left out (past its limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub path: PathBuf,
    pub lines: u64,
    pub dropped: u64,
    /// Whether the file was made: a deferred trace that was never committed (the request was
    /// refused before anything was measured) leaves no file.
    pub written: bool,
}

/// The trace sink: cheap to clone (every clone writes to the same file), `Send + Sync` (an engine
/// under load runs on a thread of its own).
#[derive(Clone)]
pub struct Tracer(Arc<Inner>);

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracer({})", self.0.path.display())
    }
}

struct Inner {
    start: Instant,
    limit: u64,
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    /// None once finished, or after a write failed (`error` says why), or while deferred.
    out: Option<File>,
    /// A deferred trace's lines until it is committed (`Tracer::deferred`): the device and engine
    /// opened, before the request is checked against them.
    held: Option<Vec<u8>>,
    /// The line being formatted (reused: no allocation per event).
    line: String,
    /// Event lines written (the first line, `capped` and `end` not counted).
    lines: u64,
    /// Events left out after the limit.
    dropped: u64,
    capped: bool,
    /// The last read written as a line (space, offset, bits, value), and how many identical
    /// reads came after it, the last at `repeat_t`.
    last_read: Option<(Space, u64, usize, u64)>,
    repeats: u64,
    repeat_t: u64,
    error: Option<std::io::Error>,
}

/// `"0x..."`: values and addresses are hexadecimal strings (64-bit values do not fit a JSON
/// reader's doubles).
struct Hex(u64);

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{:#x}\"", self.0)
    }
}

/// A JSON string (names and messages; never on the per-access path).
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn hex_bytes(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out.push('"');
}

/// The little-endian value of up to 8 bytes.
fn le_value(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |v, b| v << 8 | *b as u64)
}

impl Tracer {
    /// A trace in the file `path` (created as `create` does) holding at most `limit` event lines;
    /// its first line names pcibench and the `command` that ran.
    pub fn create(path: &Path, limit: u64, command: &[String]) -> Result<Tracer> {
        let file = create("--trace", path)?;
        Tracer::to_file(file, path, limit, command)
    }

    /// A trace whose file is made only when it is `commit`ted (a measurement starts, or the run
    /// failed on the device): until then its lines are held in memory, so a request the device
    /// refuses (a `--total` below one transfer of the engine's window) creates no file. Issue 43:
    /// every argument is checked before any file is made.
    pub fn deferred(path: &Path, limit: u64, command: &[String]) -> Result<Tracer> {
        let mut state = State::new(None);
        state.held = Some(Vec::new());
        Tracer::with_state(state, path, limit, command)
    }

    /// Make a deferred trace's file and write what it holds; from then on lines are streamed.
    /// Nothing for a trace already committed or finished.
    pub fn commit(&self) -> Result<()> {
        let mut s = self.lock();
        let Some(held) = s.held.take() else { return Ok(()) };
        let mut file = create("--trace", &self.0.path)?;
        file.write_all(&held).map_err(|e| Error::io("cannot write the trace file", &self.0.path, e))?;
        s.out = Some(file);
        Ok(())
    }

    /// A trace into a file the caller opened.
    pub fn to_file(file: File, path: &Path, limit: u64, command: &[String]) -> Result<Tracer> {
        Tracer::with_state(State::new(Some(file)), path, limit, command)
    }

    fn with_state(state: State, path: &Path, limit: u64, command: &[String]) -> Result<Tracer> {
        let t = Tracer(Arc::new(Inner {
            start: Instant::now(),
            limit: limit.max(1),
            path: path.to_path_buf(),
            state: Mutex::new(state),
        }));
        let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let command = serde_json::to_string(command).unwrap_or_else(|_| "[]".into());
        let mut s = t.lock();
        s.line.clear();
        let _ = writeln!(
            s.line,
            "{{\"ev\":\"trace\",\"version\":{VERSION},\"pcibench\":\"{}\",\"command\":{command},\"limit\":{},\
             \"unix_ms\":{unix_ms},\"about\":{}}}",
            env!("CARGO_PKG_VERSION"),
            t.0.limit,
            json_str(
                "t: ns since this line; values, offsets and addresses in hex; a repeat line: the read before it \
                 returned the same value n more times; accesses a measurement times through the CPU mapping \
                 (PIO copies, latency's MMIO reads) are not traced"
            )
        );
        s.write_line();
        if let Some(e) = s.error.take() {
            return Err(Error::io("cannot write the trace file", path, e));
        }
        drop(s);
        Ok(t)
    }

    pub fn path(&self) -> &Path {
        &self.0.path
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while the lock was held leaves at most one line unwritten: go on.
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> u64 {
        self.0.start.elapsed().as_nanos() as u64
    }

    /// Write one event line: `{"ev":EV,"t":NS` + what `body` appends + `}`.
    fn emit(&self, ev: &str, body: impl FnOnce(&mut String)) {
        let mut s = self.lock();
        // Read under the lock, so lines from several threads (an engine under load) are in time order.
        let t = self.now();
        s.flush_repeats(&self.0);
        s.last_read = None;
        s.event(&self.0, ev, t, body);
    }

    /// A register read (after it returned) or write (before it is made) in BAR `bar`.
    pub fn reg(&self, access: Access, bar: u8, offset: u64, width: Width, value: u64) {
        self.access(access, Space::Bar(bar), offset, width.bytes(), value);
    }

    fn access(&self, access: Access, space: Space, offset: u64, bytes: usize, value: u64) {
        let mut s = self.lock();
        let t = self.now();
        let key = (space, offset, bytes, value);
        if access == Access::Read && s.last_read == Some(key) {
            s.repeats += 1;
            s.repeat_t = t;
            if s.repeats >= REPEAT_EVERY {
                s.flush_repeats(&self.0);
            }
            return;
        }
        s.flush_repeats(&self.0);
        let (ev, bar) = match (access, space) {
            (Access::Read, Space::Bar(b)) => ("read", Some(b)),
            (Access::Write, Space::Bar(b)) => ("write", Some(b)),
            (Access::Read, Space::Config) => ("config-read", None),
            (Access::Write, Space::Config) => ("config-write", None),
        };
        s.event(&self.0, ev, t, |l| {
            if let Some(b) = bar {
                let _ = write!(l, ",\"bar\":{b}");
            }
            let _ = write!(l, ",\"off\":{},\"w\":{},\"v\":{}", Hex(offset), bytes * 8, Hex(value));
        });
        s.last_read = (access == Access::Read).then_some(key);
    }

    /// A config-space access of `bytes` at `offset` (read: what it returned; write: what is written).
    pub fn config(&self, access: Access, offset: u64, bytes: &[u8]) {
        if bytes.len() <= 8 {
            self.access(access, Space::Config, offset, bytes.len(), le_value(bytes));
        } else {
            let ev = if access == Access::Read { "config-read" } else { "config-write" };
            self.emit(ev, |l| {
                let _ = write!(l, ",\"off\":{},\"len\":{},\"bytes\":", Hex(offset), bytes.len());
                hex_bytes(l, bytes);
            });
        }
    }

    /// A bulk access (`--io syscall`): where and how much, not the data.
    pub fn bulk(&self, access: Access, bar: u8, offset: u64, len: usize, width: Width) {
        let ev = if access == Access::Read { "bulk-read" } else { "bulk-write" };
        self.emit(ev, |l| {
            let _ = write!(l, ",\"bar\":{bar},\"off\":{},\"len\":{len},\"w\":\"{width}\"", Hex(offset));
        });
    }

    /// A DMA buffer made for the card: how it was made, and its first bus segments
    /// (buffer offset, bus address, length) of `count`.
    pub fn buffer(&self, what: &str, len: u64, segments: &[(u64, u64, u64)], count: usize) {
        self.emit("buffer", |l| {
            let _ = write!(l, ",\"what\":{},\"len\":{len},\"count\":{count},\"segments\":[", json_str(what));
            for (i, (off, bus, n)) in segments.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(l, "{comma}{{\"off\":{},\"bus\":{},\"len\":{n}}}", Hex(*off), Hex(*bus));
            }
            l.push(']');
        });
    }

    /// Descriptor `index` of `engine`, as written to host memory at bus address `bus`, and the
    /// fields it holds (the engine's names, for people).
    pub fn descriptor(&self, engine: &str, index: u64, bus: u64, bytes: &[u8], fields: &[(&str, u64)]) {
        self.emit("desc", |l| {
            let _ = write!(l, ",\"engine\":\"{engine}\",\"i\":{index},\"bus\":{},\"bytes\":", Hex(bus));
            hex_bytes(l, bytes);
            l.push_str(",\"fields\":{");
            for (i, (k, v)) in fields.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(l, "{comma}\"{k}\":{}", Hex(*v));
            }
            l.push('}');
        });
    }

    /// A word the card wrote to host memory, as the driver saw it: a writeback, a status or a
    /// semaphore (`what`) at bus address `bus`.
    pub fn writeback(&self, engine: &str, what: &str, bus: u64, width: Width, value: u64) {
        self.emit("wb", |l| {
            let _ = write!(
                l,
                ",\"engine\":\"{engine}\",\"what\":\"{what}\",\"bus\":{},\"w\":{},\"v\":{}",
                Hex(bus),
                width.bytes() * 8,
                Hex(value)
            );
        });
    }

    /// Interrupts routed to this process: `vectors` of `kind` (`what`: the access path's words).
    pub fn irq_route(&self, kind: &str, vectors: u32, what: &str) {
        self.emit("irq-route", |l| {
            let _ = write!(l, ",\"kind\":{},\"vectors\":{vectors},\"what\":{}", json_str(kind), json_str(what));
        });
    }

    /// The interrupts routed are about to be torn down (every signal before it has its `irq` line).
    pub fn irq_off(&self, kind: &str) {
        self.emit("irq-off", |l| {
            let _ = write!(l, ",\"kind\":{}", json_str(kind));
        });
    }

    /// What one wait for interrupts collected: `fired[v]` signals on vector `v` (an eventfd's
    /// count, so two that came before the wait read them are one line saying 2).
    pub fn irq(&self, kind: &str, fired: &[u64]) {
        self.emit("irq", |l| {
            let total: u64 = fired.iter().sum();
            let _ = write!(l, ",\"kind\":{},\"n\":{total},\"vectors\":[", json_str(kind));
            let mut comma = "";
            for (v, n) in fired.iter().enumerate().filter(|(_, &n)| n > 0) {
                let _ = write!(l, "{comma}[{v},{n}]");
                comma = ",";
            }
            l.push(']');
        });
    }

    /// A line of words: `ev` is what kind (`device`, `error`, `note`).
    pub fn note(&self, ev: &str, text: &str) {
        self.emit(ev, |l| {
            let _ = write!(l, ",\"text\":{}", json_str(text));
        });
    }

    /// A measurement begins: its kind and the request, as saved runs keep it.
    pub fn measure(&self, kind: &str, request: &serde_json::Value) {
        self.emit("measure", |l| {
            let _ = write!(l, ",\"kind\":{},\"request\":{request}", json_str(kind));
        });
    }

    /// `engine` is about to be stopped (a timeout, an error, the user's Ctrl-C): the line, and
    /// every line before it, reach the disk first.
    pub fn stop(&self, engine: &str) {
        self.emit("stop", |l| {
            let _ = write!(l, ",\"engine\":\"{engine}\"");
        });
        let mut s = self.lock();
        if let Some(f) = &s.out {
            if let Err(e) = f.sync_data() {
                s.fail(e);
            }
        }
    }

    /// End the trace with how the run ended (`ok`, `interrupted`, `error`, ...) and what went
    /// wrong, if anything; sync it. An error when any line could not be written.
    pub fn finish(&self, outcome: &str, detail: Option<&str>) -> Result<Summary> {
        let mut s = self.lock();
        let written = s.held.is_none();
        s.end(&self.0, self.now(), outcome, detail);
        let summary = Summary { path: self.0.path.clone(), lines: s.lines, dropped: s.dropped, written };
        match s.error.take() {
            Some(e) => Err(Error::io("cannot write the trace file", &self.0.path, e)),
            None => Ok(summary),
        }
    }
}

impl State {
    fn new(out: Option<File>) -> State {
        State {
            out,
            held: None,
            line: String::with_capacity(256),
            lines: 0,
            dropped: 0,
            capped: false,
            last_read: None,
            repeats: 0,
            repeat_t: 0,
            error: None,
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        self.out = None;
        self.error.get_or_insert(e);
    }

    /// Write `self.line` to the file.
    fn write_line(&mut self) {
        if let Some(f) = &mut self.out {
            if let Err(e) = f.write_all(self.line.as_bytes()) {
                self.fail(e);
            }
        } else if let Some(held) = &mut self.held {
            held.extend_from_slice(self.line.as_bytes());
        }
    }

    fn event(&mut self, inner: &Inner, ev: &str, t: u64, body: impl FnOnce(&mut String)) {
        if self.out.is_none() && self.held.is_none() {
            return;
        }
        if self.lines >= inner.limit {
            self.dropped += 1;
            if !self.capped {
                self.capped = true;
                self.line.clear();
                let _ = writeln!(
                    self.line,
                    "{{\"ev\":\"capped\",\"t\":{t},\"lines\":{},\"text\":{}}}",
                    self.lines,
                    json_str("the trace holds this many event lines (--trace-limit): later events are counted in the last line, not written")
                );
                self.write_line();
            }
            return;
        }
        self.line.clear();
        let _ = write!(self.line, "{{\"ev\":\"{ev}\",\"t\":{t}");
        body(&mut self.line);
        self.line.push_str("}\n");
        self.write_line();
        self.lines += 1;
        counted();
    }

    fn flush_repeats(&mut self, inner: &Inner) {
        if self.repeats == 0 {
            return;
        }
        let (n, t) = (self.repeats, self.repeat_t);
        self.repeats = 0;
        self.event(inner, "repeat", t, |l| {
            let _ = write!(l, ",\"n\":{n}");
        });
    }

    fn end(&mut self, inner: &Inner, t: u64, outcome: &str, detail: Option<&str>) {
        self.flush_repeats(inner);
        self.last_read = None;
        // A deferred trace never committed leaves no file.
        self.held = None;
        let Some(mut f) = self.out.take() else { return };
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ev\":\"end\",\"t\":{t},\"outcome\":{},\"lines\":{},\"dropped\":{}",
            json_str(outcome),
            self.lines,
            self.dropped
        );
        if let Some(d) = detail {
            let _ = write!(self.line, ",\"detail\":{}", json_str(d));
        }
        self.line.push_str("}\n");
        if let Err(e) = f.write_all(self.line.as_bytes()).and_then(|_| f.sync_data()) {
            self.error.get_or_insert(e);
        }
    }
}

impl Drop for Inner {
    /// A trace nobody finished (a panic unwound past it) still ends with a line saying so.
    fn drop(&mut self) {
        let t = self.start.elapsed().as_nanos() as u64;
        let s = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut s = std::mem::replace(s, State::new(None));
        s.end(self, t, "unfinished", Some("the trace was not finished: pcibench stopped before it could say how"));
    }
}

#[cfg(test)]
mod tests;
