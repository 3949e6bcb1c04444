//! Replacing a file whole or not at all, for files another program reads while they are
//! rewritten (node_exporter's textfile collector reading `health -o`, the next `health --state`):
//! the new content goes to a temporary file created beside the target (O_EXCL|O_NOFOLLOW, so it
//! is never someone's file or link), is flushed to disk (fsync), then renamed over the target
//! (rename(2) replaces atomically within a filesystem), and the directory is flushed so the
//! rename survives a crash. A reader sees the old file or the new one, never a part. A writer
//! killed before the rename leaves the old file and a `.NAME.PID.tmp` beside it, which a textfile
//! collector ignores (it reads `*.prom` only).
//!
//! One small function on purpose: the `--save` writer can share it later.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Replace `path` with what `fill` writes, atomically. Refuses a target that is not a regular
/// file (a device node, a FIFO, a socket, a directory, a symbolic link): renaming over `/dev/null`
/// would replace the node itself, and a link would be replaced rather than followed. The new
/// file is mode 0644 less the umask (a collector running as another user reads it).
pub fn write_atomically(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    if let Ok(m) = fs::symlink_metadata(path) {
        let t = m.file_type();
        let what = if t.is_symlink() {
            Some("a symbolic link (name the file it points to)")
        } else if t.is_dir() {
            Some("a directory")
        } else if t.is_char_device() || t.is_block_device() {
            Some("a device node")
        } else if t.is_fifo() {
            Some("a FIFO")
        } else if t.is_socket() {
            Some("a socket")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("it is {what}, not a regular file: it is replaced by renaming, so name a regular file"),
            ));
        }
    }
    // A name taken (a killed writer's leftover with a reused pid, or something planted) is never
    // opened: the next name is tried.
    let mut attempt = 0;
    let (tmp, mut f) = loop {
        let tmp = temp_name(path, attempt);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let done = fill(&mut f).and_then(|_| f.flush()).and_then(|_| f.sync_all()).and_then(|_| fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is in the directory: flush it too (ext4 and xfs order it anyway; others may not).
    if let Ok(d) = File::open(parent(path)) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// `.NAME.PID.tmp` (then `.NAME.PID.N.tmp`) beside `path`: hidden, and not `*.prom`, so a
/// collector never reads it.
fn temp_name(path: &Path, attempt: u32) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let pid = std::process::id();
    parent(path).join(if attempt == 0 { format!(".{name}.{pid}.tmp") } else { format!(".{name}.{pid}.{attempt}.tmp") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_refuses_what_is_not_a_regular_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("a.prom");
        write_atomically(&p, |f| f.write_all(b"one\n")).unwrap();
        write_atomically(&p, |f| f.write_all(b"two\n")).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1, "no temporary file is left");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o044, 0o044, "others can read it");

        // A failing fill leaves the old file and no temporary one.
        let e = write_atomically(&p, |f| {
            f.write_all(b"half")?;
            Err(io::Error::other("stop"))
        });
        assert!(e.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);

        let link = t.path().join("link.prom");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let fifo = t.path().join("fifo.prom");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();
        for (target, word) in [(&link, "symbolic link"), (&fifo, "FIFO"), (&t.path().to_path_buf(), "directory")] {
            let e = write_atomically(target, |f| f.write_all(b"x")).unwrap_err();
            assert!(e.to_string().contains(word), "{}: {e}", target.display());
        }
        assert!(write_atomically(Path::new("/dev/null"), |f| f.write_all(b"x"))
            .unwrap_err()
            .to_string()
            .contains("device node"));
        assert_eq!(fs::read_to_string(&p).unwrap(), "two\n", "the link's target is untouched");
    }

    #[test]
    fn a_planted_temporary_name_is_never_written_through() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("a.prom");
        let victim = t.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, temp_name(&p, 0)).unwrap();
        write_atomically(&p, |f| f.write_all(b"x")).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(fs::read_to_string(&p).unwrap(), "x");
        assert!(fs::symlink_metadata(temp_name(&p, 0)).unwrap().file_type().is_symlink(), "left as it was");
    }
}
