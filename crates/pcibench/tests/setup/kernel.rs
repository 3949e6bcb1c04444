//! The fake kernel `setup`'s tests run against: attribute writes land in the fixture's files and
//! have the kernel's effects (binding, driver_override, group nodes, the no-IOMMU parameter).

use super::common::Tree;
use pcibench::setup::System;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A kernel for the fixture: attribute writes go to the files and have the kernel's effects.
pub struct FakeKernel {
    root: PathBuf,
    pub log: Mutex<Vec<String>>,
    /// Ownership changes (chown needs root; the tests need not run as root).
    owners: Mutex<HashMap<PathBuf, (u32, u32, u32)>>,
    /// The driver the kernel picks on a probe without driver_override.
    native: HashMap<String, String>,
}

impl FakeKernel {
    pub fn new(t: &Tree) -> Arc<FakeKernel> {
        Self::with_native(t, &[])
    }

    pub fn with_native(t: &Tree, native: &[(&str, &str)]) -> Arc<FakeKernel> {
        Arc::new(FakeKernel {
            root: t.root().to_path_buf(),
            log: Mutex::new(Vec::new()),
            owners: Mutex::new(HashMap::new()),
            native: native.iter().map(|(a, d)| (a.to_string(), d.to_string())).collect(),
        })
    }

    /// Ownership is keyed by the real path: setup reaches files through the
    /// /sys/bus/pci/devices symlink, the tests through /sys/devices.
    fn key(path: &Path) -> PathBuf {
        fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.root).unwrap().to_string_lossy().to_string()
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn devdir(&self, addr: &str) -> PathBuf {
        fs::canonicalize(self.root.join("sys/bus/pci/devices").join(addr)).unwrap()
    }

    pub fn link_driver(&self, addr: &str, driver: &str) {
        let l = self.devdir(addr).join("driver");
        let _ = fs::remove_file(&l);
        std::os::unix::fs::symlink(self.root.join("sys/bus/pci/drivers").join(driver), l).unwrap();
    }

    /// vfio-pci's probe: a no-IOMMU group when the device has none (only in no-IOMMU mode), and the node.
    fn vfio_probe(&self, addr: &str) {
        let dir = self.devdir(addr);
        let group =
            fs::read_link(dir.join("iommu_group")).ok().map(|l| l.file_name().unwrap().to_string_lossy().to_string());
        let node = match group {
            Some(g) => format!("dev/vfio/{g}"),
            None => {
                let on = fs::read_to_string(self.root.join("sys/module/vfio/parameters/enable_unsafe_noiommu_mode"));
                if on.map(|s| s.trim() != "Y").unwrap_or(true) {
                    return; // vfio_group_find_or_alloc: -EINVAL without an IOMMU group
                }
                let g = self.root.join("sys/kernel/iommu_groups/0");
                fs::create_dir_all(g.join("devices")).unwrap();
                fs::write(g.join("name"), "vfio-noiommu\n").unwrap();
                std::os::unix::fs::symlink(&dir, g.join("devices").join(addr)).unwrap();
                std::os::unix::fs::symlink(&g, dir.join("iommu_group")).unwrap();
                "dev/vfio/noiommu-0".to_string()
            }
        };
        fs::create_dir_all(self.root.join("dev/vfio")).unwrap();
        fs::write(self.root.join(node), "").unwrap();
        self.link_driver(addr, "vfio-pci");
    }
}

impl System for FakeKernel {
    fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
        let rel = self.rel(path);
        self.log.lock().unwrap().push(format!("write {rel} {data:?}"));
        fs::OpenOptions::new().write(true).truncate(true).open(path)?;
        fs::write(path, data)?;
        let addr = data.trim();
        if rel == "sys/bus/pci/drivers_probe" {
            let ovr = fs::read_to_string(self.devdir(addr).join("driver_override")).unwrap_or_default();
            match ovr.trim() {
                // A failed probe only shows in dmesg: the write itself succeeds.
                "vfio-pci" if self.root.join("sys/bus/pci/drivers/vfio-pci").is_dir() => self.vfio_probe(addr),
                "" | "(null)" => {
                    if let Some(d) = self.native.get(addr) {
                        self.link_driver(addr, d);
                    }
                }
                _ => {}
            }
        } else if let Some(drv) = rel.strip_prefix("sys/bus/pci/drivers/").and_then(|r| r.strip_suffix("/unbind")) {
            let dir = self.devdir(addr);
            fs::remove_file(dir.join("driver")).unwrap();
            if drv == "vfio-pci"
                && fs::read_to_string(dir.join("iommu_group/name")).is_ok_and(|n| n.trim() == "vfio-noiommu")
            {
                fs::remove_file(dir.join("iommu_group")).unwrap();
                fs::remove_dir_all(self.root.join("sys/kernel/iommu_groups/0")).unwrap();
                fs::remove_file(self.root.join("dev/vfio/noiommu-0")).unwrap();
            }
        } else if let Some(drv) = rel.strip_prefix("sys/bus/pci/drivers/").and_then(|r| r.strip_suffix("/bind")) {
            self.link_driver(addr, drv);
        } else if rel.ends_with("enable_unsafe_noiommu_mode") {
            fs::write(path, if addr == "1" { "Y\n" } else { "N\n" })?;
        }
        Ok(())
    }

    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.log.lock().unwrap().push(format!("write_at {} {offset:#x} {data:02x?}", self.rel(path)));
        use std::os::unix::fs::FileExt;
        fs::OpenOptions::new().write(true).open(path)?.write_all_at(data, offset)
    }

    fn run(&self, program: &str, args: &[&str]) -> pcibench::Result<()> {
        self.log.lock().unwrap().push(format!("run {program} {}", args.join(" ")));
        let m = self.root.join("sys/module");
        let param = m.join("vfio/parameters/enable_unsafe_noiommu_mode");
        let load_vfio = |noiommu: bool| {
            if !param.exists() {
                fs::create_dir_all(param.parent().unwrap()).unwrap();
                fs::write(&param, if noiommu { "Y\n" } else { "N\n" }).unwrap();
                fs::create_dir_all(self.root.join("dev/vfio")).unwrap();
                fs::write(self.root.join("dev/vfio/vfio"), "").unwrap();
            }
        };
        match args {
            ["vfio", "enable_unsafe_noiommu_mode=1"] => load_vfio(true),
            ["vfio-pci"] => {
                load_vfio(false);
                fs::create_dir_all(m.join("vfio_pci")).unwrap();
                let d = self.root.join("sys/bus/pci/drivers/vfio-pci");
                fs::create_dir_all(&d).unwrap();
                fs::write(d.join("bind"), "").unwrap();
                fs::write(d.join("unbind"), "").unwrap();
            }
            ["vfio_iommu_type1"] => fs::create_dir_all(m.join("vfio_iommu_type1")).unwrap(),
            _ => return Err(pcibench::Error::Unsupported(format!("fake modprobe: unknown {args:?}"))),
        }
        Ok(())
    }

    fn owner(&self, path: &Path) -> std::io::Result<(u32, u32, u32)> {
        if let Some(o) = self.owners.lock().unwrap().get(&Self::key(path)) {
            return Ok(*o);
        }
        let m = fs::metadata(path)?;
        Ok((m.uid(), m.gid(), m.mode() & 0o7777))
    }

    fn chown(&self, path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
        self.log.lock().unwrap().push(format!("chown {} {uid}:{gid}", self.rel(path)));
        let mode = self.owner(path)?.2;
        self.owners.lock().unwrap().insert(Self::key(path), (uid, gid, mode));
        Ok(())
    }

    fn chmod(&self, path: &Path, mode: u32) -> std::io::Result<()> {
        self.log.lock().unwrap().push(format!("chmod {} {mode:o}", self.rel(path)));
        let (u, g, _) = self.owner(path)?;
        self.owners.lock().unwrap().insert(Self::key(path), (u, g, mode));
        Ok(())
    }

    fn sleep(&self, _: Duration) {}

    fn reaches_host(&self) -> bool {
        false
    }
}
