//! `pcibench serve`: a simulated card as a vfio-user server on a UNIX socket, for the vfio-user
//! access path (`vfio-user:SOCKET`) to drive across a process boundary.

use clap::Args;
use pcibench::access::vfio_user::server::{bind, serve, ServeOptions};
use pcibench::sim::SimId;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench serve sim --socket /tmp/sim.sock &
  pcibench info vfio-user:/tmp/sim.sock
  pcibench dma vfio-user:/tmp/sim.sock --size 64K

Serves its clients (each command is one) until SIGINT or SIGTERM (or, with --once, until its first client leaves).
The card lives as long as the server: what one command writes to its BARs the next one reads.")]
pub struct ServeArgs {
    /// The simulated card to serve: sim, sim-qdma, sim-nvram, sim-xdma-st.
    #[arg(value_parser = parse_card)]
    card: SimId,
    /// The UNIX socket to listen on (a stale socket there is replaced; any other file is refused).
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
}

fn parse_card(s: &str) -> Result<SimId, String> {
    SimId::from_name(s).ok_or_else(|| format!("{s} is not a simulated card: {}", SimId::names()))
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let stop = super::interrupt_flag();
    let listener = bind(&a.socket)?;
    eprintln!("pcibench: serving {} on vfio-user:{}", a.card.name(), a.socket.display());
    let opts = ServeOptions { mmap: !a.no_mmap, once: a.once, anonymous: a.anonymous };
    let result = serve(&listener, a.card, opts, &stop, &|line| eprintln!("pcibench serve: {line}"));
    // The socket is ours: gone with the server, so the next one binds without a stale file.
    let _ = std::fs::remove_file(&a.socket);
    result?;
    Ok(ExitCode::SUCCESS)
}
