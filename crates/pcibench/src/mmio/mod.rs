//! Copy routines by access width for BAR mappings (volatile scalar, SIMD, non-temporal,
//! movdir64b, rep movsb, memcpy), and the fences that order them, per architecture.
//!
//! On real MMIO the width and order of each access is what is being measured (and what a
//! device may decode), so every routine but `Memcpy` makes exactly one access of `w.bytes()`
//! per granule on the BAR side, in ascending address order, that the compiler can neither
//! merge, split, widen nor drop: scalars through `read_volatile`/`write_volatile` (here, on
//! every architecture), vectors through inline assembly (`x86_64.rs`: 128/256/512-bit,
//! non-temporal, MOVDIR64B; `aarch64.rs`: 128-bit NEON). `riscv64.rs` has scalars only (its
//! file says why). The host side of a copy is ordinary memory and may be unaligned.
//!
//! Which instructions a width uses also depends on the memory type behind the mapping
//! (`MemType`), decided once when the mapping is made (`access::BarRegion::mem_type`) and
//! passed with every copy: on write-combining memory x86-64 vector reads are streaming loads
//! (MOVNTDQA), which is what they exist for there; on write-back memory (the sim card's BARs,
//! DMA buffers, the heap) and uncached memory they are plain loads. On write-back memory a
//! streaming load buys nothing (the same rate as a plain load on Intel: `cargo bench --bench
//! copy -- wc`) and is the likely cause of reads at 0.57x memcpy with every vector width on a
//! 2-core AMD EPYC (issue #26; not re-measured on AMD), and on UC memory the CPU ignores the
//! hint anyway ("the memory type of the region being read can override the non-temporal hint",
//! Intel SDM vol. 2B, MOVNTDQA). Reports carry the memory type beside the mapping.
//!
//! Before calling `copy_to_io`/`copy_from_io` with a width, check it with `available` (and,
//! for reads, `Width::reads`): a vector width the CPU lacks would fault with SIGILL. Widths
//! an architecture has no routine for are refused there with the same one-line shape as a
//! missing CPU feature on x86-64: what is missing, and which `--width` to use instead.

mod host_buf;

pub use self::host_buf::HostBuf;

use crate::{Error, Result};
use serde::{Serialize, Serializer};
use std::fmt;
use std::ptr;
use std::str::FromStr;

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
use aarch64 as arch;
#[cfg(target_arch = "riscv64")]
use riscv64 as arch;
#[cfg(target_arch = "x86_64")]
use x86_64 as arch;

/// Other targets: only the scalar widths and memcpy (handled in this file), and a full
/// sequentially consistent fence (what the language guarantees everywhere).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
mod arch {
    use super::{MemType, Width};
    use crate::{Error, Result};

    pub(super) fn available(w: Width) -> Result<()> {
        match w {
            Width::V128 | Width::V256 | Width::V512 => Err(Error::Unsupported(format!(
                "pcibench has vector copy routines for x86-64 and aarch64 only: {w}-bit copies are unavailable \
                 on {}; try --width 64",
                std::env::consts::ARCH
            ))),
            _ => Err(super::x86_only(w, std::env::consts::ARCH, Width::B64)),
        }
    }
    pub(super) unsafe fn copy_to_io(w: Width, _: MemType, _: *mut u8, _: *const u8, _: usize) {
        unreachable!("copy_to_io({w}) on a target without vector routines: check mmio::available first")
    }
    pub(super) unsafe fn copy_from_io(w: Width, _: MemType, _: *mut u8, _: *const u8, _: usize) {
        unreachable!("copy_from_io({w}) on a target without vector routines: check mmio::available first")
    }
    pub(super) fn store_fence() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// The refusal of an x86-64-only routine on another architecture: one line naming what the
/// routine is and which width to use instead.
#[cfg(not(target_arch = "x86_64"))]
fn x86_only(w: Width, arch: &str, instead: Width) -> Error {
    let what = match w {
        Width::Movdir64b => "MOVDIR64B 64-byte direct stores",
        Width::Movsb => "REP MOVSB fast strings",
        Width::Nt128 | Width::Nt256 | Width::Nt512 => "MOVNTDQ non-temporal stores, then SFENCE",
        _ => "SSE/AVX",
    };
    Error::Unsupported(format!(
        "{w} is x86-64 only ({what}): {w} copies are unavailable on {arch}; try --width {instead}"
    ))
}

/// An access width / copy routine (`--width`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    B8,
    B16,
    B32,
    B64,
    /// 128-bit vectors (SSE2 on x86-64, NEON on aarch64); x86-64 reads use streaming loads
    /// where the CPU has them.
    V128,
    /// 256-bit vectors (AVX2).
    V256,
    /// 512-bit vectors (AVX-512F).
    V512,
    /// 128-bit non-temporal stores (MOVNTDQ), then SFENCE.
    Nt128,
    /// 256-bit non-temporal stores (AVX2), then SFENCE.
    Nt256,
    /// 512-bit non-temporal stores (AVX-512F), then SFENCE.
    Nt512,
    /// 64-byte direct stores (MOVDIR64B), then SFENCE. Store-only.
    Movdir64b,
    /// REP MOVSB (x86-64, where CPUID advertises ERMS or FSRM): what glibc's memcpy runs from
    /// about 2 KiB up on both vendors. The CPU picks the access size: whole lines on WB and WC
    /// memory, one byte per access on UC, where fast-string operation does not apply.
    Movsb,
    /// glibc memcpy: may use any width, order and instruction.
    Memcpy,
}

impl Width {
    /// The names of `widths` as `--width` takes them, joined by `sep` (for `--help` and errors).
    pub fn names(widths: &[Width], sep: &str) -> String {
        widths.iter().map(|w| w.name()).collect::<Vec<_>>().join(sep)
    }

    /// Every routine, narrow to wide, then the special ones (the order `--width all` runs them).
    pub const ALL: [Width; 13] = [
        Width::B8,
        Width::B16,
        Width::B32,
        Width::B64,
        Width::V128,
        Width::V256,
        Width::V512,
        Width::Nt128,
        Width::Nt256,
        Width::Nt512,
        Width::Movdir64b,
        Width::Movsb,
        Width::Memcpy,
    ];

    /// The size of one access in bytes: offsets and lengths must be multiples of it.
    pub fn bytes(&self) -> usize {
        match self {
            Width::B8 | Width::Movsb | Width::Memcpy => 1,
            Width::B16 => 2,
            Width::B32 => 4,
            Width::B64 => 8,
            Width::V128 | Width::Nt128 => 16,
            Width::V256 | Width::Nt256 => 32,
            Width::V512 | Width::Nt512 | Width::Movdir64b => 64,
        }
    }

    /// An 8/16/32/64-bit access: usable for a single register access (peek/poke).
    pub fn is_scalar(&self) -> bool {
        matches!(self, Width::B8 | Width::B16 | Width::B32 | Width::B64)
    }

    /// Whether `copy_from_io` has a routine of this width. MOVDIR64B is store-only: there is
    /// no 64-byte direct load, so `Movdir64b` measures writes only.
    pub fn reads(&self) -> bool {
        *self != Width::Movdir64b
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

    fn name(&self) -> &'static str {
        match self {
            Width::B8 => "8",
            Width::B16 => "16",
            Width::B32 => "32",
            Width::B64 => "64",
            Width::V128 => "128",
            Width::V256 => "256",
            Width::V512 => "512",
            Width::Nt128 => "nt128",
            Width::Nt256 => "nt256",
            Width::Nt512 => "nt512",
            Width::Movdir64b => "movdir64b",
            Width::Movsb => "movsb",
            Width::Memcpy => "memcpy",
        }
    }
}

impl fmt::Display for Width {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Serialized as on the command line ("256", "nt512"), so JSON reports match `--width`.
impl Serialize for Width {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Width {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Width, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for Width {
    type Err = Error;

    fn from_str(s: &str) -> Result<Width> {
        let t = s.trim();
        Width::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| Error::usage(format!("unknown width '{s}': use one of {}", Width::names(&Width::ALL, ", "))))
    }
}

/// The memory type behind a mapping: what decides which loads a copy routine uses. It is a
/// property of the mapping, fixed when it is made (`access::BarRegion::mem_type`): sysfs
/// `resourceN_wc` is WC, sysfs `resourceN` and every VFIO mmap are UC (x86-64 PAT UC-; what
/// `--map uc`/`wc` are elsewhere, `mapping_note`), and the sim card's BARs, DMA buffers and
/// the heap are WB whatever `--map` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemType {
    /// Write-back (cached) host memory.
    Wb,
    /// Write-combining.
    Wc,
    /// Uncached (x86-64 UC-; Device memory on aarch64).
    Uc,
}

impl MemType {
    pub fn name(&self) -> &'static str {
        match self {
            MemType::Wb => "wb",
            MemType::Wc => "wc",
            MemType::Uc => "uc",
        }
    }

    /// What a vector read (`copy_from_io` at 128/256/512 bits) loads with on this memory type,
    /// in words, for reports.
    pub fn vector_loads(&self) -> &'static str {
        if streaming_loads(Width::V256, *self) {
            "streaming loads (MOVNTDQA)"
        } else {
            "plain loads"
        }
    }
}

/// Whether `copy_from_io(w, mem, ..)` reads with streaming loads (MOVNTDQA): x86-64 vector
/// widths (plain and non-temporal) on write-combining memory, where the CPU has SSE4.1. The one
/// place the choice is made; the x86-64 routines follow it.
pub fn streaming_loads(w: Width, mem: MemType) -> bool {
    #[cfg(target_arch = "x86_64")]
    let vector = matches!(w, Width::V128 | Width::V256 | Width::V512 | Width::Nt128 | Width::Nt256 | Width::Nt512)
        && is_x86_feature_detected!("sse4.1");
    #[cfg(not(target_arch = "x86_64"))]
    let vector = {
        let _ = w;
        false
    };
    vector && mem == MemType::Wc
}

impl fmt::Display for MemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether this CPU can run the routine for `w` (run-time detection; scalar widths and memcpy
/// always can). The error names the missing CPU feature and the widest width that works.
pub fn available(w: Width) -> Result<()> {
    if w.is_scalar() || w == Width::Memcpy {
        return Ok(());
    }
    arch::available(w)
}

/// Copy `len` bytes from host memory at `src` to a mapping at `dst` of memory type `mem` (host
/// → card).
///
/// Each access to `dst` is one store of `w.bytes()` bytes, in ascending address order, never
/// merged, split, widened or elided by the compiler (except `Memcpy` and `Movsb`, where the
/// library or the CPU picks the accesses). `Nt*` and `Movdir64b` end with SFENCE, so their
/// weakly-ordered stores are ordered before any later store (a doorbell, say); the others may
/// leave stores in WC buffers: call `store_fence` when that matters. On write-back memory the
/// 128/256/512-bit routines also issue PREFETCHW for the destination (x86-64).
///
/// # Safety
/// - `available(w)` returned `Ok` (otherwise the CPU may fault on an unknown instruction).
/// - `dst` is aligned to `w.bytes()` and `len` is a multiple of `w.bytes()`.
/// - `dst..dst+len` is writable (mapped BAR or memory) and `src..src+len` is readable host
///   memory of any alignment; the two ranges do not overlap.
pub unsafe fn copy_to_io(w: Width, mem: MemType, dst: *mut u8, src: *const u8, len: usize) {
    debug_assert!(dst as usize % w.bytes() == 0, "BAR side misaligned for {w}");
    debug_assert!(len % w.bytes() == 0, "length not a multiple of {w}");
    // SAFETY (all arms): the caller's contract above, per routine.
    match w {
        Width::B8 => scalar_to_io::<u8>(dst, src, len),
        Width::B16 => scalar_to_io::<u16>(dst, src, len),
        Width::B32 => scalar_to_io::<u32>(dst, src, len),
        Width::B64 => scalar_to_io::<u64>(dst, src, len),
        Width::Memcpy => ptr::copy_nonoverlapping(src, dst, len),
        _ => arch::copy_to_io(w, mem, dst, src, len),
    }
}

/// Copy `len` bytes from a mapping of memory type `mem` at `src` to host memory at `dst` (card
/// → host).
///
/// Each access to `src` is one load of `w.bytes()` bytes, in ascending address order, never
/// merged, split, widened or elided by the compiler (except `Memcpy` and `Movsb`). On x86-64,
/// 128/256/512-bit loads from WC memory are streaming loads (MOVNTDQA, where the CPU has
/// SSE4.1): the first fetches the whole line into a streaming-load buffer and the next ones
/// hit it; from WB and UC memory they are plain aligned loads (see the module's words on why).
/// `Nt*` additionally writes the host buffer with non-temporal stores when `dst` is aligned to
/// `w.bytes()` (as memcpy does for large copies), then SFENCE. `Movdir64b` has no load form
/// (see `Width::reads`); it reads like `Memcpy`.
///
/// # Safety
/// - `available(w)` returned `Ok`.
/// - `src` is aligned to `w.bytes()` and `len` is a multiple of `w.bytes()`.
/// - `src..src+len` is readable (mapped BAR or memory) and `dst..dst+len` is writable host
///   memory of any alignment; the two ranges do not overlap.
pub unsafe fn copy_from_io(w: Width, mem: MemType, dst: *mut u8, src: *const u8, len: usize) {
    debug_assert!(src as usize % w.bytes() == 0, "BAR side misaligned for {w}");
    debug_assert!(len % w.bytes() == 0, "length not a multiple of {w}");
    // SAFETY (all arms): the caller's contract above, per routine.
    match w {
        Width::B8 => scalar_from_io::<u8>(dst, src, len),
        Width::B16 => scalar_from_io::<u16>(dst, src, len),
        Width::B32 => scalar_from_io::<u32>(dst, src, len),
        Width::B64 => scalar_from_io::<u64>(dst, src, len),
        Width::Memcpy | Width::Movdir64b => ptr::copy_nonoverlapping(src, dst, len),
        _ => arch::copy_from_io(w, mem, dst, src, len),
    }
}

/// Order and drain earlier stores (write-combining buffers included) before later accesses:
/// SFENCE on x86-64, DSB ST on aarch64 (Linux's wmb(), arch/arm64/include/asm/barrier.h),
/// `fence ow, iorw` on riscv64 (Linux's wmb() is `fence ow, ow`; the read that follows must be
/// ordered too: `riscv64.rs`). The `wc-flush` mapping calls this, then reads the BAR, to time
/// the drain of posted writes.
pub fn store_fence() {
    arch::store_fence();
}

/// What `--map uc` and `--map wc` are on this architecture where they are not x86-64's PAT
/// memory types (UC-, WC), which the seeds' words ("uncached-minus") and the README describe:
/// one line for reports of real devices, or `None` on x86-64. Linux maps sysfs `resourceN`
/// with pgprot_device and `resourceN_wc` with pgprot_writecombine (drivers/pci/mmap.c), and
/// creates `resourceN_wc` only where arch_can_pci_mmap_wc() is true (drivers/pci/pci-sysfs.c).
pub fn mapping_note() -> Option<&'static str> {
    if cfg!(target_arch = "x86_64") {
        None
    } else if cfg!(target_arch = "aarch64") {
        Some(
            "on aarch64, --map uc is Device-nGnRE (sysfs resourceN; VFIO maps Device-nGnRnE) and wc is Normal \
             Non-cacheable (resourceN_wc), not x86's PAT UC-/WC; wc-flush waits for the stores with DSB ST",
        )
    } else if cfg!(target_arch = "riscv64") {
        Some(
            "on riscv64, --map uc is an I/O mapping (PBMT=IO with Svpbmt, else the platform's PMAs), not x86's \
             PAT UC-; Linux creates no resourceN_wc there (no arch_can_pci_mmap_wc), so --map wc is unavailable",
        )
    } else {
        Some("--map uc and wc name x86-64's PAT memory types; on this architecture they are what the kernel's pgprot_device and pgprot_writecombine give")
    }
}

/// One `write_volatile` of `T` per granule: volatile accesses of a naturally aligned
/// primitive the target loads in one instruction are emitted as exactly that instruction,
/// in program order, and are never merged or elided (LLVM LangRef, "Volatile Memory Accesses").
unsafe fn scalar_to_io<T: Copy>(dst: *mut u8, src: *const u8, len: usize) {
    let n = len / std::mem::size_of::<T>();
    let d = dst.cast::<T>();
    let s = src.cast::<T>();
    for i in 0..n {
        // SAFETY: i < n keeps both within len bytes; the host side may be unaligned, the BAR
        // side is aligned to size_of::<T>() (caller's contract).
        unsafe { ptr::write_volatile(d.add(i), ptr::read_unaligned(s.add(i))) };
    }
}

/// One `read_volatile` of `T` per granule (see `scalar_to_io`).
unsafe fn scalar_from_io<T: Copy>(dst: *mut u8, src: *const u8, len: usize) {
    let n = len / std::mem::size_of::<T>();
    let d = dst.cast::<T>();
    let s = src.cast::<T>();
    for i in 0..n {
        // SAFETY: as in scalar_to_io, with the roles of the two sides swapped.
        unsafe { ptr::write_unaligned(d.add(i), ptr::read_volatile(s.add(i))) };
    }
}

#[cfg(test)]
mod tests;
