//! Chained descriptors for the MM-54xx DMA engine, laid out as umem.h's `struct mm_dma_desc`
//! (little-endian): +0x00 PCI (host bus) address, +0x08 local (card) address, +0x10 transfer
//! size (u32), +0x14 zero, +0x18 next descriptor address, +0x20 semaphore address, +0x28 control
//! bits (u32), +0x2c zero, then the driver's own fields; pcibench keeps the semaphore word at
//! +0x38 as umem.c (`sem_control_bits`) and fpga_sio do, and makes each descriptor 64 bytes.
//!
//! Each descriptor's semaphore is its own +0x38: the card writes the descriptor's control bits
//! with DMA_COMPLETE there when it is done, and the driver polls the last one.

use super::regs::{CHAIN_EN, GO, PCI_CMDS, SEM_EN, TRANSFER_READ};
use crate::dma::{Direction, DmaBuffer, Segment};
use crate::{Error, Result};
use serde::Serialize;
use std::sync::atomic::AtomicU32;

pub const DESC_BYTES: u64 = 64;
pub const SEM_OFFSET: u64 = 0x38;
/// The longest piece one descriptor moves. The size field is 32 bits; seed 001 (fpga_sio)
/// moved 1 GiB with one descriptor, the largest proven on the card, so pieces stop there.
pub const MAX_DESC_LEN: u64 = 1 << 30;
/// Host and card addresses and lengths in 8-byte words: the card's data path is 64-bit PCI and
/// its ECC protects 64-bit words (the error data log is 64 bits wide).
pub const ALIGN: u64 = 8;

/// One descriptor's worth of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Piece {
    pub host: u64,
    pub card: u64,
    pub len: u64,
}

/// A chain written to descriptor memory: what a run starts and polls.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    pub dir: Direction,
    pub pieces: Vec<Piece>,
    /// Bus address of the first descriptor (DMA_DESCRIPTOR_ADDR).
    pub first: u64,
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

/// The control bits of descriptor `i` of `n`: every one writes its semaphore, all but the last
/// chain on. No interrupt enables: pcibench polls, and VFIO has no handler installed for them
/// (fpga_sio leaves them off for the same reason).
pub fn control(dir: Direction, i: usize, n: usize) -> u32 {
    let chain = if i + 1 < n { CHAIN_EN } else { 0 };
    let read = if dir == Direction::H2c { TRANSFER_READ } else { 0 };
    GO | SEM_EN | chain | read | PCI_CMDS
}

/// Lay the chain for `pieces` into `mem` (descriptor i at byte 64 i) and return it.
pub fn write_chain(mem: &dyn DmaBuffer, dir: Direction, pieces: Vec<Piece>) -> Result<Chain> {
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
    let first = bus(0)?;
    let mut next = first;
    for (i, p) in pieces.iter().enumerate() {
        let here = next;
        next = if i + 1 < n { bus(i + 1)? } else { 0 };
        let mut d = [0u8; DESC_BYTES as usize];
        d[0x00..0x08].copy_from_slice(&p.host.to_le_bytes());
        d[0x08..0x10].copy_from_slice(&p.card.to_le_bytes());
        d[0x10..0x14].copy_from_slice(&(p.len as u32).to_le_bytes());
        d[0x18..0x20].copy_from_slice(&next.to_le_bytes());
        d[0x20..0x28].copy_from_slice(&(here + SEM_OFFSET).to_le_bytes());
        d[0x28..0x2c].copy_from_slice(&control(dir, i, n).to_le_bytes());
        // SAFETY: `need <= mem.len()`, so [64 i, 64 i + 64) is inside the buffer the engine owns;
        // the card reads it only after the next run starts.
        unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), mem.as_ptr().add(i * DESC_BYTES as usize), d.len()) };
    }
    Ok(Chain { dir, pieces, first })
}

/// The semaphore word of descriptor `i` (inside `mem`, 8-byte aligned, checked by `write_chain`).
pub fn semaphore(mem: &dyn DmaBuffer, i: usize) -> &AtomicU32 {
    let off = i as u64 * DESC_BYTES + SEM_OFFSET;
    debug_assert!(off + 4 <= mem.len() as u64 && (mem.as_ptr() as u64 + off) % 4 == 0);
    // SAFETY: 4 aligned bytes inside the buffer, living as long as `mem`; the card writes the
    // word whole and the CPU only touches it atomically.
    unsafe { AtomicU32::from_ptr(mem.as_ptr().add(off as usize).cast::<u32>()) }
}
