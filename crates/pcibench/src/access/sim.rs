//! The `sim` access path: the simulated card as a device. BAR0 (1 MiB) and BAR2 (128 KiB) are
//! plain host memory, BAR4 (64 KiB) is the XDMA register block of the sim card's DMA engine,
//! and config space is a 256-byte model. Its figures are host-memory figures ("simulated card").

use super::{BarRegion, DeviceAccess, IoMode, Mapping, Via};
use crate::dma::{BufferSource, DmaAllocator};
use crate::mmio::Width;
use crate::pci::config::CMD_BUS_MASTER;
use crate::sim::config_space::ConfigSpace;
use crate::sim::host_map::HostMap;
use crate::sim::mem::Pages;
use crate::sim::xdma_model::{XdmaModel, XdmaModelConfig, XDMA_BAR_LEN};
use crate::sim::SIM_BARS;
use crate::{Error, Result};
use std::sync::{Arc, Mutex};

/// The BAR holding the sim card's XDMA registers.
pub const SIM_DMA_BAR: u8 = 4;

/// The simulated card, opened.
pub struct SimDevice {
    config: Mutex<ConfigSpace>,
    bar0: Arc<Pages>,
    bar2: Arc<Pages>,
    xdma: Arc<XdmaModel>,
    host: Arc<HostMap>,
}

impl SimDevice {
    /// The standard sim card: one H2C and one C2H channel over 0x128000 bytes of card memory.
    pub fn new() -> Result<SimDevice> {
        Self::with_xdma(XdmaModelConfig::default())
    }

    /// A sim card whose DMA engine is built with `cfg` (channel counts, card memory, alignment).
    pub fn with_xdma(cfg: XdmaModelConfig) -> Result<SimDevice> {
        let size = |i: u8| SIM_BARS.iter().find(|b| b.0 == i).map_or(0, |b| b.1 as usize);
        let host = HostMap::new();
        Ok(SimDevice {
            config: Mutex::new(ConfigSpace::new()),
            bar0: Arc::new(Pages::new("BAR0", size(0))?),
            bar2: Arc::new(Pages::new("BAR2", size(2))?),
            xdma: Arc::new(XdmaModel::new(cfg, Arc::clone(&host))?),
            host,
        })
    }

    /// The DMA engine model (card memory access and test hooks).
    pub fn xdma_model(&self) -> &XdmaModel {
        &self.xdma
    }

    /// The card's view of host memory, where `SimAllocator` registers buffers.
    pub fn host_map(&self) -> &Arc<HostMap> {
        &self.host
    }

    fn config(&self) -> std::sync::MutexGuard<'_, ConfigSpace> {
        self.config.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DeviceAccess for SimDevice {
    fn via(&self) -> Via {
        Via::Sim
    }

    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        match index {
            0 => Ok(Box::new(SimMemBar { index, mem: Arc::clone(&self.bar0), mapping, io })),
            2 => Ok(Box::new(SimMemBar { index, mem: Arc::clone(&self.bar2), mapping, io })),
            SIM_DMA_BAR => Ok(Box::new(SimRegBar { model: Arc::clone(&self.xdma), mapping })),
            _ => Err(Error::Refused(format!(
                "the sim card has BARs 0, 2 and 4; BAR{index} does not exist (run `pcibench info sim`)"
            ))),
        }
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.config().read(offset, buf)
    }

    /// Sim buffers live in process memory the sim card's engine may touch (its "IOMMU" is the
    /// registry of these buffers); the source and width do not change that.
    fn dma_allocator(&self, _source: &BufferSource, _dma_bits: u32) -> Result<Box<dyn DmaAllocator>> {
        Ok(Box::new(crate::dma::buffers::sim::SimAllocator::new(self)))
    }

    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut c = self.config();
        c.write(offset, data)?;
        self.xdma.set_bus_master(c.command() & CMD_BUS_MASTER != 0);
        Ok(())
    }
}

fn check(index: u8, len: u64, offset: u64, bytes: u64, unit: usize) -> Result<()> {
    if offset.checked_add(bytes).is_none_or(|end| end > len) {
        return Err(Error::Refused(format!(
            "{bytes} bytes at offset {offset:#x} run past the end of BAR{index} ({len:#x} bytes)"
        )));
    }
    if offset % unit as u64 != 0 || bytes % unit as u64 != 0 {
        return Err(Error::Refused(format!(
            "BAR{index} offset {offset:#x} and length {bytes} must be multiples of the {}-byte access width",
            unit
        )));
    }
    Ok(())
}

fn scalar_bytes(index: u8, width: Width) -> Result<usize> {
    match width {
        Width::B8 | Width::B16 | Width::B32 | Width::B64 => Ok(width.bytes()),
        _ => Err(Error::Unsupported(format!("a single BAR{index} access is 8, 16, 32 or 64 bits wide, not {width}"))),
    }
}

/// BAR0/BAR2: host memory standing in for card memory behind a BAR.
struct SimMemBar {
    index: u8,
    mem: Arc<Pages>,
    mapping: Mapping,
    io: IoMode,
}

impl BarRegion for SimMemBar {
    fn index(&self) -> u8 {
        self.index
    }
    fn len(&self) -> u64 {
        self.mem.len() as u64
    }
    fn mapping(&self) -> Mapping {
        // Host memory either way; reported as asked so reports label the run as requested.
        self.mapping
    }
    fn via(&self) -> Via {
        Via::Sim
    }
    /// None when syscall I/O was asked for, so callers take the read_bulk/write_bulk path.
    fn ptr(&self) -> Option<*mut u8> {
        (self.io == IoMode::Mmap).then(|| self.mem.as_ptr())
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, n as u64, n)?;
        self.mem.read_scalar(offset, n)
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, n as u64, n)?;
        self.mem.write_scalar(offset, n, value)
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        check(self.index, self.len(), offset, buf.len() as u64, width.bytes())?;
        self.mem.read(offset, buf)
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        check(self.index, self.len(), offset, buf.len() as u64, width.bytes())?;
        self.mem.write(offset, buf)
    }
}

/// BAR4: the XDMA register block. No CPU mapping: every access goes to the register model.
struct SimRegBar {
    model: Arc<XdmaModel>,
    mapping: Mapping,
}

impl SimRegBar {
    fn only_32(&self, width: Width) -> Result<()> {
        if width == Width::B32 {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "XDMA registers are 32-bit only: BAR{SIM_DMA_BAR} of the sim card refuses {width}-wide access (use --width 32)"
        )))
    }
}

impl BarRegion for SimRegBar {
    fn index(&self) -> u8 {
        SIM_DMA_BAR
    }
    fn len(&self) -> u64 {
        XDMA_BAR_LEN
    }
    fn mapping(&self) -> Mapping {
        self.mapping
    }
    fn via(&self) -> Via {
        Via::Sim
    }
    fn ptr(&self) -> Option<*mut u8> {
        None
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        self.only_32(width)?;
        check(SIM_DMA_BAR, XDMA_BAR_LEN, offset, 4, 4)?;
        Ok(self.model.read32(offset) as u64)
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        self.only_32(width)?;
        check(SIM_DMA_BAR, XDMA_BAR_LEN, offset, 4, 4)?;
        self.model.write32(offset, value as u32)
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        self.only_32(width)?;
        check(SIM_DMA_BAR, XDMA_BAR_LEN, offset, buf.len() as u64, 4)?;
        for (i, word) in buf.chunks_exact_mut(4).enumerate() {
            word.copy_from_slice(&self.model.read32(offset + 4 * i as u64).to_le_bytes());
        }
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        self.only_32(width)?;
        check(SIM_DMA_BAR, XDMA_BAR_LEN, offset, buf.len() as u64, 4)?;
        for (i, word) in buf.chunks_exact(4).enumerate() {
            let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            self.model.write32(offset + 4 * i as u64, v)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bars_read_back_and_check_bounds() {
        let dev = SimDevice::new().unwrap();
        let bar = dev.open_bar(2, Mapping::Wc, IoMode::Mmap).unwrap();
        assert_eq!((bar.index(), bar.len(), bar.mapping(), bar.via()), (2, 128 << 10, Mapping::Wc, Via::Sim));
        assert!(bar.ptr().is_some());
        bar.write(0x100, Width::B64, 0x0123_4567_89ab_cdef).unwrap();
        assert_eq!(bar.read(0x100, Width::B32).unwrap(), 0x89ab_cdef);
        assert_eq!(bar.read(0x104, Width::B16).unwrap(), 0x4567);
        let mut buf = [0u8; 8];
        bar.read_bulk(0x100, &mut buf, Width::B64).unwrap();
        assert_eq!(u64::from_le_bytes(buf), 0x0123_4567_89ab_cdef);
        bar.write_bulk(0x1fff8, &[7; 8], Width::B32).unwrap();
        assert!(bar.write_bulk(0x1fffc, &[7; 8], Width::B32).is_err(), "past the end");
        assert!(bar.read(0x101, Width::B32).is_err(), "misaligned");
        assert!(bar.read(0, Width::V128).is_err(), "not a scalar width");
        // Opened again, the same memory; syscall mode has no pointer.
        let again = dev.open_bar(2, Mapping::Uc, IoMode::Syscall).unwrap();
        assert!(again.ptr().is_none());
        assert_eq!(again.read(0x1fff8, Width::B8).unwrap(), 7);
        assert!(dev.open_bar(1, Mapping::Uc, IoMode::Mmap).is_err());
    }

    #[test]
    fn dma_bar_is_32_bit_registers_only() {
        let dev = SimDevice::new().unwrap();
        let bar = dev.open_bar(SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
        assert!(bar.ptr().is_none());
        assert_eq!(bar.len(), 0x10000);
        assert_eq!(bar.read(0x2000, Width::B32).unwrap() & 0xffff_0000, 0x1fc2_0000);
        assert_eq!(bar.read(0x3000, Width::B32).unwrap() & 0xffff_0000, 0x1fc3_0000);
        let e = bar.read(0x2000, Width::B64).unwrap_err().to_string();
        assert!(e.contains("XDMA registers are 32-bit only"), "{e}");
        assert!(bar.write(0x2004, Width::B8, 1).unwrap_err().to_string().contains("32-bit only"));
        assert!(bar.read(0x10000, Width::B32).is_err());
        let mut ids = [0u8; 8];
        bar.read_bulk(0x2000, &mut ids, Width::B32).unwrap();
        assert_eq!(u32::from_le_bytes(ids[..4].try_into().unwrap()) >> 16, 0x1fc2);
    }

    #[test]
    fn config_space_bus_master_round_trips() {
        let dev = SimDevice::new().unwrap();
        let mut cmd = [0u8; 2];
        dev.config_read(4, &mut cmd).unwrap();
        assert_eq!(u16::from_le_bytes(cmd) & CMD_BUS_MASTER, 0);
        dev.config_write(4, &(u16::from_le_bytes(cmd) | CMD_BUS_MASTER).to_le_bytes()).unwrap();
        dev.config_read(4, &mut cmd).unwrap();
        assert_ne!(u16::from_le_bytes(cmd) & CMD_BUS_MASTER, 0);
        dev.config_write(4, &(u16::from_le_bytes(cmd) & !CMD_BUS_MASTER).to_le_bytes()).unwrap();
        dev.config_read(4, &mut cmd).unwrap();
        assert_eq!(u16::from_le_bytes(cmd) & CMD_BUS_MASTER, 0);
        let mut ids = [0u8; 4];
        dev.config_read(0, &mut ids).unwrap();
        assert_eq!(ids, [0xee, 0x10, 0x24, 0x70]);
        assert!(dev.config_read(0xff, &mut ids).is_err());
    }
}
