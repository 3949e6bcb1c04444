//! The `sim` access path: a simulated card (`crate::sim`) as a device. Memory BARs are host
//! memory with a CPU pointer; register BARs go to the engine model, access by access; config
//! space is a 256-byte model built from the card's `DeviceInfo`. Its figures are host-memory
//! figures ("simulated card").

use super::irq::{Fired, Interrupts, IrqKind, IrqRequest};
use super::{BarRegion, ConfigPort, DeviceAccess, DmaPath, IoMode, Mapping, Via};
use crate::mmio::{MemType, Width};
use crate::pci::config::CMD_BUS_MASTER;
use crate::sim::config_space::ConfigSpace;
use crate::sim::irq::{Signal, SimIrq};
use crate::sim::mem::Pages;
use crate::sim::{RegisterModel, SimBar, SimCard, SimId};
use crate::{Error, Result};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A simulated card, opened.
pub struct SimDevice {
    name: &'static str,
    config: Arc<SimConfig>,
    card: SimCard,
    /// The register BAR holding the MSI-X table and PBA.
    msix_bar: u8,
    /// Error injection: the card fell off the bus (`fall_off_bus`).
    gone: Arc<std::sync::atomic::AtomicBool>,
}

/// The card's config space and what acts on it: the register models (Bus Master, the command
/// register, PCI_STATUS errors they latch) and its interrupts (the MSI, MSI-X and INTx enables,
/// the Interrupt Status bit), shared with engines that keep a `ConfigPort`.
struct SimConfig {
    name: &'static str,
    space: Mutex<ConfigSpace>,
    models: Vec<Arc<dyn RegisterModel>>,
    irq: Option<Arc<SimIrq>>,
    /// A thread of `pcibench serve` moves the engines (`set_moved_by_clock`): an interrupt
    /// waiter only waits.
    by_clock: std::sync::atomic::AtomicBool,
}

/// PCI_STATUS: its offset, the write-1-to-clear error bits and Interrupt Status (PCI Local Bus
/// 3.0 §6.2.3).
const STATUS: usize = 0x06;
const STATUS_RW1C: u16 = 0xf900;
const STATUS_INTERRUPT: u16 = 1 << 3;

/// The part of the 16-bit word at `at` that a config access of `len` bytes at `offset` covers,
/// as (bit mask in the word, shift of the access's first byte within it).
fn covers(offset: u64, len: usize, at: usize) -> Option<(u16, i32)> {
    let (start, end) = (offset as usize, offset as usize + len);
    let mut mask = 0u16;
    for byte in 0..2 {
        if (start..end).contains(&(at + byte)) {
            mask |= 0xff << (8 * byte);
        }
    }
    (mask != 0).then_some((mask, (at as i32 - start as i32) * 8))
}

impl SimConfig {
    fn space(&self) -> std::sync::MutexGuard<'_, ConfigSpace> {
        self.space.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn advance(&self) {
        self.models.iter().for_each(|m| m.advance());
    }

    fn due_in(&self) -> Option<Duration> {
        self.models.iter().filter_map(|m| m.due_in()).min()
    }
}

impl ConfigPort for SimConfig {
    /// The header as stored, with the error bits the models latched ORed into PCI_STATUS.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.space().read(offset, buf)?;
        if let Some((mask, shift)) = covers(offset, buf.len(), STATUS) {
            // Interrupt Status follows the INTx level whether or not Interrupt Disable lets it out.
            let intx = self.irq.as_ref().is_some_and(|i| i.offers().intx && i.level());
            let status = if intx { STATUS_INTERRUPT } else { 0 };
            let latched = self.models.iter().fold(status, |a, m| a | m.pci_status()) & mask;
            for (i, b) in buf.iter_mut().enumerate() {
                let bit = 8 * i as i32 - shift;
                if (0..16).contains(&bit) {
                    *b |= (latched >> bit) as u8;
                }
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut c = self.space();
        c.write(offset, data)?;
        if let Some((_, shift)) = covers(offset, data.len(), STATUS) {
            let mut ones = 0u16;
            for (i, &b) in data.iter().enumerate() {
                let bit = 8 * i as i32 - shift;
                if (0..16).contains(&bit) {
                    ones |= (b as u16) << bit;
                }
            }
            self.models.iter().for_each(|m| m.clear_pci_status(ones & STATUS_RW1C));
        }
        let (command, latency) = (c.command(), c.bytes()[0x0d]);
        for m in &self.models {
            m.set_bus_master(command & CMD_BUS_MASTER != 0);
            m.config_written(command, latency);
        }
        if let Some(irq) = &self.irq {
            irq.set_control(c.control());
        }
        Ok(())
    }

    fn address(&self) -> String {
        self.name.to_string()
    }
}

impl SimDevice {
    /// A fresh instance of the simulated card `id`.
    pub fn open(id: SimId) -> Result<SimDevice> {
        let spec = id.spec();
        Ok(SimDevice::from_card(spec.name(), &spec.info(), spec.build()?))
    }

    /// The default card, `sim`.
    pub fn new() -> Result<SimDevice> {
        SimDevice::open(SimId::DEFAULT)
    }

    /// A card built by the caller (tests build the `sim` card with a custom engine).
    pub fn from_card(name: &'static str, info: &crate::pci::DeviceInfo, card: SimCard) -> SimDevice {
        let msix_bar = msix_bar(&card);
        SimDevice::from_card_with(name, info, card, msix_bar, None)
    }

    /// A card whose MSI-X table and PBA lie in register BAR `msix_bar`, with config space
    /// capabilities of its own (`own_caps`: their offset and bytes) linked after the card's: a
    /// user's model (`crate::model`) says where.
    pub fn from_card_with(
        name: &'static str,
        info: &crate::pci::DeviceInfo,
        card: SimCard,
        msix_bar: u8,
        own_caps: Option<(u8, &[u8])>,
    ) -> SimDevice {
        let models: Vec<Arc<dyn RegisterModel>> = card
            .bars
            .iter()
            .filter_map(|(_, b)| match b {
                SimBar::Registers(m) => Some(Arc::clone(m)),
                SimBar::Memory(_) => None,
            })
            .collect();
        let mut space = ConfigSpace::from_info(info, card.irq.as_ref().map(|i| (i.offers(), msix_bar)));
        if let Some((at, bytes)) = own_caps {
            space.append_capabilities(at, bytes);
        }
        if models.iter().any(|m| m.conventional_pci()) {
            space.allow_conventional();
        }
        let irq = card.irq.clone();
        let config = Arc::new(SimConfig { name, space: Mutex::new(space), models, irq, by_clock: Default::default() });
        SimDevice { name, config, card, msix_bar, gone: Default::default() }
    }

    /// Error injection: from now on the card answers nothing, as one that was surprise-removed,
    /// lost its link or is being reset: config space and register BARs read all-ones (the
    /// completer abort or master abort a root port turns into 0xff bytes), writes go nowhere.
    pub fn fall_off_bus(&self) {
        self.gone.store(true, std::sync::atomic::Ordering::Release);
    }

    fn is_gone(&self) -> bool {
        self.gone.load(std::sync::atomic::Ordering::Acquire)
    }

    /// What drivers made the card's engine models do that the real IP would act on badly, in words,
    /// oldest first (every register model's `violations`).
    pub fn violations(&self) -> Vec<String> {
        self.config.models.iter().flat_map(|m| m.violations()).collect()
    }

    /// The memfd behind memory BAR `index`, which `pcibench serve` offers a vfio-user client to map.
    pub fn bar_file(&self, index: u8) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self.card.bars.iter().find(|(i, _)| *i == index) {
            Some((_, SimBar::Memory(mem))) => mem.file(),
            _ => None,
        }
    }

    /// The card's view of host memory, where its DMA buffers are registered.
    pub fn host_map(&self) -> &Arc<crate::sim::host_map::HostMap> {
        &self.card.host
    }

    /// Bring the card's engines to now (`sim::datapath`): what they finished completes.
    pub fn advance(&self) {
        self.config.advance();
    }

    /// How long until one of the card's engines next completes something (None: nothing is
    /// under way).
    pub fn due_in(&self) -> Option<Duration> {
        self.config.due_in()
    }

    /// Whether serve's clock thread moves the engines (`on`: the client's memory is reached by
    /// message, lab/findings.md 15), so that a thread waiting for the card's interrupts (serve's
    /// forwarder) never moves data itself, possibly under a lock a register access takes.
    pub fn set_moved_by_clock(&self, on: bool) {
        self.config.by_clock.store(on, std::sync::atomic::Ordering::Release);
    }
}

impl DeviceAccess for SimDevice {
    fn via(&self) -> Via {
        Via::Sim
    }

    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        match self.card.bars.iter().find(|(i, _)| *i == index) {
            Some((_, SimBar::Memory(mem))) => Ok(Box::new(SimMemBar { index, mem: Arc::clone(mem), mapping, io })),
            Some((_, SimBar::Registers(model))) => Ok(Box::new(SimRegBar {
                index,
                model: Arc::clone(model),
                irq: self.card.irq.clone().filter(|_| index == self.msix_bar),
                mapping,
                gone: Arc::clone(&self.gone),
            })),
            None => {
                let have: Vec<String> = self.card.bars.iter().map(|(i, _)| i.to_string()).collect();
                Err(Error::usage(format!(
                    "{} has BARs {}; BAR{index} does not exist (run `pcibench info {}`)",
                    self.name,
                    have.join(", "),
                    self.name
                )))
            }
        }
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if self.is_gone() {
            buf.fill(0xff);
            return Ok(());
        }
        self.config.read(offset, buf)
    }

    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.is_gone() {
            return Ok(());
        }
        self.config.write(offset, data)
    }

    fn config_port(&self) -> Result<Arc<dyn ConfigPort>> {
        Ok(self.config.clone())
    }

    fn populate_card_memory(&self, addr: u64, len: u64) {
        for m in &self.config.models {
            m.populate_card(addr, len);
        }
    }

    /// The card's interrupts, as VFIO would route them: the kind asked for, or the best the card
    /// offers (MSI-X, else MSI, else INTx), each vector an eventfd its models signal, the kind
    /// enabled in the card's config space as vfio-pci enables it (`sim_enables.rs`).
    fn interrupts(&self, req: IrqRequest) -> Result<Box<dyn Interrupts>> {
        let Some(irq) = &self.card.irq else {
            return Err(Error::Unsupported(format!(
                "the simulated card {} raises no interrupts (its engine model completes by polling): use --completion poll",
                self.name
            )));
        };
        let offers = irq.offers();
        let has = |k: IrqKind| offers.vectors(signal(k)) > 0;
        let kind = match req.kind {
            Some(k) if has(k) => k,
            Some(k) => {
                let list: Vec<String> = [IrqKind::MsiX, IrqKind::Msi, IrqKind::Intx]
                    .into_iter()
                    .filter(|k| has(*k))
                    .map(|k| k.to_string())
                    .collect();
                return Err(Error::Unsupported(format!(
                    "the simulated card {} has no {k}: it signals by {}",
                    self.name,
                    list.join(", ")
                )));
            }
            None => [IrqKind::MsiX, IrqKind::Msi, IrqKind::Intx]
                .into_iter()
                .find(|k| has(*k))
                .ok_or_else(|| Error::Unsupported(format!("the simulated card {} has no interrupt", self.name)))?,
        };
        let vectors = irq.route(signal(kind), req.vectors)?;
        let fds = irq.fds().ok_or_else(|| Error::Device("the simulated card's interrupt routing vanished".into()))?;
        let timer = rustix::time::timerfd_create(
            rustix::time::TimerfdClockId::Monotonic,
            rustix::time::TimerfdFlags::NONBLOCK | rustix::time::TimerfdFlags::CLOEXEC,
        )
        .map_err(|e| Error::Unsupported(format!("cannot create a timer for the simulated card's interrupts: {e}")))?;
        let found = enables::enable(&self.config, irq, signal(kind), vectors);
        Ok(Box::new(SimInterrupts {
            irq: Arc::clone(irq),
            config: Arc::clone(&self.config),
            found,
            fds,
            timer,
            kind,
            vectors,
        }))
    }

    /// Sim buffers live in process memory the card's engines may touch: its "IOMMU" is the
    /// registry of these buffers (the host map).
    fn dma_path(&self) -> Result<DmaPath> {
        Ok(DmaPath::Sim(Arc::clone(&self.card.host)))
    }
}

/// The BAR holding the card's MSI-X table and PBA: its (first) register BAR, where the XDMA and
/// QDMA IPs place them.
fn msix_bar(card: &SimCard) -> u8 {
    card.bars.iter().find(|(_, b)| matches!(b, SimBar::Registers(_))).map_or(0, |(i, _)| *i)
}

fn signal(k: IrqKind) -> Signal {
    match k {
        IrqKind::Intx => Signal::Intx,
        IrqKind::Msi => Signal::Msi,
        IrqKind::MsiX => Signal::MsiX,
    }
}

/// A simulated card's vectors routed to this process: an eventfd per vector, waited on together;
/// the function's enables as they were found, put back on drop.
struct SimInterrupts {
    irq: Arc<SimIrq>,
    config: Arc<SimConfig>,
    found: enables::Found,
    fds: Arc<Vec<OwnedFd>>,
    /// Armed at the engines' next completion while a wait blocks: the interrupt fires at its
    /// modeled time, on this (the waiter's) thread.
    timer: OwnedFd,
    kind: IrqKind,
    vectors: u32,
}

impl Interrupts for SimInterrupts {
    fn kind(&self) -> IrqKind {
        self.kind
    }
    fn vectors(&self) -> u32 {
        self.vectors
    }
    /// The waiter is the host looking: the engines come up to now (raising what completed), and
    /// while nothing has fired it sleeps until the next completion's modeled time (a timerfd: no
    /// timer slack) or the timeout, whichever is first, then looks again.
    fn wait(&self, timeout: Duration) -> Result<Fired> {
        let start = Instant::now();
        let failed =
            |e: std::io::Error| Error::Device(format!("waiting for the simulated card's interrupt failed: {e}"));
        loop {
            let by_clock = self.config.by_clock.load(std::sync::atomic::Ordering::Acquire);
            if !by_clock {
                self.config.advance();
            }
            let left = timeout.saturating_sub(start.elapsed());
            let due = self.config.due_in().filter(|d| *d < left && !by_clock);
            let counts = wait_eventfds(&self.fds, left, due.map(|d| (&self.timer, d))).map_err(failed)?;
            if counts.iter().any(|n| *n > 0) || start.elapsed() >= timeout {
                return Ok(Fired::from_counts(counts));
            }
        }
    }
    fn unmask(&self) -> Result<()> {
        self.irq.unmask();
        Ok(())
    }
    fn describe(&self) -> String {
        match self.kind {
            IrqKind::Intx => "INTx (simulated card, eventfd)".into(),
            k => format!("{k}, {} vectors (simulated card, an eventfd each)", self.vectors),
        }
    }
}

impl Drop for SimInterrupts {
    /// Torn down as VFIO does when the eventfds go: the card's causes stay as they are, and one
    /// that rises from now on is an interrupt nothing services.
    fn drop(&mut self) {
        enables::restore(&self.config, &self.irq, &self.found);
        self.irq.unroute();
    }
}

/// Wait up to `timeout` for any of the (non-blocking) eventfds, or for `timer` (a timerfd armed
/// for the given time) to expire; each eventfd's count since the last wait (all 0 on a timeout or
/// the timer). `Duration::ZERO` only collects what is pending.
fn wait_eventfds(fds: &[OwnedFd], timeout: Duration, timer: Option<(&OwnedFd, Duration)>) -> std::io::Result<Vec<u64>> {
    let deadline = Instant::now() + timeout.min(Duration::from_secs(i32::MAX as u64));
    if let Some((t, after)) = timer {
        // A zero it_value disarms a timerfd: the earliest is a nanosecond.
        let it = rustix::time::Itimerspec {
            it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: Timespec::try_from(after.max(Duration::from_nanos(1))).map_err(std::io::Error::other)?,
        };
        rustix::time::timerfd_settime(t, rustix::time::TimerfdTimerFlags::empty(), &it)?;
    }
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ts = Timespec::try_from(left).map_err(std::io::Error::other)?;
        let mut polled: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(f, PollFlags::IN)).collect();
        if let Some((t, _)) = timer {
            polled.push(PollFd::new(t, PollFlags::IN));
        }
        match poll(&mut polled, Some(&ts)) {
            Ok(_) => break,
            // A signal (Ctrl-C sets the stop flag) ends poll(2) early: wait out the rest, so an
            // interrupt being waited for is not lost mid-transfer.
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some((t, _)) = timer {
        // Disarmed and drained: the next wait arms it afresh.
        let off = rustix::time::Itimerspec {
            it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: Timespec { tv_sec: 0, tv_nsec: 0 },
        };
        rustix::time::timerfd_settime(t, rustix::time::TimerfdTimerFlags::empty(), &off)?;
        let mut v = [0u8; 8];
        let _ = rustix::io::read(t, &mut v);
    }
    let mut counts = Vec::with_capacity(fds.len());
    for f in fds {
        let mut v = [0u8; 8];
        counts.push(match rustix::io::read(f, &mut v) {
            Ok(8) => u64::from_ne_bytes(v),
            Ok(n) => return Err(std::io::Error::other(format!("eventfd read returned {n} bytes, not 8"))),
            Err(rustix::io::Errno::AGAIN) => 0,
            Err(e) => return Err(e.into()),
        });
    }
    Ok(counts)
}

fn check(index: u8, len: u64, offset: u64, bytes: u64, unit: usize) -> Result<()> {
    if offset.checked_add(bytes).is_none_or(|end| end > len) {
        return Err(Error::usage(format!(
            "{bytes} bytes at offset {offset:#x} run past the end of BAR{index} ({len:#x} bytes)"
        )));
    }
    if offset % unit as u64 != 0 || bytes % unit as u64 != 0 {
        return Err(Error::usage(format!(
            "BAR{index} offset {offset:#x} and length {bytes} must be multiples of the {}-byte access width",
            unit
        )));
    }
    Ok(())
}

fn scalar_bytes(index: u8, width: Width) -> Result<usize> {
    match width {
        Width::B8 | Width::B16 | Width::B32 | Width::B64 => Ok(width.bytes()),
        _ => Err(Error::Unsupported(format!("a single BAR{index} access is 8, 16, 32 or 64 bits wide, not {width}"))),
    }
}

/// A memory BAR: host memory standing in for card memory behind a BAR.
struct SimMemBar {
    index: u8,
    mem: Arc<Pages>,
    mapping: Mapping,
    io: IoMode,
}

impl BarRegion for SimMemBar {
    fn index(&self) -> u8 {
        self.index
    }
    fn len(&self) -> u64 {
        self.mem.len() as u64
    }
    fn mapping(&self) -> Mapping {
        // Host memory either way; reported as asked so reports label the run as requested.
        self.mapping
    }
    /// Host memory: write-back, whatever mapping was asked for.
    fn mem_type(&self) -> MemType {
        MemType::Wb
    }
    fn via(&self) -> Via {
        Via::Sim
    }
    /// None when syscall I/O was asked for, so callers take the read_bulk/write_bulk path.
    fn ptr(&self) -> Option<*mut u8> {
        (self.io == IoMode::Mmap).then(|| self.mem.as_ptr())
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, n as u64, n)?;
        self.mem.read_scalar(offset, n)
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, n as u64, n)?;
        self.mem.write_scalar(offset, n, value)
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        check(self.index, self.len(), offset, buf.len() as u64, width.bytes())?;
        self.mem.read(offset, buf)
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        check(self.index, self.len(), offset, buf.len() as u64, width.bytes())?;
        self.mem.write(offset, buf)
    }
}

/// A register BAR: no CPU mapping, every access goes to the engine model, or to the MSI-X table
/// and PBA where the card places them in this BAR.
struct SimRegBar {
    index: u8,
    model: Arc<dyn RegisterModel>,
    irq: Option<Arc<SimIrq>>,
    mapping: Mapping,
    /// The card fell off the bus (`SimDevice::fall_off_bus`): reads are all-ones, writes lost.
    gone: Arc<std::sync::atomic::AtomicBool>,
}

impl SimRegBar {
    fn gone(&self) -> bool {
        self.gone.load(std::sync::atomic::Ordering::Acquire)
    }

    fn reg_read(&self, offset: u64, width: Width) -> Result<u64> {
        match self.irq.as_ref().and_then(|i| i.table_read(offset, width.bytes())) {
            Some(v) => Ok(v),
            None => self.model.try_read(offset, width),
        }
    }

    fn reg_write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        if self.irq.as_ref().is_some_and(|i| i.table_write(offset, width.bytes(), value)) {
            return Ok(());
        }
        self.model.write(offset, width, value)
    }
}

impl BarRegion for SimRegBar {
    fn index(&self) -> u8 {
        self.index
    }
    fn len(&self) -> u64 {
        self.model.size()
    }
    fn mapping(&self) -> Mapping {
        self.mapping
    }
    fn mem_type(&self) -> MemType {
        MemType::Wb
    }
    fn via(&self) -> Via {
        Via::Sim
    }
    fn ptr(&self) -> Option<*mut u8> {
        None
    }
    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        self.model.check_width(self.index, width)?;
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, n as u64, n)?;
        if self.gone() {
            return Ok(u64::MAX >> (64 - 8 * n as u32));
        }
        self.reg_read(offset, width)
    }
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        self.model.check_width(self.index, width)?;
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, n as u64, n)?;
        if self.gone() {
            return Ok(());
        }
        self.reg_write(offset, width, value)
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        self.model.check_width(self.index, width)?;
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, buf.len() as u64, n)?;
        if self.gone() {
            buf.fill(0xff);
            return Ok(());
        }
        for (i, chunk) in buf.chunks_exact_mut(n).enumerate() {
            let v = self.reg_read(offset + (i * n) as u64, width)?;
            chunk.copy_from_slice(&v.to_le_bytes()[..n]);
        }
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        self.model.check_width(self.index, width)?;
        let n = scalar_bytes(self.index, width)?;
        check(self.index, self.len(), offset, buf.len() as u64, n)?;
        for (i, chunk) in buf.chunks_exact(n).enumerate() {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(chunk);
            self.reg_write(offset + (i * n) as u64, width, u64::from_le_bytes(b))?;
        }
        Ok(())
    }
    fn observe(&self) {
        if !self.gone() {
            self.model.advance();
        }
    }
}

#[path = "sim_enables.rs"]
mod enables;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bars_read_back_and_check_bounds() {
        let dev = SimDevice::new().unwrap();
        let bar = dev.open_bar(2, Mapping::Wc, IoMode::Mmap).unwrap();
        assert_eq!((bar.index(), bar.len(), bar.mapping(), bar.via()), (2, 128 << 10, Mapping::Wc, Via::Sim));
        assert!(bar.ptr().is_some());
        bar.write(0x100, Width::B64, 0x0123_4567_89ab_cdef).unwrap();
        assert_eq!(bar.read(0x100, Width::B32).unwrap(), 0x89ab_cdef);
        assert_eq!(bar.read(0x104, Width::B16).unwrap(), 0x4567);
        let mut buf = [0u8; 8];
        bar.read_bulk(0x100, &mut buf, Width::B64).unwrap();
        assert_eq!(u64::from_le_bytes(buf), 0x0123_4567_89ab_cdef);
        bar.write_bulk(0x1fff8, &[7; 8], Width::B32).unwrap();
        assert!(bar.write_bulk(0x1fffc, &[7; 8], Width::B32).is_err(), "past the end");
        assert!(bar.read(0x101, Width::B32).is_err(), "misaligned");
        assert!(bar.read(0, Width::V128).is_err(), "not a scalar width");
        // Opened again, the same memory; syscall mode has no pointer.
        let again = dev.open_bar(2, Mapping::Uc, IoMode::Syscall).unwrap();
        assert!(again.ptr().is_none());
        assert_eq!(again.read(0x1fff8, Width::B8).unwrap(), 7);
        assert!(dev.open_bar(1, Mapping::Uc, IoMode::Mmap).is_err());
    }

    #[test]
    fn dma_bar_is_32_bit_registers_only() {
        let dev = SimDevice::new().unwrap();
        let bar = dev.open_bar(crate::sim::xdma::card::SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
        assert!(bar.ptr().is_none());
        assert_eq!(bar.len(), 0x10000);
        assert_eq!(bar.read(0x2000, Width::B32).unwrap() & 0xffff_0000, 0x1fc2_0000);
        assert_eq!(bar.read(0x3000, Width::B32).unwrap() & 0xffff_0000, 0x1fc3_0000);
        let e = bar.read(0x2000, Width::B64).unwrap_err().to_string();
        assert!(e.contains("XDMA registers are 32-bit only"), "{e}");
        assert!(bar.write(0x2004, Width::B8, 1).unwrap_err().to_string().contains("32-bit only"));
        assert!(bar.read(0x10000, Width::B32).is_err());
        let mut ids = [0u8; 8];
        bar.read_bulk(0x2000, &mut ids, Width::B32).unwrap();
        assert_eq!(u32::from_le_bytes(ids[..4].try_into().unwrap()) >> 16, 0x1fc2);
    }

    #[test]
    fn config_space_bus_master_round_trips() {
        let dev = SimDevice::new().unwrap();
        let mut cmd = [0u8; 2];
        dev.config_read(4, &mut cmd).unwrap();
        assert_eq!(u16::from_le_bytes(cmd) & CMD_BUS_MASTER, 0);
        dev.config_write(4, &(u16::from_le_bytes(cmd) | CMD_BUS_MASTER).to_le_bytes()).unwrap();
        dev.config_read(4, &mut cmd).unwrap();
        assert_ne!(u16::from_le_bytes(cmd) & CMD_BUS_MASTER, 0);
        dev.config_write(4, &(u16::from_le_bytes(cmd) & !CMD_BUS_MASTER).to_le_bytes()).unwrap();
        dev.config_read(4, &mut cmd).unwrap();
        assert_eq!(u16::from_le_bytes(cmd) & CMD_BUS_MASTER, 0);
        let mut ids = [0u8; 4];
        dev.config_read(0, &mut ids).unwrap();
        assert_eq!(ids, [0xee, 0x10, 0x24, 0x70]);
        assert!(dev.config_read(0xff, &mut ids).is_err());
    }
}
