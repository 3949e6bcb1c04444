//! The stream queues' and example design's state in the sim QDMA (`stream.rs` acts on it),
//! apart so the shared state (`state.rs`) holds it without importing the model's behaviour.

use std::collections::HashMap;

/// GLBL_ERR_STAT's C2H ST leaf.
pub(crate) const GE_C2H_ST: u32 = 1 << 8;

/// One ST queue's engine-side indexes beyond its contexts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cmpt {
    pub pidx: u32,
    pub cidx: u32,
    /// The colour of the next entry; set from the context when it is (re)written.
    pub color: bool,
    /// The context generation the indexes belong to.
    pub gen: u64,
    /// The completion interrupt is armed (by a CIDX update with its interrupt enable), and
    /// a trigger came while it was not.
    pub armed: bool,
    pub pending: bool,
    /// When the completion timer fires (model time), while it runs (`trigger.rs`).
    pub timer_at: Option<u64>,
    /// The trigger mode, timer and counter index of the last CIDX update, where the context's
    /// `full_upd` lets an update replace the context's.
    pub upd: Option<(u32, u32, u32)>,
    /// A table entry the trigger needs was found unprogrammed (flagged once).
    pub flagged: bool,
}

/// The example design's generator and checker, and the ST engine state.
#[derive(Debug, Default)]
pub(crate) struct StState {
    pub regs: HashMap<u32, u32>,
    pub c2h_err: u32,
    pub cmpt: HashMap<u32, Cmpt>,
    // Generator registers and state.
    pub gen_qid: u32,
    pub gen_len: u32,
    pub gen_count: u32,
    pub gen_control: u32,
    pub remaining: u32,
    // Checker: packets since the clear, whether all matched, each queue's partial packet.
    pub checked: u64,
    pub matched: bool,
    pub partial: HashMap<u32, Vec<u8>>,
    /// Packets dropped (no valid queue), C2H_STAT_DESC_RSP_DROP_ACCEPTED's count.
    pub dropped: u64,
    /// Test hook: the next completion entry carries the error bit.
    pub error_next: bool,
    /// Test hook: every packet's first byte is flipped in flight (both directions) while set.
    pub corrupt: bool,
    /// Completion entries written, and packets the checker saw (for tests).
    pub entries: u64,
    /// Model time each direction's datapath is free (`DATAPATH`: packets take their time).
    pub h2c_free_at: u64,
    pub c2h_free_at: u64,
    /// H2C queues rung and not yet served to their producer index: queue, producer index.
    pub h2c_work: std::collections::BTreeMap<u32, u32>,
    /// The generator waits for credits (a C2H PIDX doorbell).
    pub c2h_waiting: bool,
    /// C2H_COMPLETION_SIZE (user BAR 0x50): bit 3 is the user trigger on every completion.
    pub cmpt_size: u32,
    /// CMPT CIDX doorbells (queue, value) a hands-off access took, whose trigger the clock
    /// thread evaluates (`stream.rs`).
    pub cmpt_later: Vec<(u32, u32)>,
}
