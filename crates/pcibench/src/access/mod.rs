//! Access paths: how the host reaches a device's BARs and config space.
//! One file per path behind two small traits: `DeviceAccess` (an opened device) and
//! `BarRegion` (one reachable BAR). sysfs.rs, vfio/, sim.rs implement them.

pub mod sim;

use crate::mmio::Width;
use crate::Result;
use serde::Serialize;
use std::fmt;

/// `--via`: the access path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    Sysfs,
    Vfio,
    VfioNoiommu,
    Sim,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Sysfs => "sysfs",
            Via::Vfio => "vfio",
            Via::VfioNoiommu => "vfio-noiommu",
            Via::Sim => "sim",
        })
    }
}

/// The memory type of a BAR mapping (`--map`; `wc-flush` is WC plus a read in the timed part).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// Uncached-minus (UC-): sysfs resourceN, every VFIO mmap.
    Uc,
    /// Write-combining: sysfs resourceN_wc (prefetchable BARs only).
    Wc,
}

impl fmt::Display for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mapping::Uc => "uc",
            Mapping::Wc => "wc",
        })
    }
}

/// How bulk transfers reach the BAR: through a CPU mapping, or one pread/pwrite per access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    Mmap,
    Syscall,
}

/// One BAR the host can reach.
///
/// Implementations with a CPU mapping return it from `ptr`; the bulk copy routines in `mmio`
/// use it directly. Single accesses (`read`/`write`) work on every implementation: through the
/// mapping, through pread/pwrite on a VFIO region, or into the sim card's register model.
pub trait BarRegion: Send + Sync {
    fn index(&self) -> u8;
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn mapping(&self) -> Mapping;
    fn via(&self) -> Via;
    /// Base of the CPU mapping, if this region is mapped.
    fn ptr(&self) -> Option<*mut u8>;
    /// Read `width` (8/16/32/64-bit) at `offset`. Callers check bounds and alignment first.
    fn read(&self, offset: u64, width: Width) -> Result<u64>;
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()>;
    /// Bulk transfer without a mapping (pread/pwrite, one call per `width` access).
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()>;
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()>;
}

/// An opened device on one access path.
pub trait DeviceAccess: Send + Sync {
    fn via(&self) -> Via;
    /// Map (or open for syscall I/O) one BAR with the requested memory type.
    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>>;
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()>;
}
