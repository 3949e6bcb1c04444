//! u-dma-buf's cache maintenance at the driver's own cost (issue 43). A sync is one write of the
//! packed command to `sync_for_cpu` / `sync_for_device`, files opened once per view and written
//! at offset 0 each time (a sysfs attribute's store runs once per write(2)).
//!
//! The packed command (u-dma-buf.c, `SYNC_COMMAND_*` and `udmabuf_sync_command_argments`): the
//! value written is parsed with kstrtoull(buf, 0); bit 0 asks for the sync; when any other bit is
//! set, bits 63..32 are the offset, bits 31..4 the size (`SYNC_COMMAND_SIZE_MASK` 0xFFFFFFF0:
//! a multiple of 16) and bits 3..2 the direction; otherwise the driver uses the separate
//! `sync_offset`, `sync_size` and `sync_direction` attributes. Every u-dma-buf (2.0 and later,
//! the driver named u-dma-buf with /sys/class/u-dma-buf) takes the packed form. Where the driver reports no version, or one below 2, pcibench uses the
//! separate attributes, read back once when the view opens (a region that does not take would
//! sync something else without a word), then one write each per sync.

use crate::direction::Direction;
use crate::dma::buffers::udmabuf::parse_number;
use crate::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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

/// Whether a u-dma-buf of `driver_version` takes the packed sync command (see the module).
pub fn takes_packed(driver_version: Option<&str>) -> bool {
    driver_version
        .and_then(|v| v.trim().trim_start_matches('v').split('.').next()?.parse::<u32>().ok())
        .is_some_and(|major| major >= 2)
}

/// The region a packed command names: the size rounded up to the command's 16 bytes (syncing a
/// few bytes more is harmless and stays inside the buffer), or None where it cannot be packed
/// (an offset or size past 32 bits, or a rounded size past the buffer's end).
fn packed_region(offset: u64, len: u64, buf_len: u64) -> Option<(u64, u64)> {
    let size = len.checked_add(15)? & !15;
    let fits = offset.checked_add(size).is_some_and(|end| end <= buf_len);
    (offset <= u32::MAX as u64 && size <= 0xFFFF_FFF0 && size > 0 && fits).then_some((offset, size))
}

/// An attribute file open for writing, and its name for errors.
struct Attr {
    path: PathBuf,
    file: File,
}

impl Attr {
    fn open(class: &Path, name: &str) -> Result<Attr> {
        let path = class.join(name);
        let file = crate::file::open_regular_with(&path, rustix::fs::OFlags::WRONLY).map_err(|e| {
            let hint = format!("u-dma-buf's sync interface needs write permission: sudo chmod o+w {}", path.display());
            Error::io_hint("cannot open", &path, e, hint)
        })?;
        Ok(Attr { path, file })
    }

    fn write(&self, value: &str) -> Result<()> {
        // A regular file standing in for the attribute (tests) keeps only what was written last.
        let _ = self.file.set_len(0);
        self.file.write_all_at(value.as_bytes(), 0).map_err(|e| Error::io("cannot write", &self.path, e))
    }
}

/// The sync files of one view of a u-dma-buf, opened once.
pub struct SyncFiles {
    buf_len: u64,
    for_cpu: Attr,
    for_device: Attr,
    /// sync_offset, sync_size, sync_direction: the separate form, on drivers without the packed
    /// one (and for a region the packed form cannot name).
    region: [Attr; 3],
    packed: bool,
    /// Writes made for syncs so far: what a sync costs pcibench, counted (tests assert one).
    pub writes: u64,
}

impl SyncFiles {
    /// Open the sync files of the u-dma-buf `name` in `class` holding `buf_len` bytes; with
    /// `packed` false, the region attributes are checked once by writing the whole buffer's
    /// region and reading it back.
    pub fn open(class: &Path, name: &str, buf_len: u64, packed: bool) -> Result<SyncFiles> {
        let mut files = SyncFiles {
            buf_len,
            for_cpu: Attr::open(class, "sync_for_cpu")?,
            for_device: Attr::open(class, "sync_for_device")?,
            region: [
                Attr::open(class, "sync_offset")?,
                Attr::open(class, "sync_size")?,
                Attr::open(class, "sync_direction")?,
            ],
            packed,
            writes: 0,
        };
        if !packed {
            files.set_region(0, buf_len, Direction::H2c)?;
            files.writes = 0;
            for (attr, want) in [("sync_offset", 0), ("sync_size", buf_len), ("sync_direction", 1)] {
                let got = crate::file::read_trim(&class.join(attr)).and_then(|s| parse_number(&s));
                if got != Some(want) {
                    return Err(Error::Device(format!(
                        "u-dma-buf {name}: wrote {attr} = {want:#x} but it reads back {}: its syncs would not cover the region asked",
                        got.map_or("nothing".into(), |g| format!("{g:#x}"))
                    )));
                }
            }
        }
        Ok(files)
    }

    fn set_region(&mut self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        for (attr, v) in self.region.iter().zip([offset, len, direction_code(dir)]) {
            attr.write(&v.to_string())?;
        }
        self.writes += 3;
        Ok(())
    }

    /// Sync `len` bytes at `offset` for the CPU (`for_cpu`) or for the device: one write of the
    /// packed command, or the region's three attributes and the trigger where it cannot be packed.
    pub fn sync(&mut self, for_cpu: bool, offset: u64, len: u64, dir: Direction) -> Result<()> {
        let command = match packed_region(offset, len, self.buf_len).filter(|_| self.packed) {
            Some((o, size)) => sync_word(o, size, dir),
            // Every version takes the separate form: bit 0 alone syncs the attributes' region.
            None => {
                self.set_region(offset, len, dir)?;
                "1".to_string()
            }
        };
        let attr = if for_cpu { &self.for_cpu } else { &self.for_device };
        attr.write(&command)?;
        self.writes += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dma::cpu::udev::testing::fixture;
    use std::fs;

    #[test]
    fn the_packed_sync_word() {
        // offset 0x1000, size 0x2000, to device: 0x2000 | 1 << 2 | 1 = 0x2005.
        assert_eq!(sync_word(0x1000, 0x2000, Direction::H2c), "0x0000100000002005");
        assert_eq!(sync_word(0, 0x10000, Direction::C2h), "0x0000000000010009");
    }

    /// The proof: on a driver that takes the packed command, each sync is one write, to
    /// sync_for_cpu or sync_for_device, and nothing else is written; on one that does not, the
    /// region is set and read back once at open, then each sync is the three attributes and the
    /// trigger.
    #[test]
    fn one_write_per_sync_on_a_driver_that_takes_the_packed_command() {
        let (_t, h) = fixture(true);
        let c = h.path("/sys/class/u-dma-buf/udmabuf0");
        let attr = |a: &str| fs::read_to_string(c.join(a)).unwrap();
        let mut f = SyncFiles::open(&c, "udmabuf0", 65536, true).unwrap();
        assert_eq!(f.writes, 0, "opening writes nothing");
        for i in 0..100u64 {
            f.sync(true, i * 256, 256, Direction::C2h).unwrap();
            f.sync(false, i * 256, 256, Direction::H2c).unwrap();
            assert_eq!(f.writes, 2 * (i + 1), "one write per sync");
        }
        // The last of each: offset 99 * 256 = 0x6300, 0x100 | from-device (2) << 2 | 1 = 0x109.
        assert_eq!(attr("sync_for_cpu"), "0x0000630000000109");
        assert_eq!(attr("sync_for_device"), "0x0000630000000105");
        for a in ["sync_offset", "sync_size", "sync_direction"] {
            assert_eq!(attr(a), "0\n", "{a} untouched");
        }
        // A region the command cannot name (rounding past the end) goes the separate way.
        f.sync(true, 65528, 8, Direction::C2h).unwrap();
        assert_eq!(f.writes, 200 + 4);
        assert_eq!(
            (attr("sync_offset"), attr("sync_size"), attr("sync_for_cpu")),
            ("65528".into(), "8".into(), "1".into())
        );

        let mut old = SyncFiles::open(&c, "udmabuf0", 65536, false).unwrap();
        assert_eq!(
            (attr("sync_offset"), attr("sync_size"), attr("sync_direction")),
            ("0".into(), "65536".into(), "1".into())
        );
        old.sync(false, 4096, 512, Direction::H2c).unwrap();
        assert_eq!(old.writes, 4);
        assert_eq!(
            (attr("sync_offset"), attr("sync_size"), attr("sync_for_device")),
            ("4096".into(), "512".into(), "1".into())
        );
    }

    #[test]
    fn versions_and_regions() {
        assert!(takes_packed(Some("5.5.0")) && takes_packed(Some("2.0.0")) && takes_packed(Some("v4.5.2")));
        assert!(!takes_packed(Some("1.4.9")) && !takes_packed(None) && !takes_packed(Some("x")));
        assert_eq!(packed_region(0x1000, 0x800, 0x10000), Some((0x1000, 0x800)));
        assert_eq!(packed_region(0, 1, 0x10000), Some((0, 16)), "rounded up to the command's 16 bytes");
        assert_eq!(packed_region(0xfff8, 8, 0x10000), None, "rounding would pass the buffer's end");
        assert_eq!(packed_region(1 << 32, 16, 1 << 40), None, "offset past 32 bits");
    }
}
