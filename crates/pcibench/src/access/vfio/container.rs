//! The VFIO container (/dev/vfio/vfio): API version, IOMMU type (type1 v2 or no-IOMMU), the
//! IOVA ranges type1 accepts, and DMA map/unmap with IOVA bookkeeping.

use super::caps::{parse_iommu_info, IommuInfo};
use super::ioctl;
use crate::host::Host;
use crate::os::memlock;
use crate::os::space::Space;
use crate::units::human_size;
use crate::{Error, Result};
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::Mutex;

/// What the container translates DMA with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IommuType {
    /// VFIO_TYPE1v2_IOMMU: the device sees IOVAs we map.
    Type1v2,
    /// VFIO_NOIOMMU_IOMMU: no translation, the device sees physical addresses, no MAP_DMA.
    NoIommu,
}

pub struct Container {
    file: File,
    path: PathBuf,
    iommu: Option<IommuType>,
    info: Option<IommuInfo>,
    iovas: Mutex<Space>,
    host: Host,
}

impl Container {
    /// Open /dev/vfio/vfio and check the API version.
    pub fn open(host: &Host) -> Result<Container> {
        let path = host.path("/dev/vfio/vfio");
        let file = host.open_node(&path, OpenOptions::new().read(true).write(true)).map_err(|e| {
            let hint = match Errno::from_io_error(&e) {
                Some(Errno::NOENT) => "the vfio module is not loaded: sudo modprobe vfio-pci".to_string(),
                Some(Errno::ACCESS | Errno::PERM) => {
                    "/dev/vfio/vfio is normally world-accessible (0666): check its mode, or run as root".to_string()
                }
                _ => "is VFIO available in this kernel (CONFIG_VFIO)?".to_string(),
            };
            Error::io_hint("cannot open the VFIO container", &path, e, hint)
        })?;
        let v = ioctl::get_api_version(&file).map_err(|e| Error::io("VFIO_GET_API_VERSION failed on", &path, e))?;
        if v != ioctl::VFIO_API_VERSION {
            return Err(Error::Unsupported(format!(
                "VFIO API version {v} is not the {} pcibench speaks: this kernel's VFIO is incompatible",
                ioctl::VFIO_API_VERSION
            )));
        }
        Ok(Container { file, path, iommu: None, info: None, iovas: Mutex::new(Space::new()), host: host.clone() })
    }

    pub fn has_extension(&self, ext: u32) -> Result<bool> {
        ioctl::check_extension(&self.file, ext).map_err(|e| Error::io("VFIO_CHECK_EXTENSION failed on", &self.path, e))
    }

    /// VFIO_SET_IOMMU, after a group is attached (the kernel needs one to pick the driver).
    pub fn set_iommu(&mut self, kind: IommuType) -> Result<()> {
        let ext = match kind {
            IommuType::Type1v2 => ioctl::VFIO_TYPE1v2_IOMMU,
            IommuType::NoIommu => ioctl::VFIO_NOIOMMU_IOMMU,
        };
        if !self.has_extension(ext)? {
            return Err(Error::Unsupported(match kind {
                IommuType::Type1v2 => "the VFIO container does not offer the type1 v2 IOMMU: load it (sudo modprobe vfio_iommu_type1) or check that the IOMMU is enabled (intel_iommu=on / amd_iommu=on)".to_string(),
                IommuType::NoIommu => "VFIO no-IOMMU mode is off: echo 1 | sudo tee /sys/module/vfio/parameters/enable_unsafe_noiommu_mode (or load vfio with enable_unsafe_noiommu_mode=1); it taints the kernel".to_string(),
            }));
        }
        ioctl::set_iommu(&self.file, ext).map_err(|e| {
            let hint = match kind {
                IommuType::NoIommu if Errno::from_io_error(&e) == Some(Errno::PERM) => {
                    crate::host::state::setcap_hint()
                }
                _ => "another IOMMU type may already be set on this container".to_string(),
            };
            Error::io_hint("VFIO_SET_IOMMU failed on", &self.path, e, hint)
        })?;
        if kind == IommuType::Type1v2 {
            let buf =
                ioctl::iommu_info(&self.file).map_err(|e| Error::io("VFIO_IOMMU_GET_INFO failed on", &self.path, e))?;
            self.info = Some(parse_iommu_info(&buf)?);
        }
        self.iommu = Some(kind);
        Ok(())
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn iommu(&self) -> Option<IommuType> {
        self.iommu
    }

    /// Type1's page sizes and allowed IOVA ranges (None for no-IOMMU).
    pub fn iommu_info(&self) -> Option<&IommuInfo> {
        self.info.as_ref()
    }

    /// Map `len` bytes at process address `vaddr` for device reads and writes, at an IOVA from
    /// the allowed ranges whose last byte fits in `dma_bits` address bits. Returns the IOVA.
    fn map(&self, vaddr: u64, len: u64, align: u64, dma_bits: u32) -> Result<u64> {
        let info = match (&self.iommu, &self.info) {
            (Some(IommuType::Type1v2), Some(i)) => i,
            _ => {
                return Err(Error::Unsupported(
                    "this VFIO container has no IOMMU (no-IOMMU mode): DMA uses physical addresses, not MAP_DMA".into(),
                ))
            }
        };
        let align = align.max(info.min_page());
        let limit = if dma_bits >= 64 { u64::MAX } else { (1u64 << dma_bits) - 1 };
        let ranges: Vec<(u64, u64)> = info.usable_ranges().iter().map(|r| (r.start, r.end)).collect();
        let iova = {
            let mut space = self.iovas.lock().map_err(|_| Error::Device("IOVA bookkeeping poisoned".into()))?;
            space.reserve(&ranges, len, align, align, limit)
        };
        let Some(iova) = iova else {
            let shown: Vec<String> = ranges.iter().map(|(s, e)| format!("{s:#x}-{e:#x}")).collect();
            return Err(Error::Unsupported(format!(
                "no free IOVA range of {} below 2^{dma_bits} in the IOMMU's allowed ranges ({}): use a smaller buffer, or raise --dma-bits if the device drives more address bits",
                human_size(len),
                shown.join(", ")
            )));
        };
        let flags = ioctl::VFIO_DMA_MAP_FLAG_READ | ioctl::VFIO_DMA_MAP_FLAG_WRITE;
        if let Err(e) = ioctl::map_dma(&self.file, vaddr, iova, len, flags) {
            self.release_iova(iova);
            let hint = match Errno::from_io_error(&e) {
                Some(Errno::NOMEM) => {
                    let (locked, ipc) = memlock::status(&self.host);
                    match memlock::verdict(memlock::limit(), locked, ipc, len, "the DMA mapping") {
                        Err(m) => m.to_string(),
                        Ok(()) => "the kernel could not pin the pages (out of memory?)".into(),
                    }
                }
                Some(Errno::NOSPC) => {
                    "the container's DMA mapping limit is reached (vfio_iommu_type1 dma_entry_limit): free buffers or use larger ones".into()
                }
                Some(Errno::EXIST) => format!("IOVA {iova:#x} is already mapped in this container"),
                _ => format!("IOVA {iova:#x}, {} at {vaddr:#x}", human_size(len)),
            };
            return Err(Error::io_hint("VFIO_IOMMU_MAP_DMA failed on", &self.path, e, hint));
        }
        Ok(iova)
    }

    /// Undo `map`. The IOVA is reusable once the kernel has unmapped it.
    fn unmap(&self, iova: u64, len: u64) -> Result<()> {
        let done = ioctl::unmap_dma(&self.file, iova, len)
            .map_err(|e| Error::io("VFIO_IOMMU_UNMAP_DMA failed on", &self.path, e))?;
        if done != len {
            return Err(Error::Device(format!(
                "VFIO unmapped {done} of {len} bytes at IOVA {iova:#x}: the IOVA stays reserved"
            )));
        }
        self.release_iova(iova);
        Ok(())
    }

    fn release_iova(&self, iova: u64) {
        // A poisoned lock means a panic elsewhere; the IOVA then simply stays reserved.
        if let Ok(mut s) = self.iovas.lock() {
            s.release(iova);
        }
    }
}

impl crate::access::IommuMap for Container {
    fn map_dma(&self, vaddr: u64, len: u64, align: u64, dma_bits: u32) -> Result<u64> {
        self.map(vaddr, len, align, dma_bits)
    }
    fn unmap_dma(&self, iova: u64, len: u64) -> Result<()> {
        self.unmap(iova, len)
    }
}
