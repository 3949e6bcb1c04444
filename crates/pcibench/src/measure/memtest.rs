//! `memtest`'s plan from the engine's own facts once it is open: the region (the window from the
//! engine's card offset, the design's declared size: `--card-size` on XDMA and QDMA, the NVRAM's
//! size code, edu's buffer) and the host chunk it moves at a time.

use super::{Hooks, Measuring, MemtestRequest};
use crate::bench::memtest::{self, MemtestPlan, MemtestSetup, DEFAULT_CHUNK};
use crate::bench::result::Report;
use crate::bench::sample::clock::MONOTONIC;
use crate::session::Session;
use crate::units::human_size;
use crate::{Error, Result};
use std::time::Duration;

pub fn measure(session: &Session, r: &MemtestRequest, hooks: &mut Hooks) -> Result<Report> {
    session.check_dma_consent(r.allow_dma)?;
    if r.chunk == Some(0) {
        return Err(Error::usage("--chunk 0: give the bytes moved at a time, e.g. --chunk 16M"));
    }
    let mut rig = session.open_dma(&r.engine, None)?;
    if rig.engine.packets() || rig.engine.stream_end().is_some() {
        return Err(Error::usage(format!(
            "{}'s {} engine moves streams to and from the design's far end: there is no card memory behind it to test",
            session.device.name(),
            rig.engine.name()
        )));
    }
    let offset = rig.card_offset + r.offset.unwrap_or(0);
    let size = r.size.unwrap_or_else(|| rig.engine.card_size().saturating_sub(offset));
    memtest::check(rig.engine.as_ref(), offset, size)?;
    // Two host buffers of a chunk: at most an eighth of what this host has available each.
    let avail = crate::host::state::meminfo(&session.host, "MemAvailable").map(|kb| kb * 1024);
    let room = avail.map_or(DEFAULT_CHUNK, |a| (a / 8).max(1 << 20));
    let chunk = match r.chunk {
        Some(c) if avail.is_some_and(|a| c.saturating_mul(2) > a / 2) => {
            return Err(Error::usage(format!(
                "--chunk {}: two host buffers of it would take more than half of this host's available memory: use --chunk {} or less",
                human_size(c),
                human_size(room)
            )))
        }
        Some(c) => c,
        None => DEFAULT_CHUNK.min(room),
    }
    .min(size);
    let plan = MemtestPlan {
        offset,
        size,
        chunk,
        timeout: Duration::from_millis(r.timeout_ms),
        card_base: r.engine.card_addr.unwrap_or(0),
    };
    let m = Measuring::start(session, &r.common)?;
    let what = format!("memtest {}", human_size(size));
    m.run(&MONOTONIC, &what, size.saturating_mul(4), hooks, |s| {
        let setup = MemtestSetup {
            dev: session.dev.as_ref(),
            device: &session.device,
            engine: rig.engine.as_mut(),
            alloc: rig.alloc.as_ref(),
        };
        memtest::run(setup, &plan, s)
    })
}
