//! A crash inside a model, named: which model, which signal, and which call it was in.
//!
//! The choice (issue 53): the model runs on its own thread of the server's process, and a handler
//! for the signals a crash raises (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) says which call of
//! which model faulted, then lets the signal end the process as it would have (so a core dump, where
//! enabled, holds the model's stack at the fault). A child process per model would also survive
//! the crash, but a crashed model's state is gone either way, so the server could only say the same
//! line and stop; and it would turn every register access and every DMA callback into an IPC round
//! trip and every DMA byte into a copy, where here a callback is a function call and the model's DMA
//! lands in the client's shared pages directly.
//!
//! Before each call the model thread writes what it is calling into its slot (atomics, no lock), so
//! the handler reads it without allocating. A fault on any other thread, or on the model thread
//! while it runs pcibench's own code, goes to the handler that was there before (the MMIO guard's
//! SIGBUS handler, Rust's stack-overflow handler) or to the default action.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Once;

/// The signals a crash raises.
const SIGNALS: [(c_int, &str); 5] = [
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGABRT, "SIGABRT"),
];

/// What the model thread is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Call {
    /// pcibench's own code: a fault here is not the model's.
    None = 0,
    Load,
    AbiVersion,
    Create,
    Describe,
    BarRead,
    BarWrite,
    Reset,
    Advance,
    Destroy,
}

impl Call {
    fn name(code: u8) -> &'static str {
        match code {
            1 => "loading it (its constructors)",
            2 => "pcibench_model_abi_version",
            3 => "pcibench_model_create",
            4 => "pcibench_model_describe",
            5 => "pcibench_model_bar_read",
            6 => "pcibench_model_bar_write",
            7 => "pcibench_model_reset",
            8 => "pcibench_model_advance",
            9 => "pcibench_model_destroy",
            _ => "pcibench's code",
        }
    }
}

/// Models a process may run at once (a server runs one; tests and benchmarks a few).
const SLOTS: usize = 16;

/// One model thread's state, as the handler reads it.
struct Slot {
    /// The thread's id (gettid); 0: free.
    tid: AtomicI32,
    call: AtomicU8,
    /// A callback the model made from inside the call (its name's index in `CALLBACKS`, +1).
    callback: AtomicU8,
    bar: AtomicU32,
    width: AtomicU32,
    offset: AtomicU64,
    /// The model's name: a leaked string, for the life of the process.
    name: AtomicPtr<u8>,
    name_len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    tid: AtomicI32::new(0),
    call: AtomicU8::new(0),
    callback: AtomicU8::new(0),
    bar: AtomicU32::new(0),
    width: AtomicU32::new(0),
    offset: AtomicU64::new(0),
    name: AtomicPtr::new(std::ptr::null_mut()),
    name_len: AtomicUsize::new(0),
};
static SLOT: [Slot; SLOTS] = [FREE; SLOTS];

/// The callbacks, as a crash inside one is named.
pub const CALLBACKS: [&str; 4] = ["dma_read", "dma_write", "raise_irq", "lower_irq"];

/// The actions there before ours, to pass other faults on to.
static OLD: [AtomicPtr<libc::sigaction>; 5] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 5];
static INSTALLED: Once = Once::new();

thread_local! {
    /// The slot of this thread, where it is a model thread.
    static MINE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}
static INSTALL_OK: AtomicBool = AtomicBool::new(false);

/// The calling thread's id.
fn gettid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// A model thread's claim on a slot, released on drop.
pub struct Watch {
    slot: &'static Slot,
}

impl Watch {
    /// Watch the calling thread (the model thread) for crashes of the model `name`. None when
    /// every slot is taken or the handlers could not be installed: the model then runs unwatched,
    /// and a crash ends the process without naming the call.
    pub fn start(name: &str) -> Option<Watch> {
        install();
        if !INSTALL_OK.load(Ordering::SeqCst) {
            return None;
        }
        let tid = gettid();
        let i = SLOT.iter().position(|s| s.tid.compare_exchange(0, tid, Ordering::SeqCst, Ordering::SeqCst).is_ok())?;
        let slot = &SLOT[i];
        MINE.set(Some(i));
        let leaked: &'static mut [u8] = Box::leak(name.as_bytes().to_vec().into_boxed_slice());
        slot.name_len.store(leaked.len(), Ordering::SeqCst);
        slot.name.store(leaked.as_mut_ptr(), Ordering::SeqCst);
        Some(Watch { slot })
    }

    /// The thread is about to call `call` (with the access's BAR, offset and width, where it is one).
    pub fn enter(&self, call: Call, bar: u32, offset: u64, width: u32) {
        let s = self.slot;
        s.bar.store(bar, Ordering::Relaxed);
        s.offset.store(offset, Ordering::Relaxed);
        s.width.store(width, Ordering::Relaxed);
        s.callback.store(0, Ordering::Relaxed);
        // Release: the handler, on this very thread, sees the arguments with the call.
        s.call.store(call as u8, Ordering::Release);
    }

    /// Back in pcibench's code.
    pub fn leave(&self) {
        self.slot.call.store(Call::None as u8, Ordering::Release);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        MINE.set(None);
        self.slot.call.store(0, Ordering::SeqCst);
        self.slot.tid.store(0, Ordering::SeqCst);
    }
}

/// Mark a callback on the calling thread's slot, if it is a model thread: `Some(index in
/// CALLBACKS)` while it runs, None when it returned.
pub fn in_callback(which: Option<usize>) {
    if let Some(i) = MINE.get() {
        SLOT[i].callback.store(which.map_or(0, |i| i as u8 + 1), Ordering::Release);
    }
}

fn install() {
    INSTALLED.call_once(|| {
        for (i, (sig, _)) in SIGNALS.iter().enumerate() {
            // SAFETY: sigaction structs zeroed and filled before the calls; the handler is an
            // `extern "C"` function with the SA_SIGINFO signature; the old action is leaked into
            // OLD for the life of the process (the handler reads it).
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_crash as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut act.sa_mask);
                let old: *mut libc::sigaction = Box::into_raw(Box::new(std::mem::zeroed()));
                if libc::sigaction(*sig, &act, old) != 0 {
                    return;
                }
                OLD[i].store(old, Ordering::SeqCst);
            }
        }
        INSTALL_OK.store(true, Ordering::SeqCst);
    });
}

/// A line built on the stack: the handler may not allocate.
struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Line {
    fn put(&mut self, s: &[u8]) -> &mut Line {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }
    fn str(&mut self, s: &str) -> &mut Line {
        self.put(s.as_bytes())
    }
    fn hex(&mut self, mut v: u64) -> &mut Line {
        let mut d = [0u8; 18];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b"0123456789abcdef"[(v & 0xf) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.put(b"0x");
        let digits = d;
        self.put(&digits[i..])
    }
    fn dec(&mut self, mut v: u64) -> &mut Line {
        let mut d = [0u8; 20];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let digits = d;
        self.put(&digits[i..])
    }
}

extern "C" fn on_crash(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let which = SIGNALS.iter().position(|(s, _)| *s == sig).unwrap_or(0);
    let tid = gettid();
    let slot = SLOT.iter().find(|s| s.tid.load(Ordering::Relaxed) == tid);
    let call = slot.map_or(0, |s| s.call.load(Ordering::Acquire));
    if let (Some(s), true) = (slot, call != 0) {
        report(s, call, which, info);
        // The default action, once the handler returns: the faulting instruction runs again (or
        // abort(3) raises again) and ends the process by the model's own signal.
        // SAFETY: signal(2) is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        return;
    }
    // Not a model's: what was there before.
    let old = OLD[which].load(Ordering::SeqCst);
    // SAFETY: OLD holds an action read by sigaction(2), or null.
    unsafe {
        match old.as_ref() {
            Some(a) if a.sa_flags & libc::SA_SIGINFO != 0 && a.sa_sigaction > libc::SIG_IGN => {
                let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = std::mem::transmute(a.sa_sigaction);
                f(sig, info, ctx);
            }
            Some(a) if a.sa_sigaction > libc::SIG_IGN => {
                let f: extern "C" fn(c_int) = std::mem::transmute(a.sa_sigaction);
                f(sig);
            }
            Some(a) if a.sa_sigaction == libc::SIG_IGN && sig == libc::SIGABRT => {}
            _ => {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// Write the one line: "pcibench serve: the model NAME crashed (SIGSEGV at address 0x0) in
/// pcibench_model_bar_write (BAR0, offset 0x98, 4 bytes), during its dma_read callback: ...".
fn report(s: &Slot, call: u8, which: usize, info: *mut libc::siginfo_t) {
    let mut l = Line { buf: [0; 512], len: 0 };
    l.str("pcibench serve: the model ");
    let (p, n) = (s.name.load(Ordering::Relaxed), s.name_len.load(Ordering::Relaxed));
    if !p.is_null() {
        // SAFETY: a leaked string of `n` bytes, stored before the slot went live.
        l.put(unsafe { std::slice::from_raw_parts(p, n) });
    }
    l.str(" crashed (").str(SIGNALS[which].1);
    let sig = SIGNALS[which].0;
    if matches!(sig, libc::SIGSEGV | libc::SIGBUS) && !info.is_null() {
        // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as u64;
        l.str(" at address ").hex(addr);
    }
    l.str(") in ").str(Call::name(call));
    if call == Call::BarRead as u8 || call == Call::BarWrite as u8 {
        l.str(" (BAR").dec(s.bar.load(Ordering::Relaxed) as u64).str(", offset ");
        l.hex(s.offset.load(Ordering::Relaxed)).str(", ").dec(s.width.load(Ordering::Relaxed) as u64).str(" bytes)");
    } else if call == Call::Advance as u8 {
        l.str(" (").dec(s.offset.load(Ordering::Relaxed)).str(" ns)");
    }
    let cb = s.callback.load(Ordering::Acquire);
    if cb != 0 {
        l.str(", during its ").str(CALLBACKS.get(cb as usize - 1).copied().unwrap_or("?"));
        l.str(" callback (a buffer pointer that is not the model's?)");
    }
    l.str(": the server stops; fix the model and start it again\n");
    // SAFETY: write(2) to stderr is async-signal-safe; a short write loses only the line's end.
    unsafe { libc::write(2, l.buf.as_ptr().cast(), l.len) };
}
