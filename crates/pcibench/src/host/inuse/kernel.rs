//! What the inventory asks the kernel itself, behind one seam (`Kernel`) so fixture trees can say
//! what it would answer:
//! - `exclusive_open`: may a block device be claimed? `open(O_RDONLY | O_EXCL)` on a block node asks
//!   the kernel to claim it (block/bdev.c, bd_prepare_to_claim) and fails with EBUSY while anyone holds
//!   it exclusively: a filesystem mounted in any mount namespace, LIO's iblock backstore, nvmet's
//!   block backend, md, device-mapper, swap, bcache, a btrfs or zfs member, a process that opened it
//!   with O_EXCL. The probe is never for writing and is closed at once; the node is checked to be the
//!   device sysfs names (its device number) before it is opened, and opened through the checked
//!   descriptor, so a node swapped in between is never the one claimed.
//! - `net_view`: the network interfaces (and their addresses) of another network namespace, from a
//!   thread that entered it (`netlink`).
//!
//! `Real` asks the running kernel. `Fixture` (every fixture root) reads a fixture tree's stand-ins:
//! a block node is a file reading `block MAJ:MIN` (free), `block MAJ:MIN busy` (EBUSY) or
//! `block MAJ:MIN eacces` (no permission), and no file is no node; a namespace file
//! (`/proc/PID/ns/net`, `/run/netns/NAME`) reads `net:[INODE]` on its first line, then either
//! `eacces` or the namespace's interfaces as JSON (`NsView`); a descriptor's link to `net:[INODE]`
//! (`/proc/PID/fd/N`) stands for the file `/.netns/INODE` of the tree, read the same way. Tests that need another answer (a
//! namespace that goes away while it is walked) give `Host::with_kernel` their own.

use super::nsfile::ns_inode_of;
use super::procs::{parse_devno, Devno};
use crate::host::Host;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{openat, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;
use std::io::Read;
use std::path::Path;

/// What an exclusive open of a block node said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exclusive {
    /// Claimed and released at once: nobody holds it exclusively.
    Free,
    /// EBUSY: someone holds it exclusively.
    Busy,
    /// The open was refused (EACCES, EPERM): who holds it cannot be told. The words say why.
    NoPermission(String),
    /// No node for it where sysfs says (/dev/NAME): nothing was opened.
    NoNode,
    /// The node is not the block device sysfs names (another device number, not a block device):
    /// nothing was opened. The words say what it is.
    NotTheDevice(String),
    /// Any other failure, in words (the device going away, no medium).
    Failed(String),
}

// The shapes netlink fills live with it (netlink.rs), so the parser does not reach back up here.
pub use super::netlink::{NsLink, NsView};

/// Why a namespace could not be looked into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsError {
    /// It went away (its last process exited, its name was deleted): nothing is in it any more.
    Gone,
    /// Entering it was refused: "no permission to enter it: run it as root".
    NoPermission(String),
    /// Anything else, in words.
    Failed(String),
}

/// What the inventory asks the kernel (see the module's words).
pub trait Kernel: std::fmt::Debug + Send + Sync {
    /// Open block node `node` (a path under the host's root) read-only and exclusively, and close it
    /// at once, after checking it is block device `dev`.
    fn exclusive_open(&self, host: &Host, node: &Path, dev: Devno) -> Exclusive;
    /// The interfaces of the network namespace whose file is `ns` (`/proc/PID/ns/net`,
    /// `/run/netns/NAME`, under the host's root), which must still be namespace `inode`.
    fn net_view(&self, host: &Host, ns: &Path, inode: u64) -> Result<NsView, NsError>;
}

/// The running kernel.
#[derive(Debug, Default)]
pub struct Real;

/// A fixture tree's stand-ins (see the module's words).
#[derive(Debug, Default)]
pub struct Fixture;

pub(crate) const NO_PERMISSION_NS: &str = "no permission to enter it: run it as root";

fn errno_words(e: Errno) -> String {
    std::io::Error::from(e).to_string()
}

impl Kernel for Real {
    fn exclusive_open(&self, _host: &Host, node: &Path, dev: Devno) -> Exclusive {
        // O_PATH opens nothing (no driver open, no claim): it only pins the inode to check.
        let pinned = match openat(CWD, node, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Exclusive::NoNode,
            Err(e @ (Errno::ACCESS | Errno::PERM)) => return Exclusive::NoPermission(errno_words(e)),
            Err(e) => return Exclusive::Failed(errno_words(e)),
        };
        let st = match rustix::fs::fstat(&pinned) {
            Ok(st) => st,
            Err(e) => return Exclusive::Failed(errno_words(e)),
        };
        let kind = FileType::from_raw_mode(st.st_mode);
        let rdev = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
        if kind != FileType::BlockDevice || rdev != dev {
            let what = match kind {
                FileType::BlockDevice => format!("block device {}:{}", rdev.0, rdev.1),
                FileType::CharacterDevice => format!("character device {}:{}", rdev.0, rdev.1),
                FileType::Symlink => "symbolic link".into(),
                FileType::Directory => "directory".into(),
                FileType::RegularFile => "regular file".into(),
                _ => "special file".into(),
            };
            return Exclusive::NotTheDevice(what);
        }
        // Reopen the checked inode itself through its descriptor (fs/proc/fd.c: the magic link is
        // the open file), never the name again.
        let again = format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(&pinned));
        let flags = OFlags::RDONLY | OFlags::EXCL | OFlags::NONBLOCK | OFlags::CLOEXEC;
        match openat(CWD, again.as_str(), flags, Mode::empty()) {
            // Dropped here: closed at once, the claim released (blkdev_release).
            Ok(_claimed) => Exclusive::Free,
            Err(Errno::BUSY) => Exclusive::Busy,
            Err(e @ (Errno::ACCESS | Errno::PERM)) => Exclusive::NoPermission(errno_words(e)),
            Err(e) => Exclusive::Failed(errno_words(e)),
        }
    }

    fn net_view(&self, host: &Host, ns: &Path, inode: u64) -> Result<NsView, NsError> {
        let fd = match openat(CWD, ns, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::SRCH) => return Err(NsError::Gone),
            Err(Errno::ACCESS | Errno::PERM) => return Err(NsError::NoPermission(NO_PERMISSION_NS.into())),
            Err(e) => return Err(NsError::Failed(errno_words(e))),
        };
        // The PID may have exited and been reused since the namespace was listed.
        match rustix::fs::fstat(&fd) {
            Ok(st) if st.st_ino == inode => {}
            Ok(_) => return Err(NsError::Gone),
            Err(e) => return Err(NsError::Failed(errno_words(e))),
        }
        if let Some(words) = too_old(host) {
            return Err(NsError::Failed(words));
        }
        let sock = socket_in(fd)?;
        super::netlink::view(&sock).map_err(|e| NsError::Failed(format!("its interfaces cannot be listed ({e})")))
    }
}

/// IFLA_PARENT_DEV_NAME came with Linux 5.16 (commit 00e77ed8e64d): before it a namespace's
/// interfaces do not say which device they belong to.
fn too_old(host: &Host) -> Option<String> {
    let rel = crate::host::state::read_trim(&host.path("/proc/sys/kernel/osrelease"))?;
    let mut v = rel.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u32>().ok());
    let (major, minor) = (v.next()?, v.next()?);
    ((major, minor) < (5, 16)).then(|| {
        format!(
            "this kernel ({rel}) does not say which device an interface belongs to over netlink (5.16 and later do)"
        )
    })
}

/// A NETLINK_ROUTE socket in the namespace `ns` refers to: made on a thread that entered it
/// (setns(CLONE_NEWNET) changes only the calling thread), which then ends, so no thread of ours
/// stays in another namespace. A socket answers for the namespace it was made in.
fn socket_in(ns: OwnedFd) -> Result<OwnedFd, NsError> {
    let made = std::thread::Builder::new()
        .name("pcibench-netns".into())
        .spawn(move || -> Result<OwnedFd, NsError> {
            use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
            match move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network)) {
                Ok(()) => {}
                Err(Errno::PERM | Errno::ACCESS) => return Err(NsError::NoPermission(NO_PERMISSION_NS.into())),
                Err(e) => return Err(NsError::Failed(format!("it cannot be entered ({})", errno_words(e)))),
            }
            super::netlink::socket().map_err(|e| NsError::Failed(format!("no netlink socket in it ({e})")))
        })
        .map_err(|e| NsError::Failed(format!("no thread to enter it ({e})")))?;
    made.join().map_err(|_| NsError::Failed("the thread that entered it failed".into()))?
}

impl Kernel for Fixture {
    fn exclusive_open(&self, _host: &Host, node: &Path, dev: Devno) -> Exclusive {
        let text = match crate::file::read_string(node, 256) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Exclusive::NoNode,
            Err(e) => return Exclusive::Failed(e.to_string()),
        };
        let mut w = text.split_whitespace();
        let (kind, num, outcome) = (w.next(), w.next().and_then(parse_devno), w.next());
        match (kind, num) {
            (Some("block"), Some(d)) if d == dev => {}
            (Some("block"), Some(d)) => return Exclusive::NotTheDevice(format!("block device {}:{}", d.0, d.1)),
            _ => return Exclusive::NotTheDevice("regular file".into()),
        }
        match outcome {
            Some("busy") => Exclusive::Busy,
            Some("eacces") => Exclusive::NoPermission(errno_words(Errno::ACCESS)),
            _ => Exclusive::Free,
        }
    }

    fn net_view(&self, host: &Host, ns: &Path, inode: u64) -> Result<NsView, NsError> {
        let linked = std::fs::read_link(ns).ok().and_then(|t| ns_inode_of(&t.to_string_lossy()));
        let ns = match linked {
            Some(i) => host.path(format!("/.netns/{i}")),
            None => ns.to_path_buf(),
        };
        let mut text = String::new();
        match std::fs::File::open(&ns).and_then(|f| f.take(16 << 20).read_to_string(&mut text)) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NsError::Gone),
            Err(e) => return Err(NsError::Failed(e.to_string())),
        }
        let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
        if ns_inode_of(first) != Some(inode) {
            return Err(NsError::Gone);
        }
        match rest.trim() {
            "" => Ok(NsView::default()),
            "eacces" => Err(NsError::NoPermission(NO_PERMISSION_NS.into())),
            json => serde_json::from_str(json).map_err(|e| NsError::Failed(format!("fixture namespace: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_links_read_as_inodes() {
        assert_eq!(ns_inode_of("net:[4026531840]"), Some(4026531840));
        assert_eq!(ns_inode_of("mnt:[7]\n"), Some(7));
        assert_eq!(ns_inode_of("net:[x]"), None);
        assert_eq!(ns_inode_of("4026531840"), None);
    }

    /// The real probe on nodes that are not the block device asked for opens nothing.
    #[test]
    fn the_real_probe_checks_the_node_first() {
        let host = Host::with_root("/");
        // /dev/null is a character device: never opened exclusively.
        let r = Real.exclusive_open(&host, Path::new("/dev/null"), (1, 3));
        assert_eq!(r, Exclusive::NotTheDevice("character device 1:3".into()));
        let t = tempfile::tempdir().unwrap();
        assert_eq!(Real.exclusive_open(&host, &t.path().join("vdz"), (254, 0)), Exclusive::NoNode);
        // A link standing for the node is not followed.
        std::os::unix::fs::symlink("/dev/null", t.path().join("vdy")).unwrap();
        let r = Real.exclusive_open(&host, &t.path().join("vdy"), (1, 3));
        assert_eq!(r, Exclusive::NotTheDevice("symbolic link".into()));
    }

    /// The real walk: a thread of this test moves into a new network namespace of its own and stays
    /// there while `Real` looks into it from another thread; as root it sees only that namespace's
    /// loopback, without it the kernel refuses and that is said.
    #[test]
    fn the_real_kernel_looks_into_another_network_namespace() {
        use std::sync::mpsc;
        let host = Host::with_root("/");
        let (tx, rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: only the network namespace is unshared, by this thread alone: no file table or
            // filesystem state (what makes unshare unsafe for the process) changes.
            let r = unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) };
            tx.send((r, rustix::thread::gettid().as_raw_nonzero().get())).unwrap();
            let _ = done_rx.recv();
        });
        let (r, tid) = rx.recv().unwrap();
        let ns = std::path::PathBuf::from(format!("/proc/self/task/{tid}/ns/net"));
        if r.is_err() {
            // Not allowed to make one (no CAP_SYS_ADMIN): entering one would be refused too.
            let own = crate::host::inuse::nsfile::ns_inode(&host, Path::new("/proc/self/ns/net")).unwrap();
            let got = Real.net_view(&host, Path::new("/proc/self/ns/net"), own);
            // Our own namespace is never said gone; refused or not, it is said in words.
            match got {
                Ok(_) | Err(NsError::NoPermission(_)) => {}
                Err(NsError::Failed(w)) => assert!(!w.is_empty()),
                Err(NsError::Gone) => panic!("this process's own namespace said gone"),
            }
        } else if let Some(words) = too_old(&host) {
            let inode = crate::host::inuse::nsfile::ns_inode(&host, &ns).unwrap();
            assert_eq!(Real.net_view(&host, &ns, inode), Err(NsError::Failed(words)));
        } else {
            let inode = crate::host::inuse::nsfile::ns_inode(&host, &ns).unwrap();
            let v = Real.net_view(&host, &ns, inode).unwrap();
            assert_eq!(v.links.iter().map(|l| (l.name.as_str(), l.up)).collect::<Vec<_>>(), [("lo", false)]);
            // The same path is another namespace's by then: said gone, never read.
            assert_eq!(Real.net_view(&host, &ns, inode + 1), Err(NsError::Gone));
        }
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn kernels_before_5_16_are_said_to_name_no_parent() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let p = host.path("/proc/sys/kernel/osrelease");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "5.15.0-91-generic\n").unwrap();
        assert!(too_old(&host).unwrap().contains("5.16 and later"));
        std::fs::write(&p, "6.1.0-28-cloud-amd64\n").unwrap();
        assert_eq!(too_old(&host), None);
    }
}
