//! The card `pcibench serve` serves and how: what a session reaches (kept apart from the
//! listener, which hands the card to one session at a time).

use super::guarded::Guarded;
use crate::access::sim::SimDevice;
use crate::access::{BarRegion, DeviceAccess};
use crate::sim::SimId;
use std::sync::Arc;

/// The most memory one client may have DMA_MAPped at once, by default.
pub const DEFAULT_MAX_DMA: u64 = 64 << 30;

/// How to serve.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Offer memory BARs as mmap-able regions; false: every access is a message.
    pub mmap: bool,
    /// Exit after the first client disconnects.
    pub once: bool,
    /// Do not say the card is pcibench's own (no `pcibench` key in the VERSION reply).
    pub anonymous: bool,
    /// The most bytes one client may have DMA_MAPped at once.
    pub max_dma: u64,
    /// A QDMA card built as another IP variant: its GLBL2_MISC_CAP (`sim::qdma::layout::NAMED`).
    pub qdma_misc_cap: Option<u32>,
    /// The NVRAM card built with this much memory (one of the sizes umem.h knows).
    pub nvram_size: Option<u64>,
    /// The NVRAM card built as the conventional PCI function the MM-5425CN is (MWI Enable and the
    /// latency timer writable), not the PCI Express one of seed 001's view.
    pub nvram_conventional: bool,
    /// Test hook: the session runs as when no clock thread could be started.
    #[cfg(test)]
    pub no_clock: bool,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            mmap: true,
            once: false,
            anonymous: false,
            max_dma: DEFAULT_MAX_DMA,
            qdma_misc_cap: None,
            nvram_size: None,
            nvram_conventional: false,
            #[cfg(test)]
            no_clock: false,
        }
    }
}

/// What a server serves: one of pcibench's simulated cards, or a user's model (`crate::model`,
/// built into a `SimDevice` by the caller), whose function reset the client may ask for.
pub enum Serving {
    Card(SimId),
    Model { name: String, reset: Box<dyn Fn() + Send + Sync> },
}

/// The served card, which one session at a time holds.
pub struct Card {
    pub serving: Serving,
    pub dev: SimDevice,
    pub bars: Vec<(u8, Box<dyn BarRegion>)>,
    pub opts: ServeOptions,
    /// Where interrupts come from when not the card (`serve_irqs_from`).
    pub irqs: Option<Arc<dyn DeviceAccess>>,
    /// The interrupt registers a client's accesses do not reach (as vfio-pci keeps them).
    pub guarded: Guarded,
}
