//! A vfio-user peer in the tests' own hands: a relay in front of `pcibench serve` that, like
//! libvfio-user, takes one client at a time (the next waits in the listen backlog, unanswered,
//! until the first leaves), passes every message and descriptor through, and can misbehave on
//! purpose (`Mode`): trickle the server's replies, swap a BAR's sealed memfd for one it then
//! truncates, try to truncate the client's DMA memfds, or ask for more memory than it was given.
//! It speaks for the server (its VERSION reply says `pcibench serve`), but is not it.

use pcibench::access::vfio_user::wire::{self, cmd, Header, Message, Wait};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Pass everything through.
    Plain,
    /// After this many replies to BAR reads (REGION_READ of regions 0-5), send the server's bytes
    /// one at a time, 300 ms apart.
    TrickleAfter(usize),
    /// Replace every region descriptor the server gives with an unsealed memfd, truncated to 0
    /// bytes once passed on.
    UnsealedBars,
    /// Try to truncate every DMA_MAP descriptor the client passes (it should be sealed).
    TruncateDmaFds,
    /// Double every DMA_MAP's size: more than the memfd behind it holds.
    OversizeDmaMaps,
}

pub struct Relay {
    pub socket: PathBuf,
    /// What the relay saw or did, a line each ("truncate: EPERM").
    pub events: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

fn patient() -> Wait<'static> {
    Wait { idle: None, whole: Duration::from_secs(120), stop: &|| false }
}

fn raw_header(h: &Header, size: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&h.id.to_le_bytes());
    b.extend_from_slice(&h.command.to_le_bytes());
    b.extend_from_slice(&(size as u32).to_le_bytes());
    b.extend_from_slice(&h.flags.to_le_bytes());
    b.extend_from_slice(&h.error.to_le_bytes());
    b
}

impl Relay {
    pub fn start(upstream: &Path, mode: Mode) -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("relay.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let (stop, events) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let (up, s, ev) = (upstream.to_path_buf(), Arc::clone(&stop), Arc::clone(&events));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                // One client at a time: the next is accepted only when this one is done.
                let Ok(server) = UnixStream::connect(&up) else { continue };
                pump(client, server, mode, &ev);
            }
        });
        Relay { socket, events, stop, thread: Some(thread), _dir: dir }
    }

    pub fn device(&self) -> String {
        format!("vfio-user:{}", self.socket.display())
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Relay one client's connection until either side closes.
fn pump(client: UnixStream, server: UnixStream, mode: Mode, events: &Arc<Mutex<Vec<String>>>) {
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let ev = Arc::clone(events);
    let up = std::thread::spawn(move || {
        while let Ok(Some(m)) = wire::recv(&c2, &patient()) {
            let m = to_server(m, mode, &ev);
            let fds: Vec<BorrowedFd<'_>> = m.fds.iter().map(|f| f.as_fd()).collect();
            if wire::send(&s2, m.header, &m.payload, &fds, None).is_err() {
                break;
            }
        }
        let _ = s2.shutdown(std::net::Shutdown::Both);
        let _ = c2.shutdown(std::net::Shutdown::Both);
    });
    let mut bar_reads = 0usize;
    while let Ok(Some(m)) = wire::recv(&server, &patient()) {
        if m.header.command == cmd::REGION_READ && m.payload.get(8..12).is_some_and(|r| r[0] < 6 && r[1..] == [0, 0, 0])
        {
            bar_reads += 1;
        }
        let ok = match mode {
            Mode::TrickleAfter(n) if bar_reads > n => {
                if bar_reads == n + 1 {
                    events.lock().unwrap().push("trickling".into());
                }
                trickle(&client, &m)
            }
            Mode::UnsealedBars if m.header.command == cmd::DEVICE_GET_REGION_INFO && !m.fds.is_empty() => {
                let swapped = unsealed_like(&m.fds[0]);
                let ok = wire::send(&client, m.header, &m.payload, &[swapped.as_fd()], None).is_ok();
                // Once the client has it: shrink it under any mapping the client made.
                let r = rustix::fs::ftruncate(&swapped, 0);
                events.lock().unwrap().push(format!("truncated a BAR memfd: {r:?}"));
                ok
            }
            _ => {
                let fds: Vec<BorrowedFd<'_>> = m.fds.iter().map(|f| f.as_fd()).collect();
                wire::send(&client, m.header, &m.payload, &fds, None).is_ok()
            }
        };
        if !ok {
            break;
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = server.shutdown(std::net::Shutdown::Both);
    let _ = up.join();
}

/// A client message on its way to the server, as `mode` treats it.
fn to_server(mut m: Message, mode: Mode, events: &Mutex<Vec<String>>) -> Message {
    if m.header.command != cmd::DMA_MAP {
        return m;
    }
    match mode {
        Mode::TruncateDmaFds => {
            for fd in &m.fds {
                let r = rustix::fs::ftruncate(fd, 0);
                events.lock().unwrap().push(format!("truncate a DMA memfd: {r:?}"));
            }
        }
        Mode::OversizeDmaMaps if m.payload.len() >= 32 => {
            let size = u64::from_le_bytes(m.payload[24..32].try_into().unwrap());
            m.payload[24..32].copy_from_slice(&(size * 2).to_le_bytes());
            events.lock().unwrap().push(format!("DMA_MAP of {size} bytes sent as {}", size * 2));
        }
        _ => {}
    }
    m
}

/// An unsealed memfd as large as `like`.
fn unsealed_like(like: &OwnedFd) -> OwnedFd {
    let size = rustix::fs::fstat(like).unwrap().st_size as u64;
    let fd = rustix::fs::memfd_create("hostile-bar", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, size).unwrap();
    fd
}

/// Send `m` a byte at a time (its descriptors, if any, are dropped: the trickle test needs none).
fn trickle(to: &UnixStream, m: &Message) -> bool {
    use std::io::Write;
    let mut bytes = raw_header(&m.header, 16 + m.payload.len());
    bytes.extend_from_slice(&m.payload);
    for b in bytes {
        if (&*to).write_all(&[b]).is_err() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    true
}
