//! Running with more privilege than the caller (a `setcap cap_sys_rawio=ep` copy, a setuid
//! binary): detect it, refuse whatever the caller could use to steer the privileged process, and
//! give the capabilities up as soon as what needed them is open.
//!
//! The kernel marks such an exec with AT_SECURE in the auxiliary vector (fs/exec.c,
//! `bprm->secureexec`: set for setuid/setgid, for file capabilities gained, and by LSMs), which
//! glibc already honours by ignoring LD_* and friends. pcibench's own inputs (`PCIBENCH_SYSROOT`,
//! `--sysroot`) decide which files it trusts for DMA addresses and device nodes, so in that state
//! they are refused in one line. Capabilities are per thread (kernel/capability.c, capset acts on
//! the calling thread): they are dropped on the main thread before any worker thread starts.

use crate::{Error, Result};
use rustix::thread::{CapabilitySet, CapabilitySets};
use std::sync::{Mutex, OnceLock};

/// The process's standing, as it was when pcibench started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    /// AT_SECURE from the auxiliary vector.
    pub secure: bool,
    pub ruid: u32,
    pub euid: u32,
    pub rgid: u32,
    pub egid: u32,
    /// Effective and permitted capability sets (bit n = capability n).
    pub effective: u64,
    pub permitted: u64,
}

impl Privilege {
    /// The running process, read now.
    pub fn current() -> Privilege {
        use rustix::process::{getegid, geteuid, getgid, getuid};
        // SAFETY: getauxval only reads the auxiliary vector the kernel placed at exec; AT_SECURE
        // is a defined key (absent reads as 0).
        let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
        let caps = rustix::thread::capabilities(None).ok();
        Privilege {
            secure,
            ruid: getuid().as_raw(),
            euid: geteuid().as_raw(),
            rgid: getgid().as_raw(),
            egid: getegid().as_raw(),
            effective: caps.map_or(0, |c| c.effective.bits()),
            permitted: caps.map_or(0, |c| c.permitted.bits()),
        }
    }

    /// More privilege than the caller: AT_SECURE, a set-id exec, or capabilities while not root.
    /// Root itself (sudo) is not elevated: it already has everything the caller could ask for.
    pub fn elevated(&self) -> bool {
        self.secure
            || self.ruid != self.euid
            || self.rgid != self.egid
            || (self.euid != 0 && (self.effective | self.permitted) != 0)
    }

    /// Why, in words: "AT_SECURE is set; capabilities CapEff 0000000000020000 (cap_sys_rawio) for uid 1000".
    pub fn why(&self) -> String {
        let mut parts = Vec::new();
        if self.secure {
            parts.push("AT_SECURE is set".to_string());
        }
        if self.ruid != self.euid {
            parts.push(format!("effective uid {} is not the caller's {}", self.euid, self.ruid));
        }
        if self.rgid != self.egid {
            parts.push(format!("effective gid {} is not the caller's {}", self.egid, self.rgid));
        }
        if self.euid != 0 && (self.effective | self.permitted) != 0 {
            parts.push(format!(
                "capabilities CapEff {:016x} ({}) for uid {}",
                self.effective,
                cap_names(self.effective | self.permitted),
                self.euid
            ));
        }
        parts.join("; ")
    }
}

/// The standing pcibench started with, read once (later drops do not make it look unprivileged).
pub fn at_start() -> &'static Privilege {
    static START: OnceLock<Privilege> = OnceLock::new();
    START.get_or_init(Privilege::current)
}

/// True when pcibench runs with more privilege than its caller (see `Privilege::elevated`).
pub fn elevated() -> bool {
    at_start().elevated()
}

/// The environment variables that steer pcibench: where it reads /sys, /proc and /dev from.
/// Any `PCIBENCH_*` counts, so a later one cannot slip past this check.
pub fn steering_vars(vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Vec<String> {
    let mut names: Vec<String> =
        vars.map(|(k, _)| k.to_string_lossy().into_owned()).filter(|k| k.starts_with("PCIBENCH_")).collect();
    names.sort();
    names
}

/// Refuse, when elevated, every input that would point pcibench at files the caller chose:
/// `--sysroot` (`sysroot_flag`) and the `PCIBENCH_*` variables in `vars`. One line naming each.
pub fn refuse_steering(
    p: &Privilege,
    sysroot_flag: bool,
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<()> {
    if !p.elevated() {
        return Ok(());
    }
    let mut given: Vec<String> = steering_vars(vars).into_iter().map(|v| format!("${v}")).collect();
    if sysroot_flag {
        given.insert(0, "--sysroot".to_string());
    }
    if given.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "refusing {}: pcibench runs with more privilege than its caller ({}), so it takes no paths from the caller \
         (a fixture root would choose the DMA addresses and device nodes); fixture roots are for tests: unset it, or \
         run a copy without privilege (cp {} /tmp/pcibench-test drops the file capability)",
        given.join(" and "),
        p.why(),
        std::env::current_exe().map(|e| e.display().to_string()).unwrap_or_else(|_| "pcibench".into()),
    )))
}

/// Refuse a fixture root (`given`: "--sysroot" or "$PCIBENCH_SYSROOT", naming `root`) to root
/// when it came through sudo (`sudo_uid` is `$SUDO_UID`), or when anything in the tree belongs to
/// someone else: a restricted sudo rule (`pcibench doctor *`) must not let its user hand root a
/// tree of their own, whose links would lead root's reads and writes anywhere. Not root: the
/// caller's own tree is the caller's business (an elevated caller is refused by `refuse_steering`).
pub fn refuse_sysroot_for_root(
    p: &Privilege,
    given: &str,
    root: &std::path::Path,
    sudo_uid: Option<&std::ffi::OsStr>,
) -> Result<()> {
    if p.euid != 0 || root == std::path::Path::new("/") || root.as_os_str().is_empty() {
        return Ok(());
    }
    let shown = crate::text::one_line(&root.display().to_string());
    if let Some(uid) = sudo_uid.filter(|u| !u.is_empty()) {
        return Err(Error::Refused(format!(
            "refusing {given} {shown}: pcibench runs as root through sudo (SUDO_UID={}), and a fixture root would let \
             the caller choose what root reads and writes; fixture roots are for tests: run without sudo",
            crate::text::one_line(&uid.to_string_lossy())
        )));
    }
    if let Some(why) = ancestors_not_roots(root).or_else(|| not_roots(root)) {
        return Err(Error::Refused(format!(
            "refusing {given} {shown}: {why}; root takes a fixture root only when root owns all of it and the \
             directories above it (another user's tree could link anywhere, or be swapped for another after this \
             check): chown -R root:root it under a directory only root may change, or run as that user"
        )));
    }
    Ok(())
}

/// Whether a directory's entries can be renamed, removed or added by anyone but root: it is not
/// root's, or group (other than root's group) or others may write it. `sticky_ok`: the sticky bit
/// (like /tmp) stops others from renaming or removing what is not theirs (fs/namei.c,
/// may_delete / check_sticky), enough for a directory on the way to an existing entry of root's.
fn others_may_change(m: &std::fs::Metadata, sticky_ok: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if m.uid() != 0 {
        return Some(format!("belongs to uid {}", m.uid()));
    }
    let mode = m.mode();
    let writable = mode & 0o002 != 0 || (mode & 0o020 != 0 && m.gid() != 0);
    if writable && !(sticky_ok && mode & 0o1000 != 0) {
        return Some(format!("is writable by others (mode {:04o})", mode & 0o7777));
    }
    None
}

/// The first directory on the way to `root` (from `/`, as named, not following links) that
/// someone other than root could change: the tree could be moved away after it was checked and
/// another put in its place, so a tree of root's is only as safe as the directories above it
/// (issue 51, M2). A link on the way is refused too: its target is not what was checked. Where
/// the tree is missing, its nearest directory must not be writable by others even if sticky
/// (anyone could create the tree there).
fn ancestors_not_roots(root: &std::path::Path) -> Option<String> {
    use std::path::{Component, PathBuf};
    let shown = |p: &std::path::Path| crate::text::one_line(&p.display().to_string());
    let abs = match root.is_absolute() {
        true => root.to_path_buf(),
        false => match std::env::current_dir() {
            Ok(d) => d.join(root),
            Err(e) => return Some(format!("cannot tell where {} is ({e})", shown(root))),
        },
    };
    let mut at = PathBuf::from("/");
    let mut parts = abs.components().filter(|c| !matches!(c, Component::RootDir | Component::CurDir)).peekable();
    loop {
        let m = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) => return Some(format!("cannot look at {} ({e})", shown(&at))),
        };
        if m.file_type().is_symlink() {
            return Some(format!(
                "{} on the way to it is a symbolic link: name the fixture root by its real path{}",
                shown(&at),
                std::fs::canonicalize(&abs).map(|r| format!(" ({})", shown(&r))).unwrap_or_default()
            ));
        }
        // Past the last component: nothing on the way found wanting.
        let next = parts.next()?;
        let name = match next {
            Component::Normal(n) => n,
            _ => return Some(format!("{} has a `..` in it: name the fixture root by its real path", shown(root))),
        };
        let child = at.join(name);
        let missing = matches!(std::fs::symlink_metadata(&child), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        if let Some(why) = others_may_change(&m, !missing) {
            return Some(format!("{} on the way to it {why}", shown(&at)));
        }
        if missing {
            return None;
        }
        if parts.peek().is_none() {
            // The tree itself: `not_roots` checks it and everything in it, but not where a link
            // in its place would lead.
            if std::fs::symlink_metadata(&child).is_ok_and(|c| c.file_type().is_symlink()) {
                return Some(format!(
                    "it is a symbolic link: name the fixture root by its real path{}",
                    std::fs::canonicalize(&abs).map(|r| format!(" ({})", shown(&r))).unwrap_or_default()
                ));
            }
            return None;
        }
        at = child;
    }
}

/// The first thing under `root` (not following links) that is not root's, or a directory in it
/// others may write, in words; a tree too large to check whole counts as not root's.
fn not_roots(root: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    const MOST: usize = 200_000;
    let mut todo = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(p) = todo.pop() {
        seen += 1;
        if seen > MOST {
            return Some(format!("it holds more than {MOST} entries, too many to check that root owns them all"));
        }
        let m = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            // No tree at all: nothing in it to follow (the simulated cards read nothing there).
            Err(e) if p == root && e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some(format!("cannot look at {} ({e})", crate::text::one_line(&p.display().to_string()))),
        };
        if m.uid() != 0 {
            return Some(format!("{} belongs to uid {}", crate::text::one_line(&p.display().to_string()), m.uid()));
        }
        if m.is_dir() {
            if let Some(why) = others_may_change(&m, false) {
                return Some(format!("{} {why}", crate::text::one_line(&p.display().to_string())));
            }
            match std::fs::read_dir(&p) {
                Ok(d) => todo.extend(d.flatten().map(|e| e.path())),
                Err(e) => {
                    return Some(format!("cannot list {} ({e})", crate::text::one_line(&p.display().to_string())))
                }
            }
        }
    }
    None
}

/// Capability bits pcibench may need after opening a device (include/uapi/linux/capability.h).
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_SYS_RAWIO: u32 = 17;
pub const CAP_IPC_LOCK: u32 = 14;

/// A set of capability bits, for `keep_only`.
pub fn caps(bits: &[u32]) -> u64 {
    bits.iter().fold(0, |s, b| s | (1u64 << b))
}

/// Names of the capabilities in `set`, as setcap spells them ("cap_sys_rawio,cap_ipc_lock").
pub fn cap_names(set: u64) -> String {
    const NAMES: &[(u32, &str)] = &[
        (0, "cap_chown"),
        (1, "cap_dac_override"),
        (2, "cap_dac_read_search"),
        (3, "cap_fowner"),
        (6, "cap_setgid"),
        (7, "cap_setuid"),
        (12, "cap_net_admin"),
        (14, "cap_ipc_lock"),
        (16, "cap_sys_module"),
        (17, "cap_sys_rawio"),
        (21, "cap_sys_admin"),
        (24, "cap_sys_resource"),
    ];
    let mut out: Vec<String> = Vec::new();
    for bit in 0..64u32 {
        if set & (1u64 << bit) != 0 {
            out.push(NAMES.iter().find(|n| n.0 == bit).map_or_else(|| format!("cap_{bit}"), |n| n.1.to_string()));
        }
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

fn events() -> &'static Mutex<Vec<String>> {
    static EVENTS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    EVENTS.get_or_init(|| Mutex::new(Vec::new()))
}

/// What `keep_only` did, in order, for `--debug`: each drop with the process's capability
/// lines from /proc/self/status read right after it.
pub fn drops() -> Vec<String> {
    events().lock().map(|e| e.clone()).unwrap_or_default()
}

/// When elevated, give up every capability but `keep` (effective, permitted and inheritable
/// sets, and the ambient set), and set no_new_privs so no later exec can regain any. `after`
/// says what was opened that needed them ("opening VFIO group 7"). Does nothing when pcibench
/// was not elevated (root keeps root), or when nothing beyond `keep` is left. A `capset` the
/// kernel refuses, or a capability beyond `keep` still held afterwards, is an error: the run
/// must not go on holding what it meant to give up.
pub fn keep_only(keep: u64, after: &str) -> Result<()> {
    if !elevated() {
        return Ok(());
    }
    let now = rustix::thread::capabilities(None)
        .map_err(|e| Error::Refused(format!("cannot read this thread's capabilities after {after} ({e}): stopping")))?;
    let held = now.effective.bits() | now.permitted.bits() | now.inheritable.bits();
    let nnp = rustix::thread::no_new_privs().unwrap_or(false);
    if held & !keep == 0 && nnp {
        return Ok(());
    }
    let failed = |what: &str, e: rustix::io::Errno| {
        Error::Refused(format!(
            "cannot give up {} after {after}: {what} failed ({e}): stopping rather than run with them",
            cap_names(held & !keep)
        ))
    };
    rustix::thread::set_no_new_privs(true).map_err(|e| failed("prctl(PR_SET_NO_NEW_PRIVS)", e))?;
    rustix::thread::clear_ambient_capability_set().map_err(|e| failed("clearing the ambient set", e))?;
    let keep_set = CapabilitySet::from_bits_retain(keep);
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: now.effective & keep_set,
            permitted: now.permitted & keep_set,
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| failed("capset", e))?;
    // Trust what the kernel holds now, not what was asked of it.
    let after_drop = rustix::thread::capabilities(None).map_err(|e| failed("reading the capabilities back", e))?;
    let left = (after_drop.effective.bits() | after_drop.permitted.bits() | after_drop.inheritable.bits()) & !keep;
    if left != 0 {
        return Err(Error::Refused(format!(
            "capabilities {} are still held after giving them up ({after}): stopping rather than run with them",
            cap_names(left)
        )));
    }
    let status = crate::file::read_string(std::path::Path::new("/proc/self/status"), crate::file::read::KERNEL_MAX)
        .unwrap_or_default();
    let lines: Vec<String> = status
        .lines()
        .filter(|l| ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:", "NoNewPrivs:"].iter().any(|k| l.starts_with(k)))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let threads = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(1);
    let lone = if threads > 1 { format!(" ({threads} threads: only this one dropped them)") } else { String::new() };
    if let Ok(mut e) = events().lock() {
        e.push(format!(
            "privilege: dropped {} after {after}, kept {}{lone}; /proc/self/status: {}",
            cap_names(held & !keep),
            cap_names(held & keep),
            lines.join(", ")
        ));
    }
    Ok(())
}

/// A set-id exec: the effective uid or gid is not the caller's, or AT_SECURE with no file
/// capability to explain it. pcibench refuses to run so: a setuid-root copy keeps euid 0 (and with
/// it every file it writes and every path it follows is root's), and no capability drop undoes
/// that; a file capability on a root-owned copy gives exactly what opening a device needs.
pub fn set_id(p: &Privilege) -> bool {
    p.ruid != p.euid || p.rgid != p.egid || (p.secure && (p.effective | p.permitted) == 0)
}

// The install line and this executable's path live in `host` (layer 1), which hints with them too.
pub use crate::host::install::{exe_path, install_line};

/// Refuse a set-id exec (`set_id`) in one line naming the safe install.
pub fn refuse_set_id(p: &Privilege) -> Result<()> {
    if !set_id(p) {
        return Ok(());
    }
    let mut why = Vec::new();
    if p.ruid != p.euid {
        why.push(format!("effective uid {} is not the caller's {}", p.euid, p.ruid));
    }
    if p.rgid != p.egid {
        why.push(format!("effective gid {} is not the caller's {}", p.egid, p.rgid));
    }
    if why.is_empty() {
        why.push("AT_SECURE is set with no file capability".to_string());
    }
    let exe = exe_path();
    Err(Error::Refused(format!(
        "refusing to run set-user-ID or set-group-ID ({}): a set-id pcibench gives its caller the owner's identity \
         for every file it writes; remove the bit (sudo chmod u-s,g-s {}) and give a root-owned copy the one \
         capability it needs: {}",
        why.join("; "),
        exe.display(),
        install_line(&exe)
    )))
}

/// When elevated, make the process untraceable and keep it from dumping core before anything is
/// opened: once the capabilities are dropped it has only the caller's uids, and the kernel lets
/// a same-uid caller PTRACE_ATTACH or pidfd_getfd(2) a dumpable process (kernel/ptrace.c,
/// __ptrace_may_access: a non-dumpable mm needs CAP_SYS_PTRACE), which would hand it the device
/// and DMA descriptors; a core would write the buffers out. Never set back.
pub fn lock_down(p: &Privilege) -> Result<()> {
    if !p.elevated() {
        return Ok(());
    }
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(|e| {
        Error::Refused(format!("cannot make pcibench undumpable (prctl PR_SET_DUMPABLE 0: {e}): stopping"))
    })?;
    let zero = rustix::process::Rlimit { current: Some(0), maximum: Some(0) };
    rustix::process::setrlimit(rustix::process::Resource::Core, zero)
        .map_err(|e| Error::Refused(format!("cannot turn core dumps off (setrlimit RLIMIT_CORE 0: {e}): stopping")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{OsStr, OsString};

    fn p(secure: bool, ruid: u32, euid: u32, eff: u64) -> Privilege {
        Privilege { secure, ruid, euid, rgid: 0, egid: 0, effective: eff, permitted: eff }
    }

    #[test]
    fn elevated_is_more_than_the_caller() {
        assert!(!p(false, 0, 0, u64::MAX).elevated(), "root via sudo is not elevated");
        assert!(!p(false, 1000, 1000, 0).elevated(), "a plain user");
        assert!(p(true, 1000, 1000, 0).elevated(), "AT_SECURE");
        assert!(p(false, 1000, 0, u64::MAX).elevated(), "setuid root");
        assert!(p(false, 1000, 1000, 1 << CAP_SYS_RAWIO).elevated(), "file capabilities");
        let why = p(true, 1000, 1000, 1 << CAP_SYS_RAWIO).why();
        assert!(
            why.contains("AT_SECURE") && why.contains("cap_sys_rawio") && why.contains("0000000000020000"),
            "{why}"
        );
    }

    #[test]
    fn steering_is_refused_only_when_elevated() {
        let vars = || {
            vec![
                (OsString::from("PATH"), OsString::from("/bin")),
                (OsString::from("PCIBENCH_SYSROOT"), OsString::from("/home/u/fake")),
            ]
            .into_iter()
        };
        let user = p(false, 1000, 1000, 0);
        refuse_steering(&user, true, vars()).unwrap();
        let capped = p(true, 1000, 1000, 1 << CAP_SYS_RAWIO);
        refuse_steering(&capped, false, std::iter::empty()).unwrap();
        let e = refuse_steering(&capped, true, vars()).unwrap_err().to_string();
        assert!(e.starts_with("refusing --sysroot and $PCIBENCH_SYSROOT: "), "{e}");
        assert!(e.contains("more privilege than its caller") && !e.contains('\n'), "{e}");
        let e = refuse_steering(&capped, false, vars()).unwrap_err().to_string();
        assert!(e.starts_with("refusing $PCIBENCH_SYSROOT: "), "{e}");
    }

    #[test]
    fn root_takes_a_fixture_root_only_without_sudo_and_only_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let root = p(false, 0, 0, u64::MAX);
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("sys/bus")).unwrap();
        std::fs::write(t.path().join("sys/bus/x"), "1").unwrap();
        let e =
            refuse_sysroot_for_root(&root, "--sysroot", t.path(), Some(OsStr::new("1000"))).unwrap_err().to_string();
        assert!(e.starts_with("refusing --sysroot ") && e.contains("through sudo (SUDO_UID=1000)"), "{e}");
        // Not root: nothing to refuse here (an elevated caller is refused by refuse_steering).
        refuse_sysroot_for_root(&p(false, 1000, 1000, 0), "--sysroot", t.path(), Some(OsStr::new("1000"))).unwrap();
        if !rustix::process::geteuid().is_root() {
            return; // chown needs root
        }
        refuse_sysroot_for_root(&root, "$PCIBENCH_SYSROOT", t.path(), None).unwrap();
        let x = t.path().join("sys/bus/x");
        std::os::unix::fs::chown(&x, Some(1000), None).unwrap();
        std::fs::set_permissions(&x, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = refuse_sysroot_for_root(&root, "$PCIBENCH_SYSROOT", t.path(), None).unwrap_err().to_string();
        assert!(e.contains("sys/bus/x belongs to uid 1000") && e.contains("root owns all of it"), "{e}");
    }

    /// M2 residue (issue 51): a tree of root's is only as safe as the directories above it. Under a
    /// user's directory, through a link, in a directory others may write, or missing where
    /// anyone could create it, it is refused; a directory in it that others may write too.
    #[test]
    fn root_takes_a_fixture_root_only_under_directories_only_root_may_change() {
        use std::os::unix::fs::{chown, symlink, PermissionsExt};
        if !rustix::process::geteuid().is_root() {
            return; // chown needs root
        }
        let root = p(false, 0, 0, u64::MAX);
        let refused = |tree: &std::path::Path| {
            refuse_sysroot_for_root(&root, "--sysroot", tree, None).err().map(|e| e.to_string()).unwrap_or_default()
        };
        let t = tempfile::tempdir().unwrap();
        let mode =
            |d: &std::path::Path, m: u32| std::fs::set_permissions(d, std::fs::Permissions::from_mode(m)).unwrap();
        let users = t.path().join("home");
        std::fs::create_dir_all(users.join("tree/sys")).unwrap();
        chown(&users, Some(1000), Some(1000)).unwrap();
        let e = refused(&users.join("tree"));
        assert!(e.contains("home on the way to it belongs to uid 1000") && e.contains("directories above it"), "{e}");
        // The same tree under a directory of root's is taken, by its path and not through a link.
        let srv = t.path().join("srv");
        std::fs::create_dir_all(srv.join("tree/sys")).unwrap();
        assert_eq!(refused(&srv.join("tree")), "");
        symlink(&srv, t.path().join("link")).unwrap();
        let e = refused(&t.path().join("link/tree"));
        assert!(e.contains("link on the way to it is a symbolic link") && e.contains("srv/tree)"), "{e}");
        symlink(srv.join("tree"), srv.join("alias")).unwrap();
        assert!(refused(&srv.join("alias")).contains("it is a symbolic link"));
        // Writable by others: above it (unless sticky, with the tree there), or in it.
        mode(&srv, 0o777);
        assert!(refused(&srv.join("tree")).contains("srv on the way to it is writable by others (mode 0777)"));
        mode(&srv, 0o1777);
        assert_eq!(refused(&srv.join("tree")), "");
        assert!(
            refused(&srv.join("none")).contains("is writable by others (mode 1777)"),
            "missing: anyone could make it"
        );
        mode(&srv, 0o755);
        assert_eq!(refused(&srv.join("none")), "", "missing under root's own directory: nothing there to follow");
        mode(&srv.join("tree/sys"), 0o777);
        assert!(refused(&srv.join("tree")).contains("tree/sys is writable by others (mode 0777)"));
    }

    #[test]
    fn names_capabilities_as_setcap_does() {
        assert_eq!(cap_names(caps(&[CAP_SYS_RAWIO, CAP_IPC_LOCK])), "cap_ipc_lock,cap_sys_rawio");
        assert_eq!(cap_names(0), "none");
        assert_eq!(cap_names(1 << 40), "cap_40");
    }

    #[test]
    fn set_id_is_refused_with_the_safe_install_line() {
        let mut setuid = p(false, 1000, 0, u64::MAX);
        assert!(set_id(&setuid));
        let e = refuse_set_id(&setuid).unwrap_err().to_string();
        assert!(
            e.starts_with("refusing to run set-user-ID or set-group-ID (effective uid 0 is not the caller's 1000)"),
            "{e}"
        );
        assert!(e.contains("sudo install -o root -g root -m 0755 ") && !e.contains('\n'), "{e}");
        assert!(e.ends_with("&& sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench"), "{e}");
        setuid.euid = 1000;
        setuid.egid = 5;
        assert!(refuse_set_id(&setuid).unwrap_err().to_string().contains("effective gid 5 is not the caller's 0"));
        // AT_SECURE with nothing to show for it (an LSM, a setuid-to-self): refused too.
        let e = refuse_set_id(&p(true, 1000, 1000, 0)).unwrap_err().to_string();
        assert!(e.contains("AT_SECURE is set with no file capability"), "{e}");
        // A file-capability copy and plain runs are not set-id.
        refuse_set_id(&p(true, 1000, 1000, 1 << CAP_SYS_RAWIO)).unwrap();
        refuse_set_id(&p(false, 0, 0, u64::MAX)).unwrap();
        refuse_set_id(&p(false, 1000, 1000, 0)).unwrap();
    }

    /// The test process is not elevated (root or a plain user): nothing is dropped or recorded.
    #[test]
    fn keep_only_leaves_an_unelevated_process_alone() {
        if elevated() {
            return; // run under a capability-carrying harness: covered by the CLI test instead
        }
        let before = rustix::thread::capabilities(None).unwrap();
        keep_only(0, "a test").unwrap();
        lock_down(at_start()).unwrap();
        assert_eq!(rustix::thread::capabilities(None).unwrap(), before);
        assert!(drops().is_empty());
    }
}
