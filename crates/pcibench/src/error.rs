//! One error type for the library. Every message is one line that says what failed and,
//! where there is one, what to do about it; the CLI prints it and exits non-zero.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user gave something we cannot parse (an address, a size, a width).
    #[error("{0}")]
    Usage(String),
    /// The device does not exist on this host.
    #[error("no PCI device {0}: run `pcibench list` to see the devices present")]
    NoDevice(String),
    /// A file or device node could not be read or opened.
    #[error("{what} {}: {source}{}", path.display(), hint.as_deref().map(|h| format!(": {h}")).unwrap_or_default())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
        hint: Option<String>,
    },
    /// An operation was refused for safety (a bound driver, no consent flag, an offset past a BAR).
    #[error("{0}")]
    Refused(String),
    /// The host or device cannot do what was asked (no WC for this BAR, a CPU without AVX-512).
    #[error("{0}")]
    Unsupported(String),
    /// The data read back did not match what was written.
    #[error("{0}")]
    Verify(String),
    /// The device misbehaved (DMA error status, timeout).
    #[error("{0}")]
    Device(String),
    /// There is nothing the command could measure on this device (no BAR left for PIO, no
    /// engine): not the user's typing, not a failure; the message says what to name instead.
    #[error("{0}")]
    NothingToMeasure(String),
    /// The card stopped answering mid-command (surprise removal, link down, a reset): what read
    /// all-ones, the upstream port's state then, and what to run.
    #[error("{0}")]
    Gone(String),
    /// The host's sysfs is inconsistent (a symlink loop, a holder loop, a dangling link), so what
    /// uses a device cannot be told.
    #[error("{0}")]
    Sysfs(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(what: &'static str, path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { what, path: path.as_ref().to_path_buf(), source, hint: None }
    }

    pub fn io_hint(
        what: &'static str,
        path: impl AsRef<Path>,
        source: std::io::Error,
        hint: impl Into<String>,
    ) -> Self {
        Error::Io { what, path: path.as_ref().to_path_buf(), source, hint: Some(hint.into()) }
    }

    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// The same error, of the same kind (the same exit status), with `more` at the end of its
    /// line: the CLI folds what a trace holds into the one line a failed run prints.
    pub fn append(self, more: &str) -> Error {
        match self {
            Error::Usage(m) => Error::Usage(m + more),
            Error::Refused(m) => Error::Refused(m + more),
            Error::Unsupported(m) => Error::Unsupported(m + more),
            Error::Verify(m) => Error::Verify(m + more),
            Error::Device(m) => Error::Device(m + more),
            Error::NothingToMeasure(m) => Error::NothingToMeasure(m + more),
            Error::Sysfs(m) => Error::Sysfs(m + more),
            Error::Gone(m) => Error::Gone(m + more),
            // Their words come from a template: the whole line, as a failure like theirs.
            e @ (Error::NoDevice(_) | Error::Io { .. }) => Error::Device(format!("{e}{more}")),
        }
    }
}
