use super::parse_target;
use crate::cmd::pio::ViaArg;
use clap::Args;
use pcibench::access::{regs, IoMode, Mapping};
use pcibench::host::Host;
use pcibench::mmio::Width;
use pcibench::session::Session;
use pcibench::target::{self, Target};
use pcibench::units::parse_size;
use std::process::ExitCode;

fn parse_width(s: &str) -> Result<Width, String> {
    s.parse::<u32>().ok().and_then(Width::scalar).ok_or_else(|| format!("invalid width '{s}': use 8, 16, 32 or 64"))
}

fn parse_num(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|_| format!("invalid number '{s}': use decimal or 0x-hex"))
}

#[derive(Args)]
pub struct PeekArgs {
    #[arg(value_parser = parse_target)]
    device: Target,
    bar: u8,
    #[arg(value_parser = parse_num)]
    offset: u64,
    #[arg(long, value_parser = parse_width, default_value = "32")]
    width: Width,
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
}

#[derive(Args)]
pub struct PokeArgs {
    #[arg(value_parser = parse_target)]
    device: Target,
    bar: u8,
    #[arg(value_parser = parse_num)]
    offset: u64,
    #[arg(value_parser = parse_num)]
    value: u64,
    #[arg(long, value_parser = parse_width, default_value = "32")]
    width: Width,
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
    /// Consent to write to this device's BAR (not needed for sim).
    #[arg(long)]
    allow_write: bool,
}

fn digits(w: Width) -> usize {
    w.bytes() * 2
}

pub fn peek(host: &Host, a: PeekArgs) -> anyhow::Result<ExitCode> {
    let s = Session::open(host, &a.device, a.via.map(ViaArg::via))?;
    let region = s.dev.open_bar(a.bar, Mapping::Uc, IoMode::Mmap)?;
    let v = regs::peek(region.as_ref(), a.offset, a.width)?;
    println!("{} BAR{}+{:#x} = {:#0w$x}", s.info.address, a.bar, a.offset, v, w = digits(a.width) + 2);
    Ok(ExitCode::SUCCESS)
}

pub fn poke(host: &Host, a: PokeArgs) -> anyhow::Result<ExitCode> {
    let info = target::describe(host, &a.device)?;
    if !a.allow_write && !info.simulated {
        anyhow::bail!(pcibench::Error::Refused(format!(
            "poke writes to {} BAR{}: add --allow-write to consent to writing this device",
            info.address, a.bar
        )));
    }
    let s = Session::open(host, &a.device, a.via.map(ViaArg::via))?;
    let region = s.dev.open_bar(a.bar, Mapping::Uc, IoMode::Mmap)?;
    regs::poke(region.as_ref(), a.offset, a.width, a.value)?;
    println!("{} BAR{}+{:#x} <- {:#0w$x}", s.info.address, a.bar, a.offset, a.value, w = digits(a.width) + 2);
    Ok(ExitCode::SUCCESS)
}
