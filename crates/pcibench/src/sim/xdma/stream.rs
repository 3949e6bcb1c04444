//! AXI4-Stream channels on the sim XDMA (`sim-xdma-st`), with the vendor's AXI4-Stream example
//! design as the far end: what H2C channel N sends comes back on C2H channel N through a small
//! FIFO (the example design's loopback, PG195 "AXI4-Stream Example Design").
//!
//! The channels fetch and check descriptors, count completions, write the poll-mode writeback and
//! stop exactly as the memory-mapped ones do (`engine.rs`: `fetch`, `complete`, `finish` are
//! shared); only the data path differs:
//! - H2C: each descriptor's bytes go into the loopback FIFO; EOP (descriptor control bit 4) on a
//!   descriptor ends the packet after its last byte (PG195 "Descriptors": EOP is the end of packet
//!   for stream H2C). The destination address is unused.
//! - C2H: each descriptor is one host buffer (destination, length); its source address is where the
//!   engine writes the descriptor's writeback record (libxdma.c transfer_build points the C2H stream
//!   descriptor's src_addr at its `struct xdma_result`). A descriptor completes when its buffer is
//!   full or the packet ends, whichever comes first; the record says how many bytes it holds, with
//!   magic 0x52B4 in status bits 31:16 and EOP in bit 0 (libxdma.h `struct xdma_result`, `C2H_WB`,
//!   `RX_STATUS_EOP`; PG195 "C2H Stream Writeback"). The next packet starts in the next buffer.
//! - Back-pressure: with no C2H descriptor posted the FIFO fills and H2C stalls (busy, its
//!   completed count still), as the example design's FIFO stops accepting beats (AXI4-Stream
//!   TREADY low). Nothing is dropped.
//!
//! Both sides move in `pump`, under the loopback's lock, whichever side's run calls it: stepped,
//! inside the driver's run-bit write; threaded, on either channel's worker, which then waits for
//! the other side to make room or data.

use super::engine::{complete, fetch, finish, Desc, Stop};
use super::state::*;
use crate::direction::Direction;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// C2H stream writeback magic, status bits 31:16 (libxdma.h `C2H_WB`).
pub(crate) const WB_MAGIC: u32 = 0x52b4;
/// C2H stream writeback status bit 0: the buffer holds the packet's last byte (`RX_STATUS_EOP`).
pub(crate) const WB_EOP: u32 = 1 << 0;
/// Descriptor control bits 0 and 4 (libxdma.h `XDMA_DESC_STOPPED`, `XDMA_DESC_EOP`).
const DESC_STOP: u32 = 1 << 0;
const DESC_EOP: u32 = 1 << 4;
/// Bytes the loopback holds between H2C and C2H. The example design's FIFO is a few KiB of
/// block RAM; 16 KiB lets a packet of that size go out before its C2H buffers are posted and
/// makes a larger one wait for them, so both cases occur in ordinary runs.
pub const FIFO_BYTES: usize = 16 << 10;
/// How long a threaded worker waits for the other side before looking at run and shutdown again.
const WAIT: Duration = Duration::from_micros(500);

/// Where one channel is in its chain.
#[derive(Default)]
struct Cursor {
    /// The run it serves (the channel's rising edge of run); 0: none.
    gen: u64,
    active: bool,
    addr: u64,
    extra: u32,
    desc: Option<Desc>,
    /// Bytes of `desc` moved so far.
    done: u64,
}

/// The example design between H2C channel N and C2H channel N.
#[derive(Default)]
pub(crate) struct Fifo {
    data: VecDeque<u8>,
    /// Stream positions (bytes since the card was built) where a packet ends.
    ends: VecDeque<u64>,
    /// Stream position of `data`'s first byte.
    head: u64,
}

impl Fifo {
    /// Bytes C2H may take before the next packet boundary (or all there is).
    fn until_end(&self) -> usize {
        self.ends.front().map_or(self.data.len(), |e| (e - self.head) as usize)
    }
}

#[derive(Default)]
pub(crate) struct LoopState {
    fifo: Fifo,
    h2c: Cursor,
    c2h: Cursor,
}

/// One loopback pair's state and the condition its workers wait on.
#[derive(Default)]
pub(crate) struct Loopback {
    state: Mutex<LoopState>,
    moved: Condvar,
}

impl Loopback {
    fn lock(&self) -> MutexGuard<'_, LoopState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes waiting in the FIFO (tests: back-pressure).
    pub fn queued(&self) -> usize {
        self.lock().fifo.data.len()
    }
}

/// A stream channel's worker thread: serve each rising edge of run.
pub(crate) fn worker(shared: Arc<Shared>, loops: Arc<Vec<Loopback>>, dir: Direction, index: usize) {
    let Some(ch) = shared.channel(dir, index) else { return };
    let mut served = 0u64;
    while let Some((gen, first)) = super::engine::wait_for_start(&shared, ch, &mut served) {
        serve(&shared, &loops, ch, gen, first);
    }
}

/// Stepped mode: start the channel's pending run now (moving what can move); whether there was one.
pub(crate) fn run_now(shared: &Shared, loops: &[Loopback], ch: &Channel) -> bool {
    let Some((gen, first)) = super::engine::pending(ch) else { return false };
    start(shared, loops, ch, gen, first);
    true
}

/// A rising edge of run on stream channel `ch` (`gen`, chain at `start`): point its cursor at
/// the chain and move what can move now.
fn start(shared: &Shared, loops: &[Loopback], ch: &Channel, gen: u64, start: Start) {
    let Some(lb) = loops.get(ch.index as usize) else {
        // No partner channel: nothing consumes (or produces) this channel's stream.
        finish(
            shared,
            ch,
            gen,
            ST_IDLE_STOPPED,
            Some(format!("{} channel {} has no loopback partner", ch.dir, ch.index)),
        );
        return;
    };
    {
        let mut st = lb.lock();
        let cur = cursor(&mut st, ch.dir);
        *cur = Cursor { gen, active: true, addr: start.addr, extra: start.adj, desc: None, done: 0 };
        if let Err((bits, why)) = super::engine::check_block(start.addr, start.adj) {
            cur.active = false;
            drop(st);
            finish(shared, ch, gen, bits, Some(why));
            return;
        }
    }
    pump(shared, loops, ch.index as usize);
}

/// Threaded: serve run `gen` of `ch` until its chain is done, stopped or superseded.
fn serve(shared: &Shared, loops: &[Loopback], ch: &Channel, gen: u64, first: Start) {
    start(shared, loops, ch, gen, first);
    let Some(lb) = loops.get(ch.index as usize) else { return };
    loop {
        let st = lb.lock();
        let cur = match ch.dir {
            Direction::H2c => &st.h2c,
            Direction::C2h => &st.c2h,
        };
        if !cur.active || cur.gen != gen || shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        let (st, _) = lb.moved.wait_timeout(st, WAIT).unwrap_or_else(|e| e.into_inner());
        drop(st);
        pump(shared, loops, ch.index as usize);
    }
}

fn cursor(st: &mut LoopState, dir: Direction) -> &mut Cursor {
    match dir {
        Direction::H2c => &mut st.h2c,
        Direction::C2h => &mut st.c2h,
    }
}

/// Move everything that can move on loopback `i` now: H2C into the FIFO, the FIFO into C2H's
/// buffers, until neither side can go on. Channels whose run was cleared stop (idle_stopped).
pub(crate) fn pump(shared: &Shared, loops: &[Loopback], i: usize) {
    let (Some(lb), Some(h2c), Some(c2h)) = (loops.get(i), shared.h2c.get(i), shared.c2h.get(i)) else {
        return;
    };
    let mut st = lb.lock();
    let mut any = false;
    loop {
        super::super::shake::point();
        let a = step(shared, h2c, &mut st);
        let b = step(shared, c2h, &mut st);
        if !(a || b) {
            break;
        }
        any = true;
    }
    drop(st);
    if any {
        lb.moved.notify_all();
    }
}

/// One step of one side; whether anything changed.
fn step(shared: &Shared, ch: &Channel, st: &mut LoopState) -> bool {
    let LoopState { fifo, h2c, c2h } = st;
    let cur = if ch.dir == Direction::H2c { h2c } else { c2h };
    if !cur.active {
        return false;
    }
    let gen = cur.gen;
    if ch.gen_hint.load(Ordering::Acquire) != gen {
        cur.active = false; // a newer run owns the channel; its `start` resets the cursor
        return true;
    }
    // Clearing run stops the engine after the descriptor in flight (PG195 control bit 0); a
    // stream descriptor waiting for data or room is not in flight: it stops at once.
    if ch.control.load(Ordering::Acquire) & CTRL_RUN == 0 || shared.shutdown.load(Ordering::Acquire) {
        cur.active = false;
        finish(shared, ch, gen, ST_IDLE_STOPPED, None);
        return true;
    }
    // Stepped, a stall is taken before the run starts, as on memory-mapped channels.
    if ch.stalled.load(Ordering::Acquire) && !shared.cfg.stepped {
        return false;
    }
    match advance(shared, ch, cur, fifo) {
        Ok(moved) => moved,
        Err((bits, why)) => {
            cur.active = false;
            finish(shared, ch, gen, bits, Some(why));
            true
        }
    }
}

fn advance(shared: &Shared, ch: &Channel, cur: &mut Cursor, fifo: &mut Fifo) -> Result<bool, Stop> {
    let mut moved = false;
    if cur.desc.is_none() {
        cur.desc = Some(fetch(shared, cur.addr)?);
        cur.done = 0;
        moved = true;
    }
    let Some(d) = cur.desc.as_ref() else { return Ok(moved) };
    if !shared.bus_master.load(Ordering::Acquire) {
        let bits = if ch.dir == Direction::H2c { ST_READ_ERROR0 } else { ST_WRITE_ERROR0 };
        return Err((bits, "host access with Bus Master Enable off (command register bit 2)".into()));
    }
    let left = d.len as u64 - cur.done;
    match ch.dir {
        Direction::H2c => {
            let n = left.min((FIFO_BYTES - fifo.data.len()) as u64);
            if n > 0 {
                shared
                    .host
                    // SAFETY: the host map holds `p` valid for `n` bytes during the closure.
                    .with_range(d.src + cur.done, n, |p| {
                        fifo.data.extend(unsafe { std::slice::from_raw_parts(p, n as usize) })
                    })
                    .map_err(|f| (ST_READ_ERROR0, format!("host read failed: {f}")))?;
                cur.done += n;
                ch.perf.moved(n);
                moved = true;
            }
            if cur.done < d.len as u64 {
                return Ok(moved); // back-pressure: the FIFO is full until C2H takes from it
            }
            if d.control & DESC_EOP != 0 {
                fifo.ends.push_back(fifo.head + fifo.data.len() as u64);
            } else if d.control & DESC_STOP != 0 {
                shared.violation(format!(
                    "H2C channel {} stopped on a descriptor without EOP: the packet it started never ends, and the \
                     loopback holds its bytes until a later run ends it (libxdma.c transfer_init sets EOP with STOP)",
                    ch.index
                ));
            }
        }
        Direction::C2h => {
            let n = left.min(fifo.until_end() as u64);
            if n > 0 {
                let (a, b) = fifo.data.as_slices();
                let (na, nb) = ((n as usize).min(a.len()), (n as usize).saturating_sub(a.len()));
                shared
                    .host
                    .with_range(d.dst + cur.done, n, |p| {
                        // SAFETY: `p` covers `n` = na + nb bytes of a registered range.
                        unsafe {
                            std::ptr::copy_nonoverlapping(a.as_ptr(), p, na);
                            std::ptr::copy_nonoverlapping(b.as_ptr(), p.add(na), nb);
                        }
                    })
                    .map_err(|f| (ST_WRITE_ERROR0, format!("host write failed: {f}")))?;
                fifo.data.drain(..n as usize);
                fifo.head += n;
                cur.done += n;
                ch.perf.moved(n);
                moved = true;
            }
            let eop = fifo.ends.front() == Some(&fifo.head);
            if !eop && cur.done < d.len as u64 {
                return Ok(moved); // waiting for data
            }
            if eop {
                fifo.ends.pop_front();
            }
            write_record(shared, d.src, cur.done as u32, eop)?;
        }
    }
    let d = cur.desc.take().expect("a descriptor in flight");
    let gen = cur.gen;
    if !complete(shared, ch, gen, &d)? {
        cur.active = false;
        return Ok(true);
    }
    if cur.extra > 0 {
        cur.addr += 32;
        cur.extra -= 1;
    } else {
        (cur.addr, cur.extra) = (d.next, d.nxt_adj);
        super::engine::check_block(cur.addr, cur.extra)?;
    }
    Ok(true)
}

/// The C2H stream writeback record at `at`: status (magic, EOP) and length, the first 8 of its
/// 32 bytes (libxdma.h `struct xdma_result`), written before the descriptor's completion.
fn write_record(shared: &Shared, at: u64, len: u32, eop: bool) -> Result<(), Stop> {
    if at % 32 != 0 {
        shared.violation(format!(
            "a C2H stream descriptor's writeback record address {at:#x} is not 32-byte aligned (libxdma.c places \
             records 32 bytes apart in one coherent buffer)"
        ));
    }
    let status = WB_MAGIC << 16 | if eop { WB_EOP } else { 0 };
    let mut rec = [0u8; 8];
    rec[..4].copy_from_slice(&status.to_le_bytes());
    rec[4..].copy_from_slice(&len.to_le_bytes());
    shared.host.write(at, &rec).map_err(|f| (ST_WRITE_ERROR0, format!("C2H writeback record write failed: {f}")))
}
