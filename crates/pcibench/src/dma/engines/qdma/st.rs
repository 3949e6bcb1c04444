//! Stream (ST) queues, and the vendor's example design as their far end.
//!
//! An H2C ST queue's ring holds 16-byte descriptors (PG302 "H2C Stream Descriptor (16B)":
//! metadata, the packet's length [47:32], then the source address); in internal mode each is one
//! whole, bus-contiguous packet of up to 64K-1 bytes (a packet cannot span descriptors), and the
//! ring's status writeback follows the last slot as on MM queues. A C2H
//! ST queue's ring holds 8-byte descriptors, each one receive buffer of the size the prefetch
//! context's index selects in GLBL_C2H_BUF_SZ (`struct qdma_c2h_desc`); they are credits: the
//! engine takes as many buffers as a packet needs and reports it in the queue's completion
//! (CMPT) ring, one entry per packet (`S_C2H_CMPT_ENTRY_*`: colour bit 1, error 2, descriptors
//! used 3, length [19:4]). The engine writes each entry with the ring's current colour, which
//! flips each time its producer index wraps, and reports them in the status descriptor after
//! the last entry when the context's trigger says (`trigger.rs`); the driver takes entries up to
//! that producer index, each checked by colour (libqdma `descq_process_completion_st_c2h`, DPDK
//! `qdma_recv_pkts_st`). Buffers go back by the C2H PIDX doorbell, ring space by the CMPT CIDX
//! doorbell (`QDMA_DMAP_SEL_CMPT_*`, written with the trigger mode and status-descriptor enable
//! as libqdma's `qdma_queue_cmpt_cidx_update` does). Completion is polled on the ring, or seen by
//! the interrupt of the CMPT context's `en_int` (`irq.rs`).
//!
//! The far end is the vendor's example design (`ExampleDesign`): its C2H traffic generator
//! writes `count` packets of `len` bytes of a 16-bit incrementing pattern to one queue when
//! started, and its H2C checker compares every packet with that pattern and keeps a match bit
//! (qdma_run_test_pf.sh: "16 bit incremental data"; the DPDK testapp's user BAR registers).
//! Nothing on a card says it carries that design: pcibench knows it on `sim-qdma-st` and
//! refuses a stream run elsewhere (`far_end`).

use super::regs::*;
use crate::access::BarRegion;
use crate::pci::DeviceInfo;
use crate::Result;
use serde::{Deserialize, Serialize};

/// The simulated card that carries the vendor's example design (shared with its model).
pub const EXAMPLE_SIM_CARD: &str = "sim-qdma-st";
/// The C2H buffer-size table index pcibench uses: the vendor's default entry 0 (4096 bytes).
pub(crate) const BUF_SZ_IDX: u8 = 0;
/// Bytes per C2H receive buffer at `BUF_SZ_IDX` in the vendor's table.
pub(crate) const BUF_BYTES: u64 = VENDOR_C2H_BUF_SIZES[BUF_SZ_IDX as usize] as u64;
/// The longest packet the example design's generator writes with these buffers.
pub const MAX_PACKET: u64 = EX_MAX_BUFFERS * BUF_BYTES;
// Each H2C packet goes in one descriptor, whose length field holds at most 64K-1.
const _: () = assert!(MAX_PACKET <= H2C_ST_MAX_PACKET);

/// Why a stream run cannot go on here, as the one line.
pub fn no_far_end() -> String {
    "stream queues work, but nothing on the card is known to generate or consume data that pcibench can check: \
     pcibench drives stream queues against the vendor's example design (its C2H generator and H2C checker), \
     which has no identifier register; if the card carries it, say so with --design qdma-example (which also \
     consents to writing its user BAR; docs/engines/qdma-stream.md)"
        .into()
}

/// What the user asserts the card carries behind its stream queues (`--design`): nothing on a
/// card says so, the example design having no identifier register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Design {
    /// The vendor's QDMA example design: C2H traffic generator and H2C checker in the user BAR
    /// (registers below `EX_*`). Asserting it consents to writing those registers.
    #[serde(rename = "qdma-example")]
    QdmaExample,
}

/// Which of a QDMA's engines a run drives (`--mode`): where the card has both, MM unless asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Mm,
    St,
}

/// Whether the device is known to carry the vendor's QDMA example design: the simulated card
/// that models it, or a card the user asserted it of (`--design qdma-example`).
pub fn far_end(info: &DeviceInfo, design: Option<Design>) -> bool {
    design == Some(Design::QdmaExample) || (info.simulated && info.address == EXAMPLE_SIM_CARD)
}

/// How a transfer of `size` bytes is cut into packets: `count` packets of `len` bytes each,
/// `len` at most `MAX_PACKET` and the same for all (the generator has one length register), and
/// the receive buffers each takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packets {
    pub count: u64,
    pub len: u64,
    pub buffers: u64,
}

impl Packets {
    pub fn of(size: u64) -> Packets {
        let mut count = size.div_ceil(MAX_PACKET).max(1);
        while size % count != 0 {
            count += 1;
        }
        let len = size / count;
        Packets { count, len, buffers: len.div_ceil(BUF_BYTES).max(1) }
    }

    /// Host bytes the transfer's receive buffers take.
    pub fn stride(&self) -> u64 {
        self.count * self.buffers * BUF_BYTES
    }
}

/// The example design's data: a 16-bit little-endian count from 0, restarting each packet.
pub fn pattern(len: u64, out: &mut Vec<u8>) {
    out.extend((0..len).map(|i| ((i / 2) >> (8 * (i % 2))) as u8));
}

/// A transfer's bytes as the example design makes (C2H) or checks (H2C) them.
pub fn transfer_bytes(size: u64) -> Vec<u8> {
    let p = Packets::of(size);
    let mut v = Vec::with_capacity(size as usize);
    for _ in 0..p.count {
        pattern(p.len, &mut v);
    }
    v
}

/// The example design's registers in the user BAR.
pub struct ExampleDesign {
    pub bar: Box<dyn BarRegion>,
}

impl ExampleDesign {
    fn wr(&self, off: u64, v: u32) -> Result<()> {
        wr(&*self.bar, off, v)
    }

    /// Start the generator: `count` packets of `len` bytes to hardware queue `qid`.
    pub fn generate(&self, qid: u32, len: u64, count: u32) -> Result<()> {
        self.wr(EX_C2H_QID, qid)?;
        self.wr(EX_C2H_LEN, len as u32)?;
        self.wr(EX_C2H_COUNT, count)?;
        self.wr(EX_C2H_CONTROL, EX_C2H_START)
    }

    /// Stop the generator (the testapp clears the start bit when it is done).
    pub fn stop(&self) -> Result<()> {
        self.wr(EX_C2H_CONTROL, 0)
    }

    pub fn clear_checker(&self) -> Result<()> {
        self.wr(EX_H2C_CONTROL, EX_H2C_CLEAR)
    }

    /// The checker's verdict on every packet since it was cleared.
    pub fn checker(&self) -> Result<std::result::Result<(), String>> {
        let v = rd(&*self.bar, EX_H2C_STATUS)?;
        Ok(if v & EX_H2C_MATCH != 0 {
            Ok(())
        } else {
            Err(format!(
                "the example design's H2C checker reports no match (user BAR 0x10 reads {v:#x}): a packet was not the \
                 16-bit incrementing pattern it checks"
            ))
        })
    }
}

/// One C2H queue's completion ring as the driver reads it.
pub(crate) struct Cmpt {
    pub ring: super::ring::Ring,
    /// The colour a new entry carries (the context starts at 1; it flips at each wrap).
    pub color: bool,
}

/// One completion entry, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub len: u64,
    pub err: bool,
    pub desc_used: bool,
}

impl Cmpt {
    /// The next entry if the engine has written it (its colour is the current one).
    #[inline]
    pub fn peek(&self) -> Option<Entry> {
        // SAFETY: slot cidx < slots lies inside the ring's memory (sized for 32-byte slots);
        // the card writes the entry whole, the colour last; the acquire load orders the reads.
        let w = unsafe {
            let at = self.ring.base_ptr().add((self.ring.cidx as u64 * self.ring.desc) as usize);
            std::sync::atomic::AtomicU32::from_ptr(at.cast::<u32>()).load(std::sync::atomic::Ordering::Acquire)
        };
        ((w & CMPT_COLOR != 0) == self.color).then_some(Entry {
            len: ((w >> CMPT_LEN_SHIFT) & CMPT_LEN) as u64,
            err: w & CMPT_ERR != 0,
            desc_used: w & CMPT_DESC_USED != 0,
        })
    }

    /// The producer index the engine last reported in the status descriptor after the last
    /// entry: entries up to it are the driver's (the trigger mode decides when it moves).
    #[inline]
    pub fn reported(&self) -> u32 {
        // SAFETY: the status slot follows the ring's `slots` entries inside its memory (sized
        // for 32-byte slots plus one), 4-byte aligned; the card writes it as a whole word, after
        // the entries it reports, and the acquire load orders the entries' reads after it.
        let w = unsafe {
            let at = self.ring.base_ptr().add((self.ring.slots as u64 * self.ring.desc) as usize);
            std::sync::atomic::AtomicU32::from_ptr(at.cast::<u32>()).load(std::sync::atomic::Ordering::Acquire)
        };
        w & CMPT_STS_PIDX
    }

    /// Consume the entry `peek` returned.
    #[inline]
    pub fn advance(&mut self) {
        self.ring.cidx += 1;
        if self.ring.cidx == self.ring.slots {
            self.ring.cidx = 0;
            self.color = !self.color;
        }
    }
}

/// The CMPT CIDX doorbell value: the new consumer index with the trigger mode, counter and
/// timer index and status descriptor enable the context was given (libqdma writes them with
/// every update, `qdma_queue_cmpt_cidx_update`; with the context's `full_upd` clear, as libqdma
/// leaves it without adaptive moderation, the engine takes only the index), and in interrupt
/// mode the interrupt enable that re-arms the ring (`QDMA_DMAP_SEL_CMPT_IRQ_EN_MASK`, libqdma's
/// `irq_en`).
pub(crate) fn cmpt_doorbell(cidx: u32, irq: bool, t: &super::trigger::CmptTrigger) -> u32 {
    cidx & DB_PIDX
        | (t.count_idx as u32) << DB_CMPT_CNT_SHIFT
        | (t.timer_idx as u32) << DB_CMPT_TMR_SHIFT
        | t.trig_mode() << DB_CMPT_TRIG_SHIFT
        | DB_CMPT_STAT_EN
        | if irq { DB_CMPT_IRQ_EN } else { 0 }
}

/// An H2C ST descriptor sending one whole packet of `len` bytes from `src` (PG302 "H2C Stream
/// Descriptor (16B)": in internal mode `len` [47:32] is the packet's length, a packet never spans
/// descriptors, [63:48] reserved). The metadata word [31:0] carries the length in its upper half
/// as libqdma's `pld_len` (qdma_descq.c descq_proc_st_h2c_request); no SOP/EOP flags, which
/// libqdma sets only for its bypass format.
pub(crate) fn h2c_desc(src: u64, len: u64) -> super::ring::Desc {
    let w0 = (len & 0xffff) << 16 | (len & 0xffff) << 32;
    [w0.to_le(), src.to_le(), 0, 0]
}

/// A C2H ST descriptor: one receive buffer at `dst`.
pub(crate) fn c2h_desc(dst: u64) -> super::ring::Desc {
    [dst.to_le(), 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_descriptors_packets_and_the_pattern() {
        // PG302: metadata [31:0] (libqdma's pld_len in [31:16]), len [47:32], [63:48] reserved.
        assert_eq!(h2c_desc(0x1000, 64), [64 << 16 | 64 << 32, 0x1000, 0, 0]);
        assert_eq!(c2h_desc(0xabc0)[0], 0xabc0);
        let every = super::super::trigger::CmptTrigger::default();
        assert_eq!(cmpt_doorbell(5, false, &every), 5 | 1 << 27 | 1 << 24);
        assert_eq!(cmpt_doorbell(5, true, &every), 5 | 1 << 28 | 1 << 27 | 1 << 24);
        // Timer_Count on counter 6, timer 0: trig_mode 5 [26:24], counter index [19:16].
        let count = "count:6".parse().unwrap();
        assert_eq!(cmpt_doorbell(5, false, &count), 5 | 6 << 16 | 5 << 24 | 1 << 27);
        let timer = "timer:9".parse().unwrap();
        assert_eq!(cmpt_doorbell(0, true, &timer), 9 << 20 | 4 << 24 | 1 << 27 | 1 << 28);
        assert_eq!(Packets::of(64), Packets { count: 1, len: 64, buffers: 1 });
        assert_eq!(Packets::of(10 << 10), Packets { count: 1, len: 10 << 10, buffers: 3 });
        // 64 KiB is more than 7 buffers of 4 KiB: four packets of 16 KiB.
        assert_eq!(Packets::of(64 << 10), Packets { count: 4, len: 16 << 10, buffers: 4 });
        assert_eq!(Packets::of(64 << 10).stride(), 64 << 10);
        assert_eq!(Packets::of(100).stride(), 4096);
        let mut v = Vec::new();
        pattern(5, &mut v);
        assert_eq!(v, [0, 0, 1, 0, 2]);
        assert_eq!(transfer_bytes(64 << 10)[16 << 10..(16 << 10) + 4], [0, 0, 1, 0]);
    }
}
