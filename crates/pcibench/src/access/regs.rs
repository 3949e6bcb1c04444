//! Single register accesses (peek/poke) with the checks every path shares.

use super::BarRegion;
use crate::mmio::Width;
use crate::{Error, Result};

fn check(region: &dyn BarRegion, offset: u64, w: Width) -> Result<()> {
    if !w.is_scalar() {
        return Err(Error::usage(format!("width {w} is not a register width: use 8, 16, 32 or 64")));
    }
    let g = w.bytes() as u64;
    if offset.checked_add(g).is_none_or(|end| end > region.len()) {
        return Err(Error::usage(format!(
            "offset {offset:#x} is past the end of BAR{} ({:#x} bytes): give an offset below the BAR's size",
            region.index(),
            region.len()
        )));
    }
    if offset % g != 0 {
        return Err(Error::usage(format!("offset {offset:#x} is not aligned to the {}-bit access", g * 8)));
    }
    Ok(())
}

pub fn peek(region: &dyn BarRegion, offset: u64, w: Width) -> Result<u64> {
    check(region, offset, w)?;
    region.read(offset, w)
}

pub fn poke(region: &dyn BarRegion, offset: u64, w: Width, value: u64) -> Result<()> {
    check(region, offset, w)?;
    let bits = w.bytes() * 8;
    if bits < 64 && value >> bits != 0 {
        return Err(Error::usage(format!("value {value:#x} does not fit in {bits} bits")));
    }
    region.write(offset, w, value)
}
