//! What `setup` remembers for `--release`, in /run/pcibench/ADDR (tmpfs: gone at reboot, as the
//! binding and the ownership changes are): the driver it replaced, the owner and mode of every
//! file it gave away, the command register before it enabled Memory Space.
//!
//! The directory is root's private state: created 0700, and refused when it is anything else (a
//! link, another owner, writable by others), since a record names a driver to bind and files to
//! chown. Records are written to a new file (O_EXCL|O_NOFOLLOW) then renamed, read without
//! following links, and every name in them is checked again before use: the driver must be one
//! in /sys/bus/pci/drivers, a file one that setup changes for that device.

use crate::host::Host;
use crate::pci::PciAddress;
use crate::{Error, Result};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// One file whose owner or mode setup changed, as it was before (`path` as on the host: `/dev/vfio/7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub path: String,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// A device's record; empty when there is none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// `Some(None)`: it had no driver; `None`: `--vfio` did not unbind anything.
    pub driver: Option<Option<String>>,
    pub owners: Vec<Owner>,
    /// The command register before `--sysfs-user` enabled Memory Space.
    pub command: Option<u16>,
}

impl Record {
    pub fn is_empty(&self) -> bool {
        self.driver.is_none() && self.owners.is_empty() && self.command.is_none()
    }

    /// Remember `path`'s owner and mode before the first change (a later run must not record
    /// the user's ownership as the original).
    pub fn keep_owner(&mut self, path: &str, (uid, gid, mode): (u32, u32, u32)) {
        if !self.owners.iter().any(|o| o.path == path) {
            self.owners.push(Owner { path: path.to_string(), uid, gid, mode });
        }
    }

    fn text(&self) -> String {
        let mut s = String::new();
        if let Some(d) = &self.driver {
            s.push_str(&format!("driver={}\n", d.as_deref().unwrap_or("")));
        }
        for o in &self.owners {
            s.push_str(&format!("owner={}:{}:{:o} {}\n", o.uid, o.gid, o.mode, o.path));
        }
        if let Some(c) = self.command {
            s.push_str(&format!("command={c:#06x}\n"));
        }
        s
    }

    fn parse(text: &str, shown: &Path) -> Result<Record> {
        let bad = |line: &str| {
            Error::Refused(format!(
                "{} has a line pcibench did not write ({line:?}): not used; remove it (sudo rm {}) and restore by hand",
                shown.display(),
                shown.display()
            ))
        };
        let mut r = Record::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if let Some(d) = line.strip_prefix("driver=") {
                let d = d.trim();
                r.driver = Some((!d.is_empty()).then(|| d.to_string()));
            } else if let Some(o) = line.strip_prefix("owner=") {
                let (ids, path) = o.split_once(' ').ok_or_else(|| bad(line))?;
                let v: Vec<&str> = ids.split(':').collect();
                let [u, g, m] = v[..] else { return Err(bad(line)) };
                let num = |s: &str, radix| u32::from_str_radix(s, radix).map_err(|_| bad(line));
                r.owners.push(Owner { path: path.to_string(), uid: num(u, 10)?, gid: num(g, 10)?, mode: num(m, 8)? });
            } else if let Some(c) = line.strip_prefix("command=") {
                let c = c.trim().trim_start_matches("0x");
                r.command = Some(u16::from_str_radix(c, 16).map_err(|_| bad(line))?);
            } else {
                return Err(bad(line));
            }
        }
        Ok(r)
    }
}

fn dir(host: &Host) -> PathBuf {
    host.path("/run/pcibench")
}

/// /run/pcibench/ADDR.
pub fn path(host: &Host, addr: &PciAddress) -> PathBuf {
    dir(host).join(addr.to_string())
}

/// Refuse a /run/pcibench that is not this process's private directory.
fn check_dir(d: &Path) -> Result<()> {
    let m = fs::symlink_metadata(d).map_err(|e| Error::io("cannot read", d, e))?;
    let euid = rustix::process::geteuid().as_raw();
    let why = if m.file_type().is_symlink() {
        Some("it is a symbolic link".to_string())
    } else if !m.is_dir() {
        Some("it is not a directory".to_string())
    } else if m.uid() != euid {
        Some(format!("it is owned by uid {}, not {euid}", m.uid()))
    } else if m.mode() & 0o022 != 0 {
        Some(format!("others may write to it (mode {:04o})", m.mode() & 0o7777))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(w) => Err(Error::Refused(format!(
            "refusing {}: {w}; it holds setup's records (which driver to bind, which owners to restore): \
             remove it (sudo rm -r {}) and run setup again",
            d.display(),
            d.display()
        ))),
    }
}

/// The record of `addr` (empty when there is none), with every name checked (see the module docs).
pub fn load(host: &Host, addr: &PciAddress) -> Result<Record> {
    let d = dir(host);
    if fs::symlink_metadata(&d).is_err() {
        return Ok(Record::default());
    }
    check_dir(&d)?;
    let p = path(host, addr);
    // Not through a link, and without waiting on a FIFO: the read below refuses anything but a file.
    let f = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow() | rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&p)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
        Err(e) => {
            return Err(Error::io_hint("cannot open", &p, e, "a record is a plain file, never a link: remove it"))
        }
    };
    drop(f);
    let bytes = crate::file::read(&p, 64 << 10).map_err(|e| Error::io("cannot read", &p, e))?;
    let r = Record::parse(&String::from_utf8_lossy(&bytes), &p)?;
    if let Some(Some(d)) = &r.driver {
        check_driver(host, d, &p)?;
    }
    for o in &r.owners {
        check_owner_path(addr, &o.path, &p)?;
    }
    Ok(r)
}

fn nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// A driver name from a record goes into /sys/bus/pci/drivers/NAME/bind: one path component
/// naming a driver that exists.
fn check_driver(host: &Host, name: &str, rec: &Path) -> Result<()> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    let drivers = host.path("/sys/bus/pci/drivers");
    if plain && drivers.join(name).is_dir() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{} names driver {name:?}, which is not a PCI driver in /sys/bus/pci/drivers: not used; load the driver \
         (sudo modprobe MODULE), or remove the record (sudo rm {}) and bind the device by hand",
        rec.display(),
        rec.display()
    )))
}

/// The files setup gives away for `addr`: its resourceN[_wc] files and a /dev/vfio group node.
fn check_owner_path(addr: &PciAddress, path: &str, rec: &Path) -> Result<()> {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let sysfs = path
        .strip_prefix(&format!("/sys/bus/pci/devices/{addr}/resource"))
        .is_some_and(|n| digits(n.strip_suffix("_wc").unwrap_or(n)));
    let node = path.strip_prefix("/dev/vfio/").is_some_and(|n| digits(n.strip_prefix("noiommu-").unwrap_or(n)));
    if sysfs || node {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{} names {path:?}, not a file setup changes for {addr}: not used; remove the record (sudo rm {}) and \
         restore owners by hand",
        rec.display(),
        rec.display()
    )))
}

/// Write `r` as the record of `addr` (removing it when empty): the directory created 0700 and
/// checked, the record written to a new file, never through a link, then renamed into place.
pub fn save(host: &Host, addr: &PciAddress, r: &Record) -> Result<PathBuf> {
    let d = dir(host);
    let p = path(host, addr);
    if r.is_empty() {
        if fs::symlink_metadata(&d).is_ok() {
            check_dir(&d)?;
            match fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io("cannot remove", &p, e)),
                _ => {}
            }
        }
        return Ok(p);
    }
    if fs::symlink_metadata(&d).is_err() {
        if let Some(parent) = d.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io("cannot create", parent, e))?;
        }
        // 0700 whatever the umask (it can only take bits away).
        fs::DirBuilder::new().mode(0o700).create(&d).map_err(|e| Error::io("cannot create", &d, e))?;
    }
    check_dir(&d)?;
    // A new file (O_EXCL|O_NOFOLLOW, random name) renamed over the record: the output writer's core.
    crate::file::replace(&d, std::ffi::OsStr::new(&addr.to_string()), r.text().as_bytes(), 0o600, true)
        .map_err(|e| Error::io("cannot write", &p, e))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fixture() -> (tempfile::TempDir, Host, PciAddress) {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        fs::create_dir_all(host.path("/sys/bus/pci/drivers/e1000e")).unwrap();
        (t, host, "0000:00:04.0".parse().unwrap())
    }

    #[test]
    fn round_trip_in_a_private_directory() {
        let (_t, host, a) = fixture();
        let mut r = Record { driver: Some(Some("e1000e".into())), command: Some(0x0004), ..Default::default() };
        r.keep_owner("/dev/vfio/7", (0, 0, 0o600));
        r.keep_owner("/dev/vfio/7", (1000, 1000, 0o600));
        r.keep_owner(&format!("/sys/bus/pci/devices/{a}/resource0_wc"), (0, 0, 0o600));
        let p = save(&host, &a, &r).unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "driver=e1000e\nowner=0:0:600 /dev/vfio/7\nowner=0:0:600 /sys/bus/pci/devices/0000:00:04.0/resource0_wc\ncommand=0x0004\n"
        );
        assert_eq!(fs::metadata(host.path("/run/pcibench")).unwrap().mode() & 0o7777, 0o700);
        assert_eq!(load(&host, &a).unwrap(), r);
        save(&host, &a, &Record::default()).unwrap();
        assert!(!p.exists());
        assert!(load(&host, &a).unwrap().is_empty());
    }

    #[test]
    fn refuses_a_shared_or_linked_directory_and_a_linked_record() {
        let (t, host, a) = fixture();
        let d = host.path("/run/pcibench");
        fs::create_dir_all(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        let e = save(&host, &a, &Record { driver: Some(None), ..Default::default() }).unwrap_err().to_string();
        assert!(e.contains("others may write to it (mode 0777)"), "{e}");
        fs::remove_dir(&d).unwrap();
        fs::create_dir(t.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(t.path().join("elsewhere"), &d).unwrap();
        let e = load(&host, &a).unwrap_err().to_string();
        assert!(e.contains("it is a symbolic link"), "{e}");
        fs::remove_file(&d).unwrap();
        // A record planted as a link to another file is not read.
        fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        fs::write(t.path().join("victim"), "driver=e1000e\n").unwrap();
        std::os::unix::fs::symlink(t.path().join("victim"), path(&host, &a)).unwrap();
        assert!(load(&host, &a).unwrap_err().to_string().contains("never a link"));
        // Saving replaces the link with a file of its own; the victim is untouched.
        save(&host, &a, &Record { driver: Some(None), ..Default::default() }).unwrap();
        assert_eq!(fs::read_to_string(t.path().join("victim")).unwrap(), "driver=e1000e\n");
        assert!(!fs::symlink_metadata(path(&host, &a)).unwrap().file_type().is_symlink());
    }

    #[test]
    fn names_read_back_are_checked() {
        let (_t, host, a) = fixture();
        let d = host.path("/run/pcibench");
        fs::DirBuilder::new().mode(0o700).recursive(true).create(&d).unwrap();
        for (text, want) in [
            ("driver=../../../../tmp/x\n", "not a PCI driver"),
            ("driver=nvme\n", "not a PCI driver"),
            ("owner=0:0:600 /etc/shadow\n", "not a file setup changes"),
            ("owner=0:0:600 /sys/bus/pci/devices/0000:00:05.0/resource0\n", "not a file setup changes"),
            ("rm -rf /\n", "did not write"),
        ] {
            fs::write(path(&host, &a), text).unwrap();
            let e = load(&host, &a).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        fs::write(path(&host, &a), "driver=e1000e\nowner=1:2:640 /dev/vfio/noiommu-0\n").unwrap();
        assert_eq!(load(&host, &a).unwrap().owners[0].mode, 0o640);
    }
}
