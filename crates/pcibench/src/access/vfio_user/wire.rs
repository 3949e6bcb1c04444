//! The vfio-user wire format (protocol 0.1, QEMU docs/devel/vfio-user.rst): a 16-byte header
//! (message id, command, size including the header, flags, errno) and a command's payload, on a
//! UNIX stream socket; file descriptors travel as SCM_RIGHTS on the message's first byte.
//!
//! Everything the peer sends is bounded here before anything is allocated: a message is at most
//! `MAX_MESSAGE` bytes and carries at most `MAX_FDS` descriptors; a short or oversized field is
//! `WireError::Malformed`, never a panic.

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

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
            DEVICE_RESET => "DEVICE_RESET",
            _ => "an unknown command",
        }
    }
}

/// Header flags: the low 4 bits are the type (0 command, 1 reply); bit 4 no reply; bit 5 error.
pub const FLAG_REPLY: u32 = 1;
pub const FLAG_TYPE_MASK: u32 = 0xf;
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
    /// Nothing (or not all of a message) arrived within the socket's timeout.
    Timeout,
    Malformed(String),
    Io(std::io::Error),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Closed => f.write_str("the connection was closed"),
            WireError::Timeout => f.write_str("no reply within the timeout"),
            WireError::Malformed(m) => write!(f, "malformed message: {m}"),
            WireError::Io(e) => e.fmt(f),
        }
    }
}

fn io_error(e: rustix::io::Errno) -> WireError {
    use rustix::io::Errno;
    match e {
        Errno::CONNRESET | Errno::PIPE | Errno::NOTCONN => WireError::Closed,
        Errno::AGAIN | Errno::TIMEDOUT => WireError::Timeout,
        e => WireError::Io(e.into()),
    }
}

/// Send one message: the header built from `header` with `size` filled in, then `payload`,
/// with `fds` attached to its first byte. MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE.
pub fn send(sock: &UnixStream, mut header: Header, payload: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), WireError> {
    let total = HEADER + payload.len();
    header.size = u32::try_from(total).map_err(|_| WireError::Malformed(format!("{total} bytes is too large")))?;
    let head = header.encode();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !cmsg.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(WireError::Malformed(format!("{} descriptors on one message (at most {MAX_FDS})", fds.len())));
    }
    let mut sent = 0usize;
    while sent < total {
        let (h, p) = if sent < HEADER { (&head[sent..], payload) } else { (&head[..0], &payload[sent - HEADER..]) };
        let iov = [IoSlice::new(h), IoSlice::new(p)];
        let n = match if sent == 0 {
            sendmsg(sock, &iov, &mut cmsg, SendFlags::NOSIGNAL)
        } else {
            sendmsg(sock, &iov, &mut SendAncillaryBuffer::default(), SendFlags::NOSIGNAL)
        } {
            // A signal (Ctrl-C's handler) before anything was sent: send again; the stop flag
            // ends the run after this command, as on the other paths.
            Err(rustix::io::Errno::INTR) => continue,
            r => r.map_err(io_error)?,
        };
        if n == 0 {
            return Err(WireError::Closed);
        }
        sent += n;
    }
    Ok(())
}

/// Receive one message of at most `MAX_MESSAGE` bytes. `Ok(None)`: the peer closed the
/// connection cleanly between messages.
pub fn recv(sock: &UnixStream) -> Result<Option<Message>, WireError> {
    let mut head = [0u8; HEADER];
    let mut fds = Vec::new();
    let mut got = 0usize;
    while got < HEADER {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut head[got..])];
        let r = match recvmsg(sock, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC) {
            // A signal before anything arrived: wait again (the reply is still to come).
            Err(rustix::io::Errno::INTR) => continue,
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
    read_exact(sock, &mut payload)?;
    Ok(Some(Message { header, payload, fds }))
}

fn read_exact(mut sock: &UnixStream, mut buf: &mut [u8]) -> Result<(), WireError> {
    use std::io::Read;
    while !buf.is_empty() {
        match sock.read(buf) {
            Ok(0) => return Err(WireError::Closed),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(WireError::Timeout)
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe) => {
                return Err(WireError::Closed)
            }
            Err(e) => return Err(WireError::Io(e)),
        }
    }
    Ok(())
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
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn messages_round_trip_with_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        let f = tempfile::tempfile().unwrap();
        let h = Header { id: 7, command: cmd::DMA_MAP, size: 0, flags: 0, error: 0 };
        send(&a, h, &Put::default().u32(1).u64(2).0, &[f.as_fd()]).unwrap();
        let m = recv(&b).unwrap().unwrap();
        assert_eq!((m.header.id, m.header.command, m.header.size), (7, cmd::DMA_MAP, 28));
        let mut r = Fields::new(&m.payload, "DMA_MAP");
        assert_eq!((r.u32().unwrap(), r.u64().unwrap()), (1, 2));
        assert!(r.u16().is_err(), "past the end is an error");
        assert_eq!(m.fds.len(), 1);
        drop(a);
        assert!(recv(&b).unwrap().is_none(), "a closed peer between messages");
    }

    #[test]
    fn oversized_and_short_messages_are_refused() {
        use std::io::Write;
        let (mut a, b) = UnixStream::pair().unwrap();
        let h = Header { id: 1, command: cmd::REGION_READ, size: u32::MAX, flags: 1, error: 0 };
        a.write_all(&h.encode()).unwrap();
        let e = recv(&b).err().unwrap().to_string();
        assert!(e.contains("REGION_READ says it is 4294967295 bytes"), "{e}");
        let (mut a, b) = UnixStream::pair().unwrap();
        let h = Header { id: 1, command: cmd::VERSION, size: 40, flags: 1, error: 0 };
        a.write_all(&h.encode()).unwrap();
        drop(a);
        assert!(matches!(recv(&b), Err(WireError::Closed)), "a message cut short");
    }
}
