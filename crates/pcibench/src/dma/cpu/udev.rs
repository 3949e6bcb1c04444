//! A u-dma-buf buffer (ikwzm/u-dma-buf) as the CPU sees it: `/dev/NAME` mapped or read/written,
//! opened with or without O_SYNC, and the driver's sync interface in
//! `/sys/class/u-dma-buf/NAME/`: one packed command written to `sync_for_cpu` / `sync_for_device`
//! names the region and does the cache maintenance, as seed 003's program does it
//! (`udev_sync`: the files are opened once; drivers without the packed form get `sync_offset`,
//! `sync_size`, `sync_direction`, read back once when the view opens, so a region that silently
//! did not take (users report sync_offset/sync_size "having no effect") is caught rather than
//! trusted).

use super::{Access, CpuBuffer, CpuView, Sync};
use crate::direction::Direction;
use crate::dma::buffers::udmabuf::parse_number;
use crate::host::Host;
use crate::mmio::MemType;
use crate::os::mmap::Mmap;
use crate::units::human_size;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

/// O_SYNC (include/uapi/asm-generic/fcntl.h; the same on x86-64, arm64 and riscv64).
const O_SYNC: i32 = 0o4010000;

pub struct UDmaBuf {
    host: Host,
    name: String,
    class: PathBuf,
    dev: PathBuf,
    size: u64,
    attrs: Vec<(String, String)>,
    sync_mode: Option<u64>,
    /// The driver takes the packed sync command (`udev_sync::takes_packed`).
    packed: bool,
}

impl UDmaBuf {
    /// The mapping u-dma-buf gives in `sync` mode, in the README's words, and the sync mode.
    fn kind(&self, sync: Sync) -> (&'static str, u64) {
        let mode = self.sync_mode.unwrap_or(1);
        let applies = sync == Sync::OSync || mode >= 4;
        let kind = match (applies, mode % 4) {
            (false, _) | (true, 0) => "cached",
            (true, 1) => "uncached",
            (true, 2) => "write-combining",
            _ => "DMA-coherent",
        };
        (kind, mode)
    }

    /// The u-dma-buf `name`; `want` bytes of it when given (refused when larger than the buffer).
    pub fn open(host: &Host, name: &str, want: Option<u64>) -> Result<UDmaBuf> {
        let class = host.path(format!("/sys/class/u-dma-buf/{name}"));
        if !class.is_dir() {
            return Err(Error::Unsupported(format!(
                "no u-dma-buf named {name} ({} is missing): load the driver with a buffer, e.g. sudo insmod u-dma-buf.ko udmabuf0=0x1000000, then ls /sys/class/u-dma-buf",
                class.display()
            )));
        }
        let read = |a: &str| crate::file::read_trim(&class.join(a));
        let size = read("size").and_then(|s| parse_number(&s)).filter(|s| *s > 0).ok_or_else(|| {
            Error::Device(format!("u-dma-buf {name}: {}/size is missing or not a size", class.display()))
        })?;
        for a in ["sync_for_cpu", "sync_for_device", "sync_offset", "sync_size", "sync_direction"] {
            if !class.join(a).exists() {
                return Err(Error::Unsupported(format!(
                    "u-dma-buf {name} has no {a} in {}: this driver version has no sync interface (u-dma-buf 2.x or later has it)",
                    class.display()
                )));
            }
        }
        let used = match want {
            Some(w) if w > size => {
                return Err(Error::usage(format!(
                    "u-dma-buf {name} holds {} ({size:#x} bytes): --size {} does not fit; use --size {} or less",
                    human_size(size),
                    human_size(w),
                    human_size(size)
                )))
            }
            Some(w) => w,
            None => size,
        };
        let mut attrs = Vec::new();
        for a in ["driver_version", "size", "phys_addr", "dma_coherent", "sync_mode"] {
            if let Some(v) = read(a) {
                attrs.push((a.to_string(), v));
            }
        }
        Ok(UDmaBuf {
            name: name.to_string(),
            host: host.clone(),
            dev: host.path(format!("/dev/{name}")),
            sync_mode: read("sync_mode").and_then(|s| parse_number(&s)),
            packed: super::udev_sync::takes_packed(read("driver_version").as_deref()),
            class,
            size: used,
            attrs,
        })
    }
}

struct View<'a> {
    buf: &'a UDmaBuf,
    file: File,
    map: Mmap,
    /// The sync files, opened once (explicit-sync views).
    sync: Option<super::udev_sync::SyncFiles>,
}

impl View<'_> {
    fn sync(&mut self, for_cpu: bool, offset: u64, len: u64, dir: Direction) -> Result<()> {
        let b = self.buf;
        if self.sync.is_none() {
            self.sync = Some(super::udev_sync::SyncFiles::open(&b.class, &b.name, b.size, b.packed)?);
        }
        match &mut self.sync {
            Some(s) => s.sync(for_cpu, offset, len, dir),
            None => Ok(()),
        }
    }
}

impl CpuView for View<'_> {
    fn ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    fn write_file(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.file.write_all_at(data, offset).map_err(|e| Error::io("write() failed on", &self.buf.dev, e))
    }

    fn read_file(&mut self, offset: u64, out: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(out, offset).map_err(|e| Error::io("read() failed on", &self.buf.dev, e))
    }

    fn sync_for_cpu(&mut self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        self.sync(true, offset, len, dir)
    }

    fn sync_for_device(&mut self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        self.sync(false, offset, len, dir)
    }
}

impl CpuBuffer for UDmaBuf {
    fn name(&self) -> String {
        format!("u-dma-buf {}", self.name)
    }

    fn kind(&self) -> String {
        "u-dma-buf".into()
    }

    fn path(&self) -> Option<String> {
        Some(self.dev.display().to_string())
    }

    fn len(&self) -> usize {
        self.size as usize
    }

    fn facts(&self) -> Vec<(String, String)> {
        self.attrs.clone()
    }

    fn accesses(&self) -> Vec<Access> {
        vec![Access::Mmap, Access::File]
    }

    fn syncs(&self) -> Vec<Sync> {
        vec![Sync::Explicit, Sync::OSync]
    }

    /// The driver's README: with O_SYNC, sync_mode 1 (or 5) maps uncached, 2 (6) write-combining,
    /// 3 (7) DMA-coherent; without O_SYNC the mapping is cached unless sync_mode is 5-7. On x86 it
    /// cannot make a mapping uncached: it stays cached whatever O_SYNC says.
    fn memory_type(&self, sync: Sync) -> String {
        let (kind, mode) = self.kind(sync);
        if cfg!(target_arch = "x86_64") && kind != "cached" {
            return format!("cached (sync_mode {mode} asks {kind}, which u-dma-buf cannot give on x86)");
        }
        format!("{kind} (sync_mode {mode})")
    }

    /// DMA-coherent is Normal non-cacheable where the device is not coherent (arm64's
    /// pgprot_dmacoherent), which the copy routines treat as write-combining.
    fn mem_type(&self, sync: Sync) -> MemType {
        match self.kind(sync).0 {
            _ if cfg!(target_arch = "x86_64") => MemType::Wb,
            "uncached" => MemType::Uc,
            "write-combining" | "DMA-coherent" => MemType::Wc,
            _ => MemType::Wb,
        }
    }

    fn open(&self, sync: Sync) -> Result<Box<dyn CpuView + '_>> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if sync == Sync::OSync {
            o.custom_flags(O_SYNC);
        }
        let file = self.host.open_node(&self.dev, &o).map_err(|e| {
            let hint = format!("give this user the device: sudo chmod o+rw {}", self.dev.display());
            Error::io_hint("cannot open", &self.dev, e, hint)
        })?;
        let map = Mmap::file(&file, 0, self.size as usize, true).map_err(|e| Error::io("cannot mmap", &self.dev, e))?;
        // The sync files are opened (and a driver without the packed command checked) here,
        // once, not per sync.
        let sync = match sync {
            Sync::Explicit => Some(super::udev_sync::SyncFiles::open(&self.class, &self.name, self.size, self.packed)?),
            _ => None,
        };
        Ok(Box::new(View { buf: self, file, map, sync }))
    }
}

/// Fixture u-dma-bufs for tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::host::Host;
    use std::fs;

    /// A u-dma-buf as the driver lays it out: class attributes, and /dev/NAME (a plain file here).
    pub fn fixture(sync_attrs: bool) -> (tempfile::TempDir, Host) {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        let c = h.path("/sys/class/u-dma-buf/udmabuf0");
        fs::create_dir_all(&c).unwrap();
        fs::create_dir_all(h.path("/dev")).unwrap();
        for (a, v) in [
            ("driver_version", "4.5.2\n"),
            ("size", "65536\n"),
            ("phys_addr", "0x0000000012340000\n"),
            ("dma_coherent", "1\n"),
            ("sync_mode", "1\n"),
        ] {
            fs::write(c.join(a), v).unwrap();
        }
        if sync_attrs {
            for a in ["sync_offset", "sync_size", "sync_direction", "sync_for_cpu", "sync_for_device"] {
                fs::write(c.join(a), "0\n").unwrap();
            }
        }
        fs::write(h.path("/dev/udmabuf0"), vec![0u8; 65536]).unwrap();
        (t, h)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::fixture;
    use super::*;
    use std::fs;

    #[test]
    fn file_and_mmap_see_the_same_bytes_and_syncs_name_their_region() {
        let (_t, h) = fixture(true);
        let b = UDmaBuf::open(&h, "udmabuf0", Some(8192)).unwrap();
        assert_eq!((b.len(), b.accesses().len(), b.syncs().len()), (8192, 2, 2));
        assert!(b.facts().iter().any(|(k, v)| k == "phys_addr" && v == "0x0000000012340000"));
        let mut v = b.open(Sync::Explicit).unwrap();
        v.sync_for_cpu(0x1000, 0x800, Direction::H2c).unwrap();
        v.write_file(0x1000, &[7; 16]).unwrap();
        v.sync_for_device(0x1000, 0x800, Direction::H2c).unwrap();
        // SAFETY (test): the mapping is 8 KiB and 0x1000 + 16 is inside it.
        assert_eq!(unsafe { *v.ptr().add(0x1005) }, 7);
        let c = h.path("/sys/class/u-dma-buf/udmabuf0");
        let attr = |a: &str| fs::read_to_string(c.join(a)).unwrap();
        // Driver 4.5.2 takes the packed command: the region attributes are never written.
        assert_eq!(
            (attr("sync_offset"), attr("sync_size"), attr("sync_direction")),
            ("0\n".into(), "0\n".into(), "0\n".into())
        );
        // 0x800 | to-device << 2 | 1.
        assert_eq!(attr("sync_for_cpu"), "0x0000100000000805");
        assert_eq!(attr("sync_for_device"), "0x0000100000000805");
    }

    #[test]
    fn bad_input_gets_one_line_each() {
        let (_t, h) = fixture(true);
        let e = UDmaBuf::open(&h, "udmabuf9", None).err().unwrap().to_string();
        assert!(e.contains("no u-dma-buf named udmabuf9") && e.contains("insmod"), "{e}");
        let e = UDmaBuf::open(&h, "udmabuf0", Some(1 << 20)).err().unwrap().to_string();
        assert!(e.contains("does not fit") && e.contains("--size 64 KiB or less"), "{e}");
        let (_t2, h2) = fixture(false);
        let e = UDmaBuf::open(&h2, "udmabuf0", None).err().unwrap().to_string();
        assert!(e.contains("no sync_for_cpu") && e.contains("no sync interface"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_region_the_driver_does_not_take_is_caught() {
        let (_t, h) = fixture(true);
        // A driver without the packed command: its region attributes are checked when the view opens.
        fs::write(h.path("/sys/class/u-dma-buf/udmabuf0/driver_version"), "1.4.9\n").unwrap();
        let b = UDmaBuf::open(&h, "udmabuf0", None).unwrap();
        // Make sync_size a directory: it cannot be opened, and nothing is synced in its name.
        let p = h.path("/sys/class/u-dma-buf/udmabuf0/sync_size");
        fs::remove_file(&p).unwrap();
        fs::create_dir(&p).unwrap();
        let e = b.open(Sync::Explicit).err().unwrap().to_string();
        assert!(e.contains("sync_size"), "{e}");
        assert!(b.open(Sync::OSync).is_ok(), "an O_SYNC view syncs nothing");
    }

    #[test]
    fn memory_types_follow_sync_mode_and_the_architecture() {
        let (_t, h) = fixture(true);
        let b = UDmaBuf::open(&h, "udmabuf0", None).unwrap();
        assert!(b.memory_type(Sync::Explicit).starts_with("cached (sync_mode 1)"));
        let o = b.memory_type(Sync::OSync);
        if cfg!(target_arch = "x86_64") {
            assert!(o.contains("cannot give on x86"), "{o}");
        } else {
            assert!(o.starts_with("uncached"), "{o}");
        }
    }
}
