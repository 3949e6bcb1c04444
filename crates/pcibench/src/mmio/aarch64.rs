//! aarch64: 128-bit NEON copies (one LDR/STR of a Q register per granule) and DSB ST.
//!
//! Kept deliberately small: it is not compiled or run on the x86-64 build host. Inline
//! assembly, as on x86-64, so each BAR access is exactly the instruction written (Rust has no
//! volatile vector access). On Device memory (a UC BAR mapping) accesses must be aligned,
//! hence the aligned BAR side; the host side is Normal memory, where Linux user space allows
//! unaligned LDR/STR. A 128-bit access is one instruction but is single-copy atomic only per
//! 64 bits (Arm ARM B2.2.1), so the interconnect may present it as two 64-bit beats.

use super::Width;
use crate::{Error, Result};
use std::arch::asm;

pub(super) fn available(w: Width) -> Result<()> {
    match w {
        // Advanced SIMD is mandatory in the Linux aarch64 ABI; detect anyway.
        Width::V128 if std::arch::is_aarch64_feature_detected!("neon") => Ok(()),
        _ => Err(Error::Unsupported(format!(
            "{w} copies need x86-64 (SSE/AVX/MOVDIR64B); on aarch64 use --width 128, 64 or memcpy"
        ))),
    }
}

/// Host → BAR, 16 bytes per LDR/STR pair.
///
/// # Safety
/// `mmio::copy_to_io`'s contract.
pub(super) unsafe fn copy_to_io(w: Width, dst: *mut u8, src: *const u8, len: usize) {
    assert!(w == Width::V128, "copy_to_io({w}) on aarch64: check mmio::available first");
    for i in 0..len / 16 {
        // SAFETY: i*16+16 <= len keeps both accesses inside the caller's ranges; dst is
        // 16-byte aligned (caller's contract).
        unsafe {
            asm!(
                "ldr {v:q}, [{s}]",
                "str {v:q}, [{d}]",
                s = in(reg) src.add(i * 16),
                d = in(reg) dst.add(i * 16),
                v = out(vreg) _,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// BAR → host, 16 bytes per LDR/STR pair.
///
/// # Safety
/// `mmio::copy_from_io`'s contract.
pub(super) unsafe fn copy_from_io(w: Width, dst: *mut u8, src: *const u8, len: usize) {
    assert!(w == Width::V128, "copy_from_io({w}) on aarch64: check mmio::available first");
    for i in 0..len / 16 {
        // SAFETY: as in copy_to_io, with src the 16-byte aligned BAR side.
        unsafe {
            asm!(
                "ldr {v:q}, [{s}]",
                "str {v:q}, [{d}]",
                s = in(reg) src.add(i * 16),
                d = in(reg) dst.add(i * 16),
                v = out(vreg) _,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// DSB ST: Linux's wmb() on arm64 (arch/arm64/include/asm/barrier.h): waits until earlier
/// stores, including ones to Normal-NC (WC) and Device mappings, have completed.
pub(super) fn store_fence() {
    // SAFETY: a barrier; touches no registers or memory the compiler knows about.
    unsafe { asm!("dsb st", options(nostack, preserves_flags)) };
}
