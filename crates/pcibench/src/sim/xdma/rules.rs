//! The rules of PG195 a driver can break without the IP reporting anything (or where it reports
//! only "invalid length"), each checked in one function the register front end and the channels'
//! descriptor processing call: so a test can show a driver breaking one, whatever drives the
//! model's progress.

use super::chain::Desc;
use super::engine::Stop;
use super::state::*;
use std::sync::atomic::Ordering;

/// C2H stream buffers are whole multiples of 64 bytes (PG195 and PG344 "Length Granularity",
/// footnote 1: "Each C2H descriptor must be sized as a multiple of 64 Bytes").
pub(crate) const C2H_STREAM_GRANULE: u32 = 64;

/// Whether the channel reads busy now, without spending a `set_linger` read.
fn busy(ch: &Channel) -> bool {
    let lingers = ch.control.load(Ordering::Acquire) & CTRL_RUN == 0 && ch.linger.load(Ordering::Acquire) > 0;
    lingers || ch.status.load(Ordering::Acquire) & ST_BUSY != 0
}

/// A write to a channel's writeback address or its SGDMA descriptor registers (`what`) while the
/// channel is busy: the run in flight may still write back to the old address or fetch from the
/// new chain half-programmed (PG195 gives no behaviour for it; libxdma waits for idle first).
pub(super) fn reprogram(shared: &Shared, ch: &Channel, what: &str) {
    if busy(ch) {
        shared.violation(format!(
            "{} channel {}: {what} written while the channel is busy (run cleared but not yet idle): the run in \
             flight may still write back or fetch there",
            ch.dir.to_string().to_uppercase(),
            ch.index
        ));
    }
}

/// A C2H stream descriptor's length must be a multiple of 64 bytes; a real card stops with
/// invalid_length at best.
pub(super) fn c2h_stream_length(d: &Desc, at: u64) -> Result<(), Stop> {
    if d.len % C2H_STREAM_GRANULE != 0 {
        return Err((
            ST_INVALID_LENGTH,
            format!(
                "C2H stream descriptor at {at:#x} has length {} (not a multiple of {C2H_STREAM_GRANULE}: PG195 \
                 \"Length Granularity\" footnote 1)",
                d.len
            ),
        ));
    }
    Ok(())
}

/// The bytes an H2C stream descriptor puts on the AXI4-Stream bus: the IP packs each
/// descriptor's data from lane 0 and does not pack across descriptors, so a descriptor that ends
/// mid-beat without EOP leaves a beat with a partial tkeep inside a packet (PG195 "DMA H2C
/// Stream"), which AXI4-Stream allows only on a packet's last beat (PG195 "DMA C2H Stream": the
/// loopback's C2H side takes every beat but the last as full). The model passes the beat on as
/// the far end sees it: whole, its empty lanes as zero bytes, and says so. `beat`: the datapath
/// width in bytes.
pub(super) fn h2c_stream_beats(shared: &Shared, ch: &Channel, d: &Desc, eop: bool, beat: u64) -> u64 {
    let len = d.len as u64;
    if eop || len % beat == 0 {
        return 0;
    }
    shared.violation(format!(
        "H2C stream channel {}: a {len}-byte descriptor without EOP ends mid-beat of the {beat}-byte datapath: its \
         last beat goes out with a partial tkeep inside the packet (PG195 \"DMA H2C Stream\": the DMA does not pack \
         data across descriptors), which the far end takes as {} bytes of padding",
        ch.index,
        beat - len % beat
    ));
    beat - len % beat
}
