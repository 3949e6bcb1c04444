//! A stream batch laid out as the two chains of one run (`XdmaStreamEngine::prepare_batch`): the
//! H2C chain with EOP on each packet's last descriptor, the C2H chain of host buffers each
//! pointing at its writeback record (libxdma.c `transfer_init`, `transfer_build`).

use super::XdmaStreamEngine;
use crate::dma::engines::xdma::desc::{self, Chain, Piece};
use crate::dma::engines::xdma::regs::*;
use crate::dma::{Direction, DmaBuffer};
use crate::{Error, Result};

impl XdmaStreamEngine {
    /// `len` bytes of `buf` at `off` as pieces that are bus-contiguous and end at C2H buffer
    /// boundaries of the bus address where `cut` (as pages of a user buffer are).
    pub(super) fn pieces(buf: &dyn DmaBuffer, off: u64, len: u64, cut: bool, out: &mut Vec<Piece>) -> Result<()> {
        for p in desc::split(buf.segments(), off, len, 0)? {
            if !cut {
                out.push(p);
                continue;
            }
            let mut at = 0;
            while at < p.len {
                let n = (C2H_BUF - (p.host + at) % C2H_BUF).min(p.len - at);
                out.push(Piece { host: p.host + at, card: 0, len: n });
                at += n;
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
