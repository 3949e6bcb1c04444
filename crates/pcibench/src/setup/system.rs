//! The seam between `setup` and the kernel: attribute writes, config-space writes, ownership
//! and mode changes, and commands (modprobe). `RealSystem` does them; tests substitute a fake
//! kernel that also plays the kernel's part (a write to drivers_probe binds the device).

use crate::{Error, Result};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub trait System: Send + Sync {
    /// Write a kernel attribute (sysfs file, module parameter) in one write, as `echo > file` does.
    fn write(&self, path: &Path, data: &str) -> std::io::Result<()>;
    /// Write bytes at an offset of a file (the device's `config`).
    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// Run a command (modprobe); fails with its stderr when it exits non-zero.
    fn run(&self, program: &str, args: &[&str]) -> Result<()>;
    /// (uid, gid, permission bits) of a file.
    fn owner(&self, path: &Path) -> std::io::Result<(u32, u32, u32)>;
    fn chown(&self, path: &Path, uid: u32, gid: u32) -> std::io::Result<()>;
    fn chmod(&self, path: &Path, mode: u32) -> std::io::Result<()>;
    /// Pause while waiting for the kernel (a device to bind, a node to appear).
    fn sleep(&self, d: Duration);
    /// Whether `run` reaches the host's real commands (modprobe): then setup never runs one for
    /// a fixture root, whose module state is not the kernel's. A fake kernel says false.
    fn reaches_host(&self) -> bool {
        true
    }
}

/// The host's kernel and commands.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealSystem;

impl System for RealSystem {
    fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
        // No create: a missing attribute is an error, not a new file in /sys.
        let mut f = crate::file::open_regular_with(path, rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::TRUNC)?;
        f.write_all(data.as_bytes())
    }

    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()> {
        crate::file::open_regular_with(path, rustix::fs::OFlags::WRONLY)?.write_all_at(data, offset)
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let line = format!("{program} {}", args.join(" "));
        let out = host_command(program, args)?.output().map_err(|e| {
            Error::io_hint("cannot run", program, e, format!("`{line}` needs {program} (kmod) in /usr/sbin or /sbin"))
        })?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr).trim().replace('\n', " ");
        Err(Error::Unsupported(format!(
            "`{line}` failed ({}): {err}: is the module in your kernel's modules package?",
            out.status
        )))
    }

    fn owner(&self, path: &Path) -> std::io::Result<(u32, u32, u32)> {
        let st = rustix::fs::fstat(no_link(path)?)?;
        Ok((st.st_uid, st.st_gid, st.st_mode as u32 & 0o7777))
    }

    fn chown(&self, path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
        use rustix::process::{Gid, Uid};
        let fd = no_link(path)?;
        let (u, g) = (Uid::from_raw(uid), Gid::from_raw(gid));
        rustix::fs::chownat(&fd, "", Some(u), Some(g), rustix::fs::AtFlags::EMPTY_PATH)?;
        Ok(())
    }

    fn chmod(&self, path: &Path, mode: u32) -> std::io::Result<()> {
        let fd = no_link(path)?;
        // chmod has no AT_EMPTY_PATH before fchmodat2 (Linux 6.6): go through the fd's /proc link,
        // which names the very inode opened above, as glibc's fchmod does for O_PATH descriptors.
        use std::os::fd::AsRawFd;
        fs::set_permissions(format!("/proc/self/fd/{}", fd.as_raw_fd()), fs::Permissions::from_mode(mode))
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// `path` opened O_PATH|O_NOFOLLOW: ownership and mode change on the file itself, never through
/// a link planted in its place (a fixture's link to /etc/shadow, say).
fn no_link(path: &Path) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
    if rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) == rustix::fs::FileType::Symlink {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is a symbolic link: setup changes files, never links", path.display()),
        ));
    }
    Ok(fd)
}

/// Where setup's host commands live: fixed paths, never `PATH` (whoever runs sudo may set it).
const COMMANDS: &[(&str, &[&str])] = &[("modprobe", &["/usr/sbin/modprobe", "/sbin/modprobe"])];

/// `program args` as root runs it: the binary from its fixed place (`COMMANDS`), with an
/// environment cleared to a fixed `PATH` (modprobe reads `MODPROBE_OPTIONS` and would take
/// options the caller chose; its install commands run through /bin/sh with this `PATH`).
pub(crate) fn host_command(program: &str, args: &[&str]) -> Result<Command> {
    let places = COMMANDS.iter().find(|(p, _)| *p == program).map(|(_, w)| *w).unwrap_or(&[]);
    let Some(bin) = places.iter().map(Path::new).find(|p| p.is_file()) else {
        return Err(Error::Unsupported(format!(
            "cannot run {program}: it is in none of {} (install kmod)",
            if places.is_empty() { "the places pcibench runs commands from".to_string() } else { places.join(", ") }
        )));
    };
    let mut c = Command::new(bin);
    c.args(args).env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    Ok(c)
}

#[cfg(test)]
mod command_tests {
    /// L6 (issue 36): modprobe from /usr/sbin (else /sbin), never from PATH, with only a fixed PATH.
    #[test]
    fn modprobe_comes_from_a_fixed_place_with_a_cleared_environment() {
        match super::host_command("modprobe", &["vfio"]) {
            Ok(c) => {
                let bin = c.get_program().to_string_lossy().into_owned();
                assert!(bin == "/usr/sbin/modprobe" || bin == "/sbin/modprobe", "{bin}");
                let envs: Vec<_> = c.get_envs().collect();
                assert_eq!(envs.len(), 1, "{envs:?}");
                assert_eq!(envs[0].0, "PATH");
            }
            Err(e) => assert!(e.to_string().contains("/usr/sbin/modprobe, /sbin/modprobe"), "{e}"),
        }
        let e = super::host_command("sh", &[]).unwrap_err().to_string();
        assert!(e.starts_with("cannot run sh: "), "{e}");
    }
}
