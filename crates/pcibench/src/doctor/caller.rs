//! Who is asking: the identity, capabilities and memory-lock limit of the process that runs the
//! checks. `Caller::current()` reads the real process; tests build a `Caller` by hand so every
//! permission finding can be exercised on a fixture tree whatever user runs the tests.

use serde::Serialize;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Capability bit numbers (include/uapi/linux/capability.h).
pub const CAP_DAC_OVERRIDE: u32 = 1;
pub const CAP_IPC_LOCK: u32 = 14;
pub const CAP_SYS_RAWIO: u32 = 17;

#[derive(Debug, Clone, Serialize)]
pub struct Caller {
    /// Effective user and group ids, and the supplementary groups.
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// The user's name (from /etc/passwd), or the uid as text when it has none.
    pub user: String,
    /// The effective capability set (`CapEff` in /proc/self/status).
    pub cap_eff: u64,
    /// Absolute path of the running executable (for the `setcap` line).
    pub exe: PathBuf,
    /// RLIMIT_MEMLOCK soft limit in bytes; `None` when unlimited.
    pub memlock: Option<u64>,
    /// True for the real process: findings may then also try to open files, not only read modes.
    pub live: bool,
}

impl Caller {
    /// The process running pcibench.
    pub fn current() -> Caller {
        let status = crate::file::read_string(std::path::Path::new("/proc/self/status"), crate::file::read::KERNEL_MAX)
            .unwrap_or_default();
        let cap_eff = parse_cap_eff(&status).unwrap_or(0);
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        // getgroups fails only when the list changes between its two calls: then none are shown.
        let groups = rustix::process::getgroups().map(|g| g.iter().map(|g| g.as_raw()).collect()).unwrap_or_default();
        let memlock = crate::os::memlock::limit();
        let user = user_name(uid).unwrap_or_else(|| uid.to_string());
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("pcibench"));
        Caller { uid, gid, groups, user, cap_eff, exe, memlock, live: true }
    }

    pub fn has_cap(&self, cap: u32) -> bool {
        self.cap_eff & (1u64 << cap) != 0
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether the file's mode lets this caller open it for reading and writing (the DAC rules
    /// of fs/namei.c: owner bits, else group bits, else other bits; CAP_DAC_OVERRIDE bypasses).
    pub fn can_read_write(&self, meta: &Metadata) -> bool {
        if self.has_cap(CAP_DAC_OVERRIDE) {
            return true;
        }
        let mode = meta.mode();
        let bits = if meta.uid() == self.uid {
            (mode >> 6) & 0o7
        } else if self.in_group(meta.gid()) {
            (mode >> 3) & 0o7
        } else {
            mode & 0o7
        };
        bits & 0o6 == 0o6
    }
}

/// `CapEff:\t000001ffffffffff` → the bit set.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// The name of `uid` in the real /etc/passwd.
fn user_name(uid: u32) -> Option<String> {
    let text = crate::file::read_string(std::path::Path::new("/etc/passwd"), crate::host::state::PASSWD_MAX).ok()?;
    crate::host::state::passwd_lookup(&text, |_, u, _| u == uid).map(|(name, _, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_parses() {
        let s = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000020000\n";
        let c = parse_cap_eff(s).unwrap();
        assert_eq!(c, 1 << CAP_SYS_RAWIO);
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    /// The ids match the kernel's view in /proc/self/status ("Uid:\treal\teffective\tsaved\tfs").
    #[test]
    fn current_identity_is_the_processs() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let field = |name: &str| -> Vec<u32> {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            line[name.len()..].split_whitespace().map(|v| v.parse().unwrap()).collect()
        };
        let c = Caller::current();
        assert_eq!((c.uid, c.gid), (field("Uid:")[1], field("Gid:")[1]));
        let (mut groups, mut want) = (c.groups.clone(), field("Groups:"));
        groups.sort();
        want.sort();
        assert_eq!(groups, want);
        assert_eq!(c.memlock, crate::os::memlock::limit());
    }

    #[test]
    fn passwd_entries() {
        use crate::host::state::passwd_lookup;
        let t = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\nbad line\n";
        assert_eq!(passwd_lookup(t, |_, u, _| u == 1000), Some(("user".into(), 1000, 1000)));
        assert_eq!(passwd_lookup(t, |n, _, _| n == "root"), Some(("root".into(), 0, 0)));
        assert_eq!(passwd_lookup(t, |n, _, _| n == "nobody"), None);
    }
}
