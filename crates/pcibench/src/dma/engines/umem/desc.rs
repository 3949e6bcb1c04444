//! Chained descriptors for the MM-54xx DMA engine, laid out as umem.h's `struct mm_dma_desc`
//! (little-endian): +0x00 PCI (host bus) address, +0x08 local (card) address, +0x10 transfer
//! size (u32), +0x14 zero, +0x18 next descriptor address, +0x20 semaphore address, +0x28 control
//! bits (u32), +0x2c zero, then the driver's own fields; pcibench keeps the semaphore word at
//! +0x38 as umem.c (`sem_control_bits`) and fpga_sio do, and makes each descriptor 64 bytes.
//!
//! Each descriptor's semaphore is its own +0x38: the card writes the descriptor's control bits
//! with DMA_COMPLETE there when it is done (and error bits, when it saw one), and the driver
//! polls the last one. A transfer of more than `DESC_PER_CHAIN` pieces is laid out as several
//! chains, each as long as umem.c ever makes one, which the driver runs one after another.

use super::regs::*;
use crate::dma::{Direction, DmaBuffer, Segment};
use crate::trace::Tracer;
use crate::{Error, Result};
use serde::Serialize;
use std::sync::atomic::AtomicU32;

/// One descriptor's worth of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Piece {
    pub host: u64,
    pub card: u64,
    pub len: u64,
}

/// One chain the card walks: descriptors `start..start + count`, the first at bus `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Part {
    pub first: u64,
    pub start: usize,
    pub count: usize,
}

/// A transfer's descriptors written to descriptor memory: what a run starts and polls.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    pub dir: Direction,
    pub pieces: Vec<Piece>,
    /// Bus address of the first descriptor (DMA_DESCRIPTOR_ADDR of the first part).
    pub first: u64,
    /// The chains the card is given, in order: at most `DESC_PER_CHAIN` descriptors each.
    pub parts: Vec<Part>,
}

/// `[offset, offset+len)` of a buffer as bus-contiguous pieces of at most `max` bytes, each
/// paired with its card address (card addresses run on from `card`).
pub fn split(segments: &[Segment], offset: u64, len: u64, card: u64, max: u64) -> Result<Vec<Piece>> {
    let end = offset + len;
    let mut pieces = Vec::new();
    let mut at = offset;
    for s in segments.iter().filter(|s| s.offset + s.len > offset && s.offset < end) {
        if s.offset > at {
            break; // a hole: reported below
        }
        let stop = (s.offset + s.len).min(end);
        while at < stop {
            let n = (stop - at).min(max);
            pieces.push(Piece { host: s.bus + (at - s.offset), card: card + (at - offset), len: n });
            at += n;
        }
    }
    if at != end {
        return Err(Error::Device(format!(
            "buffer bytes {at:#x}..{end:#x} lie in no bus segment: the buffer's segment list is incomplete"
        )));
    }
    Ok(pieces)
}

/// The control bits of a descriptor, as umem.c add_bio and mm_start_io set them less the
/// interrupt enables: GO, the semaphore, the PCI commands `pci_cmds`, TRANSFER_READ for host to
/// card, CHAIN_EN on all but a chain's last. umem.c also sets ERR_INT_EN and PARITY_INT_EN on
/// every descriptor and CHAIN_COMP_EN on the last, for its interrupt handler; pcibench polls
/// and services no interrupt, so it leaves them off as fpga_sio does
/// (`initialise_nvram_transfer_context`): PCI_COMMAND's Interrupt Disable would mask them only
/// on a PCI 2.3 INTx-maskable function, and an unserviced INTx on a shared line makes the
/// kernel disable that line ("nobody cared").
pub fn control(dir: Direction, last_in_chain: bool, pci_cmds: u32) -> u32 {
    let chain = if last_in_chain { 0 } else { CHAIN_EN };
    let read = if dir == Direction::H2c { TRANSFER_READ } else { 0 };
    GO | SEM_EN | chain | read | pci_cmds
}

/// The interrupt enables umem.c gives a descriptor for its handler (add_bio): ERR_INT_EN and
/// PARITY_INT_EN on every one, CHAIN_COMP_EN on a chain's last. Only with completion by interrupt.
pub fn interrupt_enables(last_in_chain: bool) -> u32 {
    ERR_INT_EN | PARITY_INT_EN | if last_in_chain { CHAIN_COMP_EN } else { 0 }
}

/// Rewrite the control word of every descriptor of `chain` in `mem`: with umem.c's interrupt
/// enables (`on`, completion by interrupt) or without (polling).
pub fn set_interrupts(mem: &dyn DmaBuffer, chain: &Chain, pci_cmds: u32, on: bool) {
    for part in &chain.parts {
        for i in part.start..part.start + part.count {
            let last = i + 1 == part.start + part.count;
            let irq = if on { interrupt_enables(last) } else { 0 };
            let word = (control(chain.dir, last, pci_cmds) | irq).to_le_bytes();
            // SAFETY: `write_chain` laid descriptor i inside the buffer; the card reads it only
            // after the next run starts.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    word.as_ptr(),
                    mem.as_ptr().add(i * DESC_BYTES as usize + DESC_CONTROL),
                    word.len(),
                )
            };
        }
    }
}

/// Lay the descriptors for `pieces` into `mem` (descriptor i at byte 64 i), as chains of at most
/// `DESC_PER_CHAIN`, and return them.
pub fn write_chain(mem: &dyn DmaBuffer, dir: Direction, pieces: Vec<Piece>, pci_cmds: u32) -> Result<Chain> {
    let n = pieces.len();
    let need = n as u64 * DESC_BYTES;
    if n == 0 || need > mem.len() as u64 {
        return Err(Error::Device(format!("descriptor memory holds {} bytes; this chain needs {need}", mem.len())));
    }
    let bus = |i: usize| -> Result<u64> {
        mem.bus_range(i as u64 * DESC_BYTES, DESC_BYTES)
            .filter(|b| b % ALIGN == 0)
            .ok_or_else(|| Error::Device(format!("descriptor {i} has no 8-byte aligned bus address")))
    };
    let mut parts = Vec::new();
    for start in (0..n).step_by(DESC_PER_CHAIN) {
        let count = DESC_PER_CHAIN.min(n - start);
        parts.push(Part { first: bus(start)?, start, count });
        for (i, p) in pieces.iter().enumerate().skip(start).take(count) {
            let last = i + 1 == start + count;
            let here = bus(i)?;
            let next = if last { 0 } else { bus(i + 1)? };
            let mut d = [0u8; DESC_BYTES as usize];
            d[DESC_PCI_ADDR..DESC_PCI_ADDR + 8].copy_from_slice(&p.host.to_le_bytes());
            d[DESC_LOCAL_ADDR..DESC_LOCAL_ADDR + 8].copy_from_slice(&p.card.to_le_bytes());
            d[DESC_TRANSFER_SIZE..DESC_TRANSFER_SIZE + 4].copy_from_slice(&(p.len as u32).to_le_bytes());
            d[DESC_NEXT..DESC_NEXT + 8].copy_from_slice(&next.to_le_bytes());
            d[DESC_SEM_ADDR..DESC_SEM_ADDR + 8].copy_from_slice(&(here + SEM_OFFSET).to_le_bytes());
            d[DESC_CONTROL..DESC_CONTROL + 4].copy_from_slice(&control(dir, last, pci_cmds).to_le_bytes());
            // SAFETY: `need <= mem.len()`, so [64 i, 64 i + 64) is inside the buffer the engine
            // owns; the card reads it only after the next run starts.
            unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), mem.as_ptr().add(i * DESC_BYTES as usize), d.len()) };
        }
    }
    Ok(Chain { dir, pieces, first: parts[0].first, parts })
}

/// Every descriptor of `chain`, as written to `mem`, to the trace.
pub fn trace(t: &Tracer, mem: &dyn DmaBuffer, chain: &Chain) {
    for i in 0..chain.pieces.len() {
        let off = i * DESC_BYTES as usize;
        // SAFETY: `write_chain` wrote descriptor i inside the buffer; the card reads it only
        // after the next run starts, and nothing writes it now.
        let d = unsafe { std::slice::from_raw_parts(mem.as_ptr().add(off), DESC_BYTES as usize) };
        let word = |at: usize, n: usize| d[at..at + n].iter().rev().fold(0u64, |v, b| v << 8 | *b as u64);
        let fields = [
            ("pci_addr", word(DESC_PCI_ADDR, 8)),
            ("local_addr", word(DESC_LOCAL_ADDR, 8)),
            ("size", word(DESC_TRANSFER_SIZE, 4)),
            ("next", word(DESC_NEXT, 8)),
            ("sem_addr", word(DESC_SEM_ADDR, 8)),
            ("control", word(DESC_CONTROL, 4)),
        ];
        t.descriptor("umem", i as u64, mem.bus_range(off as u64, DESC_BYTES).unwrap_or_default(), d, &fields);
    }
}

/// The semaphore word of descriptor `i` (inside `mem`, 8-byte aligned, checked by `write_chain`).
pub fn semaphore(mem: &dyn DmaBuffer, i: usize) -> &AtomicU32 {
    let off = i as u64 * DESC_BYTES + SEM_OFFSET;
    debug_assert!(off + 4 <= mem.len() as u64 && (mem.as_ptr() as u64 + off) % 4 == 0);
    // SAFETY: 4 aligned bytes inside the buffer, living as long as `mem`; the card writes the
    // word whole and the CPU only touches it atomically.
    unsafe { AtomicU32::from_ptr(mem.as_ptr().add(off as usize).cast::<u32>()) }
}
