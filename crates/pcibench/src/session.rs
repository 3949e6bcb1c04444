//! A target opened for measurement, and the policy every measuring command shares: which BARs
//! PIO may use by default, who consented to writes and DMA, and which engine drives the card's
//! DMA. The CLI turns flags into these calls; it holds no device knowledge of its own.

use crate::access::{DeviceAccess, Via};
use crate::dma::engines::{self, Detected, EngineOptions};
use crate::dma::{buffers, BufferSource, DmaAllocator, Engine};
use crate::host::Host;
use crate::pci::DeviceInfo;
use crate::target::{self, Target};
use crate::{Error, Result};

/// A device, described and opened on one access path.
pub struct Session {
    pub host: Host,
    pub target: Target,
    pub info: DeviceInfo,
    pub dev: Box<dyn DeviceAccess>,
}

/// What every measuring command sets up the same way around its runner: where the thread runs,
/// the link that bounds the figures (or why none does), the link-health watch.
pub struct Measuring {
    pub context: crate::bench::context::Context,
    pub link: Option<crate::pci::link::Link>,
    pub limit_note: Option<String>,
    pub health: Option<crate::pci::health::HealthProbe>,
    /// The link's health when the measurement began, for the whole run's changes.
    pub health_start: Option<crate::pci::health::Snapshot>,
}

impl Measuring {
    /// Attach the context (with what changed in the link's health since the start) and the
    /// limit note to a runner's report.
    pub fn finish(&self, report: &mut crate::bench::result::Report) {
        let mut context = self.context.clone();
        if let (Some(h), Some(start)) = (&self.health, &self.health_start) {
            context.link_health = Some(crate::pci::health::changes(start, &h.snapshot()));
        }
        report.context = Some(context);
        report.limit_note = self.limit_note.clone();
    }
}

/// What `pcibench dma` asks for.
#[derive(Debug, Clone, Default)]
pub struct DmaRequest {
    /// `--engine`; None picks the only engine found on the device.
    pub engine: Option<String>,
    /// `--buffer`; None is the path's default (hugepages where the host has them).
    pub buffer: Option<BufferSource>,
    /// `--dma-bits`; None is the engine's default.
    pub dma_bits: Option<u32>,
    pub options: EngineOptions,
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
        let info = target::describe(host, target)?;
        if info.simulated {
            // A simulated card is host memory: nothing about it needs privilege, and its engine
            // models start threads of their own, which must not inherit any.
            crate::os::privilege::keep_only(0, &format!("describing {}, a simulated card", info.address));
        }
        let dev = target::open(host, target, &info, via)?;
        Ok(Session { host: host.clone(), target: *target, info, dev })
    }

    /// The DMA engines on the device, for `info`: found by their identifiers where reading them
    /// is harmless, on a device pcibench can open (no kernel driver bound, or vfio-pci).
    pub fn engines_of(host: &Host, target: &Target, info: &DeviceInfo) -> Vec<Detected> {
        // Another driver's device would only be refused, after the in-use inventory (a /proc scan) that
        // explains the refusal: not worth its cost here.
        if info.driver.as_deref().is_some_and(|d| d != "vfio-pci") {
            return Vec::new();
        }
        match target::open(host, target, info, None) {
            Ok(dev) => engines::detect(info, dev.as_ref()).into_iter().flatten().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// BARs for PIO: the ones asked for, checked, or by default every memory BAR that holds no
    /// DMA engine's registers (writing test patterns into an engine's registers would program it).
    pub fn pio_bars(&self, asked: &[u8]) -> Result<Vec<u8>> {
        let addr = &self.info.address;
        for b in asked {
            match self.info.bar(*b) {
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
        let engine_bars = engines::register_bars(&self.info, self.dev.as_ref());
        let bars: Vec<u8> = self
            .info
            .bars
            .iter()
            .filter(|b| b.is_memory() && !engine_bars.contains(&b.index))
            .map(|b| b.index)
            .collect();
        if bars.is_empty() {
            let addr = &self.info.address;
            return Err(Error::NothingToMeasure(if engine_bars.is_empty() {
                format!("{addr} has no memory BAR to measure: `pcibench info {addr}` lists its BARs")
            } else {
                let named: Vec<String> = engine_bars.iter().map(|b| format!("BAR{b}")).collect();
                format!(
                    "every memory BAR of {addr} holds DMA engine registers ({}), which PIO leaves alone by default (test patterns would program the engine): name one to measure it anyway, e.g. --bar {} --dir c2h (reads only)",
                    named.join(", "),
                    engine_bars[0]
                )
            }));
        }
        Ok(bars)
    }

    /// The link that bounds the figures (None for a simulated card or a device without a PCIe
    /// link), and the sentence saying why there is none.
    pub fn bounding_link(&self) -> (Option<crate::pci::link::Link>, Option<String>) {
        match self.info.bounding_link() {
            Ok(l) => (Some(l), None),
            Err(why) => (None, Some(why)),
        }
    }

    /// The device's link health watch (the device and its ports up to the root); None for a
    /// simulated card.
    pub fn health(&self) -> Option<crate::pci::health::HealthProbe> {
        match &self.target {
            Target::Pci(a) => Some(crate::pci::health::HealthProbe::new(&self.host, a)),
            Target::Sim(_) => None,
        }
    }

    /// (index, size) of every BAR.
    pub fn bar_sizes(&self) -> Vec<(u8, u64)> {
        self.info.bars.iter().map(|b| (b.index, b.size)).collect()
    }

    /// Place the measuring thread (`--cpu`, or a CPU of the device's NUMA node) and describe
    /// where it runs, for the report.
    pub fn place(
        &self,
        placement: crate::bench::context::Placement,
        args: &[String],
    ) -> Result<crate::bench::context::Context> {
        crate::bench::context::place(&self.host, placement, self.info.numa_node, args)
    }

    /// Place the measuring thread and gather what a runner needs besides its plan. Everything
    /// privileged is open by now: the capabilities go before any measuring thread starts.
    pub fn measuring(&self, placement: crate::bench::context::Placement, args: &[String]) -> Result<Measuring> {
        self.drop_privilege(false);
        self.measuring_as_is(placement, args)
    }

    /// `measuring` for a caller that opens the DMA buffers after PIO (`pcibench run`): a no-IOMMU
    /// device keeps what its buffers' source needs until `buffers::allocator` has opened it.
    pub fn measuring_before_dma(
        &self,
        placement: crate::bench::context::Placement,
        args: &[String],
    ) -> Result<Measuring> {
        self.drop_privilege(true);
        self.measuring_as_is(placement, args)
    }

    fn drop_privilege(&self, dma_to_come: bool) {
        use crate::os::privilege::{caps, keep_only, CAP_IPC_LOCK, CAP_SYS_ADMIN, CAP_SYS_RAWIO};
        let keep = if dma_to_come && self.dev.via() == crate::access::Via::VfioNoiommu {
            caps(&[CAP_SYS_RAWIO, CAP_SYS_ADMIN, CAP_IPC_LOCK])
        } else {
            caps(&[CAP_IPC_LOCK])
        };
        keep_only(keep, &format!("opening {}", self.info.address));
    }

    fn measuring_as_is(&self, placement: crate::bench::context::Placement, args: &[String]) -> Result<Measuring> {
        let (link, limit_note) = self.bounding_link();
        let health = self.health();
        let health_start = health.as_ref().map(|h| h.snapshot());
        Ok(Measuring { context: self.place(placement, args)?, link, limit_note, health, health_start })
    }

    /// `--io syscall` (one pread/pwrite per access) exists only on VFIO: a sysfs resource file of
    /// a memory BAR has no read/write (drivers/pci/pci-sysfs.c), and a simulated card has no
    /// syscall path to measure.
    pub fn check_io(&self, io: crate::access::IoMode) -> Result<()> {
        use crate::access::{IoMode, Via};
        match (io, self.dev.via()) {
            (IoMode::Syscall, Via::Vfio | Via::VfioNoiommu) | (IoMode::Mmap, _) => Ok(()),
            (IoMode::Syscall, _) if self.info.simulated => Err(Error::usage(format!(
                "--io syscall measures one pread/pwrite per access on a VFIO device; {} is a simulated card with no such path: drop --io",
                self.info.address
            ))),
            (IoMode::Syscall, via) => Err(Error::usage(format!(
                "--io syscall measures one pread/pwrite per access, which only VFIO offers for a memory BAR, not {via}: bind {} to vfio-pci (sudo pcibench setup {} --vfio) or drop --io",
                self.info.address, self.info.address
            ))),
        }
    }

    /// Whether host-to-card writes are allowed: always on a simulated card, else with the flag.
    pub fn may_write(&self, allow_write: bool) -> bool {
        allow_write || self.info.simulated
    }

    /// DMA makes the card read and write host memory: a real device needs the user's consent.
    pub fn check_dma_consent(&self, allow_dma: bool) -> Result<()> {
        if allow_dma || self.info.simulated {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "dma makes {} read and write host memory: add --allow-dma to consent to DMA on this device",
            self.info.address
        )))
    }

    /// One of the device's DMA buffers (VFIO-mapped, physical or a simulated card's), for the
    /// CPU-access measurement of `pcibench buffers`.
    pub fn cpu_buffer(&self, size: u64) -> Result<Box<dyn crate::dma::cpu::CpuBuffer>> {
        let alloc = buffers::allocator(&self.host, self.dev.as_ref(), &BufferSource::Hugepage, 64)?;
        let len = usize::try_from(size).map_err(|_| Error::usage(format!("--size {size} is too large")))?;
        Ok(Box::new(crate::dma::cpu::anon::Anon::from_dma(alloc.alloc(len)?)))
    }

    /// `open_dma` for an option that needs an engine (`--load`, `--dma`): where there is none to
    /// drive (no engine found, no DMA on this access path), the option does not apply: a usage
    /// error naming it.
    pub fn open_dma_for(&self, option: &str, req: &DmaRequest) -> Result<DmaRig> {
        self.open_dma(req).map_err(|e| match e {
            Error::Unsupported(m) | Error::NothingToMeasure(m) => {
                Error::Usage(format!("{option} needs a DMA engine pcibench drives: {m}"))
            }
            e => e,
        })
    }

    /// The device's interrupt for completion by MSI (`--irq`): only VFIO delivers one to user
    /// space; elsewhere the option does not apply (a usage error saying why).
    pub fn interrupt(&self) -> Result<Box<dyn crate::access::Interrupt>> {
        self.dev.interrupt().map_err(|e| match e {
            Error::Unsupported(m) => Error::Usage(format!("--irq: {m}")),
            e => e,
        })
    }

    /// The BAR single-access latency reads by default: the device's first memory BAR, registers
    /// included (reads only, unless writes are allowed).
    pub fn first_memory_bar(&self) -> Result<u8> {
        self.info.bars.iter().find(|b| b.is_memory()).map(|b| b.index).ok_or_else(|| {
            Error::NothingToMeasure(format!(
                "{} has no memory BAR: `pcibench info {}` lists its BARs",
                self.info.address, self.info.address
            ))
        })
    }

    /// Find and open the DMA engine, with an allocator for buffers it can reach.
    pub fn open_dma(&self, req: &DmaRequest) -> Result<DmaRig> {
        if let Some(b) = req.dma_bits.filter(|b| !(24..=64).contains(b)) {
            return Err(Error::usage(format!(
                "--dma-bits {b}: a PCI device drives 24 to 64 address bits (QEMU's edu: 28 by default, 32 with dma_mask=0xffffffff)"
            )));
        }
        if self.info.simulated {
            // A simulated card's engine reaches only the host buffers registered with it, at their
            // process addresses: there is no buffer to choose and no address width to limit.
            if let Some(b) = &req.buffer {
                return Err(Error::usage(format!(
                    "--buffer {b} does not apply to {}: a simulated card's engine reaches only its own host buffers (drop --buffer)",
                    self.info.address
                )));
            }
            if req.dma_bits.is_some() {
                return Err(Error::usage(format!(
                    "--dma-bits does not apply to {}: a simulated card's bus addresses are process addresses (drop --dma-bits)",
                    self.info.address
                )));
            }
        }
        let (driver, found) = engines::resolve(req.engine.as_deref(), &self.info, self.dev.as_ref())?;
        driver.check_options(&req.options)?;
        let bits = req.dma_bits.unwrap_or_else(|| driver.default_dma_bits());
        let source = req.buffer.clone().unwrap_or(BufferSource::Hugepage);
        let alloc = buffers::allocator(&self.host, self.dev.as_ref(), &source, bits)?;
        let opened = driver.open(&found, self.dev.as_ref(), alloc.as_ref(), &req.options)?;
        Ok(DmaRig { engine: opened.engine, alloc, card_offset: opened.card_offset })
    }
}
