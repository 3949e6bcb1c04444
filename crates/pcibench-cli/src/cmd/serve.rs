//! `pcibench serve`: a simulated card, or a user's own device model (`--model PATH.so[:ARGS]`,
//! docs/models.md), as a vfio-user server on a UNIX socket, for the vfio-user access path
//! (`vfio-user:SOCKET`) and QEMU's vfio-user-pci to drive across a process boundary.

use clap::Args;
use pcibench::access::vfio_user::server::{bind, serve, serve_device, serve_traced, ServeOptions, Serving};
use pcibench::model::{Model, ModelSpec};
use pcibench::sim::SimId;
use pcibench::trace::Tracer;
use pcibench::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench serve sim --socket /tmp/sim.sock &
  pcibench info vfio-user:/tmp/sim.sock
  pcibench dma vfio-user:/tmp/sim.sock --size 64K
  pcibench serve --model ./edu.so --socket /tmp/edu.sock &    a model of your own (docs/models.md)

Serves one client at a time (each command is one; QEMU's vfio-user-pci is one), as vfio-pci gives a device one
owner: a client that connects while another holds the card is refused, naming the holder. Runs until SIGINT or
SIGTERM (or, with --once, until its first client leaves). The card lives as long as the server: what one command
writes to its BARs the next one reads.")]
pub struct ServeArgs {
    /// The simulated card to serve: sim, sim-qdma, sim-nvram, sim-xdma-st.
    #[arg(value_parser = parse_card, required_unless_present = "model", conflicts_with = "model")]
    card: Option<SimId>,
    /// A device model of your own: a shared object implementing pcibench_model.h, and the
    /// arguments its create gets after a colon (docs/models.md).
    #[arg(long, value_name = "PATH.so[:ARGS]")]
    model: Option<ModelSpec>,
    /// The UNIX socket to make and listen on: a new name (anything there, a socket a stopped server
    /// left included, is refused); removed when serve ends. Under sudo it is made as you.
    #[arg(long)]
    socket: PathBuf,
    /// Offer no BAR as mmap-able: every BAR access is a region read/write message.
    #[arg(long)]
    no_mmap: bool,
    /// Exit when the first client disconnects.
    #[arg(long)]
    once: bool,
    /// Do not tell clients this is pcibench's own card: they treat it as a third-party model (info
    /// from its config space; --allow-write and --allow-dma apply).
    #[arg(long)]
    anonymous: bool,
    /// The most client memory one client may have DMA_MAPped at once (its DMA_MAP beyond it is refused, ENOSPC).
    #[arg(long, default_value = "64G", value_parser = |s: &str| pcibench::units::parse_size(s).map_err(|e| e.to_string()))]
    max_dma: u64,
    /// Build the QDMA card (sim-qdma, sim-qdma-st) as this IP variant: soft3 (the default), eqdma4, eqdma5,
    /// cpm4, cpm5 (what its GLBL2_MISC_CAP reads, and the register layout that follows from it).
    #[arg(long, value_name = "VARIANT", value_parser = parse_qdma_ip)]
    qdma_ip: Option<u32>,
    /// Build the NVRAM card (sim-nvram) with this much memory: 128M, 256M, 512M, 1G (the default) or 2G, the
    /// sizes its memory-size register can say.
    #[arg(long, value_name = "SIZE", value_parser = parse_nvram_size)]
    nvram_size: Option<u64>,
    /// Build the NVRAM card (sim-nvram) as the conventional PCI function the MM-5425CN is (MWI Enable and the
    /// latency timer writable), as its own driver umem.c expects, not the PCI Express function seed 001 showed.
    #[arg(long)]
    conventional_pci: bool,
    /// Write every register access a client makes through messages (the register BARs; memory BARs a client
    /// maps are not seen) to FILE, one JSON line each as `--trace` writes them (docs/trace.md).
    #[arg(long, value_name = "FILE", value_parser = parse_trace)]
    trace: Option<PathBuf>,
}

fn parse_qdma_ip(s: &str) -> Result<u32, String> {
    pcibench::sim::qdma::layout::misc_cap_named(s).ok_or_else(|| {
        let names: Vec<&str> = pcibench::sim::qdma::layout::NAMED.iter().map(|(n, _)| *n).collect();
        format!("{s} is not a QDMA variant: {}", names.join(", "))
    })
}

fn parse_nvram_size(s: &str) -> Result<u64, String> {
    let n = pcibench::units::parse_size(s).map_err(|e| e.to_string())?;
    match pcibench::sim::nvram::model::size_code(n) {
        Some(_) => Ok(n),
        None => Err(format!("{s} is not an NVRAM card size: 128M, 256M, 512M, 1G or 2G")),
    }
}

fn parse_trace(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    pcibench::trace::check_destination("--trace", &p).map_err(|e| e.to_string())?;
    Ok(p)
}

fn parse_card(s: &str) -> Result<SimId, String> {
    SimId::from_name(s).ok_or_else(|| format!("{s} is not a simulated card: {}", SimId::names()))
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let stop = super::interrupt_flag();
    let opts = ServeOptions {
        mmap: !a.no_mmap,
        once: a.once,
        anonymous: a.anonymous,
        max_dma: a.max_dma,
        qdma_misc_cap: a.qdma_ip,
        nvram_size: a.nvram_size,
        nvram_conventional: a.conventional_pci,
    };
    let log = |line: &str| eprintln!("pcibench serve: {line}");
    let Some(spec) = a.model else {
        let card = a.card.ok_or_else(|| Error::usage("name a simulated card or --model PATH.so"))?;
        let trace = match &a.trace {
            Some(path) => {
                Some(Tracer::create(path, pcibench::trace::DEFAULT_LIMIT, &std::env::args().collect::<Vec<_>>())?)
            }
            None => None,
        };
        let mut listener = bind(&a.socket)?;
        eprintln!("pcibench: serving {} on vfio-user:{}", card.name(), a.socket.display());
        let result = match trace {
            Some(trace) => serve_traced(&listener, card, opts, &stop, &log, trace),
            None => serve(&listener, card, opts, &stop, &log),
        };
        // The socket it made goes with the server (only that one: see file::socket).
        if let Some(left) = listener.remove() {
            eprintln!("pcibench: warning: {left}");
        }
        result?;
        return Ok(ExitCode::SUCCESS);
    };
    if a.trace.is_some() || a.qdma_ip.is_some() || a.nvram_size.is_some() || a.conventional_pci {
        return Err(Error::usage(
            "--trace, --qdma-ip, --nvram-size and --conventional-pci apply to the simulated cards, not to --model",
        )
        .into());
    }
    // The model first: a model that does not load leaves no socket behind.
    let model =
        Model::load(&spec, Arc::new(move |line: &str| eprintln!("pcibench serve: {line}")), Some(Arc::clone(&stop)))?;
    let mut listener = bind(&a.socket)?;
    eprintln!("pcibench: serving the model {spec} on vfio-user:{}", a.socket.display());
    let reset = Arc::clone(&model);
    let serving = Serving::Model { name: model.name().to_string(), reset: Box::new(move || reset.reset()) };
    let result = serve_device(&listener, model.device(), serving, opts, &stop, &log);
    if let Some(left) = listener.remove() {
        eprintln!("pcibench: warning: {left}");
    }
    result?;
    // What the model did wrong fails the run, named, as the kernel's IOMMU fault log names a device's.
    if let Some(why) = model.broken() {
        return Err(Error::Device(format!("the model {} {why}", model.name())).into());
    }
    if let (n @ 1.., Some(first)) = model.faults() {
        return Err(Error::Device(format!(
            "the model {} made {n} DMA access{} the IOMMU refused; the first: {first}",
            model.name(),
            if n == 1 { "" } else { "es" }
        ))
        .into());
    }
    Ok(ExitCode::SUCCESS)
}
