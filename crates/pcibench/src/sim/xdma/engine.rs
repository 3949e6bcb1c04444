//! The sim XDMA engine proper: one worker thread per channel that, on each rising edge of run,
//! fetches descriptors from host memory, checks them as PG195 describes, moves the bytes between
//! the host buffer and card memory with one memcpy per descriptor, and reports through the
//! status register, the completed count and the poll-mode writeback word.
//!
//! Descriptor (PG195 "Descriptor Format"): +0x00 [31:16] magic 0xAD4B, [13:8] Nxt_adj,
//! [7:0] control (0 STOP, 1 COMPLETED, 4 EOP); +0x04 length; +0x08 source; +0x10 destination;
//! +0x18 next descriptor. A block of 1 + adj adjacent descriptors is fetched together: within it
//! the next descriptor is the following 32 bytes; the block's last descriptor names the next
//! block and its adjacent count. A block crossing a 4 KiB boundary is reported as
//! align_mismatch (hardware behaviour there is undefined; the model makes the mistake visible).

use super::super::host_map::HostFault;
use super::state::*;
use crate::direction::Direction;
use crate::Result;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

const MAGIC: u32 = 0xad4b;
const DESC_STOP: u32 = 1 << 0;
const DESC_COMPLETED: u32 = 1 << 1;
const MAX_LEN: u32 = 0x0fff_ffff;

pub(super) struct Desc {
    pub control: u32,
    pub nxt_adj: u32,
    pub len: u32,
    pub src: u64,
    pub dst: u64,
    pub next: u64,
}

/// Why the engine stopped: the status bits to log (if enabled) and the model's own words.
pub(super) type Stop = (u32, String);

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn le64(b: &[u8], o: usize) -> u64 {
    le32(b, o) as u64 | (le32(b, o + 4) as u64) << 32
}

pub(crate) fn worker(shared: Arc<Shared>, dir: Direction, index: usize) {
    let Some(ch) = shared.channel(dir, index) else { return };
    let mut served = 0u64;
    while let Some((gen, start)) = wait_for_start(&shared, ch, &mut served) {
        if let Err((bits, why)) = run_chain(&shared, ch, gen, start) {
            finish(&shared, ch, gen, bits, Some(why));
        }
    }
}

/// Stepped mode: run the channel's latest rising edge of run now, on the caller's thread (the
/// driver's control write, or a test's step), unless it was served already; whether it ran.
pub(crate) fn run_now(shared: &Shared, ch: &Channel) -> bool {
    let Some((gen, start)) = pending(ch) else { return false };
    if let Err((bits, why)) = run_chain(shared, ch, gen, start) {
        finish(shared, ch, gen, bits, Some(why));
    }
    true
}

/// Stepped mode: the channel's latest rising edge of run if not served yet, marked served.
pub(super) fn pending(ch: &Channel) -> Option<(u64, Start)> {
    let mut st = ch.lock();
    if st.gen == st.served {
        return None;
    }
    st.served = st.gen;
    Some((st.gen, st.start))
}

pub(super) fn wait_for_start(shared: &Shared, ch: &Channel, served: &mut u64) -> Option<(u64, Start)> {
    super::super::spin::briefly(|| {
        ch.gen_hint.load(Ordering::Acquire) != *served || shared.shutdown.load(Ordering::Acquire)
    });
    let mut st = ch.lock();
    let mut slept = false;
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            return None;
        }
        if st.gen != *served {
            let prev = std::mem::replace(served, st.gen);
            let start = (st.gen, st.start);
            drop(st);
            ch.waker.at_start(prev, *served, slept);
            return Some(start);
        }
        st.parked = true;
        st = ch.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        st.parked = false;
        slept = true;
    }
}

/// Still the run we are serving: run set, no newer rising edge, model alive.
fn current(shared: &Shared, ch: &Channel, gen: u64) -> bool {
    ch.control.load(Ordering::Acquire) & CTRL_RUN != 0
        && ch.gen_hint.load(Ordering::Acquire) == gen
        && !shared.shutdown.load(Ordering::Acquire)
}

/// Wait out the stall test hook; false when run was cleared (or a new run began) meanwhile.
fn runnable(shared: &Shared, ch: &Channel, gen: u64) -> bool {
    // Stepped, a stall is taken before the run starts (`XdmaModel::step` runs it anyway).
    while ch.stalled.load(Ordering::Acquire) && !shared.cfg.stepped {
        if !current(shared, ch, gen) {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    current(shared, ch, gen)
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

fn run_chain(shared: &Shared, ch: &Channel, gen: u64, start: Start) -> Result<(), Stop> {
    let (mut addr, mut extra) = (start.addr, start.adj);
    check_block(addr, extra)?;
    loop {
        // Clearing run stops the engine after the descriptor in flight (PG195 control bit 0).
        if !runnable(shared, ch, gen) {
            finish(shared, ch, gen, ST_IDLE_STOPPED, None);
            return Ok(());
        }
        super::super::shake::point();
        let d = fetch(shared, addr)?;
        move_data(shared, ch.dir, &d)?;
        // No faster than the datapath: one beat a user-clock cycle (perf.rs says why).
        ch.perf.moved(d.len as u64);
        if !complete(shared, ch, gen, &d)? {
            return Ok(());
        }
        if extra > 0 {
            addr += 32;
            extra -= 1;
        } else {
            (addr, extra) = (d.next, d.nxt_adj);
            check_block(addr, extra)?;
        }
    }
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
                .map_err(|f| host_fault(ST_READ_ERROR0, "read", f))
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
                .map_err(|f| host_fault(ST_WRITE_ERROR0, "write", f))
        }
    }
}

/// Count a finished descriptor; true to go on with the next one.
pub(super) fn complete(shared: &Shared, ch: &Channel, gen: u64, d: &Desc) -> Result<bool, Stop> {
    if d.control & (DESC_COMPLETED | DESC_STOP) != 0 {
        // A shaken worker may hold back the writeback (or the end of the run).
        super::super::shake::before_report();
    }
    let st = ch.lock();
    if st.gen != gen {
        return Ok(false); // a newer run owns the registers now
    }
    let count = ch.completed.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
    let control = ch.control.load(Ordering::Acquire);
    let (completed, stop) = (d.control & DESC_COMPLETED != 0, d.control & DESC_STOP != 0);
    let events = if completed { ST_DESC_COMPLETED } else { 0 } | if stop { ST_DESC_STOPPED } else { 0 };
    ch.status.fetch_or(events & control, Ordering::AcqRel);
    // Writeback before idle: whoever sees busy clear also sees the word.
    if completed && control & CTRL_POLL_WB != 0 && !ch.withhold.load(Ordering::Acquire) {
        if let Err(f) = shared.host.store_u32_release(ch.wb_addr(), count & 0x00ff_ffff) {
            drop(st);
            return Err(host_fault(ST_WRITE_ERROR0, "writeback", f));
        }
    }
    if stop {
        ch.perf.engine_stopped();
        ch.status.fetch_and(!ST_BUSY, Ordering::AcqRel);
    }
    // The interrupt after the state it signals: whoever it wakes sees busy clear and the count.
    shared.update_irq(ch);
    Ok(!stop)
}

/// Stop the run `gen`: log `bits` where enabled, write back the error (poll mode), clear busy.
/// The model also writes the word on an error stop (Sts_err set) so a poller sees it at once;
/// hardware may not, which is why the driver also watches the status register.
pub(super) fn finish(shared: &Shared, ch: &Channel, gen: u64, bits: u32, why: Option<String>) {
    super::super::shake::before_report();
    let st = ch.lock();
    if st.gen != gen {
        return;
    }
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
    ch.perf.engine_stopped();
    ch.status.fetch_and(!ST_BUSY, Ordering::AcqRel);
    shared.update_irq(ch);
    drop(st);
}
