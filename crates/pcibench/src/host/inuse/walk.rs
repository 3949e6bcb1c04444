//! Bounded, loop-safe reads of sysfs links. sysfs is a graph of symlinks; a kernel bug, a race with
//! hot-unplug or a hand-made tree can put a loop or a dangling link in it. Every read here is
//! bounded (entries per directory, depth of a walk) and turns a loop or a dangling link into an
//! error that names the link, so the inventory can never hang and never guesses "unused".

use crate::Error;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// More entries than this in one sysfs directory is not a real machine.
pub const MAX_ENTRIES: usize = 65_536;
/// More devices stacked on one another than this (dm on md on a partition on a loop ...) is a loop
/// the visited sets did not catch.
pub const MAX_DEPTH: usize = 32;

pub(super) fn sysfs_error(msg: impl Into<String>) -> Error {
    Error::Sysfs(msg.into())
}

/// The real directory a sysfs link (or directory) stands for. A dangling link or a symlink loop is
/// an error naming it; a missing path is `Ok(None)`.
pub(super) fn resolve(p: &Path) -> Result<Option<PathBuf>, Error> {
    match fs::canonicalize(p) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            let is_link = fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
            let target = fs::read_link(p).map(|t| t.display().to_string()).unwrap_or_default();
            // ELOOP: too many levels of symbolic links.
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                return Err(sysfs_error(format!(
                    "symlink loop at {} (-> {target}): sysfs is inconsistent; cannot tell what uses the device",
                    p.display()
                )));
            }
            if is_link && e.kind() == ErrorKind::NotFound {
                return Err(sysfs_error(format!(
                    "dangling link {} -> {target}: sysfs changed under us (a device going away?) or is \
                     inconsistent; run it again, and if it persists see dmesg",
                    p.display()
                )));
            }
            if e.kind() == ErrorKind::NotFound {
                return Ok(None);
            }
            Err(Error::io("cannot resolve", p, e))
        }
    }
}

/// The entries of a directory as (name, path), sorted by name; a missing directory is empty.
pub(super) fn entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("cannot list", dir, e)),
    };
    let mut v = Vec::new();
    for e in rd {
        let e = e.map_err(|err| Error::io("cannot list", dir, err))?;
        if v.len() >= MAX_ENTRIES {
            return Err(sysfs_error(format!("{} has more than {MAX_ENTRIES} entries: stopped", dir.display())));
        }
        v.push((e.file_name().to_string_lossy().to_string(), e.path()));
    }
    v.sort();
    Ok(v)
}

/// Whether `p` is a directory itself, not a symlink to one (sysfs links point all over the tree).
pub(super) fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Every real directory below `root` (not following symlinks), at most `depth` levels down and
/// `MAX_ENTRIES` in all.
pub(super) fn dirs_below(root: &Path, depth: usize) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, d)) = stack.pop() {
        if d >= depth {
            continue;
        }
        for (_, p) in entries(&dir)? {
            if is_real_dir(&p) {
                if out.len() >= MAX_ENTRIES {
                    return Err(sysfs_error(format!("more than {MAX_ENTRIES} directories below {}", root.display())));
                }
                out.push(p.clone());
                stack.push((p, d + 1));
            }
        }
    }
    Ok(out)
}

/// The last component of a path, as text.
pub(super) fn name_of(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}
