//! `serve --socket` never creates or removes by a path someone else steers (issue 51 S1): under
//! sudo (root with SUDO_UID/SUDO_GID/SUDO_USER set, as sudo sets them) its socket is made and
//! removed as the invoking user, relative to the directory opened once, so a parent link swapped
//! mid-run leads nowhere; and nothing already at the name is ever removed (a stale socket, another
//! user's, a live datagram socket like /dev/log).
//!
//! The sudo-shaped tests need root (chown, a user's identity); without it they say so on stderr.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

fn root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    eprintln!("privilege_serve: not root: the sudo-shaped serve tests did not run");
    false
}

/// `pcibench serve sim --socket SOCKET` as root, under sudo by nobody when `sudo`.
fn serve(socket: &Path, sudo: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcibench"));
    c.args(["serve", "sim", "--socket"]).arg(socket).env_remove("PCIBENCH_SYSROOT");
    if sudo {
        c.env("SUDO_UID", NOBODY.to_string()).env("SUDO_GID", NOBODY.to_string()).env("SUDO_USER", "nobody");
    } else {
        c.env_remove("SUDO_UID").env_remove("SUDO_GID").env_remove("SUDO_USER");
    }
    c
}

fn run(mut c: Command) -> Output {
    c.output().unwrap()
}

/// A directory of `uid` with `mode`.
fn dir_of(parent: &Path, name: &str, uid: u32, mode: u32) -> PathBuf {
    let d = parent.join(name);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// A scratch directory everyone can enter.
fn scratch() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

/// Wait for a state, not for a time: the deadline only ends a broken run.
fn wait_until(what: &str, child: &mut Child, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(120);
    while !done() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut e = String::new();
            if let Some(mut s) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut s, &mut e);
            }
            panic!("pcibench ended ({st}) before {what}: {e}");
        }
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A serving child, killed when dropped (a failed assertion must not leave it serving).
struct Serving(Option<Child>);

impl Serving {
    fn start(c: &mut Command) -> Serving {
        Serving(Some(c.stderr(Stdio::piped()).spawn().unwrap()))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("still serving")
    }

    /// Stop it as Ctrl-C would (SIGINT), and wait for it.
    fn stop(mut self) -> Output {
        let child = self.0.take().expect("still serving");
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait_with_output().unwrap()
    }

    /// Wait for it to end by itself.
    fn wait(mut self) -> Output {
        self.0.take().expect("still serving").wait_with_output().unwrap()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Names in a directory, sorted.
fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Under sudo the socket is made as the user, in the directory the path named when serve
/// started; the user re-points the parent link at a root-only directory holding a root file of
/// the same name, then stops serve: the socket goes from its own directory, the root file stays.
/// With the link pointing there at the start, nothing is made there (the user may not write it).
#[test]
fn under_sudo_a_swapped_parent_link_leads_serve_nowhere() {
    if !root() {
        return;
    }
    let t = scratch();
    let home = dir_of(t.path(), "home", NOBODY, 0o755);
    let real = dir_of(&home, "real", NOBODY, 0o755);
    let etc = dir_of(t.path(), "etc", 0, 0o755);
    std::fs::write(etc.join("s.sock"), "root's\n").unwrap();
    let link = home.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let socket = link.join("s.sock");
    let mut served = Serving::start(&mut serve(&socket, true));
    wait_until("the socket was made", served.child(), || real.join("s.sock").exists());
    let m = std::fs::symlink_metadata(real.join("s.sock")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()), "{m:?}");
    assert_eq!((m.uid(), m.gid()), (NOBODY, NOBODY), "made as the invoking user");
    // The user's move: the link now leads to root's directory.
    let swap = home.join("link.new");
    std::os::unix::fs::symlink(&etc, &swap).unwrap();
    std::fs::rename(&swap, &link).unwrap();
    let o = served.stop();
    assert!(o.status.success(), "{}", common::err(&o));
    assert_eq!(std::fs::read_to_string(etc.join("s.sock")).unwrap(), "root's\n", "root's file was removed");
    assert_eq!(names(&etc), ["s.sock"]);
    assert_eq!(names(&real), Vec::<String>::new(), "the socket went from its own directory");
    assert_eq!(names(t.path()), ["etc", "home"]);
    // Through the link as it is now: the user cannot create in root's directory, nor can serve.
    std::fs::remove_file(etc.join("s.sock")).unwrap();
    let o = run(serve(&socket, true));
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("cannot create the socket in") && e.contains("permission denied"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert_eq!(names(&etc), Vec::<String>::new(), "made in root's directory");
}

/// What a stopped server leaves is never removed, whoever owns it (another user, root, the
/// invoking user: pcibench cannot tell it from a live server's that is busy): refused, named.
#[test]
fn serve_never_removes_a_socket_it_did_not_make() {
    if !root() {
        return;
    }
    let t = scratch();
    let home = dir_of(t.path(), "home", NOBODY, 0o755);
    for owner in [0, 1000, NOBODY] {
        let stale = home.join(format!("stale-{owner}.sock"));
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        std::os::unix::fs::lchown(&stale, Some(owner), Some(owner)).unwrap();
        for sudo in [true, false] {
            let o = run(serve(&stale, sudo));
            let e = common::err(&o);
            assert_eq!(o.status.code(), Some(1), "{e}");
            assert!(e.contains(&format!("a socket of uid {owner} is already there")), "{e}");
            assert!(e.contains("never removes a socket it did not make") && e.lines().count() == 1, "{e}");
            assert_eq!(std::fs::symlink_metadata(&stale).unwrap().uid(), owner, "removed or replaced");
        }
    }
}

/// A live datagram socket (the shape of /dev/log) answers a stream connect with EPROTOTYPE,
/// which the old test took for stale: root's serve refuses it and it keeps working.
#[test]
fn serve_leaves_a_live_datagram_socket_alone() {
    let t = scratch();
    let log = t.path().join("log");
    let live = std::os::unix::net::UnixDatagram::bind(&log).unwrap();
    let o = run(serve(&log, false));
    let e = common::err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("is already there") && e.contains("never removes a socket it did not make"), "{e}");
    let client = std::os::unix::net::UnixDatagram::unbound().unwrap();
    client.send_to(b"still here", &log).unwrap();
    let mut buf = [0u8; 16];
    let n = live.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"still here");
}

/// Not a socket: files, links and directories at the name are usage errors, left as they are;
/// a name too long is one too, and a socket path past sun_path's 108 bytes works (it is bound
/// through the directory's descriptor).
#[test]
fn serve_refuses_other_files_and_binds_beneath_a_long_directory() {
    let t = scratch();
    let file = t.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let link = t.path().join("link");
    std::os::unix::fs::symlink("/nonexistent/x.sock", &link).unwrap();
    for (p, words) in [(&file, "exists and is not a socket"), (&link, "is a symbolic link")] {
        let o = run(serve(p, false));
        assert_eq!(o.status.code(), Some(2), "{}", common::err(&o));
        assert!(common::err(&o).contains(words), "{}", common::err(&o));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    let o = run(serve(&t.path().join(format!("{}.sock", "n".repeat(100))), false));
    assert_eq!(o.status.code(), Some(2), "{}", common::err(&o));
    assert!(common::err(&o).contains("more than a UNIX socket's address takes"), "{}", common::err(&o));
    let deep = t.path().join("d".repeat(60)).join("e".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    let socket = deep.join("s.sock");
    assert!(socket.as_os_str().len() > 108);
    let mut served = Serving::start(serve(&socket, false).arg("--once"));
    wait_until("the socket was made", served.child(), || socket.exists());
    // A client reaches it by a path of its own that fits (here relative to the directory).
    let o = Command::new(env!("CARGO_BIN_EXE_pcibench")).args(["info", "vfio-user:s.sock"]).current_dir(&deep).output();
    let o = o.unwrap();
    assert!(o.status.success() && common::out(&o).contains("simulated card"), "{}", common::err(&o));
    let o = served.wait();
    assert!(o.status.success(), "--once ends with its client: {}", common::err(&o));
    assert!(!socket.exists(), "removed at the end");
}
