//! Linux's own `/dev/udmabuf` (drivers/dma-buf/udmabuf.c): a dma-buf made from the pages of a
//! shmem memfd. The memfd must be sealed against shrinking (F_SEAL_SHRINK) and must not be sealed
//! against writes; UDMABUF_CREATE returns the dma-buf's fd, which is mmapped. CPU access to a
//! dma-buf is bracketed by DMA_BUF_IOCTL_SYNC with START and END and the access's READ/WRITE flags
//! (include/uapi/linux/dma-buf.h). A dma-buf has no read()/write() and no O_SYNC mapping: mmap with
//! explicit sync is the one way in. The module's size_limit_mb (64 by default) caps one buffer.

use super::{CpuBuffer, CpuView, Sync};
use crate::direction::Direction;
use crate::host::Host;
use crate::os::mmap::{page_size, Mmap};
use crate::units::human_size;
use crate::{Error, Result};
use rustix::fs::{fcntl_add_seals, ftruncate, memfd_create, MemfdFlags, SealFlags};
use rustix::ioctl::{opcode, Setter};
use std::fs::{File, OpenOptions};
use std::os::fd::{FromRawFd, OwnedFd};

/// struct udmabuf_create (include/uapi/linux/udmabuf.h).
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}
/// UDMABUF_FLAGS_CLOEXEC: the dma-buf fd is close-on-exec.
const UDMABUF_FLAGS_CLOEXEC: u32 = 0x01;
/// UDMABUF_CREATE = _IOW('u', 0x42, struct udmabuf_create).
const UDMABUF_CREATE: rustix::ioctl::Opcode = opcode::write::<UdmabufCreate>(b'u', 0x42);

/// struct dma_buf_sync and its flags; DMA_BUF_IOCTL_SYNC = _IOW('b', 0, struct dma_buf_sync).
const DMA_BUF_SYNC_READ: u64 = 1;
const DMA_BUF_SYNC_WRITE: u64 = 2;
const DMA_BUF_SYNC_END: u64 = 1 << 2;
const DMA_BUF_IOCTL_SYNC: rustix::ioctl::Opcode = opcode::write::<u64>(b'b', 0);

/// An ioctl whose result is a new file descriptor (its return value).
struct CreateFd(UdmabufCreate);

// SAFETY: the argument is a live `struct udmabuf_create` the kernel only reads; the output is the
// return value, a new fd the caller takes ownership of.
unsafe impl rustix::ioctl::Ioctl for CreateFd {
    type Output = rustix::ioctl::IoctlOutput;
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> rustix::ioctl::Opcode {
        UDMABUF_CREATE
    }
    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        (&mut self.0 as *mut UdmabufCreate).cast()
    }
    unsafe fn output_from_ptr(
        out: rustix::ioctl::IoctlOutput,
        _: *mut std::ffi::c_void,
    ) -> rustix::io::Result<rustix::ioctl::IoctlOutput> {
        Ok(out)
    }
}

/// Fields drop in order: the mapping goes first, then the dma-buf, then the memfd. Closing the
/// memfd while its pages are still mapped through the dma-buf makes the kernel evict page-cache
/// pages that are still mapped ("BUG: Bad page cache" in mm/filemap.c).
pub struct MemfdDmaBuf {
    map: Mmap,
    dmabuf: File,
    _memfd: OwnedFd,
}

impl MemfdDmaBuf {
    pub fn new(host: &Host, size: u64) -> Result<MemfdDmaBuf> {
        let dev = host.path("/dev/udmabuf");
        let page = page_size() as u64;
        if size == 0 || size % page != 0 {
            return Err(Error::usage(format!(
                "/dev/udmabuf takes whole pages: --size {} is not a multiple of {}",
                human_size(size),
                human_size(page)
            )));
        }
        let udmabuf = host.open_node(&dev, OpenOptions::new().read(true).write(true)).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "the udmabuf module is not loaded (CONFIG_UDMABUF): sudo modprobe udmabuf".to_string()
            } else {
                format!("give this user the device: sudo chmod o+rw {}", dev.display())
            };
            Error::io_hint("cannot open", &dev, e, hint)
        })?;
        let memfd = memfd_create("pcibench-udmabuf", MemfdFlags::ALLOW_SEALING | MemfdFlags::CLOEXEC)
            .map_err(|e| Error::Unsupported(format!("memfd_create failed: {e}")))?;
        ftruncate(&memfd, size).map_err(|e| Error::Unsupported(format!("cannot size the memfd: {e}")))?;
        fcntl_add_seals(&memfd, SealFlags::SHRINK)
            .map_err(|e| Error::Unsupported(format!("cannot seal the memfd (F_SEAL_SHRINK): {e}")))?;
        use std::os::fd::AsRawFd;
        let arg = UdmabufCreate { memfd: memfd.as_raw_fd() as u32, flags: UDMABUF_FLAGS_CLOEXEC, offset: 0, size };
        // SAFETY: UDMABUF_CREATE with a struct udmabuf_create the kernel only reads.
        let fd = unsafe { rustix::ioctl::ioctl(&udmabuf, CreateFd(arg)) }.map_err(|e| {
            let why = match e {
                rustix::io::Errno::INVAL => format!(
                    ": {} may exceed the module's size_limit_mb (64 MiB by default): load it with a larger one, e.g. sudo modprobe udmabuf size_limit_mb=256",
                    human_size(size)
                ),
                _ => String::new(),
            };
            Error::Unsupported(format!("UDMABUF_CREATE of {} failed: {e}{why}", human_size(size)))
        })?;
        // SAFETY: the ioctl returned a new dma-buf fd that nothing else owns.
        let dmabuf = unsafe { File::from_raw_fd(fd) };
        let map = Mmap::file(&dmabuf, 0, size as usize, true)
            .map_err(|e| Error::Unsupported(format!("cannot mmap the dma-buf: {e}")))?;
        Ok(MemfdDmaBuf { map, dmabuf, _memfd: memfd })
    }

    fn sync(&self, flags: u64) -> Result<()> {
        // SAFETY: DMA_BUF_IOCTL_SYNC reads one u64 of flags from the argument.
        unsafe { rustix::ioctl::ioctl(&self.dmabuf, Setter::<{ DMA_BUF_IOCTL_SYNC }, u64>::new(flags)) }
            .map_err(|e| Error::Device(format!("DMA_BUF_IOCTL_SYNC ({flags:#x}) failed: {e}")))
    }
}

/// The CPU's access: it writes (h2c, for the device to read) or reads (c2h, what it wrote).
fn access_flags(dir: Direction) -> u64 {
    match dir {
        Direction::H2c => DMA_BUF_SYNC_WRITE,
        Direction::C2h => DMA_BUF_SYNC_READ,
    }
}

struct View<'a>(&'a MemfdDmaBuf);

impl CpuView for View<'_> {
    fn ptr(&self) -> *mut u8 {
        self.0.map.as_ptr()
    }

    /// dma-buf syncs the whole buffer: the region is not part of the interface.
    fn sync_for_cpu(&mut self, _offset: u64, _len: u64, dir: Direction) -> Result<()> {
        self.0.sync(access_flags(dir))
    }

    fn sync_for_device(&mut self, _offset: u64, _len: u64, dir: Direction) -> Result<()> {
        self.0.sync(access_flags(dir) | DMA_BUF_SYNC_END)
    }
}

impl CpuBuffer for MemfdDmaBuf {
    fn name(&self) -> String {
        "/dev/udmabuf (dma-buf of a sealed memfd)".into()
    }

    fn kind(&self) -> String {
        "udmabuf".into()
    }

    fn path(&self) -> Option<String> {
        Some("/dev/udmabuf".into())
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn syncs(&self) -> Vec<Sync> {
        vec![Sync::Explicit]
    }

    fn memory_type(&self, _sync: Sync) -> String {
        "cached (shmem pages; DMA_BUF_IOCTL_SYNC brackets each access)".into()
    }

    fn open(&self, _sync: Sync) -> Result<Box<dyn CpuView + '_>> {
        Ok(Box::new(View(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_headers() {
        // _IOW('u', 0x42, 24-byte struct) and _IOW('b', 0, u64), as in the uapi headers.
        assert_eq!(std::mem::size_of::<UdmabufCreate>(), 24);
        assert_eq!(UDMABUF_CREATE, 0x4018_7542);
        assert_eq!(DMA_BUF_IOCTL_SYNC, 0x4008_6200);
    }

    #[test]
    fn a_missing_device_says_which_module() {
        let t = tempfile::tempdir().unwrap();
        let e = MemfdDmaBuf::new(&Host::with_root(t.path()), 1 << 20).err().unwrap().to_string();
        assert!(e.contains("modprobe udmabuf"), "{e}");
        let e = MemfdDmaBuf::new(&Host::with_root(t.path()), 1000).err().unwrap().to_string();
        assert!(e.contains("whole pages"), "{e}");
    }

    /// On a host with the module loaded (the lab guest has it), a real dma-buf round trip.
    #[test]
    fn real_dmabuf_when_the_host_has_one() {
        let h = Host::with_root("/");
        let Ok(b) = MemfdDmaBuf::new(&h, 1 << 20) else { return };
        let mut v = b.open(Sync::Explicit).unwrap();
        v.sync_for_cpu(0, 1 << 20, Direction::H2c).unwrap();
        // SAFETY (test): the mapping is 1 MiB.
        unsafe { v.ptr().write_bytes(0x5a, 1 << 20) };
        v.sync_for_device(0, 1 << 20, Direction::H2c).unwrap();
        assert_eq!(unsafe { *v.ptr().add(12345) }, 0x5a);
    }
}
