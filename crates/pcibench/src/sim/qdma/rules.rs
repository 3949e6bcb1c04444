//! Rules of PG302 and the vendor's drivers that a driver can break without the IP reporting it,
//! each checked in one function the register front end and the queues' descriptor processing
//! call: a test shows a driver breaking one, whatever drives the model's progress.

use super::layout::Ip;
use super::state::Shared;

/// GLBL_ERR_INT's arm bit and the IP's function field ([7:0] soft 3.x, [11:0] EQDMA and CPM5).
const ERR_INT_ARM: u32 = 1 << 24;

fn err_int_func(ip: Ip) -> u32 {
    if matches!(ip, Ip::Eqdma | Ip::Cpm5) {
        0xfff
    } else {
        0xff
    }
}

/// GLBL_ERR_INT is the device's one error interrupt: the master PF's driver takes it
/// (libqdma `qdma_err_intr_setup`, on the master PF only) and keeps it armed for itself. A write
/// from this function that points it elsewhere while it is armed for another function leaves
/// that driver deaf to errors.
pub(super) fn err_int_taken(s: &Shared, current: u32, value: u32) {
    let mask = err_int_func(s.ip);
    let (owner, ours, to) = (current & mask, u32::from(s.cfg.func_id) & mask, value & mask);
    if current & ERR_INT_ARM != 0 && owner != ours && to != owner {
        s.violation(format!(
            "GLBL_ERR_INT {current:#x} is armed for function {owner}, and function {ours} rewrote it to {value:#x}: \
             the master PF's driver no longer gets the error interrupt (libqdma takes it only on the master PF)"
        ));
    }
}

/// An H2C stream descriptor in internal mode is one whole packet: `len` [47:32] is the packet's
/// length (a packet cannot span descriptors; at most 64K-1 bytes), [63:48] reserved (PG302 "H2C
/// Stream Descriptor (16B)"). SOP/EOP flags there belong to the example design's own bypass
/// format, which libqdma writes only with `desc_bypass`.
pub(super) fn h2c_st_descriptor(s: &Shared, qid: u32, slot: u32, reserved: u64) {
    if reserved != 0 {
        s.violation(format!(
            "h2c queue {qid} slot {slot}: reserved descriptor bits [63:48] are {reserved:#x}: an internal-mode H2C \
             stream descriptor is one packet and has no SOP/EOP (PG302 \"H2C Stream Descriptor (16B)\")"
        ));
    }
}
