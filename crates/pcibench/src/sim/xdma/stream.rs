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
//! Both sides move in `pump`, under the loopback's lock, whenever the host looks (a register
//! access, a poll, the run-bit write itself), each at the XDMA datapath's rate (`DATAPATH`) in
//! pieces of up to 4 KiB: a piece is done at the side's pace, and no sooner than its last byte
//! came into the FIFO (C2H) or room was made for it (H2C, after back-pressure), so the two sides
//! overlap as the IP's engines do. Stepped, every piece is due at once.

use super::chain::Desc;
use super::engine::{complete, fetch, finish, Stop};
use super::perf::DATA_WIDTH_BYTES;
use super::state::*;
use crate::direction::Direction;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

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
/// The most a side moves in one step: a piece of the FIFO, so the sides overlap.
const PIECE: u64 = 4 << 10;

/// Where one channel is in its chain.
#[derive(Default)]
struct Cursor {
    active: bool,
    addr: u64,
    extra: u32,
    desc: Option<Desc>,
    /// Bytes of `desc` moved so far.
    done: u64,
    /// Model time this side's datapath is free.
    free_at: u64,
    /// It waited for room (H2C) on its last step.
    blocked: bool,
}

/// The example design between H2C channel N and C2H channel N.
pub(crate) struct Fifo {
    /// `FIFO_BYTES` of ring: `len` bytes from `start` are in it (copied in and out whole, so the
    /// model's copies cost what a memcpy does: the host's thread makes them).
    ring: Vec<u8>,
    start: usize,
    len: usize,
    /// Stream positions (bytes since the card was built) where a packet ends.
    ends: VecDeque<u64>,
    /// Stream position of `data`'s first byte.
    head: u64,
    /// Each piece H2C put in: the stream position after it and the model time it was in.
    arrivals: VecDeque<(u64, u64)>,
    /// Model time C2H last took from it (made room).
    room_at: u64,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            ring: vec![0; FIFO_BYTES],
            start: 0,
            len: 0,
            ends: VecDeque::new(),
            head: 0,
            arrivals: VecDeque::new(),
            room_at: 0,
        }
    }
}

impl Fifo {
    /// Bytes C2H may take before the next packet boundary (or all there is).
    fn until_end(&self) -> usize {
        self.ends.front().map_or(self.len, |e| (e - self.head) as usize)
    }

    /// Copy `n` bytes (at most the room left) from `src` in at the tail.
    ///
    /// # Safety
    /// `src` is valid for reads of `n` bytes.
    unsafe fn push(&mut self, src: *const u8, n: usize) {
        let tail = (self.start + self.len) % FIFO_BYTES;
        let first = n.min(FIFO_BYTES - tail);
        // SAFETY: the caller's `src` covers `n`; the ring has room for `n` from `tail`, wrapping.
        unsafe {
            std::ptr::copy_nonoverlapping(src, self.ring.as_mut_ptr().add(tail), first);
            std::ptr::copy_nonoverlapping(src.add(first), self.ring.as_mut_ptr(), n - first);
        }
        self.len += n;
    }

    /// Copy the first `n` bytes (at most those held) out to `dst`, and drop them.
    ///
    /// # Safety
    /// `dst` is valid for writes of `n` bytes.
    unsafe fn pop(&mut self, dst: *mut u8, n: usize) {
        let first = n.min(FIFO_BYTES - self.start);
        // SAFETY: the caller's `dst` covers `n`; the ring holds `n` from `start`, wrapping.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ring.as_ptr().add(self.start), dst, first);
            std::ptr::copy_nonoverlapping(self.ring.as_ptr(), dst.add(first), n - first);
        }
        self.start = (self.start + n) % FIFO_BYTES;
        self.len -= n;
    }

    /// Model time the byte before stream position `end` came in.
    fn arrived(&self, end: u64) -> u64 {
        self.arrivals.iter().find(|(pos, _)| *pos >= end).map_or(0, |(_, t)| *t)
    }
}

#[derive(Default)]
pub(crate) struct LoopState {
    fifo: Fifo,
    h2c: Cursor,
    c2h: Cursor,
}

/// One loopback pair's state.
#[derive(Default)]
pub(crate) struct Loopback {
    state: Mutex<LoopState>,
    /// What a hands-off thread saw (`datapath::set_hands_off`) for the next `pump` to act on: a
    /// lock of its own, never held across a DMA message.
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Rising edges of run, H2C then C2H.
    starts: [Option<(Start, u64)>; 2],
    /// Any other control write (run cleared: a waiting side stops).
    poked: bool,
}

impl Loopback {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Loopback {
    fn lock(&self) -> MutexGuard<'_, LoopState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes waiting in the FIFO (tests: back-pressure).
    pub fn queued(&self) -> usize {
        self.lock().fifo.len
    }
}

/// A rising edge of run on stream channel `ch` at model time `now` (chain at `start`): point its
/// cursor at the chain and move what can move now.
pub(crate) fn start(shared: &Shared, loops: &[Loopback], ch: &Channel, start: Start, now: u64) {
    let Some(lb) = loops.get(ch.index as usize) else {
        // No partner channel: nothing consumes (or produces) this channel's stream.
        let why = format!("{} channel {} has no loopback partner", ch.dir, ch.index);
        finish(shared, ch, ST_IDLE_STOPPED, Some(why), now);
        return;
    };
    if crate::sim::datapath::hands_off() {
        // The loopback's lock may be held across a DMA message by the thread moving data: the
        // edge is left for it (`pump` starts it), and made due now.
        lb.seen().starts[ch.dir as usize] = Some((start, now));
        ch.due.set(0);
        return;
    }
    begin(shared, lb, ch, start, now);
    pump(shared, loops, ch.index as usize, shared.now(), false);
}

/// Point channel `ch`'s cursor at the chain at `start` (a rising edge of run at model time `now`).
fn begin(shared: &Shared, lb: &Loopback, ch: &Channel, start: Start, now: u64) {
    {
        let mut st = lb.lock();
        let cur = cursor(&mut st, ch.dir);
        *cur = Cursor { active: true, addr: start.addr, extra: start.adj, free_at: now, ..Cursor::default() };
        if let Err((bits, why)) = super::engine::check_block(start.addr, start.adj) {
            cur.active = false;
            drop(st);
            finish(shared, ch, bits, Some(why), now);
        }
    }
}

fn cursor(st: &mut LoopState, dir: Direction) -> &mut Cursor {
    match dir {
        Direction::H2c => &mut st.h2c,
        Direction::C2h => &mut st.c2h,
    }
}

/// Move everything that is due by model time `now` on loopback `i`: H2C into the FIFO, the FIFO
/// into C2H's buffers, until neither side can go on; each side's next due time is left in its
/// channel. Channels whose run was cleared stop (idle_stopped). `force`: stalled ones move too.
/// Whether anything moved.
pub(crate) fn pump(shared: &Shared, loops: &[Loopback], i: usize, now: u64, force: bool) -> bool {
    let (Some(lb), Some(h2c), Some(c2h)) = (loops.get(i), shared.h2c.get(i), shared.c2h.get(i)) else {
        return false;
    };
    if crate::sim::datapath::hands_off() {
        // Moved by the server's clock thread, now (datapath::set_hands_off).
        lb.seen().poked = true;
        h2c.due.set(0);
        c2h.due.set(0);
        return false;
    }
    let started = std::mem::take(&mut *lb.seen()).starts;
    for (ch, edge) in [h2c, c2h].into_iter().zip(started) {
        if let Some((start, at)) = edge {
            begin(shared, lb, ch, start, at);
        }
    }
    let mut st = lb.lock();
    let mut any = false;
    let (due_h, due_c) = loop {
        let (a, dh) = step(shared, h2c, &mut st, now, force);
        let (b, dc) = step(shared, c2h, &mut st, now, force);
        if !(a || b) {
            break (dh, dc);
        }
        any = true;
    };
    drop(st);
    for (ch, due) in [(h2c, due_h), (c2h, due_c)] {
        match due {
            Some(t) => ch.due.set(t),
            None => ch.due.clear(),
        }
    }
    // What a hands-off thread saw meanwhile made the channels due, which the lines above may have
    // undone: they stay due.
    let seen = lb.seen();
    if seen.poked || seen.starts.iter().any(Option::is_some) {
        h2c.due.set(0);
        c2h.due.set(0);
    }
    drop(seen);
    any
}

/// One step of one side: whether anything changed, and when it next can (None: it waits for the
/// other side, or for nothing).
fn step(shared: &Shared, ch: &Channel, st: &mut LoopState, now: u64, force: bool) -> (bool, Option<u64>) {
    let LoopState { fifo, h2c, c2h } = st;
    let cur = if ch.dir == Direction::H2c { h2c } else { c2h };
    if !cur.active {
        return (false, None);
    }
    // Clearing run stops the engine after the descriptor in flight (PG195 control bit 0); a
    // stream descriptor waiting for data or room is not in flight: it stops at once.
    if ch.control.load(Ordering::Acquire) & CTRL_RUN == 0 {
        cur.active = false;
        finish(shared, ch, ST_IDLE_STOPPED, None, cur.free_at);
        return (true, None);
    }
    if ch.stalled.load(Ordering::Acquire) && !force {
        return (false, None);
    }
    match advance(shared, ch, cur, fifo, now) {
        Ok(r) => r,
        Err((bits, why)) => {
            cur.active = false;
            finish(shared, ch, bits, Some(why), cur.free_at);
            (true, None)
        }
    }
}

/// Move one side on: a descriptor fetched, a piece moved when it is due, a descriptor completed.
fn advance(
    shared: &Shared,
    ch: &Channel,
    cur: &mut Cursor,
    fifo: &mut Fifo,
    now: u64,
) -> Result<(bool, Option<u64>), Stop> {
    let mut moved = false;
    if cur.desc.is_none() {
        let d = fetch(shared, cur.addr)?;
        if ch.dir == Direction::C2h {
            super::rules::c2h_stream_length(&d, cur.addr)?;
        }
        // The descriptor's fetch on the datapath, and any hold the shaker draws.
        cur.free_at += DATAPATH.desc_ns(0) + ch.shaker.point();
        cur.desc = Some(d);
        cur.done = 0;
        moved = true;
    }
    let Some(d) = cur.desc.as_ref() else { return Ok((moved, None)) };
    if !shared.bus_master.load(Ordering::Acquire) {
        let bits = if ch.dir == Direction::H2c { ST_READ_ERROR0 } else { ST_WRITE_ERROR0 };
        return Err((bits, "host access with Bus Master Enable off (command register bit 2)".into()));
    }
    let left = d.len as u64 - cur.done;
    match ch.dir {
        Direction::H2c => {
            let n = left.min((FIFO_BYTES - fifo.len) as u64).min(PIECE);
            if n == 0 && left > 0 {
                cur.blocked = true;
                return Ok((moved, None)); // back-pressure: the FIFO is full until C2H takes from it
            }
            if n > 0 {
                if std::mem::take(&mut cur.blocked) {
                    cur.free_at = cur.free_at.max(fifo.room_at);
                }
                let at = cur.free_at + DATAPATH.bytes_ns(n);
                if at > now {
                    return Ok((moved, Some(at)));
                }
                shared
                    .host
                    // SAFETY: the host map holds `p` valid for `n` bytes during the closure, and the
                    // FIFO has room for them (`n` is at most its room).
                    .with_range(d.src + cur.done, n, |p| unsafe { fifo.push(p, n as usize) })
                    .map_err(|f| (ST_READ_ERROR0, format!("host read failed: {f}")))?;
                cur.done += n;
                cur.free_at = at;
                fifo.arrivals.push_back((fifo.head + fifo.len as u64, at));
                ch.perf.moved(n);
                moved = true;
            }
            if cur.done < d.len as u64 {
                return Ok((moved, None)); // more of this descriptor: the caller steps again
            }
            let pad = super::rules::h2c_stream_beats(shared, ch, d, d.control & DESC_EOP != 0, DATA_WIDTH_BYTES);
            // The padding as the far end sees it (what room the FIFO has: the beat is flagged
            // either way).
            let pad = (pad as usize).min(FIFO_BYTES - fifo.len);
            if pad > 0 {
                let zeros = [0u8; 64];
                // SAFETY: `zeros` holds at least `pad` (< 64, a beat of at most 512 bits) bytes.
                unsafe { fifo.push(zeros.as_ptr(), pad.min(zeros.len())) };
                fifo.arrivals.push_back((fifo.head + fifo.len as u64, cur.free_at));
            }
            if d.control & DESC_EOP != 0 {
                fifo.ends.push_back(fifo.head + fifo.len as u64);
            } else if d.control & DESC_STOP != 0 {
                shared.violation(format!(
                    "H2C channel {} stopped on a descriptor without EOP: the packet it started never ends, and the \
                     loopback holds its bytes until a later run ends it (libxdma.c transfer_init sets EOP with STOP)",
                    ch.index
                ));
            }
        }
        Direction::C2h => {
            let n = left.min(fifo.until_end() as u64).min(PIECE);
            if n > 0 {
                let at = (cur.free_at + DATAPATH.bytes_ns(n)).max(fifo.arrived(fifo.head + n));
                if at > now {
                    return Ok((moved, Some(at)));
                }
                shared
                    .host
                    // SAFETY: `p` covers `n` bytes of a registered range; the FIFO holds `n` (at
                    // most what is there before the packet's end).
                    .with_range(d.dst + cur.done, n, |p| unsafe { fifo.pop(p, n as usize) })
                    .map_err(|f| (ST_WRITE_ERROR0, format!("host write failed: {f}")))?;
                fifo.head += n;
                while fifo.arrivals.front().is_some_and(|(pos, _)| *pos <= fifo.head) {
                    fifo.arrivals.pop_front();
                }
                cur.done += n;
                cur.free_at = at;
                fifo.room_at = at;
                ch.perf.moved(n);
                moved = true;
            }
            let eop = fifo.ends.front() == Some(&fifo.head);
            if !eop && cur.done < d.len as u64 {
                return Ok((moved, None)); // waiting for data
            }
            if eop {
                fifo.ends.pop_front();
            }
            shared.overrun.host(&shared.host, d.dst + cur.done);
            write_record(shared, d.src, cur.done as u32, eop)?;
        }
    }
    let Some(d) = cur.desc.take() else { return Ok((moved, None)) };
    cur.free_at += ch.shaker.before_report();
    if !complete(shared, ch, &d, cur.free_at)? {
        cur.active = false;
        return Ok((true, None));
    }
    if cur.extra > 0 {
        cur.addr += 32;
        cur.extra -= 1;
    } else {
        (cur.addr, cur.extra) = (d.next, d.nxt_adj);
        super::engine::check_block(cur.addr, cur.extra)?;
    }
    Ok((true, None))
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
