//! Copy routines by access width for BAR mappings (volatile scalar, SIMD, non-temporal,
//! movdir64b, memcpy), and the fences that order them.

use serde::Serialize;
use std::fmt;

/// An access width / copy routine (`--width`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Width {
    B8,
    B16,
    B32,
    B64,
    V128,
    V256,
    V512,
    Movdir64b,
    Memcpy,
}

impl Width {
    /// The size of one access in bytes: offsets and lengths must be multiples of it.
    pub fn bytes(&self) -> usize {
        match self {
            Width::B8 | Width::Memcpy => 1,
            Width::B16 => 2,
            Width::B32 => 4,
            Width::B64 => 8,
            Width::V128 => 16,
            Width::V256 => 32,
            Width::V512 | Width::Movdir64b => 64,
        }
    }

    /// Scalar widths usable for a single register access (peek/poke).
    pub fn scalar(bits: u32) -> Option<Width> {
        Some(match bits {
            8 => Width::B8,
            16 => Width::B16,
            32 => Width::B32,
            64 => Width::B64,
            _ => return None,
        })
    }
}

impl fmt::Display for Width {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Width::B8 => "8",
            Width::B16 => "16",
            Width::B32 => "32",
            Width::B64 => "64",
            Width::V128 => "128",
            Width::V256 => "256",
            Width::V512 => "512",
            Width::Movdir64b => "movdir64b",
            Width::Memcpy => "memcpy",
        })
    }
}
