//! The model thread: the one thread that calls a model (SystemC's kernel and most simulators need
//! that), from loading it to destroying it. Other threads (the server's client sessions) hand it
//! one call at a time and wait for the answer; between calls it keeps a timed model's time moving
//! (`pcibench_model_advance`: before every access, and whenever the time the model asked for has
//! passed), so a DMA or a timer in the model completes while nobody accesses it.

use super::abi;
use super::crash::{Call, Watch};
use super::describe::{self, Described, Raw};
use super::host::HostCtx;
use crate::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request to the model thread.
enum Request {
    Read { bar: u32, offset: u64, width: u32 },
    Write { bar: u32, offset: u64, width: u32, value: u64 },
    Reset,
}

/// The model's answer: its status and a read's value.
type Answer = (c_int, u64);

/// The symbols, as loaded.
#[derive(Clone, Copy)]
struct Syms {
    abi_version: abi::AbiVersionFn,
    create: abi::CreateFn,
    describe: abi::DescribeFn,
    read: abi::ReadFn,
    write: abi::WriteFn,
    reset: abi::ResetFn,
    destroy: abi::DestroyFn,
    advance: Option<abi::AdvanceFn>,
}

/// A model running on its thread.
pub struct ModelThread {
    /// One caller at a time: the request and the answer channel.
    chan: Mutex<(Sender<Request>, Receiver<Answer>)>,
    thread: Option<std::thread::JoinHandle<()>>,
    ctx: Arc<HostCtx>,
    /// A call never returned: the thread is left to the process's end.
    hung: std::sync::atomic::AtomicBool,
}

/// How long one call of the model may take. A register access of a real card completes in
/// microseconds (a PCIe completion timeout is typically 50 ms); a model that has not answered in
/// this long is stuck, and the server says so (and fails the access) before the client's own
/// per-request deadline (10 s) gives up on the server.
const HANG: Duration = Duration::from_secs(5);

/// The model's handle, moved to its thread.
struct Handle(*mut c_void);
// SAFETY: the handle is only ever used on the model thread, which owns it.
unsafe impl Send for Handle {}

impl ModelThread {
    /// Load the model at `path` on a new thread, create it with `args`, and check its
    /// description. `ctx` is what its callbacks reach.
    pub fn start(path: &Path, args: &str, ctx: Arc<HostCtx>) -> Result<(ModelThread, Described)> {
        let (req_tx, req_rx) = channel::<Request>();
        let (ans_tx, ans_rx) = channel::<Answer>();
        let (ready_tx, ready_rx) = channel::<Result<Described>>();
        let (path, args, mine) = (path.to_path_buf(), args.to_string(), Arc::clone(&ctx));
        let thread = std::thread::Builder::new()
            .name("model".into())
            .spawn(move || {
                let watch = Watch::start(&ctx.name);
                ctx.adopt();
                let enter = |c: Call, bar: u32, offset: u64, width: u32| {
                    if let Some(w) = &watch {
                        w.enter(c, bar, offset, width)
                    }
                };
                let leave = || {
                    if let Some(w) = &watch {
                        w.leave()
                    }
                };
                enter(Call::Load, 0, 0, 0);
                let loaded = load(&path);
                leave();
                let (lib, syms) = match loaded {
                    Ok(l) => l,
                    Err(e) => return drop(ready_tx.send(Err(e))),
                };
                let host = ctx.table();
                let made = create(&syms, &args, &host, &ctx, &enter, &leave);
                let (handle, described) = match made {
                    Ok(m) => m,
                    Err(e) => {
                        // The library stays loaded: see `keep`.
                        keep(lib);
                        return drop(ready_tx.send(Err(e)));
                    }
                };
                if ready_tx.send(Ok(described)).is_err() {
                    return;
                }
                serve(&syms, &handle, &req_rx, &ans_tx, &enter, &leave);
                enter(Call::Destroy, 0, 0, 0);
                // SAFETY: the handle create returned, destroyed once, on its own thread.
                unsafe { (syms.destroy)(handle.0) };
                leave();
                keep(lib);
            })
            .map_err(|e| Error::Unsupported(format!("cannot start the model thread: {e}")))?;
        let described = ready_rx.recv().unwrap_or_else(|_| {
            Err(Error::Device("the model thread ended while loading the model (see the line above)".into()))
        });
        let me = ModelThread {
            chan: Mutex::new((req_tx, ans_rx)),
            thread: Some(thread),
            ctx: mine,
            hung: Default::default(),
        };
        Ok((me, described?))
    }

    fn call(&self, r: Request) -> Answer {
        if self.hung.load(std::sync::atomic::Ordering::Relaxed) {
            return (abi::ABORT, 0);
        }
        let what = match r {
            Request::Read { bar, offset, width } => {
                format!("pcibench_model_bar_read (BAR{bar}, offset {offset:#x}, {width} bytes)")
            }
            Request::Write { bar, offset, width, .. } => {
                format!("pcibench_model_bar_write (BAR{bar}, offset {offset:#x}, {width} bytes)")
            }
            Request::Reset => "pcibench_model_reset".into(),
        };
        let chan = self.chan.lock().unwrap_or_else(|e| e.into_inner());
        if chan.0.send(r).is_err() {
            return (abi::ABORT, 0);
        }
        match spin_recv(&chan.1, HANG) {
            Ok(a) => a,
            Err(RecvTimeoutError::Timeout) => {
                self.hung.store(true, std::sync::atomic::Ordering::Relaxed);
                self.ctx.break_with(format!(
                    "has not returned from {what} (or its advance) in {} s: a model call must return",
                    HANG.as_secs()
                ));
                (abi::ABORT, 0)
            }
            Err(RecvTimeoutError::Disconnected) => (abi::ABORT, 0),
        }
    }

    /// A BAR read: the model's status and the value.
    pub fn read(&self, bar: u32, offset: u64, width: u32) -> Answer {
        self.call(Request::Read { bar, offset, width })
    }

    pub fn write(&self, bar: u32, offset: u64, width: u32, value: u64) -> c_int {
        self.call(Request::Write { bar, offset, width, value }).0
    }

    pub fn reset(&self) {
        self.call(Request::Reset);
    }
}

impl Drop for ModelThread {
    /// The thread destroys the model once its request channel closes.
    fn drop(&mut self) {
        let (tx, _) = channel();
        drop(std::mem::replace(&mut self.chan.get_mut().unwrap_or_else(|e| e.into_inner()).0, tx));
        if let Some(t) = self.thread.take() {
            if !self.hung.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = t.join();
            }
        }
    }
}

/// How long a hand-off between a caller and the model thread polls before it sleeps: a register
/// access answered within it costs no wake-up (a futex wake-up and a context switch each way,
/// most of an access otherwise). It yields while it polls rather than spinning: on a loaded host
/// (CI's two cores under load) a spinning waiter holds the CPU the other side needs, measured
/// 10x slower than sleeping; a yielding one lets it run, and on an idle host returns at once.
/// Bounded, so an idle model or caller sleeps.
const SPIN: Duration = Duration::from_micros(20);

/// `rx.recv_timeout(limit)`, polling (and yielding) up to `SPIN` before sleeping.
fn spin_recv<T>(rx: &Receiver<T>, limit: Duration) -> std::result::Result<T, RecvTimeoutError> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(std::sync::mpsc::TryRecvError::Empty) if start.elapsed() < SPIN => std::thread::yield_now(),
            Err(std::sync::mpsc::TryRecvError::Empty) => return rx.recv_timeout(limit.saturating_sub(start.elapsed())),
        }
    }
}

/// A library is never unloaded: a C++ or SystemC model registers destructors (atexit, thread-local
/// storage) that point into it, which dlclose(3) would leave dangling.
fn keep(lib: libloading::Library) {
    std::mem::forget(lib);
}

fn load(path: &Path) -> Result<(libloading::Library, Syms)> {
    let shown = path.display();
    // SAFETY: loading runs the library's constructors: the model's code, which the user asked to
    // run; a crash in them is named by the crash handler ("loading it").
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
        let why = e.to_string();
        let hint = ": is it a shared object built for this machine (cc -shared -fPIC)?";
        Error::Refused(format!("cannot load the model {shown}: {}{hint}", crate::text::one_line(&why)))
    })?;
    /// A symbol's value, or the line naming it.
    fn sym<T: Copy>(lib: &libloading::Library, shown: &str, name: &str) -> Result<T> {
        // SAFETY: `T` is the symbol's type as pcibench_model.h declares it; the value is copied
        // out while the library stays loaded (it is never unloaded: `keep`).
        unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|_| {
            Error::Refused(format!(
                "the model {shown} does not export {name}: implement it (crates/pcibench/include/pcibench_model.h) and rebuild"
            ))
        })
    }
    let s = shown.to_string();
    let [a, c, d, r, w, x, y] = abi::REQUIRED;
    let syms = Syms {
        abi_version: sym(&lib, &s, a)?,
        create: sym(&lib, &s, c)?,
        describe: sym(&lib, &s, d)?,
        read: sym(&lib, &s, r)?,
        write: sym(&lib, &s, w)?,
        reset: sym(&lib, &s, x)?,
        destroy: sym(&lib, &s, y)?,
        advance: sym(&lib, &s, abi::ADVANCE).ok(),
    };
    Ok((lib, syms))
}

/// Check the ABI version, create the model and check its description.
fn create(
    syms: &Syms,
    args: &str,
    host: &abi::Host,
    ctx: &HostCtx,
    enter: &dyn Fn(Call, u32, u64, u32),
    leave: &dyn Fn(),
) -> Result<(Handle, Described)> {
    enter(Call::AbiVersion, 0, 0, 0);
    // SAFETY: the model's exported function, of the type the header declares.
    let version = unsafe { (syms.abi_version)() };
    leave();
    if version != abi::ABI_VERSION {
        return Err(Error::Refused(format!(
            "the model {} was built for pcibench model ABI version {version}; this pcibench speaks version {}: rebuild it against this pcibench's crates/pcibench/include/pcibench_model.h",
            ctx.name,
            abi::ABI_VERSION
        )));
    }
    let c_args =
        CString::new(args).map_err(|_| Error::usage(format!("the model's arguments '{args}' hold a NUL byte")))?;
    let mut err = [0 as c_char; 512];
    enter(Call::Create, 0, 0, 0);
    // SAFETY: a NUL-terminated string, the host table that lives as long as `ctx` (past destroy),
    // and a buffer of the length given.
    let handle = unsafe { (syms.create)(c_args.as_ptr(), host, err.as_mut_ptr(), err.len()) };
    leave();
    if handle.is_null() {
        err[err.len() - 1] = 0;
        // SAFETY: NUL-terminated by the line above at the latest.
        let why = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy();
        let why = if why.trim().is_empty() { "it gave no reason".into() } else { crate::text::one_line(&why) };
        return Err(Error::Refused(format!("the model {} refused to start: {why}", ctx.name)));
    }
    let handle = Handle(handle);
    let mut dev = abi::Device::default();
    enter(Call::Describe, 0, 0, 0);
    // SAFETY: the handle create returned, and a zeroed struct of the size the header declares.
    let status = unsafe { (syms.describe)(handle.0, &mut dev) };
    leave();
    let described = if status != abi::OK {
        Err(Error::Refused(format!("the model {}'s describe failed (status {status})", ctx.name)))
    } else {
        describe::check(&copy_out(&dev), &ctx.name)
    };
    match described {
        Ok(d) => Ok((handle, d)),
        Err(e) => {
            enter(Call::Destroy, 0, 0, 0);
            // SAFETY: the handle create returned, destroyed once.
            unsafe { (syms.destroy)(handle.0) };
            leave();
            Err(e)
        }
    }
}

/// The bytes behind describe's pointers, copied while the model is alive.
fn copy_out(dev: &abi::Device) -> Raw {
    let config = if dev.config.is_null() || dev.config_len == 0 || dev.config_len > 256 {
        Vec::new()
    } else {
        // SAFETY: the model's config_len bytes (bounded above), valid until destroy.
        unsafe { std::slice::from_raw_parts(dev.config, dev.config_len as usize) }.to_vec()
    };
    let name = if dev.name.is_null() {
        String::new()
    } else {
        // SAFETY: the model's NUL-terminated name, valid until destroy.
        unsafe { CStr::from_ptr(dev.name) }.to_string_lossy().into_owned()
    };
    Raw { dev: *dev, config, name }
}

/// When the model last heard of time, and how long it may wait for more.
struct Clock {
    last: Instant,
    wants: u64,
}

/// Answer requests until the channel closes, keeping a timed model's time moving.
fn serve(
    syms: &Syms,
    handle: &Handle,
    requests: &Receiver<Request>,
    answers: &Sender<Answer>,
    enter: &dyn Fn(Call, u32, u64, u32),
    leave: &dyn Fn(),
) {
    let mut clock = Clock { last: Instant::now(), wants: abi::IDLE };
    let advance = |clock: &mut Clock| {
        if let Some(f) = syms.advance {
            let now = Instant::now();
            let ns = now.saturating_duration_since(clock.last).as_nanos().min(u64::MAX as u128 - 1) as u64;
            clock.last = now;
            enter(Call::Advance, 0, ns, 0);
            // SAFETY: the model's exported function on its live handle.
            clock.wants = unsafe { f(handle.0, ns) };
            leave();
        }
    };
    loop {
        let got = if clock.wants == abi::IDLE {
            // Idle: wait for the next request as long as it takes.
            spin_recv(requests, Duration::MAX).map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            requests.recv_timeout(Duration::from_nanos(clock.wants))
        };
        let req = match got {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                advance(&mut clock);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        advance(&mut clock);
        let answer = match req {
            Request::Read { bar, offset, width } => {
                let mut v = 0u64;
                enter(Call::BarRead, bar, offset, width);
                // SAFETY: the model's function on its live handle, with a place for the value.
                let s = unsafe { (syms.read)(handle.0, bar, offset, width, &mut v) };
                leave();
                (s, v)
            }
            Request::Write { bar, offset, width, value } => {
                enter(Call::BarWrite, bar, offset, width);
                // SAFETY: the model's function on its live handle.
                let s = unsafe { (syms.write)(handle.0, bar, offset, width, value) };
                leave();
                (s, 0)
            }
            Request::Reset => {
                enter(Call::Reset, 0, 0, 0);
                // SAFETY: the model's function on its live handle.
                unsafe { (syms.reset)(handle.0) };
                leave();
                (abi::OK, 0)
            }
        };
        // An access may have started work that takes time: ask the model at once.
        if clock.wants == abi::IDLE && syms.advance.is_some() {
            clock.wants = 0;
        }
        if answers.send(answer).is_err() {
            return;
        }
    }
}
