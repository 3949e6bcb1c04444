//! The NVRAM engine's run as it walks it (`engine.rs`): a descriptor as fetched (umem.h
//! `struct mm_dma_desc`), and where the engine is, in the model's time. Plain data, below the
//! state and the engine that share it.

/// A descriptor, as fetched (or the one transfer the registers hold).
pub(crate) struct Desc {
    pub pci: u64,
    pub local: u64,
    pub size: u64,
    pub next: u64,
    pub sem: u64,
    pub control: u32,
}

/// Where the engine is in a run.
pub(crate) struct Cursor {
    pub chained: bool,
    /// The next descriptor's address, and descriptors walked so far.
    pub addr: u64,
    pub walked: usize,
    /// Model time the datapath is free for the next descriptor.
    pub free_at: u64,
    /// The descriptor being moved, and when it completes.
    pub desc: Option<(Desc, u64)>,
}
