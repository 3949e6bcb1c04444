//! The callbacks pcibench gives a model (`struct pcibench_host`): DMA through the client's
//! mappings (the card's host map, where the server registers each DMA_MAP at its IOVA), interrupts
//! through the card's `SimIrq` (as the config space's enables and the MSI-X table decide), and a
//! log line. What the model does wrong here is counted and said in one line: an IOVA outside every
//! mapping is an IOMMU fault (the model sees PCIBENCH_FAULT and goes on); an impossible argument
//! or a call from a thread the model did not declare breaks the model (PCIBENCH_INVALID, and the
//! server stops once the call returns).

use super::abi;
use super::crash;
use crate::sim::host_map::HostMap;
use crate::sim::irq::{Signal, SimIrq};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The most one DMA callback may move: far more than any transfer, far less than a wild length.
pub const MAX_DMA_CALL: u64 = 1 << 32;
/// IOMMU faults logged one by one before only the count goes on (as the kernel's DMAR log is
/// rate-limited).
const FAULTS_LOGGED: u64 = 8;
/// PCI_STATUS Received Master Abort: a read answered with Unsupported Request, as an IOMMU
/// answers a DMA read it blocks (PCIe Base 4.0 §7.5.1.1.4).
pub const STATUS_RECEIVED_MASTER_ABORT: u16 = 1 << 13;

/// Where the model's log lines and pcibench's reports of it go.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// What the callbacks reach: one per loaded model, alive until after its destroy.
pub struct HostCtx {
    pub name: String,
    pub host: Arc<HostMap>,
    /// The card's interrupts, once describe said which it has.
    pub irq: OnceLock<Arc<SimIrq>>,
    /// Vectors the model may raise (the most of its MSI-X, MSI and INTx).
    pub vectors: AtomicU64,
    /// Bus Master Enable in the function's command register.
    pub bus_master: AtomicBool,
    /// PCI_STATUS error bits latched for the config space (write-1-to-clear there).
    pub status: AtomicU16,
    faults: Mutex<Faults>,
    /// The first thing that broke the model, once it did.
    broken: Mutex<Option<String>>,
    /// Set when the model broke: the server's stop flag.
    pub stop: Option<Arc<AtomicBool>>,
    pub log: Log,
}

#[derive(Default)]
struct Faults {
    count: u64,
    first: Option<String>,
}

thread_local! {
    /// The model this thread may call back into: the model thread's, or a thread the model declared.
    static CALLER: Cell<*const HostCtx> = const { Cell::new(std::ptr::null()) };
}

impl HostCtx {
    pub fn new(name: String, host: Arc<HostMap>, log: Log, stop: Option<Arc<AtomicBool>>) -> HostCtx {
        HostCtx {
            name,
            host,
            irq: OnceLock::new(),
            vectors: AtomicU64::new(0),
            bus_master: AtomicBool::new(false),
            status: AtomicU16::new(0),
            faults: Mutex::default(),
            broken: Mutex::new(None),
            stop,
            log,
        }
    }

    /// The calling thread (the model thread) may call back into this model.
    pub fn adopt(&self) {
        CALLER.set(self);
    }

    /// `struct pcibench_host` for the model: `self` must outlive the model.
    pub fn table(&self) -> abi::Host {
        abi::Host {
            abi_version: abi::ABI_VERSION,
            ctx: self as *const HostCtx as *mut c_void,
            dma_read,
            dma_write,
            raise_irq,
            lower_irq,
            log,
            thread_declare,
        }
    }

    /// IOMMU faults so far, and the first one in words.
    pub fn faults(&self) -> (u64, Option<String>) {
        let f = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        (f.count, f.first.clone())
    }

    /// What broke the model, if anything did.
    pub fn broken(&self) -> Option<String> {
        self.broken.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The model is broken: keep the first reason, and stop the server.
    pub fn break_with(&self, why: String) {
        // The server says it once, as its last line (the run's error), when it has stopped.
        self.broken.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(why);
        if let Some(stop) = &self.stop {
            stop.store(true, Ordering::Relaxed);
        }
    }

    fn fault(&self, what: &str, iova: u64, len: u64, why: &str) {
        let mut f = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        f.count += 1;
        let line = format!("{what} of {len} bytes at IOVA {iova:#x} {why}");
        if f.count <= FAULTS_LOGGED {
            (self.log)(&format!("IOMMU fault {}: the model's {line}", f.count));
        }
        f.first.get_or_insert(line);
    }
}

/// The model behind `ctx`, if the calling thread may call into it.
///
/// # Safety
/// `ctx` is what `table` handed the model: a live `HostCtx`, or a model's garbage.
unsafe fn ctx_of<'a>(ctx: *mut c_void, what: &str) -> Option<&'a HostCtx> {
    let me = CALLER.get();
    if me.is_null() || me as *mut c_void != ctx {
        // Not a thread of this model's: say so on the model we know of, if any.
        // SAFETY: `me` is null or a HostCtx the thread adopted, which outlives its model.
        if let Some(known) = unsafe { me.as_ref() } {
            known.break_with(format!("called {what} with a context that is not the one pcibench gave it"));
        } else {
            // SAFETY: the caller's ctx is the model's own; trusted only to name it here.
            let c = unsafe { (ctx as *const HostCtx).as_ref() };
            if let Some(c) = c {
                c.break_with(format!(
                    "called {what} from a thread pcibench does not know: call host->thread_declare on it first"
                ));
            }
        }
        return None;
    }
    // SAFETY: checked above: the thread's adopted HostCtx, alive while the model is.
    unsafe { me.as_ref() }
}

/// The checks every DMA callback makes: Some(status) when it goes no further.
fn dma_checks(c: &HostCtx, what: &str, iova: u64, buf_null: bool, len: u64) -> Option<c_int> {
    if len == 0 {
        return Some(abi::OK);
    }
    if buf_null || len > MAX_DMA_CALL || iova.checked_add(len).is_none() {
        let why = if buf_null { "a NULL buffer".to_string() } else { format!("an impossible length ({len} bytes)") };
        c.break_with(format!("called {what} at IOVA {iova:#x} with {why}"));
        return Some(abi::INVALID);
    }
    if !c.bus_master.load(Ordering::Acquire) {
        c.fault(what, iova, len, "with Bus Master off in its command register (the client has not enabled it)");
        return Some(abi::FAULT);
    }
    None
}

unsafe extern "C" fn dma_read(ctx: *mut c_void, iova: u64, buf: *mut c_void, len: u64) -> c_int {
    // SAFETY: ctx as handed out by `table`.
    let Some(c) = (unsafe { ctx_of(ctx, "dma_read") }) else { return abi::INVALID };
    if let Some(s) = dma_checks(c, "dma_read", iova, buf.is_null(), len) {
        if s == abi::FAULT && !buf.is_null() && len <= MAX_DMA_CALL {
            // SAFETY: the model's buffer of `len` bytes; an unanswered read completes all-ones.
            unsafe { std::ptr::write_bytes(buf.cast::<u8>(), 0xff, len as usize) };
            c.status.fetch_or(STATUS_RECEIVED_MASTER_ABORT, Ordering::Relaxed);
        }
        return s;
    }
    crash::in_callback(Some(0));
    // SAFETY: the model's buffer of `len` bytes (checked non-null, bounded); a wild pointer
    // faults here, and the crash handler names the callback.
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len as usize) };
    let r = c.host.read(iova, out);
    crash::in_callback(None);
    match r {
        Ok(()) => abi::OK,
        Err(_) => {
            out.fill(0xff);
            c.status.fetch_or(STATUS_RECEIVED_MASTER_ABORT, Ordering::Relaxed);
            c.fault("dma_read", iova, len, "is outside every DMA mapping the client made");
            abi::FAULT
        }
    }
}

unsafe extern "C" fn dma_write(ctx: *mut c_void, iova: u64, buf: *const c_void, len: u64) -> c_int {
    // SAFETY: ctx as handed out by `table`.
    let Some(c) = (unsafe { ctx_of(ctx, "dma_write") }) else { return abi::INVALID };
    if let Some(s) = dma_checks(c, "dma_write", iova, buf.is_null(), len) {
        return s;
    }
    crash::in_callback(Some(1));
    // SAFETY: as in dma_read.
    let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len as usize) };
    let r = c.host.write(iova, data);
    crash::in_callback(None);
    match r {
        Ok(()) => abi::OK,
        Err(_) => {
            c.fault("dma_write", iova, len, "is outside every DMA mapping the client made");
            abi::FAULT
        }
    }
}

/// The checks both interrupt callbacks make: the card's interrupts, when `vector` is one it has.
fn irq_of<'a>(c: &'a HostCtx, what: &str, vector: u32) -> Option<&'a SimIrq> {
    let n = c.vectors.load(Ordering::Relaxed);
    match c.irq.get() {
        Some(irq) if (vector as u64) < n => Some(irq),
        _ => {
            c.break_with(format!(
                "called {what}({vector}), but its describe gives it {n} interrupt vector{}",
                if n == 1 { "" } else { "s" }
            ));
            None
        }
    }
}

unsafe extern "C" fn raise_irq(ctx: *mut c_void, vector: u32) -> c_int {
    // SAFETY: ctx as handed out by `table`.
    let Some(c) = (unsafe { ctx_of(ctx, "raise_irq") }) else { return abi::INVALID };
    let Some(irq) = irq_of(c, "raise_irq", vector) else { return abi::INVALID };
    let what = || format!("the model {} raised vector {vector}", c.name);
    match irq.signals() {
        // A message per raise, as QEMU's msi_notify/msix_notify send one per call.
        Some(Signal::MsiX | Signal::Msi) => irq.message(vector, what),
        // A level: asserted until lowered (each vector a cause ORed into INTA#).
        Some(Signal::Intx) => irq.set(vector & 63, 0, true, what),
        // Nothing enabled: the level is remembered where there is a pin (it asserts when
        // Interrupt Disable clears); a message kind not enabled drops the request, as hardware does.
        None if irq.offers().intx => irq.set(vector & 63, 0, true, what),
        None => {}
    }
    abi::OK
}

unsafe extern "C" fn lower_irq(ctx: *mut c_void, vector: u32) -> c_int {
    // SAFETY: ctx as handed out by `table`.
    let Some(c) = (unsafe { ctx_of(ctx, "lower_irq") }) else { return abi::INVALID };
    let Some(irq) = irq_of(c, "lower_irq", vector) else { return abi::INVALID };
    irq.set(vector & 63, 0, false, String::new);
    abi::OK
}

unsafe extern "C" fn log(ctx: *mut c_void, line: *const c_char) {
    // SAFETY: ctx as handed out by `table`.
    let Some(c) = (unsafe { ctx_of(ctx, "log") }) else { return };
    if line.is_null() {
        return;
    }
    // SAFETY: the model's NUL-terminated string.
    let text = unsafe { CStr::from_ptr(line) }.to_string_lossy();
    let text = crate::text::clip(text.trim_end(), 300);
    (c.log)(&format!("model {}: {}", c.name, crate::text::escape_controls(&text)));
}

unsafe extern "C" fn thread_declare(ctx: *mut c_void) -> c_int {
    if ctx.is_null() {
        return abi::INVALID;
    }
    // The model's word: this thread of its own calls back into the model `ctx`.
    CALLER.set(ctx as *const HostCtx);
    abi::OK
}
