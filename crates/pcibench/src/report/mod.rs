//! Presentation: text and JSON renderings of what the other modules measured or found.
//! Nothing here touches a device.

pub mod dma;
pub mod info;
pub mod pio;
