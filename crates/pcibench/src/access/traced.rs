//! `--trace`: a device whose every register access and config-space access goes to a `Tracer`
//! as it happens. `Session::traced` wraps the device it opened, so the engines opened on it, their
//! probes and the runners' config writes (Bus Master) are traced with no change to them; an
//! engine asks its BAR for the tracer (`BarRegion::tracer`) to report its descriptors and
//! writebacks. Writes are traced before they are made (a write that hangs the card is the last
//! line), reads once they return. CPU mappings (`ptr`) pass through untraced: what goes through
//! them is the data a measurement times (PIO copies, latency's MMIO reads), not register
//! programming.
//!
//! Every method of `DeviceAccess` and `BarRegion` is forwarded here: a method added to either
//! trait with a default must be forwarded too, or a traced device would take the default.

use super::{
    BarRegion, ConfigPort, DeviceAccess, DmaPath, Fired, Interrupts, IoMode, IrqKind, IrqRequest, Mapping, Via,
};
use crate::mmio::Width;
use crate::trace::{Access, Tracer};
use crate::Result;
use std::sync::Arc;
use std::time::Duration;

/// A device whose accesses are traced.
pub struct TracedDevice {
    inner: Box<dyn DeviceAccess>,
    trace: Tracer,
}

impl TracedDevice {
    pub fn new(inner: Box<dyn DeviceAccess>, trace: Tracer) -> TracedDevice {
        TracedDevice { inner, trace }
    }

    fn wrap(&self, bar: Result<Box<dyn BarRegion>>) -> Result<Box<dyn BarRegion>> {
        Ok(Box::new(TracedBar { inner: bar?, trace: self.trace.clone() }))
    }
}

/// A failed access in words, for the trace (the caller gets the error itself).
fn failed(trace: &Tracer, what: std::fmt::Arguments, e: &crate::Error) {
    trace.note("error", &format!("{what}: {e}"));
}

impl DeviceAccess for TracedDevice {
    fn via(&self) -> Via {
        self.inner.via()
    }

    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        self.wrap(self.inner.open_bar(index, mapping, io))
    }

    fn open_bar_read_only(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        self.wrap(self.inner.open_bar_read_only(index, mapping, io))
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        match self.inner.config_read(offset, buf) {
            Ok(()) => {
                self.trace.config(Access::Read, offset, buf);
                Ok(())
            }
            Err(e) => {
                failed(&self.trace, format_args!("config read of {} bytes at {offset:#x}", buf.len()), &e);
                Err(e)
            }
        }
    }

    fn config_fd(&self) -> Option<(std::os::fd::RawFd, u64)> {
        self.inner.config_fd()
    }

    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.trace.config(Access::Write, offset, data);
        self.inner.config_write(offset, data).inspect_err(|e| {
            failed(&self.trace, format_args!("config write of {} bytes at {offset:#x}", data.len()), e)
        })
    }

    fn interrupts(&self, req: IrqRequest) -> Result<Box<dyn Interrupts>> {
        let inner = self.inner.interrupts(req)?;
        self.trace.irq_route(&inner.kind().to_string(), inner.vectors(), &inner.describe());
        Ok(Box::new(TracedIrqs { inner, trace: self.trace.clone() }))
    }

    fn populate_card_memory(&self, addr: u64, len: u64) {
        self.inner.populate_card_memory(addr, len)
    }

    fn config_port(&self) -> Result<Arc<dyn ConfigPort>> {
        let inner = self.inner.config_port()?;
        Ok(Arc::new(TracedConfig { inner, trace: self.trace.clone() }))
    }

    fn dma_path(&self) -> Result<DmaPath> {
        self.inner.dma_path()
    }

    fn tracer(&self) -> Option<&Tracer> {
        Some(&self.trace)
    }
}

/// Routed interrupts whose every signal is traced as the wait that collected it returns (the
/// count the kernel's /proc/interrupts line of the vector moves by), and whose teardown is traced.
struct TracedIrqs {
    inner: Box<dyn Interrupts>,
    trace: Tracer,
}

impl Interrupts for TracedIrqs {
    fn kind(&self) -> IrqKind {
        self.inner.kind()
    }
    fn vectors(&self) -> u32 {
        self.inner.vectors()
    }
    fn wait(&self, timeout: Duration) -> Result<Fired> {
        let fired = self.inner.wait(timeout).inspect_err(|e| failed(&self.trace, format_args!("interrupt wait"), e))?;
        if !fired.is_empty() {
            self.trace.irq(&self.inner.kind().to_string(), fired.counts());
        }
        Ok(fired)
    }
    fn unmask(&self) -> Result<()> {
        self.inner.unmask().inspect_err(|e| failed(&self.trace, format_args!("INTx unmask"), e))
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

impl Drop for TracedIrqs {
    fn drop(&mut self) {
        // Written before the inner teardown runs (fields drop after this body).
        self.trace.irq_off(&self.inner.kind().to_string());
    }
}

/// A BAR whose single and bulk accesses are traced.
pub struct TracedBar {
    inner: Box<dyn BarRegion>,
    trace: Tracer,
}

impl TracedBar {
    /// `inner` with its accesses traced to `trace` (a served card's BARs: `pcibench serve --trace`).
    pub fn new(inner: Box<dyn BarRegion>, trace: Tracer) -> TracedBar {
        TracedBar { inner, trace }
    }
}

impl BarRegion for TracedBar {
    fn index(&self) -> u8 {
        self.inner.index()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn mapping(&self) -> Mapping {
        self.inner.mapping()
    }

    fn via(&self) -> Via {
        self.inner.via()
    }

    fn ptr(&self) -> Option<*mut u8> {
        self.inner.ptr()
    }

    fn io_mode(&self) -> Option<super::IoMode> {
        self.inner.io_mode()
    }

    fn device(&self) -> Option<String> {
        self.inner.device()
    }

    fn read(&self, offset: u64, width: Width) -> Result<u64> {
        match self.inner.read(offset, width) {
            Ok(v) => {
                self.trace.reg(Access::Read, self.inner.index(), offset, width, v);
                Ok(v)
            }
            Err(e) => {
                failed(&self.trace, format_args!("BAR{} {width}-bit read at {offset:#x}", self.inner.index()), &e);
                Err(e)
            }
        }
    }

    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        let bar = self.inner.index();
        self.trace.reg(Access::Write, bar, offset, width, value);
        self.inner
            .write(offset, width, value)
            .inspect_err(|e| failed(&self.trace, format_args!("BAR{bar} {width}-bit write at {offset:#x}"), e))
    }

    fn read_bulk(&self, offset: u64, buf: &mut [u8], width: Width) -> Result<()> {
        self.trace.bulk(Access::Read, self.inner.index(), offset, buf.len(), width);
        self.inner.read_bulk(offset, buf, width)
    }

    fn write_bulk(&self, offset: u64, buf: &[u8], width: Width) -> Result<()> {
        self.trace.bulk(Access::Write, self.inner.index(), offset, buf.len(), width);
        self.inner.write_bulk(offset, buf, width)
    }

    fn tracer(&self) -> Option<&Tracer> {
        Some(&self.trace)
    }
    fn observe(&self) {
        self.inner.observe()
    }
}

/// Config space an engine keeps (umem clears PCI_STATUS through it), traced.
struct TracedConfig {
    inner: Arc<dyn ConfigPort>,
    trace: Tracer,
}

impl ConfigPort for TracedConfig {
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read(offset, buf)?;
        self.trace.config(Access::Read, offset, buf);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.trace.config(Access::Write, offset, data);
        self.inner.write(offset, data)
    }

    fn address(&self) -> String {
        self.inner.address()
    }
}
