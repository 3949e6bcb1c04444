use super::print_json;
use clap::Args;
use pcibench::host::Host;
use pcibench::linkctl::{self, LinkChange};
use pcibench::pci::PciAddress;
use pcibench::setup::{self, SetupOptions};
use std::process::ExitCode;

fn parse_gen(s: &str) -> Result<u8, String> {
    let g = s.trim().to_ascii_lowercase();
    let n = g.strip_prefix("gen").unwrap_or(&g);
    match n.parse::<u8>() {
        Ok(n @ 1..=6) => Ok(n),
        _ => Err(format!("invalid speed '{s}': use gen1 (2.5 GT/s), gen2, gen3, gen4, gen5 or gen6 (64 GT/s)")),
    }
}

#[derive(Args)]
#[command(after_help = "Examples:
  sudo pcibench link 03:00.0                                     the link's registers as the port holds them
  sudo pcibench link 03:00.0 --speed gen1 --retrain --allow-retrain   train it at 2.5 GT/s
  sudo pcibench link 03:00.0 --retrain --allow-retrain           retrain (after loading a bitstream over JTAG)")]
pub struct LinkArgs {
    /// The device: an endpoint (its link is its upstream port's) or a root or downstream port.
    #[arg(value_parser = |s: &str| super::parse_pci(s, "PCIe link to train"))]
    device: PciAddress,
    /// Target Link Speed for the port's Link Control 2: gen1 (2.5 GT/s) to gen6 (64 GT/s); the link
    /// trains to it at its next training (--retrain: now).
    #[arg(long, value_parser = parse_gen, value_name = "genN")]
    speed: Option<u8>,
    /// Retrain the link now (Link Control's Retrain Link) and wait for it to train.
    #[arg(long)]
    retrain: bool,
    /// Consent to change the link (traffic on it stops while it trains).
    #[arg(long)]
    allow_retrain: bool,
    /// Change it even when the running system uses a device below the port, or processes that
    /// could not be checked might; each overridden use is printed before anything changes.
    #[arg(long)]
    force: bool,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(host: &Host, a: LinkArgs) -> anyhow::Result<ExitCode> {
    let change = LinkChange { speed: a.speed, retrain: a.retrain };
    if (change.speed.is_some() || change.retrain) && !a.allow_retrain {
        anyhow::bail!(pcibench::Error::Refused(format!(
            "changing {}'s link stops the traffic on it while it trains: add --allow-retrain to consent",
            a.device
        )));
    }
    let notify: setup::Notify = std::sync::Arc::new(|m: &str| eprintln!("WARNING: {m}"));
    let opts = SetupOptions { force: a.force, notify: Some(notify), ..SetupOptions::from_env() };
    let r = linkctl::link(host, &a.device, change, &opts)?;
    if a.json {
        print_json(&r)?;
    } else {
        super::emit(&pcibench::report::ops::link_text(&r));
    }
    Ok(ExitCode::SUCCESS)
}
