//! The reader and the writer against what a hostile or careless caller hands them: FIFOs, device
//! nodes (made with mknod in a temporary directory, never the host's /dev), sockets, links,
//! sparse files, names at the length limits. Device nodes need root; without it those cases say
//! so and the rest still run.

use super::*;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

/// Run `f` on another thread and fail the test if it has not returned within 30 s: a case that
/// would block (a FIFO opened for reading) fails instead of hanging the test run.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("{what} blocked"))
}

fn mknod(path: &Path, kind: rustix::fs::FileType, dev: (u32, u32)) -> bool {
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        kind,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(dev.0, dev.1),
    );
    if made.is_err() {
        eprintln!("not root: no {} made; that case did not run", path.display());
    }
    made.is_ok()
}

/// A FIFO (any user may make one).
fn fifo(path: &Path) {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, 0o644.into(), 0).unwrap();
}

#[test]
fn a_fifo_a_device_node_and_a_directory_are_refused_unread() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("run.json");
    fifo(&p);
    let e = within("reading a FIFO", move || read(&p, 1 << 20).unwrap_err());
    assert!(e.to_string().contains("a FIFO (named pipe), not a regular file"), "{e}");
    let zero = t.path().join("zero");
    if mknod(&zero, rustix::fs::FileType::CharacterDevice, (1, 5)) {
        let e = read(&zero, 256 << 20).unwrap_err().to_string();
        assert!(e.contains("a character device, not a regular file"), "{e}");
    }
    let e = read(t.path(), 1 << 20).unwrap_err().to_string();
    assert!(e.contains("a directory"), "{e}");
    // Opened for writing too (sysfs attributes setup writes), without waiting for a reader.
    let p = t.path().join("bind");
    fifo(&p);
    let e =
        within("opening a FIFO for writing", move || open_regular_with(&p, rustix::fs::OFlags::WRONLY).unwrap_err());
    assert!(e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) || e.to_string().contains("FIFO"), "{e}");
}

#[test]
fn reads_are_bounded_before_and_while_reading() {
    let t = tempfile::tempdir().unwrap();
    // A sparse 4 GiB file: refused by its size, nothing read.
    let p = t.path().join("sparse.json");
    fs::File::create(&p).unwrap().set_len(4 << 30).unwrap();
    let e = read(&p, 256 << 20).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
    assert!(e.to_string().contains("larger than 256 MiB (4 GiB)"), "{e}");
    // A /proc file says 0 bytes: the bound holds while reading.
    let e = read(Path::new("/proc/self/status"), 16).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge, "{e}");
    assert!(read_string(Path::new("/proc/self/status"), 1 << 20).unwrap().contains("Pid:"));
    fs::write(t.path().join("attr"), "0x10ee\n").unwrap();
    assert_eq!(read_trim(&t.path().join("attr")).as_deref(), Some("0x10ee"));
}

fn check(path: &Path) -> crate::Result<Destination> {
    Destination::check("--save", "run.json", path)
}

#[test]
fn device_nodes_fifos_sockets_and_links_are_never_replaced() {
    let t = tempfile::tempdir().unwrap();
    let null = t.path().join("null");
    if mknod(&null, rustix::fs::FileType::CharacterDevice, (1, 3)) {
        let e = check(&null).unwrap_err().to_string();
        assert!(e.contains("is a character device") && e.contains("--save - and redirect stdout"), "{e}");
        assert!(fs::symlink_metadata(&null).unwrap().file_type().is_char_device(), "still the node");
    }
    let p = t.path().join("pipe");
    fifo(&p);
    let e = within("checking a FIFO", move || check(&p).unwrap_err().to_string());
    assert!(e.contains("is a FIFO"), "{e}");
    let sock = t.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    assert!(check(&sock).unwrap_err().to_string().contains("is a socket"));
    // A link, even to a regular file: refused, the target untouched.
    let victim = t.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let link = t.path().join("run.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let e = check(&link).unwrap_err().to_string();
    assert!(e.contains("is a symbolic link") && e.contains("write to the link's target path instead"), "{e}");
    // A link planted after the check: the write refuses it too.
    fs::remove_file(&link).unwrap();
    let d = check(&link).unwrap();
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    assert!(d.write(b"new").unwrap_err().to_string().contains("symbolic link"));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

#[test]
fn names_are_checked_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let e = check(Path::new("")).unwrap_err().to_string();
    assert!(e.contains("--save '': an empty name"), "{e}");
    let e = check(&t.path().join("nodir/run.json")).unwrap_err().to_string();
    assert!(e.contains("there is no directory") && e.contains("mkdir -p"), "{e}");
    let e = check(t.path()).unwrap_err().to_string();
    assert!(e.contains("is a directory"), "{e}");
    let e = check(Path::new(&format!("{}/", t.path().display()))).unwrap_err().to_string();
    assert!(e.contains("is a directory"), "{e}");
    let e = check(Path::new(&format!("{}/new/", t.path().display()))).unwrap_err().to_string();
    assert!(e.contains("names a directory"), "{e}");
    // 255 bytes (NAME_MAX on ext4 and tmpfs): the temporary name is shorter, so it writes.
    let long = t.path().join(format!("{}.json", "a".repeat(250)));
    let d = check(&long).unwrap();
    d.write(b"{}\n").unwrap();
    assert_eq!(fs::read(&long).unwrap(), b"{}\n");
    let e = check(&t.path().join(format!("{}.json", "a".repeat(251)))).unwrap_err().to_string();
    assert!(e.contains("the name is 256 bytes, more than the 255"), "{e}");
    let deep = format!("{}/{}", t.path().display(), "d/".repeat(2100));
    let e = check(&Path::new(&deep).join("run.json")).unwrap_err().to_string();
    assert!(e.contains("PATH_MAX") || e.contains("no directory"), "{e}");
    // A long refusal echoes a long name clipped, not whole.
    let e = check(&t.path().join("x".repeat(300))).unwrap_err().to_string();
    assert!(e.len() < 250 && e.contains("characters)…") && e.contains("the name is 300 bytes"), "{e}");
    // Nothing is left behind by the checks.
    let left: Vec<_> = fs::read_dir(t.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn a_replaced_file_keeps_its_mode_and_nothing_else_is_left() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("run.json");
    fs::write(&p, "old").unwrap();
    fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let d = check(&p).unwrap();
    d.write(b"new").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"new");
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
    // The names a predictable temporary file once had (`.run.json.PID.tmp`) planted as links
    // to a victim: nothing follows them.
    let victim = t.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    for pid in std::process::id()..std::process::id() + 50 {
        std::os::unix::fs::symlink(&victim, t.path().join(format!(".run.json.{pid}.tmp"))).unwrap();
    }
    d.write(b"newer").unwrap();
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    let tmp: Vec<_> = fs::read_dir(t.path())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with(".pcibench-"))
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
}

#[test]
fn stdout_is_the_way_to_a_device() {
    assert_eq!(Output::check("-o", "out.svg", std::ffi::OsStr::new("-")).unwrap(), Output::Stdout);
}

/// The socket's name appears only once it accepts connections: a client that connects the moment
/// the file shows up (as QEMU's `vfio-user-pci` after a script's wait) is never refused. Bound in
/// place, the name showed up before listen(2) and such a client got ECONNREFUSED.
#[test]
fn a_served_socket_accepts_from_the_moment_its_name_appears() {
    let t = tempfile::tempdir().unwrap();
    for round in 0..40 {
        let path = t.path().join(format!("s{round}.sock"));
        let watched = path.clone();
        let watcher = std::thread::spawn(move || loop {
            if watched.exists() {
                return std::os::unix::net::UnixStream::connect(&watched).map(|_| ());
            }
            std::hint::spin_loop();
        });
        let listening = super::socket::listen("--socket", &path).unwrap();
        watcher.join().unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
        drop(listening);
        assert!(!path.exists(), "removed when dropped");
        let left: Vec<_> = std::fs::read_dir(t.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "nothing left beside it: {left:?}");
    }
}

/// Nothing at the name is replaced, even when it appears between the look and the move.
#[test]
fn a_socket_is_put_in_place_without_replacing_anything() {
    let t = tempfile::tempdir().unwrap();
    let dir: rustix::fd::OwnedFd =
        rustix::fs::open(t.path(), rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY, rustix::fs::Mode::empty())
            .unwrap();
    std::fs::write(t.path().join("a"), "theirs").unwrap();
    std::fs::write(t.path().join("tmp"), "ours").unwrap();
    assert_eq!(super::socket::place(&dir, "tmp".as_ref(), "a".as_ref()), Err(rustix::io::Errno::EXIST));
    assert_eq!(std::fs::read_to_string(t.path().join("a")).unwrap(), "theirs");
    assert_eq!(super::socket::place(&dir, "tmp".as_ref(), "b".as_ref()), Ok(super::socket::Placed::Renamed));
    assert_eq!(std::fs::read_to_string(t.path().join("b")).unwrap(), "ours");
    assert!(!t.path().join("tmp").exists(), "moved, not copied");
}

/// Something at the temporary name the socket is first bound under (another's file, a link) is
/// skipped and kept: the socket is bound beside it, and only the socket's own names are touched.
#[test]
fn what_stands_at_the_temporary_name_is_kept() {
    let t = tempfile::tempdir().unwrap();
    let planted = t.path().join(format!(".pcibench-serve-{}-0", std::process::id()));
    std::os::unix::fs::symlink("/etc/hostname", &planted).unwrap();
    let path = t.path().join("s.sock");
    let listening = super::socket::listen("--socket", &path).unwrap();
    std::os::unix::net::UnixStream::connect(&path).unwrap();
    drop(listening);
    assert!(!path.exists(), "removed when dropped");
    let left: Vec<_> = std::fs::read_dir(t.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![planted.file_name().unwrap().to_os_string()], "only what was planted is left");
    assert!(std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
}
