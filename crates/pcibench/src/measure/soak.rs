//! `dma --duration`'s plan: every card named, each opened once per stream its engine's vendor
//! driver lets run beside the others (XDMA: an engine per memory-mapped channel and direction,
//! libxdma's channels being independent; QDMA: one engine, a queue per stream, as libqdma's
//! queues are; edu and the NVRAM: their one engine, one direction), then the soak runner
//! (`bench::soak`) keeps them moving for the duration.

use super::{DmaDirs, DmaRequest, Hooks, Measuring, SoakRequest};
use crate::bench::result::Report;
use crate::bench::sample::clock::MONOTONIC;
use crate::bench::soak::figures::Lane;
use crate::bench::soak::{self, SoakDevice, SoakEngine, SoakPlan};
use crate::direction::Direction;
use crate::session::{EngineRequest, Session};
use crate::{Error, Result};
use std::time::Duration;

/// The most streams one soak runs (every channel of 16 four-channel XDMA cards, both ways).
pub const MAX_STREAMS: usize = 128;

/// What a soak refuses before it opens anything, in one line each.
fn check(r: &DmaRequest, k: &SoakRequest) -> Result<()> {
    let refuse = |what: &str| Err(Error::usage(what.to_string()));
    if k.duration_ms == 0 {
        return refuse("--duration 0: give how long to run, e.g. --duration 60s");
    }
    if k.every_ms == 0 {
        return refuse("--every 0: give how often to report, e.g. --every 10s");
    }
    if r.rate.is_some() {
        return refuse(
            "--rate offers transfers at a rate; --duration keeps every stream moving flat out: use one of them",
        );
    }
    if r.total.is_some() {
        return refuse("--duration sets how long the streams run: drop --total");
    }
    if r.sizes.len() > 1 {
        return refuse("--duration runs every stream at one transfer size: give one --size");
    }
    if r.queues.len() > 1 {
        return refuse("--duration runs one queue count: give one --queues N (queues per direction)");
    }
    if r.pattern != super::DmaPattern::Seq || r.window.is_some() {
        return refuse(
            "--duration moves each stream's one transfer again and again: drop --pattern random and --window",
        );
    }
    if r.completion.is_some_and(|c| c != super::CompletionMode::Poll) || r.irq_kind.is_some() {
        return refuse("--duration polls every stream from one loop: drop --completion irq|both and --irq-kind");
    }
    if r.engine.channel.is_some() && k.channels.is_some() {
        return refuse("--channel and --channels both name channels: give --channels");
    }
    Ok(())
}

/// The directions a soak runs at once.
fn dirs(d: DmaDirs) -> Vec<Direction> {
    match d {
        DmaDirs::H2c => vec![Direction::H2c],
        DmaDirs::C2h => vec![Direction::C2h],
        DmaDirs::Both | DmaDirs::Bidir | DmaDirs::All => vec![Direction::H2c, Direction::C2h],
    }
}

pub fn measure(session: &Session, r: &DmaRequest, k: &SoakRequest, hooks: &mut Hooks) -> Result<Report> {
    check(r, k)?;
    let mut others = Vec::new();
    for t in &k.more {
        if t == &session.device.target || others.iter().any(|s: &Session| &s.device.target == t) {
            return Err(Error::usage(format!("{t} is named twice: name each card once")));
        }
        let s = Session::open(&session.host, t, r.via)?;
        if s.device.simulated() != session.device.simulated() {
            return Err(Error::usage(
                "a soak runs real cards or simulated cards, not both: a simulated card gives up privilege a real one needs",
            ));
        }
        others.push(s);
    }
    let sessions: Vec<&Session> = std::iter::once(session).chain(others.iter()).collect();
    let mut engines = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        s.check_dma_consent(r.allow_dma)?;
        s.expect_dma();
        engines.extend(open(i, s, r, k, sessions.len() > 1)?);
    }
    if k.channels.is_some() && !engines.iter().flat_map(|e| &e.lanes).any(|l| matches!(l.0, Lane::Channel(_))) {
        return Err(Error::usage(
            "--channels applies to engines with channels (xdma), and no card named has one: drop it",
        ));
    }
    let streams: usize = engines.iter().map(|e| e.lanes.len()).sum();
    if streams > MAX_STREAMS {
        return Err(Error::usage(format!(
            "that is {streams} streams: pcibench runs at most {MAX_STREAMS} at once; name fewer cards, channels or queues"
        )));
    }
    let plan = SoakPlan {
        duration: Duration::from_millis(k.duration_ms),
        every: Duration::from_millis(k.every_ms.min(k.duration_ms)),
        timeout: Duration::from_millis(r.timeout_ms),
        size: r.sizes.first().copied(),
    };
    let m = Measuring::start(session, &r.common)?;
    for s in &others {
        s.drop_privilege()?;
    }
    let devices: Vec<SoakDevice> =
        sessions.iter().map(|s| SoakDevice { device: &s.device, dev: s.dev.as_ref() }).collect();
    m.run(&MONOTONIC, "dma", 0, hooks, |s| soak::run(&devices, engines, &plan, s))
}

/// The engines card `i` runs, one per stream its engine's driver lets run beside the others.
/// With `several` cards, `--channels` applies to those whose engine has channels.
fn open(i: usize, s: &Session, r: &DmaRequest, k: &SoakRequest, several: bool) -> Result<Vec<SoakEngine>> {
    let dirs = dirs(r.dirs);
    let queues = r.queues.first().copied().unwrap_or(1);
    let wanted = queues.saturating_mul(dirs.len() as u16);
    let mut probe = s.open_dma(&r.engine, r.queues.first().map(|_| wanted))?;
    let name = probe.engine.name();
    if probe.engine.packets() || probe.engine.stream_end().is_some() {
        return Err(Error::usage(format!(
            "{}'s {name} engine moves streams (packets to and from the design's far end): --duration runs memory-mapped \
             channels and queues over card memory; measure streams with dma without --duration",
            s.device.name()
        )));
    }
    if probe.engine.posts() {
        if probe.engine.queues() < wanted {
            drop(probe);
            probe = s.open_dma(&r.engine, Some(wanted))?;
        }
        // One engine, a queue per stream: H2C on the first queues, C2H on the next (a queue id
        // names a ring pair; each stream has its own ring).
        let mut lanes = Vec::new();
        for (d, dir) in dirs.iter().enumerate() {
            for q in 0..queues {
                let id = d as u16 * queues + q;
                lanes.push((Lane::Queue(id), *dir, id));
            }
        }
        return Ok(vec![SoakEngine {
            device: i,
            card_offset: probe.card_offset,
            engine: probe.engine,
            alloc: probe.alloc,
            lanes,
        }]);
    }
    if r.queues.first().is_some_and(|q| *q > 1) {
        return Err(Error::usage(format!("--queues applies to engines with queues (qdma), not {name}: drop --queues")));
    }
    let channels = probe.engine.channels();
    if channels.is_empty() {
        if dirs.len() > 1 {
            return Err(Error::usage(format!(
                "{}'s {name} engine has one way and runs one transfer at a time: a soak of it takes one direction \
                 (--dir h2c or --dir c2h)",
                s.device.name()
            )));
        }
        if k.channels.is_some() && !several {
            return Err(Error::usage(format!(
                "--channels applies to engines with channels (xdma), not {name}: drop it"
            )));
        }
        return Ok(vec![SoakEngine {
            device: i,
            card_offset: probe.card_offset,
            engine: probe.engine,
            alloc: probe.alloc,
            lanes: vec![(Lane::Engine, dirs[0], 0)],
        }]);
    }
    drop(probe);
    // XDMA: an engine per channel and direction (each channel's H2C and C2H halves are engines of
    // their own in libxdma, each with its own registers and writeback).
    let asked: Vec<u8> = match (&k.channels, r.engine.channel) {
        (Some(v), _) => v.clone(),
        (None, Some(c)) => vec![c],
        (None, None) => {
            let mut all: Vec<u8> = channels.iter().map(|(_, c)| *c).collect();
            all.sort_unstable();
            all.dedup();
            all
        }
    };
    let mut out = Vec::new();
    for c in asked {
        let here: Vec<Direction> = dirs.iter().copied().filter(|d| channels.contains(&(*d, c))).collect();
        if here.is_empty() {
            return Err(Error::usage(format!(
                "{} has no memory-mapped {} channel {c} (its channels: {})",
                s.device.name(),
                dirs.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" or "),
                channels.iter().map(|(d, c)| format!("{d} {c}")).collect::<Vec<_>>().join(", ")
            )));
        }
        for dir in here {
            let req = EngineRequest { channel: Some(c), ..r.engine.clone() };
            let rig = s.open_dma(&req, None)?;
            out.push(SoakEngine {
                device: i,
                card_offset: rig.card_offset,
                engine: rig.engine,
                alloc: rig.alloc,
                lanes: vec![(Lane::Channel(c), dir, 0)],
            });
        }
    }
    Ok(out)
}
