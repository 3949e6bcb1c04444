//! Host buffers a card can reach, one file per way of obtaining them.

pub mod sim;
