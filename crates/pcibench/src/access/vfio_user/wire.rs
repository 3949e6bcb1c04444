//! The vfio-user wire format (QEMU docs/interop/vfio-user.rst): a 16-byte header (message id,
//! command, size including the header, flags, errno) and a command's payload, on a UNIX stream
//! socket; file descriptors travel as SCM_RIGHTS on the message's first byte.
//!
//! Everything the peer sends is bounded here before anything is allocated: a message is at most
//! `MAX_MESSAGE` bytes and carries at most `MAX_FDS` descriptors; a short or oversized field is
//! `WireError::Malformed`, never a panic. Every read and write waits in `poll` against a deadline
//! for the whole message (`Wait`), so a peer that trickles bytes cannot hold a side past it.

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Header bytes: id u16, command u16, size u32, flags u32, error u32.
pub const HEADER: usize = 16;
/// The largest region read or write either side moves in one message (the `max_data_xfer_size`
/// capability both sides announce; the spec's default is 1 MiB).
pub const MAX_DATA: usize = 1 << 20;
/// The largest message accepted: a region read reply of `MAX_DATA` plus its 16-byte preamble,
/// or a version message with its capabilities (far smaller).
pub const MAX_MESSAGE: usize = HEADER + 16 + MAX_DATA;
/// Descriptors accepted on one message (the `max_msg_fds` capability).
pub const MAX_FDS: usize = 8;

/// Commands (vfio-user.rst, "Commands").
pub mod cmd {
    pub const VERSION: u16 = 1;
    pub const DMA_MAP: u16 = 2;
    pub const DMA_UNMAP: u16 = 3;
    pub const DEVICE_GET_INFO: u16 = 4;
    pub const DEVICE_GET_REGION_INFO: u16 = 5;
    pub const DEVICE_GET_IRQ_INFO: u16 = 7;
    pub const DEVICE_SET_IRQS: u16 = 8;
    pub const REGION_READ: u16 = 9;
    pub const REGION_WRITE: u16 = 10;
    /// Server to client: read the client's memory mapped without a descriptor.
    pub const DMA_READ: u16 = 11;
    /// Server to client: write it.
    pub const DMA_WRITE: u16 = 12;
    pub const DEVICE_RESET: u16 = 13;

    /// The command's name, for messages.
    pub fn name(c: u16) -> &'static str {
        match c {
            VERSION => "VERSION",
            DMA_MAP => "DMA_MAP",
            DMA_UNMAP => "DMA_UNMAP",
            DEVICE_GET_INFO => "DEVICE_GET_INFO",
            DEVICE_GET_REGION_INFO => "DEVICE_GET_REGION_INFO",
            DEVICE_GET_IRQ_INFO => "DEVICE_GET_IRQ_INFO",
            DEVICE_SET_IRQS => "DEVICE_SET_IRQS",
            REGION_READ => "REGION_READ",
            REGION_WRITE => "REGION_WRITE",
            DMA_READ => "DMA_READ",
            DMA_WRITE => "DMA_WRITE",
            DEVICE_RESET => "DEVICE_RESET",
            _ => "an unknown command",
        }
    }
}

/// Header flags (vfio-user.rst "Header"): bits 0-3 the type (0 command, 1 reply), bit 4
/// No_reply (a command the sender wants no reply to, even on error), bit 5 Error (a reply whose
/// errno field is valid).
pub const FLAG_REPLY: u32 = 1;
pub const FLAG_TYPE_MASK: u32 = 0xf;
pub const FLAG_NO_REPLY: u32 = 1 << 4;
pub const FLAG_ERROR: u32 = 1 << 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub id: u16,
    pub command: u16,
    /// The whole message, header included.
    pub size: u32,
    pub flags: u32,
    pub error: u32,
}

impl Header {
    fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..2].copy_from_slice(&self.id.to_le_bytes());
        b[2..4].copy_from_slice(&self.command.to_le_bytes());
        b[4..8].copy_from_slice(&self.size.to_le_bytes());
        b[8..12].copy_from_slice(&self.flags.to_le_bytes());
        b[12..16].copy_from_slice(&self.error.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Header {
            id: u16::from_le_bytes([b[0], b[1]]),
            command: u16::from_le_bytes([b[2], b[3]]),
            size: u32_at(4),
            flags: u32_at(8),
            error: u32_at(12),
        }
    }

    pub fn is_reply(&self) -> bool {
        self.flags & FLAG_TYPE_MASK == FLAG_REPLY
    }

    /// A command whose sender asked for no reply (QEMU posts BAR writes this way).
    pub fn no_reply(&self) -> bool {
        !self.is_reply() && self.flags & FLAG_NO_REPLY != 0
    }

    /// The reply to this command: same id and command, the Reply type.
    pub fn reply(&self) -> Header {
        Header { id: self.id, command: self.command, size: 0, flags: FLAG_REPLY, error: 0 }
    }

    /// The error reply to this command: the header only, with `errno` (vfio-user.rst: "If an
    /// error occurs, the reply message must only include the reply header").
    pub fn error_reply(&self, errno: i32) -> Header {
        Header { flags: FLAG_REPLY | FLAG_ERROR, error: errno as u32, ..self.reply() }
    }
}

/// One received message.
pub struct Message {
    pub header: Header,
    pub payload: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// Why a message could not be sent or received.
#[derive(Debug)]
pub enum WireError {
    /// The peer closed the connection (EOF, ECONNRESET, EPIPE).
    Closed,
    /// Nothing (or not all of a message) arrived, or could be sent, before the deadline.
    Timeout,
    /// The wait's stop question said stop.
    Stopped,
    Malformed(String),
    Io(std::io::Error),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Closed => f.write_str("the connection was closed"),
            WireError::Timeout => f.write_str("no reply within the timeout"),
            WireError::Stopped => f.write_str("stopped"),
            WireError::Malformed(m) => write!(f, "malformed message: {m}"),
            WireError::Io(e) => e.fmt(f),
        }
    }
}

fn io_error(e: rustix::io::Errno) -> WireError {
    use rustix::io::Errno;
    match e {
        Errno::CONNRESET | Errno::PIPE | Errno::NOTCONN => WireError::Closed,
        Errno::TIMEDOUT => WireError::Timeout,
        e => WireError::Io(e.into()),
    }
}

/// Send one message: the header built from `header` with `size` filled in, then `payload`,
/// with `fds` attached to its first byte, all of it by `deadline` (None: no limit). MSG_NOSIGNAL:
/// a closed peer is an error, not SIGPIPE; MSG_DONTWAIT after a poll: no write outlives the
/// deadline, whatever the socket's own mode.
pub fn send(
    sock: &UnixStream,
    mut header: Header,
    payload: &[u8],
    fds: &[BorrowedFd<'_>],
    deadline: Option<Instant>,
) -> Result<(), WireError> {
    let total = HEADER + payload.len();
    header.size = u32::try_from(total).map_err(|_| WireError::Malformed(format!("{total} bytes is too large")))?;
    let head = header.encode();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !cmsg.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(WireError::Malformed(format!("{} descriptors on one message (at most {MAX_FDS})", fds.len())));
    }
    let mut sent = 0usize;
    let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
    while sent < total {
        // A signal (Ctrl-C's handler) only wakes the wait: the stop flag ends the run after this
        // command, as on the other paths.
        if !ready(sock, PollFlags::OUT, deadline, &|| false)? {
            return Err(WireError::Timeout);
        }
        let (h, p) = if sent < HEADER { (&head[sent..], payload) } else { (&head[..0], &payload[sent - HEADER..]) };
        let iov = [IoSlice::new(h), IoSlice::new(p)];
        let n = match if sent == 0 {
            sendmsg(sock, &iov, &mut cmsg, flags)
        } else {
            sendmsg(sock, &iov, &mut SendAncillaryBuffer::default(), flags)
        } {
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
            r => r.map_err(io_error)?,
        };
        if n == 0 {
            return Err(WireError::Closed);
        }
        sent += n;
    }
    Ok(())
}

/// How long a receiver waits: `idle` is the deadline for a message's first byte (None: no limit),
/// `whole` how long the rest of a message may take once its first byte is in (a peer trickling
/// bytes is cut off here, however often each read returns), and `stop` is asked at every tick:
/// true ends the wait with `WireError::Stopped`.
pub struct Wait<'a> {
    pub idle: Option<Instant>,
    pub whole: Duration,
    pub stop: &'a dyn Fn() -> bool,
}

impl Wait<'_> {
    /// The longest one poll sleeps before the stop flag is asked again.
    const TICK: Duration = Duration::from_millis(100);
}

/// Wait until `sock` has `events` or `deadline` passes (None: no deadline), asking `stop` every
/// tick. Ok(false): the deadline passed.
fn ready(
    sock: &UnixStream,
    events: PollFlags,
    deadline: Option<Instant>,
    stop: &dyn Fn() -> bool,
) -> Result<bool, WireError> {
    loop {
        if stop() {
            return Err(WireError::Stopped);
        }
        let now = Instant::now();
        let left = match deadline {
            Some(d) if d <= now => return Ok(false),
            Some(d) => (d - now).min(Wait::TICK),
            None => Wait::TICK,
        };
        let ts = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
        let mut fds = [PollFd::new(sock, events)];
        match poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => return Ok(true),
            Err(e) => return Err(io_error(e)),
        }
    }
}

/// Receive one message of at most `MAX_MESSAGE` bytes, as long as `wait` allows. `Ok(None)`: the
/// peer closed the connection cleanly between messages. Every read is non-blocking after a poll,
/// so no read outlives the deadline.
pub fn recv(sock: &UnixStream, wait: &Wait<'_>) -> Result<Option<Message>, WireError> {
    let mut head = [0u8; HEADER];
    let mut fds = Vec::new();
    let mut got = 0usize;
    let mut whole = None;
    // The stop question is asked only before a message starts: one cut off half-way would leave
    // the stream out of step. Once it has started, the whole-message deadline bounds it.
    let never = || false;
    while got < HEADER {
        let (deadline, stop): (_, &dyn Fn() -> bool) = if got == 0 { (wait.idle, wait.stop) } else { (whole, &never) };
        if !ready(sock, PollFlags::IN, deadline, stop)? {
            return Err(WireError::Timeout);
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut head[got..])];
        let r = match recvmsg(sock, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT) {
            // A signal, or a wake-up with nothing to read: wait again.
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
            r => r.map_err(io_error)?,
        };
        for m in cmsg.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = m {
                fds.extend(received);
            }
        }
        if r.flags.contains(ReturnFlags::CTRUNC) {
            return Err(WireError::Malformed(format!("more than {MAX_FDS} descriptors on one message")));
        }
        if r.bytes == 0 {
            return if got == 0 { Ok(None) } else { Err(WireError::Closed) };
        }
        if got == 0 {
            whole = Some(Instant::now() + wait.whole);
        }
        got += r.bytes;
    }
    let header = Header::decode(&head);
    let size = header.size as usize;
    if !(HEADER..=MAX_MESSAGE).contains(&size) {
        return Err(WireError::Malformed(format!(
            "{} says it is {size} bytes (16 to {MAX_MESSAGE} allowed)",
            cmd::name(header.command)
        )));
    }
    let mut payload = vec![0u8; size - HEADER];
    let mut at = 0;
    while at < payload.len() {
        if !ready(sock, PollFlags::IN, whole, &never)? {
            return Err(WireError::Timeout);
        }
        // Descriptors belong on a message's first byte: any that came later are dropped (closed).
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut payload[at..])];
        let r = match recvmsg(sock, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT) {
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
            r => r.map_err(io_error)?,
        };
        drop(cmsg);
        if r.bytes == 0 {
            return Err(WireError::Closed);
        }
        at += r.bytes;
    }
    Ok(Some(Message { header, payload, fds }))
}

/// Little-endian fields read from a payload, each one bounds-checked.
pub struct Fields<'a> {
    b: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Fields<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Self {
        Fields { b, at: 0, what }
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| {
            WireError::Malformed(format!("{} is {} bytes, too short for its fields", self.what, self.b.len()))
        })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub fn u16(&mut self) -> Result<u16, WireError> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, WireError> {
        self.bytes(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, WireError> {
        self.bytes(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// What is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.at..];
        self.at = self.b.len();
        s
    }
}

/// Little-endian fields appended to a payload.
#[derive(Default)]
pub struct Put(pub Vec<u8>);

impl Put {
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// A wait with no deadline for the first byte, `whole` for the rest, never stopped.
    pub(crate) fn patient(whole: Duration) -> Wait<'static> {
        Wait { idle: None, whole, stop: &|| false }
    }

    #[test]
    fn messages_round_trip_with_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        let f = tempfile::tempfile().unwrap();
        let h = Header { id: 7, command: cmd::DMA_MAP, size: 0, flags: 0, error: 0 };
        send(&a, h, &Put::default().u32(1).u64(2).0, &[f.as_fd()], None).unwrap();
        let m = recv(&b, &patient(Duration::from_secs(60))).unwrap().unwrap();
        assert_eq!((m.header.id, m.header.command, m.header.size), (7, cmd::DMA_MAP, 28));
        let mut r = Fields::new(&m.payload, "DMA_MAP");
        assert_eq!((r.u32().unwrap(), r.u64().unwrap()), (1, 2));
        assert!(r.u16().is_err(), "past the end is an error");
        assert_eq!(m.fds.len(), 1);
        drop(a);
        assert!(recv(&b, &patient(Duration::from_secs(60))).unwrap().is_none(), "a closed peer between messages");
    }

    #[test]
    fn oversized_and_short_messages_are_refused() {
        use std::io::Write;
        let (mut a, b) = UnixStream::pair().unwrap();
        let h = Header { id: 1, command: cmd::REGION_READ, size: u32::MAX, flags: 1, error: 0 };
        a.write_all(&h.encode()).unwrap();
        let e = recv(&b, &patient(Duration::from_secs(60))).err().unwrap().to_string();
        assert!(e.contains("REGION_READ says it is 4294967295 bytes"), "{e}");
        let (mut a, b) = UnixStream::pair().unwrap();
        let h = Header { id: 1, command: cmd::VERSION, size: 40, flags: 1, error: 0 };
        a.write_all(&h.encode()).unwrap();
        drop(a);
        assert!(matches!(recv(&b, &patient(Duration::from_secs(60))), Err(WireError::Closed)), "a message cut short");
    }

    /// A peer that sends a message's first bytes and then trickles the rest, a byte at a time and
    /// never all of it, is cut off when the whole message's time is up, however often a read
    /// returns something; a stop question that says stop ends a wait at the next tick.
    #[test]
    fn a_trickled_message_is_bounded_as_a_whole_and_a_stop_ends_a_wait() {
        use std::io::Write;
        let (mut a, b) = UnixStream::pair().unwrap();
        let h = Header { id: 1, command: cmd::REGION_WRITE, size: 1000, flags: 0, error: 0 };
        let trickle = std::thread::spawn(move || {
            a.write_all(&h.encode()).unwrap();
            // Fewer bytes than the header announced: the message can never complete.
            for _ in 0..100 {
                if a.write_all(&[0]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        assert!(matches!(recv(&b, &patient(Duration::from_millis(50))), Err(WireError::Timeout)));
        drop(b);
        trickle.join().unwrap();
        let (_a, b) = UnixStream::pair().unwrap();
        let stop = Wait { idle: None, whole: Duration::from_secs(60), stop: &|| true };
        assert!(matches!(recv(&b, &stop), Err(WireError::Stopped)), "nothing sent, stop asked");
    }
}
