//! The sysfs access path: mmap of `resourceN` (uncached-minus) and `resourceN_wc`
//! (write-combining) for a device with no driver bound, config space through the `config` file.
//! drivers/pci/pci-sysfs.c: pci_create_attr makes the files, pci_mmap_resource maps them.

use super::mapped::MappedBar;
use super::{BarRegion, DeviceAccess, IoMode, Mapping, Via};
use crate::host::Host;
use crate::os::mmap::Mmap;
use crate::pci::{sysfs::device_dir, Bar, DeviceInfo, PciAddress};
use crate::{Error, Result};
use rustix::io::Errno;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A device reached through its sysfs resource files.
pub struct SysfsDevice {
    addr: PciAddress,
    dir: PathBuf,
    bars: Vec<Bar>,
    host: Host,
}

impl SysfsDevice {
    /// Open `info` for sysfs access. Refused when any driver is bound: a BAR a driver owns is not
    /// ours to write, and with CONFIG_IO_STRICT_DEVMEM the kernel would refuse the mmap anyway.
    pub fn open(host: &Host, addr: &PciAddress, info: &DeviceInfo) -> Result<SysfsDevice> {
        let addr = *addr;
        if let Some(d) = &info.driver {
            return Err(if d == "vfio-pci" {
                Error::Refused(format!(
                    "{addr} is bound to vfio-pci, which owns its BARs: use --via vfio, or release it for sysfs: sudo pcibench setup {addr} --release"
                ))
            } else {
                bound_driver_refusal(host, &addr, d)
            });
        }
        let dir = device_dir(host, &addr);
        if !dir.is_dir() {
            return Err(Error::NoDevice(addr.to_string()));
        }
        Ok(SysfsDevice { addr, dir, bars: info.bars.clone(), host: host.clone() })
    }

    fn bar(&self, index: u8) -> Result<&Bar> {
        self.bars.iter().find(|b| b.index == index).ok_or_else(|| {
            let have: Vec<String> = self.bars.iter().map(|b| format!("BAR{}", b.index)).collect();
            Error::usage(format!(
                "{} has no BAR{index}; it has {}",
                self.addr,
                if have.is_empty() { "no BARs".to_string() } else { have.join(", ") }
            ))
        })
    }

    fn explain(&self, e: &io::Error) -> String {
        let errno = Errno::from_io_error(e);
        explain_errno(&self.addr, errno, crate::host::state::lockdown_active(&self.host).as_deref(), &current_user())
    }

    /// Map BAR `index`; `write` false opens and maps it read-only (read permission suffices).
    fn open_bar_as(&self, index: u8, mapping: Mapping, io: IoMode, write: bool) -> Result<Box<dyn BarRegion>> {
        let bar = self.bar(index)?;
        if io == IoMode::Syscall {
            // pci-sysfs.c gives resourceN read/write only for I/O port BARs (pci_read_resource_io);
            // a memory BAR file answers read() with EIO.
            return Err(Error::Unsupported(format!(
                "BAR{index} of {}: sysfs resource files of memory BARs have no read/write (the kernel returns EIO), only mmap: map the BAR instead, or bind the device to vfio-pci and use --via vfio for syscall I/O",
                self.addr
            )));
        }
        if !bar.is_memory() {
            return Err(Error::Unsupported(format!(
                "BAR{index} of {} is an I/O port BAR: it cannot be memory-mapped (pci_mmap_resource refuses I/O BARs on x86); use a memory BAR",
                self.addr
            )));
        }
        let name = match mapping {
            Mapping::Uc => format!("resource{index}"),
            Mapping::Wc => format!("resource{index}_wc"),
        };
        let path = self.dir.join(&name);
        if !path.exists() {
            return Err(match mapping {
                Mapping::Wc => Error::Unsupported(wc_unavailable(&self.addr, bar)),
                Mapping::Uc => Error::Unsupported(format!(
                    "{} has no {name}: the kernel did not expose BAR{index} for mmap (unassigned BAR?): see pcibench info {}",
                    self.addr, self.addr
                )),
            });
        }
        let file = self.open_file(&name, write)?;
        let len = usize::try_from(bar.size).map_err(|_| {
            Error::Unsupported(format!("BAR{index} ({} bytes) is larger than the address space", bar.size))
        })?;
        let map = Mmap::file(&file, 0, len, write).map_err(|e| {
            let hint = self.explain(&e);
            Error::io_hint("cannot mmap", &path, e, hint)
        })?;
        Ok(Box::new(
            MappedBar::new(map, index, bar.size, mapping, Via::Sysfs).writable(write).guarded(&self.addr, None),
        ))
    }

    fn open_file(&self, name: &str, write: bool) -> Result<File> {
        let path = self.dir.join(name);
        // A resource file is a regular file in sysfs; anything else standing there (a FIFO) is refused
        // without blocking.
        crate::file::open_regular_with(&path, if write { rustix::fs::OFlags::RDWR } else { rustix::fs::OFlags::RDONLY })
            .map_err(|e| {
                let hint = self.explain(&e);
                Error::io_hint("cannot open", &path, e, hint)
            })
    }
}

/// The refusal for a device a kernel driver (other than vfio-pci) owns. It offers the unbind only
/// when the running system does not use the device (`host::inuse`) and the check looked everywhere
/// (issue 54: an incomplete check offers nothing that takes the device).
pub fn bound_driver_refusal(host: &Host, addr: &PciAddress, driver: &str) -> Error {
    match crate::host::inuse::inventory(host, &addr.to_string()) {
        Ok(inv) if inv.is_empty() && !inv.unchecked.is_empty() => Error::Refused(format!(
            "{addr} is bound to driver {driver}: pcibench will not touch a BAR a kernel driver owns, and whether the running system uses it cannot be told: {}; complete that check first (pcibench doctor {addr})",
            inv.unchecked.words()
        )),
        Ok(inv) if inv.is_empty() => Error::Refused(format!(
            "{addr} is bound to driver {driver}: pcibench will not touch a BAR a kernel driver owns; unbind it first: sudo pcibench setup {addr} --vfio (or echo {addr} > /sys/bus/pci/drivers/{driver}/unbind)"
        )),
        Ok(inv) => Error::Refused(format!(
            "{addr} is bound to driver {driver} and the running system uses it ({}): pcibench will not touch its BARs; pick another device",
            inv.summary()
        )),
        Err(e) => Error::Refused(format!(
            "{addr} is bound to driver {driver}, and what the running system uses it for cannot be told ({e}): pcibench will not touch its BARs; pick another device"
        )),
    }
}

/// The name for `--sysfs-user` in a hint: the invoking user (under sudo, the one who ran it).
fn current_user() -> String {
    ["SUDO_USER", "USER"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty() && u != "root"))
        .unwrap_or_else(|| "$USER".to_string())
}

pub fn explain_errno(addr: &PciAddress, errno: Option<Errno>, lockdown: Option<&str>, user: &str) -> String {
    match errno {
        Some(Errno::ACCESS | Errno::PERM) => {
            let mut s = String::new();
            if let Some(mode) = lockdown {
                s.push_str(&format!(
                    "kernel lockdown is [{mode}] (/sys/kernel/security/lockdown): it forbids user-space BAR access even for root (LOCKDOWN_PCI_ACCESS): disable Secure Boot, or bind the device to vfio-pci and use --via vfio; "
                ));
            }
            s.push_str(&format!(
                "the resource files need root or file permission: sudo pcibench setup {addr} --sysfs-user {user}, or run as root"
            ));
            s
        }
        Some(Errno::INVAL | Errno::BUSY) => format!(
            "the kernel refused the mapping: a driver has claimed the BAR and CONFIG_IO_STRICT_DEVMEM (or iomem=strict) makes it exclusive: unbind the driver (sudo pcibench setup {addr} --vfio) or boot with iomem=relaxed"
        ),
        Some(Errno::NOENT) => "the kernel exposes no such file for this device (was it removed or re-enumerated?): run pcibench info".to_string(),
        Some(Errno::IO) => "memory BARs have no read/write in sysfs, only mmap".to_string(),
        _ => format!("see pcibench doctor {addr}"),
    }
}

impl DeviceAccess for SysfsDevice {
    fn via(&self) -> Via {
        Via::Sysfs
    }

    fn open_bar(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        self.open_bar_as(index, mapping, io, true)
    }

    fn open_bar_read_only(&self, index: u8, mapping: Mapping, io: IoMode) -> Result<Box<dyn BarRegion>> {
        self.open_bar_as(index, mapping, io, false)
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let path = self.dir.join("config");
        let f = self.open_file("config", false)?;
        let n = read_full_at(&f, offset, buf).map_err(|e| Error::io("cannot read", &path, e))?;
        if n < buf.len() {
            return Err(short_config(&self.addr, &path, offset, buf.len(), n));
        }
        Ok(())
    }

    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let path = self.dir.join("config");
        let f = self.open_file("config", true)?;
        f.write_all_at(data, offset).map_err(|e| {
            let hint = self.explain(&e);
            Error::io_hint("cannot write", &path, e, hint)
        })
    }
}

fn wc_unavailable(addr: &PciAddress, bar: &Bar) -> String {
    let i = bar.index;
    if !bar.prefetchable {
        format!(
            "write-combining is unavailable for BAR{i} of {addr}: it is non-prefetchable, and the kernel creates resource{i}_wc only for prefetchable memory BARs (drivers/pci/pci-sysfs.c pci_create_attr): use --map uc"
        )
    } else {
        format!(
            "write-combining is unavailable for BAR{i} of {addr}: it is prefetchable but there is no resource{i}_wc, so this architecture cannot map PCI memory write-combining (arch_can_pci_mmap_wc): use --map uc"
        )
    }
}

/// sysfs truncates config reads for users without CAP_SYS_ADMIN (pci_read_config: 64 bytes).
fn short_config(addr: &PciAddress, path: &Path, offset: u64, want: usize, got: usize) -> Error {
    Error::Io {
        what: "short read of",
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::UnexpectedEof, format!("{got} of {want} bytes at {offset:#x}")),
        hint: Some(format!(
            "{addr}'s config space ends at {:#x} for this user: without CAP_SYS_ADMIN the kernel shows only the first 64 bytes (pci_read_config): run as root",
            offset + got as u64
        )),
    }
}

fn read_full_at(f: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmio::Width;
    use crate::pci::sysfs::read_device;
    use std::fs;

    fn addr() -> PciAddress {
        "0000:15:00.0".parse().unwrap()
    }

    /// A device directory with a 64-bit prefetchable BAR0 (4 KiB, with _wc), a non-prefetchable
    /// BAR2 (4 KiB) and an I/O BAR4; plain files stand in for the resource files.
    fn fixture(driver: Option<&str>) -> (tempfile::TempDir, Host) {
        let t = tempfile::tempdir().unwrap();
        let host = Host::with_root(t.path());
        let d = host.path("/sys/bus/pci/devices/0000:15:00.0");
        fs::create_dir_all(&d).unwrap();
        for (f, v) in [("vendor", "0x10ee"), ("device", "0x7024"), ("class", "0x058000")] {
            fs::write(d.join(f), v).unwrap();
        }
        fs::write(
            d.join("resource"),
            "0x00000000fe000000 0x00000000fe000fff 0x000000000014220c\n\
             0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
             0x00000000fe100000 0x00000000fe100fff 0x0000000000040200\n\
             0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
             0x000000000000e000 0x000000000000e01f 0x0000000000040101\n",
        )
        .unwrap();
        for f in ["resource0", "resource0_wc", "resource2"] {
            fs::write(d.join(f), vec![0u8; 4096]).unwrap();
        }
        let mut cfg = vec![0u8; 64];
        cfg[..4].copy_from_slice(&[0xee, 0x10, 0x24, 0x70]);
        fs::write(d.join("config"), cfg).unwrap();
        if let Some(drv) = driver {
            let dd = host.path(format!("/sys/bus/pci/drivers/{drv}"));
            fs::create_dir_all(&dd).unwrap();
            std::os::unix::fs::symlink(&dd, d.join("driver")).unwrap();
        }
        (t, host)
    }

    #[test]
    fn maps_uc_and_wc_and_explains_what_it_cannot() {
        let (_t, host) = fixture(None);
        let info = read_device(&host, &addr()).unwrap();
        let dev = SysfsDevice::open(&host, &info.address.parse().unwrap(), &info).unwrap();
        let uc = dev.open_bar(0, Mapping::Uc, IoMode::Mmap).unwrap();
        uc.write(0x10, Width::B32, 0xcafe_babe).unwrap();
        assert_eq!(uc.read(0x10, Width::B32).unwrap(), 0xcafe_babe);
        assert_eq!(uc.len(), 4096);
        let wc = dev.open_bar(0, Mapping::Wc, IoMode::Mmap).unwrap();
        assert_eq!(wc.mapping(), Mapping::Wc);

        let e = dev.open_bar(2, Mapping::Wc, IoMode::Mmap).err().unwrap().to_string();
        assert!(e.contains("non-prefetchable") && e.contains("pci_create_attr"), "{e}");
        let e = dev.open_bar(4, Mapping::Uc, IoMode::Mmap).err().unwrap().to_string();
        assert!(e.contains("I/O port BAR"), "{e}");
        let e = dev.open_bar(0, Mapping::Uc, IoMode::Syscall).err().unwrap().to_string();
        assert!(e.contains("EIO"), "{e}");
        let e = dev.open_bar(1, Mapping::Uc, IoMode::Mmap).err().unwrap().to_string();
        assert!(e.contains("no BAR1") && e.contains("BAR0, BAR2, BAR4"), "{e}");
    }

    #[test]
    fn wc_missing_on_a_prefetchable_bar_blames_the_architecture() {
        let (_t, host) = fixture(None);
        fs::remove_file(host.path("/sys/bus/pci/devices/0000:15:00.0/resource0_wc")).unwrap();
        let info = read_device(&host, &addr()).unwrap();
        let dev = SysfsDevice::open(&host, &info.address.parse().unwrap(), &info).unwrap();
        let e = dev.open_bar(0, Mapping::Wc, IoMode::Mmap).err().unwrap().to_string();
        assert!(e.contains("arch_can_pci_mmap_wc"), "{e}");
    }

    #[test]
    fn config_reads_and_short_reads_explain_root() {
        let (_t, host) = fixture(None);
        let info = read_device(&host, &addr()).unwrap();
        let dev = SysfsDevice::open(&host, &info.address.parse().unwrap(), &info).unwrap();
        let mut id = [0u8; 4];
        dev.config_read(0, &mut id).unwrap();
        assert_eq!(id, [0xee, 0x10, 0x24, 0x70]);
        dev.config_write(0x3c, &[0x0b]).unwrap();
        dev.config_read(0x3c, &mut id[..1]).unwrap();
        assert_eq!(id[0], 0x0b);
        let mut big = [0u8; 8];
        let e = dev.config_read(0x40, &mut big).unwrap_err().to_string();
        assert!(e.contains("ends at 0x40") && e.contains("run as root"), "{e}");
    }

    #[test]
    fn bound_devices_are_refused() {
        let (_t, host) = fixture(Some("nvme"));
        let info = read_device(&host, &addr()).unwrap();
        let e = SysfsDevice::open(&host, &info.address.parse().unwrap(), &info).err().unwrap().to_string();
        assert_eq!(
            e,
            "0000:15:00.0 is bound to driver nvme: pcibench will not touch a BAR a kernel driver owns; unbind it first: sudo pcibench setup 0000:15:00.0 --vfio (or echo 0000:15:00.0 > /sys/bus/pci/drivers/nvme/unbind)"
        );
        let (_t, host) = fixture(Some("vfio-pci"));
        let info = read_device(&host, &addr()).unwrap();
        let e = SysfsDevice::open(&host, &info.address.parse().unwrap(), &info).err().unwrap().to_string();
        assert!(e.contains("--via vfio"), "{e}");
    }

    #[test]
    fn errno_explanations() {
        let a = addr();
        let e = explain_errno(&a, Some(Errno::ACCESS), None, "alice");
        assert!(e.contains("sudo pcibench setup 0000:15:00.0 --sysfs-user alice") && e.contains("root"), "{e}");
        let e = explain_errno(&a, Some(Errno::PERM), Some("integrity"), "alice");
        assert!(e.starts_with("kernel lockdown is [integrity]"), "{e}");
        let e = explain_errno(&a, Some(Errno::INVAL), None, "alice");
        assert!(e.contains("IO_STRICT_DEVMEM") && e.contains("iomem=relaxed"), "{e}");
        assert!(explain_errno(&a, Some(Errno::IO), None, "u").contains("only mmap"));
        for errno in [Errno::ACCESS, Errno::PERM, Errno::INVAL, Errno::BUSY, Errno::NOENT, Errno::IO, Errno::NXIO] {
            assert!(!explain_errno(&a, Some(errno), Some("confidentiality"), "u").contains('\n'));
        }
    }

    #[test]
    fn open_device_picks_the_path_from_the_driver() {
        use crate::access::open_device;
        let (_t, host) = fixture(None);
        let info = read_device(&host, &addr()).unwrap();
        assert_eq!(open_device(&host, &info.address.parse().unwrap(), &info, None).unwrap().via(), Via::Sysfs);
        assert_eq!(
            open_device(&host, &info.address.parse().unwrap(), &info, Some(Via::Sysfs)).unwrap().via(),
            Via::Sysfs
        );
        let e = open_device(&host, &info.address.parse().unwrap(), &info, Some(Via::Vfio)).err().unwrap().to_string();
        assert!(e.contains("no driver bound") && e.contains("sudo pcibench setup 0000:15:00.0 --vfio"), "{e}");
        let e = open_device(&host, &info.address.parse().unwrap(), &info, Some(Via::Sim)).err().unwrap().to_string();
        assert!(e.contains("simulated card"), "{e}");

        let (_t, host) = fixture(Some("nvme"));
        let info = read_device(&host, &addr()).unwrap();
        for via in [None, Some(Via::Sysfs), Some(Via::Vfio)] {
            let e = open_device(&host, &info.address.parse().unwrap(), &info, via).err().unwrap().to_string();
            assert!(e.starts_with("0000:15:00.0 is bound to driver nvme: pcibench will not touch"), "{e}");
        }

        let (t, host) = fixture(Some("vfio-pci"));
        let info = read_device(&host, &addr()).unwrap();
        let e = open_device(&host, &info.address.parse().unwrap(), &info, Some(Via::Sysfs)).err().unwrap().to_string();
        assert!(e.contains("bound to vfio-pci") && e.contains("--release"), "{e}");
        let e = open_device(&host, &info.address.parse().unwrap(), &info, None).err().unwrap().to_string();
        assert!(e.contains("no IOMMU group"), "{e}");
        // A no-IOMMU group: --via vfio (type1) cannot work, and says so before opening anything.
        let g = host.path("/sys/kernel/iommu_groups/0");
        fs::create_dir_all(&g).unwrap();
        std::os::unix::fs::symlink(&g, host.path("/sys/bus/pci/devices/0000:15:00.0/iommu_group")).unwrap();
        fs::create_dir_all(t.path().join("dev/vfio")).unwrap();
        fs::write(t.path().join("dev/vfio/noiommu-0"), "").unwrap();
        let e = open_device(&host, &info.address.parse().unwrap(), &info, Some(Via::Vfio)).err().unwrap().to_string();
        assert!(e.contains("no-IOMMU VFIO group (/dev/vfio/noiommu-0)") && e.contains("--via vfio-noiommu"), "{e}");
    }

    #[test]
    fn lockdown_parsing() {
        use crate::host::state::parse_lockdown;
        assert_eq!(parse_lockdown("[none] integrity confidentiality\n").as_deref(), Some("none"));
        assert_eq!(parse_lockdown("none [integrity] confidentiality\n").as_deref(), Some("integrity"));
        assert_eq!(parse_lockdown("none integrity [confidentiality]").as_deref(), Some("confidentiality"));
        assert_eq!(parse_lockdown("garbage"), None);
    }
}
