//! Users' own device models (C, C++, SystemC, Verilator RTL) behind the small C ABI of
//! `include/pcibench_model.h`, as cards `pcibench serve --model PATH.so[:ARGS]` serves (docs/models.md).
//!
//! A loaded model becomes a simulated card like pcibench's own (`sim::SimCard`): each of its BARs
//! a `RegisterModel` whose accesses go to the model, its interrupts a `sim::irq::SimIrq` (so the
//! MSI-X table and PBA, masking and the config space's enables are pcibench's, as vfio-pci's are),
//! its DMA through the card's host map (where the server registers the client's DMA_MAPs). The
//! model only models the device; `access::sim::SimDevice` gives it its config space.
//!
//! - `abi`: the header's structs and symbols, mirrored;
//! - `thread`: the one thread that calls the model, and its time (`advance`);
//! - `describe`: its description checked and turned into a `DeviceInfo`;
//! - `host`: the callbacks (DMA, interrupts, log) and what a model does wrong through them;
//! - `crash`: a crash inside the model named by the call it was in.

pub mod abi;
mod crash;
pub mod describe;
mod host;
mod thread;

use crate::access::sim::SimDevice;
use crate::mmio::Width;
use crate::sim::host_map::HostMap;
use crate::sim::irq::SimIrq;
use crate::sim::{RegisterModel, SimBar, SimCard};
use crate::{Error, Result};
use describe::Described;
use host::HostCtx;
pub use host::{Log, MAX_DMA_CALL};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use thread::ModelThread;

/// `PATH.so[:ARGS]` as the user typed it: the model's file and the arguments for its create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub path: PathBuf,
    pub args: String,
}

impl std::str::FromStr for ModelSpec {
    type Err = String;

    /// Split at the first ':' (a path holding one is given whole when that file exists).
    fn from_str(s: &str) -> std::result::Result<ModelSpec, String> {
        if s.is_empty() {
            return Err("name the model's shared object: --model PATH.so[:ARGS]".into());
        }
        let (path, args) = match s.split_once(':') {
            Some(_) if Path::new(s).is_file() => (s, ""),
            Some((p, a)) => (p, a),
            None => (s, ""),
        };
        // dlopen(3) searches the library path for a bare name: a model is a file the user names.
        let path = if path.contains('/') { PathBuf::from(path) } else { Path::new(".").join(path) };
        Ok(ModelSpec { path, args: args.to_string() })
    }
}

impl std::fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())?;
        if !self.args.is_empty() {
            write!(f, ":{}", self.args)?;
        }
        Ok(())
    }
}

/// A model loaded and running on its thread.
pub struct Model {
    thread: ModelThread,
    ctx: Arc<HostCtx>,
    described: Described,
    name: &'static str,
}

impl Model {
    /// Load `spec`, create the model and check its description; `log` gets its log lines and
    /// pcibench's reports of it; `stop` is set when the model breaks (the server's stop flag).
    pub fn load(spec: &ModelSpec, log: Log, stop: Option<Arc<AtomicBool>>) -> Result<Arc<Model>> {
        if cfg!(target_feature = "crt-static") {
            // A static C library's dlopen(3) loads a second C library beside it, whose thread-local
            // storage the model's threads never set up: a C++ model crashes in its constructors.
            return Err(Error::Unsupported(
                "this pcibench is a static build, which cannot load a model (a static C library cannot dlopen a C++ model): serve it with a dynamically linked pcibench (cargo build --release)".into(),
            ));
        }
        if !spec.path.is_file() {
            return Err(Error::usage(format!(
                "no model at {}: build it first (docs/models.md), and give its path: --model PATH.so[:ARGS]",
                spec.path.display()
            )));
        }
        let file =
            spec.path.file_name().map_or_else(|| spec.path.display().to_string(), |n| n.to_string_lossy().into());
        let host = HostMap::new();
        let ctx = Arc::new(HostCtx::new(file.clone(), Arc::clone(&host), log, stop));
        let (thread, described) = ModelThread::start(&spec.path, &spec.args, Arc::clone(&ctx))?;
        // The card's name lives as long as the process: a server serves one model.
        let name: &'static str = Box::leak(file.into_boxed_str());
        ctx.vectors.store(described.vectors as u64, Ordering::Relaxed);
        if let Some(offers) = described.offers {
            let _ = ctx.irq.set(Arc::new(SimIrq::new(name, offers)));
        }
        Ok(Arc::new(Model { thread, ctx, described, name }))
    }

    /// The model as a device: its BARs, interrupts and DMA behind a config space of pcibench's.
    pub fn device(self: &Arc<Model>) -> SimDevice {
        let bars = self
            .described
            .info
            .bars
            .iter()
            .map(|b| {
                let regs: Arc<dyn RegisterModel> =
                    Arc::new(ModelBar { model: Arc::clone(self), index: b.index, size: b.size });
                (b.index, SimBar::Registers(regs))
            })
            .collect();
        let card = SimCard { bars, host: Arc::clone(&self.ctx.host), irq: self.ctx.irq.get().cloned() };
        let caps = self.described.own_caps.as_ref().map(|(at, b)| (*at, b.as_slice()));
        SimDevice::from_card_with(self.name, &self.described.info, card, self.described.msix_bar, caps)
    }

    /// Its file name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What its describe said, checked.
    pub fn described(&self) -> &Described {
        &self.described
    }

    /// Function reset (DEVICE_RESET): the model's registers; the config space stays.
    pub fn reset(&self) {
        self.thread.reset();
    }

    /// IOMMU faults so far (DMA outside the client's mappings, or with Bus Master off), and the
    /// first in words.
    pub fn faults(&self) -> (u64, Option<String>) {
        self.ctx.faults()
    }

    /// What broke the model (an impossible callback), if anything did.
    pub fn broken(&self) -> Option<String> {
        self.ctx.broken()
    }

    /// The card's view of host memory (for tests and benchmarks that register buffers in it).
    pub fn host_map(&self) -> &Arc<HostMap> {
        &self.ctx.host
    }
}

/// One BAR of the model: every access a call on the model thread.
struct ModelBar {
    model: Arc<Model>,
    index: u8,
    size: u64,
}

impl ModelBar {
    /// A status the header does not define breaks the model.
    fn undefined(&self, call: &str, status: i32) {
        self.model
            .ctx
            .break_with(format!("returned status {status} from {call}, which pcibench_model.h does not define"));
    }

    fn abort(&self, what: &str, offset: u64, width: Width) -> Error {
        Error::Device(format!(
            "the model {} answered the {}-byte {what} of BAR{}+{offset:#x} with a completer abort",
            self.model.name,
            width.bytes(),
            self.index
        ))
    }
}

/// All-ones in an access's bytes: what a request nothing claims completes with.
fn ones(width: Width) -> u64 {
    u64::MAX >> (64 - 8 * width.bytes() as u32)
}

impl RegisterModel for ModelBar {
    fn size(&self) -> u64 {
        self.size
    }

    fn check_width(&self, index: u8, width: Width) -> Result<()> {
        match width {
            Width::B8 | Width::B16 | Width::B32 | Width::B64 => Ok(()),
            w => Err(Error::Unsupported(format!(
                "BAR{index} of the model is reached 1, 2, 4 or 8 bytes at a time, not {w}"
            ))),
        }
    }

    fn read(&self, offset: u64, width: Width) -> u64 {
        self.try_read(offset, width).unwrap_or(ones(width))
    }

    fn try_read(&self, offset: u64, width: Width) -> Result<u64> {
        let (status, v) = self.model.thread.read(self.index as u32, offset, width.bytes() as u32);
        match status {
            abi::OK => Ok(v & ones(width)),
            abi::UNSUPPORTED => Ok(ones(width)),
            abi::ABORT => Err(self.abort("read", offset, width)),
            s => {
                self.undefined("pcibench_model_bar_read", s);
                Ok(ones(width))
            }
        }
    }

    fn write(&self, offset: u64, width: Width, value: u64) -> Result<()> {
        match self.model.thread.write(self.index as u32, offset, width.bytes() as u32, value & ones(width)) {
            abi::OK | abi::UNSUPPORTED => Ok(()),
            abi::ABORT => Err(self.abort("write", offset, width)),
            s => {
                self.undefined("pcibench_model_bar_write", s);
                Ok(())
            }
        }
    }

    fn set_bus_master(&self, on: bool) {
        self.model.ctx.bus_master.store(on, Ordering::Release);
    }

    fn conventional_pci(&self) -> bool {
        self.model.described.info.link.is_none()
    }

    fn pci_status(&self) -> u16 {
        self.model.ctx.status.load(Ordering::Relaxed)
    }

    fn clear_pci_status(&self, bits: u16) {
        self.model.ctx.status.fetch_and(!bits, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::ModelSpec;
    use std::path::PathBuf;

    #[test]
    fn a_spec_splits_at_the_first_colon_and_a_bare_name_is_a_file_here() {
        let s: ModelSpec = "/m/edu.so:dma_bits=32,dma_ns=0".parse().unwrap();
        assert_eq!((s.path, s.args.as_str()), (PathBuf::from("/m/edu.so"), "dma_bits=32,dma_ns=0"));
        let s: ModelSpec = "edu.so".parse().unwrap();
        assert_eq!((s.path, s.args.as_str()), (PathBuf::from("./edu.so"), ""));
        assert!("".parse::<ModelSpec>().is_err());
    }
}
