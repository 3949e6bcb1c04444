use super::*;

/// A buffer of `len` bytes whose start is `skew` bytes past a 64-byte boundary, with 64 guard
/// bytes either side to catch overruns.
struct Buf {
    mem: Vec<u8>,
    start: usize,
    len: usize,
}

const GUARD: u8 = 0xA5;

impl Buf {
    fn new(len: usize, skew: usize) -> Buf {
        let mem = vec![GUARD; len + 64 * 3];
        let base = mem.as_ptr() as usize;
        let start = (64 - base % 64) % 64 + 64 + skew;
        Buf { mem, start, len }
    }
    fn ptr(&mut self) -> *mut u8 {
        // SAFETY: start + len + 64 <= mem.len() by construction.
        unsafe { self.mem.as_mut_ptr().add(self.start) }
    }
    fn bytes(&self) -> &[u8] {
        &self.mem[self.start..self.start + self.len]
    }
    fn fill(&mut self, seed: u32) {
        let (start, len) = (self.start, self.len);
        for (i, b) in self.mem[start..start + len].iter_mut().enumerate() {
            // Position-dependent and never all one value, so a shifted, repeated or dropped
            // granule shows up.
            *b = (i as u32).wrapping_mul(0x9E37_79B1).wrapping_add(seed).rotate_right(13) as u8;
        }
    }
    fn guards_intact(&self) -> bool {
        self.mem[..self.start].iter().all(|&b| b == GUARD)
            && self.mem[self.start + self.len..].iter().all(|&b| b == GUARD)
    }
}

fn available_widths() -> Vec<Width> {
    Width::ALL.into_iter().filter(|&w| available(w).is_ok()).collect()
}

/// Lengths in granules: none, one, a partial unrolled block, exactly one block of eight,
/// blocks plus a tail, and 40 KiB plus a tail (past the x86-64 loops' 32 KiB prefetch
/// threshold, so both loop variants run).
fn lengths(w: Width) -> Vec<usize> {
    [0, 1, 3, 8, 8 * 3 + 5, (40 << 10) / w.bytes() + 7].iter().map(|n| n * w.bytes()).collect()
}

const HOST_SKEWS: [usize; 6] = [0, 1, 3, 8, 17, 63];

/// Every memory type: the routines differ by it (x86-64 reads: streaming loads on WC), and all
/// of them work on the test's write-back memory.
const MEMS: [MemType; 3] = [MemType::Wb, MemType::Wc, MemType::Uc];

#[test]
fn every_available_width_copies_to_io_exactly() {
    for w in available_widths() {
        for len in lengths(w) {
            for (skew, mem) in HOST_SKEWS.into_iter().flat_map(|k| MEMS.map(|m| (k, m))) {
                let mut host = Buf::new(len, skew);
                host.fill(len as u32 ^ skew as u32);
                let mut bar = Buf::new(len, 0);
                // SAFETY: available(w) is Ok, bar is 64-byte aligned, len a multiple of w.bytes().
                unsafe { copy_to_io(w, mem, bar.ptr(), host.ptr(), len) };
                assert!(bar.bytes() == host.bytes(), "{w} {mem} h2c len {len} host skew {skew}: data differs");
                assert!(bar.guards_intact(), "{w} {mem} h2c len {len} host skew {skew}: wrote outside the range");
            }
        }
    }
}

#[test]
fn every_available_width_copies_from_io_exactly() {
    for w in available_widths() {
        for len in lengths(w) {
            for (skew, mem) in HOST_SKEWS.into_iter().flat_map(|k| MEMS.map(|m| (k, m))) {
                let mut bar = Buf::new(len, 0);
                bar.fill(!(len as u32) ^ skew as u32);
                let mut host = Buf::new(len, skew);
                // SAFETY: as above, with the BAR side the source.
                unsafe { copy_from_io(w, mem, host.ptr(), bar.ptr(), len) };
                assert!(host.bytes() == bar.bytes(), "{w} {mem} c2h len {len} host skew {skew}: data differs");
                assert!(host.guards_intact(), "{w} {mem} c2h len {len} host skew {skew}: wrote outside the range");
            }
        }
    }
}

#[test]
fn widest_vector_round_trip_is_byte_exact() {
    // A byte-exact check of one pattern through the widest available vector routine, both ways:
    // the result equals the pattern byte for byte, including its first and last granule.
    let w = [Width::V512, Width::V256, Width::V128, Width::B64].into_iter().find(|&w| available(w).is_ok()).unwrap();
    let len = 64 * 1024 + 3 * w.bytes();
    let mut src = Buf::new(len, 5);
    src.fill(7);
    let mut bar = Buf::new(len, 0);
    let mut back = Buf::new(len, 9);
    // SAFETY: available(w) is Ok, the BAR side is aligned, len is a multiple of w.bytes().
    unsafe {
        copy_to_io(w, MemType::Wb, bar.ptr(), src.ptr(), len);
        copy_from_io(w, MemType::Wb, back.ptr(), bar.ptr(), len);
    }
    let first_bad = src.bytes().iter().zip(back.bytes()).position(|(a, b)| a != b);
    assert_eq!(first_bad, None, "{w}: round trip differs");
    assert_eq!(back.bytes()[0], src.bytes()[0]);
    assert_eq!(back.bytes()[len - 1], src.bytes()[len - 1]);
}

#[test]
fn width_names_round_trip() {
    for w in Width::ALL {
        assert_eq!(w.to_string().parse::<Width>().unwrap(), w);
        assert_eq!(serde_json::to_string(&w).unwrap(), format!("\"{w}\""));
    }
    assert_eq!("NT256".parse::<Width>().unwrap(), Width::Nt256);
    assert_eq!(" movdir64b ".parse::<Width>().unwrap(), Width::Movdir64b);
}

#[test]
fn unknown_width_is_a_usage_error_listing_the_names() {
    for bad in ["", "24", "nt64", "1024", "all", "b8"] {
        match bad.parse::<Width>() {
            Err(Error::Usage(msg)) => {
                assert!(!msg.contains('\n'), "{msg}");
                assert!(msg.contains("8, 16, 32, 64, 128, 256, 512, nt128, nt256, nt512, movdir64b, movsb, memcpy"));
                assert!(msg.contains(&format!("'{bad}'")), "{msg}");
            }
            other => panic!("{bad:?} parsed as {other:?}"),
        }
    }
}

#[test]
fn width_properties() {
    let mut names: Vec<String> = Width::ALL.iter().map(|w| w.to_string()).collect();
    names.dedup();
    assert_eq!(names.len(), 13);
    for w in Width::ALL {
        assert!(w.bytes().is_power_of_two());
        assert_eq!(w.is_scalar(), Width::scalar(w.bytes() as u32 * 8) == Some(w));
    }
    assert_eq!(Width::Nt512.bytes(), 64);
    assert_eq!(Width::Nt128.bytes(), 16);
    assert_eq!(Width::Movdir64b.bytes(), 64);
    assert!(!Width::Movdir64b.reads() && Width::Nt256.reads() && Width::Movsb.reads());
    assert_eq!(Width::Movsb.bytes(), 1, "REP MOVSB takes any alignment and length");
    assert!(available(Width::B8).is_ok() && available(Width::Memcpy).is_ok());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn available_agrees_with_cpu_detection() {
    let cases = [
        (Width::V128, is_x86_feature_detected!("sse2")),
        (Width::Nt128, is_x86_feature_detected!("sse2")),
        (Width::V256, is_x86_feature_detected!("avx2")),
        (Width::Nt256, is_x86_feature_detected!("avx2")),
        (Width::V512, is_x86_feature_detected!("avx512f")),
        (Width::Nt512, is_x86_feature_detected!("avx512f")),
    ];
    for (w, has) in cases {
        assert_eq!(available(w).is_ok(), has, "{w}");
    }
    if let Err(e) = available(Width::V512) {
        let msg = e.to_string();
        assert!(msg.starts_with("this CPU has no AVX-512F: 512-bit copies are unavailable; try --width"), "{msg}");
    }
    // std cannot detect MOVDIR64B, ERMS or FSRM; the kernel's view of CPUID is /proc/cpuinfo's
    // flags.
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        if let Some(flags) = info.lines().find(|l| l.starts_with("flags")) {
            let has = |f: &str| flags.split_whitespace().any(|x| x == f);
            assert_eq!(available(Width::Movdir64b).is_ok(), has("movdir64b"));
            assert_eq!(available(Width::Movsb).is_ok(), has("erms") || has("fsrm"));
        }
    }
}

#[test]
fn store_fence_returns() {
    store_fence();
    store_fence();
}

#[cfg(target_arch = "aarch64")]
#[test]
fn available_agrees_with_the_kernels_hwcaps() {
    // The kernel's view: /proc/cpuinfo's "Features" line in a guest or on hardware; under
    // qemu-user /proc/cpuinfo may be the x86 host's, so fall back to AT_HWCAP (HWCAP_ASIMD is
    // bit 1, arch/arm64/include/uapi/asm/hwcap.h).
    let from_cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|info| {
        info.lines().find(|l| l.starts_with("Features")).map(|l| l.split_whitespace().any(|f| f == "asimd"))
    });
    let asimd = from_cpuinfo.unwrap_or_else(|| rustix::param::linux_hwcap().0 & (1 << 1) != 0);
    assert_eq!(available(Width::V128).is_ok(), asimd);
    for w in Width::ALL.into_iter().filter(|w| !w.is_scalar() && !matches!(w, Width::V128 | Width::Memcpy)) {
        let msg = available(w).unwrap_err().to_string();
        assert!(msg.contains("unavailable") && msg.contains("; try --width "), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
    assert!(mapping_note().unwrap().contains("Device-nGnRE"));
}

#[cfg(target_arch = "riscv64")]
#[test]
fn only_scalar_widths_and_memcpy_on_riscv64() {
    let have: Vec<Width> = available_widths();
    assert_eq!(have, [Width::B8, Width::B16, Width::B32, Width::B64, Width::Memcpy]);
    assert!(mapping_note().unwrap().contains("no resourceN_wc"));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn x86_64_needs_no_mapping_note() {
    assert_eq!(mapping_note(), None);
}
