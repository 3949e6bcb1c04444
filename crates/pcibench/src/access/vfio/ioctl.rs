//! The VFIO kernel ABI (include/uapi/linux/vfio.h) and one function per ioctl. All of pcibench's
//! VFIO `unsafe` is here. Variable-length replies (region and IOMMU info with capability chains)
//! come back as byte buffers that `caps` parses.
//!
//! Structs and constants come from rust-vmm's `vfio-bindings` (bindgen output of the header).
//! Written here, because the crate has no form for them:
//! - the ioctl numbers: bindgen cannot expand `_IO()`, so they are `_IO(VFIO_TYPE, VFIO_BASE + n)`
//!   built with rustix's `opcode::none` from the crate's `VFIO_TYPE` and `VFIO_BASE`;
//! - `set_irqs`' buffer, `struct vfio_irq_set` with its flexible `data[]` holding N eventfds (the
//!   crate's `fam-wrappers` IrqSet would pull in vmm-sys-util for a byte buffer's worth of work).
//!
//! The calls go through `rustix::ioctl`, which returns errors as `Errno` and takes borrowed fds.

pub use vfio_bindings::bindings::vfio as abi;
pub use vfio_bindings::bindings::vfio::{
    vfio_device_info, vfio_irq_info, VFIO_TYPE1v2_IOMMU, VFIO_API_VERSION, VFIO_DEVICE_FLAGS_PCI,
    VFIO_DEVICE_FLAGS_RESET, VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE, VFIO_GROUP_FLAGS_VIABLE,
    VFIO_IOMMU_INFO_CAPS, VFIO_IOMMU_INFO_PGSIZES, VFIO_IRQ_INFO_EVENTFD, VFIO_NOIOMMU_IOMMU,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSI_IRQ_INDEX, VFIO_REGION_INFO_FLAG_CAPS, VFIO_REGION_INFO_FLAG_MMAP,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};

use rustix::ioctl::{opcode, Ioctl, IoctlOutput, Opcode};
use std::ffi::{c_void, CStr};
use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, RawFd};

/// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO ioctls carry no size or direction bits (the `argsz`
/// field versions the structs instead).
const fn vfio_io(n: u32) -> Opcode {
    opcode::none(abi::VFIO_TYPE, (abi::VFIO_BASE + n) as u8)
}
const GET_API_VERSION: Opcode = vfio_io(0);
const CHECK_EXTENSION: Opcode = vfio_io(1);
const SET_IOMMU: Opcode = vfio_io(2);
const GROUP_GET_STATUS: Opcode = vfio_io(3);
const GROUP_SET_CONTAINER: Opcode = vfio_io(4);
const GROUP_GET_DEVICE_FD: Opcode = vfio_io(6);
const DEVICE_GET_INFO: Opcode = vfio_io(7);
const DEVICE_GET_REGION_INFO: Opcode = vfio_io(8);
const DEVICE_GET_IRQ_INFO: Opcode = vfio_io(9);
const DEVICE_SET_IRQS: Opcode = vfio_io(10);
const DEVICE_RESET: Opcode = vfio_io(11);
// The type1 IOMMU ioctls reuse numbers 12-14 on the container fd.
const IOMMU_GET_INFO: Opcode = vfio_io(12);
const IOMMU_MAP_DMA: Opcode = vfio_io(13);
const IOMMU_UNMAP_DMA: Opcode = vfio_io(14);

/// Every VFIO argsz struct starts `__u32 argsz; __u32 flags;` (vfio.h's extensibility rule).
const ARGSZ: usize = offset_of!(abi::vfio_region_info, argsz);
const FLAGS: usize = offset_of!(abi::vfio_region_info, flags);
const _: () = assert!(ARGSZ == offset_of!(abi::vfio_iommu_type1_info, argsz));
const _: () = assert!(FLAGS == offset_of!(abi::vfio_iommu_type1_info, flags));

fn argsz<T>() -> u32 {
    size_of::<T>() as u32
}

/// One VFIO ioctl for rustix: the opcode, the argument word, and the kernel's non-negative return
/// value as the output (VFIO returns data that way: the API version, a device fd). `'a` ties a
/// pointer argument to the borrow it was made from.
struct Call<'a> {
    op: Opcode,
    arg: *mut c_void,
    _borrow: PhantomData<&'a mut ()>,
}

impl<'a> Call<'a> {
    fn none(op: Opcode) -> Self {
        Call { op, arg: std::ptr::null_mut(), _borrow: PhantomData }
    }
    /// An argument passed by value.
    fn value(op: Opcode, v: u32) -> Self {
        Call { op, arg: std::ptr::without_provenance_mut(v as usize), _borrow: PhantomData }
    }
    /// A struct or buffer the kernel reads and may fill in.
    fn with<T: ?Sized>(op: Opcode, arg: &'a mut T) -> Self {
        Call { op, arg: (arg as *mut T).cast(), _borrow: PhantomData }
    }
    /// Memory the kernel only reads.
    fn reads<T: ?Sized>(op: Opcode, arg: &'a T) -> Self {
        Call { op, arg: (arg as *const T).cast_mut().cast(), _borrow: PhantomData }
    }
}

// SAFETY: `as_ptr` hands over the argument word given at construction: a value, or a pointer
// borrowed for `'a` (so live for the call); the output is the return value, no memory is read.
unsafe impl Ioctl for Call<'_> {
    type Output = IoctlOutput;
    // Some calls have the kernel write through the pointer (the info structs).
    const IS_MUTATING: bool = true;
    fn opcode(&self) -> Opcode {
        self.op
    }
    fn as_ptr(&mut self) -> *mut c_void {
        self.arg
    }
    unsafe fn output_from_ptr(out: IoctlOutput, _: *mut c_void) -> rustix::io::Result<IoctlOutput> {
        Ok(out)
    }
}

/// Issue `call` on `fd`.
///
/// # Safety
/// `call`'s opcode must be a VFIO ioctl and its argument what vfio.h defines for it: a value, or
/// memory of that struct's layout at least `argsz` bytes long.
unsafe fn vfio(fd: &File, call: Call<'_>) -> io::Result<IoctlOutput> {
    // SAFETY: the caller's contract above.
    unsafe { rustix::ioctl::ioctl(fd, call) }.map_err(io::Error::from)
}

pub fn get_api_version(container: &File) -> io::Result<u32> {
    // SAFETY: VFIO_GET_API_VERSION takes no argument; the version is the return value (>= 0).
    unsafe { vfio(container, Call::none(GET_API_VERSION)) }.map(|v| v as u32)
}

pub fn check_extension(container: &File, ext: u32) -> io::Result<bool> {
    // SAFETY: VFIO_CHECK_EXTENSION takes its argument by value and touches no memory.
    unsafe { vfio(container, Call::value(CHECK_EXTENSION, ext)) }.map(|r| r > 0)
}

pub fn set_iommu(container: &File, kind: u32) -> io::Result<()> {
    // SAFETY: VFIO_SET_IOMMU takes its argument by value and touches no memory.
    unsafe { vfio(container, Call::value(SET_IOMMU, kind)) }.map(drop)
}

/// VFIO_GROUP_GET_STATUS: the group's flags word.
pub fn group_status(group: &File) -> io::Result<u32> {
    let mut st = abi::vfio_group_status { argsz: argsz::<abi::vfio_group_status>(), flags: 0 };
    // SAFETY: a struct vfio_group_status; the kernel writes at most argsz bytes, its size.
    unsafe { vfio(group, Call::with(GROUP_GET_STATUS, &mut st)) }?;
    Ok(st.flags)
}

pub fn group_set_container(group: &File, container: &File) -> io::Result<()> {
    let fd: RawFd = container.as_raw_fd();
    // SAFETY: the argument points at an int holding the container fd, which the kernel only reads.
    unsafe { vfio(group, Call::reads(GROUP_SET_CONTAINER, &fd)) }.map(drop)
}

/// VFIO_GROUP_GET_DEVICE_FD with the device's name ("0000:00:04.0").
pub fn group_get_device_fd(group: &File, name: &CStr) -> io::Result<File> {
    // SAFETY: the argument is a NUL-terminated string the kernel only reads.
    let fd = unsafe { vfio(group, Call::reads(GROUP_GET_DEVICE_FD, name.to_bytes_with_nul())) }?;
    // SAFETY: on success the return value is a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

pub fn device_info(device: &File) -> io::Result<vfio_device_info> {
    let mut info = vfio_device_info { argsz: argsz::<vfio_device_info>(), ..Default::default() };
    // SAFETY: a struct vfio_device_info; the kernel writes at most argsz bytes, its size.
    unsafe { vfio(device, Call::with(DEVICE_GET_INFO, &mut info)) }?;
    Ok(info)
}

pub fn irq_info(device: &File, index: u32) -> io::Result<vfio_irq_info> {
    let mut info = vfio_irq_info { argsz: argsz::<vfio_irq_info>(), index, ..Default::default() };
    // SAFETY: a struct vfio_irq_info; the kernel writes at most argsz bytes, its size.
    unsafe { vfio(device, Call::with(DEVICE_GET_IRQ_INFO, &mut info)) }?;
    Ok(info)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Ask twice when the reply has a capability chain: the first reply's argsz says how much room
/// the whole chain needs. `fixed` is the struct's size, `inputs` its input fields (offset, value).
fn info_with_caps(fd: &File, op: Opcode, fixed: usize, inputs: &[(usize, u32)], caps_flag: u32) -> io::Result<Vec<u8>> {
    let mut argsz = fixed as u32;
    for _ in 0..3 {
        // The kernel copies in and out bytewise, so a byte buffer needs no particular alignment.
        let mut buf = vec![0u8; argsz as usize];
        for &(at, v) in [(ARGSZ, argsz)].iter().chain(inputs) {
            buf[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        }
        // SAFETY: buf starts with the fixed struct `op` takes and is argsz bytes long, all the
        // kernel writes.
        unsafe { vfio(fd, Call::with(op, buf.as_mut_slice())) }?;
        let need = u32_at(&buf, ARGSZ);
        if u32_at(&buf, FLAGS) & caps_flag == 0 || need <= argsz {
            return Ok(buf);
        }
        argsz = need;
    }
    Err(io::Error::new(io::ErrorKind::InvalidData, "VFIO info size kept growing"))
}

/// VFIO_DEVICE_GET_REGION_INFO: struct vfio_region_info followed by its capability chain.
pub fn region_info(device: &File, index: u32) -> io::Result<Vec<u8>> {
    let inputs = [(offset_of!(abi::vfio_region_info, index), index)];
    let fixed = size_of::<abi::vfio_region_info>();
    info_with_caps(device, DEVICE_GET_REGION_INFO, fixed, &inputs, VFIO_REGION_INFO_FLAG_CAPS)
}

/// VFIO_IOMMU_GET_INFO: struct vfio_iommu_type1_info followed by its capability chain.
pub fn iommu_info(container: &File) -> io::Result<Vec<u8>> {
    let fixed = size_of::<abi::vfio_iommu_type1_info>();
    info_with_caps(container, IOMMU_GET_INFO, fixed, &[], VFIO_IOMMU_INFO_CAPS)
}

/// VFIO_IOMMU_MAP_DMA: make `size` bytes at process address `vaddr` reachable at `iova`.
pub fn map_dma(container: &File, vaddr: u64, iova: u64, size: u64, flags: u32) -> io::Result<()> {
    let m = abi::vfio_iommu_type1_dma_map { argsz: argsz::<abi::vfio_iommu_type1_dma_map>(), flags, vaddr, iova, size };
    // SAFETY: the kernel reads the struct; the memory at vaddr is pinned by the kernel, not
    // accessed through Rust references here (callers keep the mapping alive until unmapped).
    unsafe { vfio(container, Call::reads(IOMMU_MAP_DMA, &m)) }.map(drop)
}

/// VFIO_IOMMU_UNMAP_DMA: returns the bytes the kernel unmapped.
pub fn unmap_dma(container: &File, iova: u64, size: u64) -> io::Result<u64> {
    let mut u = abi::vfio_iommu_type1_dma_unmap {
        argsz: argsz::<abi::vfio_iommu_type1_dma_unmap>(),
        iova,
        size,
        ..Default::default()
    };
    // SAFETY: flags 0 (no dirty bitmap in data[]): the kernel reads argsz bytes and writes back
    // `size`; `u` is that large and live.
    unsafe { vfio(container, Call::with(IOMMU_UNMAP_DMA, &mut u)) }?;
    Ok(u.size)
}

/// VFIO_DEVICE_SET_IRQS with `flags` on vectors `start..start + count` of `index`, with one
/// eventfd per vector in `data[]` when `fds` is not empty (VFIO_IRQ_SET_DATA_EVENTFD). The
/// ioctl's return: 0, or (enabling MSI or MSI-X) the vectors vfio-pci could have had instead.
pub fn set_irqs(
    device: &File,
    flags: u32,
    index: u32,
    start: u32,
    count: u32,
    fds: &[BorrowedFd<'_>],
) -> io::Result<u32> {
    let head = abi::vfio_irq_set {
        argsz: (size_of::<abi::vfio_irq_set>() + fds.len() * size_of::<RawFd>()) as u32,
        flags,
        index,
        start,
        count,
        data: Default::default(),
    };
    // The header and the s32 eventfds as the kernel reads them (vfio_set_irqs_validate_and_prepare
    // copies argsz - sizeof(struct vfio_irq_set) bytes of data). Bytewise, so no alignment needed.
    let mut buf = Vec::with_capacity(head.argsz as usize);
    for v in [head.argsz, head.flags, head.index, head.start, head.count] {
        buf.extend_from_slice(&v.to_ne_bytes());
    }
    for f in fds {
        buf.extend_from_slice(&f.as_raw_fd().to_ne_bytes());
    }
    // SAFETY: buf is a struct vfio_irq_set followed by `fds.len()` s32 eventfds, argsz bytes, all
    // the kernel reads; the eventfds stay open for the call (borrowed).
    unsafe { vfio(device, Call::reads(DEVICE_SET_IRQS, buf.as_slice())) }.map(|r| r as u32)
}

/// VFIO_DEVICE_SET_IRQS: trigger the eventfds on vectors 0..N of `index` (none disables).
pub fn set_irq_eventfds(device: &File, index: u32, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let data = if fds.is_empty() { abi::VFIO_IRQ_SET_DATA_NONE } else { abi::VFIO_IRQ_SET_DATA_EVENTFD };
    let r = set_irqs(device, abi::VFIO_IRQ_SET_ACTION_TRIGGER | data, index, 0, fds.len() as u32, fds)?;
    granted(r, fds.len())
}

/// What a successful SET_IRQS enabling `asked` vectors returned: vfio-pci answers an MSI or MSI-X
/// enable it cannot grant whole with the number of vectors it could have allocated, having enabled
/// none (vfio_msi_enable: "return the number of supported vectors if we can't get all"; x86 without
/// interrupt remapping grants one MSI). That is a failure here, naming the count.
fn granted(ret: u32, asked: usize) -> io::Result<()> {
    if ret == 0 {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "the kernel could allocate only {ret} of the {asked} vectors asked for, and enabled none"
    )))
}

/// VFIO_DEVICE_SET_IRQS ACTION_UNMASK | DATA_NONE on vector 0 of `index`: INTx, which vfio-pci
/// masked when it fired (vfio_pci_set_intx_unmask → vfio_pci_intx_unmask).
pub fn unmask_irq(device: &File, index: u32) -> io::Result<()> {
    set_irqs(device, abi::VFIO_IRQ_SET_ACTION_UNMASK | abi::VFIO_IRQ_SET_DATA_NONE, index, 0, 1, &[]).map(drop)
}

pub fn reset(device: &File) -> io::Result<()> {
    // SAFETY: VFIO_DEVICE_RESET takes no argument.
    unsafe { vfio(device, Call::none(DEVICE_RESET)) }.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vfio-pci's answer to an MSI enable it cannot grant whole (found on the lab's no-IOMMU guest:
    /// two MSI vectors, one granted, none enabled) must fail, so the caller falls back to one.
    #[test]
    fn a_short_grant_of_vectors_is_a_failure_naming_the_count() {
        assert!(granted(0, 2).is_ok());
        let e = granted(1, 2).unwrap_err().to_string();
        assert_eq!(e, "the kernel could allocate only 1 of the 2 vectors asked for, and enabled none");
    }

    /// The numbers strace and the kernel print for these ioctls (';' is 0x3b, VFIO_BASE 100).
    #[test]
    fn ioctl_numbers_are_the_kernels() {
        for n in 0..=14 {
            assert_eq!(vfio_io(n) as u64, (b';' as u64) << 8 | (100 + n as u64), "_IO(';', 100+{n})");
        }
        assert_eq!(GET_API_VERSION, 0x3b64);
        assert_eq!(GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(DEVICE_SET_IRQS, 0x3b6e);
        assert_eq!(IOMMU_MAP_DMA, 0x3b71);
        assert_eq!(IOMMU_UNMAP_DMA, 0x3b72);
    }

    #[test]
    fn constants_are_the_kernels() {
        assert_eq!(VFIO_API_VERSION, 0);
        assert_eq!((VFIO_TYPE1v2_IOMMU, VFIO_NOIOMMU_IOMMU), (3, 8));
        assert_eq!((VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSI_IRQ_INDEX), (7, 1));
        assert_eq!((VFIO_GROUP_FLAGS_VIABLE, VFIO_DEVICE_FLAGS_RESET, VFIO_DEVICE_FLAGS_PCI), (1, 1, 2));
        let region = [VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE, VFIO_REGION_INFO_FLAG_MMAP];
        assert_eq!((region, VFIO_REGION_INFO_FLAG_CAPS), ([1, 2, 4], 8));
        assert_eq!((VFIO_IOMMU_INFO_PGSIZES, VFIO_IOMMU_INFO_CAPS), (1, 2));
        assert_eq!((VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE, VFIO_IRQ_INFO_EVENTFD), (1, 2, 1));
        let irq = (abi::VFIO_IRQ_SET_DATA_NONE, abi::VFIO_IRQ_SET_DATA_EVENTFD, abi::VFIO_IRQ_SET_ACTION_TRIGGER);
        assert_eq!(irq, (1, 4, 32));
        assert_eq!(
            (abi::VFIO_IRQ_SET_ACTION_UNMASK, abi::VFIO_IRQ_INFO_MASKABLE, abi::VFIO_IRQ_INFO_AUTOMASKED),
            (16, 2, 4)
        );
        let index = (abi::VFIO_PCI_INTX_IRQ_INDEX, abi::VFIO_PCI_MSI_IRQ_INDEX, abi::VFIO_PCI_MSIX_IRQ_INDEX);
        assert_eq!(index, (super::super::super::irq_fds::INTX_INDEX, 1, super::super::super::irq_fds::MSIX_INDEX));
    }

    /// Sizes and offsets of the fixed structs as the kernel lays them out (x86-64 and arm64).
    #[test]
    fn struct_layouts_are_the_kernels() {
        use abi::*;
        assert_eq!(size_of::<vfio_group_status>(), 8);
        assert_eq!((size_of::<vfio_device_info>(), offset_of!(vfio_device_info, cap_offset)), (24, 16));
        assert_eq!(size_of::<vfio_irq_info>(), 16);
        assert_eq!((offset_of!(vfio_irq_info, index), offset_of!(vfio_irq_info, count)), (8, 12));
        assert_eq!((size_of::<vfio_irq_set>(), offset_of!(vfio_irq_set, data)), (20, 20));
        let dma_map = (offset_of!(vfio_iommu_type1_dma_map, vaddr), offset_of!(vfio_iommu_type1_dma_map, size));
        assert_eq!((size_of::<vfio_iommu_type1_dma_map>(), dma_map), (32, (8, 24)));
        assert_eq!((size_of::<vfio_iommu_type1_dma_unmap>(), offset_of!(vfio_iommu_type1_dma_unmap, size)), (24, 16));
    }

    #[test]
    fn bad_fds_are_errors_not_crashes() {
        let f = tempfile::tempfile().unwrap();
        let e = get_api_version(&f).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(rustix::io::Errno::NOTTY.raw_os_error()), "{e}");
        assert!(region_info(&f, 0).is_err());
        assert!(set_irq_eventfds(&f, VFIO_PCI_MSI_IRQ_INDEX, &[]).is_err());
        assert!(unmask_irq(&f, 0).is_err());
    }
}
