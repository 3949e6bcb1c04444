//! Whose files pcibench creates. Under sudo (euid 0 with `$SUDO_UID`/`$SUDO_GID`), the outputs a
//! user names (`--save`, `--trace`, `-o`, `--state`, `man DIR`) are created with the invoking
//! user's filesystem identity: fsuid and fsgid set to theirs and the supplementary groups to their
//! gid alone, on this thread, around the create and the rename (`AsInvoker`). The kernel then
//! checks every directory on the way as it would for them (an fsuid other than 0 also clears the
//! filesystem capabilities from the effective set: security/commoncap.c, cap_task_fix_setuid), so
//! a restricted sudo rule never becomes a way to write where its user could not, and what is
//! created belongs to them. Only this thread changes: setfsuid(2) and the raw setgroups(2) act on
//! the calling thread (glibc's setgroups would change every thread).

use crate::{Error, Result};

/// The invoking user's uid and gid under sudo: euid 0 and numeric `$SUDO_UID` (not 0) and
/// `$SUDO_GID`; None otherwise (a plain user, root itself, a capability copy).
pub fn invoker() -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let uid = std::env::var("SUDO_UID").ok()?.trim().parse::<u32>().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.trim().parse::<u32>().ok()?;
    (uid != 0).then_some((uid, gid))
}

/// The uid an output file is created with: the invoker's under sudo, else the effective uid.
pub fn writer_uid() -> u32 {
    invoker().map_or_else(|| rustix::process::geteuid().as_raw(), |(u, _)| u)
}

/// This thread creating files as the invoking user until dropped (see the module docs); nothing
/// changes when there is no invoker.
pub struct AsInvoker {
    saved: Option<(u32, u32, Vec<libc::gid_t>)>,
}

impl AsInvoker {
    pub fn begin() -> Result<AsInvoker> {
        let Some((uid, gid)) = invoker() else { return Ok(AsInvoker { saved: None }) };
        let failed = |what: &str| {
            Error::Refused(format!(
                "cannot take the invoking user's identity (uid {uid}, gid {gid}) to write as them: {what} failed ({}); nothing was written",
                std::io::Error::last_os_error()
            ))
        };
        // SAFETY: getgroups/setgroups/setfsuid/setfsgid with a buffer of the size asked for; the
        // raw setgroups syscall changes only this thread's credentials (kernel/groups.c).
        unsafe {
            let n = libc::getgroups(0, std::ptr::null_mut());
            if n < 0 {
                return Err(failed("getgroups"));
            }
            let mut groups = vec![0 as libc::gid_t; n as usize];
            if libc::getgroups(n, groups.as_mut_ptr()) != n {
                return Err(failed("getgroups"));
            }
            let one = [gid as libc::gid_t];
            if libc::syscall(libc::SYS_setgroups, 1usize, one.as_ptr()) != 0 {
                return Err(failed("setgroups"));
            }
            let old_gid = libc::setfsgid(gid) as u32;
            let old_uid = libc::setfsuid(uid) as u32;
            let guard = AsInvoker { saved: Some((old_uid, old_gid, groups)) };
            // setfsuid reports no error: an invalid id (-1) changes nothing and returns the current one.
            if libc::setfsuid(u32::MAX) as u32 != uid || libc::setfsgid(u32::MAX) as u32 != gid {
                return Err(failed("setfsuid"));
            }
            Ok(guard)
        }
    }
}

impl Drop for AsInvoker {
    fn drop(&mut self) {
        if let Some((uid, gid, groups)) = self.saved.take() {
            // SAFETY: restoring this thread's own earlier credentials.
            unsafe {
                libc::setfsuid(uid);
                libc::setfsgid(gid);
                libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
            }
        }
    }
}
