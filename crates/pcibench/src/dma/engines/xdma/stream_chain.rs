//! A stream batch laid out as the two chains of one run (`XdmaStreamEngine::prepare_batch`): the
//! H2C chain with EOP on each packet's last descriptor, the C2H chain of host buffers each
//! pointing at its writeback record (libxdma.c `transfer_init`, `transfer_build`).

use super::XdmaStreamEngine;
use crate::dma::engines::xdma::desc::{self, Chain, Piece};
use crate::dma::engines::xdma::regs::*;
use crate::dma::{Direction, DmaBuffer};
use crate::{Error, Result};

impl XdmaStreamEngine {
    /// A packet's `len` bytes of `buf` at `off` as the H2C descriptors that send it: one per
    /// bus-contiguous piece, cut only where a beat of the `beat`-byte datapath ends. The IP packs
    /// each descriptor's data from lane 0 and never across descriptors, so a piece ending mid-beat
    /// would put a partial beat inside the packet, which AXI4-Stream allows only on its last (PG195
    /// "DMA H2C Stream"). A packet that cannot be cut so is refused.
    pub(super) fn h2c_pieces(buf: &dyn DmaBuffer, off: u64, len: u64, beat: u64, out: &mut Vec<Piece>) -> Result<()> {
        let pieces = desc::split(buf.segments(), off, len, 0)?;
        let mut at = 0;
        for (i, p) in pieces.iter().enumerate() {
            at += p.len;
            if i + 1 < pieces.len() && at % beat != 0 {
                return Err(Error::Unsupported(format!(
                    "a {len}-byte H2C stream packet at buffer offset {off:#x} crosses a bus segment {at} bytes in, \
                     not a whole {beat}-byte beat of the datapath (PG195 \"DMA H2C Stream\": the DMA does not pack \
                     data across descriptors): start packets on {beat}-byte boundaries or use a buffer with \
                     contiguous pages (--buffer hugepage)"
                )));
            }
            out.push(*p);
        }
        Ok(())
    }

    /// The C2H buffers a packet of `len` bytes lands in at `off` of `buf`: each a multiple of 64
    /// bytes (PG195 "Length Granularity", footnote 1: every C2H stream descriptor is sized so;
    /// the packet itself may be any length, its last buffer only partly filled), at most `C2H_BUF`
    /// long counted from the packet's start, and bus-contiguous. The packet's bytes rounded up to
    /// 64 must lie in the buffer, and its bus segments may break only at a multiple of 64 bytes
    /// from the packet's start; otherwise the packet is refused.
    pub(super) fn c2h_pieces(buf: &dyn DmaBuffer, off: u64, len: u64, out: &mut Vec<Piece>) -> Result<()> {
        let room = len.next_multiple_of(C2H_GRANULE);
        if off.checked_add(room).is_none_or(|e| e > buf.len() as u64) {
            return Err(Error::usage(format!(
                "a {len}-byte C2H stream packet at offset {off:#x} needs {room} bytes of receive buffer (whole \
                 {C2H_GRANULE}-byte multiples, PG195 \"Length Granularity\"); the {}-byte buffer ends before",
                buf.len()
            )));
        }
        let mut at = 0;
        for p in desc::split(buf.segments(), off, room, 0)? {
            if at % C2H_GRANULE != 0 {
                return Err(Error::Unsupported(format!(
                    "a {len}-byte C2H stream packet at buffer offset {off:#x} crosses a bus segment {at} bytes in, \
                     not a multiple of {C2H_GRANULE}: its C2H buffers could not each be a multiple of \
                     {C2H_GRANULE} bytes (PG195 \"Length Granularity\"); start packets on {C2H_GRANULE}-byte \
                     boundaries or use a buffer with contiguous pages (--buffer hugepage)"
                )));
            }
            let mut k = 0;
            while k < p.len {
                let n = (C2H_BUF - at % C2H_BUF).min(p.len - k);
                out.push(Piece { host: p.host + k, card: 0, len: n });
                (k, at) = (k + n, at + n);
            }
        }
        Ok(())
    }

    /// The H2C chain of a batch: one descriptor per bus-contiguous piece of each packet, EOP on
    /// each packet's last (the packet ends there; libxdma.c transfer_init), STOP | COMPLETED on
    /// the chain's last. `ends[k]`: the index of packet k's last piece.
    pub(super) fn h2c_chain(&self, pieces: &[Piece], ends: &[usize]) -> Result<Chain> {
        self.fits(pieces, &*self.h2c_desc, "H2C")?;
        let mem = &*self.h2c_desc;
        let mut chain = desc::link(Direction::H2c, pieces, |i| mem.bus_range(i as u64 * DESC_BYTES, DESC_BYTES))?;
        for &e in ends {
            chain.descriptors[e].word0 |= DESC_EOP;
        }
        desc::write_chain(mem, &chain)?;
        Ok(chain)
    }

    /// The C2H chain of a batch: one descriptor per host buffer, its source the bus address of
    /// its writeback record (libxdma.c transfer_build).
    pub(super) fn c2h_chain(&self, pieces: &[Piece]) -> Result<Chain> {
        self.fits(pieces, &*self.c2h_desc, "C2H")?;
        if pieces.len() * RESULT_BYTES as usize > self.records.len() {
            return Err(Error::Unsupported(format!(
                "{} C2H buffers need more writeback records than allocated: use fewer or smaller packets",
                pieces.len()
            )));
        }
        let mem = &*self.c2h_desc;
        let mut chain = desc::link(Direction::C2h, pieces, |i| mem.bus_range(i as u64 * DESC_BYTES, DESC_BYTES))?;
        for (i, d) in chain.descriptors.iter_mut().enumerate() {
            d.src = self.records.bus_range(i as u64 * RESULT_BYTES, RESULT_BYTES).ok_or_else(|| {
                Error::Device(format!("writeback record {i} has no bus address in the record buffer"))
            })?;
        }
        desc::write_chain(mem, &chain)?;
        Ok(chain)
    }

    fn fits(&self, pieces: &[Piece], mem: &dyn DmaBuffer, side: &str) -> Result<()> {
        let capacity = mem.len() / DESC_BYTES as usize;
        if pieces.len() > capacity {
            return Err(Error::Unsupported(format!(
                "this batch of packets needs {} {side} descriptors; descriptor memory holds {capacity}: use a \
                 smaller --size or a buffer with larger contiguous segments (hugepages)",
                pieces.len()
            )));
        }
        Ok(())
    }

    pub(super) fn trace_chain(&self, chain: &Chain, mem: &dyn DmaBuffer) {
        let Some(tr) = &self.trace else { return };
        for (i, d) in chain.descriptors.iter().enumerate() {
            let bus = mem.bus_range(i as u64 * DESC_BYTES, DESC_BYTES).unwrap_or_default();
            let fields =
                [("control", d.word0.into()), ("len", d.len.into()), ("src", d.src), ("dst", d.dst), ("next", d.next)];
            tr.descriptor("xdma-st", i as u64, bus, &d.to_bytes(), &fields);
        }
    }
}
