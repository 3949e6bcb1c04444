//! The client side of vfio-user: connect, negotiate the version, and one request/reply per call.
//! Each request has one deadline for the whole exchange (`REPLY_TIMEOUT`, however the server
//! trickles its bytes), shortened to `STOP_GRACE` once the process is asked to stop; a request
//! that times out leaves the connection broken, so the teardown after it fails at once instead
//! of waiting again. Commands the server sends meanwhile (DMA_READ, DMA_WRITE: vfio-user.rst
//! "unrelated messages sent from the server to the client can appear in between a client to
//! server request/reply") are answered from the buffers this client mapped. Every failure is one
//! line naming the socket.

use super::version::{self, Caps, DmaLayout};
use super::wire::{self, cmd, Fields, Header, Message, Put, Wait, WireError};
use crate::{Error, Result};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a whole request may take, reply included. A server answers region accesses at once
/// (its device's work runs beside its message loop); this bounds a server that hangs or trickles
/// its reply, while leaving room for a loaded host.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Once the process is asked to stop (Ctrl-C, SIGTERM), how long each request may still take:
/// the teardown (engine stop, interrupts off, DMA unmapped) gets through a server that answers,
/// and does not wait out a full timeout on one that does not.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// The process's stop flag (the CLI's Ctrl-C/SIGTERM flag), which every request watches.
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Watch `flag` in every request from now on (the CLI hands its interrupt flag over once).
pub fn watch_stop(flag: Arc<AtomicBool>) {
    let _ = STOP.set(flag);
}

fn stopping() -> bool {
    STOP.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// What the server said about itself in its VERSION reply.
#[derive(Debug, Clone)]
pub struct ServerVersion {
    pub major: u16,
    pub minor: u16,
    /// Its capabilities JSON, as sent (bounded by the message size).
    pub capabilities: serde_json::Value,
    /// What they mean, the spec's defaults filled in.
    pub caps: Caps,
}

impl ServerVersion {
    /// `max_data_xfer_size`, clipped to what this client accepts.
    pub fn max_data(&self) -> usize {
        self.caps.max_data
    }

    /// The simulated card a `pcibench serve` says it serves: a claim, not evidence (see
    /// `info::describe_open`, which checks who is at the other end).
    pub fn pcibench_card(&self) -> Option<&str> {
        self.capabilities["pcibench"]["card"].as_str()
    }
}

/// The client's memory the server may reach by message (DMA_READ/DMA_WRITE): each window an IOVA
/// range and the memfd behind it, read and written with pread/pwrite (never a pointer, so a
/// server's request can only reach these files).
#[derive(Default)]
struct Windows(Vec<(u64, u64, OwnedFd)>);

impl Windows {
    fn find(&self, address: u64, count: u64) -> Option<(&OwnedFd, u64)> {
        let end = address.checked_add(count)?;
        self.0
            .iter()
            .find(|(iova, len, _)| *iova <= address && end <= iova + len)
            .map(|(iova, _, fd)| (fd, address - iova))
    }
}

struct Conn {
    sock: UnixStream,
    next_id: u16,
    /// The line that broke the connection (a timeout, the server closing it): every later
    /// request fails with it at once.
    broken: Option<String>,
}

/// A connection to a vfio-user server.
pub struct Client {
    path: String,
    conn: Mutex<Conn>,
    pub version: ServerVersion,
    windows: Mutex<Windows>,
    /// Who is at the other end (SO_PEERCRED at connect).
    pub peer: Option<rustix::net::UCred>,
    /// Commands the server sent this client (DMA_READ, DMA_WRITE, anything else refused).
    served: std::sync::atomic::AtomicU64,
}

/// Why `path` cannot be a vfio-user server, before connecting: a missing path, a regular file, a
/// FIFO (whose open would block) are each one line.
fn check_socket(path: &Path) -> Result<()> {
    let shown = path.display();
    let start = format!("start one: pcibench serve sim --socket {shown}");
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::Device(format!("no vfio-user server at {shown}: there is no such socket; {start}")))
        }
        Err(e) => Err(Error::Refused(format!("cannot look at the vfio-user socket {shown}: {e}"))),
        Ok(m) if m.file_type().is_socket() => Ok(()),
        Ok(m) => {
            let what = if m.file_type().is_fifo() {
                "a FIFO"
            } else if m.is_dir() {
                "a directory"
            } else if m.file_type().is_symlink() {
                "a symbolic link"
            } else if m.is_file() {
                "a regular file"
            } else {
                "not a socket"
            };
            Err(Error::usage(format!("{shown} is {what}, not a vfio-user server's UNIX socket: {start}")))
        }
    }
}

/// An errno as words; 0 is no errno at all (the spec lets an error reply carry none).
fn errno_words(errno: u32) -> String {
    match errno {
        0 => "an error without an errno".to_string(),
        e => std::io::Error::from_raw_os_error(e as i32).to_string(),
    }
}

impl Client {
    /// Connect to the server at `path` and negotiate the protocol version.
    pub fn connect(path: &Path) -> Result<Client> {
        check_socket(path)?;
        let shown = path.display().to_string();
        let sock = UnixStream::connect(path).map_err(|e| {
            Error::Device(format!(
                "cannot connect to the vfio-user server at {shown}: {e}: is it running? (pcibench serve sim --socket {shown})"
            ))
        })?;
        let peer = rustix::net::sockopt::socket_peercred(&sock).ok();
        let c = Client {
            path: shown,
            conn: Mutex::new(Conn { sock, next_id: 0, broken: None }),
            version: ServerVersion { major: 0, minor: 0, capabilities: serde_json::Value::Null, caps: Caps::default() },
            windows: Mutex::new(Windows::default()),
            peer,
            served: Default::default(),
        };
        let version = c.negotiate()?;
        Ok(Client { version, ..c })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    fn negotiate(&self) -> Result<ServerVersion> {
        let mut caps = version::client_proposal().to_string().into_bytes();
        caps.push(0);
        let payload = Put::default().u16(version::MAJOR).u16(version::MINOR).bytes(&caps).0;
        let (reply, _) = self.request(cmd::VERSION, &payload, &[]).map_err(|e| match e {
            Error::Device(m) if m.ends_with(&errno_words(rustix::io::Errno::BUSY.raw_os_error() as u32)) => {
                self.busy(None)
            }
            e => e,
        })?;
        let mut f = Fields::new(&reply, "the VERSION reply");
        let (major, minor) = (f.u16().map_err(|e| self.malformed(e))?, f.u16().map_err(|e| self.malformed(e))?);
        if major != version::MAJOR || minor > version::MINOR {
            return Err(Error::Unsupported(format!(
                "the vfio-user server at {} answered protocol {major}.{minor} to pcibench's {}.{}: the spec wants the same major and a minor at most the one proposed",
                self.path,
                version::MAJOR,
                version::MINOR
            )));
        }
        let text = f.rest();
        let text = text.strip_suffix(&[0]).unwrap_or(text);
        let capabilities = if text.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(text)
                .map_err(|e| self.malformed(WireError::Malformed(format!("its capabilities are not JSON ({e})"))))?
        };
        let caps = Caps::parse(&capabilities).map_err(|e| self.malformed(WireError::Malformed(e)))?;
        if let Some(busy) = capabilities["pcibench"].get("busy") {
            return Err(self.busy(busy["pid"].as_u64()));
        }
        Ok(ServerVersion { major, minor, capabilities, caps })
    }

    /// The server has its card held by another client.
    fn busy(&self, pid: Option<u64>) -> Error {
        let who = pid.map_or_else(|| "another client".to_string(), |p| format!("another client (pid {p})"));
        Error::Refused(format!(
            "the vfio-user server at {} is serving its card to {who}: one client at a time, as vfio-pci gives a device one owner; wait for it to finish (or stop it) and run again",
            self.path
        ))
    }

    fn malformed(&self, e: WireError) -> Error {
        Error::Device(format!(
            "the vfio-user server at {} sent a malformed reply ({e}): is it a vfio-user server? (pcibench speaks protocol {}.{})",
            self.path,
            version::MAJOR,
            version::MINOR
        ))
    }

    fn failed(&self, command: u16, e: WireError) -> Error {
        match e {
            WireError::Malformed(_) => self.malformed(e),
            WireError::Closed => Error::Device(format!(
                "the vfio-user server at {} closed the connection during {} (it exited or crashed): restart it and run again",
                self.path,
                cmd::name(command)
            )),
            WireError::Timeout | WireError::Stopped => Error::Device(format!(
                "the vfio-user server at {} did not answer {} within {} s: it hangs or is busy; restart it and run again",
                self.path,
                cmd::name(command),
                if stopping() { STOP_GRACE.as_secs() } else { REPLY_TIMEOUT.as_secs() }
            )),
            WireError::Io(io) => {
                Error::Device(format!("{} to the vfio-user server at {} failed: {io}", cmd::name(command), self.path))
            }
        }
    }

    /// One command and its reply: the reply's payload and descriptors. A reply with the error
    /// flag is `Error::Device` naming the command and the server's errno.
    pub fn request(&self, command: u16, payload: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
        self.request_on(command, payload, fds, None)
    }

    /// `request`, a refusal naming what was asked (`access`: the region access, in words).
    fn request_on(
        &self,
        command: u16,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
        access: Option<&Access>,
    ) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(line) = &conn.broken {
            return Err(Error::Device(line.clone()));
        }
        let r = self.exchange(&mut conn, command, payload, fds, access);
        if let Err(e) = &r {
            if !matches!(e, Error::Device(m) if m.contains(" refused ")) {
                conn.broken = Some(e.to_string());
            }
        }
        r
    }

    fn exchange(
        &self,
        conn: &mut Conn,
        command: u16,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
        access: Option<&Access>,
    ) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
        let id = conn.next_id;
        conn.next_id = id.wrapping_add(1);
        let now = Instant::now();
        let mut deadline = now + if stopping() { STOP_GRACE } else { REPLY_TIMEOUT };
        let header = Header { id, command, size: 0, flags: 0, error: 0 };
        wire::send(&conn.sock, header, payload, fds, Some(deadline)).map_err(|e| self.failed(command, e))?;
        loop {
            let stop = || stopping() && deadline > Instant::now() + STOP_GRACE;
            let wait =
                Wait { idle: Some(deadline), whole: deadline.saturating_duration_since(Instant::now()), stop: &stop };
            let m = match wire::recv(&conn.sock, &wait) {
                Ok(Some(m)) => m,
                Ok(None) => return Err(self.failed(command, WireError::Closed)),
                // Asked to stop: the reply still gets its grace, the rest of the run none.
                Err(WireError::Stopped) => {
                    deadline = deadline.min(Instant::now() + STOP_GRACE);
                    continue;
                }
                Err(e) => return Err(self.failed(command, e)),
            };
            if !m.header.is_reply() {
                self.serve(&conn.sock, m, deadline).map_err(|e| self.failed(command, e))?;
                continue;
            }
            let Message { header: h, payload, fds } = m;
            if h.id != id || h.command != command {
                return Err(self.malformed(WireError::Malformed(format!(
                    "{} (id {}, flags {:#x}) came back for {} (id {id})",
                    cmd::name(h.command),
                    h.id,
                    h.flags,
                    cmd::name(command)
                ))));
            }
            if h.flags & wire::FLAG_ERROR != 0 {
                let (what, why) = match access {
                    Some(a) => (format!("{} ({a})", cmd::name(command)), a.hint(h.error as i32)),
                    None => (cmd::name(command).to_string(), String::new()),
                };
                return Err(Error::Device(format!(
                    "the vfio-user server at {} refused {what}: {}{why}",
                    self.path,
                    errno_words(h.error)
                )));
            }
            return Ok((payload, fds));
        }
    }

    /// A command from the server: DMA_READ or DMA_WRITE of a window this client mapped, answered
    /// unless it asked for no reply; anything else is refused (ENOSYS, as QEMU's client does).
    fn serve(&self, sock: &UnixStream, m: Message, deadline: Instant) -> std::result::Result<(), WireError> {
        self.served.fetch_add(1, Ordering::Relaxed);
        let h = m.header;
        let layout = DmaLayout::for_minor(self.version.minor);
        let reply = match h.command {
            cmd::DMA_READ | cmd::DMA_WRITE if m.fds.is_empty() => self.dma(h.command, &m.payload, layout),
            _ => Err(rustix::io::Errno::NOSYS),
        };
        if h.no_reply() {
            return Ok(());
        }
        match reply {
            Ok(p) => wire::send(sock, h.reply(), &p, &[], Some(deadline)),
            Err(errno) => wire::send(sock, h.error_reply(errno.raw_os_error()), &[], &[], Some(deadline)),
        }
    }

    fn dma(&self, command: u16, payload: &[u8], layout: DmaLayout) -> std::result::Result<Vec<u8>, rustix::io::Errno> {
        use rustix::io::Errno;
        let (address, count) = layout.parse(payload).map_err(|_| Errno::INVAL)?;
        if count > self.version.max_data().min(wire::MAX_DATA) as u64 {
            return Err(Errno::TOOBIG);
        }
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let (fd, at) = windows.find(address, count).ok_or(Errno::FAULT)?;
        if command == cmd::DMA_READ {
            let mut data = vec![0u8; count as usize];
            let n = rustix::io::pread(fd, &mut data, at).map_err(|_| Errno::FAULT)?;
            if n != data.len() {
                return Err(Errno::FAULT);
            }
            return Ok(layout.with_data(address, &data));
        }
        let data = payload.get(layout.data_at()..layout.data_at() + count as usize).ok_or(Errno::INVAL)?;
        let n = rustix::io::pwrite(fd, data, at).map_err(|_| Errno::FAULT)?;
        if n != data.len() {
            return Err(Errno::FAULT);
        }
        Ok(layout.preamble(address, count).0)
    }

    /// Let the server reach `len` bytes of `fd` at `iova` by message too.
    pub fn add_window(&self, iova: u64, len: u64, fd: BorrowedFd<'_>) -> Result<()> {
        let fd = fd
            .try_clone_to_owned()
            .map_err(|e| Error::Device(format!("cannot keep a DMA buffer's descriptor: {e}")))?;
        self.windows.lock().unwrap_or_else(|e| e.into_inner()).0.push((iova, len, fd));
        Ok(())
    }

    pub fn remove_window(&self, iova: u64) {
        self.windows.lock().unwrap_or_else(|e| e.into_inner()).0.retain(|w| w.0 != iova);
    }

    /// Commands the server has sent this client so far.
    pub fn commands_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// REGION_READ: `buf.len()` bytes (at most the server's `max_data_xfer_size`) at `offset`.
    pub fn region_read(&self, region: u32, offset: u64, buf: &mut [u8]) -> Result<()> {
        let payload = Put::default().u64(offset).u32(region).u32(buf.len() as u32).0;
        let access = Access { region, offset, len: buf.len() };
        let (reply, _) = self.request_on(cmd::REGION_READ, &payload, &[], Some(&access))?;
        let mut f = Fields::new(&reply, "the REGION_READ reply");
        let parse =
            |f: &mut Fields| -> std::result::Result<(u64, u32, u32), WireError> { Ok((f.u64()?, f.u32()?, f.u32()?)) };
        let (o, r, n) = parse(&mut f).map_err(|e| self.malformed(e))?;
        let data = f.rest();
        if (o, r, n as usize, data.len()) != (offset, region, buf.len(), buf.len()) {
            return Err(self.malformed(WireError::Malformed(format!(
                "asked for {} bytes of region {region} at {offset:#x}, got {} bytes of region {r} at {o:#x}",
                buf.len(),
                data.len()
            ))));
        }
        buf.copy_from_slice(data);
        Ok(())
    }

    /// REGION_WRITE: `data` at `offset` of `region`.
    pub fn region_write(&self, region: u32, offset: u64, data: &[u8]) -> Result<()> {
        let payload = Put::default().u64(offset).u32(region).u32(data.len() as u32).bytes(data).0;
        let access = Access { region, offset, len: data.len() };
        self.request_on(cmd::REGION_WRITE, &payload, &[], Some(&access)).map(|_| ())
    }
}

/// A region access, for a refusal's words: `4 bytes of BAR0 at 0x10`.
struct Access {
    region: u32,
    offset: u64,
    len: usize,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let n = self.len;
        let bytes = if n == 1 { "byte" } else { "bytes" };
        match self.region {
            super::CONFIG_REGION => write!(f, "{n} {bytes} of config space at {:#x}", self.offset),
            r => write!(f, "{n} {bytes} of BAR{r} at {:#x}", self.offset),
        }
    }
}

impl Access {
    /// What an EINVAL on a BAR means once this side has checked the access lies inside it: the
    /// server's device does not decode an access that wide there (a register block's width).
    fn hint(&self, errno: i32) -> String {
        if errno != rustix::io::Errno::INVAL.raw_os_error() || self.region >= super::CONFIG_REGION {
            return String::new();
        }
        format!(
            ": BAR{} does not take {}-byte accesses there (an engine's registers often take 32-bit accesses only: --width 32)",
            self.region, self.len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_are_not_sockets_are_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"x").unwrap();
        let e = Client::connect(&file).err().unwrap().to_string();
        assert!(e.contains("is a regular file, not a vfio-user server's UNIX socket"), "{e}");
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();
        let e = Client::connect(&fifo).err().unwrap().to_string();
        assert!(e.contains("is a FIFO"), "{e}");
        let e = Client::connect(&dir.path().join("none")).err().unwrap().to_string();
        assert!(e.contains("there is no such socket") && e.contains("pcibench serve sim --socket"), "{e}");
    }

    #[test]
    fn an_error_reply_without_an_errno_does_not_read_success() {
        assert_eq!(errno_words(0), "an error without an errno");
        assert!(!errno_words(0).contains("Success"));
        assert_eq!(errno_words(22), std::io::Error::from_raw_os_error(22).to_string());
    }
}
