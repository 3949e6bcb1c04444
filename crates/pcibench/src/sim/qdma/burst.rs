//! Where a QDMA MM engine is in time (`engine.rs`): the burst it serves and the plan the queue's
//! contexts gave it. Plain data, below the state and the engine that share it.

/// Where one direction's engine is in time.
#[derive(Default)]
pub(crate) struct EngState {
    /// Model time the datapath is free for the next descriptor.
    pub free_at: u64,
    /// The burst being served.
    pub burst: Option<Burst>,
    /// The queue the last burst served: the next pass over the doorbells starts after it.
    pub rr: usize,
}

/// A burst in flight: its queue and plan, descriptors done, and the one moving with its due time.
pub(crate) struct Burst {
    pub qid: usize,
    pub plan: Plan,
    pub done: u32,
    pub desc: Option<([u8; 32], u64)>,
}

/// What a burst works on, read from the contexts under the queue's lock.
pub(crate) struct Plan {
    pub gen: u64,
    pub base: u64,
    pub ring: u32,
    pub cidx: u32,
    pub n: u32,
    pub wb: u32,
    pub fetched: Option<Vec<Option<[u8; 32]>>>,
}
