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
//! it takes no lock and allocates nothing. A handler holds the mapping it found (a count of
//! handlers in flight per slot) until its remap is done, and unregistering waits for that count to
//! fall to zero: the owner unmaps right after, and the range may be reused at once (by the heap, a
//! new mapping), so a remap that came later would replace whatever lives there then.

use crate::os::fault::{self, Hit};
use crate::pci::PciAddress;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Live mappings at once: a command maps at most the six BARs of one device (and a few of a
/// second, for `compare`-style tools to come); a mapping beyond these works unguarded.
const SLOTS: usize = 32;

const FREE: u8 = 0;
/// Being filled in by `register`: the lookup skips it.
const CLAIMED: u8 = 1;
const LIVE: u8 = 2;
/// Faulted: its pages read all-ones now.
const GONE: u8 = 3;
/// Being unregistered: the lookup skips it, and `Guarded::drop` waits out the handlers in flight.
const DRAINING: u8 = 4;

struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    /// Rounded up to whole pages: the mapping covers them all.
    len: AtomicUsize,
    device: AtomicU64,
    fd: AtomicI32,
    at: AtomicU64,
    /// Handlers looking at this slot now: while one holds it, the slot is neither freed nor reused.
    busy: AtomicU32,
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
            busy: AtomicU32::new(0),
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
    /// Unregister, and return only once no handler holds the mapping: the caller unmaps next.
    /// No handler takes the slot after the DRAINING store, and one that took it before is seen
    /// here: it counted itself in `busy` before it read the state, and both sides are SeqCst, so
    /// either its read sees DRAINING or this load sees its count (the store-load pairing of
    /// Dekker's algorithm). A handler does a few system calls and returns; it never waits on
    /// anything, so neither does this for long.
    fn drop(&mut self) {
        let s = &TABLE[self.slot];
        s.state.store(DRAINING, Ordering::SeqCst);
        while s.busy.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        s.state.store(FREE, Ordering::SeqCst);
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
    register_key(ptr, len, pack(device), config)
}

fn register_key(ptr: *mut u8, len: usize, device: u64, config: Option<(RawFd, u64)>) -> Option<Guarded> {
    let page = crate::os::mmap::page_size();
    for (i, s) in TABLE.iter().enumerate() {
        if s.state.compare_exchange(FREE, CLAIMED, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            continue;
        }
        s.start.store(ptr as usize, Ordering::SeqCst);
        s.len.store(len.next_multiple_of(page), Ordering::SeqCst);
        s.device.store(device, Ordering::SeqCst);
        let (fd, at) = config.unwrap_or((-1, 0));
        s.fd.store(fd, Ordering::SeqCst);
        s.at.store(at, Ordering::SeqCst);
        s.state.store(LIVE, Ordering::SeqCst);
        return Some(Guarded { slot: i });
    }
    None
}

/// A device served over vfio-user as the registry keys it: its socket path hashed (FNV-1a), with
/// the top bit set, which no packed PCI address has (they use 48 bits).
fn vfio_user_key(socket: &str) -> u64 {
    let h = socket.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (h >> 1) | (1 << 63)
}

/// Register a mapping of a BAR a vfio-user server shared (`socket`, the device's path): a server
/// that shrinks the memory behind it (ftruncate) faults this process's loads, which then read
/// all-ones and name the card gone, as a withdrawn VFIO mapping does.
pub fn register_vfio_user(ptr: *mut u8, len: usize, socket: &str) -> Option<Guarded> {
    register_key(ptr, len, vfio_user_key(socket), None)
}

/// The handler's question: is `addr` inside a registered mapping? The first fault of a mapping
/// records its device as gone and clears Bus Master where this process set it; then `remedy`
/// runs on the mapping while the slot is held (see the module docs), and its answer is returned.
/// None: no registered mapping holds `addr`. Async-signal-safe (atomics, and `emergency`'s one
/// pwrite).
fn lookup(addr: usize, remedy: fault::Remedy) -> Option<bool> {
    for s in &TABLE {
        // Counted in before the state is read (see `Guarded::drop`).
        s.busy.fetch_add(1, Ordering::SeqCst);
        let state = s.state.load(Ordering::SeqCst);
        let (start, len) = (s.start.load(Ordering::SeqCst), s.len.load(Ordering::SeqCst));
        if (state != LIVE && state != GONE) || addr.wrapping_sub(start) >= len {
            s.busy.fetch_sub(1, Ordering::SeqCst);
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
        let done = remedy(Hit { start, len, first }, addr);
        s.busy.fetch_sub(1, Ordering::SeqCst);
        return Some(done);
    }
    None
}

/// Whether a BAR mapping of `device` (an address as sysfs writes it) faulted, and what that
/// means, in the words of the card-gone line ("{device} no longer answers (...): {what}"); None
/// while none has. One atomic load when none has: the sampler asks after every sample.
pub fn gone(device: &str) -> Option<String> {
    let first = FIRST.load(Ordering::SeqCst);
    if first == 0 {
        return None;
    }
    if let Some(socket) = device.strip_prefix("vfio-user:") {
        return (vfio_user_key(socket) + 1 == first).then(|| {
            "a load from a BAR mapping its vfio-user server shared faulted (SIGBUS: the server shrank the memory behind it)"
                .to_string()
        });
    }
    if device.parse::<PciAddress>().ok().map(|a| pack(&a) + 1) != Some(first) {
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
        // Two registered pages inside four of our own: the bytes either side are ours and unregistered,
        // never another test's mapping the kernel happened to place next to this one.
        let page = crate::os::mmap::page_size();
        let m = crate::os::mmap::Mmap::anonymous(4 * page, false).unwrap();
        let len = 2 * page;
        // A domain no other test uses: the gone record is the process's.
        let a: PciAddress = "fffe:03:00.0".parse().unwrap();
        let base = m.as_ptr() as usize + page;
        let g = register(base as *mut u8, len, &a, None).unwrap();
        assert_eq!(lookup(base - 1, seen), None);
        assert_eq!(lookup(base + len, seen), None);
        assert!(!g.faulted());
        assert_eq!(lookup(base + 5, seen), Some(true));
        assert_eq!(SEEN.load(Ordering::SeqCst), base ^ len ^ 1, "the whole mapping, its first fault");
        assert!(g.faulted());
        assert_eq!(lookup(base + len - 1, seen), Some(true));
        assert_eq!(SEEN.load(Ordering::SeqCst), base ^ len, "the second fault is not the first");
        // The card-gone record is the process's first fault: another test's fault may have come
        // first (the order of tests is the harness's), and then this device is not the one named.
        if FIRST.load(Ordering::SeqCst) == pack(&a) + 1 {
            let what = gone("fffe:03:00.0").unwrap();
            assert!(what.starts_with("a load from its BAR mapping faulted (SIGBUS"), "{what}");
        }
        assert_eq!(gone("fffe:03:00.1"), None, "another device");
        drop(g);
        assert_eq!(lookup(base + 5, seen), None, "unregistered");
    }

    /// What `seen` was last handed: start ^ len ^ first.
    static SEEN: AtomicUsize = AtomicUsize::new(0);

    fn seen(hit: Hit, _addr: usize) -> bool {
        SEEN.store(hit.start ^ hit.len ^ hit.first as usize, Ordering::SeqCst);
        true
    }

    /// The slot `held` holds, and what it saw of it once unregistering had begun.
    static HELD_SLOT: AtomicUsize = AtomicUsize::new(usize::MAX);
    static HELD_SAW: AtomicU8 = AtomicU8::new(u8::MAX);
    static DROPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// A remedy that stays in flight until the mapping's owner has begun to unregister it (or
    /// has finished: then the wait did not happen), and records the slot's state then.
    fn held(_hit: Hit, _addr: usize) -> bool {
        let s = &TABLE[HELD_SLOT.load(Ordering::SeqCst)];
        loop {
            let state = s.state.load(Ordering::SeqCst);
            if DROPPED.load(Ordering::SeqCst) || (state != LIVE && state != GONE) {
                HELD_SAW.store(if DROPPED.load(Ordering::SeqCst) { u8::MAX } else { state }, Ordering::SeqCst);
                return true;
            }
            std::thread::yield_now();
        }
    }

    /// S8 (issue 51): a handler between finding a mapping and remapping it holds it: the owner's
    /// unregistering (after which it unmaps, and the range may be reused) waits until the
    /// handler is done, and the slot is not free meanwhile. Without the wait, `held` sees the
    /// drop finished (or the slot FREE) and the assertion fails; with it, the handler always
    /// sees DRAINING and the drop still running, whatever the scheduling: the drop cannot end
    /// while the remedy runs. No signal here: `lookup` is called as the handler calls it.
    #[test]
    fn unregistering_waits_for_a_handler_in_flight() {
        let m = crate::os::mmap::Mmap::anonymous(crate::os::mmap::page_size(), false).unwrap();
        let a: PciAddress = "fffe:04:00.0".parse().unwrap();
        let g = register(m.as_ptr(), m.len(), &a, None).unwrap();
        HELD_SLOT.store(g.slot, Ordering::SeqCst);
        let addr = m.as_ptr() as usize + 8;
        let handler = std::thread::spawn(move || lookup(addr, held));
        // The handler is in flight once it has counted itself in and found the mapping.
        while TABLE[HELD_SLOT.load(Ordering::SeqCst)].state.load(Ordering::SeqCst) != GONE {
            std::thread::yield_now();
        }
        let owner = std::thread::spawn(move || {
            drop(g);
            DROPPED.store(true, Ordering::SeqCst);
        });
        assert_eq!(handler.join().unwrap(), Some(true));
        owner.join().unwrap();
        assert_eq!(HELD_SAW.load(Ordering::SeqCst), DRAINING, "the slot was freed under a handler in flight");
        assert_eq!(TABLE[HELD_SLOT.load(Ordering::SeqCst)].state.load(Ordering::SeqCst), FREE);
        drop(m);
    }
}
