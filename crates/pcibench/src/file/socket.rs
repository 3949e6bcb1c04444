//! The UNIX socket `serve --socket` listens on, made and removed by name as the writer makes
//! files (`write`, `identity`): never by root on a path someone else can steer (issue 51 S1).
//!
//! - The directory is opened once (`O_PATH|O_DIRECTORY`) and the socket is bound relative to it.
//!   bind(2) takes a path, not a directory descriptor, so the path is `/proc/self/fd/N/NAME`: the
//!   magic link is the open directory itself (fs/proc/fd.c, proc_fd_link), so a directory on the
//!   way replaced by a link after the open redirects nothing. That path is short whatever the
//!   directory's (sun_path holds 108 bytes, include/uapi/linux/un.h).
//! - It is bound and listening under a temporary name first and then renamed without replacing
//!   anything (RENAME_NOREPLACE, or a hard link): the name appears only when it accepts
//!   connections, so whoever waits for the file and connects is not refused (ECONNREFUSED
//!   between bind and listen). Its own address (getsockname, /proc/net/unix) is the temporary one.
//!   Whatever stands at a temporary name is skipped; the temporary name is removed (when the move
//!   failed, or a link was made) only while it still holds the inode bound.
//! - Under sudo the open, the bind and the removal run as the invoking user (`AsInvoker`): the
//!   socket is made only where they could make it, belongs to them, and is removed only where
//!   they could remove it.
//! - Nothing at the name is ever removed or replaced. A socket there may be a live server's, one a
//!   killed server left, or another program's datagram socket (a stream connect to /dev/log fails
//!   with EPROTOTYPE, which is not "stale"): all are refused, naming the owner.
//! - At the end the socket is removed (`unlinkat` in the directory opened) only while the name
//!   still holds the inode bound (`fstatat(AT_SYMLINK_NOFOLLOW)`): what replaced it stays.

use super::identity::AsInvoker;
use crate::text;
use crate::{Error, Result};
use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// sun_path's size (include/uapi/linux/un.h, UNIX_PATH_MAX), its terminating NUL included.
const SUN_PATH: usize = 108;
/// Connections the kernel queues before `accept`.
const BACKLOG: i32 = 128;

/// A socket made by `listen`: the listener (`Deref`), and what it takes to remove it safely.
/// Dropping it removes the socket (`remove`).
#[derive(Debug)]
pub struct Listening {
    listener: UnixListener,
    /// The directory the socket is in, opened once.
    dir: OwnedFd,
    name: OsString,
    /// (st_dev, st_ino) of the socket file as bound.
    inode: (u64, u64),
    shown: String,
    removed: bool,
}

impl std::ops::Deref for Listening {
    type Target = UnixListener;

    fn deref(&self) -> &UnixListener {
        &self.listener
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

impl Listening {
    /// Remove the socket, once: only if its name still holds the socket bound, relative to its
    /// directory, under sudo as the invoking user. None when it is gone (removed now, or already
    /// by someone else); else why it was left, in words.
    pub fn remove(&mut self) -> Option<String> {
        if std::mem::replace(&mut self.removed, true) {
            return None;
        }
        let who = match AsInvoker::begin() {
            Ok(w) => w,
            Err(e) => return Some(format!("the socket {} was left in place: {e}", self.shown)),
        };
        let gone = match rustix::fs::statat(&self.dir, self.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(()),
            Ok(st) if (st.st_dev, st.st_ino) != self.inode => Err(format!(
                "{} is no longer the socket this server made (something replaced it): left as it is",
                self.shown
            )),
            // Between the look and the unlink only someone who may replace entries of this
            // directory could swap the name, and they may remove what they put there themselves;
            // nothing outside the directory opened is ever named.
            Ok(_) => rustix::fs::unlinkat(&self.dir, self.name.as_os_str(), AtFlags::empty())
                .map_err(|e| format!("cannot remove the socket {}: {e}", self.shown)),
            Err(e) => Err(format!("cannot look at the socket {} to remove it: {e}", self.shown)),
        };
        drop(who);
        gone.err()
    }
}

/// Listen on a new UNIX stream socket at `path` (`flag PATH` in the messages), as the module docs
/// say. Refused in one line: an empty name or a directory's (exit 2), a missing or unreachable
/// directory (2), anything at the name (a socket: 1; a link or another file: 2), a directory where
/// the socket cannot be made (2), a name too long for a socket address (2).
pub fn listen(flag: &str, path: &Path) -> Result<Listening> {
    let shown = text::one_line(&path.display().to_string());
    let usage = |why: String| Error::usage(format!("{flag} {shown}: {why}"));
    let trailing_slash = path.as_os_str().as_bytes().ends_with(b"/");
    let name = match path.file_name() {
        _ if path.as_os_str().is_empty() => {
            return Err(Error::usage(format!("{flag} '': an empty name: name the socket, e.g. {flag} /tmp/sim.sock")))
        }
        Some(n) if !trailing_slash => n.to_os_string(),
        _ => {
            let e = text::one_line(&path.join("sim.sock").display().to_string());
            return Err(usage(format!("names a directory, not a socket: name one in it, e.g. {e}")));
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let who = AsInvoker::begin()?;
    let made = make(flag, &shown, &dir, &name);
    drop(who);
    made
}

/// `listen`'s steps, on this thread's filesystem identity.
fn make(flag: &str, shown: &str, dir: &Path, name: &OsStr) -> Result<Listening> {
    let usage = |why: String| Error::usage(format!("{flag} {shown}: {why}"));
    let d = text::one_line(&dir.display().to_string());
    let dirfd = super::beneath::open(dir, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).map_err(|e| {
        usage(match e.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::NOENT) => format!("there is no directory {d}: create it first (mkdir -p {d})"),
            Some(Errno::NOTDIR) => format!("{d} is not a directory"),
            Some(Errno::ACCESS | Errno::PERM) => {
                format!("cannot reach the directory {d} (permission denied): use a directory you can write")
            }
            _ => format!("cannot reach the directory {d}: {e}"),
        })
    })?;
    let dirfd = OwnedFd::from(dirfd);
    refuse_what_is_there(flag, shown, &dirfd, name)?;
    let via = format!("/proc/self/fd/{}/", dirfd.as_raw_fd()).into_bytes();
    if via.len() + name.len() >= SUN_PATH {
        return Err(usage(format!(
            "the name is {} bytes, more than a UNIX socket's address takes here ({}): use a shorter name",
            name.len(),
            SUN_PATH - 1 - via.len()
        )));
    }
    // Bound and listening under a name of its own first, then moved to `name`: the name appears
    // only once connections are accepted, so a client (QEMU, a script) that waits for the file
    // and connects is never refused by a socket bound but not yet listening.
    let (sock, tmp) = bind_aside(flag, shown, &d, &via)?;
    let replaced = || Error::Refused(format!("{flag} {shown}: replaced while it was being made: stopping"));
    // The inode bound: only it is ever removed or renamed under the temporary name.
    let bound = match rustix::fs::statat(&dirfd, tmp.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Socket => (st.st_dev, st.st_ino),
        // Replaced between the bind and the look: only the directory's owner could, and what
        // they put there is theirs; the socket bound is unreachable by name, so stop.
        _ => return Err(replaced()),
    };
    if let Err(e) = rustix::net::listen(&sock, BACKLOG) {
        remove_if(&dirfd, &tmp, bound);
        return Err(Error::Refused(format!("cannot listen on {shown}: {e}")));
    }
    match place(&dirfd, &tmp, name) {
        Ok(Placed::Renamed) => {}
        Ok(Placed::Linked) => remove_if(&dirfd, &tmp, bound),
        Err(e) => {
            remove_if(&dirfd, &tmp, bound);
            return Err(match e {
                Errno::EXIST => Error::Refused(format!(
                    "{flag} {shown}: something else took the name while the socket was being made: pick another {flag}"
                )),
                e => Error::Refused(format!("cannot put the socket at {shown}: {e}")),
            });
        }
    }
    match rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if (st.st_dev, st.st_ino) == bound => {}
        Ok(_) => return Err(replaced()),
        Err(e) => return Err(Error::Refused(format!("cannot look at the socket {shown} just made: {e}"))),
    }
    Ok(Listening {
        listener: UnixListener::from(sock),
        dir: dirfd,
        name: name.to_os_string(),
        inode: bound,
        shown: shown.to_string(),
        removed: false,
    })
}

/// A new stream socket bound in the directory under a temporary name no one else has (nothing
/// there is ever replaced: a name taken is skipped), and that name.
fn bind_aside(flag: &str, shown: &str, d: &str, via: &[u8]) -> Result<(OwnedFd, OsString)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let usage = |why: String| Error::usage(format!("{flag} {shown}: {why}"));
    for attempt in 0..16u32 {
        let tmp = OsString::from(format!(".pcibench-serve-{}-{attempt}", std::process::id()));
        let mut path = via.to_vec();
        path.extend_from_slice(tmp.as_bytes());
        let addr = rustix::net::SocketAddrUnix::new(path.as_slice()).map_err(|e| usage(format!("{e}")))?;
        let sock = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::CLOEXEC, None)
            .map_err(|e| Error::Refused(format!("cannot make a UNIX socket: {e}")))?;
        match rustix::net::bind(&sock, &addr) {
            Ok(()) => return Ok((sock, tmp)),
            // A socket a killed server left under this name (its pid reused): not ours, kept.
            Err(Errno::ADDRINUSE) => continue,
            Err(Errno::ACCESS | Errno::PERM) => {
                return Err(usage(format!(
                    "cannot create the socket in {d} (permission denied): use a directory you can write"
                )))
            }
            Err(Errno::ROFS) => {
                return Err(usage(format!("the filesystem holding {d} is read-only: put the socket somewhere else")))
            }
            Err(Errno::NOENT) => {
                return Err(Error::Refused(format!(
                    "{flag} {shown}: cannot bind through /proc/self/fd (is /proc mounted?), or {d} went away"
                )))
            }
            Err(e) => return Err(Error::Refused(format!("cannot listen on {shown}: {e}"))),
        }
    }
    Err(Error::Refused(format!(
        "{flag} {shown}: {d} is full of .pcibench-serve-{}-* sockets stopped servers left: remove them",
        std::process::id()
    )))
}

/// How `place` named the socket.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Placed {
    /// Moved: the temporary name is gone.
    Renamed,
    /// Linked: the temporary name is still there, for the caller to remove.
    Linked,
}

/// Give the socket at `tmp` the name `name` in the same directory, never replacing what is there
/// (EEXIST): rename(2) with RENAME_NOREPLACE, or, on a filesystem without it, a hard link (which
/// never replaces either).
pub(super) fn place(dirfd: &OwnedFd, tmp: &OsStr, name: &OsStr) -> std::result::Result<Placed, Errno> {
    use rustix::fs::RenameFlags;
    match rustix::fs::renameat_with(dirfd, tmp, dirfd, name, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(Placed::Renamed),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            rustix::fs::linkat(dirfd, tmp, dirfd, name, AtFlags::empty()).map(|()| Placed::Linked)
        }
        Err(e) => Err(e),
    }
}

/// Remove `tmp` from the directory only while it is still the inode `bound` (what replaced it
/// stays).
fn remove_if(dirfd: &OwnedFd, tmp: &OsStr, bound: (u64, u64)) {
    if let Ok(st) = rustix::fs::statat(dirfd, tmp, AtFlags::SYMLINK_NOFOLLOW) {
        if (st.st_dev, st.st_ino) == bound {
            let _ = rustix::fs::unlinkat(dirfd, tmp, AtFlags::empty());
        }
    }
}

/// Refuse whatever stands at `name` in `dir`, in one line (see the module docs).
fn refuse_what_is_there(flag: &str, shown: &str, dir: &OwnedFd, name: &OsStr) -> Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(Error::usage(format!("{flag} {shown}: cannot look at it: {e}"))),
        Ok(st) => st,
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Socket => Err(Error::Refused(format!(
            "{flag} {shown}: a socket of uid {} is already there (a server listening, one a stopped server left, \
             or another program's): pcibench never removes a socket it did not make; stop its server or remove \
             it (rm {shown}), or pick another {flag}",
            st.st_uid
        ))),
        FileType::Symlink => Err(Error::usage(format!(
            "{flag} {shown} is a symbolic link: pcibench does not make its socket through links; name a new path"
        ))),
        FileType::Directory => {
            Err(Error::usage(format!("{flag} {shown} is a directory: name a socket in it, e.g. {shown}/sim.sock")))
        }
        _ => Err(Error::usage(format!("{shown} exists and is not a socket: pick a new path for {flag}"))),
    }
}
