//! Host buffers a card can reach, one file per way of getting them.

pub mod mapped;
pub mod physical;
pub mod sim;
pub mod udmabuf;
pub mod vfio;
