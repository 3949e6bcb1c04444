//! A memory-mapped XDMA channel's chain as the engine walks it (`engine.rs`): a descriptor as
//! fetched, and where the channel is, in the model's time. Plain data, below the state and the
//! engine that share it.

/// A descriptor (PG195 "Descriptor Format"), as fetched.
pub(crate) struct Desc {
    pub control: u32,
    pub nxt_adj: u32,
    pub len: u32,
    pub src: u64,
    pub dst: u64,
    pub next: u64,
}

/// Where a memory-mapped channel is in its chain.
pub(crate) struct Cursor {
    /// The next descriptor's address and the adjacent descriptors left in its block.
    pub addr: u64,
    pub extra: u32,
    /// Model time the datapath is free for the next descriptor.
    pub free_at: u64,
    /// The descriptor the datapath is moving, and when it completes.
    pub desc: Option<(Desc, u64)>,
}
