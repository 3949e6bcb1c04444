//! The C2H writeback records of a stream run checked against the packets sent (PG195 "C2H Stream
//! Writeback"; libxdma.h `struct xdma_result`): magic 0x52B4, EOP on each packet's last buffer
//! only, every buffer full but the last (which is rounded up to 64 bytes, so only its record says
//! how much it holds), the lengths adding up to what was sent.

use super::{word, Packet, XdmaStreamEngine};
use crate::dma::engines::xdma::desc::Chain;
use crate::dma::engines::xdma::regs::*;
use crate::mmio::Width;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

impl XdmaStreamEngine {
    /// Record `i`'s status and length as the engine wrote them.
    fn record(&self, i: usize) -> (u32, u32) {
        let at = i * RESULT_BYTES as usize;
        (word(&*self.records, at).load(Ordering::Acquire), word(&*self.records, at + 4).load(Ordering::Acquire))
    }

    /// What C2H writeback records `first..first + count` (of `n` in the chain) say, for an error
    /// line (the first ones and the last).
    pub(super) fn records_text(&self, first: usize, count: usize, n: usize) -> String {
        let show = |i: usize| {
            let (s, l) = self.record(i);
            if s == 0 && l == 0 {
                format!("#{i} not written")
            } else {
                let eop = if s & RESULT_EOP != 0 { " EOP" } else { "" };
                format!("#{i} magic {:#06x} length {l}{eop}", s >> 16)
            }
        };
        let end = (first + count).min(n);
        let mut parts: Vec<String> = (first..end.min(first + 4)).map(show).collect();
        if end > first + 4 {
            parts.push(format!("... {}", show(end - 1)));
        }
        format!("C2H writeback records: {}", parts.join(", "))
    }

    /// Check the records of the last run against the prepared packets.
    pub(in crate::dma::engines::xdma) fn check_records(&self) -> Result<()> {
        let p = self.prepared.as_ref().ok_or_else(|| Error::usage("XDMA stream run before prepare"))?;
        let n = p.c2h.descriptors.len();
        for (k, pk) in p.packets.iter().enumerate() {
            self.check_packet(&p.c2h, k, p.packets.len(), pk).map_err(|w| {
                Error::Device(format!(
                    "XDMA C2H stream channel {}: packet {k} of {}: {w}: the packet that came back is not the {}-byte \
                     packet sent on H2C {} ({})",
                    self.ch,
                    p.packets.len(),
                    pk.len,
                    self.ch,
                    self.records_text(pk.first, pk.n, n)
                ))
            })?;
        }
        Ok(())
    }

    /// Where the C2H writeback records live (tests: a card that writes them wrong).
    #[cfg(test)]
    pub(in crate::dma::engines::xdma) fn records_mem(&self) -> &dyn crate::dma::DmaBuffer {
        &*self.records
    }

    /// Check packet `k`'s records: magic, EOP on its last buffer only, every buffer but the last
    /// full, and the lengths adding up to what was sent. What is wrong, in words.
    fn check_packet(&self, c2h: &Chain, k: usize, of: usize, pk: &Packet) -> std::result::Result<(), String> {
        let n = c2h.descriptors.len();
        let mut total = 0u64;
        for i in pk.first..pk.first + pk.n {
            let d = &c2h.descriptors[i];
            let (status, len) = self.record(i);
            if let Some(t) = &self.trace {
                t.writeback("xdma-st", "c2h-record", d.src, Width::B32, status.into());
            }
            let last = i + 1 == pk.first + pk.n;
            let wrong = if status >> 16 != RESULT_MAGIC {
                Some(format!("magic {:#06x}, not {RESULT_MAGIC:#06x}", status >> 16))
            } else if (status & RESULT_EOP != 0) != last {
                Some(if last { "no EOP on the packet's last buffer".into() } else { format!("EOP after {len} bytes") })
            } else if (!last && len != d.len) || len > d.len {
                // Only the last buffer may be part full: it is rounded up to 64 bytes.
                Some(format!("length {len} in a {}-byte buffer", d.len))
            } else {
                None
            };
            if let Some(w) = wrong {
                return Err(format!("writeback record {i} of {n} has {w}"));
            }
            total += u64::from(len);
        }
        if total != pk.len {
            return Err(format!("{total} bytes came back in packet {k} of {of}, {} were sent", pk.len));
        }
        Ok(())
    }
}
