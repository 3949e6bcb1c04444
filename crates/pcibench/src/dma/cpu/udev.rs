//! A u-dma-buf buffer (ikwzm/u-dma-buf) as the CPU sees it: `/dev/NAME` mapped or read/written,
//! opened with or without O_SYNC, and the driver's sync interface in
//! `/sys/class/u-dma-buf/NAME/`: `sync_offset`, `sync_size`, `sync_direction` name the region and
//! `sync_for_cpu` / `sync_for_device` (write "1") do the cache maintenance, as seed 003's program
//! does it. The region is read back after it is set, so a sync that silently did not take (users
//! report sync_offset/sync_size "having no effect") is caught rather than trusted.

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
use std::path::{Path, PathBuf};

/// O_SYNC (include/uapi/asm-generic/fcntl.h; the same on x86-64, arm64 and riscv64).
const O_SYNC: i32 = 0o4010000;

/// u-dma-buf's sync_direction values (the DMA API's): 0 bidirectional, 1 to device, 2 from device.
pub fn direction_code(dir: Direction) -> u64 {
    match dir {
        Direction::H2c => 1,
        Direction::C2h => 2,
    }
}

/// The packed form of a sync command for a region, written to sync_for_cpu / sync_for_device by
/// drivers that take it: `0x%08X%08X` of the offset, then size | direction << 2 | 1.
pub fn sync_word(offset: u64, size: u64, dir: Direction) -> String {
    format!("0x{:08X}{:08X}", offset, size | direction_code(dir) << 2 | 1)
}

pub struct UDmaBuf {
    host: Host,
    name: String,
    class: PathBuf,
    dev: PathBuf,
    size: u64,
    attrs: Vec<(String, String)>,
    sync_mode: Option<u64>,
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
            class,
            size: used,
            attrs,
        })
    }

    fn set(&self, attr: &str, value: &str) -> Result<()> {
        let p = self.class.join(attr);
        let write = |p: &Path| -> std::io::Result<()> {
            use std::io::Write;
            crate::file::open_regular_with(p, rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::TRUNC)?
                .write_all(value.as_bytes())
        };
        write(&p).map_err(|e| {
            Error::io_hint(
                "cannot write",
                &p,
                e,
                format!("u-dma-buf's sync interface needs write permission: sudo chmod o+w {}", p.display()),
            )
        })
    }

    fn get(&self, attr: &str) -> Option<u64> {
        crate::file::read_trim(&self.class.join(attr)).and_then(|s| parse_number(&s))
    }

    /// Name the region to sync and check the driver took it: a region that reads back other than
    /// written would sync something else (or nothing) without a word.
    fn set_area(&self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        let want = [("sync_offset", offset), ("sync_size", len), ("sync_direction", direction_code(dir))];
        for (a, v) in want {
            self.set(a, &v.to_string())?;
        }
        for (a, v) in want {
            match self.get(a) {
                Some(got) if got == v => {}
                got => {
                    return Err(Error::Device(format!(
                        "u-dma-buf {}: wrote {a} = {v:#x} but it reads back {}: the sync would not cover [{offset:#x}, +{len:#x})",
                        self.name,
                        got.map_or("nothing".into(), |g| format!("{g:#x}"))
                    )))
                }
            }
        }
        Ok(())
    }
}

struct View<'a> {
    buf: &'a UDmaBuf,
    file: File,
    map: Mmap,
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
        self.buf.set_area(offset, len, dir)?;
        self.buf.set("sync_for_cpu", "1")
    }

    fn sync_for_device(&mut self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        self.buf.set_area(offset, len, dir)?;
        self.buf.set("sync_for_device", "1")
    }
}

impl CpuBuffer for UDmaBuf {
    fn name(&self) -> String {
        format!("u-dma-buf {}", self.name)
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
        Ok(Box::new(View { buf: self, file, map }))
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
    fn the_packed_sync_word() {
        // offset 0x1000, size 0x2000, to device: 0x2000 | 1 << 2 | 1 = 0x2005.
        assert_eq!(sync_word(0x1000, 0x2000, Direction::H2c), "0x0000100000002005");
        assert_eq!(sync_word(0, 0x10000, Direction::C2h), "0x0000000000010009");
    }

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
        assert_eq!(
            (attr("sync_offset"), attr("sync_size"), attr("sync_direction")),
            ("4096".into(), "2048".into(), "1".into())
        );
        assert_eq!((attr("sync_for_cpu"), attr("sync_for_device")), ("1".into(), "1".into()));
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
        let b = UDmaBuf::open(&h, "udmabuf0", None).unwrap();
        // Make sync_size a directory: the write fails, and nothing is synced in its name.
        let p = h.path("/sys/class/u-dma-buf/udmabuf0/sync_size");
        fs::remove_file(&p).unwrap();
        fs::create_dir(&p).unwrap();
        let mut v = b.open(Sync::Explicit).unwrap();
        assert!(v.sync_for_cpu(0, 4096, Direction::C2h).is_err());
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
