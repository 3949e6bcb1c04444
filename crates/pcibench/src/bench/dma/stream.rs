//! The runner's side of stream engines (`Engine::stream_end`): no card memory holds the data,
//! the far end does. C2H transfers are laid a whole number of receive buffers apart (the engine
//! posts buffers, not byte ranges) and compared in place with what the far end generates; H2C
//! transfers carry what the far end's checker expects, and its verdict is the row's.

use super::layout::Layout;
use super::Config;
use crate::bench::result::Verify;
use crate::dma::{Direction, Engine};
use crate::Result;

/// Lay every C2H part of `configs` out at the engine's receive-buffer stride; the host bytes
/// the longest layout then needs. No change (None) for engines without a far end. C2H packets
/// land in the buffers in the order the engine posted them, so random host offsets are refused
/// for them.
pub(super) fn place(engine: &mut dyn Engine, random: bool, configs: &mut [Config]) -> Result<Option<u64>> {
    let Some(end) = engine.stream_end() else { return Ok(None) };
    let c2h = configs.iter().flat_map(|c| c.parts.iter().flatten()).any(|(d, _)| *d == Direction::C2h);
    if random && c2h {
        return Err(crate::Error::usage(
            "--pattern random applies to stream H2C only: C2H packets land in the receive buffers in the order they \
             were posted; use --dir h2c, or --pattern seq",
        ));
    }
    let mut extent = 0;
    for c in configs.iter_mut() {
        for (dir, l) in c.parts.iter_mut().flatten() {
            if *dir == Direction::C2h {
                let stride = end.c2h_stride(l.size);
                l.host = (0..l.count()).map(|k| k * stride).collect();
                extent = extent.max(l.count() * stride);
            }
        }
    }
    Ok(Some(extent))
}

/// The bytes each part carries: the far end's for a stream engine, else None.
pub(super) fn expected(engine: &mut dyn Engine, parts: &[(Direction, Layout)]) -> Option<Vec<Vec<u8>>> {
    let end = engine.stream_end()?;
    Some(parts.iter().map(|(_, l)| end.transfer_bytes(l.size).repeat(l.count() as usize)).collect())
}

/// A stream row's packet size and packets per second at the median.
pub(super) fn packets(engine: &mut dyn Engine, row: &mut crate::bench::result::Row) {
    let Some(end) = engine.stream_end() else { return };
    let n = end.packets(row.size).max(1);
    row.packet_bytes = Some(row.size / n);
    row.packets_per_s = row.stats.as_ref().map(|s| s.median_mbps * 1e6 / row.size.max(1) as f64 * n as f64);
}

/// Clear the far end's checker before a row's H2C runs.
pub(super) fn clear(engine: &mut dyn Engine, parts: &[(Direction, Layout)]) -> Result<()> {
    match engine.stream_end() {
        Some(end) if parts.iter().any(|(d, _)| *d == Direction::H2c) => end.clear_checker(),
        _ => Ok(()),
    }
}

/// The far end checker's verdict on a row's H2C data; None without a far end.
pub(in crate::bench) fn verdict(engine: &mut dyn Engine) -> Option<Result<Verify>> {
    let end = engine.stream_end()?;
    Some(end.checker().map(|v| match v {
        Ok(()) => Verify::Ok,
        Err(reason) => Verify::Rejected { reason },
    }))
}
