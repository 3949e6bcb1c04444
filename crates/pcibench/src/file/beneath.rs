//! Opening a path under a fixture root (`--sysroot`, `PCIBENCH_SYSROOT`, `Host::with_root`)
//! beneath that root: `openat2(2)` on the root's descriptor with `RESOLVE_BENEATH` (no `..` or
//! absolute link leads above it) and `RESOLVE_NO_MAGICLINKS` (no /proc/PID/fd-style jump), for
//! reads and writes alike. A fixture tree is data someone else may have built: a link at
//! `current_link_speed` to /etc/shadow, or at `drivers/vfio-pci/unbind` to a root-owned file, fails
//! to open (EXDEV) instead of being read or written through. Paths of the real host (root `/`)
//! are opened as named.
//!
//! `Host::with_root` registers its root here, so every open in `file` (`read`, `open_regular_with`,
//! the writer) finds the root a path lies under without each caller passing it.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

fn roots() -> &'static Mutex<Vec<PathBuf>> {
    static ROOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    &ROOTS
}

/// Make `root` a fixture root: every later open of a path under it resolves beneath it.
/// `/` (the real host) is not one.
pub fn register(root: &Path) {
    if root == Path::new("/") || root.as_os_str().is_empty() {
        return;
    }
    if let Ok(mut r) = roots().lock() {
        if !r.iter().any(|x| x == root) {
            r.push(root.to_path_buf());
        }
    }
}

/// The fixture root `path` lies under (the longest, when roots nest) and the rest of the path.
pub fn split(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let r = roots().lock().ok()?;
    let root = r.iter().filter(|root| path.starts_with(root)).max_by_key(|root| root.as_os_str().len())?.clone();
    let rel = path.strip_prefix(&root).ok()?.to_path_buf();
    Some((root, if rel.as_os_str().is_empty() { PathBuf::from(".") } else { rel }))
}

/// The flags every beneath-open resolves with.
pub const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// `rel` opened beneath the directory `root` (see the module docs); a link that leads out is
/// EXDEV, said in words.
pub fn open_beneath(root: &Path, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<File> {
    let dir = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let opened = match rustix::fs::openat2(&dir, rel, flags | OFlags::CLOEXEC, mode, RESOLVE) {
        // No openat2 (a kernel before 5.6, or qemu-user's emulation): the same rule, walked here.
        Err(rustix::io::Errno::NOSYS) => walk_beneath(dir, rel, flags, mode),
        r => r,
    };
    match opened {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::XDEV) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "it leads out of the fixture root {} (a link to somewhere outside it): a fixture root's files are opened only beneath it",
                root.display()
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Links followed in one walk before ELOOP (the kernel's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` in user space: one component at a time with
/// `O_PATH | O_NOFOLLOW` from the root's descriptor; a link's target is walked in its place, and an
/// absolute target or a `..` above the root is EXDEV, as the kernel says it. The last component is
/// opened with `O_NOFOLLOW`, so a link swapped in after the walk fails rather than being followed.
fn walk_beneath(
    root: rustix::fd::OwnedFd,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{fstat, openat, readlinkat, FileType};
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    use std::path::Component;
    let parts = |p: &Path| -> rustix::io::Result<Vec<OsString>> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(Ok(n.to_os_string())),
                Component::ParentDir => Some(Ok(OsString::from(".."))),
                Component::CurDir => None,
                Component::RootDir | Component::Prefix(_) => Some(Err(rustix::io::Errno::XDEV)),
            })
            .collect()
    };
    let mut pending = parts(rel)?;
    pending.reverse();
    let mut dirs = vec![root];
    let mut links = 0;
    while let Some(c) = pending.pop() {
        if c == ".." {
            if dirs.len() == 1 {
                return Err(rustix::io::Errno::XDEV);
            }
            dirs.pop();
            continue;
        }
        let last = pending.is_empty();
        let dir = dirs.last().expect("the root stays");
        let fd = match openat(dir, &c, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) if last && flags.contains(OFlags::CREATE) => {
                return openat(dir, &c, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode);
            }
            r => r?,
        };
        let kind = FileType::from_raw_mode(fstat(&fd)?.st_mode);
        if kind == FileType::Symlink {
            links += 1;
            if links > MAX_LINKS {
                return Err(rustix::io::Errno::LOOP);
            }
            let target = PathBuf::from(OsString::from_vec(readlinkat(dir, &c, Vec::new())?.into_bytes()));
            let mut more = parts(&target)?;
            more.reverse();
            pending.extend(more);
        } else if last {
            return openat(dir, &c, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode);
        } else if kind != FileType::Directory {
            return Err(rustix::io::Errno::NOTDIR);
        } else {
            dirs.push(fd);
        }
    }
    // The path named a directory (empty, `.`, or ending in `..` or a link to one).
    openat(dirs.last().expect("the root stays"), ".", flags | OFlags::CLOEXEC, mode)
}

/// `path` opened with `flags`: beneath its fixture root when it lies under one, else as named.
pub fn open(path: &Path, flags: OFlags, mode: Mode) -> io::Result<File> {
    match split(path) {
        Some((root, rel)) => open_beneath(&root, &rel, flags, mode),
        None => Ok(File::from(rustix::fs::open(path, flags | OFlags::CLOEXEC, mode)?)),
    }
}

#[cfg(test)]
mod tests {
    use crate::host::Host;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// M2 (issue 36): a fixture's link to a file outside it is neither read nor written through,
    /// whether the link is absolute or climbs out with `..`; a link inside the tree still works.
    #[test]
    fn no_link_leads_out_of_a_fixture_root() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("shadow");
        fs::write(&secret, "root:secret\n").unwrap();
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let dev = host.path("/sys/devices/pci0000:00/0000:00:04.0");
        fs::create_dir_all(&dev).unwrap();
        symlink(&secret, dev.join("current_link_speed")).unwrap();
        let climb = "../".repeat(dev.strip_prefix(t.path()).unwrap().components().count() + 8);
        symlink(format!("{climb}{}", secret.display()), dev.join("max_link_speed")).unwrap();
        fs::write(dev.join("real"), "8.0 GT/s PCIe\n").unwrap();
        symlink("real", dev.join("link_inside")).unwrap();
        for name in ["current_link_speed", "max_link_speed"] {
            let e = crate::file::read_string(&dev.join(name), 4096).unwrap_err().to_string();
            assert!(e.contains("leads out of the fixture root"), "{name}: {e}");
            assert_eq!(crate::file::read_trim(&dev.join(name)), None);
            let w =
                crate::file::open_regular_with(&dev.join(name), rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::TRUNC);
            assert!(w.is_err(), "{name} opened for writing");
        }
        assert_eq!(fs::read_to_string(&secret).unwrap(), "root:secret\n", "nothing written through");
        assert_eq!(crate::file::read_trim(&dev.join("link_inside")).as_deref(), Some("8.0 GT/s PCIe"));
        // The same link on the real host's paths (not under a fixture root) is followed as named.
        assert_eq!(super::split(&secret), None);
        // Where openat2 is missing (kernels before 5.6, qemu-user), the walk gives the same answers.
        let walk = |rel: &str, flags| {
            let root = rustix::fs::open(
                t.path(),
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            super::walk_beneath(root, std::path::Path::new(rel), flags, rustix::fs::Mode::from_raw_mode(0o600))
        };
        let rel = dev.strip_prefix(t.path()).unwrap().to_str().unwrap().to_string();
        for name in ["current_link_speed", "max_link_speed"] {
            assert_eq!(
                walk(&format!("{rel}/{name}"), rustix::fs::OFlags::RDONLY).unwrap_err(),
                rustix::io::Errno::XDEV,
                "{name}"
            );
        }
        let mut s = String::new();
        use std::io::Read;
        fs::File::from(walk(&format!("{rel}/link_inside"), rustix::fs::OFlags::RDONLY).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "8.0 GT/s PCIe\n");
        let made = walk(
            &format!("{rel}/new"),
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE | rustix::fs::OFlags::EXCL,
        );
        assert!(made.is_ok() && dev.join("new").is_file());
        assert_eq!(walk("../x", rustix::fs::OFlags::RDONLY).unwrap_err(), rustix::io::Errno::XDEV);
        assert!(walk(&format!("{rel}/../0000:00:04.0/real"), rustix::fs::OFlags::RDONLY).is_ok());
    }
}
