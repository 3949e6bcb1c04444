//! One client's connection as `pcibench serve` uses it: its session thread reads the client's
//! commands, and the card's engine (on its own thread) reaches client memory mapped without a
//! descriptor by DMA_READ/DMA_WRITE commands of its own on the same socket (no twin socket is
//! offered). Replies to those are handed to whoever waits for them; a wait made on the session
//! thread itself (a model that moves data inside a register access), or on another thread while
//! the session thread is handling a command (a user's model moves data on its own model thread
//! while the session waits for it: `crate::model`), reads the socket meanwhile, one reader at a
//! time, and queues the client's commands for later, so neither side stalls the other
//! (vfio-user.rst "Socket": "it is still illegal for implementations to stall command or reply
//! processing indefinitely while waiting for replies on the other channel").

use super::version::DmaLayout;
use super::wire::{self, cmd, Header, Message, Wait, WireError};
use crate::sim::host_map::{HostFault, Remote};
use std::collections::VecDeque;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long a whole message may take once started, and a DMA_READ/DMA_WRITE its reply.
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// A reply the session thread waits for this long, inside a client's command, is a stall worth
/// naming (`Link::stalled`): a DMA message answered at all comes back in microseconds.
const STALL: Duration = Duration::from_secs(1);

/// What one read of the socket brought.
enum Read {
    /// A command of the client's.
    Command(Message),
    /// A reply to one of the server's own commands, handed to its waiter.
    Reply,
    /// The client closed the connection.
    Closed,
}

#[derive(Default)]
struct State {
    /// Replies to the server's own commands, not yet taken.
    replies: Vec<Message>,
    /// Client commands read while a session-thread wait was reading the socket.
    queued: VecDeque<Message>,
    /// The connection failed (timed out, closed, malformed): every wait ends.
    dead: Option<String>,
}

pub struct Link {
    pub sock: UnixStream,
    sending: Mutex<()>,
    state: Mutex<State>,
    arrived: Condvar,
    next_id: AtomicU16,
    session: ThreadId,
    /// DMA_READ/DMA_WRITE messages this server sent.
    pub dma_messages: AtomicU64,
    /// The session thread waited `STALL` or more for the reply to one of them while it handled a
    /// client's command (a register access whose model moved data by message): QEMU's client
    /// answers DMA messages only while no vCPU waits on the device, so with QEMU this is a deadlock
    /// that its timeout ends (lab/findings.md 9 and 15).
    pub stalled: AtomicBool,
    /// Set when the server is stopping: waits end.
    stop: Arc<AtomicBool>,
    /// Held by whichever thread reads the socket.
    reader: Mutex<()>,
    /// The session thread is handling a command, not reading: a wait on another thread may read.
    lent: AtomicBool,
    layout: Mutex<(DmaLayout, usize)>,
}

impl Link {
    /// A link on `sock`, read by the calling (session) thread.
    pub fn new(sock: UnixStream, stop: Arc<AtomicBool>) -> Link {
        Link {
            sock,
            sending: Mutex::new(()),
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
            next_id: AtomicU16::new(0),
            session: std::thread::current().id(),
            dma_messages: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
            stop,
            layout: Mutex::new((DmaLayout::Spec, wire::MAX_DATA)),
            reader: Mutex::new(()),
            lent: AtomicBool::new(false),
        }
    }

    /// The session thread handles a command (`true`) or is back to reading them (`false`).
    pub fn lend(&self, handling: bool) {
        self.lent.store(handling, Ordering::SeqCst);
    }

    /// After VERSION: the DMA message layout and the most data one may carry (the client's
    /// `max_data_xfer_size`).
    pub fn negotiated(&self, layout: DmaLayout, max_data: usize) {
        *self.layout.lock().unwrap_or_else(|e| e.into_inner()) = (layout, max_data.min(wire::MAX_DATA));
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn kill(&self, why: String) {
        let mut s = self.state();
        s.dead.get_or_insert(why);
        self.arrived.notify_all();
    }

    /// Send one message, whole, within the message timeout.
    pub fn send(&self, h: Header, payload: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), WireError> {
        let _one = self.sending.lock().unwrap_or_else(|e| e.into_inner());
        let r = wire::send(&self.sock, h, payload, fds, Some(Instant::now() + MESSAGE_TIMEOUT));
        if let Err(e) = &r {
            self.kill(e.to_string());
        }
        r
    }

    /// Read one message (the caller is the session thread): a reply goes to its waiter and is
    /// said to have come (the waiter may be this thread), a command is returned. Waits for the
    /// message's start until `idle` (None: until the client sends or the server stops).
    fn read_one(&self, idle: Option<Instant>) -> Result<Read, WireError> {
        let stop = || self.stop.load(Ordering::Relaxed);
        let wait = Wait { idle, whole: MESSAGE_TIMEOUT, stop: &stop };
        let r = wire::recv(&self.sock, &wait);
        // A timeout the caller asked for (idle) is its turn to act, not the link's end.
        let ends = match &r {
            Err(WireError::Stopped) | Ok(_) => false,
            Err(WireError::Timeout) => idle.is_none(),
            Err(_) => true,
        };
        if let (true, Err(e)) = (ends, &r) {
            self.kill(e.to_string());
        }
        let Some(m) = r? else {
            self.kill("the client closed the connection".into());
            return Ok(Read::Closed);
        };
        if !m.header.is_reply() {
            return Ok(Read::Command(m));
        }
        let mut s = self.state();
        s.replies.push(m);
        self.arrived.notify_all();
        // Bounded: a reply nobody asked for is the client's error, not a backlog.
        let backlog = s.replies.len();
        drop(s);
        if backlog > 64 {
            let why = "replies to nothing the server asked".to_string();
            self.kill(why.clone());
            return Err(WireError::Malformed(why));
        }
        Ok(Read::Reply)
    }

    /// The client's next command: one a session-thread wait queued, or the next from the socket,
    /// if it starts before `until` (None: no limit; past it, `WireError::Timeout`).
    pub fn next_command(&self, until: Option<Instant>) -> Result<Option<Message>, WireError> {
        if let Some(m) = self.state().queued.pop_front() {
            return Ok(Some(m));
        }
        // A wait on another thread may still be reading (it read while the last command was
        // handled): its message is queued or delivered when it lets go.
        let _reading = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = self.state().queued.pop_front() {
            return Ok(Some(m));
        }
        loop {
            match self.read_one(until)? {
                Read::Command(m) => return Ok(Some(m)),
                Read::Closed => return Ok(None),
                Read::Reply => {}
            }
        }
    }

    /// Send a command of the server's own and wait for its reply.
    fn request(&self, command: u16, payload: &[u8]) -> Result<Message, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.dma_messages.fetch_add(1, Ordering::Relaxed);
        let h = Header { id, command, size: 0, flags: 0, error: 0 };
        self.send(h, payload, &[]).map_err(|e| e.to_string())?;
        let sent = Instant::now();
        let deadline = sent + MESSAGE_TIMEOUT;
        let on_session = std::thread::current().id() == self.session;
        let take = |s: &mut State| {
            let at = s.replies.iter().position(|m| m.header.id == id && m.header.command == command)?;
            Some(s.replies.swap_remove(at))
        };
        loop {
            // Checked before the reply and the link's end, so a client that went after a stall
            // (QEMU's timeout) still leaves it said.
            if on_session && Instant::now() >= sent + STALL {
                self.stalled.store(true, Ordering::Relaxed);
            }
            let mut s = self.state();
            if let Some(m) = take(&mut s) {
                return Ok(m);
            }
            if let Some(why) = &s.dead {
                return Err(why.clone());
            }
            // The server is stopping: its session answers what the client already sent and closes
            // (server.rs close_cleanly), which a card's wait here must not hold up.
            if self.stop.load(Ordering::Relaxed) {
                return Err("the server is stopping".into());
            }
            let now = Instant::now();
            if now >= deadline {
                drop(s);
                let why =
                    format!("the client did not answer {} within {} s", cmd::name(command), MESSAGE_TIMEOUT.as_secs());
                self.kill(why.clone());
                return Err(why);
            }
            let may_read = on_session || self.lent.load(Ordering::SeqCst);
            drop(s);
            if may_read {
                if let Ok(_reading) = self.reader.try_lock() {
                    // This thread reads the socket for itself (another reader may have delivered
                    // the reply before this one took over): a command that comes first waits its
                    // turn, and a reply (its own, or another waiter's) sends it back to look.
                    if let Some(m) = take(&mut self.state()) {
                        return Ok(m);
                    }
                    match self.read_one(Some(deadline)) {
                        Ok(Read::Command(c)) => self.state().queued.push_back(c),
                        Ok(Read::Reply | Read::Closed) | Err(WireError::Timeout) => {}
                        Err(e) => return Err(e.to_string()),
                    }
                    continue;
                }
            }
            let s = self.state();
            if take_ready(&s, id, command) {
                continue;
            }
            let _ = self.arrived.wait_timeout(s, (deadline - now).min(Duration::from_millis(100)));
        }
    }

    fn layout(&self) -> (DmaLayout, usize) {
        *self.layout.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether the reply to (`id`, `command`) has arrived.
fn take_ready(s: &State, id: u16, command: u16) -> bool {
    s.replies.iter().any(|m| m.header.id == id && m.header.command == command) || s.dead.is_some()
}

/// The client's memory mapped without a descriptor, as the card's host map reaches it.
pub struct ByMessage(pub Arc<Link>);

/// The most data one DMA_READ or DMA_WRITE moves, whatever the client's `max_data_xfer_size`.
/// QEMU 11.1 sends its DMA_READ reply with one non-blocking write and does not finish a partial
/// one (`vfio_user_send_qio`, hw/vfio-user/proxy.c): a reply larger than its socket's send buffer
/// (about 208 KiB by default, net.core.wmem_default) reaches us cut short and the channel is lost.
/// 64 KiB fits any default buffer and costs one message per 64 KiB.
const DMA_CHUNK: usize = 64 << 10;

impl Remote for ByMessage {
    fn read(&self, bus: u64, out: &mut [u8]) -> Result<(), HostFault> {
        let (layout, max) = self.0.layout();
        let len = out.len() as u64;
        let fault = || HostFault { bus, len };
        let mut at = 0;
        while at < out.len() {
            let n = (out.len() - at).min(max).min(DMA_CHUNK);
            let address = bus + at as u64;
            let m = self.0.request(cmd::DMA_READ, &layout.read_request(address, n as u64)).map_err(|_| fault())?;
            if m.header.flags & wire::FLAG_ERROR != 0 {
                return Err(fault());
            }
            let (a, c) = layout.parse(&m.payload).map_err(|_| fault())?;
            let data = m.payload.get(layout.data_at()..layout.data_at() + n).ok_or_else(fault)?;
            if (a, c) != (address, n as u64) {
                return Err(fault());
            }
            out[at..at + n].copy_from_slice(data);
            at += n;
        }
        Ok(())
    }

    fn write(&self, bus: u64, data: &[u8]) -> Result<(), HostFault> {
        let (layout, max) = self.0.layout();
        let max = max.min(DMA_CHUNK);
        let fault = || HostFault { bus, len: data.len() as u64 };
        for (i, chunk) in data.chunks(max).enumerate() {
            let address = bus + (i * max) as u64;
            let m = self.0.request(cmd::DMA_WRITE, &layout.with_data(address, chunk)).map_err(|_| fault())?;
            if m.header.flags & wire::FLAG_ERROR != 0 {
                return Err(fault());
            }
        }
        Ok(())
    }
}
