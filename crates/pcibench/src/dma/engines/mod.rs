//! Drivers for card DMA engines, one file per engine behind `dma::Engine`.

pub mod edu;
pub mod xdma;
mod xdma_desc;
