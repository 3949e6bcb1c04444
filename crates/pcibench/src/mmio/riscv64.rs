//! riscv64: scalar copies only (handled in `mod.rs`), and the FENCE that orders posted stores.
//!
//! Why no wider routine: RV64GC's widest load/store is 64 bits, and the vector extension
//! (RVV 1.0, not part of riscv64gc) accesses memory per element ("Vector Loads and Stores":
//! each element is its own access, in no guaranteed order within an unordered or strided
//! instruction), so a "128-bit" vector store is two 64-bit or sixteen 8-bit BAR accesses: it
//! would measure nothing `--width 64` does not. Non-temporal stores and MOVDIR64B are x86-64
//! instructions. All of those are refused with a one-line reason naming what to use instead.

use super::{MemType, Width};
use crate::{Error, Result};
use std::arch::asm;

/// Whether the routine for the non-scalar width `w` exists on riscv64 (none does), and what
/// to use instead: the same one-line shape as on x86-64.
pub(super) fn available(w: Width) -> Result<()> {
    match w {
        Width::V128 | Width::V256 | Width::V512 => Err(Error::Unsupported(format!(
            "riscv64 loads and stores at most 64 bits per instruction (vector accesses are per element): \
             {w}-bit copies are unavailable; try --width 64"
        ))),
        _ => Err(super::x86_only(w, "riscv64", Width::B64)),
    }
}

pub(super) unsafe fn copy_to_io(w: Width, _: MemType, _: *mut u8, _: *const u8, _: usize) {
    unreachable!("copy_to_io({w}) on riscv64: check mmio::available first")
}

pub(super) unsafe fn copy_from_io(w: Width, _: MemType, _: *mut u8, _: *const u8, _: usize) {
    unreachable!("copy_from_io({w}) on riscv64: check mmio::available first")
}

/// `fence ow, iorw`: every earlier store, to device (O) or memory (W), is ordered before every
/// later access of either kind.
///
/// Linux's wmb() on riscv is `fence ow, ow` (arch/riscv/include/asm/barrier.h): enough to put
/// earlier stores before a later doorbell store. `wc-flush` follows this fence with a *read*
/// from the BAR, so the successor set must include reads (I, R) too, or the read could be
/// performed before the stores it is meant to flush. RISC-V has no completion barrier like
/// Arm's DSB: the drain comes from that read, which on PCIe cannot pass earlier posted writes.
/// Both I/O and memory bits are set because a BAR mapped non-cacheable through Svpbmt (PBMT=NC,
/// Linux's pgprot_writecombine) counts as both I/O and main memory for FENCE (Svpbmt spec).
pub(super) fn store_fence() {
    // SAFETY: a fence; touches no registers or memory the compiler knows about.
    unsafe { asm!("fence ow, iorw", options(nostack, preserves_flags)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_vector_width_and_each_refusal_points_to_64() {
        for w in [Width::V128, Width::V256, Width::V512] {
            let msg = available(w).unwrap_err().to_string();
            assert_eq!(
                msg,
                format!(
                    "riscv64 loads and stores at most 64 bits per instruction (vector accesses are per element): \
                     {w}-bit copies are unavailable; try --width 64"
                )
            );
        }
    }

    #[test]
    fn x86_only_widths_say_so() {
        for w in [Width::Nt128, Width::Nt256, Width::Nt512, Width::Movdir64b, Width::Movsb] {
            let msg = available(w).unwrap_err().to_string();
            assert!(msg.starts_with(&format!("{w} is x86-64 only (")), "{msg}");
            assert!(msg.contains("unavailable on riscv64") && msg.ends_with("try --width 64"), "{msg}");
        }
    }
}
