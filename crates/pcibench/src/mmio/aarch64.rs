//! aarch64: 128-bit Advanced SIMD (NEON) copies, one LDR/STR of a Q register per granule, and
//! the DSB that orders and completes posted stores.
//!
//! Inline assembly, as on x86-64, so each BAR access is exactly the instruction written (Rust
//! has no volatile vector access): one `asm!` block holds the whole loop, four Q registers per
//! iteration, then one at a time. On Device memory (sysfs `resourceN`, mapped `pgprot_device`,
//! Device-nGnRE; VFIO, `pgprot_noncached`, Device-nGnRnE) every access must be aligned or it
//! takes an alignment fault (Arm ARM, "Alignment of data accesses"), hence the aligned
//! BAR side; the host side is Normal memory, where Linux user space allows unaligned LDR/STR.
//! A 128-bit LDR/STR is one instruction but single-copy atomic only per 64 bits (Arm ARM
//! B2.2.1), so the interconnect may present it as two 64-bit beats.
//!
//! What aarch64 lacks: registers wider than 128 bits for plain loads and stores (SVE's are
//! implementation-sized and pcibench has no SVE routine), non-temporal stores with x86's
//! semantics (STNP is only a hint and has no SFENCE pairing), and MOVDIR64B. Those widths are
//! refused with a one-line reason naming what to use instead.

use super::{MemType, Width};
use crate::{Error, Result};
use std::arch::asm;

/// The CPU features the aarch64 routines depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Features {
    /// Advanced SIMD (HWCAP_ASIMD, "asimd" in /proc/cpuinfo): the 128-bit Q registers.
    pub asimd: bool,
}

/// This CPU's features, as the kernel reports them (std reads AT_HWCAP).
pub(super) fn detect() -> Features {
    Features { asimd: std::arch::is_aarch64_feature_detected!("asimd") }
}

/// Whether a CPU with `f` can run the routine for the non-scalar width `w`, and if not, why
/// and what to use instead (the same one-line shape as on x86-64).
pub(super) fn check(w: Width, f: Features) -> Result<()> {
    let fallback = if f.asimd { Width::V128 } else { Width::B64 };
    match w {
        Width::V128 if f.asimd => Ok(()),
        Width::V128 => Err(Error::Unsupported(
            "this CPU has no Advanced SIMD (NEON): 128-bit copies are unavailable; try --width 64".into(),
        )),
        Width::V256 | Width::V512 => Err(Error::Unsupported(format!(
            "aarch64 loads and stores at most 128 bits per register (NEON; pcibench has no SVE routine): \
             {w}-bit copies are unavailable; try --width {fallback}"
        ))),
        _ => Err(super::x86_only(w, "aarch64", fallback)),
    }
}

pub(super) fn available(w: Width) -> Result<()> {
    check(w, detect())
}

/// Host → BAR: LDR Q from the host, STR Q to the BAR. The memory type changes nothing here:
/// aarch64 has one load and one store form for every memory type.
///
/// # Safety
/// `mmio::copy_to_io`'s contract.
pub(super) unsafe fn copy_to_io(w: Width, _: MemType, dst: *mut u8, src: *const u8, len: usize) {
    assert!(w == Width::V128, "copy_to_io({w}) on aarch64: check mmio::available first");
    // SAFETY: the caller's contract; `dst` is the 16-byte aligned side.
    unsafe { copy_q(dst, src, len) }
}

/// BAR → host: LDR Q from the BAR, STR Q to the host.
///
/// # Safety
/// `mmio::copy_from_io`'s contract.
pub(super) unsafe fn copy_from_io(w: Width, _: MemType, dst: *mut u8, src: *const u8, len: usize) {
    assert!(w == Width::V128, "copy_from_io({w}) on aarch64: check mmio::available first");
    // SAFETY: the caller's contract; `src` is the 16-byte aligned side.
    unsafe { copy_q(dst, src, len) }
}

/// `len / 16` Q-register copies in ascending address order: blocks of four (four loads, then
/// four stores), then the rest one at a time. Both directions use the same instructions; only
/// which side is the BAR differs.
///
/// # Safety
/// Advanced SIMD is present; `len` is a multiple of 16; `src..src+len` is readable and
/// `dst..dst+len` writable; the BAR side is 16-byte aligned; the ranges do not overlap.
unsafe fn copy_q(dst: *mut u8, src: *const u8, len: usize) {
    let n = len / 16;
    // SAFETY: the loop reads and writes exactly n*16 bytes from/to the caller's ranges.
    unsafe {
        asm!(
            "cbz {blocks}, 3f",
            "2:",
            "ldr q0, [{s}]",
            "ldr q1, [{s}, #16]",
            "ldr q2, [{s}, #32]",
            "ldr q3, [{s}, #48]",
            "str q0, [{d}]",
            "str q1, [{d}, #16]",
            "str q2, [{d}, #32]",
            "str q3, [{d}, #48]",
            "add {s}, {s}, #64",
            "add {d}, {d}, #64",
            "subs {blocks}, {blocks}, #1",
            "b.ne 2b",
            "3:",
            "cbz {rest}, 5f",
            "4:",
            "ldr q0, [{s}], #16",
            "str q0, [{d}], #16",
            "subs {rest}, {rest}, #1",
            "b.ne 4b",
            "5:",
            s = inout(reg) src => _,
            d = inout(reg) dst => _,
            blocks = inout(reg) n / 4 => _,
            rest = inout(reg) n % 4 => _,
            out("v0") _,
            out("v1") _,
            out("v2") _,
            out("v3") _,
            options(nostack),
        );
    }
}

/// DSB ST: Linux's wmb() on arm64 (arch/arm64/include/asm/barrier.h). A DMB would only order
/// the stores against later memory accesses; the DSB also waits until every earlier store,
/// to Normal-NC (the `wc` mapping) and Device memory included, has completed, and no later
/// instruction runs before that (Arm ARM, "Data Synchronization Barrier (DSB)"). The read
/// that `wc-flush` issues next therefore follows the stores, and on PCIe a read cannot pass
/// earlier posted writes, so it returns only once they have reached the card.
pub(super) fn store_fence() {
    // SAFETY: a barrier; touches no registers or memory the compiler knows about.
    unsafe { asm!("dsb st", options(nostack, preserves_flags)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asimd_gives_128_and_nothing_wider() {
        let f = Features { asimd: true };
        assert!(check(Width::V128, f).is_ok());
        for w in [Width::V256, Width::V512] {
            let msg = check(w, f).unwrap_err().to_string();
            assert!(msg.contains("at most 128 bits") && msg.ends_with("try --width 128"), "{msg}");
        }
    }

    #[test]
    fn without_asimd_everything_points_to_64() {
        let f = Features { asimd: false };
        let msg = check(Width::V128, f).unwrap_err().to_string();
        assert_eq!(msg, "this CPU has no Advanced SIMD (NEON): 128-bit copies are unavailable; try --width 64");
        for w in [Width::V256, Width::V512, Width::Nt128, Width::Movdir64b] {
            assert!(check(w, f).unwrap_err().to_string().ends_with("try --width 64"), "{w}");
        }
    }

    #[test]
    fn x86_only_widths_say_so() {
        for w in [Width::Nt128, Width::Nt256, Width::Nt512, Width::Movdir64b, Width::Movsb] {
            let msg = check(w, Features { asimd: true }).unwrap_err().to_string();
            assert!(msg.starts_with(&format!("{w} is x86-64 only (")), "{msg}");
            assert!(msg.contains("unavailable on aarch64") && msg.ends_with("try --width 128"), "{msg}");
            assert!(!msg.contains('\n'));
        }
    }
}
