//! The MMIO fault guard: a card that vanishes under a BAR mapping is named, not a crash.
//!
//! Every BAR this process maps (sysfs resourceN, a VFIO region) is registered here for as long
//! as the mapping lives: its address range, the device's address and, through VFIO, the config
//! region's descriptor. When another process clears the device's Memory Space Enable or resets
//! it, the next load through a VFIO mapping raises SIGBUS (vfio_pci_core.c, vfio_pci_mmap_fault).
//! The handler (`os::fault`, installed by the CLI at start-up with `install`) asks `lookup`
//! whether the address is one of these; if so the mapping's pages read all-ones from then on, the
//! device is recorded as gone, Bus Master is cleared where this process set it
//! (`access::emergency`: the card may still be moving data into buffers about to be freed), and
//! the load runs again. The runners' card-gone checks (`gone`, consulted by the sampler between
//! samples) then stop the run with the one line of `bench::gone`. A fault anywhere else keeps the
//! default action.
//!
//! The registry is a fixed table of atomics: the handler may run on any thread at any moment, so
//! it takes no lock and allocates nothing.

use crate::os::fault::{self, Hit};
use crate::pci::PciAddress;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Live mappings at once: a command maps at most the six BARs of one device (and a few of a
/// second, for `compare`-style tools to come); a mapping beyond these works unguarded.
const SLOTS: usize = 32;

const FREE: u8 = 0;
/// Being filled in by `register`: the lookup skips it.
const CLAIMED: u8 = 1;
const LIVE: u8 = 2;
/// Faulted: its pages read all-ones now.
const GONE: u8 = 3;

struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    /// Rounded up to whole pages: the mapping covers them all.
    len: AtomicUsize,
    device: AtomicU64,
    fd: AtomicI32,
    at: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU8::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            device: AtomicU64::new(0),
            fd: AtomicI32::new(-1),
            at: AtomicU64::new(0),
        }
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// The first device a mapping of which faulted: its packed address plus one (0: none yet), and
/// its config region's descriptor and offset (-1 when its path has none).
static FIRST: AtomicU64 = AtomicU64::new(0);
static FIRST_FD: AtomicI32 = AtomicI32::new(-1);
static FIRST_AT: AtomicU64 = AtomicU64::new(0);

/// Install the SIGBUS handler that consults this registry (the CLI does, first thing).
pub fn install() -> std::io::Result<()> {
    fault::install(lookup)
}

fn pack(a: &PciAddress) -> u64 {
    ((a.domain as u64) << 16) | ((a.bus as u64) << 8) | ((a.device as u64 & 0x1f) << 3) | (a.function as u64 & 7)
}

/// A registered mapping; dropping it unregisters (before the mapping is unmapped: hold it in a
/// field declared before the mapping's).
#[derive(Debug)]
pub struct Guarded {
    slot: usize,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        TABLE[self.slot].state.store(FREE, Ordering::SeqCst);
    }
}

impl Guarded {
    /// Whether a load from this mapping has faulted (its pages read all-ones now).
    pub fn faulted(&self) -> bool {
        TABLE[self.slot].state.load(Ordering::SeqCst) == GONE
    }
}

/// Register the mapping `[ptr, ptr+len)` of a BAR of `device`; `config` is the config region's
/// descriptor and file offset where the path has one (VFIO). None when the table is full: the
/// mapping then works as before, unguarded.
pub fn register(ptr: *mut u8, len: usize, device: &PciAddress, config: Option<(RawFd, u64)>) -> Option<Guarded> {
    let page = crate::os::mmap::page_size();
    for (i, s) in TABLE.iter().enumerate() {
        if s.state.compare_exchange(FREE, CLAIMED, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            continue;
        }
        s.start.store(ptr as usize, Ordering::SeqCst);
        s.len.store(len.next_multiple_of(page), Ordering::SeqCst);
        s.device.store(pack(device), Ordering::SeqCst);
        let (fd, at) = config.unwrap_or((-1, 0));
        s.fd.store(fd, Ordering::SeqCst);
        s.at.store(at, Ordering::SeqCst);
        s.state.store(LIVE, Ordering::SeqCst);
        return Some(Guarded { slot: i });
    }
    None
}

/// The handler's question: is `addr` inside a registered mapping? The first fault of a mapping
/// records its device as gone and clears Bus Master where this process set it. Async-signal-safe
/// (atomics, and `emergency`'s one pwrite).
fn lookup(addr: usize) -> Option<Hit> {
    for s in &TABLE {
        let state = s.state.load(Ordering::SeqCst);
        if state != LIVE && state != GONE {
            continue;
        }
        let (start, len) = (s.start.load(Ordering::SeqCst), s.len.load(Ordering::SeqCst));
        if addr.wrapping_sub(start) >= len {
            continue;
        }
        let first = state == LIVE && s.state.compare_exchange(LIVE, GONE, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        if first {
            if FIRST.load(Ordering::SeqCst) == 0 {
                FIRST_FD.store(s.fd.load(Ordering::SeqCst), Ordering::SeqCst);
                FIRST_AT.store(s.at.load(Ordering::SeqCst), Ordering::SeqCst);
                let _ =
                    FIRST.compare_exchange(0, s.device.load(Ordering::SeqCst) + 1, Ordering::SeqCst, Ordering::SeqCst);
            }
            // The card may still be moving data (a reset stops it; a cleared Memory Space Enable
            // does not): Bus Master off through config space, the one way left to stop it.
            super::emergency::clear_bus_master();
        }
        return Some(Hit { start, len, first });
    }
    None
}

/// Whether a BAR mapping of `device` (an address as sysfs writes it) faulted, and what that
/// means, in the words of the card-gone line ("{device} no longer answers (...): {what}"); None
/// while none has. One atomic load when none has: the sampler asks after every sample.
pub fn gone(device: &str) -> Option<String> {
    let first = FIRST.load(Ordering::SeqCst);
    if first == 0 || device.parse::<PciAddress>().ok().map(|a| pack(&a) + 1) != Some(first) {
        return None;
    }
    let fd = FIRST_FD.load(Ordering::SeqCst);
    let at = FIRST_AT.load(Ordering::SeqCst);
    let mut what = "a load from its BAR mapping faulted (SIGBUS: the kernel withdrew the mapping, as it does for a reset or Memory Space disabled through VFIO, and for a sysfs mapping when a driver claims the BAR)".to_string();
    if fd >= 0 {
        // Read through the config region while the device is still open (the run ends here).
        let mut b = [0u8; 4];
        // SAFETY: pread(2) of four bytes into a stack buffer from a descriptor the run holds open.
        let n = unsafe { libc::pread(fd, b.as_mut_ptr().cast(), 4, at as libc::off_t) };
        let mut c = [0u8; 2];
        // SAFETY: as above, two bytes.
        let m = unsafe {
            libc::pread(fd, c.as_mut_ptr().cast(), 2, (at + crate::pci::config::COMMAND as u64) as libc::off_t)
        };
        let command = u16::from_le_bytes(c);
        if n == 4 && b[..2] == [0xff, 0xff] {
            what += ", and its config space reads vendor id 0xffff";
        } else if m == 2 && command & crate::pci::config::CMD_MEMORY == 0 {
            what += &format!(", and its Memory Space Enable is off (command register {command:#06x})");
        }
    }
    Some(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unpack(v: u64) -> PciAddress {
        PciAddress {
            domain: (v >> 16) as u32,
            bus: (v >> 8) as u8,
            device: ((v >> 3) & 0x1f) as u8,
            function: (v & 7) as u8,
        }
    }

    #[test]
    fn addresses_survive_the_packing() {
        for a in ["0000:00:00.0", "0000:ff:1f.7", "10000:03:00.1", "ffff:80:02.3"] {
            let a: PciAddress = a.parse().unwrap();
            assert_eq!(unpack(pack(&a)), a);
        }
    }

    /// The lookup answers for addresses inside a registered mapping only, the first fault once,
    /// and nothing after the mapping is unregistered. No signal here (tests/fault_guard.rs
    /// makes real faults in a process of its own).
    #[test]
    fn lookup_finds_registered_ranges_only() {
        let m = crate::os::mmap::Mmap::anonymous(2 * crate::os::mmap::page_size(), false).unwrap();
        // A domain no other test uses: the gone record is the process's.
        let a: PciAddress = "fffe:03:00.0".parse().unwrap();
        let base = m.as_ptr() as usize;
        let g = register(m.as_ptr(), m.len(), &a, None).unwrap();
        assert_eq!(lookup(base - 1), None);
        assert_eq!(lookup(base + m.len()), None);
        assert!(!g.faulted());
        let hit = lookup(base + 5).unwrap();
        assert_eq!((hit.start, hit.len, hit.first), (base, m.len(), true));
        assert!(g.faulted());
        assert!(!lookup(base + m.len() - 1).unwrap().first, "the second fault is not the first");
        let what = gone("fffe:03:00.0").unwrap();
        assert!(what.starts_with("a load from its BAR mapping faulted (SIGBUS"), "{what}");
        assert_eq!(gone("fffe:03:00.1"), None, "another device");
        drop(g);
        assert_eq!(lookup(base + 5), None, "unregistered");
    }
}
