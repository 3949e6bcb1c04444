//! Every file pcibench reads or writes goes through here, so that no file can hang it, exhaust
//! its memory or make it destroy something.
//!
//! - `read`: what pcibench reads (saved runs, sysfs attributes, resource files, /proc entries) is
//!   opened without blocking (`O_NONBLOCK`: opening a FIFO for reading would otherwise wait for a
//!   writer), must be a regular file (a FIFO, a device node or a directory is refused before a
//!   byte is read), and is read up to a bound suited to what it is; a larger one is refused.
//! - `write`: what pcibench writes (`--save`, `plot -o`, setup's records) is checked before
//!   anything is measured (`Destination::check`: the directory exists and takes new files, the
//!   names fit, the name is new or a regular file pcibench may replace), then written whole into
//!   a new temporary file beside it (`O_CREAT|O_EXCL|O_NOFOLLOW`, so a planted link or file is
//!   never written through), synced and renamed over the name: a reader sees the old file or the
//!   new one, never part of one, and a failure leaves nothing behind. A device node, FIFO or
//!   socket is never replaced; stdout (`-`) is the way to write to one.
//! - `socket`: the UNIX socket `serve` listens on is made and removed by the same rules: relative
//!   to its directory opened once, under sudo as the invoking user, never over anything there.

pub mod beneath;
pub mod identity;
pub mod read;
pub mod socket;
pub mod write;

#[cfg(test)]
mod tests;

pub use read::{open_regular, open_regular_with, read, read_string, read_trim};
pub use write::{create_dir_all, replace, Destination, Output};

use std::fs::FileType;
use std::os::unix::fs::FileTypeExt;

/// A file type in words, for refusals: "a FIFO", "a character device".
pub fn kind_words(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}
