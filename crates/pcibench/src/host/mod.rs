//! Where the host's kernel interfaces live. Everything pcibench reads from /sys, /proc, /dev
//! and /boot goes through `Host`, so tests point it at a fixture tree instead of the real root.
//! `state` reads kernel state (drivers, IOMMU groups and mode, modules, lockdown, the kernel's
//! command line and configuration); `inuse` finds what the running system uses a device for.
//! A `Host` is made once per command; it keeps what is costly to read and the same for every device
//! (the /proc scan of open files), so a command reads it once however many devices it asks about.

pub mod install;
pub mod inuse;
pub mod iomem;
pub mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Environment variable naming a directory that stands in for `/` (tests and fixtures).
pub const SYSROOT_ENV: &str = "PCIBENCH_SYSROOT";

#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
    /// Every process's open files and mappings, read on first use (`inuse::procs`); clones share it.
    procs: Arc<OnceLock<Arc<inuse::procs::ProcScan>>>,
    /// What the inventory asks the kernel itself (exclusive opens, other network namespaces).
    kernel: Arc<dyn inuse::kernel::Kernel>,
    /// The other network and mount namespaces, walked on first need; clones share them.
    netns: Arc<OnceLock<Arc<inuse::namespaces::NetScan>>>,
    mntns: Arc<OnceLock<Arc<inuse::namespaces::MountScan>>>,
    /// The PID under which this process appears in the root's /proc, which the inventory skips
    /// (our own opens are not a holder): ours on the real host; none in a fixture tree unless a
    /// test names one (`with_own_pid`). A fixture's PIDs are its own, so one that happened to
    /// equal the test runner's PID must not vanish from a scan (issue 34: pid_max is 32768 on
    /// many hosts, and a test failed on a runner whose PID fell among its fixture's).
    own_pid: Option<u32>,
    /// Whether this command may walk /proc (every process's open files and namespaces): read-only
    /// commands do not (`without_process_walk`).
    walk: bool,
}

impl Default for Host {
    fn default() -> Self {
        Host::from_env()
    }
}

impl Host {
    /// The real host, unless `PCIBENCH_SYSROOT` names a fixture root. A process with more
    /// privilege than its caller never gets here with it set: the CLI refuses it in one line first
    /// (`os::privilege::refuse_steering`).
    pub fn from_env() -> Self {
        match std::env::var_os(SYSROOT_ENV) {
            Some(r) if !r.is_empty() => Host::with_root(PathBuf::from(r)),
            _ => Host::with_root(PathBuf::from("/")),
        }
    }

    /// The host at `root`: the running kernel is asked for what only it knows when `root` is `/`;
    /// a fixture root's stand-ins answer otherwise (`inuse::kernel::Fixture`). Every file under a
    /// root other than `/` is opened beneath it (`file::beneath`), so no link in the tree leads out.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        crate::file::beneath::register(&root);
        let kernel: Arc<dyn inuse::kernel::Kernel> =
            if root == Path::new("/") { Arc::new(inuse::kernel::Real) } else { Arc::new(inuse::kernel::Fixture) };
        let own_pid = (root == Path::new("/")).then(std::process::id);
        Host { root, procs: Arc::default(), kernel, netns: Arc::default(), mntns: Arc::default(), own_pid, walk: true }
    }

    /// The same host for a read-only command (`list`, `info`, `health`): it never walks /proc
    /// (issue 55: `info` paid for a walk of every process it did not use). An inventory taken on it
    /// finds no process and says so (`inuse::procs::NOT_WALKED`), so it is incomplete by its own
    /// words and nothing that takes a device follows from it.
    pub fn without_process_walk(mut self) -> Self {
        self.walk = false;
        self.procs = Arc::default();
        self.netns = Arc::default();
        self.mntns = Arc::default();
        self
    }

    /// The same host, with `pid` standing for this process in its /proc (fixture trees).
    pub fn with_own_pid(mut self, pid: u32) -> Self {
        self.own_pid = Some(pid);
        self
    }

    /// The PID under which this process appears in the root's /proc, if it does.
    pub fn own_pid(&self) -> Option<u32> {
        self.own_pid
    }

    /// The same host asking `kernel` what only the kernel knows (tests: a namespace that goes away
    /// while it is walked, a probe's every answer).
    pub fn with_kernel(mut self, kernel: Arc<dyn inuse::kernel::Kernel>) -> Self {
        self.kernel = kernel;
        self
    }

    pub(crate) fn kernel(&self) -> Arc<dyn inuse::kernel::Kernel> {
        self.kernel.clone()
    }

    /// The other network namespaces of this command: walked on first use, then the same.
    pub(crate) fn net_namespaces(&self) -> Arc<inuse::namespaces::NetScan> {
        self.netns.get_or_init(|| Arc::new(inuse::namespaces::net_scan(self))).clone()
    }

    /// The other mount namespaces of this command: read on first use, then the same.
    pub(crate) fn mount_namespaces(&self) -> Arc<inuse::namespaces::MountScan> {
        self.mntns.get_or_init(|| Arc::new(inuse::namespaces::mount_scan(self))).clone()
    }

    /// The /proc scan of this command: taken on first use, then the same for every device.
    pub(crate) fn procs(&self) -> Arc<inuse::procs::ProcScan> {
        self.procs
            .get_or_init(|| {
                Arc::new(if self.walk { inuse::procs::scan(self) } else { inuse::procs::ProcScan::not_walked() })
            })
            .clone()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Join an absolute host path (`/sys/...`) onto the root.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let p = abs.as_ref();
        self.root.join(p.strip_prefix("/").unwrap_or(p))
    }

    /// Open a device node (`/dev/vfio/7`, `/dev/mem`, `/dev/udmabuf0`) at `path`, a path under
    /// this root (`self.path(...)`). On the real host it is opened as named. A fixture root holds
    /// plain files standing in for device nodes and is never mixed with real ones: the path must
    /// resolve inside the root (no link out of it), its last component must not be a link, and a
    /// real character or block device there is refused. Otherwise a fixture's forged /proc/iomem
    /// or phys_addr would choose the addresses a real device DMAs to.
    ///
    /// A FIFO or socket standing where a node should be is refused before it is opened (opening a
    /// FIFO waits for its other end); on the real host the node must be a character device.
    pub fn open_node(&self, path: &Path, opts: &std::fs::OpenOptions) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let refuse = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
        if self.is_real() {
            let kind = std::fs::metadata(path)?.file_type();
            if !kind.is_char_device() {
                return Err(refuse(format!(
                    "it is {}, not the character device it should be",
                    crate::file::kind_words(kind)
                )));
            }
            return opts.open(path);
        }
        let root = std::fs::canonicalize(&self.root)?;
        let resolved = std::fs::canonicalize(path)?;
        if !resolved.starts_with(&root) {
            return Err(refuse(format!(
                "it leads out of the fixture root {} (to {}): a fixture root is never mixed with real device nodes",
                root.display(),
                resolved.display()
            )));
        }
        let kind = std::fs::symlink_metadata(path)?.file_type();
        if kind.is_fifo() || kind.is_socket() {
            return Err(crate::file::read::not_regular(kind));
        }
        let file = opts.clone().custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32).open(path)?;
        let kind = file.metadata()?.file_type();
        if kind.is_char_device() || kind.is_block_device() {
            return Err(refuse(format!(
                "it is a real device node inside the fixture root {}: fixture roots hold plain files standing in for device nodes",
                root.display()
            )));
        }
        Ok(file)
    }

    pub fn pci_devices_dir(&self) -> PathBuf {
        self.path("/sys/bus/pci/devices")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};

    fn rw() -> OpenOptions {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        o
    }

    /// A fixture root opens its own stand-in files and nothing that leads to a real node.
    #[test]
    fn a_fixture_root_never_opens_a_real_device_node() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        fs::create_dir_all(host.path("/dev/vfio")).unwrap();
        fs::write(host.path("/dev/vfio/3"), "").unwrap();
        host.open_node(&host.path("/dev/vfio/3"), &rw()).unwrap();
        // The real group node (here /dev/null, any character device) linked in is refused...
        std::os::unix::fs::symlink("/dev/null", host.path("/dev/vfio/7")).unwrap();
        let e = host.open_node(&host.path("/dev/vfio/7"), &rw()).unwrap_err().to_string();
        assert!(e.contains("leads out of the fixture root") && e.contains("/dev/null"), "{e}");
        // ... and so is a directory of the fixture linked out to the real /dev.
        std::os::unix::fs::symlink("/dev", host.path("/realdev")).unwrap();
        assert!(host.open_node(&host.path("/realdev/null"), &rw()).is_err());
        // A link inside the root is followed no further than the root.
        std::os::unix::fs::symlink(host.path("/dev/vfio/3"), host.path("/dev/vfio/4")).unwrap();
        let e = host.open_node(&host.path("/dev/vfio/4"), &rw()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(rustix::io::Errno::LOOP.raw_os_error()), "last component a link: {e}");
        // A real character device made inside the root (root only: mknod) is refused too.
        let null = rustix::fs::makedev(1, 3);
        let dev = host.path("/dev/mem");
        if rustix::fs::mknodat(rustix::fs::CWD, &dev, rustix::fs::FileType::CharacterDevice, 0o600.into(), null).is_ok()
        {
            let e = host.open_node(&dev, &rw()).unwrap_err().to_string();
            assert!(e.contains("is a real device node inside the fixture root"), "{e}");
        }
    }

    #[test]
    fn the_real_host_opens_nodes_as_named() {
        let host = Host::with_root("/");
        host.open_node(Path::new("/dev/null"), &rw()).unwrap();
    }
}
