//! Checks for DMA buffers: the memory-lock limit VFIO pins against, and free hugepages (the
//! physically contiguous buffers no-IOMMU DMA needs).

use super::caller::CAP_IPC_LOCK;
use super::{Ctx, Finding, Severity};
use crate::access::Via;
use crate::host::state::{meminfo, read_trim};
use crate::units::human_size;
use std::fs;

/// Below this a typical DMA test (fpga_sio's 64 MiB total, seed 000's 1.2 MB buffers x2) may not fit.
const MEMLOCK_ENOUGH: u64 = 64 << 20;

pub(super) fn checks(c: &Ctx) -> Vec<Finding> {
    vec![memlock(c), hugepages(c)]
}

fn memlock(c: &Ctx) -> Finding {
    // vfio_iommu_type1 (vfio_lock_acct) charges pinned pages to RLIMIT_MEMLOCK unless the
    // task has CAP_IPC_LOCK.
    if c.caller.has_cap(CAP_IPC_LOCK) {
        return Finding::new("memlock", Severity::Pass, "CAP_IPC_LOCK: pinned memory is not limited").dma();
    }
    match c.caller.memlock {
        None => Finding::new("memlock", Severity::Pass, "RLIMIT_MEMLOCK unlimited").dma(),
        Some(n) if n >= MEMLOCK_ENOUGH => {
            Finding::new("memlock", Severity::Pass, format!("RLIMIT_MEMLOCK {}", human_size(n))).dma()
        }
        Some(n) => Finding::new(
            "memlock",
            Severity::Warn,
            format!(
                "RLIMIT_MEMLOCK {}: VFIO pins DMA buffers against it, so larger buffers fail with ENOMEM",
                human_size(n)
            ),
        )
        .fix(format!(
            "raise it for this shell: sudo prlimit --pid $$ --memlock=unlimited (for good: \
             `{} - memlock unlimited` in /etc/security/limits.conf)",
            c.caller.user
        ))
        .dma(),
    }
}

/// (page size in kB, total, free) per hugepage size, from /sys/kernel/mm/hugepages, else /proc/meminfo.
fn pools(c: &Ctx) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<(u64, u64, u64)> = fs::read_dir(c.host.path("/sys/kernel/mm/hugepages"))
        .map(|rd| {
            rd.filter_map(|e| {
                let e = e.ok()?;
                let kb = e.file_name().to_str()?.strip_prefix("hugepages-")?.strip_suffix("kB")?.parse().ok()?;
                let n = |f: &str| read_trim(&e.path().join(f)).and_then(|s| s.parse::<u64>().ok());
                Some((kb, n("nr_hugepages")?, n("free_hugepages")?))
            })
            .collect()
        })
        .unwrap_or_default();
    if v.is_empty() {
        if let (Some(kb), Some(t), Some(f)) =
            (meminfo(c.host, "Hugepagesize"), meminfo(c.host, "HugePages_Total"), meminfo(c.host, "HugePages_Free"))
        {
            v.push((kb, t, f));
        }
    }
    v.sort();
    v
}

/// The no-IOMMU alternative to hugepages: memory reserved on the kernel command line, handed to
/// the card through /dev/mem (seed 001 reserved 2050 MiB at 4 GiB this way).
fn reserved_hint(transfer: u64) -> String {
    let size = (2 * transfer).next_power_of_two().max(64 << 20);
    format!(
        "or reserve physical memory on the kernel command line ({}, the NVRAM benchmark of the fpga_sio programs used memmap=2050M$4G) and run dma with \
         --buffer reserved:0x100000000,{}",
        crate::host::iomem::memmap_option(0x1_0000_0000, size),
        crate::host::iomem::short_size(size)
    )
}

fn hugepages(c: &Ctx) -> Finding {
    let pools = pools(c);
    let noiommu = c.vfio == Via::VfioNoiommu;
    if pools.is_empty() {
        let f =
            Finding::new("hugepages", Severity::Info, "no hugepage support found (/sys/kernel/mm/hugepages absent)");
        return if noiommu { f.fix(reserved_hint(c.transfer.unwrap_or(64 << 20)).replacen("or r", "R", 1)) } else { f }
            .dma();
    }
    let desc: Vec<String> =
        pools.iter().map(|(kb, t, f)| format!("{f} of {t} free at {}", human_size(kb << 10))).collect();
    let default_kb = meminfo(c.host, "Hugepagesize").unwrap_or(2048);
    let free_bytes: u64 = pools.iter().map(|(kb, _, f)| (kb << 10) * f).sum();
    // A DMA run holds a source and a destination buffer of the transfer size.
    if let (Some(t), true) = (c.transfer, noiommu) {
        let need = t.saturating_mul(2);
        if free_bytes < need {
            let pages = need.div_ceil(default_kb << 10);
            return Finding::new(
                "hugepages",
                Severity::Warn,
                format!(
                    "{} free in hugepages ({}); a {} transfer needs {} (a source and a destination buffer), physically \
                     contiguous pieces without an IOMMU",
                    human_size(free_bytes),
                    desc.join(", "),
                    human_size(t),
                    human_size(need)
                ),
            )
            .fix(format!(
                "echo {pages} | sudo tee /sys/kernel/mm/hugepages/hugepages-{default_kb}kB/nr_hugepages (if memory allows), {}",
                reserved_hint(t)
            ))
            .dma();
        }
    }
    if pools.iter().any(|p| p.2 > 0) {
        return Finding::new("hugepages", Severity::Pass, desc.join(", ")).dma();
    }
    let fix = format!("echo 64 | sudo tee /sys/kernel/mm/hugepages/hugepages-{default_kb}kB/nr_hugepages");
    let (base, why, fix) = if noiommu {
        let fix = format!("{fix}, {}", reserved_hint(c.transfer.unwrap_or(64 << 20)));
        (Severity::Warn, "no-IOMMU DMA needs physically contiguous buffers, which hugepages are", fix)
    } else {
        (Severity::Info, "heap buffers work through the IOMMU; hugepages need fewer IOMMU mappings", fix)
    };
    Finding::new("hugepages", base, format!("none free ({}): {why}", desc.join(", "))).fix(fix).dma()
}
