//! Measurement: the clock and its overhead, the one sampling loop, samples and statistics, test
//! patterns, the result rows every runner produces, and the PIO and DMA runners.

pub mod buffers;
pub mod clock;
pub mod context;
pub mod dma;
pub mod dma_layout;
pub mod pattern;
pub mod pio;
pub mod result;
pub mod sampler;
pub mod stats;
pub mod timer;
