//! The data formats an XDMA engine shares with its driver: SGDMA descriptor chains (PG195
//! "Descriptors": splitting a transfer and laying it out as the engine fetches it) and the
//! channel status word in words.
//!
//! A descriptor is 32 bytes, 32-byte aligned: +0x00 [31:16] magic 0xAD4B, [13:8] Nxt_adj (how
//! many descriptors follow the *next* one contiguously), [7:0] control (bit 0 STOP, 1 COMPLETED,
//! 4 EOP); +0x04 length (at most 0x0FFFFFFF); +0x08 source; +0x10 destination; +0x18 next, all
//! 64-bit little-endian. The engine fetches a block of 1 + adj adjacent descriptors at once; a
//! block may hold at most 64 (Nxt_adj is 6 bits) and must not cross a 4 KiB boundary.

use super::regs::{
    BLOCK_BOUNDARY, DESC_BYTES, DESC_COMPLETED, DESC_EOP, DESC_MAGIC, DESC_STOP, MAX_BLOCK, MAX_DESC_LEN,
};
use crate::dma::{Direction, DmaBuffer, Segment};
use crate::{Error, Result};
use serde::Serialize;
use std::sync::atomic::AtomicU32;

/// One descriptor as written to descriptor memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Descriptor {
    /// Magic, Nxt_adj and control bits (the first 32-bit word).
    pub word0: u32,
    pub len: u32,
    pub src: u64,
    pub dst: u64,
    pub next: u64,
}

impl Descriptor {
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(&self.word0.to_le_bytes());
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.src.to_le_bytes());
        b[16..24].copy_from_slice(&self.dst.to_le_bytes());
        b[24..32].copy_from_slice(&self.next.to_le_bytes());
        b
    }
}

/// One contiguous piece of a transfer: `len` bytes at host bus `host` and card address `card`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub host: u64,
    pub card: u64,
    pub len: u64,
}

/// Cut `[offset, offset+len)` of a buffer with these segments into pieces that are each
/// bus-contiguous and at most `MAX_DESC_LEN` long, paired with consecutive card addresses.
pub(crate) fn split(segments: &[Segment], offset: u64, len: u64, card: u64) -> Result<Vec<Piece>> {
    let mut pieces = Vec::new();
    let (mut at, end) = (offset, offset + len);
    for s in segments {
        let s_end = s.offset + s.len;
        if at >= end {
            break;
        }
        if s_end <= at || s.offset > at {
            continue;
        }
        let stop = s_end.min(end);
        while at < stop {
            let n = (stop - at).min(MAX_DESC_LEN);
            pieces.push(Piece { host: s.bus + (at - s.offset), card: card + (at - offset), len: n });
            at += n;
        }
    }
    if at < end {
        return Err(Error::Device(format!(
            "buffer bytes {at:#x}..{end:#x} are in no bus segment: the buffer's segment list is incomplete"
        )));
    }
    Ok(pieces)
}

/// A chain laid out: descriptors plus what the SGDMA registers need.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    pub dir: Direction,
    pub descriptors: Vec<Descriptor>,
    /// Bus address of the first descriptor (SGDMA +0x80/+0x84).
    pub first: u64,
    /// Extra adjacent descriptors after the first (SGDMA +0x88).
    pub first_adj: u32,
    pub bytes: u64,
}

/// Lay `pieces` out as descriptors, descriptor `i` at bus address `bus(i)`; adjacent blocks
/// break where bus addresses stop being consecutive, at 4 KiB boundaries and every 64.
pub(crate) fn link(dir: Direction, pieces: &[Piece], bus: impl Fn(usize) -> Option<u64>) -> Result<Chain> {
    let n = pieces.len();
    let addrs: Vec<u64> = (0..n)
        .map(|i| {
            bus(i).filter(|a| a % DESC_BYTES == 0).ok_or_else(|| {
                Error::Device(format!("descriptor {i} has no 32-byte aligned bus address in descriptor memory"))
            })
        })
        .collect::<Result<_>>()?;
    // block_end[i]: index of the last descriptor in i's block.
    let mut block_end = vec![0usize; n];
    let mut start = 0;
    for i in 1..=n {
        let breaks =
            i == n || addrs[i] != addrs[i - 1] + DESC_BYTES || addrs[i] % BLOCK_BOUNDARY == 0 || i - start == MAX_BLOCK;
        if breaks {
            block_end[start..i].iter_mut().for_each(|e| *e = i - 1);
            start = i;
        }
    }
    let descriptors = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let last = i + 1 == n;
            let (next, adj) = if last { (0, 0) } else { (addrs[i + 1], block_end[i + 1] - (i + 1)) };
            let ctrl = if last { DESC_STOP | DESC_COMPLETED | DESC_EOP } else { 0 };
            let (src, dst) = match dir {
                Direction::H2c => (p.host, p.card),
                Direction::C2h => (p.card, p.host),
            };
            Descriptor { word0: DESC_MAGIC << 16 | (adj as u32) << 8 | ctrl, len: p.len as u32, src, dst, next }
        })
        .collect();
    Ok(Chain {
        dir,
        descriptors,
        first: addrs.first().copied().unwrap_or(0),
        first_adj: block_end.first().copied().unwrap_or(0) as u32,
        bytes: pieces.iter().map(|p| p.len).sum(),
    })
}

/// Copy the chain into descriptor memory (descriptor `i` at buffer offset `32 * i`).
pub(crate) fn write_chain(mem: &dyn DmaBuffer, chain: &Chain) -> Result<()> {
    let need = chain.descriptors.len() * DESC_BYTES as usize;
    if need > mem.len() {
        return Err(Error::Device(format!("descriptor memory holds {} bytes, the chain needs {need}", mem.len())));
    }
    for (i, d) in chain.descriptors.iter().enumerate() {
        let bytes = d.to_bytes();
        // SAFETY: `need <= mem.len()` so [32 i, 32 i + 32) is inside the buffer, which the
        // engine owns; the card does not read it until the next run starts.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem.as_ptr().add(i * 32), 32) };
    }
    Ok(())
}

/// The poll-mode writeback word at the start of `mem`, which `XdmaEngine::new` checked to be
/// at least 4 bytes long and 4-byte aligned.
pub(crate) fn writeback_word(mem: &dyn DmaBuffer) -> &AtomicU32 {
    debug_assert!(mem.len() >= 4 && mem.as_ptr() as usize % 4 == 0);
    // SAFETY: 4 aligned bytes inside the buffer (checked at construction), living as long as `mem`; the card
    // writes it as a whole 32-bit word and the CPU only touches it atomically.
    unsafe { AtomicU32::from_ptr(mem.as_ptr().cast::<u32>()) }
}

/// Status register bits in words; `dir` decides which side each error field is about.
pub fn decode_status(dir: Direction, status: u32) -> String {
    let mut parts: Vec<String> = Vec::new();
    let flags: [(u32, &str); 7] = [
        (1 << 0, "busy: the engine is still working"),
        (1 << 1, "descriptor_stopped: the engine reached a descriptor with STOP set"),
        (1 << 2, "descriptor_completed: a descriptor with COMPLETED set finished"),
        (
            1 << 3,
            "align_mismatch: a descriptor or data address or length broke the engine's alignment rules \
             (descriptors 32-byte aligned, adjacent blocks within one 4 KiB page, alignments register +0x4C)",
        ),
        (
            1 << 4,
            "magic_stopped: descriptor magic was not 0xAD4B (descriptor memory is not what the engine \
             reads at that bus address, or was overwritten)",
        ),
        (1 << 5, "invalid_length: a descriptor length was 0, above 0x0FFFFFFF, or not allowed for this channel"),
        (1 << 6, "idle_stopped: the engine stopped because run was cleared"),
    ];
    for (bit, text) in flags {
        if status & bit != 0 {
            parts.push(text.into());
        }
    }
    const PCIE: [&str; 5] =
        ["unsupported request", "completer abort", "parity error", "poisoned TLP (header EP)", "unexpected completion"];
    const AXI: [&str; 5] = ["decode error", "slave error", "reserved bit 2", "reserved bit 3", "reserved bit 4"];
    let host_hint = "the host bus address is not mapped for the card (IOMMU mapping, freed buffer, Bus Master off)";
    let card_hint = "no card memory at that AXI address (check --card-addr and --card-size)";
    let (read_side, read_names, read_hint, write_side, write_names, write_hint) = match dir {
        Direction::H2c => ("host memory read over PCIe", PCIE, host_hint, "card AXI write", AXI, card_hint),
        Direction::C2h => (
            "card AXI read",
            AXI,
            card_hint,
            "host memory write (reported by the sim card; real hardware cannot see a dropped posted write: check dmesg for IOMMU faults)",
            PCIE,
            host_hint,
        ),
    };
    let fields = [
        ("read_error", 9, read_side, read_names, read_hint),
        ("write_error", 14, write_side, write_names, write_hint),
        ("desc_error", 19, "descriptor fetch over PCIe", PCIE, "descriptor memory is not reachable at its bus address"),
    ];
    for (name, shift, side, names, hint) in fields {
        let v = (status >> shift) & 0x1f;
        if v != 0 {
            let which: Vec<&str> = (0..5).filter(|b| v & (1 << b) != 0).map(|b| names[b]).collect();
            parts.push(format!("{name} ({side}): {}: {hint}", which.join(", ")));
        }
    }
    if parts.is_empty() {
        parts.push("no status bits set".into());
    }
    format!("{status:#010x}: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, bus: u64, len: u64) -> Segment {
        Segment { offset, bus, len }
    }

    #[test]
    fn split_follows_segments_and_the_length_limit() {
        let segs = [seg(0, 0x10000, 0x1000), seg(0x1000, 0x5000, 0x1000), seg(0x2000, 0x9000, 0x1000)];
        let p = split(&segs, 0x800, 0x1000, 0x40).unwrap();
        assert_eq!(
            p,
            vec![Piece { host: 0x10800, card: 0x40, len: 0x800 }, Piece { host: 0x5000, card: 0x840, len: 0x800 }]
        );
        let big = split(&[seg(0, 0x1_0000_0000, 0x2000_0000)], 0, 0x2000_0000, 0).unwrap();
        assert_eq!(big.len(), 3);
        assert!(big.iter().all(|p| p.len <= 0x0fff_ffff && p.host % 4096 == 0));
        assert_eq!(big.iter().map(|p| p.len).sum::<u64>(), 0x2000_0000);
        assert!(split(&segs[..1], 0, 0x1800, 0).is_err(), "bytes beyond the segments");
    }

    #[test]
    fn blocks_never_cross_4k_and_adjacency_counts_match() {
        let pieces: Vec<Piece> = (0..200).map(|i| Piece { host: 0x10_0000 + i * 8, card: i * 8, len: 8 }).collect();
        // Descriptor memory starting 32 bytes before a page boundary.
        let base = 0x7000 - 32;
        let c = link(Direction::H2c, &pieces, |i| Some(base + 32 * i as u64)).unwrap();
        assert_eq!((c.first, c.first_adj), (base, 0), "the first block is cut at the page boundary");
        // Walk the chain as the engine does and check every block stays in one page.
        let (mut addr, mut extra, mut seen) = (c.first, c.first_adj as u64, 0);
        let at = |a: u64| ((a - base) / 32) as usize;
        loop {
            assert!((addr & 0xfff) + (extra + 1) * 32 <= 0x1000, "block at {addr:#x} crosses 4 KiB");
            assert!(extra < 64);
            let last = at(addr) + extra as usize;
            seen += extra as usize + 1;
            let d = c.descriptors[last];
            if d.word0 & 1 != 0 {
                break;
            }
            (addr, extra) = (d.next, ((d.word0 >> 8) & 0x3f) as u64);
        }
        assert_eq!(seen, 200);
        let lastd = c.descriptors[199];
        assert_eq!((lastd.word0 & 0xff, lastd.next, lastd.word0 >> 16), (0x13, 0, 0xad4b));
        assert!(c.descriptors[..199].iter().all(|d| d.word0 & 0xff == 0));
        // C2H swaps source and destination.
        let c2h = link(Direction::C2h, &pieces[..1], |_| Some(0x1000)).unwrap();
        assert_eq!((c2h.descriptors[0].src, c2h.descriptors[0].dst), (0, 0x10_0000));
        assert!(link(Direction::H2c, &pieces[..1], |_| Some(0x1010)).is_err(), "misaligned");
    }
}
