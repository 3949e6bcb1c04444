//! Drivers for card DMA engines, one file per engine behind `dma::Engine`.

pub mod edu;
