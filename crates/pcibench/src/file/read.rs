//! Opening and reading input files so that none can block or exhaust memory: opened with
//! `O_NONBLOCK` (a FIFO opened for reading waits for a writer otherwise), refused unless it is a
//! regular file (a FIFO, a device node such as /dev/zero, a directory), then read up to a bound.
//! sysfs attributes, resource files and /proc entries are regular files, so the real kernel
//! interfaces all pass; only what stands in their place in a broken or hostile tree is refused.

use super::kind_words;
use crate::units::human_size;
use rustix::fs::OFlags;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The bound for a kernel file (a sysfs attribute is at most a page; /proc/iomem, /proc/meminfo,
/// /proc/cmdline and the like are well under this).
pub const KERNEL_MAX: u64 = 1 << 20;

/// `path` opened with `access` (`OFlags::RDONLY`, `WRONLY` or `RDWR`, with `TRUNC` if wanted),
/// refused unless it is a regular file. Opening does not block whatever the file is; the
/// descriptor is blocking again once the check passed. Under a fixture root it is opened beneath
/// that root (`beneath`).
pub fn open_regular_with(path: &Path, access: OFlags) -> io::Result<File> {
    let f = super::beneath::open(path, access | OFlags::NONBLOCK | OFlags::NOCTTY, rustix::fs::Mode::empty())?;
    let kind = f.metadata()?.file_type();
    if !kind.is_file() {
        return Err(not_regular(kind));
    }
    rustix::fs::fcntl_setfl(&f, rustix::fs::fcntl_getfl(&f)? - OFlags::NONBLOCK)?;
    Ok(f)
}

/// The refusal of a file that is not a regular one.
pub(crate) fn not_regular(kind: std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {}, not a regular file: not read (reading it could block or never end)", kind_words(kind)),
    )
}

/// `path` opened for reading, refused unless it is a regular file (`open_regular_with`).
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_with(path, OFlags::RDONLY)
}

/// The whole of a regular file of at most `max` bytes; a larger one is refused (by its size
/// before reading when the file says it, else once `max` bytes have been read: /proc files say 0).
pub fn read(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    let len = f.metadata()?.len();
    if len > max {
        return Err(too_large(max, Some(len)));
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len as usize).map_err(|_| too_large(max, Some(len)))?;
    f.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(too_large(max, None));
    }
    Ok(buf)
}

fn too_large(max: u64, len: Option<u64>) -> io::Error {
    let len = len.map(|l| format!(" ({})", human_size(l))).unwrap_or_default();
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("it is larger than {}{len}, the most pcibench reads of such a file: not read", human_size(max)),
    )
}

/// `read` as text (invalid UTF-8 replaced).
pub fn read_string(path: &Path, max: u64) -> io::Result<String> {
    let bytes = read(path, max)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// A kernel attribute's text, trimmed; None when it is missing, unreadable, not a regular file,
/// larger than `KERNEL_MAX` or not UTF-8.
pub fn read_trim(path: &Path) -> Option<String> {
    String::from_utf8(read(path, KERNEL_MAX).ok()?).ok().map(|s| s.trim().to_string())
}
