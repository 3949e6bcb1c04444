//! `--trace` against the models: a one-descriptor transfer on `sim` (XDMA), `sim-qdma` and
//! `sim-nvram` (umem), each way, traced from the moment the card is opened; then the trace alone
//! is replayed into a fresh card (new registers, engine and card memory, the same host memory) and
//! must give the same result: every read the trace holds comes back, the descriptors and writes it
//! holds start the transfer, the writebacks it saw come, and the data arrives.
//!
//! The replay writes what the trace says was written, in order: register and config-space writes,
//! and each descriptor's bytes at its bus address (which were zeroed first, with the writeback
//! words: the trace is all that puts them back). A read waits until the register reads what the
//! trace saw, or what a later read of it saw (a model that ran ahead of the original: a busy bit
//! already clear); the same for a writeback word in host memory. The fresh card runs on a fake
//! clock that moves only while a read waits for what the trace saw (to the engine's next
//! completion), so a read right after a doorbell finds the engine still busy, as the original
//! did, where the trace holds no later read to show the engine went idle.

use crate::access::sim::SimDevice;
use crate::access::{BusMaster, DeviceAccess, IoMode, Mapping};
use crate::clock::FakeClock;
use crate::device::{Device, Target};
use crate::dma::{Direction, DmaBuffer, Transfer};
use crate::host::Host;
use crate::mmio::Width;
use crate::session::{EngineRequest, Session};
use crate::sim::datapath::ModelClock;
use crate::sim::host_map::HostMap;
use crate::sim::{nvram, qdma, xdma, CardSpec, SimCard};
use crate::trace::Tracer;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEN: usize = 4096;
/// How long a replayed read or writeback may take to show: a hang detector, far beyond what a
/// model needs on a loaded host.
const SETTLE: Duration = Duration::from_secs(60);
/// What each of the fresh card's host-memory accesses takes during a replay.
/// Where the replay is meant to fail: what the trace saw never comes.
const NEVER: Duration = Duration::from_millis(200);

/// One of the simulated cards with an engine: how to build it on given host memory, and its card
/// memory (to fill and check).
trait Card {
    fn spec(&self) -> &'static dyn CardSpec;
    fn build_on(&self, host: Arc<HostMap>) -> Built {
        self.build_with(host, ModelClock::real())
    }
    fn build_with(&self, host: Arc<HostMap>, clock: ModelClock) -> Built;
}

/// A card, how to read its memory (checking its model saw no protocol violation) and how to fill it.
type Built = (SimCard, Box<dyn Fn(u64, &mut [u8])>, Box<dyn Fn(&[u8])>);

macro_rules! card {
    ($name:ident, $module:ident, $spec:expr) => {
        struct $name;
        impl Card for $name {
            fn spec(&self) -> &'static dyn CardSpec {
                &$spec
            }
            fn build_with(&self, host: Arc<HostMap>, clock: ModelClock) -> Built {
                let (card, model) = $module::card::build_with(Default::default(), host, clock).unwrap();
                let (m1, m2) = (Arc::clone(&model), model);
                assert!(m1.violations().is_empty());
                (
                    card,
                    Box::new(move |at, out| {
                        m1.card_read(at, out).unwrap();
                        assert_eq!(m1.violations(), Vec::<String>::new(), "the model saw no protocol violation");
                    }),
                    Box::new(move |data| m2.card_write(0, data).unwrap()),
                )
            }
        }
    };
}

card!(Xdma, xdma, xdma::card::XdmaCard);
card!(Qdma, qdma, qdma::card::QdmaCard);
card!(Nvram, nvram, nvram::card::NvramCard);

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// The buffer's first `LEN` bytes.
fn bytes(buf: &dyn DmaBuffer) -> Vec<u8> {
    // SAFETY: the buffer owns len() >= LEN bytes; no engine runs a transfer on it while a test looks.
    unsafe { std::slice::from_raw_parts(buf.as_ptr(), LEN) }.to_vec()
}

/// Put `data` (at most `LEN` bytes) at the start of the buffer.
fn fill(buf: &dyn DmaBuffer, data: &[u8]) {
    assert!(data.len() <= LEN && buf.len() >= LEN);
    // SAFETY: as above, and nothing else looks at the buffer now.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.as_ptr(), data.len()) }
}

fn hex(v: &Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}"));
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn width(v: &Value) -> Width {
    match v.as_u64() {
        Some(8) => Width::B8,
        Some(16) => Width::B16,
        Some(32) => Width::B32,
        Some(64) => Width::B64,
        w => panic!("not a register width: {w:?}"),
    }
}

/// A host memory word the card writes (a sim card's bus address is a process address).
fn word(bus: u64) -> &'static AtomicU32 {
    // SAFETY: the bus address of a 4-byte aligned word inside a DMA buffer the original run
    // still holds (the test keeps it alive until the replay is done).
    unsafe { AtomicU32::from_ptr(bus as *mut u32) }
}

/// What the original run left: the trace, and everything holding host memory alive.
struct Original {
    lines: Vec<Value>,
    host: Arc<HostMap>,
    buf: Box<dyn DmaBuffer>,
    _rig: crate::session::DmaRig,
    _session: Session,
}

/// One traced `dir` transfer of `LEN` bytes on `card`, card memory (for c2h) or the buffer (for
/// h2c) holding `data`.
fn original(card: &dyn Card, dir: Direction, data: &[u8]) -> Original {
    let dir_path = tempfile::tempdir().unwrap();
    let path = dir_path.path().join("trace.jsonl");
    let tracer = Tracer::create(&path, 1_000_000, &["test".into()]).unwrap();
    let spec = card.spec();
    let host = HostMap::new();
    let (sim, _, fill_card) = card.build_on(Arc::clone(&host));
    if dir == Direction::C2h {
        fill_card(data);
    }
    let info = spec.info();
    let target: Target = spec.name().parse().unwrap();
    let dev = SimDevice::from_card(spec.name(), &info, sim);
    let session = Session::with_device(&Host::with_root("/nonexistent-root"), Device::new(target, info), Box::new(dev))
        .traced(Some(tracer.clone()));
    let mut rig = session.open_dma(&EngineRequest::default(), None).unwrap();
    let buf = rig.alloc.alloc(LEN).unwrap();
    if dir == Direction::H2c {
        fill(&*buf, data);
    }
    {
        let _bm = BusMaster::enable(session.dev.as_ref()).unwrap();
        rig.engine.prepare(&*buf, &Transfer { dir, buf_offset: 0, card_addr: 0, len: LEN as u64 }).unwrap();
        rig.engine.run(Duration::from_secs(30)).unwrap();
    }
    tracer.finish("ok", None).unwrap();
    let lines = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Original { lines, host, buf, _rig: rig, _session: session }
}

/// What a replay did.
#[derive(Debug, Default, PartialEq)]
struct Replayed {
    writes: usize,
    reads: usize,
    config: usize,
    descriptors: usize,
    writebacks: usize,
}

/// A fresh card on a fake clock, and the clock.
fn fresh(card: &dyn Card, host: &Arc<HostMap>) -> (Built, Arc<FakeClock>) {
    let clock = Arc::new(FakeClock::new(0, 0, 1));
    (card.build_with(Arc::clone(host), ModelClock::new(clock.clone())), clock)
}

/// Wait until `read` gives `want` or one of `later`, moving `clock` on to the card's next
/// completion (a microsecond when none is under way) between reads; what it gave, or why it never
/// did.
fn settle(
    limit: Duration,
    what: &str,
    want: u64,
    later: &[u64],
    time: (&SimDevice, &FakeClock),
    mut read: impl FnMut() -> u64,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let got = read();
        if got == want || later.contains(&got) {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(format!("{what}: reads {got:#x}, the trace saw {want:#x} (later {later:x?})"));
        }
        let (dev, clock) = time;
        clock.advance(dev.due_in().map_or(1000, |d| (d.as_nanos() as u64).max(1)));
    }
}

/// Replay `lines` into `dev`, a fresh card on the same host memory, each read waiting at most `limit`.
fn replay(lines: &[Value], dev: &SimDevice, clock: &FakeClock, limit: Duration) -> Result<Replayed, String> {
    // The values each register (or host word) is read with after each line, for "ran ahead".
    let key = |l: &Value| -> Option<String> {
        match l["ev"].as_str()? {
            "read" => Some(format!("bar{}+{}", l["bar"], l["off"])),
            "config-read" => Some(format!("config+{}", l["off"])),
            "wb" => Some(format!("wb{}", l["bus"])),
            _ => None,
        }
    };
    let mut later: Vec<Vec<u64>> = vec![Vec::new(); lines.len()];
    let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
    for (i, l) in lines.iter().enumerate().rev() {
        if let Some(k) = key(l) {
            let vals = seen.entry(k).or_default();
            later[i] = vals.clone();
            vals.push(hex(&l["v"]));
        }
    }
    // The trace alone puts the descriptors and writeback words back.
    for l in lines {
        match l["ev"].as_str() {
            Some("desc") => {
                let n = l["bytes"].as_str().unwrap().len() / 2;
                // SAFETY: the descriptor's bytes at its bus address, inside descriptor memory the
                // original run still holds, with no engine running.
                unsafe { std::ptr::write_bytes(hex(&l["bus"]) as *mut u8, 0, n) };
            }
            Some("wb") => word(hex(&l["bus"])).store(0, Ordering::Release),
            _ => {}
        }
    }
    let mut bars: BTreeMap<u64, Box<dyn crate::access::BarRegion>> = BTreeMap::new();
    let mut done = Replayed::default();
    for (i, l) in lines.iter().enumerate() {
        let at = |what: &str| format!("line {}: {what} {l}", i + 1);
        match l["ev"].as_str().unwrap() {
            ev @ ("read" | "write") => {
                let index = l["bar"].as_u64().unwrap();
                if let std::collections::btree_map::Entry::Vacant(e) = bars.entry(index) {
                    e.insert(dev.open_bar(index as u8, Mapping::Uc, IoMode::Mmap).map_err(|e| at(&e.to_string()))?);
                }
                let bar = &bars[&index];
                let (off, w, v) = (hex(&l["off"]), width(&l["w"]), hex(&l["v"]));
                if ev == "write" {
                    bar.write(off, w, v).map_err(|e| at(&e.to_string()))?;
                    done.writes += 1;
                } else {
                    settle(limit, &at("read"), v, &later[i], (dev, clock), || bar.read(off, w).unwrap())?;
                    done.reads += 1;
                }
            }
            ev @ ("config-read" | "config-write") => {
                let (off, n, v) = (hex(&l["off"]), l["w"].as_u64().unwrap() as usize / 8, hex(&l["v"]));
                if ev == "config-write" {
                    dev.config_write(off, &v.to_le_bytes()[..n]).map_err(|e| at(&e.to_string()))?;
                } else {
                    settle(limit, &at("config read"), v, &later[i], (dev, clock), || {
                        let mut b = [0u8; 8];
                        dev.config_read(off, &mut b[..n]).unwrap();
                        u64::from_le_bytes(b)
                    })?;
                }
                done.config += 1;
            }
            "desc" => {
                let s = l["bytes"].as_str().unwrap();
                let d: Vec<u8> =
                    (0..s.len()).step_by(2).map(|k| u8::from_str_radix(&s[k..k + 2], 16).unwrap()).collect();
                // SAFETY: as above: descriptor memory the original run still holds.
                unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), hex(&l["bus"]) as *mut u8, d.len()) };
                done.descriptors += 1;
            }
            "wb" => {
                settle(limit, &at("writeback"), hex(&l["v"]), &later[i], (dev, clock), || {
                    // A driver polling host memory lets the card's engine come to now.
                    dev.advance();
                    word(hex(&l["bus"])).load(Ordering::Acquire).into()
                })?;
                done.writebacks += 1;
            }
            "error" | "capped" => return Err(at("the original run")),
            _ => {}
        }
    }
    Ok(done)
}

/// Trace a transfer each way on `card`, replay each trace into a fresh card and compare.
fn trace_and_replay(card: &dyn Card) {
    for dir in [Direction::H2c, Direction::C2h] {
        let data = pattern(dir as u8 + 7);
        let o = original(card, dir, &data);
        let evs = |ev: &str| o.lines.iter().filter(|l| l["ev"] == ev).count();
        assert_eq!(evs("desc"), 1, "{dir}: a one-descriptor transfer");
        assert!(evs("wb") >= 1 && evs("write") > 0 && evs("read") > 0, "{dir}: {:?}", o.lines);
        assert_eq!(o.lines.last().unwrap()["outcome"], "ok");

        let ((fresh, read_card, fill_card), clock) = fresh(card, &o.host);
        if dir == Direction::C2h {
            fill_card(&data);
            fill(&*o.buf, &[0; LEN]);
        }
        let spec = card.spec();
        let dev = SimDevice::from_card(spec.name(), &spec.info(), fresh);
        let done = replay(&o.lines, &dev, &clock, SETTLE);
        let done = done.unwrap_or_else(|e| panic!("{} {dir}: {e}", spec.name()));
        assert_eq!(done.descriptors, 1);
        assert!(done.writebacks >= 1 && done.reads > 10 && done.config >= 2, "{done:?}");
        let mut got = vec![0u8; LEN];
        read_card(0, &mut got);
        match dir {
            Direction::H2c => assert!(got == data, "{} h2c: the fresh card's memory holds the data", spec.name()),
            Direction::C2h => {
                assert!(bytes(&*o.buf) == data, "{} c2h: the host buffer holds the data", spec.name())
            }
        }
    }
}

#[test]
fn an_xdma_transfer_replayed_from_its_trace_into_a_fresh_sim_card_gives_the_same_result() {
    trace_and_replay(&Xdma);
}

#[test]
fn a_qdma_transfer_replayed_from_its_trace_into_a_fresh_sim_qdma_card_gives_the_same_result() {
    trace_and_replay(&Qdma);
}

#[test]
fn a_umem_transfer_replayed_from_its_trace_into_a_fresh_sim_nvram_card_gives_the_same_result() {
    trace_and_replay(&Nvram);
}

/// A trace is checked, not taken on trust: a register that never reads what the trace says makes
/// the replay fail, naming the line.
#[test]
fn a_replay_fails_where_the_card_does_not_read_what_the_trace_saw() {
    let o = original(&Xdma, Direction::H2c, &pattern(1));
    let mut lines = o.lines.clone();
    // The IRQ block's identifier, wherever it was read.
    for l in lines.iter_mut().filter(|l| l["ev"] == "read" && l["v"] == "0x1fc20006") {
        l["v"] = "0x1fc20007".into();
    }
    let ((fresh, _, _), clock) = fresh(&Xdma, &o.host);
    let dev = SimDevice::from_card("sim", &xdma::card::XdmaCard.info(), fresh);
    let e = replay(&lines, &dev, &clock, NEVER).unwrap_err();
    assert!(e.contains("reads 0x1fc20006, the trace saw 0x1fc20007"), "{e}");
}

/// The descriptors come from the trace: with its `desc` lines' bytes zeroed the fresh card finds
/// zeroed descriptor memory, and the writeback the trace saw never comes.
#[test]
fn a_trace_without_its_descriptors_does_not_replay() {
    for card in [&Xdma as &dyn Card, &Qdma, &Nvram] {
        let o = original(card, Direction::H2c, &pattern(2));
        let mut lines = o.lines.clone();
        for l in lines.iter_mut().filter(|l| l["ev"] == "desc") {
            l["bytes"] = "0".repeat(l["bytes"].as_str().unwrap().len()).into();
        }
        let ((fresh, _, _), clock) = fresh(card, &o.host);
        let spec = card.spec();
        let dev = SimDevice::from_card(spec.name(), &spec.info(), fresh);
        assert!(replay(&lines, &dev, &clock, NEVER).is_err(), "{}", spec.name());
    }
}
