//! NUMA memory policy of a mapping, and where its pages are: mbind(2) and move_pages(2) (libc has
//! the system call numbers; there is no wrapper in libc or rustix, the functions live in libnuma).
//!
//! MPOL_PREFERRED, not MPOL_BIND: a preferred node falls back to the others when it is full,
//! while a bound hugetlb mapping whose node has no free hugepage faults with SIGBUS
//! (mm/hugetlb.c, dequeue_hugetlb_folio_vma finds none on the allowed nodes). The caller then
//! reads where the pages landed (`page_nodes`) and says so.

use std::io;

/// include/uapi/linux/mempolicy.h.
const MPOL_PREFERRED: libc::c_int = 1;
/// Nodes a mask can name (the kernel takes maxnode bits; one word is 64 nodes).
const MASK_BITS: usize = 64;

/// Prefer node `node` for the pages of `[ptr, ptr + len)` not yet faulted in (call it before the
/// first touch: the policy applies at fault time).
pub fn prefer_node(ptr: *mut u8, len: usize, node: u32) -> io::Result<()> {
    if node as usize >= MASK_BITS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("node {node} is beyond {MASK_BITS} nodes")));
    }
    let mask: libc::c_ulong = 1 << node;
    // SAFETY: mbind reads `maxnode` bits from the one-word mask, which lives across the call; the
    // range is the caller's own mapping, whose policy is all it changes (flags 0: no page moves).
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr as libc::c_ulong,
            len as libc::c_ulong,
            MPOL_PREFERRED as libc::c_ulong,
            &mask as *const libc::c_ulong,
            (MASK_BITS + 1) as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The node of each `page`-sized page of `[ptr, ptr + len)` (move_pages with no target nodes
/// only reports: a negative entry is an errno for that page, -ENOENT when not faulted in).
pub fn page_nodes(ptr: *mut u8, len: usize, page: usize) -> io::Result<Vec<i32>> {
    let n = len.div_ceil(page.max(1));
    let pages: Vec<*mut libc::c_void> = (0..n).map(|i| ptr.wrapping_add(i * page).cast()).collect();
    let mut status = vec![0 as libc::c_int; n];
    // SAFETY: `pages` and `status` hold `n` entries each and outlive the call; nodes NULL asks
    // only where the pages are (mm/migrate.c, do_pages_stat), so nothing moves; pid 0 is us.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_long,
            n as libc::c_ulong,
            pages.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_long,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::mmap::{page_size, Mmap};

    /// On this host: memory preferred on node 0 (every Linux host has one) lands there once
    /// touched, and an untouched page says it is not there yet.
    #[test]
    fn preferred_pages_land_on_the_node_and_are_reported_there() {
        let page = page_size();
        let m = Mmap::anonymous(4 * page, false).unwrap();
        match prefer_node(m.as_ptr(), m.len(), 0) {
            Ok(()) => {}
            // A kernel without CONFIG_NUMA has no mbind: nothing to prefer, nothing to check.
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => return,
            Err(e) => panic!("mbind: {e}"),
        }
        for i in 0..3 {
            m.write((i * page) as u64, crate::mmio::Width::B64, 1).unwrap();
        }
        let nodes = page_nodes(m.as_ptr(), m.len(), page).unwrap();
        assert_eq!(&nodes[..3], &[0, 0, 0]);
        assert_eq!(nodes[3], -libc::ENOENT, "the untouched page is nowhere yet");
        assert!(prefer_node(m.as_ptr(), m.len(), 64).is_err());
    }
}
