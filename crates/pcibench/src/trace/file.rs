//! Opening the trace file. A trace is written by a process that may run as root, to a path the
//! user named: it goes only to a regular file with no other name, or to a new one, never through
//! a symbolic link, and never to a FIFO or a device node (opening one can block, or act: a
//! watchdog starts when opened). What is there is checked before anything is measured
//! (`check_destination`), and again on the opened file (`create`), which truncates only then.
//! A trace is streamed (a run that hangs the machine must leave what it wrote), so it is not
//! written through a temporary file as `file::Destination` writes; its name is checked by the
//! same rules (`Destination::check`) besides its own.

use crate::{Error, Result};
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Refuse what `path` names if it is anything but a regular file with one name.
fn check_existing(flag: &str, path: &Path, m: &Metadata) -> Result<()> {
    let shown = path.display();
    let t = m.file_type();
    let kind = if t.is_symlink() {
        "a symbolic link (it could point anywhere)"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device node"
    } else if m.nlink() > 1 {
        "a file with other hard links (they would change too)"
    } else if m.uid() != crate::file::identity::writer_uid() {
        // Root truncating a file another user planted (in sticky /tmp, say) would write the
        // trace into a file that stays theirs: only a file of the writer's own is reused.
        return Err(Error::usage(format!(
            "{flag} {} belongs to uid {}, not to the user writing the trace (uid {}): pcibench writes a trace only to \
             a new name or a file of its own; name another",
            crate::text::one_line(&shown.to_string()),
            m.uid(),
            crate::file::identity::writer_uid()
        )));
    } else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "{flag} {shown} is {kind}: pcibench writes a trace only to a regular file or a new name; name one"
    )))
}

/// Whether `path` may take a trace, checked when the command line is read, before anything is
/// measured: a new name, or a regular file with no other name.
pub fn check_destination(flag: &str, path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => check_existing(flag, path, &m)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("cannot look at the trace file", path, e)),
    }
    // The rules every output file shares: a name that fits, a directory that exists and takes a
    // new file, a file this process may replace.
    crate::file::Destination::check(flag, "trace.jsonl", path).map(drop)
}

/// Open `path` for a trace from its first byte: created if new (0600: a trace holds bus and
/// physical addresses), never followed if it is a symbolic link (O_NOFOLLOW), never waited on
/// (O_NONBLOCK: a FIFO that appeared since the check fails to open instead of blocking), checked
/// again once open and only then truncated. The name is opened relative to its directory, opened
/// once, and under sudo as the invoking user (`file::identity`).
pub fn create(flag: &str, path: &Path) -> Result<File> {
    use rustix::fs::{Mode, OFlags};
    check_destination(flag, path)?;
    let name = path.file_name().ok_or_else(|| Error::usage(format!("{flag} {}: name a file", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let who = crate::file::identity::AsInvoker::begin()?;
    let opened = crate::file::beneath::open(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).and_then(|d| {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&d, name, flags, Mode::from_raw_mode(0o600))?))
    });
    drop(who);
    let file = opened.map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => Error::usage(format!(
            "{flag} {} is a symbolic link: pcibench writes a trace only to a regular file or a new name; name one",
            path.display()
        )),
        _ => Error::io("cannot create the trace file", path, e),
    })?;
    let m = file.metadata().map_err(|e| Error::io("cannot look at the trace file", path, e))?;
    check_existing(flag, path, &m)?;
    file.set_len(0).map_err(|e| Error::io("cannot empty the trace file", path, e))?;
    Ok(file)
}
