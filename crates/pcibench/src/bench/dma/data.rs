//! A DMA run's data, for the closed loop here and the open loop of `bench::rate`: the card seeded
//! and read back in pieces the engine takes, an engine run that stops the engine on failure, the
//! CPU's view of a buffer, and a layout's transfers scattered into host memory (`verify` checks them).

use super::layout::Layout;
use crate::access::Interrupts;
use crate::dma::{Direction, DmaBuffer, Engine, Transfer, Work};
use crate::{Error, Result};
use std::time::Duration;

/// Untimed: move `len` bytes between `buf` (from offset 0) and the card at `card`, in pieces the
/// engine takes (seeding the card, reading it back).
pub(in crate::bench) fn card_copy(
    engine: &mut dyn Engine,
    dir: Direction,
    buf: &dyn DmaBuffer,
    card: u64,
    len: u64,
    timeout: Duration,
) -> Result<()> {
    let piece = engine.max_transfer().max(1);
    let work: Vec<Work> = (0..len.div_ceil(piece))
        .map(|i| Work {
            buf,
            t: Transfer { dir, buf_offset: i * piece, card_addr: card + i * piece, len: piece.min(len - i * piece) },
            queue: 0,
        })
        .collect();
    for chunk in work.chunks(engine.max_batch().max(1)) {
        engine.prepare_batch(chunk)?;
        timed_run(engine, timeout)?;
    }
    Ok(())
}

/// Run the prepared batch; on failure stop the engine and add its status to the error.
pub(in crate::bench) fn timed_run(engine: &mut dyn Engine, timeout: Duration) -> Result<()> {
    let r = engine.run(timeout);
    stopped_on_failure(engine, r)
}

/// Run the prepared transfer by its completion interrupt; on failure stop the engine and add its
/// status to the error (as `timed_run`).
pub(in crate::bench) fn interrupt_run(engine: &mut dyn Engine, irq: &dyn Interrupts, timeout: Duration) -> Result<()> {
    let r = engine.run_interrupt(irq, timeout);
    stopped_on_failure(engine, r)
}

/// A run's failure with the engine stopped and its status added; a card that went away is left as
/// it is (the runner stops that engine itself, and says so in one line).
fn stopped_on_failure(engine: &mut dyn Engine, r: Result<()>) -> Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(e @ Error::Gone(_)) => Err(e),
        Err(e) => {
            let status = engine.stop().unwrap_or_else(|s| format!("stop failed too: {s}"));
            Err(Error::Device(format!("{e} (engine stopped; status: {status})")))
        }
    }
}

/// The CPU's view of a DMA buffer's bytes, to read them (verification). The view borrows the
/// buffer, so no `bytes_mut` view of it can exist at the same time; the device writes the
/// buffer only while an engine runs a transfer on it, and the runners never hold a view then.
pub(in crate::bench) fn bytes(buf: &dyn DmaBuffer) -> &[u8] {
    // SAFETY: a `DmaBuffer` owns `len()` bytes at `as_ptr()` for as long as it lives (the
    // trait's contract); the shared borrow of `buf` outlives the slice and excludes `bytes_mut`.
    unsafe { std::slice::from_raw_parts(buf.as_ptr(), buf.len()) }
}

/// The same, to fill the buffer. It takes the buffer exclusively: two views of one buffer that
/// could overlap (or a view beside work an engine holds it in) do not compile.
pub(in crate::bench) fn bytes_mut(buf: &mut dyn DmaBuffer) -> &mut [u8] {
    // SAFETY: as in `bytes`; the exclusive borrow of `buf` makes this the only view for the
    // slice's life.
    unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), buf.len()) }
}

pub(in crate::bench) fn put(buf: &mut dyn DmaBuffer, at: usize, data: &[u8]) {
    bytes_mut(buf)[at..at + data.len()].copy_from_slice(data);
}

/// Transfer i's `size` bytes of `data` at the layout's host offset i.
pub(super) fn scatter(buf: &mut dyn DmaBuffer, l: &Layout, data: &[u8]) {
    let v = bytes_mut(buf);
    for (i, &h) in l.host.iter().enumerate() {
        let (h, n) = (h as usize, l.size as usize);
        v[h..h + n].copy_from_slice(&data[i * n..(i + 1) * n]);
    }
}
