//! Host memory as the sim card sees it: the ranges of bus addresses it may touch.
//!
//! The sim card's bus addresses are process virtual addresses. A buffer is reachable only while
//! it is registered here (as an IOMMU mapping would make it), and the registration owns the
//! memory: dropping it first removes the range under the write lock (waiting out any DMA copy in
//! flight, which holds the read lock), then unmaps. An address outside every registered range is
//! a fault the DMA model reports as a read/write error, never undefined behaviour.

use super::mem::{Pages, Scattered};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

/// The memory behind one registration.
enum Backing {
    Pages(Pages),
    Scattered(Scattered),
    /// No memory here: reached through `Remote` (held by the range).
    Remote(u64),
}

/// Host memory the card reaches by message rather than by pointer: a vfio-user client's memory
/// mapped without a descriptor, which the server reads and writes with DMA_READ/DMA_WRITE.
pub trait Remote: Send + Sync {
    /// Copy `out.len()` bytes at bus address `bus` into `out`.
    fn read(&self, bus: u64, out: &mut [u8]) -> Result<(), HostFault>;
    /// Copy `data` to bus address `bus`.
    fn write(&self, bus: u64, data: &[u8]) -> Result<(), HostFault>;
}

#[derive(Clone)]
struct Range {
    end: u64,
    ptr: *mut u8,
    remote: Option<Arc<dyn Remote>>,
}

/// Where a bus address range is: a pointer into registered memory, or behind a `Remote`.
enum Found {
    Ptr(*mut u8),
    Remote(Arc<dyn Remote>),
}

// SAFETY: `ptr` points into memory owned by a live `Registration`; it is only dereferenced under
// the map's read lock, and the registration removes it under the write lock before unmapping.
unsafe impl Send for Range {}
// SAFETY: as above.
unsafe impl Sync for Range {}

/// The sim card's view of host memory (one per sim card).
#[derive(Default)]
pub struct HostMap {
    ranges: RwLock<BTreeMap<u64, Range>>,
    /// Test hook (`set_pace`): nanoseconds every DMA access to host memory takes at least.
    pace_ns: AtomicU64,
    /// Accesses made while paced (counted only then: the hot path stays one relaxed load).
    paced: AtomicU64,
}

/// Why a DMA access to host memory failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFault {
    pub bus: u64,
    pub len: u64,
}

impl std::fmt::Display for HostFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes at bus address {:#x} are not inside any registered buffer", self.len, self.bus)
    }
}

impl HostMap {
    pub fn new() -> Arc<HostMap> {
        Arc::new(HostMap::default())
    }

    fn read_lock(&self) -> RwLockReadGuard<'_, BTreeMap<u64, Range>> {
        // A poisoned lock only means a panic elsewhere; the map itself is always consistent.
        self.ranges.read().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(self: &Arc<Self>, ptr: *mut u8, len: usize, backing: Backing) -> Registration {
        self.insert_at(ptr as u64, ptr, len, backing)
    }

    fn insert_at(self: &Arc<Self>, start: u64, ptr: *mut u8, len: usize, backing: Backing) -> Registration {
        let mut map = self.ranges.write().unwrap_or_else(|e| e.into_inner());
        map.insert(start, Range { end: start + len as u64, ptr, remote: None });
        Registration { map: Arc::clone(self), start, backing: Some(backing) }
    }

    /// Make `pages` reachable by the card at bus address = its virtual address.
    pub fn register_pages(self: &Arc<Self>, pages: Pages) -> Registration {
        let (ptr, len) = (pages.as_ptr(), pages.len());
        self.insert(ptr, len, Backing::Pages(pages))
    }

    /// Make `pages` reachable by the card at bus address `bus` (not its address in this process):
    /// a vfio-user client's buffer, DMA_MAP'd at the client's IOVA. None when `[bus, bus+len)`
    /// overlaps a registered range or wraps.
    pub fn register_pages_at(self: &Arc<Self>, bus: u64, pages: Pages) -> Option<Registration> {
        let (ptr, len) = (pages.as_ptr(), pages.len());
        let end = bus.checked_add(len as u64)?;
        // Checked and inserted under one write lock, so two registrations cannot overlap.
        let mut map = self.ranges.write().unwrap_or_else(|e| e.into_inner());
        if map.range(..end).next_back().is_some_and(|(_, r)| r.end > bus) {
            return None;
        }
        map.insert(bus, Range { end, ptr, remote: None });
        drop(map);
        Some(Registration { map: Arc::clone(self), start: bus, backing: Some(Backing::Pages(pages)) })
    }

    /// Make `[bus, bus+len)` reachable through `remote` (a vfio-user client's memory mapped
    /// without a descriptor). None when it overlaps a registered range or wraps.
    pub fn register_remote_at(self: &Arc<Self>, bus: u64, len: u64, remote: Arc<dyn Remote>) -> Option<Registration> {
        let end = bus.checked_add(len)?;
        let mut map = self.ranges.write().unwrap_or_else(|e| e.into_inner());
        if len == 0 || map.range(..end).next_back().is_some_and(|(_, r)| r.end > bus) {
            return None;
        }
        map.insert(bus, Range { end, ptr: std::ptr::null_mut(), remote: Some(remote) });
        drop(map);
        Some(Registration { map: Arc::clone(self), start: bus, backing: Some(Backing::Remote(len)) })
    }

    /// Make a scattered buffer's bus view reachable by the card.
    pub fn register_scattered(self: &Arc<Self>, s: Scattered) -> Registration {
        let (ptr, len) = (s.bus_ptr(), s.len());
        self.insert(ptr, len, Backing::Scattered(s))
    }

    /// Test hook: every DMA access to host memory (data, descriptor fetches, writebacks) takes at
    /// least `pace`, as on a slow host (TCG, a loaded machine) or a narrow link: engines that are
    /// slow but moving, against which a driver's wait is tested. Zero turns it off.
    pub fn set_pace(&self, pace: std::time::Duration) {
        self.pace_ns.store(pace.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// DMA accesses to host memory made while paced (test hook).
    pub fn paced_accesses(&self) -> u64 {
        self.paced.load(Ordering::Relaxed)
    }

    /// Number of registered ranges (buffers alive).
    pub fn len(&self) -> usize {
        self.read_lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `[bus, bus+len)` lies inside one registered range.
    pub fn contains(&self, bus: u64, len: u64) -> bool {
        Self::find(&self.read_lock(), bus, len).is_some()
    }

    fn find(map: &BTreeMap<u64, Range>, bus: u64, len: u64) -> Option<Found> {
        let end = bus.checked_add(len)?;
        let (&start, r) = map.range(..=bus).next_back()?;
        if end > r.end {
            return None;
        }
        Some(match &r.remote {
            Some(remote) => Found::Remote(Arc::clone(remote)),
            // The offset stays inside the registered range, so later derefs stay in bounds.
            None => Found::Ptr(r.ptr.wrapping_add((bus - start) as usize)),
        })
    }

    fn pace(&self) {
        let pace = self.pace_ns.load(Ordering::Relaxed);
        if pace != 0 {
            std::thread::sleep(std::time::Duration::from_nanos(pace));
            self.paced.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Run `f` with a pointer to `[bus, bus+len)` while the range cannot be unregistered.
    /// `f` must stay within `len` bytes of the pointer. A range reached by message is bounced:
    /// read into a buffer, `f` run on it, and written back if `f` changed it (the engines'
    /// copies either read the range or write all of it).
    pub(crate) fn with_range<R>(&self, bus: u64, len: u64, f: impl FnOnce(*mut u8) -> R) -> Result<R, HostFault> {
        self.pace();
        let map = self.read_lock();
        match Self::find(&map, bus, len).ok_or(HostFault { bus, len })? {
            Found::Ptr(p) => Ok(f(p)),
            Found::Remote(remote) => {
                drop(map);
                let mut buf = vec![0u8; len as usize];
                remote.read(bus, &mut buf)?;
                let before = buf.clone();
                let r = f(buf.as_mut_ptr());
                if buf != before {
                    remote.write(bus, &buf)?;
                }
                Ok(r)
            }
        }
    }

    /// Copy host memory at `bus` into `out`.
    pub fn read(&self, bus: u64, out: &mut [u8]) -> Result<(), HostFault> {
        if super::stage::read(bus, out) {
            return Ok(()); // fetched before a staged pass (`stage.rs`)
        }
        self.pace();
        let map = self.read_lock();
        match Self::find(&map, bus, out.len() as u64).ok_or(HostFault { bus, len: out.len() as u64 })? {
            // SAFETY: `p` covers out.len() bytes of a registered range held by the read lock.
            Found::Ptr(p) => unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) },
            Found::Remote(remote) => {
                drop(map);
                remote.read(bus, out)?
            }
        }
        Ok(())
    }

    /// Copy `data` into host memory at `bus`.
    pub fn write(&self, bus: u64, data: &[u8]) -> Result<(), HostFault> {
        if super::stage::staging() {
            // Kept for after the pass, in order (`stage.rs`); where it goes is checked now.
            if !self.contains(bus, data.len() as u64) {
                return Err(HostFault { bus, len: data.len() as u64 });
            }
            super::stage::keep(|| super::stage::Op::Write(bus, data.to_vec()));
            return Ok(());
        }
        self.pace();
        let map = self.read_lock();
        match Self::find(&map, bus, data.len() as u64).ok_or(HostFault { bus, len: data.len() as u64 })? {
            // SAFETY: `p` covers data.len() bytes of a registered range held by the read lock.
            Found::Ptr(p) => unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) },
            Found::Remote(remote) => {
                drop(map);
                remote.write(bus, data)?
            }
        }
        Ok(())
    }

    /// Store a 32-bit little-endian word with release ordering (a writeback the CPU polls):
    /// a CPU that sees it also sees every byte the card wrote before it.
    pub fn store_u32_release(&self, bus: u64, value: u32) -> Result<(), HostFault> {
        if super::stage::staging() {
            if !self.contains(bus, 4) {
                return Err(HostFault { bus, len: 4 });
            }
            super::stage::keep(|| super::stage::Op::Store32(bus, value));
            return Ok(());
        }
        let remote = matches!(Self::find(&self.read_lock(), bus, 4), Some(Found::Remote(_)));
        if bus % 4 != 0 || remote {
            // A message is ordered after every earlier one on the socket: the client sees the
            // data before the word.
            std::sync::atomic::fence(Ordering::Release);
            return self.write(bus, &value.to_le_bytes());
        }
        self.with_range(bus, 4, |p| {
            // SAFETY: `p` is 4-byte aligned, covers 4 bytes of a registered range held by the
            // read lock, and the CPU side reads it atomically too.
            let word = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) };
            word.store(value.to_le(), Ordering::Release);
        })
    }
}

/// Keeps one buffer registered (and its memory alive); unregisters, then unmaps, on drop.
pub struct Registration {
    map: Arc<HostMap>,
    start: u64,
    backing: Option<Backing>,
}

impl Registration {
    /// The CPU's pointer to the buffer (contiguous in both cases).
    pub fn cpu_ptr(&self) -> *mut u8 {
        match &self.backing {
            Some(Backing::Pages(p)) => p.as_ptr(),
            Some(Backing::Scattered(s)) => s.cpu_ptr(),
            Some(Backing::Remote(_)) | None => std::ptr::null_mut(),
        }
    }

    pub fn len(&self) -> usize {
        match &self.backing {
            Some(Backing::Pages(p)) => p.len(),
            Some(Backing::Scattered(s)) => s.len(),
            Some(Backing::Remote(n)) => *n as usize,
            None => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bus address of the first byte of CPU-view page `i` (bus-contiguous for plain pages).
    pub fn bus_of_page(&self, i: usize) -> u64 {
        match &self.backing {
            Some(Backing::Pages(_) | Backing::Remote(_)) => self.start + (i * super::mem::PAGE) as u64,
            Some(Backing::Scattered(s)) => s.bus_of_page(i),
            None => 0,
        }
    }

    pub fn is_scattered(&self) -> bool {
        matches!(self.backing, Some(Backing::Scattered(_)))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = self.map.ranges.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&self.start);
        drop(map);
        // Only now, with no DMA copy able to find the range, release the memory.
        self.backing.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_registered_ranges_are_reachable_and_drop_unregisters() {
        let map = HostMap::new();
        let reg = map.register_pages(Pages::new("t", 4096).unwrap());
        let bus = reg.bus_of_page(0);
        map.write(bus + 8, &[1, 2, 3]).unwrap();
        let mut out = [0u8; 3];
        map.read(bus + 8, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert!(map.contains(bus, 4096));
        assert_eq!(map.read(bus + 4095, &mut [0; 2]), Err(HostFault { bus: bus + 4095, len: 2 }));
        assert!(map.write(bus.wrapping_sub(1), &[0]).is_err());
        map.store_u32_release(bus + 16, 0x8000_0003).unwrap();
        map.read(bus + 16, &mut out[..2]).unwrap();
        assert_eq!(out[..2], [3, 0]);
        drop(reg);
        assert!(map.is_empty());
        assert!(map.read(bus, &mut out).is_err(), "a dropped buffer is a fault, not a dangling read");
    }

    #[test]
    fn pages_registered_at_a_foreign_bus_address_do_not_overlap() {
        let map = HostMap::new();
        let reg = map.register_pages_at(0x10_0000, Pages::new("t", 8192).unwrap()).unwrap();
        assert_eq!(reg.bus_of_page(1), 0x10_1000);
        map.write(0x10_1ff8, &[9; 8]).unwrap();
        let mut out = [0u8; 8];
        map.read(0x10_1ff8, &mut out).unwrap();
        assert_eq!(out, [9; 8]);
        assert!(map.register_pages_at(0x10_1000, Pages::new("t", 4096).unwrap()).is_none(), "inside");
        assert!(map.register_pages_at(0xf_f000, Pages::new("t", 8192).unwrap()).is_none(), "across the start");
        assert!(map.register_pages_at(u64::MAX - 100, Pages::new("t", 4096).unwrap()).is_none(), "wraps");
        let next = map.register_pages_at(0x10_2000, Pages::new("t", 4096).unwrap()).unwrap();
        drop((reg, next));
        assert!(map.is_empty());
    }
}
