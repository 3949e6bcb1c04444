//! Measurement: the clock and its overhead, the one sampling loop, samples and statistics, test
//! patterns, the result rows every runner produces, and the PIO, DMA and latency runners.

pub mod buffers;
pub mod context;
pub mod dma;
pub mod latency;
pub mod pattern;
pub mod pio;
pub mod result;
pub mod sample;
