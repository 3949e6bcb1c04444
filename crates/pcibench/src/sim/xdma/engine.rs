//! The sim XDMA engine proper: on each rising edge of run a channel walks its chain of
//! descriptors in host memory, checks each as PG195 describes, moves its bytes between the host
//! buffer and card memory with one memcpy, and reports through the status register, the completed
//! count and the poll-mode writeback word. It progresses with time (`datapath.rs`): a descriptor
//! the channel starts at t completes at t + its fetch and beats on `DATAPATH`, and its data moves
//! when the host next looks after that (`serve`, in the looking thread).
//!
//! Descriptor (PG195 "Descriptor Format"): +0x00 [31:16] magic 0xAD4B, [13:8] Nxt_adj,
//! [7:0] control (0 STOP, 1 COMPLETED, 4 EOP); +0x04 length; +0x08 source; +0x10 destination;
//! +0x18 next descriptor. A block of 1 + adj adjacent descriptors is fetched together: within it
//! the next descriptor is the following 32 bytes; the block's last descriptor names the next
//! block and its adjacent count. A block crossing a 4 KiB boundary is reported as
//! align_mismatch (hardware behaviour there is undefined; the model makes the mistake visible).

use super::super::host_map::HostFault;
use super::chain::{Cursor, Desc};
use super::state::*;
use crate::direction::Direction;
use crate::Result;
use std::sync::atomic::Ordering;

const MAGIC: u32 = 0xad4b;
const DESC_STOP: u32 = 1 << 0;
const DESC_COMPLETED: u32 = 1 << 1;
const MAX_LEN: u32 = 0x0fff_ffff;

/// Why the engine stopped: the status bits to log (if enabled) and the model's own words.
pub(super) type Stop = (u32, String);

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn le64(b: &[u8], o: usize) -> u64 {
    le32(b, o) as u64 | (le32(b, o + 4) as u64) << 32
}

/// A rising edge of run at model time `now` (the run state locked): the chain the SGDMA
/// registers latched begins.
pub(crate) fn start(shared: &Shared, ch: &Channel, st: &mut RunState, now: u64) {
    st.cursor = None;
    if let Err((bits, why)) = check_block(st.start.addr, st.start.adj) {
        return finish(shared, ch, bits, Some(why), now);
    }
    st.cursor = Some(Cursor { addr: st.start.addr, extra: st.start.adj, free_at: now, desc: None });
}

/// Bring the channel's chain to model time `now` (the run state locked): every descriptor due by
/// then completes, its data moved now, in this thread; the next one due is left in `ch.due`.
/// `force` serves a stalled channel (a stepped test's `step`). Whether a descriptor completed.
pub(crate) fn serve(shared: &Shared, ch: &Channel, st: &mut RunState, now: u64, force: bool) -> bool {
    if crate::sim::datapath::hands_off() {
        // A thread that answers a client's accesses moves nothing: the server's clock thread
        // serves the chain now (datapath::set_hands_off).
        if st.cursor.is_some() {
            ch.due.set(0);
        }
        return false;
    }
    let Some(mut cur) = st.cursor.take() else {
        ch.due.clear();
        return false;
    };
    let mut moved = false;
    let stop: Option<(Stop, u64)> = loop {
        if cur.desc.is_none() {
            // Clearing run stops the engine after the descriptor in flight (PG195 control bit 0):
            // between descriptors, it stops here.
            if ch.control.load(Ordering::Acquire) & CTRL_RUN == 0 {
                finish(shared, ch, ST_IDLE_STOPPED, None, cur.free_at);
                ch.due.clear();
                return moved;
            }
            if ch.stalled.load(Ordering::Acquire) && !force {
                // A hung engine: the run stays, nothing moves, nothing is due.
                st.cursor = Some(cur);
                ch.due.clear();
                return moved;
            }
            match fetch(shared, cur.addr) {
                Ok(d) => {
                    // The direction's datapath is one for all its channels (PG195: one AXI
                    // interface, one PCIe direction): the descriptor starts once it is free.
                    let begin = shared.datapath_free(ch.dir).reserve(cur.free_at, DATAPATH.desc_ns(d.len as u64));
                    let mut due = begin + DATAPATH.desc_ns(d.len as u64) + ch.shaker.point();
                    if d.control & (DESC_COMPLETED | DESC_STOP) != 0 {
                        due += ch.shaker.before_report();
                    }
                    cur.desc = Some((d, due));
                }
                Err(e) => break Some((e, cur.free_at)),
            }
        }
        let due = cur.desc.as_ref().map_or(0, |(_, t)| *t);
        if due > now {
            ch.due.set(due);
            st.cursor = Some(cur);
            return moved;
        }
        let Some((d, due)) = cur.desc.take() else { continue };
        cur.free_at = due;
        if let Err(e) = move_data(shared, ch.dir, &d) {
            break Some((e, due));
        }
        ch.perf.moved(d.len as u64);
        moved = true;
        match complete(shared, ch, &d, due) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some((e, due)),
        }
        if cur.extra > 0 {
            cur.addr += 32;
            cur.extra -= 1;
        } else {
            (cur.addr, cur.extra) = (d.next, d.nxt_adj);
            if let Err(e) = check_block(cur.addr, cur.extra) {
                break Some((e, due));
            }
        }
    };
    if let Some(((bits, why), at)) = stop {
        finish(shared, ch, bits, Some(why), at);
    }
    ch.due.clear();
    moved
}

pub(super) fn check_block(addr: u64, extra: u32) -> Result<(), Stop> {
    if addr % 32 != 0 {
        return Err((ST_ALIGN_MISMATCH, format!("descriptor address {addr:#x} is not 32-byte aligned")));
    }
    if (addr & 0xfff) + (extra as u64 + 1) * 32 > 0x1000 {
        return Err((
            ST_ALIGN_MISMATCH,
            format!("a block of {} adjacent descriptors at {addr:#x} crosses a 4 KiB boundary", extra + 1),
        ));
    }
    Ok(())
}

pub(super) fn fetch(shared: &Shared, addr: u64) -> Result<Desc, Stop> {
    let mut b = [0u8; 32];
    if !shared.bus_master.load(Ordering::Acquire) {
        return Err((ST_DESC_ERROR0, "descriptor fetch with Bus Master Enable off (command register bit 2)".into()));
    }
    shared.host.read(addr, &mut b).map_err(|f| (ST_DESC_ERROR0, format!("descriptor fetch failed: {f}")))?;
    let w0 = le32(&b, 0);
    if w0 >> 16 != MAGIC {
        return Err((ST_MAGIC_STOPPED, format!("descriptor at {addr:#x} has magic {:#06x}, not 0xad4b", w0 >> 16)));
    }
    let d = Desc {
        control: w0 & 0xff,
        nxt_adj: (w0 >> 8) & 0x3f,
        len: le32(&b, 4),
        src: le64(&b, 8),
        dst: le64(&b, 16),
        next: le64(&b, 24),
    };
    if d.len == 0 || d.len > MAX_LEN {
        return Err((ST_INVALID_LENGTH, format!("descriptor at {addr:#x} has length {:#x}", d.len)));
    }
    let cfg = &shared.cfg;
    let (align, gran) = (cfg.addr_align.max(1) as u64, cfg.len_granularity.max(1) as u32);
    if d.src % align != 0 || d.dst % align != 0 || d.len % gran != 0 {
        return Err((
            ST_ALIGN_MISMATCH,
            format!(
                "descriptor at {addr:#x}: source {:#x} / destination {:#x} not {align}-byte aligned or length {:#x} not a multiple of {gran}",
                d.src, d.dst, d.len
            ),
        ));
    }
    Ok(d)
}

fn host_fault(bits: u32, what: &str, f: HostFault) -> Stop {
    (bits, format!("host {what} failed: {f}"))
}

fn move_data(shared: &Shared, dir: Direction, d: &Desc) -> Result<(), Stop> {
    let len = d.len as u64;
    let card = &shared.card;
    let master = shared.bus_master.load(Ordering::Acquire);
    match dir {
        Direction::H2c => {
            // AXI write past card memory: write_error decode error; PCIe read of unmapped host
            // memory: read_error unsupported request (what an IOMMU fault completes with).
            let off = card.range(d.dst, len).ok_or_else(|| {
                (
                    ST_WRITE_ERROR0,
                    format!("card address {:#x} + {len:#x} is past card memory ({:#x} bytes)", d.dst, card.size),
                )
            })?;
            if !master {
                return Err((ST_READ_ERROR0, "host read with Bus Master Enable off (command register bit 2)".into()));
            }
            shared
                .host
                // SAFETY: the host map holds `p` valid for `len` bytes during the closure and
                // `off + len` is inside card memory (checked above).
                .with_range(d.src, len, |p| unsafe { card.copy_in(off, p, len as usize) })
                .map_err(|f| host_fault(ST_READ_ERROR0, "read", f))?;
            shared.overrun.card(card, d.dst + len);
            Ok(())
        }
        Direction::C2h => {
            let off = card.range(d.src, len).ok_or_else(|| {
                (
                    ST_READ_ERROR0,
                    format!("card address {:#x} + {len:#x} is past card memory ({:#x} bytes)", d.src, card.size),
                )
            })?;
            // A real card cannot see a dropped posted write; the sim reports it as write_error.
            if !master {
                return Err((ST_WRITE_ERROR0, "host write with Bus Master Enable off (command register bit 2)".into()));
            }
            shared
                .host
                // SAFETY: as above, for writes.
                .with_range(d.dst, len, |p| unsafe { card.copy_out(off, p, len as usize) })
                .map_err(|f| host_fault(ST_WRITE_ERROR0, "write", f))?;
            shared.overrun.host(&shared.host, d.dst + len);
            Ok(())
        }
    }
}

/// Count a finished descriptor, completed at model time `at` (the run state locked); true to go
/// on with the next one.
pub(super) fn complete(shared: &Shared, ch: &Channel, d: &Desc, at: u64) -> Result<bool, Stop> {
    let count = ch.completed.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
    let control = ch.control.load(Ordering::Acquire);
    let (completed, stop) = (d.control & DESC_COMPLETED != 0, d.control & DESC_STOP != 0);
    let events = if completed { ST_DESC_COMPLETED } else { 0 } | if stop { ST_DESC_STOPPED } else { 0 };
    ch.status.fetch_or(events & control, Ordering::AcqRel);
    // Writeback before idle: whoever sees busy clear also sees the word.
    if completed && control & CTRL_POLL_WB != 0 && !ch.withhold.load(Ordering::Acquire) {
        if let Err(f) = shared.host.store_u32_release(ch.wb_addr(), count & 0x00ff_ffff) {
            return Err(host_fault(ST_WRITE_ERROR0, "writeback", f));
        }
    }
    if stop {
        ch.perf.engine_stopped(at);
        ch.status.fetch_and(!ST_BUSY, Ordering::AcqRel);
    }
    // The interrupt after the state it signals: whoever it wakes sees busy clear and the count.
    shared.update_irq(ch);
    Ok(!stop)
}

/// Stop the run at model time `at` (the run state locked): log `bits` where enabled, write back
/// the error (poll mode), clear busy. The model also writes the word on an error stop (Sts_err
/// set) so a poller sees it at once; hardware may not, which is why the driver also watches the
/// status register.
pub(super) fn finish(shared: &Shared, ch: &Channel, bits: u32, why: Option<String>, at: u64) {
    let control = ch.control.load(Ordering::Acquire);
    let mut logged = bits & control & ST_LOGGABLE;
    // The reason is in the status register before the error writeback tells the driver to look.
    ch.status.fetch_or(logged, Ordering::AcqRel);
    if let Some(mut why) = why {
        if control & CTRL_POLL_WB != 0 && !ch.withhold.load(Ordering::Acquire) {
            let count = ch.completed.load(Ordering::Acquire) & 0x00ff_ffff;
            let err = if logged & ST_ERRORS != 0 { 1 << 31 } else { 0 };
            if let Err(f) = shared.host.store_u32_release(ch.wb_addr(), count | err) {
                // Only the status register can tell now.
                logged |= ST_WRITE_ERROR0 & control;
                why.push_str(&format!("; the error writeback failed too: {f}"));
            }
        }
        ch.set_fault(why);
    }
    ch.status.fetch_or(logged, Ordering::AcqRel);
    ch.perf.engine_stopped(at);
    ch.status.fetch_and(!ST_BUSY, Ordering::AcqRel);
    shared.update_irq(ch);
}
