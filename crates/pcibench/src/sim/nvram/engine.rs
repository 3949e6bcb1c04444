//! The sim NVRAM card's DMA engine: one worker thread that, on each rising edge of GO, walks a
//! chain of descriptors in host memory (or takes one transfer from the registers when chaining
//! is off), moves the bytes between the host and card memory, writes each descriptor's
//! semaphore and reports through the status/control register, as umem.c drives the card.
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

use super::state::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Data moves in pieces of this size, so clearing GO (or a stall) takes effect within one piece.
const PIECE: u64 = 4 << 20;
const DESC_LEN: usize = 48;

struct Desc {
    pci: u64,
    local: u64,
    size: u64,
    next: u64,
    sem: u64,
    control: u32,
}

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

pub(crate) fn worker(shared: Arc<Shared>) {
    let mut served = 0u64;
    loop {
        spin_for_start(&shared, served);
        let (start, prev, slept) = {
            let mut run = shared.run();
            let mut slept = false;
            loop {
                if shared.shutdown.load(Ordering::Acquire) {
                    return;
                }
                if run.gen != served {
                    let prev = std::mem::replace(&mut served, run.gen);
                    break (run.start, prev, slept);
                }
                run.parked = true;
                run = shared.wake.wait(run).unwrap_or_else(|e| e.into_inner());
                run.parked = false;
                slept = true;
            }
        };
        shared.waker.at_start(prev, served, slept);
        run(&shared, served, start);
    }
}

/// Stepped mode: serve the latest GO edge now, on the caller's thread (the driver's GO write
/// or a test's step), unless it was served already; whether it ran.
pub(crate) fn run_now(shared: &Shared) -> bool {
    let (gen, start) = {
        let mut run = shared.run();
        if run.gen == run.served {
            return false;
        }
        run.served = run.gen;
        (run.gen, run.start)
    };
    run(shared, gen, start);
    true
}

/// Serve GO edge `gen`: the chain (or the one register-programmed transfer), then the status.
fn run(shared: &Shared, served: u64, start: Start) {
    {
        let end = if start.control & CHAIN_EN != 0 {
            chain(shared, served, start.desc)
        } else {
            let d = Desc {
                pci: start.pci,
                local: start.local,
                size: start.size,
                next: 0,
                sem: start.sem,
                control: start.control,
            };
            match transfer(shared, served, &d) {
                Ok(()) => End::Done,
                Err(e) => e,
            }
        };
        finish(shared, served, start.control & CHAIN_EN != 0, end);
    }
}

fn spin_for_start(shared: &Shared, served: u64) {
    super::super::spin::briefly(|| {
        shared.gen_hint.load(Ordering::Acquire) != served || shared.shutdown.load(Ordering::Acquire)
    });
}

/// Still serving run `gen`: GO set, no newer run, model alive.
fn go(shared: &Shared, gen: u64) -> bool {
    shared.scr.load(Ordering::Acquire) & GO != 0 && shared.run().gen == gen && !shared.shutdown.load(Ordering::Acquire)
}

fn chain(shared: &Shared, gen: u64, mut addr: u64) -> End {
    let mut walked = 0usize;
    loop {
        if !go(shared, gen) {
            return End::Stopped;
        }
        walked += 1;
        if walked == MAX_CHAIN + 1 {
            shared.violation(format!(
                "a chain of more than {MAX_CHAIN} descriptors: umem.c never builds one (DESC_PER_PAGE, two pages of \
                 64-byte descriptors), so no driver ever showed the card one"
            ));
        }
        super::super::shake::point();
        let d = match fetch(shared, addr) {
            Ok(d) => d,
            Err(e) => return e,
        };
        if let Err(e) = transfer(shared, gen, &d) {
            return e;
        }
        if d.control & CHAIN_EN == 0 {
            return End::Done;
        }
        addr = d.next;
    }
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

fn transfer(shared: &Shared, gen: u64, d: &Desc) -> Result<(), End> {
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
    let mut off = 0;
    while off < d.size {
        loop {
            if !go(shared, gen) {
                return Err(End::Stopped);
            }
            // Stepped, a stall is taken before the run starts (`NvramModel::step` runs it anyway).
            if !shared.faults().stalled || shared.cfg.stepped {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let n = PIECE.min(d.size - off);
        if d.control & TRANSFER_READ != 0 {
            to_card(shared, d.pci + off, d.local + off, n)?;
        } else {
            to_host(shared, d.local + off, d.pci + off, n)?;
        }
        off += n;
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
        super::super::shake::point();
        shared
            .host
            .store_u32_release(d.sem, d.control | DMA_COMPLETE | seen)
            .map_err(|f| End::Error(MASTER_ABT, format!("semaphore write failed: {f}")))?;
    }
    if seen != 0 {
        shared.latch(seen);
    }
    if go(shared, gen) {
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

/// End run `gen`: status bits, the model's diagnosis, GO cleared (unless a newer run owns it).
fn finish(shared: &Shared, gen: u64, chained: bool, end: End) {
    super::super::shake::before_report();
    let run = shared.run();
    if run.gen != gen {
        return;
    }
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
    drop(run);
}
