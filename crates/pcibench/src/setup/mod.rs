//! `pcibench setup`: make a device reachable, and undo it.
//!
//! - `vfio`: load vfio-pci (and no-IOMMU mode where there is no IOMMU), remember the original
//!   driver, unbind it, bind vfio-pci through driver_override + drivers_probe, wait for the
//!   group node and give it to the user named with `--user` (nobody else, and never by default:
//!   a no-IOMMU group is root-equivalent).
//! - `sysfs_user`: give a user the resourceN files and enable Memory Space, on a device with no
//!   driver and Bus Master off.
//! - `release`: every owner and mode back as recorded, the original driver back, and a word on
//!   what stays (no-IOMMU mode, modules) with the command that undoes it.
//!
//! Each returns the changes it made and is idempotent: run twice, the second run returns no
//! changes (notes aside). A pcibench with more privilege than its caller refuses to set up
//! anything; under a fixture root no host command runs and no file outside the root changes. Taking a device the running system uses (`host::inuse`: a mounted filesystem, active
//! swap, an interface that is up, the console ...) is refused, naming each holder, before anything
//! changes, and so is a device processes that could not be checked (another user's) may hold open;
//! `SetupOptions::force` overrides it and says exactly what it overrode before acting.
//! Kernel writes and commands go through `System`, so tests run every step on a fixture tree with
//! a fake kernel.

mod by_id;
#[cfg(test)]
pub(crate) mod fake;
pub mod record;
mod sysfs;
mod system;
mod vfio;

pub use by_id::{release_by_id, vfio_by_id, Each};
pub use sysfs::sysfs_user;
pub use system::{RealSystem, System};
pub use vfio::{release, vfio};

use crate::host::Host;
use crate::pci::PciAddress;
use crate::{Error, Result};
use serde::Serialize;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One thing setup changed on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub what: String,
    /// Set for changes with consequences the user must hear about (no-IOMMU mode).
    pub warning: Option<String>,
    /// Not a change but what the user must know about the state setup leaves (a no-IOMMU group,
    /// a node nobody was given, what `--release` leaves behind); a run of notes alone changed nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub note: bool,
}

impl Change {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        Change { what: what.into(), warning: None, note: false }
    }

    pub(crate) fn warn(what: impl Into<String>, warning: impl Into<String>) -> Self {
        Change { what: what.into(), warning: Some(warning.into()), note: false }
    }

    pub(crate) fn note(what: impl Into<String>, warning: Option<String>) -> Self {
        Change { what: what.into(), warning, note: true }
    }
}

/// The loud warning that goes with enabling no-IOMMU mode.
pub const NOIOMMU_WARNING: &str = "no-IOMMU mode taints the kernel and removes DMA protection: the card can read \
     and write all of host memory, and a wrong DMA address corrupts the running system";

/// A user to give access to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl User {
    /// `NAME` (looked up in the host's /etc/passwd), `UID` or `UID:GID`.
    pub fn resolve(host: &Host, spec: &str) -> Result<User> {
        let spec = spec.trim();
        let passwd =
            crate::file::read_string(&host.path("/etc/passwd"), crate::host::state::PASSWD_MAX).unwrap_or_default();
        if let Some((name, uid, gid)) = crate::host::state::passwd_lookup(&passwd, |n, _, _| n == spec) {
            return Ok(User { name, uid, gid });
        }
        let (u, g) = spec.split_once(':').unwrap_or((spec, ""));
        let uid: u32 = u.parse().map_err(|_| {
            Error::usage(format!("unknown user '{spec}': give a name from /etc/passwd, a uid, or uid:gid"))
        })?;
        let gid = if g.is_empty() {
            crate::host::state::passwd_lookup(&passwd, |_, id, _| id == uid).map(|e| e.2).unwrap_or(uid)
        } else {
            g.parse().map_err(|_| Error::usage(format!("invalid group in '{spec}': use uid:gid")))?
        };
        let name =
            crate::host::state::passwd_lookup(&passwd, |_, id, _| id == uid).map(|e| e.0).unwrap_or(u.to_string());
        Ok(User { name, uid, gid })
    }
}

/// Where `setup` says, as it decides it, what `--force` overrides.
pub type Notify = Arc<dyn Fn(&str) + Send + Sync>;

pub struct SetupOptions {
    /// Take the device even when the running system uses it (a mounted filesystem, swap, an
    /// interface that is up: see `host::inuse`), and release a VFIO device a process holds.
    pub force: bool,
    /// Told, before anything changes, each thing `force` overrides (the CLI prints it on stderr).
    pub notify: Option<Notify>,
    /// Who gets read+write on the VFIO group node (`--user`; `None`: leave it root's). Never
    /// taken from the environment (SUDO_USER): a grant is named by whoever makes it.
    pub user: Option<User>,
    /// How long to wait for the kernel to bind a driver or create a node.
    pub timeout: Duration,
    pub system: Arc<dyn System>,
}

impl Default for SetupOptions {
    fn default() -> Self {
        SetupOptions {
            force: false,
            notify: None,
            user: None,
            timeout: Duration::from_secs(5),
            system: Arc::new(RealSystem),
        }
    }
}

impl std::fmt::Debug for SetupOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupOptions")
            .field("force", &self.force)
            .field("user", &self.user)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SetupOptions {
    /// Defaults: force off, no user given anything.
    pub fn from_env() -> Self {
        SetupOptions::default()
    }

    /// Poll `cond` until it holds or the timeout passes; true when it held.
    pub(crate) fn wait_for(&self, mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + self.timeout;
        loop {
            if cond() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.system.sleep(Duration::from_millis(50));
        }
    }
}

/// What `--force` costs, said with each holder it overrides.
pub const FORCE_WARNING: &str = "the running system loses what it used the device for: expect I/O errors on its \
     filesystems and swap, a lost network link or console";

/// Refuse to `action` (e.g. "unbind 0000:01:00.0 from nvme") while the running system uses the
/// device, naming each holder and what frees it; with `force`, record and announce (before
/// anything changes) each holder it overrides. An inventory that cannot be taken (an inconsistent
/// sysfs), or processes that could not be checked for open files of it, refuse too, and `force`
/// overrides that as well, saying so.
pub(crate) fn guard(host: &Host, addr: &PciAddress, action: &str, opts: &SetupOptions) -> Result<Vec<Change>> {
    let a = addr.to_string();
    let overridden: Vec<String> = match crate::host::inuse::inventory(host, &a) {
        Ok(inv) if inv.is_empty() && inv.unchecked.is_empty() => return Ok(Vec::new()),
        // No holder seen, but what could not be checked (a process, a namespace, a storage target's
        // configuration) may hold it: not a pass.
        Ok(inv) if inv.is_empty() && !opts.force => {
            return Err(Error::Refused(format!(
                "refusing to {action}: cannot tell whether the running system uses it: {}; --force takes it \
                 without knowing",
                inv.unchecked.words()
            )))
        }
        Ok(inv) if inv.is_empty() => {
            vec![format!(
                "--force: went ahead without knowing whether the running system uses it ({})",
                inv.unchecked.words()
            )]
        }
        Ok(inv) if !opts.force => {
            let steps = inv.free_steps();
            let what_to_do = if !inv.can_be_freed() {
                "choose another device".to_string()
            } else {
                format!("free it first ({}) or choose another device", steps.join("; "))
            };
            return Err(Error::Refused(format!(
                "refusing to {action}: the running system uses it: {}; {what_to_do}; --force takes it anyway",
                inv.summary()
            )));
        }
        Ok(inv) => {
            let mut v: Vec<String> =
                inv.reasons().iter().map(|r| format!("--force: went ahead although {r}")).collect();
            if !inv.unchecked.is_empty() {
                v.push(format!("--force: went ahead without checking the rest ({})", inv.unchecked.words()));
            }
            v
        }
        Err(e) if !opts.force => {
            return Err(Error::Refused(format!(
                "refusing to {action}: cannot tell what the running system uses it for: {e}; --force takes it \
                 without knowing"
            )))
        }
        Err(e) => vec![format!("--force: went ahead without knowing what uses it ({e})")],
    };
    let mut ch = Vec::new();
    for what in overridden {
        if let Some(n) = &opts.notify {
            n(&format!("{a}: {what}"));
        }
        ch.push(Change::warn(what, FORCE_WARNING));
    }
    Ok(ch)
}

/// Where `setup` remembers what `--release` restores: /run/pcibench/ADDR (see `record`).
pub fn record_path(host: &Host, addr: &PciAddress) -> PathBuf {
    record::path(host, addr)
}

/// Refuse to change the host from a pcibench with more privilege than its caller (a setuid or
/// file-capability copy): binding drivers and handing out device nodes is root's decision.
pub(crate) fn refuse_elevated() -> Result<()> {
    let p = crate::os::privilege::at_start();
    if !p.elevated() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "refusing setup: pcibench runs with more privilege than its caller ({}); setup changes the host for every \
         user: run it as root (sudo pcibench setup ...)",
        p.why()
    )))
}

/// Before setup changes the owner or mode of `path`: under a fixture root, the file must lie
/// inside the root (no link leading out), so a fixture can never hand a real file to a user.
pub(crate) fn contained(host: &Host, path: &std::path::Path) -> Result<()> {
    if host.is_real() {
        return Ok(());
    }
    let root = fs::canonicalize(host.root()).map_err(|e| Error::io("cannot resolve", host.root(), e))?;
    let resolved = fs::canonicalize(path).map_err(|e| Error::io("cannot resolve", path, e))?;
    if resolved.starts_with(&root) {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "refusing to change {}: it leads out of the fixture root {} (to {}); a fixture root never changes files \
         outside itself",
        path.display(),
        root.display(),
        resolved.display()
    )))
}

/// Change `path`'s owner (and add read+write for it), remembering the original in `rec` first.
/// `shown` is the path as on the host (`/dev/vfio/7`), for the record.
/// The record is saved before anything changes, so `--release` can undo a run cut short.
pub(crate) fn give(
    host: &Host,
    addr: &PciAddress,
    opts: &SetupOptions,
    rec: &mut record::Record,
    path: &std::path::Path,
    shown: &str,
    user: &User,
) -> Result<(bool, bool)> {
    contained(host, path)?;
    let before = opts.system.owner(path).map_err(|e| Error::io("cannot read the owner of", path, e))?;
    let (uid, gid, mode) = before;
    let chown = uid != user.uid || gid != user.gid;
    let chmod = mode & 0o600 != 0o600;
    if chown || chmod {
        rec.keep_owner(shown, before);
        record::save(host, addr, rec)?;
    }
    if chown {
        opts.system
            .chown(path, user.uid, user.gid)
            .map_err(|e| Error::io_hint("cannot chown", path, e, "run it as root: sudo pcibench setup ..."))?;
    }
    if chmod {
        opts.system.chmod(path, mode | 0o600).map_err(|e| Error::io("cannot chmod", path, e))?;
    }
    Ok((chown, chmod))
}

/// Put back every owner and mode in `rec` whose file still exists (`only`: those whose path
/// passes the filter), saying each.
pub(crate) fn restore_owners(
    host: &Host,
    opts: &SetupOptions,
    rec: &mut record::Record,
    only: impl Fn(&str) -> bool,
    ch: &mut Vec<Change>,
) -> Result<()> {
    let mut kept = Vec::new();
    for o in std::mem::take(&mut rec.owners) {
        if !only(&o.path) {
            kept.push(o);
            continue;
        }
        let p = host.path(&o.path);
        if fs::symlink_metadata(&p).is_err() {
            continue; // gone with the binding (a group node): nothing to give back
        }
        contained(host, &p)?;
        let (uid, gid, mode) = opts.system.owner(&p).map_err(|e| Error::io("cannot read the owner of", &p, e))?;
        if (uid, gid) != (o.uid, o.gid) {
            opts.system.chown(&p, o.uid, o.gid).map_err(|e| Error::io("cannot chown", &p, e))?;
        }
        if mode != o.mode {
            opts.system.chmod(&p, o.mode).map_err(|e| Error::io("cannot chmod", &p, e))?;
        }
        if (uid, gid, mode) != (o.uid, o.gid, o.mode) {
            ch.push(Change::new(format!("gave {} back to {}:{} (mode {:04o})", o.path, o.uid, o.gid, o.mode)));
        }
    }
    rec.owners = kept;
    Ok(())
}

/// A sysfs attribute write, with an error that names the file and the likely cause.
pub(crate) fn write_attr(opts: &SetupOptions, path: &std::path::Path, data: &str) -> Result<()> {
    opts.system.write(path, data).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::PermissionDenied => "run it as root: sudo pcibench setup ...",
            _ => "see dmesg | tail for the kernel's reason",
        };
        Error::io_hint("cannot write", path, e, hint)
    })
}
