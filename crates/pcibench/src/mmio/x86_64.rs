//! x86-64 vector copy loops: SSE2/AVX2/AVX-512F moves, non-temporal stores, streaming loads,
//! MOVDIR64B, REP MOVSB, and SFENCE.
//!
//! Why inline assembly rather than intrinsics: an intrinsic store is an ordinary LLVM store,
//! which the optimiser may merge with its neighbours, split, reorder or drop, and Rust has no
//! volatile vector access. An `asm!` block without `nomem` is opaque: it runs exactly the
//! instructions written, in that order, and the compiler must assume it reads and writes any
//! memory, so nothing is elided around it. Each routine is one `asm!` block holding the whole
//! loop (eight vectors per iteration, then one at a time): the BAR-side accesses are exactly
//! the instructions in the text, and the loop runs as fast as a hand-written memcpy.
//!
//! Registers: the loops name xmm/ymm/zmm 0-7 in the text and declare `clobber_abi("C")`,
//! which marks every vector register clobbered (all are caller-saved in the System V ABI),
//! so these functions need no `#[target_feature]` (AVX-512 target features need Rust 1.89).
//! The 256/512-bit loops end with VZEROUPPER so later legacy-SSE code pays no transition
//! penalty (Intel SDM vol. 1, 14.1.3 / Optimization Manual, "Mixing AVX and SSE code").

use super::{MemType, Width};
use crate::{Error, Result};
use std::arch::asm;
use std::sync::OnceLock;

/// The CPUID bits std's feature detection does not report. Read once: CPUID traps to the
/// hypervisor in a VM.
struct Cpuid {
    /// MOVDIR64B: CPUID.(EAX=07H,ECX=0):ECX bit 28 (Intel SDM vol. 2A, CPUID).
    movdir64b: bool,
    /// PREFETCHW: CPUID.80000001H:ECX bit 8 (PRFCHW, "3dnowprefetch" in /proc/cpuinfo).
    prfchw: bool,
    /// Enhanced REP MOVSB/STOSB: CPUID.(EAX=07H,ECX=0):EBX bit 9 ("erms").
    erms: bool,
    /// Fast Short REP MOV: CPUID.(EAX=07H,ECX=0):EDX bit 4 ("fsrm").
    fsrm: bool,
}

fn cpuid() -> &'static Cpuid {
    static CPUID: OnceLock<Cpuid> = OnceLock::new();
    CPUID.get_or_init(|| {
        use std::arch::x86_64::{__cpuid, __cpuid_count, __get_cpuid_max};
        // SAFETY: CPUID exists on every x86-64 CPU; a leaf is read only when leaf 0 (or
        // 80000000H) says it exists. (`allow`: these are safe fns in later Rust versions.)
        #[allow(unused_unsafe)]
        unsafe {
            let leaf7 = (__get_cpuid_max(0).0 >= 7).then(|| __cpuid_count(7, 0));
            let bit = |r: Option<u32>, b: u32| r.is_some_and(|r| (r >> b) & 1 == 1);
            Cpuid {
                movdir64b: bit(leaf7.map(|l| l.ecx), 28),
                prfchw: __get_cpuid_max(0x8000_0000).0 >= 0x8000_0001 && (__cpuid(0x8000_0001).ecx >> 8) & 1 == 1,
                erms: bit(leaf7.map(|l| l.ebx), 9),
                fsrm: bit(leaf7.map(|l| l.edx), 4),
            }
        }
    })
}

fn has_movdir64b() -> bool {
    cpuid().movdir64b
}

/// The widest routine of the same kind (plain or non-temporal) this CPU has, to suggest.
fn widest(nt: bool) -> &'static str {
    let (plain, non_temporal) = if is_x86_feature_detected!("avx512f") {
        ("512", "nt512")
    } else if is_x86_feature_detected!("avx2") {
        ("256", "nt256")
    } else {
        ("128", "nt128")
    };
    if nt {
        non_temporal
    } else {
        plain
    }
}

/// `nt`: suggest a non-temporal width (for NT widths and MOVDIR64B, also a full-line store).
fn missing(feature: &str, what: &str, nt: bool) -> Error {
    Error::Unsupported(format!("this CPU has no {feature}: {what} copies are unavailable; try --width {}", widest(nt)))
}

pub(super) fn available(w: Width) -> Result<()> {
    match w {
        Width::V128 | Width::Nt128 if !is_x86_feature_detected!("sse2") => {
            Err(Error::Unsupported("this CPU has no SSE2: 128-bit copies are unavailable; try --width 64".into()))
        }
        Width::V256 if !is_x86_feature_detected!("avx2") => Err(missing("AVX2", "256-bit", false)),
        Width::Nt256 if !is_x86_feature_detected!("avx2") => Err(missing("AVX2", "256-bit non-temporal", true)),
        Width::V512 if !is_x86_feature_detected!("avx512f") => Err(missing("AVX-512F", "512-bit", false)),
        Width::Nt512 if !is_x86_feature_detected!("avx512f") => Err(missing("AVX-512F", "512-bit non-temporal", true)),
        Width::Movdir64b if !has_movdir64b() => Err(missing("MOVDIR64B (CPUID leaf 7 ECX bit 28)", "movdir64b", true)),
        // REP MOVSB runs everywhere, but only with ERMS/FSRM is it the fast-string copy glibc
        // picks; without them it would measure a slow path no library uses.
        Width::Movsb if !(cpuid().erms || cpuid().fsrm) => {
            Err(missing("ERMS or FSRM (CPUID leaf 7 EBX bit 9, EDX bit 4)", "movsb", false))
        }
        _ => Ok(()),
    }
}

/// Bytes per vector register.
macro_rules! vector_bytes {
    ("xmm") => {
        16
    };
    ("ymm") => {
        32
    };
    ("zmm") => {
        64
    };
}

/// Copies shorter than this skip the PREFETCHW: source and destination then fit in L1 (48 KiB
/// on current cores), where the prefetches only take load slots (up to 20% slower at 4 KiB).
const PREFETCH_MIN: usize = 32 << 10;

/// VZEROUPPER after a loop that dirtied the upper halves of ymm/zmm registers.
macro_rules! vzeroupper {
    ("xmm") => {
        ""
    };
    ("ymm") => {
        "vzeroupper"
    };
    ("zmm") => {
        "vzeroupper"
    };
}

/// PREFETCHW of the lines one iteration (eight vectors) covers, 512 bytes ahead of `rdi`.
macro_rules! prefetch_ahead {
    ("xmm") => {
        "prefetchw [rdi + 512]\nprefetchw [rdi + 576]"
    };
    ("ymm") => {
        "prefetchw [rdi + 512]\nprefetchw [rdi + 576]\nprefetchw [rdi + 640]\nprefetchw [rdi + 704]"
    };
    ("zmm") => {
        concat!(
            "prefetchw [rdi + 512]\nprefetchw [rdi + 576]\nprefetchw [rdi + 640]\nprefetchw [rdi + 704]\n",
            "prefetchw [rdi + 768]\nprefetchw [rdi + 832]\nprefetchw [rdi + 896]\nprefetchw [rdi + 960]"
        )
    };
}

/// Eight vectors (`$r`0-7): all loads from `[rsi]`, then all stores to `[rdi]`, each in
/// ascending address order, then both pointers advance.
#[rustfmt::skip]
macro_rules! block {
    ($ld:literal, $st:literal, $r:tt) => {
        concat!(
            $ld, " ", $r, "0, [rsi]\n",
            $ld, " ", $r, "1, [rsi + ", vector_bytes!($r), "*1]\n",
            $ld, " ", $r, "2, [rsi + ", vector_bytes!($r), "*2]\n",
            $ld, " ", $r, "3, [rsi + ", vector_bytes!($r), "*3]\n",
            $ld, " ", $r, "4, [rsi + ", vector_bytes!($r), "*4]\n",
            $ld, " ", $r, "5, [rsi + ", vector_bytes!($r), "*5]\n",
            $ld, " ", $r, "6, [rsi + ", vector_bytes!($r), "*6]\n",
            $ld, " ", $r, "7, [rsi + ", vector_bytes!($r), "*7]\n",
            $st, " [rdi], ", $r, "0\n",
            $st, " [rdi + ", vector_bytes!($r), "*1], ", $r, "1\n",
            $st, " [rdi + ", vector_bytes!($r), "*2], ", $r, "2\n",
            $st, " [rdi + ", vector_bytes!($r), "*3], ", $r, "3\n",
            $st, " [rdi + ", vector_bytes!($r), "*4], ", $r, "4\n",
            $st, " [rdi + ", vector_bytes!($r), "*5], ", $r, "5\n",
            $st, " [rdi + ", vector_bytes!($r), "*6], ", $r, "6\n",
            $st, " [rdi + ", vector_bytes!($r), "*7], ", $r, "7\n",
            "add rsi, ", vector_bytes!($r), "*8\n",
            "add rdi, ", vector_bytes!($r), "*8",
        )
    };
}

/// The remaining `rdx` vectors, one at a time.
#[rustfmt::skip]
macro_rules! tail {
    ($ld:literal, $st:literal, $r:tt) => {
        concat!(
            "test rdx, rdx\n",
            "jz 5f\n",
            "4:\n",
            $ld, " ", $r, "0, [rsi]\n",
            $st, " [rdi], ", $r, "0\n",
            "add rsi, ", vector_bytes!($r), "\n",
            "add rdi, ", vector_bytes!($r), "\n",
            "dec rdx\n",
            "jnz 4b\n",
            "5:",
        )
    };
}

/// One copy routine in one `asm!` block: `rcx` blocks of eight vectors (`block!`), then the
/// `rdx` remaining vectors one at a time (`tail!`), with `$ld` loading from `src` (rsi) and `$st`
/// storing to `dst` (rdi), so both sides are accessed in ascending address order, one
/// instruction per vector; VZEROUPPER at the end for ymm/zmm. Fixed registers because
/// `clobber_abi` requires explicit registers for outputs.
///
/// The `nt` form (non-temporal stores) ends with SFENCE. The other form runs, when `$pf` is
/// true, a copy of the block loop that first issues PREFETCHW for the destination lines of a
/// later iteration (512 bytes on). On write-back memory (the sim card's BARs, the host buffer
/// of a read) this starts the read-for-ownership of the destination early, which is what lets
/// a plain-store loop keep up with glibc's REP MOVSB in L2 (about 8% faster at 64 KiB-1 MiB on
/// a Sapphire Rapids guest, `benches/copy.rs`). The callers ask for it only where the
/// destination is write-back (a UC or WC BAR would ignore it: "prefetches from non-writeback
/// memory are ignored", Intel SDM vol. 2B, PREFETCHW). A prefetch never faults, including past
/// the end. The choice is made once, not per iteration: a per-iteration branch cost 15% on the
/// 128-bit loop in L1.
macro_rules! copy_loop {
    (nt $dst:expr, $src:expr, $len:expr, $ld:literal, $st:literal, $r:tt) => {{
        let n: usize = $len / vector_bytes!($r);
        asm!(
            "test rcx, rcx",
            "jz 3f",
            "2:",
            block!($ld, $st, $r),
            "dec rcx",
            "jnz 2b",
            "3:",
            tail!($ld, $st, $r),
            "sfence",
            vzeroupper!($r),
            inout("rsi") $src => _,
            inout("rdi") $dst => _,
            inout("rcx") n / 8 => _,
            inout("rdx") n % 8 => _,
            clobber_abi("C"),
            options(nostack),
        );
    }};
    ($dst:expr, $src:expr, $len:expr, $pf:expr, $ld:literal, $st:literal, $r:tt) => {{
        let n: usize = $len / vector_bytes!($r);
        asm!(
            "test rcx, rcx",
            "jz 3f",
            "test r8, r8",
            "jz 2f",
            "7:",
            prefetch_ahead!($r),
            block!($ld, $st, $r),
            "dec rcx",
            "jnz 7b",
            "jmp 3f",
            "2:",
            block!($ld, $st, $r),
            "dec rcx",
            "jnz 2b",
            "3:",
            tail!($ld, $st, $r),
            vzeroupper!($r),
            inout("rsi") $src => _,
            inout("rdi") $dst => _,
            inout("rcx") n / 8 => _,
            inout("rdx") n % 8 => _,
            in("r8") usize::from($pf),
            clobber_abi("C"),
            options(nostack),
        );
    }};
}

/// Host → BAR. Loads from the host are unaligned (MOVDQU/VMOVDQU*), stores to the BAR aligned
/// (MOVDQA/VMOVDQA*: a misaligned BAR pointer faults instead of splitting an access) or
/// non-temporal (MOVNTDQ/VMOVNTDQ, which require alignment). PREFETCHW of the destination only
/// on write-back memory: elsewhere the CPU ignores it and it would only take load slots.
///
/// # Safety
/// `mmio::copy_to_io`'s contract.
pub(super) unsafe fn copy_to_io(w: Width, mem: MemType, dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY (all arms): the caller checked `available(w)`, `dst` is aligned to the vector
    // size, `len` is a multiple of it and both ranges are valid; the loop touches exactly
    // `len` bytes on each side.
    let pf = mem == MemType::Wb && cpuid().prfchw && len >= PREFETCH_MIN;
    unsafe {
        match w {
            Width::V128 => copy_loop!(dst, src, len, pf, "movdqu", "movdqa", "xmm"),
            Width::V256 => copy_loop!(dst, src, len, pf, "vmovdqu", "vmovdqa", "ymm"),
            Width::V512 => copy_loop!(dst, src, len, pf, "vmovdqu64", "vmovdqa64", "zmm"),
            Width::Nt128 => copy_loop!(nt dst, src, len, "movdqu", "movntdq", "xmm"),
            Width::Nt256 => {
                copy_loop!(nt dst, src, len, "vmovdqu", "vmovntdq", "ymm")
            }
            Width::Nt512 => {
                copy_loop!(nt dst, src, len, "vmovdqu64", "vmovntdq", "zmm")
            }
            Width::Movdir64b => movdir64b(dst, src, len),
            Width::Movsb => rep_movsb(dst, src, len),
            _ => unreachable!("{w} is handled in mmio/mod.rs"),
        }
    }
}

/// BAR → host. From write-combining memory, streaming loads (MOVNTDQA: SSE4.1, AVX2 for
/// 256-bit, AVX-512F for 512-bit; Intel SDM vol. 2B): the first fetches the whole line into a
/// streaming-load buffer and the next ones hit it. From write-back and uncached memory (and
/// without SSE4.1), plain aligned loads (MOVDQA/VMOVDQA*): on WB a streaming load is at best a
/// plain one (and the likely cause of slow reads on AMD Zen, `mmio`'s words), on UC the CPU
/// ignores its hint. Host stores are unaligned,
/// or non-temporal for `Nt*` when the host buffer is aligned to the vector size.
///
/// # Safety
/// `mmio::copy_from_io`'s contract.
pub(super) unsafe fn copy_from_io(w: Width, mem: MemType, dst: *mut u8, src: *const u8, len: usize) {
    let host_aligned = dst as usize % w.bytes() == 0;
    let stream = super::streaming_loads(w, mem);
    // SAFETY (all arms): as in copy_to_io with `src` the aligned BAR side; the NT-store arms
    // run only when `dst` is aligned, as MOVNTDQ requires. The destination is host memory
    // (write-back), where PREFETCHW helps.
    let pf = cpuid().prfchw && len >= PREFETCH_MIN;
    unsafe {
        match (w, stream) {
            (Width::V128, true) => copy_loop!(dst, src, len, pf, "movntdqa", "movdqu", "xmm"),
            (Width::V128, false) => copy_loop!(dst, src, len, pf, "movdqa", "movdqu", "xmm"),
            (Width::V256, true) => copy_loop!(dst, src, len, pf, "vmovntdqa", "vmovdqu", "ymm"),
            (Width::V256, false) => copy_loop!(dst, src, len, pf, "vmovdqa", "vmovdqu", "ymm"),
            (Width::V512, true) => copy_loop!(dst, src, len, pf, "vmovntdqa", "vmovdqu64", "zmm"),
            (Width::V512, false) => copy_loop!(dst, src, len, pf, "vmovdqa64", "vmovdqu64", "zmm"),
            (Width::Nt128, true) if host_aligned => {
                copy_loop!(nt dst, src, len, "movntdqa", "movntdq", "xmm")
            }
            (Width::Nt128, false) if host_aligned => {
                copy_loop!(nt dst, src, len, "movdqa", "movntdq", "xmm")
            }
            (Width::Nt256, true) if host_aligned => {
                copy_loop!(nt dst, src, len, "vmovntdqa", "vmovntdq", "ymm")
            }
            (Width::Nt256, false) if host_aligned => {
                copy_loop!(nt dst, src, len, "vmovdqa", "vmovntdq", "ymm")
            }
            (Width::Nt512, true) if host_aligned => {
                copy_loop!(nt dst, src, len, "vmovntdqa", "vmovntdq", "zmm")
            }
            (Width::Nt512, false) if host_aligned => {
                copy_loop!(nt dst, src, len, "vmovdqa64", "vmovntdq", "zmm")
            }
            // A misaligned host buffer cannot take non-temporal stores: plain ones, same loads.
            (Width::Nt128, true) => copy_loop!(dst, src, len, pf, "movntdqa", "movdqu", "xmm"),
            (Width::Nt128, false) => copy_loop!(dst, src, len, pf, "movdqa", "movdqu", "xmm"),
            (Width::Nt256, true) => copy_loop!(dst, src, len, pf, "vmovntdqa", "vmovdqu", "ymm"),
            (Width::Nt256, false) => copy_loop!(dst, src, len, pf, "vmovdqa", "vmovdqu", "ymm"),
            (Width::Nt512, true) => copy_loop!(dst, src, len, pf, "vmovntdqa", "vmovdqu64", "zmm"),
            (Width::Nt512, false) => copy_loop!(dst, src, len, pf, "vmovdqa64", "vmovdqu64", "zmm"),
            (Width::Movsb, _) => rep_movsb(dst, src, len),
            _ => unreachable!("{w} is handled in mmio/mod.rs"),
        }
    }
}

/// REP MOVSB: `len` bytes, forward (the ABI keeps the direction flag clear). With ERMS/FSRM the
/// microcode moves whole lines where the memory type allows fast-string operation (WB, and WC
/// destinations) and single bytes on UC (Intel SDM vol. 1, 7.3.9.3 "Fast-String Operation";
/// AMD APM vol. 3, REP MOVS).
///
/// # Safety
/// Both ranges are valid for `len` bytes and do not overlap.
unsafe fn rep_movsb(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract; REP MOVSB touches exactly `len` bytes on each side.
    unsafe {
        asm!(
            "rep movsb",
            inout("rcx") len => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags),
        );
    }
}

/// MOVDIR64B: each 64-byte store is one direct store (a single non-combined 64-byte write,
/// Intel SDM vol. 2B, MOVDIR64B), destination 64-byte aligned, source any alignment. The
/// direct stores are weakly ordered, hence the SFENCE.
///
/// # Safety
/// The CPU has MOVDIR64B; `dst` is 64-byte aligned; both ranges are valid for `len` bytes.
unsafe fn movdir64b(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract; the loop reads and writes exactly `len` bytes.
    unsafe {
        asm!(
            "test {n}, {n}",
            "jz 3f",
            "2:",
            "movdir64b {dst}, [{src}]",
            "add {src}, 64",
            "add {dst}, 64",
            "dec {n}",
            "jnz 2b",
            "3:",
            "sfence",
            src = inout(reg) src => _,
            dst = inout(reg) dst => _,
            n = inout(reg) len / 64 => _,
            options(nostack),
        );
    }
}

pub(super) fn store_fence() {
    // SAFETY: SFENCE only orders stores; SSE (hence SFENCE) is part of x86-64.
    unsafe { asm!("sfence", options(nostack, preserves_flags)) };
}
