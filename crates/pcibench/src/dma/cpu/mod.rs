//! DMA buffers as the CPU sees them (`pcibench buffers`, seed 003's test): every kind of buffer a
//! card can be given, opened for CPU access by `mmap` and, where the kernel interface has one, by
//! `read()`/`write()` on its file; cached with explicit sync calls around the access, or opened
//! O_SYNC so the mapping's memory type does the work. One file per kind behind `CpuBuffer`.
//!
//! Kinds: plain host memory (heap, 2 MiB hugepages: coherent, nothing to sync), a device's DMA
//! buffers (VFIO-mapped, physical or a simulated card's: the same, through `DmaBuffer`), u-dma-buf
//! (`/dev/NAME` + `/sys/class/u-dma-buf/NAME/`: file I/O, O_SYNC and partial sync) and mainline
//! `/dev/udmabuf` (a dma-buf made from a sealed memfd: mmap, DMA_BUF_IOCTL_SYNC).

pub mod anon;
pub mod dmabuf;
pub mod udev;
pub mod udev_sync;

use crate::direction::Direction;
use crate::host::Host;
use crate::mmio::MemType;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// How the CPU reaches the buffer's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Loads and stores through a mapping (the copy routines of `--width`).
    Mmap,
    /// read()/write() on the buffer's device file.
    File,
}

impl Access {
    pub fn name(&self) -> &'static str {
        match self {
            Access::Mmap => "mmap",
            Access::File => "file",
        }
    }
}

/// How CPU and device views are kept coherent for one access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sync {
    /// Plain cache-coherent host memory: nothing to do.
    Coherent,
    /// Cached mapping, bracketed by sync-for-CPU before and sync-for-device after (seed 003's sync=0).
    Explicit,
    /// Opened O_SYNC: the mapping's memory type is what the buffer's sync mode says (seed 003's sync=1).
    OSync,
}

impl Sync {
    /// seed 003's `sync=` value.
    pub fn seed_value(&self) -> u8 {
        u8::from(*self == Sync::OSync)
    }
}

/// A buffer opened for one access: a CPU pointer, and the file and sync calls where it has them.
pub trait CpuView {
    /// The start of the mapping (`len()` bytes).
    fn ptr(&self) -> *mut u8;
    /// write() the whole of `data` at `offset` of the device file.
    fn write_file(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let _ = (offset, data);
        Err(Error::Unsupported("this buffer has no device file to write()".into()))
    }
    /// read() `out.len()` bytes at `offset` of the device file.
    fn read_file(&mut self, offset: u64, out: &mut [u8]) -> Result<()> {
        let _ = (offset, out);
        Err(Error::Unsupported("this buffer has no device file to read()".into()))
    }
    /// Hand `[offset, offset+len)` to the CPU before it accesses it (`dir`: which way the data
    /// goes next: h2c when the CPU writes for the device, c2h when it reads what the device wrote).
    fn sync_for_cpu(&mut self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        let _ = (offset, len, dir);
        Ok(())
    }
    /// Hand the region back to the device after the CPU's access.
    fn sync_for_device(&mut self, offset: u64, len: u64, dir: Direction) -> Result<()> {
        let _ = (offset, len, dir);
        Ok(())
    }
}

/// One kind of buffer, ready to be opened for CPU access.
pub trait CpuBuffer {
    /// What it is, e.g. "u-dma-buf udmabuf0" or "/dev/udmabuf (memfd dma-buf)".
    fn name(&self) -> String;
    /// The kind of buffer, as `--buffer` names it (`heap`, `u-dma-buf`, `udmabuf`).
    fn kind(&self) -> String {
        self.name()
    }
    /// The file it is reached through, where there is one (`/dev/udmabuf0`).
    fn path(&self) -> Option<String> {
        None
    }
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Facts worth printing (size, physical address, coherence, sync mode, driver version).
    fn facts(&self) -> Vec<(String, String)> {
        vec![("size".into(), self.len().to_string())]
    }
    /// The ways in: mmap always; file where the interface has read()/write().
    fn accesses(&self) -> Vec<Access> {
        vec![Access::Mmap]
    }
    /// The coherence modes that apply.
    fn syncs(&self) -> Vec<Sync> {
        vec![Sync::Coherent]
    }
    /// The memory type a CPU access in `sync` mode gets, in words.
    fn memory_type(&self, sync: Sync) -> String;
    /// The same as the copy routines take it (what picks their loads): host memory is
    /// write-back unless the buffer's interface maps it otherwise.
    fn mem_type(&self, sync: Sync) -> MemType {
        let _ = sync;
        MemType::Wb
    }
    /// Open a view for one access in `sync` mode.
    fn open(&self, sync: Sync) -> Result<Box<dyn CpuView + '_>>;
}

/// What `pcibench buffers --buffer` takes, as `--help` and the parse error list it: one word per
/// `Kind` variant (`from_str` matches these; a test holds the two together).
pub const KINDS: &[&str] = &["heap", "hugepage", "udmabuf", "u-dma-buf:NAME", "device"];

/// `--buffer`: which kinds to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Heap,
    Hugepage,
    /// u-dma-buf `NAME`.
    UDmaBuf(String),
    /// Mainline `/dev/udmabuf`.
    Udmabuf,
    /// The DMA buffers of the device named with `--device` (VFIO-mapped, physical, simulated).
    Device,
}

serde_as_text!(Kind);

/// As `--buffer` names it.
impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Heap => f.write_str("heap"),
            Kind::Hugepage => f.write_str("hugepage"),
            Kind::UDmaBuf(n) => write!(f, "u-dma-buf:{n}"),
            Kind::Udmabuf => f.write_str("udmabuf"),
            Kind::Device => f.write_str("device"),
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Kind> {
        Ok(match s {
            "heap" => Kind::Heap,
            "hugepage" => Kind::Hugepage,
            "udmabuf" => Kind::Udmabuf,
            "device" => Kind::Device,
            _ => match s.strip_prefix("u-dma-buf:") {
                Some(n) if !n.is_empty() && !n.contains('/') && !n.starts_with('.') => Kind::UDmaBuf(n.to_string()),
                _ => {
                    return Err(Error::usage(format!(
                        "invalid buffer '{s}': use {} (udmabuf: Linux's /dev/udmabuf; device: with --device)",
                        crate::text::or_list(KINDS)
                    )))
                }
            },
        })
    }
}

/// Every kind this host has (the default for `pcibench buffers`): heap and hugepages always,
/// `/dev/udmabuf` when its module is loaded, and every u-dma-buf in /sys/class/u-dma-buf.
pub fn discover(host: &Host) -> Vec<Kind> {
    let mut v = vec![Kind::Heap, Kind::Hugepage];
    if host.path("/dev/udmabuf").exists() {
        v.push(Kind::Udmabuf);
    }
    let mut names: Vec<String> = std::fs::read_dir(host.path("/sys/class/u-dma-buf"))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    names.sort();
    v.extend(names.into_iter().map(Kind::UDmaBuf));
    v
}

/// Open a kind of buffer of `size` bytes (u-dma-buf: its own size unless `size` asks for less).
pub fn open(host: &Host, kind: &Kind, size: Option<u64>) -> Result<Box<dyn CpuBuffer>> {
    let want = |default: u64| size.unwrap_or(default);
    Ok(match kind {
        Kind::Heap => Box::new(anon::Anon::new(want(16 << 20), false)?),
        Kind::Hugepage => Box::new(anon::Anon::new(want(16 << 20), true)?),
        Kind::UDmaBuf(name) => Box::new(udev::UDmaBuf::open(host, name, size)?),
        Kind::Udmabuf => Box::new(dmabuf::MemfdDmaBuf::new(host, want(16 << 20))?),
        Kind::Device => {
            return Err(Error::usage(
                "--buffer device needs --device ADDR (or sim): the device whose DMA buffers to measure",
            ))
        }
    })
}

impl Kind {
    /// What the kind is called before it is opened, for messages.
    pub fn label(&self) -> String {
        match self {
            Kind::Heap => "heap".into(),
            Kind::Hugepage => "2 MiB hugepages".into(),
            Kind::UDmaBuf(n) => format!("u-dma-buf {n}"),
            Kind::Udmabuf => "/dev/udmabuf".into(),
            Kind::Device => "the device's DMA buffers".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_bad_names_say_what_to_type() {
        assert_eq!("heap".parse::<Kind>().unwrap(), Kind::Heap);
        assert_eq!("u-dma-buf:udmabuf0".parse::<Kind>().unwrap(), Kind::UDmaBuf("udmabuf0".into()));
        for bad in ["u-dma-buf:", "u-dma-buf:../x", "pinned"] {
            let e = bad.parse::<Kind>().unwrap_err().to_string();
            assert!(e.contains("u-dma-buf:NAME") && !e.contains('\n'), "{e}");
        }
    }

    /// The list `--help` and the refusal show is what the parser takes, one entry per kind.
    #[test]
    fn every_listed_kind_parses_and_each_is_another_kind() {
        let parsed: Vec<Kind> = KINDS.iter().map(|s| s.replace("NAME", "udmabuf0").parse().unwrap()).collect();
        let kinds: std::collections::HashSet<_> = parsed.iter().map(std::mem::discriminant).collect();
        assert_eq!(kinds.len(), KINDS.len());
        let e = "pinned".parse::<Kind>().unwrap_err().to_string();
        assert!(KINDS.iter().all(|k| e.contains(k)), "{e}");
    }

    #[test]
    fn discovery_lists_what_the_host_has() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::with_root(t.path());
        assert_eq!(discover(&h), vec![Kind::Heap, Kind::Hugepage]);
        std::fs::create_dir_all(h.path("/sys/class/u-dma-buf/udmabuf1")).unwrap();
        std::fs::create_dir_all(h.path("/sys/class/u-dma-buf/udmabuf0")).unwrap();
        std::fs::create_dir_all(h.path("/dev")).unwrap();
        std::fs::write(h.path("/dev/udmabuf"), "").unwrap();
        assert_eq!(
            discover(&h),
            vec![
                Kind::Heap,
                Kind::Hugepage,
                Kind::Udmabuf,
                Kind::UDmaBuf("udmabuf0".into()),
                Kind::UDmaBuf("udmabuf1".into())
            ]
        );
    }
}
