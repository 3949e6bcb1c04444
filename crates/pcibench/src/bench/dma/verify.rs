//! A row's data set up before its runs and verified after, with the destination guarded as
//! Linux's dmatest does (`guard`): a C2H row's whole host buffer and an H2C row's card memory
//! around its transfers (the gaps between them and up to `TAIL` bytes after the last, inside the
//! window the row owns) hold a guard first; afterwards each transfer's bytes must be its data and
//! every other byte its guard. The card is read back into a guarded host buffer, so a read-back
//! that writes too far is seen as well.

use super::guard::{self, Guard, Place};
use super::layout::Layout;
use super::{bytes, bytes_mut, card_copy, put};
use crate::bench::pattern::Mismatch;
use crate::bench::result::{Row, Verify};
use crate::dma::{Direction, DmaBuffer, Engine};
use crate::Result;
use std::time::Duration;

/// Card bytes after a row's last transfer that are guarded, where the window has them.
pub const TAIL: u64 = 4096;

/// One row's guards: the host destination's and the card's (each row's seed is its own).
pub(in crate::bench) struct Guards {
    pub host: Guard,
    pub card: Guard,
}

impl Guards {
    pub fn new(seed: u64) -> Guards {
        Guards { host: Guard::new(seed ^ 0x6f73_7400), card: Guard::new(seed ^ 0xca2d) }
    }
}

/// Where each transfer of `l` lands in the host buffer: its `size` bytes at its host offset, or
/// for a stream engine with a far end, the packets in their receive buffers.
pub(super) fn host_places<'a>(engine: &mut dyn Engine, l: &Layout, expected: &'a [u8]) -> Vec<Place<'a>> {
    let n = l.size as usize;
    let pieces = engine.stream_end().map_or_else(|| vec![(0, l.size)], |e| e.c2h_pieces(l.size));
    let mut out = Vec::with_capacity(l.host.len() * pieces.len());
    for (i, &h) in l.host.iter().enumerate() {
        let mut from = i * n;
        for &(rel, len) in &pieces {
            out.push(Place { at: h + rel, expected: &expected[from..from + len as usize], transfer: i });
            from += len as usize;
        }
    }
    out.sort_by_key(|p| p.at);
    out
}

/// Where each part's window ends: the next part's start (`--dir bidir` splits the window), else
/// the engine's card memory's end.
pub(super) fn limits(parts: &[(Direction, Layout)], window_end: u64) -> Vec<u64> {
    parts
        .iter()
        .map(|(_, l)| parts.iter().map(|(_, o)| o.card_base).filter(|b| *b > l.card_base).min().unwrap_or(window_end))
        .collect()
}

/// The card span an H2C part's check covers: its transfers and the guarded tail, up to `limit`
/// (the end of the window the part owns).
pub(super) fn card_span(l: &Layout, limit: u64) -> u64 {
    let end = l.card_base + l.card_extent();
    l.card_extent() + limit.saturating_sub(end).min(TAIL)
}

/// The card image of a part: transfer i's bytes at `card_at(i)`, the guard elsewhere in `span`.
fn card_image(l: &Layout, expected: Option<&[u8]>, span: u64, g: &Guard) -> Result<Vec<u8>> {
    let mut img = crate::bench::pattern::host_bytes(span as usize)?;
    g.fill(&mut img, l.card_base);
    if let Some(e) = expected {
        let n = l.size as usize;
        for i in 0..l.host.len() {
            let at = (l.card_at(i) - l.card_base) as usize;
            img[at..at + n].copy_from_slice(&e[i * n..(i + 1) * n]);
        }
    }
    Ok(img)
}

/// Untimed, before a row's runs: card memory holds a C2H part's data (for the runs to read) and
/// the guard around an H2C part's transfers; the host destination buffer holds its guard.
/// `src` carries the images to the card, then the H2C data is scattered into it by the caller.
#[allow(clippy::too_many_arguments)]
pub(in crate::bench) fn prepare(
    engine: &mut dyn Engine,
    src: &mut dyn DmaBuffer,
    dst: &mut dyn DmaBuffer,
    parts: &[(Direction, Layout)],
    limits: &[u64],
    expected: &[impl AsRef<[u8]>],
    g: &Guards,
    streaming: bool,
    timeout: Duration,
) -> Result<()> {
    for (((dir, l), limit), e) in parts.iter().zip(limits).zip(expected) {
        if streaming {
            continue;
        }
        let (data, span) = match dir {
            Direction::C2h => (Some(e.as_ref()), l.card_extent()),
            Direction::H2c => (None, card_span(l, *limit)),
        };
        let img = card_image(l, data, span, &g.card)?;
        put(src, 0, &img);
        card_copy(engine, Direction::H2c, src, l.card_base, span, timeout)?;
    }
    g.host.fill(bytes_mut(dst), 0);
    Ok(())
}

/// Check what each part moved: the host side in place (C2H), the card side read back (H2C) with
/// its guard; a stream engine's H2C data is its far end's to judge.
#[allow(clippy::too_many_arguments)]
pub(super) fn parts(
    engine: &mut dyn Engine,
    dst: &mut dyn DmaBuffer,
    parts: &[(Direction, Layout)],
    limits: &[u64],
    expected: &[Vec<u8>],
    g: &Guards,
    timeout: Duration,
    rows: &mut [Row],
    warnings: &mut Vec<String>,
) -> Result<()> {
    let mut order: Vec<usize> = (0..parts.len()).collect();
    // C2H first: the H2C read-back reuses the destination buffer.
    order.sort_by_key(|i| parts[*i].0 == Direction::H2c);
    for i in order {
        let (dir, l) = &parts[i];
        let Some(found) = check_part(engine, dst, *dir, l, limits[i], &expected[i], g, timeout)? else {
            rows[i].verify = super::stream::verdict(engine).transpose()?;
            if let Some(Verify::Rejected { reason }) = &rows[i].verify {
                warnings.push(format!("{dir} size {}: {reason}", rows[i].size));
            }
            continue;
        };
        rows[i].verify = Some(match found {
            Ok(()) => Verify::Ok,
            Err(m) => {
                let side = if *dir == Direction::H2c { "card" } else { "host" };
                warnings.push(format!("{dir} size {} ({side} offsets): {m}", rows[i].size));
                Verify::Mismatch { mismatch: m }
            }
        });
    }
    Ok(())
}

/// One part checked: C2H in the guarded host buffer, H2C read back from the card with its guard;
/// None for a stream engine's H2C (its far end judges it: `stream::verdict`).
#[allow(clippy::too_many_arguments)]
pub(in crate::bench) fn check_part(
    engine: &mut dyn Engine,
    dst: &mut dyn DmaBuffer,
    dir: Direction,
    l: &Layout,
    limit: u64,
    expected: &[u8],
    g: &Guards,
    timeout: Duration,
) -> Result<Option<std::result::Result<(), Mismatch>>> {
    Ok(Some(match dir {
        Direction::C2h => {
            let places = host_places(engine, l, expected);
            guard::check(bytes(dst), 0, &places, &g.host)
        }
        Direction::H2c if engine.stream_end().is_some() => return Ok(None),
        Direction::H2c => card_side(engine, dst, l, limit, expected, g, timeout)?,
    }))
}

/// The layout of the simpler runners (`latency --dma`, `--rate`): `count` transfers of `size`
/// bytes one after another from host offset 0 and card offset `card`.
pub(in crate::bench) fn packed(size: u64, count: u16, card: u64) -> Layout {
    Layout {
        size,
        stride: size,
        queues: count,
        host: (0..u64::from(count)).map(|k| k * size).collect(),
        card_base: card,
    }
}

/// An H2C part's card span read back into the guarded `dst` and checked: transfers, the gaps
/// and tail around them (card offsets), and the host bytes after the read-back.
fn card_side(
    engine: &mut dyn Engine,
    dst: &mut dyn DmaBuffer,
    l: &Layout,
    limit: u64,
    expected: &[u8],
    g: &Guards,
    timeout: Duration,
) -> Result<std::result::Result<(), Mismatch>> {
    let span = card_span(l, limit);
    g.host.fill(bytes_mut(dst), 0);
    card_copy(engine, Direction::C2h, dst, l.card_base, span, timeout)?;
    let n = l.size as usize;
    let places: Vec<Place> = (0..l.host.len())
        .map(|i| Place { at: l.card_at(i), expected: &expected[i * n..(i + 1) * n], transfer: i })
        .collect();
    let got = bytes(dst);
    if let Err(m) = guard::check(&got[..span as usize], l.card_base, &places, &g.card) {
        return Ok(Err(m));
    }
    Ok(guard::check(&got[span as usize..], span, &[], &g.host).map_err(|m| Mismatch {
        outside: Some(format!(
            "byte {} past the end of the {span}-byte read-back of card memory, in the host buffer (host offset {:#x})",
            m.offset - span + 1,
            m.offset
        )),
        ..m
    }))
}
