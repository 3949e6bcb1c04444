//! A device opened for measurement, and the policy every measuring command shares: which BARs
//! PIO may use by default, who consented to writes and DMA, and which engine drives the card's
//! DMA. `measure` resolves requests with it; the CLI holds no device knowledge of its own.

use crate::access::traced::TracedDevice;
use crate::access::{DeviceAccess, Via};
use crate::device::{Device, Target};
use crate::dma::engines::{self, Detected, EngineOptions};
use crate::dma::{buffers, BufferSource, DmaAllocator, Engine};
use crate::host::Host;
use crate::trace::Tracer;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

/// A device, described once and opened on one access path.
pub struct Session {
    pub host: Host,
    pub device: Device,
    pub dev: Box<dyn DeviceAccess>,
    /// `expect_dma`: keep what opening DMA buffers needs when privilege is dropped.
    dma_to_come: AtomicBool,
    /// The device's NUMA node, which DMA buffers prefer, and where they went (made on first use).
    numa: std::sync::OnceLock<Option<std::sync::Arc<buffers::numa::NodePolicy>>>,
}

/// The engine to drive and how to open it (`--engine`, `--buffer`, `--dma-bits` and the engine
/// settings), as a request carries it; `None` means the default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineRequest {
    /// `--engine`; None picks the only engine found on the device (`sim`: a simulated card's own).
    pub engine: Option<String>,
    /// `--buffer`; None is the path's default (hugepages where the host has them).
    pub buffer: Option<BufferSource>,
    /// `--dma-bits`; None is the engine's default.
    pub dma_bits: Option<u32>,
    /// `--card-addr`: card address of the engine's memory window.
    pub card_addr: Option<u64>,
    /// `--card-size`: bytes of card memory in the window.
    pub card_size: Option<u64>,
    /// `--channel`.
    pub channel: Option<u8>,
    /// `--ring-size`: descriptors per ring.
    pub ring_size: Option<u32>,
    /// `--qdma-intr`: libqdma's interrupt mode for completion by interrupt (None: direct). Absent
    /// in older saved runs, and written only when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdma_intr: Option<crate::dma::engines::qdma::QdmaIntr>,
    /// `--mode mm|st`: which of a QDMA's engines to drive where it has both (None: MM there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdma_mode: Option<crate::dma::engines::qdma::st::Mode>,
    /// `--design qdma-example`: the far end asserted behind stream queues, and consent to write
    /// its user BAR registers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<crate::dma::engines::qdma::st::Design>,
    /// `--cmpt-trigger`: when QDMA stream queues' completion rings report (None: every entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmpt_trigger: Option<crate::dma::engines::qdma::CmptTrigger>,
    /// `--force` with `--buffer reserved:`: take a Reserved range the kernel command line did not
    /// reserve (firmware may use it; the run says so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// An engine ready to run, and the allocator its buffers come from.
pub struct DmaRig {
    pub engine: Box<dyn Engine>,
    pub alloc: Box<dyn DmaAllocator>,
    /// Where card address 0 of a transfer lies in the engine's window.
    pub card_offset: u64,
}

impl Session {
    pub fn open(host: &Host, target: &Target, via: Option<Via>) -> Result<Session> {
        let device = Device::describe(host, target)?;
        if device.simulated() {
            // A simulated card is host memory: nothing about it needs privilege, and its engine
            // models start threads of their own, which must not inherit any.
            crate::os::privilege::keep_only(0, &format!("describing {}, a simulated card", device.name()))?;
        }
        let dev = device.open(host, via)?;
        Ok(Session { host: host.clone(), device, dev, dma_to_come: AtomicBool::new(false), numa: Default::default() })
    }

    /// A session on a device opened by the caller (tests build cards of their own).
    pub fn with_device(host: &Host, device: Device, dev: Box<dyn DeviceAccess>) -> Session {
        Session { host: host.clone(), device, dev, dma_to_come: AtomicBool::new(false), numa: Default::default() }
    }

    /// Trace every register and config-space access to the device from now on, every DMA buffer
    /// made for it and what its engines report (`--trace`; `access::traced`). None: as it was.
    pub fn traced(mut self, trace: Option<Tracer>) -> Session {
        if let Some(t) = trace {
            t.note(
                "device",
                &format!("{} ({}) through {}", self.device.name(), self.device.info.ids(), self.dev.via()),
            );
            self.dev = Box::new(TracedDevice::new(self.dev, t));
        }
        self
    }

    /// Where this session's device is traced, if it is.
    pub fn tracer(&self) -> Option<&Tracer> {
        self.dev.tracer()
    }

    /// The DMA engines on the device, for `info`: found by their identifiers where reading them
    /// is harmless, on a device pcibench can open (no kernel driver bound, or vfio-pci). With
    /// `trace`, the registers the probes read are traced.
    pub fn engines_of(host: &Host, device: &Device, trace: Option<&Tracer>) -> Vec<Detected> {
        // Another driver's device would only be refused, after the in-use inventory (a /proc scan) that
        // explains the refusal: not worth its cost here.
        if device.info.driver.as_deref().is_some_and(|d| d != "vfio-pci") {
            if let Some(t) = trace {
                t.note(
                    "note",
                    &format!(
                        "{} is bound to {}: its engines were not looked for",
                        device.name(),
                        device.info.driver.as_deref().unwrap_or("")
                    ),
                );
            }
            return Vec::new();
        }
        match device.open(host, None) {
            Ok(dev) => {
                let dev: Box<dyn DeviceAccess> = match trace {
                    Some(t) => {
                        t.note("device", &format!("{} ({}) through {}", device.name(), device.info.ids(), dev.via()));
                        Box::new(TracedDevice::new(dev, t.clone()))
                    }
                    None => dev,
                };
                engines::detect(&device.info, dev.as_ref()).into_iter().flatten().collect()
            }
            Err(e) => {
                if let Some(t) = trace {
                    t.note("error", &format!("opening {}: {e}", device.name()));
                }
                Vec::new()
            }
        }
    }

    /// The DMA engines found on this session's device.
    pub fn engines(&self) -> Vec<Detected> {
        engines::detect(&self.device.info, self.dev.as_ref()).into_iter().flatten().collect()
    }

    /// BARs for PIO: the ones asked for, checked, or by default every memory BAR that holds no
    /// DMA engine's registers (writing test patterns into an engine's registers would program it).
    pub fn pio_bars(&self, asked: &[u8]) -> Result<Vec<u8>> {
        let addr = &self.device.info.address;
        for b in asked {
            match self.device.info.bar(*b) {
                None => {
                    return Err(Error::usage(format!(
                        "{addr} has no BAR{b}: `pcibench info {addr}` lists its BARs"
                    )))
                }
                Some(bar) if !bar.is_memory() => {
                    return Err(Error::usage(format!(
                        "BAR{b} of {addr} is an I/O port BAR: it cannot be memory-mapped (only memory BARs have PIO mappings); use --bar with a memory BAR"
                    )))
                }
                _ => {}
            }
        }
        if !asked.is_empty() {
            return Ok(asked.to_vec());
        }
        let blocks = engines::register_blocks(&self.device.info, self.dev.as_ref());
        let mut engine_bars: Vec<u8> = blocks.iter().map(|r| r.bar).collect();
        engine_bars.dedup();
        let bars: Vec<u8> = self
            .device
            .info
            .bars
            .iter()
            .filter(|b| b.is_memory() && !engine_bars.contains(&b.index))
            .map(|b| b.index)
            .collect();
        if bars.is_empty() {
            let addr = &self.device.info.address;
            return Err(Error::NothingToMeasure(if engine_bars.is_empty() {
                format!("{addr} has no memory BAR to measure: `pcibench info {addr}` lists its BARs")
            } else {
                let named: Vec<String> = engine_bars.iter().map(|b| format!("BAR{b}")).collect();
                // Registers are read at a width they decode (the widest).
                let width = blocks[0].widths.last().map_or(32, |w| w.bytes() * 8);
                format!(
                    "every memory BAR of {addr} holds DMA engine registers ({}), which PIO leaves alone by default (test patterns would program the engine): name one to measure it anyway, e.g. --bar {} --dir c2h --width {width} (reads only)",
                    named.join(", "),
                    engine_bars[0]
                )
            }));
        }
        Ok(bars)
    }

    /// The device's link health watch (the device and its ports up to the root); None for a
    /// simulated card.
    pub fn health(&self) -> Option<crate::pci::health::HealthProbe> {
        self.device.pci_address().map(|a| crate::pci::health::HealthProbe::new(&self.host, a))
    }

    /// Place the measuring thread (`--cpu`, or a CPU of the device's NUMA node) and describe
    /// where it runs, for the report.
    pub fn place(
        &self,
        placement: crate::bench::context::Placement,
        args: &[String],
    ) -> Result<crate::bench::context::Context> {
        crate::bench::context::place(&self.host, placement, self.device.numa_node(), args)
    }

    /// The device's NUMA node for its DMA buffers (None where sysfs names none), shared by every
    /// allocator of this session so the context can say where all of them went.
    pub fn buffer_node(&self) -> Option<std::sync::Arc<buffers::numa::NodePolicy>> {
        self.numa.get_or_init(|| buffers::numa::NodePolicy::for_node(self.device.numa_node())).clone()
    }

    /// DMA follows what is measured next (`pcibench run`: DMA after PIO): a no-IOMMU device
    /// keeps what opening its buffers needs until `buffers::allocator` has opened them.
    pub fn expect_dma(&self) {
        self.dma_to_come.store(true, Ordering::Relaxed);
    }

    /// Everything privileged is open by now (the device, and the DMA buffers unless DMA is still
    /// to come): the capabilities go before any measuring thread starts.
    pub fn drop_privilege(&self) -> Result<()> {
        use crate::os::privilege::{caps, keep_only, CAP_IPC_LOCK, CAP_SYS_ADMIN, CAP_SYS_RAWIO};
        let dma_to_come = self.dma_to_come.load(Ordering::Relaxed);
        let keep = if dma_to_come && self.dev.via() == crate::access::Via::VfioNoiommu {
            caps(&[CAP_SYS_RAWIO, CAP_SYS_ADMIN, CAP_IPC_LOCK])
        } else {
            caps(&[CAP_IPC_LOCK])
        };
        keep_only(keep, &format!("opening {}", self.device.name()))
    }

    /// `--io syscall` (one pread/pwrite per access) exists only on VFIO: a sysfs resource file of
    /// a memory BAR has no read/write (drivers/pci/pci-sysfs.c), and a simulated card has no
    /// syscall path to measure.
    pub fn check_io(&self, io: crate::access::IoMode) -> Result<()> {
        use crate::access::{IoMode, Via};
        match (io, self.dev.via()) {
            // vfio-user: one region read/write message per access, the same shape as a pread.
            (IoMode::Syscall, Via::Vfio | Via::VfioNoiommu | Via::VfioUser) | (IoMode::Mmap, _) => Ok(()),
            (IoMode::Syscall, _) if self.device.info.simulated => Err(Error::usage(format!(
                "--io syscall measures one pread/pwrite per access on a VFIO device; {} is a simulated card with no such path: drop --io",
                self.device.info.address
            ))),
            (IoMode::Syscall, via) => Err(Error::usage(format!(
                "--io syscall measures one pread/pwrite per access, which only VFIO offers for a memory BAR, not {via}: bind {} to vfio-pci (sudo pcibench setup {} --vfio) or drop --io",
                self.device.info.address, self.device.info.address
            ))),
        }
    }

    /// Whether host-to-card writes are allowed: always on a simulated card, else with the flag.
    pub fn may_write(&self, allow_write: bool) -> bool {
        allow_write || self.device.info.simulated
    }

    /// DMA makes the card read and write host memory: a real device needs the user's consent.
    pub fn check_dma_consent(&self, allow_dma: bool) -> Result<()> {
        if allow_dma || self.device.info.simulated {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "dma makes {} read and write host memory: add --allow-dma to consent to DMA on this device",
            self.device.info.address
        )))
    }

    /// One of the device's DMA buffers (VFIO-mapped, physical or a simulated card's), for the
    /// CPU-access measurement of `pcibench buffers`.
    pub fn cpu_buffer(&self, size: u64) -> Result<Box<dyn crate::dma::cpu::CpuBuffer>> {
        let alloc = buffers::allocator_on(
            &self.host,
            self.dev.as_ref(),
            &BufferSource::Hugepage,
            64,
            false,
            self.buffer_node(),
        )?;
        let len = usize::try_from(size).map_err(|_| Error::usage(format!("--size {size} is too large")))?;
        Ok(Box::new(crate::dma::cpu::anon::Anon::from_dma(alloc.alloc(len)?)))
    }

    /// `open_dma` for an option that needs an engine (`--load`, `--dma`): where there is none to
    /// drive (no engine found, no DMA on this access path), the option does not apply: a usage
    /// error naming it.
    pub fn open_dma_for(&self, option: &str, req: &EngineRequest) -> Result<DmaRig> {
        self.open_dma(req, None).map_err(|e| match e {
            Error::Unsupported(m) | Error::NothingToMeasure(m) => {
                Error::Usage(format!("{option} needs a DMA engine pcibench drives: {m}"))
            }
            e => e,
        })
    }

    /// The device's interrupts for completion by interrupt (`--irq`), as `req` asks: only VFIO
    /// and vfio-user deliver them to user space; elsewhere the option does not apply (a usage
    /// error saying why).
    pub fn interrupts(&self, req: crate::access::IrqRequest) -> Result<Box<dyn crate::access::Interrupts>> {
        self.dev.interrupts(req).map_err(|e| match e {
            Error::Unsupported(m) => Error::Usage(format!("--completion irq: {m}")),
            e => e,
        })
    }

    /// The BAR single-access latency reads by default: the device's first memory BAR, registers
    /// included (reads only, unless writes are allowed).
    pub fn first_memory_bar(&self) -> Result<u8> {
        self.device.info.bars.iter().find(|b| b.is_memory()).map(|b| b.index).ok_or_else(|| {
            Error::NothingToMeasure(format!(
                "{} has no memory BAR: `pcibench info {}` lists its BARs",
                self.device.info.address, self.device.info.address
            ))
        })
    }

    /// Find and open the DMA engine, with an allocator for buffers it can reach; `queues` is the
    /// most queues any run will use (engines with queues open that many).
    pub fn open_dma(&self, req: &EngineRequest, queues: Option<u16>) -> Result<DmaRig> {
        if let Some(b) = req.dma_bits.filter(|b| !(24..=64).contains(b)) {
            return Err(Error::usage(format!(
                "--dma-bits {b}: a PCI device drives 24 to 64 address bits (QEMU's edu: 28 by default, 32 with dma_mask=0xffffffff)"
            )));
        }
        if self.device.info.simulated {
            // A simulated card's engine reaches only the host buffers registered with it, at their
            // process addresses: there is no buffer to choose and no address width to limit.
            if let Some(b) = &req.buffer {
                return Err(Error::usage(format!(
                    "--buffer {b} does not apply to {}: a simulated card's engine reaches only its own host buffers (drop --buffer)",
                    self.device.info.address
                )));
            }
            if req.dma_bits.is_some() {
                return Err(Error::usage(format!(
                    "--dma-bits does not apply to {}: a simulated card's bus addresses are process addresses (drop --dma-bits)",
                    self.device.info.address
                )));
            }
        }
        let options = EngineOptions {
            card_addr: req.card_addr,
            card_size: req.card_size,
            channel: req.channel,
            queues,
            ring_size: req.ring_size,
            qdma_intr: req.qdma_intr,
            qdma_mode: req.qdma_mode,
            design: req.design,
            cmpt_trigger: req.cmpt_trigger,
        };
        let (driver, found) = engines::resolve(req.engine.as_deref(), &self.device.info, self.dev.as_ref())?;
        driver.check_options(&options)?;
        let bits = req.dma_bits.unwrap_or_else(|| driver.default_dma_bits());
        let source = match req.buffer.clone().unwrap_or(BufferSource::Hugepage) {
            BufferSource::Reserved { start, size, .. } => BufferSource::Reserved { start, size, force: req.force },
            b => b,
        };
        let alloc = buffers::allocator_on(&self.host, self.dev.as_ref(), &source, bits, req.force, self.buffer_node())?;
        let opened = driver.open(&found, &self.device.info, self.dev.as_ref(), alloc.as_ref(), &options)?;
        Ok(DmaRig { engine: opened.engine, alloc, card_offset: opened.card_offset })
    }
}
