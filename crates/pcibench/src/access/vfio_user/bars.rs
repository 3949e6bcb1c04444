//! A served device's BARs as this process reaches them: mapped where the server offers an
//! mmap-able area with a sealed descriptor, by REGION_READ/REGION_WRITE messages everywhere else.
//! A BAR one area covers whole is a `SharedBar` (PIO timed on the mapping); a BAR only partly
//! covered (the sparse mmap capability, as vfio-pci once kept an MSI-X table out of a BAR's mmap)
//! is a `SparseBar`: its mapped areas by memory copies, the rest by messages. Every mapping is
//! registered with the SIGBUS guard, so a server that shrinks the memory behind it makes the card
//! read as gone rather than ending this process.

use super::client::Client;
use super::Region;
use crate::access::{guard, BarRegion, IoMode, Mapping, Via};
use crate::mmio::{MemType, Width};
use crate::os::mmap::{check_access, check_bulk, Mmap};
use crate::{Error, Result};
use std::sync::Arc;

/// One mapped area of a BAR: where it starts in the BAR, its mapping and guard registration.
pub(super) struct Area {
    pub offset: u64,
    // Declared before the mapping: unregistered before it is unmapped.
    _guard: Option<guard::Guarded>,
    pub map: Mmap,
}

impl Area {
    fn contains(&self, offset: u64, len: u64) -> bool {
        offset >= self.offset && offset + len <= self.offset + self.map.len() as u64
    }
}

/// Map the areas of region `r` (its descriptor already checked: sealed, large enough).
pub(super) fn map_areas(client: &Client, r: &Region) -> Result<Vec<Area>> {
    let Some(fd) = r.usable_fd() else { return Ok(Vec::new()) };
    let file = std::fs::File::from(
        fd.try_clone().map_err(|e| Error::Device(format!("cannot duplicate the descriptor of BAR{}: {e}", r.index)))?,
    );
    let mut out = Vec::new();
    for &(offset, len) in &r.areas {
        let n = usize::try_from(len).map_err(|_| Error::usage(format!("BAR{} is too large", r.index)))?;
        let map = Mmap::file(&file, r.offset + offset, n, true).map_err(|e| {
            Error::Device(format!("cannot map BAR{} at {offset:#x} as the vfio-user server offered: {e}", r.index))
        })?;
        let guard = guard::register_vfio_user(map.as_ptr(), map.len(), client.path());
        out.push(Area { offset, _guard: guard, map });
    }
    Ok(out)
}

/// Open BAR `r` for access through `client`.
pub(super) fn open(client: &Arc<Client>, r: &Region, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
    let messages = MessageBar { client: Arc::clone(client), index: r.index as u8, size: r.size, mapping };
    if io != IoMode::Mmap {
        return Ok(Box::new(messages));
    }
    let mut areas = map_areas(client, r)?;
    if r.mappable() && areas.len() == 1 {
        let area = areas.remove(0);
        return Ok(Box::new(SharedBar { area, index: r.index as u8, size: r.size, mapping }));
    }
    if areas.is_empty() {
        return Ok(Box::new(messages));
    }
    Ok(Box::new(SparseBar { areas, messages }))
}

fn scalar(index: u8, width: Width) -> Result<usize> {
    match width {
        Width::B8 | Width::B16 | Width::B32 | Width::B64 => Ok(width.bytes()),
        _ => Err(Error::Unsupported(format!("a single BAR{index} access is 8, 16, 32 or 64 bits wide, not {width}"))),
    }
}

/// A BAR the server let this process map whole: its memory is the model's own (shared memory, so
/// write-back, whatever mapping was asked for).
struct SharedBar {
    area: Area,
    index: u8,
    size: u64,
    mapping: Mapping,
}

impl BarRegion for SharedBar {
    fn index(&self) -> u8 {
        self.index
    }
    fn len(&self) -> u64 {
        self.size
    }
    fn mapping(&self) -> Mapping {
        self.mapping
    }
    fn mem_type(&self) -> MemType {
        MemType::Wb
    }
    fn via(&self) -> Via {
        Via::VfioUser
    }
    fn ptr(&self) -> Option<*mut u8> {
        Some(self.area.map.as_ptr())
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        check_access(self.size, offset, width)?;
        self.area.map.read(offset, width)
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        check_access(self.size, offset, width)?;
        self.area.map.write(offset, width, value)
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        check_bulk(self.size, offset, buf.len(), width)?;
        copy_out(&self.area, offset, buf);
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        check_bulk(self.size, offset, buf.len(), width)?;
        copy_in(&self.area, offset, buf);
        Ok(())
    }
}

fn copy_out(area: &Area, offset: u64, buf: &mut [u8]) {
    // SAFETY: the caller checked [offset, offset+len) lies inside the area's mapping; `buf` is
    // distinct memory.
    unsafe {
        std::ptr::copy_nonoverlapping(
            area.map.as_ptr().add((offset - area.offset) as usize),
            buf.as_mut_ptr(),
            buf.len(),
        )
    }
}

fn copy_in(area: &Area, offset: u64, buf: &[u8]) {
    // SAFETY: as copy_out.
    unsafe {
        std::ptr::copy_nonoverlapping(buf.as_ptr(), area.map.as_ptr().add((offset - area.offset) as usize), buf.len())
    }
}

/// A BAR the server maps in part: accesses inside an area are memory copies, the rest messages.
/// It has no single pointer (`ptr` None), so PIO runs through `read_bulk`/`write_bulk`.
struct SparseBar {
    areas: Vec<Area>,
    messages: MessageBar,
}

impl SparseBar {
    fn area(&self, offset: u64, len: u64) -> Option<&Area> {
        self.areas.iter().find(|a| a.contains(offset, len))
    }
}

impl BarRegion for SparseBar {
    fn index(&self) -> u8 {
        self.messages.index
    }
    fn len(&self) -> u64 {
        self.messages.size
    }
    fn mapping(&self) -> Mapping {
        self.messages.mapping
    }
    fn mem_type(&self) -> MemType {
        MemType::Wb
    }
    fn via(&self) -> Via {
        Via::VfioUser
    }
    fn ptr(&self) -> Option<*mut u8> {
        None
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        check_access(self.messages.size, offset, width)?;
        match self.area(offset, width.bytes() as u64) {
            Some(a) => a.map.read(offset - a.offset, width),
            None => self.messages.read(offset, width),
        }
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        check_access(self.messages.size, offset, width)?;
        match self.area(offset, width.bytes() as u64) {
            Some(a) => a.map.write(offset - a.offset, width, value),
            None => self.messages.write(offset, width, value),
        }
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        check_bulk(self.messages.size, offset, buf.len(), width)?;
        match self.area(offset, buf.len() as u64) {
            Some(a) => {
                copy_out(a, offset, buf);
                Ok(())
            }
            None => self.messages.read_bulk(offset, buf, width),
        }
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        check_bulk(self.messages.size, offset, buf.len(), width)?;
        match self.area(offset, buf.len() as u64) {
            Some(a) => {
                copy_in(a, offset, buf);
                Ok(())
            }
            None => self.messages.write_bulk(offset, buf, width),
        }
    }
}

/// A BAR reached only by messages: one REGION_READ/REGION_WRITE per access of `width` (as the
/// syscall path makes one pread/pwrite per access), so its figures are the message path's cost.
pub(super) struct MessageBar {
    client: Arc<Client>,
    index: u8,
    size: u64,
    mapping: Mapping,
}

impl MessageBar {
    /// Bytes per message: one access of `width`; a whole message's worth for the byte-string
    /// copies (memcpy, rep movsb), which have no access width of their own.
    fn chunk(&self, width: Width) -> usize {
        match width {
            Width::Memcpy | Width::Movsb => self.client.version.max_data(),
            w => w.bytes().min(self.client.version.max_data()),
        }
    }
}

impl BarRegion for MessageBar {
    fn index(&self) -> u8 {
        self.index
    }
    fn len(&self) -> u64 {
        self.size
    }
    fn mapping(&self) -> Mapping {
        self.mapping
    }
    fn mem_type(&self) -> MemType {
        MemType::Wb
    }
    fn via(&self) -> Via {
        Via::VfioUser
    }
    fn ptr(&self) -> Option<*mut u8> {
        None
    }
    fn io_mode(&self) -> Option<IoMode> {
        Some(IoMode::Syscall)
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        let n = scalar(self.index, width)?;
        check_access(self.size, offset, width)?;
        let mut b = [0u8; 8];
        self.client.region_read(self.index as u32, offset, &mut b[..n])?;
        Ok(u64::from_le_bytes(b))
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        let n = scalar(self.index, width)?;
        check_access(self.size, offset, width)?;
        self.client.region_write(self.index as u32, offset, &value.to_le_bytes()[..n])
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        check_bulk(self.size, offset, buf.len(), width)?;
        let n = self.chunk(width);
        for (i, chunk) in buf.chunks_mut(n).enumerate() {
            self.client.region_read(self.index as u32, offset + (i * n) as u64, chunk)?;
        }
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        check_bulk(self.size, offset, buf.len(), width)?;
        let n = self.chunk(width);
        for (i, chunk) in buf.chunks(n).enumerate() {
            self.client.region_write(self.index as u32, offset + (i * n) as u64, chunk)?;
        }
        Ok(())
    }
}
