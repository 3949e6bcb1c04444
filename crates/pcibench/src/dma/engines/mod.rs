//! Drivers for card DMA engines, one file per engine.

pub mod xdma;
mod xdma_desc;
