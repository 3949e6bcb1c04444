//! The sim NVRAM card's DMA engine: on each rising edge of GO it walks a chain of descriptors in
//! host memory (or takes one transfer from the registers when chaining is off), moves the bytes
//! between the host and card memory, writes each descriptor's semaphore and reports through the
//! status/control register, as umem.c drives the card. It progresses with time (`datapath.rs`):
//! a descriptor started at t completes at t + its fetch and bytes on `DATAPATH`, its data moved
//! when the host next looks after that (`serve`, in the looking thread).
//!
//! Descriptor (umem.h `struct mm_dma_desc`, little-endian): +0x00 PCI (host bus) address,
//! +0x08 local (card) address, +0x10 transfer size (32 bits), +0x18 next descriptor, +0x20
//! semaphore address, +0x28 control bits (the 0x68 bits). On completion the engine writes the
//! control bits with DMA_COMPLETE to the semaphore (umem.c polls `sem_control_bits` for it).
//!
//! Errors stop the chain with the status bits umem.c decodes: a host address nothing answers
//! (or Bus Master off) is a master abort; a card address past card memory is a memory access
//! error (ANY_ERR, error status bit 0); reading a word with a multi-bit error while error
//! correction is on is MBE_ERR (error status bit 1, address and data logged).

use super::chain::{Cursor, Desc};
use super::state::*;
use std::sync::atomic::Ordering;

const DESC_LEN: usize = 48;

enum End {
    Done,
    /// Software cleared GO (or a newer run began).
    Stopped,
    Error(u32, String),
}

fn le64(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(w)
}

/// GO rose at model time `now` (the run state locked): the chain, or the one transfer the
/// registers hold, begins.
pub(crate) fn start(shared: &Shared, run: &mut RunState, now: u64) {
    let s = run.start;
    let chained = s.control & CHAIN_EN != 0;
    let mut cur = Cursor { chained, addr: s.desc, walked: 0, free_at: now, desc: None };
    if !chained {
        let d = Desc { pci: s.pci, local: s.local, size: s.size, next: 0, sem: s.sem, control: s.control };
        let due = now + DATAPATH.bytes_ns(d.size) + shared.shaker.point();
        cur.desc = Some((d, due));
    }
    run.cursor = Some(cur);
}

/// Bring the run to model time `now` (the run state locked): each descriptor due by then moves
/// its data and completes, in this thread; the next one due is left in `shared.due`. `force`
/// serves a stalled engine (a stepped test's `step`). Whether a descriptor completed.
pub(crate) fn serve(shared: &Shared, run: &mut RunState, now: u64, force: bool) -> bool {
    if crate::sim::datapath::hands_off() {
        // A thread that answers a client's accesses moves nothing: the server's clock thread
        // serves the chain now (datapath::set_hands_off).
        if run.cursor.is_some() {
            shared.due.set(0);
        }
        return false;
    }
    let Some(mut cur) = run.cursor.take() else {
        shared.due.clear();
        return false;
    };
    let mut moved = false;
    let end = loop {
        if shared.scr.load(Ordering::Acquire) & GO == 0 {
            break End::Stopped;
        }
        // A hung engine moves nothing (stepped, a stall is taken before the run starts:
        // `NvramModel::step` runs it anyway).
        if shared.faults().stalled && !force {
            run.cursor = Some(cur);
            shared.due.clear();
            return moved;
        }
        if cur.desc.is_none() {
            cur.walked += 1;
            if cur.walked == MAX_CHAIN + 1 {
                shared.violation(format!(
                    "a chain of more than {MAX_CHAIN} descriptors: umem.c never builds one (DESC_PER_PAGE, two pages \
                     of 64-byte descriptors), so no driver ever showed the card one"
                ));
            }
            match fetch(shared, cur.addr) {
                Ok(d) => {
                    let due = cur.free_at + DATAPATH.desc_ns(d.size) + shared.shaker.point();
                    cur.desc = Some((d, due));
                }
                Err(e) => break e,
            }
        }
        let due = cur.desc.as_ref().map_or(0, |(_, t)| *t);
        if due > now {
            shared.due.set(due);
            run.cursor = Some(cur);
            return moved;
        }
        let Some((d, due)) = cur.desc.take() else { continue };
        cur.free_at = due + shared.shaker.before_report();
        if let Err(e) = transfer(shared, &d) {
            break e;
        }
        moved = true;
        if !cur.chained || d.control & CHAIN_EN == 0 {
            break End::Done;
        }
        cur.addr = d.next;
    };
    finish(shared, cur.chained, end);
    shared.due.clear();
    moved
}

fn fetch(shared: &Shared, addr: u64) -> Result<Desc, End> {
    if !shared.bus_master.load(Ordering::Acquire) {
        return Err(End::Error(
            MASTER_ABT,
            "descriptor fetch with Bus Master Enable off (command register bit 2)".into(),
        ));
    }
    let mut b = [0u8; DESC_LEN];
    shared
        .host
        .read(addr, &mut b)
        .map_err(|f| End::Error(MASTER_ABT, format!("descriptor fetch at {addr:#x} failed: {f}")))?;
    Ok(Desc {
        pci: le64(&b, 0x00),
        local: le64(&b, 0x08),
        size: le64(&b, 0x10) & 0xffff_ffff,
        next: le64(&b, 0x18),
        sem: le64(&b, 0x20),
        control: le64(&b, 0x28) as u32,
    })
}

/// Log a memory error as the card's error registers would hold it (its status bits latch when
/// the run ends with them: `finish`).
fn log_memory_error(shared: &Shared, kind: u8, addr: u64, data: u64) {
    let mut r = shared.regs();
    r[ERRSTATUS] |= kind;
    r[ERROR_COUNT] = r[ERROR_COUNT].saturating_add(1);
    r[ERROR_ADDR_LOG..ERROR_ADDR_LOG + 5].copy_from_slice(&addr.to_le_bytes()[..5]);
    r[ERROR_DATA_LOG..ERROR_DATA_LOG + 8].copy_from_slice(&data.to_le_bytes());
}

fn transfer(shared: &Shared, d: &Desc) -> Result<(), End> {
    shared.irq_enables.store(d.control & (DMA_COMP_EN | CHAIN_COMP_EN | ERR_INT_EN | PARITY_INT_EN), Ordering::Release);
    shared.check_interrupt();
    let command = shared.command.load(Ordering::Acquire);
    let writes_host = d.control & TRANSFER_READ == 0;
    if writes_host && (d.control >> WRITE_CMD_SHIFT) & 0xf == PCI_WRITE_INVALIDATE && command & CMD_MWI == 0 {
        shared.violation(format!(
            "Memory Write and Invalidate (write command 0xF, control {:#x}) with PCI_COMMAND's MWI Enable clear \
             (command {command:#06x}): a PCI master may not issue MWI then (PCI Local Bus 3.0 §6.2.2); umem.c sets the bit",
            d.control
        ));
    }
    if let Some(bits) = shared.faults().next_status.take() {
        return Err(End::Error(bits, format!("injected status {bits:#x} at the descriptor for card {:#x}", d.local)));
    }
    if !shared.bus_master.load(Ordering::Acquire) {
        return Err(End::Error(MASTER_ABT, "host access with Bus Master Enable off (command register bit 2)".into()));
    }
    let card = &shared.card;
    if card.range(d.local, d.size).is_none() {
        log_memory_error(shared, ERRSTATUS_ACCESS, d.local, 0);
        return Err(End::Error(
            ANY_ERR,
            format!("card address {:#x} + {:#x} is past card memory ({:#x} bytes)", d.local, d.size, card.size),
        ));
    }
    if d.control & TRANSFER_READ != 0 {
        to_card(shared, d.pci, d.local, d.size)?;
        shared.overrun.card(card, d.local + d.size);
    } else {
        to_host(shared, d.local, d.pci, d.size)?;
        shared.overrun.host(&shared.host, d.pci + d.size);
    }
    // An error seen along the way that does not stop the descriptor (an injected one): the
    // data is damaged, the semaphore reports the bits beside DMA_COMPLETE, and they latch. The
    // semaphore first: the descriptor is done when its error shows in the status register, so
    // a driver that sees the error there finds the semaphore saying which descriptor had it
    // (issue #34: the other order let the driver report "0 of 1 descriptors" for a completed one).
    let seen = shared.faults().completion_error.take().unwrap_or(0);
    if seen != 0 {
        damage(shared, d);
        shared.set_fault(format!("injected status {seen:#x} during the descriptor for card {:#x}", d.local));
    }
    if d.control & SEM_EN != 0 {
        shared
            .host
            .store_u32_release(d.sem, d.control | DMA_COMPLETE | seen)
            .map_err(|f| End::Error(MASTER_ABT, format!("semaphore write failed: {f}")))?;
    }
    if seen != 0 {
        shared.latch(seen);
    }
    if shared.scr.load(Ordering::Acquire) & GO != 0 {
        shared.latch(DMA_COMPLETE);
    }
    Ok(())
}

/// Flip a byte of what descriptor `d` just wrote (card memory for host to card, else host).
fn damage(shared: &Shared, d: &Desc) {
    if d.control & TRANSFER_READ != 0 {
        let mut b = [0u8];
        if shared.card.read(d.local, &mut b).is_ok() {
            let _ = shared.card.write(d.local, &[b[0] ^ 0x40]);
        }
    } else {
        let mut b = [0u8];
        if shared.host.read(d.pci, &mut b).is_ok() {
            let _ = shared.host.write(d.pci, &[b[0] ^ 0x40]);
        }
    }
}

fn to_card(shared: &Shared, pci: u64, local: u64, n: u64) -> Result<(), End> {
    let off = local as usize;
    shared
        .host
        // SAFETY: the host map holds `p` valid for `n` bytes during the closure; `local + n` is
        // inside card memory (the descriptor was range-checked).
        .with_range(pci, n, |p| unsafe { shared.card.copy_in(off, p, n as usize) })
        .map_err(|f| End::Error(MASTER_ABT, format!("host read failed: {f}")))?;
    // Fresh data, fresh check bits.
    let mut faults = shared.faults();
    let hit: Vec<u64> = faults.poisoned.range(local..local + n).copied().collect();
    hit.iter().for_each(|a| {
        faults.poisoned.remove(a);
    });
    Ok(())
}

fn to_host(shared: &Shared, local: u64, pci: u64, n: u64) -> Result<(), End> {
    let bad = shared.faults().poisoned.range(local..local + n).next().copied();
    let ecc = ecc_on(shared.regs()[ERRCTRL]);
    if let (Some(addr), true) = (bad, ecc) {
        let mut w = [0u8; 8];
        let _ = shared.card.read(addr, &mut w);
        log_memory_error(shared, ERRSTATUS_MULTI_BIT, addr, u64::from_le_bytes(w) ^ 0x11);
        return Err(End::Error(MBE_ERR | ANY_ERR, format!("multi-bit error in the word at card address {addr:#x}")));
    }
    let off = local as usize;
    shared
        .host
        // SAFETY: as in `to_card`, for writes into host memory.
        .with_range(pci, n, |p| unsafe { shared.card.copy_out(off, p, n as usize) })
        .map_err(|f| End::Error(MASTER_ABT, format!("host write failed: {f}")))?;
    if let Some(addr) = bad {
        // No error correction: the corrupted word reaches the host unnoticed.
        let at = pci + (addr - local);
        let mut b = [0u8];
        if shared.host.read(at, &mut b).is_ok() {
            let _ = shared.host.write(at, &[b[0] ^ 0x11]);
        }
    }
    Ok(())
}

/// End the run (the run state locked): status bits, the model's diagnosis, GO cleared.
fn finish(shared: &Shared, chained: bool, end: End) {
    let bits = match end {
        End::Done if chained => CHAIN_COMPLETE,
        End::Done | End::Stopped => 0,
        End::Error(bits, why) => {
            shared.set_fault(why);
            bits
        }
    };
    // The reason is in the register before GO clears: whoever sees the engine idle sees why.
    shared.latch(bits);
    shared.scr.fetch_and(!GO, Ordering::AcqRel);
}
