//! What every engine's `detect` does the same way: find the BAR whose identifier registers name
//! the engine, reading only, and describe what was found for `info`.

use super::Detected;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
use crate::pci::DeviceInfo;
use crate::Result;

/// The memory BARs of a device, the candidates for an engine's registers.
pub fn memory_bars(info: &DeviceInfo) -> Vec<u8> {
    info.bars.iter().filter(|b| b.is_memory()).map(|b| b.index).collect()
}

/// The first of `bars` that `is_it` recognises, each opened read-only. A BAR that cannot be
/// mapped may still be readable by syscalls (a VFIO region without mmap); if both fail, the
/// mapping's error is the one that explains (permission, lockdown). A BAR that cannot be read
/// at all is skipped; if none matches, the first such failure is returned so the user learns why.
pub fn find(dev: &dyn DeviceAccess, bars: &[u8], is_it: impl Fn(&dyn BarRegion) -> Result<bool>) -> Result<Option<u8>> {
    let mut first_err = None;
    for &index in bars {
        let found = match dev.open_bar_read_only(index, Mapping::Uc, IoMode::Mmap) {
            Ok(bar) => Ok(bar),
            Err(e) => dev.open_bar_read_only(index, Mapping::Uc, IoMode::Syscall).map_err(|_| e),
        }
        .and_then(|bar| is_it(&*bar));
        match found {
            Ok(true) => return Ok(Some(index)),
            Ok(false) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(None), Err)
}

/// Probe the engine's register BAR (read-only) and describe it: `info` shows the probe's
/// Display as its summary and its fields as JSON details.
pub fn detected<T: std::fmt::Display + serde::Serialize>(
    engine: &'static str,
    dev: &dyn DeviceAccess,
    bar: u8,
    probe: impl Fn(&dyn BarRegion) -> Result<T>,
) -> Result<Detected> {
    let region = dev.open_bar_read_only(bar, Mapping::Uc, IoMode::Mmap)?;
    let found = probe(region.as_ref())?;
    Ok(Detected {
        engine,
        register_bars: vec![bar],
        summary: found.to_string(),
        details: serde_json::to_value(&found).unwrap_or_default(),
    })
}
