//! The client side of vfio-user: connect, negotiate the version, and one request/reply per call,
//! each bounded by the socket's timeouts. Every failure is one line naming the socket.

use super::wire::{self, cmd, Fields, Header, Message, Put, WireError};
use crate::{Error, Result};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// How long a reply may take. A server answers region accesses at once (its device's work runs
/// beside its message loop); this bounds a server that hangs, while leaving room for a loaded host.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The protocol version this client speaks (vfio-user.rst: major 0, minor 1).
pub const MAJOR: u16 = 0;
pub const MINOR: u16 = 1;

/// The capabilities this client announces: what it accepts from the server (wire.rs bounds).
pub fn client_capabilities() -> String {
    format!(r#"{{"capabilities":{{"max_msg_fds":{},"max_data_xfer_size":{}}}}}"#, wire::MAX_FDS, wire::MAX_DATA)
}

/// What the server said about itself in its VERSION reply.
#[derive(Debug, Clone)]
pub struct ServerVersion {
    pub major: u16,
    pub minor: u16,
    /// Its capabilities JSON, as sent (bounded by the message size).
    pub capabilities: serde_json::Value,
}

impl ServerVersion {
    /// `max_data_xfer_size`, clipped to what this client accepts.
    pub fn max_data(&self) -> usize {
        self.capabilities["capabilities"]["max_data_xfer_size"]
            .as_u64()
            .map_or(wire::MAX_DATA, |n| (n as usize).clamp(8, wire::MAX_DATA))
    }

    /// The simulated card pcibench's own server (`pcibench serve`) says it serves.
    pub fn pcibench_card(&self) -> Option<&str> {
        self.capabilities["pcibench"]["card"].as_str()
    }
}

/// A connection to a vfio-user server.
pub struct Client {
    path: String,
    conn: Mutex<(UnixStream, u16)>,
    pub version: ServerVersion,
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
        sock.set_read_timeout(Some(REPLY_TIMEOUT))
            .and_then(|_| sock.set_write_timeout(Some(REPLY_TIMEOUT)))
            .map_err(|e| Error::Device(format!("cannot set timeouts on the vfio-user socket {shown}: {e}")))?;
        let mut c = Client {
            path: shown,
            conn: Mutex::new((sock, 0)),
            version: ServerVersion { major: 0, minor: 0, capabilities: serde_json::Value::Null },
        };
        c.version = c.negotiate()?;
        Ok(c)
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    fn negotiate(&self) -> Result<ServerVersion> {
        let mut caps = client_capabilities().into_bytes();
        caps.push(0);
        let payload = Put::default().u16(MAJOR).u16(MINOR).bytes(&caps).0;
        let (reply, _) = self.request(cmd::VERSION, &payload, &[])?;
        let mut f = Fields::new(&reply, "the VERSION reply");
        let (major, minor) = (f.u16().map_err(|e| self.malformed(e))?, f.u16().map_err(|e| self.malformed(e))?);
        if major != MAJOR {
            return Err(Error::Unsupported(format!(
                "the vfio-user server at {} speaks protocol {major}.{minor}; pcibench speaks {MAJOR}.{MINOR}",
                self.path
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
        Ok(ServerVersion { major, minor, capabilities })
    }

    fn malformed(&self, e: WireError) -> Error {
        Error::Device(format!(
            "the vfio-user server at {} sent a malformed reply ({e}): is it a vfio-user server? (pcibench speaks protocol {MAJOR}.{MINOR})",
            self.path
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
            WireError::Timeout => Error::Device(format!(
                "the vfio-user server at {} did not answer {} within {} s: it hangs or is busy; restart it and run again",
                self.path,
                cmd::name(command),
                REPLY_TIMEOUT.as_secs()
            )),
            WireError::Io(io) => {
                Error::Device(format!("{} to the vfio-user server at {} failed: {io}", cmd::name(command), self.path))
            }
        }
    }

    /// One command and its reply: the reply's payload and descriptors. A reply with the error
    /// flag is `Error::Device` naming the command and the server's errno.
    pub fn request(&self, command: u16, payload: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let id = conn.1;
        conn.1 = id.wrapping_add(1);
        let header = Header { id, command, size: 0, flags: 0, error: 0 };
        wire::send(&conn.0, header, payload, fds).map_err(|e| self.failed(command, e))?;
        let Message { header: h, payload, fds } = match wire::recv(&conn.0) {
            Ok(Some(m)) => m,
            Ok(None) => return Err(self.failed(command, WireError::Closed)),
            Err(e) => return Err(self.failed(command, e)),
        };
        if !h.is_reply() || h.id != id || h.command != command {
            return Err(self.malformed(WireError::Malformed(format!(
                "{} (id {}, flags {:#x}) came back for {} (id {id})",
                cmd::name(h.command),
                h.id,
                h.flags,
                cmd::name(command)
            ))));
        }
        if h.flags & wire::FLAG_ERROR != 0 {
            return Err(Error::Device(format!(
                "the vfio-user server at {} refused {}: {}",
                self.path,
                cmd::name(command),
                std::io::Error::from_raw_os_error(h.error as i32)
            )));
        }
        Ok((payload, fds))
    }

    /// REGION_READ: `buf.len()` bytes (at most the server's `max_data_xfer_size`) at `offset`.
    pub fn region_read(&self, region: u32, offset: u64, buf: &mut [u8]) -> Result<()> {
        let payload = Put::default().u64(offset).u32(region).u32(buf.len() as u32).0;
        let (reply, _) = self.request(cmd::REGION_READ, &payload, &[])?;
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
        self.request(cmd::REGION_WRITE, &payload, &[]).map(|_| ())
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
}
