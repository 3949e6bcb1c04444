//! The VFIO kernel ABI (include/uapi/linux/vfio.h): ioctl numbers, the fixed structs, and one
//! function per ioctl. All of pcibench's VFIO `unsafe` is here. Variable-length replies (region
//! and IOMMU info with capability chains) come back as byte buffers that `caps` parses.
//!
//! Written from the header's layout rather than `vfio-bindings`: the handful of structs we need
//! are small, and keeping them here keeps the unsafe surface in one file.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Duration;

pub const VFIO_API_VERSION: i32 = 0;
/// Container IOMMU types (VFIO_CHECK_EXTENSION / VFIO_SET_IOMMU arguments).
pub const VFIO_TYPE1_IOMMU: u32 = 1;
pub const VFIO_TYPE1V2_IOMMU: u32 = 3;
pub const VFIO_NOIOMMU_IOMMU: u32 = 8;

pub const GROUP_FLAGS_VIABLE: u32 = 1 << 0;

pub const DEVICE_FLAGS_RESET: u32 = 1 << 0;
pub const DEVICE_FLAGS_PCI: u32 = 1 << 1;

pub const REGION_INFO_FLAG_READ: u32 = 1 << 0;
pub const REGION_INFO_FLAG_WRITE: u32 = 1 << 1;
pub const REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
pub const REGION_INFO_FLAG_CAPS: u32 = 1 << 3;

pub const IOMMU_INFO_PGSIZES: u32 = 1 << 0;
pub const IOMMU_INFO_CAPS: u32 = 1 << 1;

pub const DMA_MAP_FLAG_READ: u32 = 1 << 0;
pub const DMA_MAP_FLAG_WRITE: u32 = 1 << 1;

pub const IRQ_INFO_EVENTFD: u32 = 1 << 0;
const IRQ_SET_DATA_NONE: u32 = 1 << 0;
const IRQ_SET_DATA_EVENTFD: u32 = 1 << 2;
const IRQ_SET_ACTION_TRIGGER: u32 = 1 << 5;

/// vfio-pci region and IRQ indexes (VFIO_PCI_*_INDEX).
pub const PCI_CONFIG_REGION_INDEX: u32 = 7;
pub const PCI_MSI_IRQ_INDEX: u32 = 1;

/// ioctl(2)'s request argument: `unsigned long` in glibc, `int` in musl.
#[cfg(not(target_env = "musl"))]
type Request = libc::c_ulong;
#[cfg(target_env = "musl")]
type Request = libc::c_int;

// _IO(VFIO_TYPE, VFIO_BASE + n): no size or direction bits, so just type << 8 | nr.
const fn vfio_io(n: u32) -> Request {
    ((b';' as u32) << 8 | (100 + n)) as Request
}
const GET_API_VERSION: Request = vfio_io(0);
const CHECK_EXTENSION: Request = vfio_io(1);
const SET_IOMMU: Request = vfio_io(2);
const GROUP_GET_STATUS: Request = vfio_io(3);
const GROUP_SET_CONTAINER: Request = vfio_io(4);
const GROUP_GET_DEVICE_FD: Request = vfio_io(6);
const DEVICE_GET_INFO: Request = vfio_io(7);
const DEVICE_GET_REGION_INFO: Request = vfio_io(8);
const DEVICE_GET_IRQ_INFO: Request = vfio_io(9);
const DEVICE_SET_IRQS: Request = vfio_io(10);
const DEVICE_RESET: Request = vfio_io(11);
// The IOMMU ioctls reuse numbers 12-14 on the container fd.
const IOMMU_GET_INFO: Request = vfio_io(12);
const IOMMU_MAP_DMA: Request = vfio_io(13);
const IOMMU_UNMAP_DMA: Request = vfio_io(14);

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

/// struct vfio_device_info (cap_offset since Linux 5.9; older kernels leave it 0).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DeviceInfo {
    pub argsz: u32,
    pub flags: u32,
    pub num_regions: u32,
    pub num_irqs: u32,
    pub cap_offset: u32,
    pad: u32,
}

/// struct vfio_irq_info.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IrqInfo {
    pub argsz: u32,
    pub flags: u32,
    pub index: u32,
    pub count: u32,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

/// struct vfio_region_info is 32 bytes: argsz, flags, index, cap_offset (u32), size, offset (u64).
pub const REGION_INFO_LEN: usize = 32;
/// struct vfio_iommu_type1_info is 24 bytes: argsz, flags, iova_pgsizes (u64), cap_offset, pad.
pub const IOMMU_INFO_LEN: usize = 24;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

pub fn get_api_version(container: &File) -> io::Result<i32> {
    // SAFETY: VFIO_GET_API_VERSION takes no argument and only returns a value.
    check(unsafe { libc::ioctl(container.as_raw_fd(), GET_API_VERSION) })
}

pub fn check_extension(container: &File, ext: u32) -> io::Result<bool> {
    // SAFETY: VFIO_CHECK_EXTENSION takes its argument by value and writes no memory.
    check(unsafe { libc::ioctl(container.as_raw_fd(), CHECK_EXTENSION, ext as libc::c_ulong) }).map(|r| r > 0)
}

pub fn set_iommu(container: &File, kind: u32) -> io::Result<()> {
    // SAFETY: VFIO_SET_IOMMU takes its argument by value and writes no memory.
    check(unsafe { libc::ioctl(container.as_raw_fd(), SET_IOMMU, kind as libc::c_ulong) }).map(drop)
}

/// VFIO_GROUP_GET_STATUS: the group's flags word.
pub fn group_status(group: &File) -> io::Result<u32> {
    let mut st = GroupStatus { argsz: std::mem::size_of::<GroupStatus>() as u32, flags: 0 };
    // SAFETY: the kernel writes at most argsz bytes into `st`, which is that large and live.
    check(unsafe { libc::ioctl(group.as_raw_fd(), GROUP_GET_STATUS, &mut st) })?;
    Ok(st.flags)
}

pub fn group_set_container(group: &File, container: &File) -> io::Result<()> {
    let fd: RawFd = container.as_raw_fd();
    // SAFETY: the argument is a pointer to an int holding the container fd, read by the kernel.
    check(unsafe { libc::ioctl(group.as_raw_fd(), GROUP_SET_CONTAINER, &fd) }).map(drop)
}

/// VFIO_GROUP_GET_DEVICE_FD with the device's name ("0000:00:04.0").
pub fn group_get_device_fd(group: &File, name: &CStr) -> io::Result<File> {
    // SAFETY: the argument is a NUL-terminated string the kernel only reads.
    let fd = check(unsafe { libc::ioctl(group.as_raw_fd(), GROUP_GET_DEVICE_FD, name.as_ptr()) })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

pub fn device_info(device: &File) -> io::Result<DeviceInfo> {
    let mut info = DeviceInfo { argsz: std::mem::size_of::<DeviceInfo>() as u32, ..Default::default() };
    // SAFETY: the kernel writes at most argsz bytes into `info`, which is that large and live.
    check(unsafe { libc::ioctl(device.as_raw_fd(), DEVICE_GET_INFO, &mut info) })?;
    Ok(info)
}

pub fn irq_info(device: &File, index: u32) -> io::Result<IrqInfo> {
    let mut info = IrqInfo { argsz: std::mem::size_of::<IrqInfo>() as u32, index, ..Default::default() };
    // SAFETY: the kernel writes at most argsz bytes into `info`, which is that large and live.
    check(unsafe { libc::ioctl(device.as_raw_fd(), DEVICE_GET_IRQ_INFO, &mut info) })?;
    Ok(info)
}

/// Ask twice when the reply has a capability chain: the first reply's argsz says how much room
/// the whole chain needs. `head` is the fixed struct with argsz and any input fields filled in.
fn info_with_caps(fd: RawFd, req: Request, head: &[u8], fixed: usize, caps_flag: u32) -> io::Result<Vec<u8>> {
    let mut argsz = fixed as u32;
    for _ in 0..3 {
        // u64 storage keeps the buffer aligned for the struct's u64 fields.
        let mut buf = vec![0u64; (argsz as usize).div_ceil(8)];
        // SAFETY: buf has room for argsz bytes (rounded up to 8) and head is at most `fixed` long.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
        bytes[..head.len()].copy_from_slice(head);
        bytes[..4].copy_from_slice(&argsz.to_ne_bytes());
        // SAFETY: the kernel writes at most argsz bytes into buf, which is at least that large.
        check(unsafe { libc::ioctl(fd, req, buf.as_mut_ptr()) })?;
        let need = u32::from_ne_bytes(bytes[..4].try_into().unwrap_or_default());
        let flags = u32::from_ne_bytes(bytes[4..8].try_into().unwrap_or_default());
        if flags & caps_flag == 0 || need <= argsz {
            return Ok(bytes[..(argsz as usize).max(fixed)].to_vec());
        }
        argsz = need;
    }
    Err(io::Error::new(io::ErrorKind::InvalidData, "VFIO info size kept growing"))
}

/// VFIO_DEVICE_GET_REGION_INFO: the 32-byte struct followed by its capability chain.
pub fn region_info(device: &File, index: u32) -> io::Result<Vec<u8>> {
    let mut head = [0u8; REGION_INFO_LEN];
    head[8..12].copy_from_slice(&index.to_ne_bytes());
    info_with_caps(device.as_raw_fd(), DEVICE_GET_REGION_INFO, &head, REGION_INFO_LEN, REGION_INFO_FLAG_CAPS)
}

/// VFIO_IOMMU_GET_INFO: the 24-byte struct followed by its capability chain (type1 only).
pub fn iommu_info(container: &File) -> io::Result<Vec<u8>> {
    let head = [0u8; IOMMU_INFO_LEN];
    info_with_caps(container.as_raw_fd(), IOMMU_GET_INFO, &head, IOMMU_INFO_LEN, IOMMU_INFO_CAPS)
}

/// VFIO_IOMMU_MAP_DMA: make `size` bytes at process address `vaddr` reachable at `iova`.
pub fn map_dma(container: &File, vaddr: u64, iova: u64, size: u64, flags: u32) -> io::Result<()> {
    let m = DmaMap { argsz: std::mem::size_of::<DmaMap>() as u32, flags, vaddr, iova, size };
    // SAFETY: the kernel reads the struct; the memory at vaddr is pinned by the kernel, not
    // accessed through Rust references here (callers keep the mapping alive until unmapped).
    check(unsafe { libc::ioctl(container.as_raw_fd(), IOMMU_MAP_DMA, &m) }).map(drop)
}

/// VFIO_IOMMU_UNMAP_DMA: returns the bytes the kernel unmapped.
pub fn unmap_dma(container: &File, iova: u64, size: u64) -> io::Result<u64> {
    let mut u = DmaUnmap { argsz: std::mem::size_of::<DmaUnmap>() as u32, flags: 0, iova, size };
    // SAFETY: the kernel reads the struct and writes back `size`; `u` is live and large enough.
    check(unsafe { libc::ioctl(container.as_raw_fd(), IOMMU_UNMAP_DMA, &mut u) })?;
    Ok(u.size)
}

/// VFIO_DEVICE_SET_IRQS: trigger the eventfds on vectors 0.. of `index` (an empty slice disables).
pub fn set_irq_eventfds(device: &File, index: u32, fds: &[RawFd]) -> io::Result<()> {
    // struct vfio_irq_set: argsz, flags, index, start, count (u32), then `count` s32 eventfds.
    let mut buf: Vec<u32> = vec![0; 5 + fds.len()];
    buf[0] = (buf.len() * 4) as u32;
    buf[1] = IRQ_SET_ACTION_TRIGGER | if fds.is_empty() { IRQ_SET_DATA_NONE } else { IRQ_SET_DATA_EVENTFD };
    buf[2] = index;
    buf[3] = 0;
    buf[4] = fds.len() as u32;
    for (slot, fd) in buf[5..].iter_mut().zip(fds) {
        *slot = *fd as u32;
    }
    // SAFETY: the kernel reads argsz bytes from buf, which is exactly that long.
    check(unsafe { libc::ioctl(device.as_raw_fd(), DEVICE_SET_IRQS, buf.as_ptr()) }).map(drop)
}

pub fn reset(device: &File) -> io::Result<()> {
    // SAFETY: VFIO_DEVICE_RESET takes no argument.
    check(unsafe { libc::ioctl(device.as_raw_fd(), DEVICE_RESET) }).map(drop)
}

/// A non-blocking eventfd the kernel signals on an interrupt.
pub fn eventfd() -> io::Result<File> {
    // SAFETY: eventfd has no memory arguments; a non-negative result is a new descriptor we own.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: as above.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Wait up to `timeout` for the eventfd; returns the count of interrupts since the last wait.
pub fn eventfd_wait(efd: &File, timeout: Duration) -> io::Result<u64> {
    let mut p = libc::pollfd { fd: efd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one live pollfd, count 1.
    let n = check(unsafe { libc::poll(&mut p, 1, ms) })?;
    if n == 0 {
        return Ok(0);
    }
    let mut v = 0u64;
    // SAFETY: an eventfd read fills exactly 8 bytes into `v`.
    let r = unsafe { libc::read(efd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    if r != 8 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}
