//! Measurement: timer, samples and statistics, test patterns, and the PIO and DMA runners.

pub mod dma;
pub mod pattern;
pub mod pio;
pub mod stats;
pub mod timer;
