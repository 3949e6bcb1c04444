//! The one writer of output files (`--save`, `plot -o`, setup's records). See the module docs of
//! `file` for the rules; the symlink rule: a link as the name given is refused ("write to the
//! link's target path instead"), never followed and never replaced, so a planted link can
//! neither redirect a write nor be silently turned into a file.

use super::kind_words;
use crate::text;
use crate::{Error, Result};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Temporary files are `.pcibench-XXXXXXXX.tmp` in the target's directory: a name of fixed
/// length, so it fits wherever the directory takes a name of 22 bytes whatever the target's name.
const TEMP_PREFIX: &str = ".pcibench-";
const TEMP_SUFFIX: &str = ".tmp";
const TEMP_RANDOM: usize = 8;
const TEMP_LEN: usize = TEMP_PREFIX.len() + TEMP_RANDOM + TEMP_SUFFIX.len();
/// Linux's PATH_MAX (include/uapi/linux/limits.h), the terminating NUL included.
const PATH_MAX: usize = 4096;

/// Where an output goes: stdout (`-`), or a file written whole by `Destination::write`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout,
    File(Destination),
}

impl Output {
    /// `flag VALUE` as given on the command line (`-` is stdout), checked before anything is
    /// measured or read (`Destination::check`). `example` is a file name for the hints.
    pub fn check(flag: &str, example: &str, value: &OsStr) -> Result<Output> {
        if value == "-" {
            return Ok(Output::Stdout);
        }
        Destination::check(flag, example, Path::new(value)).map(Output::File)
    }

    /// A new file is created 0600 (`Destination::private`).
    pub fn private(self) -> Output {
        match self {
            Output::File(d) => Output::File(d.private()),
            o => o,
        }
    }
}

/// A file name checked for writing (`check`) and written whole (`write`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    flag: String,
    path: PathBuf,
    dir: PathBuf,
    name: OsString,
    /// The mode a new file gets (less the umask): 0666, or 0600 for what holds bus and physical
    /// addresses and the command line (saved runs, traces).
    mode: u32,
}

impl Destination {
    /// Whether `flag PATH` can be written, before anything is measured: a long run must not end
    /// in "cannot write". Refuses in one line (exit 2) an empty name, a directory, a name or path
    /// too long for the filesystem (the temporary name too), a missing directory, a directory
    /// where no file can be created (read-only filesystem, no permission: found by creating and
    /// removing a temporary file there), a symbolic link, anything but a regular file (a device
    /// node, FIFO or socket is never replaced: write to stdout instead), and a file in a sticky
    /// directory that this process may not replace.
    pub fn check(flag: &str, example: &str, path: &Path) -> Result<Destination> {
        let shown = text::one_line(&path.display().to_string());
        let usage = |why: String| Error::usage(format!("{flag} {shown}: {why}"));
        if path.as_os_str().is_empty() {
            return Err(Error::usage(format!(
                "{flag} '': an empty name: name the file to write, e.g. {flag} {example}"
            )));
        }
        if path.is_dir() {
            return Err(Error::usage(format!(
                "{flag} {shown} is a directory: name a file in it, e.g. {}",
                text::one_line(&path.join(example).display().to_string())
            )));
        }
        let trailing_slash = path.as_os_str().as_bytes().ends_with(b"/");
        let name = match path.file_name() {
            Some(n) if !trailing_slash => n.to_os_string(),
            _ => {
                return Err(usage(format!(
                    "names a directory, not a file: name a file in it, e.g. {}",
                    Path::new(path).join(example).display()
                )))
            }
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let longest = dir.as_os_str().len() + 1 + name.len().max(TEMP_LEN);
        if longest >= PATH_MAX {
            return Err(usage(format!(
                "the path is {longest} bytes, more than Linux takes (PATH_MAX {PATH_MAX}): use a shorter path"
            )));
        }
        let d = text::one_line(&dir.display().to_string());
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(usage(format!("{d} is not a directory"))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(usage(format!("there is no directory {d}: create it first (mkdir -p {d})")))
            }
            Err(e) => return Err(usage(format!("cannot reach the directory {d}: {e}"))),
        }
        let name_max = rustix::fs::statvfs(&dir).map(|s| s.f_namemax as usize).unwrap_or(255);
        if name.len() > name_max {
            return Err(usage(format!(
                "the name is {} bytes, more than the {name_max} this filesystem allows in a name: use a shorter name",
                name.len()
            )));
        }
        if TEMP_LEN > name_max {
            return Err(usage(format!(
                "this filesystem allows names of {name_max} bytes, too short for the temporary file ({TEMP_LEN} bytes) written first"
            )));
        }
        let dest = Destination { flag: flag.to_string(), path: path.to_path_buf(), dir, name, mode: 0o666 };
        dest.check_target().map_err(Error::usage)?;
        // Creating (and removing) the temporary file is the one test that cannot disagree with the
        // write: permissions, ACLs, a read-only or full filesystem, a security module.
        // Under sudo as the invoking user (`identity`): where they cannot write, nothing is written.
        let who = super::identity::AsInvoker::begin()?;
        let made = open_dir(&dest.dir).and_then(|dir| {
            let (tmp, _f) = make_temp_at(&dir, 0o600)?;
            rustix::fs::unlinkat(&dir, &tmp, rustix::fs::AtFlags::empty()).map_err(io::Error::from)
        });
        drop(who);
        made.map_err(|e| usage(create_words(&d, &e)))?;
        Ok(dest)
    }

    /// New files are created 0600: only their owner reads them.
    pub fn private(mut self) -> Destination {
        self.mode = 0o600;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What stands at the name now, as a refusal when it may not be replaced.
    fn check_target(&self) -> std::result::Result<Option<fs::Metadata>, String> {
        let shown = text::one_line(&self.path.display().to_string());
        let flag = &self.flag;
        let m = match fs::symlink_metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{flag} {shown}: cannot look at it: {e}")),
        };
        let kind = m.file_type();
        if kind.is_symlink() {
            let to = fs::read_link(&self.path).map(|t| text::one_line(&t.display().to_string())).unwrap_or_default();
            return Err(format!(
                "{flag} {shown} is a symbolic link (to {to}): pcibench does not write through links; write to the link's target path instead"
            ));
        }
        if kind.is_dir() {
            return Err(format!("{flag} {shown} is a directory: name a file in it"));
        }
        if !kind.is_file() {
            return Err(format!(
                "{flag} {shown} is {}: pcibench writes only regular files (a new one, or one it replaces whole); to write to a device or a pipe, give {flag} - and redirect stdout",
                kind_words(kind)
            ));
        }
        // rename(2) in a sticky directory replaces only what this process owns, unless it owns the
        // directory or has CAP_FOWNER (fs/namei.c, may_delete / check_sticky).
        if let Ok(dm) = fs::metadata(&self.dir) {
            let euid = rustix::process::geteuid().as_raw();
            let fowner = rustix::thread::capabilities(None)
                .is_ok_and(|c| c.effective.contains(rustix::thread::CapabilitySet::FOWNER));
            let euid = if super::identity::invoker().is_some() { super::identity::writer_uid() } else { euid };
            let fowner = fowner && super::identity::invoker().is_none();
            if dm.mode() & 0o1000 != 0 && m.uid() != euid && dm.uid() != euid && !fowner {
                return Err(format!(
                    "{flag} {shown} belongs to uid {} in a sticky directory (like /tmp): only its owner may replace it; choose another name",
                    m.uid()
                ));
            }
        }
        Ok(Some(m))
    }

    /// Write `bytes` under the name, whole or not at all (see the module docs). A file replaced
    /// keeps its permission bits; a new one gets 0666 (0600 when `private`) less the umask. Under
    /// sudo the file is created and renamed as the invoking user (`identity::AsInvoker`).
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        self.write_with(|f| f.write_all(bytes))
    }

    /// `write`, with the content written by `fill` into the temporary file (a reader of the name
    /// sees the old file until `fill` has finished and the file is synced and renamed).
    pub fn write_with(&self, fill: impl FnOnce(&mut File) -> io::Result<()>) -> Result<()> {
        let old = self.check_target().map_err(Error::Refused)?;
        let mode = old.map(|m| m.permissions().mode() & 0o777);
        let who = super::identity::AsInvoker::begin()?;
        let written = replace_with(&self.dir, &self.name, mode.unwrap_or(self.mode), mode.is_some(), fill);
        drop(who);
        written.map_err(|e| {
            let d = text::one_line(&self.dir.display().to_string());
            let hint = match write_words(&d, &e) {
                Some(w) => format!("{w}; nothing was written under that name"),
                None => "nothing was written under that name".to_string(),
            };
            Error::io_hint("cannot write", &self.path, e, hint)
        })
    }
}

/// `mkdir -p dir` for an output directory (`man DIR`), under sudo as the invoking user.
pub fn create_dir_all(dir: &Path) -> Result<()> {
    let who = super::identity::AsInvoker::begin()?;
    let made = fs::create_dir_all(dir);
    drop(who);
    made.map_err(|e| Error::io("cannot create", dir, e))
}

/// `dir` opened as the directory every later step names files relative to (`openat`,
/// `renameat`): once open, replacing the directory by a link redirects nothing. Under a fixture
/// root it is opened beneath the root (`beneath`).
fn open_dir(dir: &Path) -> io::Result<File> {
    super::beneath::open(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
}

/// A new temporary file in the open directory `dir`, `.pcibench-XXXXXXXX.tmp`, created with
/// `O_CREAT|O_EXCL|O_NOFOLLOW` (never an existing file, never through a link); its name and file.
fn make_temp_at(dir: &File, mode: u32) -> io::Result<(OsString, File)> {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        h.write_u32(std::process::id());
        let random = format!("{:0width$x}", h.finish() as u32, width = TEMP_RANDOM);
        let name = OsString::from(format!("{TEMP_PREFIX}{random}{TEMP_SUFFIX}"));
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(dir, name.as_os_str(), flags, Mode::from_raw_mode(mode)) {
            Ok(fd) => return Ok((name, File::from(fd))),
            Err(Errno::EXIST) => last = Errno::EXIST.into(),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last)
}

/// Write `bytes` to `dir/name` through a new temporary file in `dir` (`make_temp_at`, mode
/// `mode`, exactly when `exact`, else less the umask), synced, then renamed over the name; the
/// directory is synced so the rename lasts. Every step names files relative to the directory
/// opened once (`open_dir`). On any failure the temporary file is removed and the name keeps
/// what it had.
pub fn replace(dir: &Path, name: &OsStr, bytes: &[u8], mode: u32, exact: bool) -> io::Result<()> {
    replace_with(dir, name, mode, exact, |f| f.write_all(bytes))
}

/// `replace` with the content written by `fill`.
fn replace_with(
    dir: &Path,
    name: &OsStr,
    mode: u32,
    exact: bool,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let d = open_dir(dir)?;
    let (tmp, mut f) = make_temp_at(&d, mode)?;
    let written = (|| {
        if exact {
            f.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        fill(&mut f)?;
        f.flush()?;
        f.sync_all()?;
        rustix::fs::renameat(&d, tmp.as_os_str(), &d, name)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&d, tmp.as_os_str(), rustix::fs::AtFlags::empty());
        return written;
    }
    let _ = d.sync_all();
    Ok(())
}

/// Why no file could be created in directory `d`, in words.
fn create_words(d: &str, e: &io::Error) -> String {
    match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::ROFS) => format!("the filesystem holding {d} is read-only: write somewhere else"),
        Some(Errno::ACCESS | Errno::PERM) => {
            format!("cannot create files in {d} (permission denied): write somewhere you can")
        }
        _ => match write_words(d, e) {
            Some(w) => w,
            None => format!("cannot create a file in {d}: {e}"),
        },
    }
}

/// What a failed write means and what to do, where the error says more than its own text.
fn write_words(d: &str, e: &io::Error) -> Option<String> {
    Some(match e.raw_os_error().map(Errno::from_raw_os_error)? {
        Errno::NOSPC => format!("no space left on the filesystem holding {d}: free some, or write elsewhere"),
        Errno::DQUOT => format!("the disk quota on {d} is used up: free some, or write elsewhere"),
        Errno::ROFS => format!("the filesystem holding {d} is read-only: write somewhere else"),
        Errno::ACCESS | Errno::PERM => format!("permission denied in {d}: write somewhere you can"),
        _ => return None,
    })
}
