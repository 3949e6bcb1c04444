//! Measurement: the clock and its overhead, the one sampling loop, samples and statistics, test
//! patterns, the result rows every runner produces, and the PIO, DMA and latency runners.

pub mod buffers;
pub mod clock;
pub mod context;
pub mod dma;
pub mod dma_layout;
pub mod histogram;
pub mod latency;
pub mod latency_dma;
pub mod latency_row;
pub mod load;
pub mod pattern;
pub mod pio;
pub mod result;
pub mod sampler;
pub mod stats;
pub mod timer;
#[cfg(target_arch = "x86_64")]
pub mod tsc;
