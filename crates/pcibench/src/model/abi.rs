//! The C ABI of `include/pcibench_model.h`, mirrored: the structs as `#[repr(C)]`, the status
//! codes, the exported symbols' names and types. A change here is a change of
//! `PCIBENCH_MODEL_ABI_VERSION` there.

use std::ffi::{c_char, c_int, c_void};

/// PCIBENCH_MODEL_ABI_VERSION.
pub const ABI_VERSION: u32 = 1;

/// enum pcibench_status.
pub const OK: c_int = 0;
pub const UNSUPPORTED: c_int = 1;
pub const ABORT: c_int = 2;
pub const FAULT: c_int = 3;
pub const INVALID: c_int = 4;

/// PCIBENCH_BAR_* flags.
pub const BAR_IO: u32 = 1 << 0;
pub const BAR_64: u32 = 1 << 1;
pub const BAR_PREFETCH: u32 = 1 << 2;

/// PCIBENCH_IDLE: the model needs no time until the next access.
pub const IDLE: u64 = u64::MAX;

/// struct pcibench_bar.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bar {
    pub size: u64,
    pub flags: u32,
    pub reserved: u32,
}

/// struct pcibench_device.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Device {
    pub struct_size: u32,
    pub vendor_id: u16,
    pub device_id: u16,
    pub subsystem_vendor_id: u16,
    pub subsystem_id: u16,
    pub class_code: u32,
    pub revision: u8,
    pub intx: u8,
    pub link_gen: u8,
    pub link_width: u8,
    pub bars: [Bar; 6],
    pub msi_vectors: u32,
    pub msix_vectors: u32,
    pub msix_bar: u32,
    pub msix_table_offset: u32,
    pub msix_pba_offset: u32,
    pub config: *const u8,
    pub config_offset: u32,
    pub config_len: u32,
    pub name: *const c_char,
}

impl Default for Device {
    fn default() -> Device {
        Device {
            struct_size: std::mem::size_of::<Device>() as u32,
            vendor_id: 0,
            device_id: 0,
            subsystem_vendor_id: 0,
            subsystem_id: 0,
            class_code: 0,
            revision: 0,
            intx: 0,
            link_gen: 0,
            link_width: 0,
            bars: [Bar::default(); 6],
            msi_vectors: 0,
            msix_vectors: 0,
            msix_bar: 0,
            msix_table_offset: 0,
            msix_pba_offset: 0,
            config: std::ptr::null(),
            config_offset: 0,
            config_len: 0,
            name: std::ptr::null(),
        }
    }
}

/// struct pcibench_host: what the model may call.
#[repr(C)]
pub struct Host {
    pub abi_version: u32,
    pub ctx: *mut c_void,
    pub dma_read: unsafe extern "C" fn(*mut c_void, u64, *mut c_void, u64) -> c_int,
    pub dma_write: unsafe extern "C" fn(*mut c_void, u64, *const c_void, u64) -> c_int,
    pub raise_irq: unsafe extern "C" fn(*mut c_void, u32) -> c_int,
    pub lower_irq: unsafe extern "C" fn(*mut c_void, u32) -> c_int,
    pub log: unsafe extern "C" fn(*mut c_void, *const c_char),
    pub thread_declare: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// The exported functions' types.
pub type AbiVersionFn = unsafe extern "C" fn() -> u32;
pub type CreateFn = unsafe extern "C" fn(*const c_char, *const Host, *mut c_char, usize) -> *mut c_void;
pub type DescribeFn = unsafe extern "C" fn(*mut c_void, *mut Device) -> c_int;
pub type ReadFn = unsafe extern "C" fn(*mut c_void, u32, u64, u32, *mut u64) -> c_int;
pub type WriteFn = unsafe extern "C" fn(*mut c_void, u32, u64, u32, u64) -> c_int;
pub type ResetFn = unsafe extern "C" fn(*mut c_void);
pub type DestroyFn = unsafe extern "C" fn(*mut c_void);
pub type AdvanceFn = unsafe extern "C" fn(*mut c_void, u64) -> u64;

/// The required symbols, in the order a missing one is named.
pub const REQUIRED: [&str; 7] = [
    "pcibench_model_abi_version",
    "pcibench_model_create",
    "pcibench_model_describe",
    "pcibench_model_bar_read",
    "pcibench_model_bar_write",
    "pcibench_model_reset",
    "pcibench_model_destroy",
];
/// The optional one.
pub const ADVANCE: &str = "pcibench_model_advance";
