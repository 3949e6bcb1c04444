use super::parse_target;
use crate::cmd::pio::ViaArg;
use clap::Args;
use pcibench::access::{regs, IoMode, Mapping};
use pcibench::device::{self, Target};
use pcibench::host::Host;
use pcibench::mmio::Width;
use pcibench::session::Session;
use pcibench::units::parse_size;
use std::process::ExitCode;

fn parse_width(s: &str) -> Result<Width, String> {
    s.parse::<u32>().ok().and_then(Width::scalar).ok_or_else(|| format!("invalid width '{s}': use 8, 16, 32 or 64"))
}

fn parse_num(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|_| format!("invalid number '{s}': use decimal or 0x-hex"))
}

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench peek 00:01.0 0 0              the register at BAR0 + 0 (QEMU's edu reads 0x010000ed)
  pcibench peek sim 4 0x2000             the simulated card's XDMA IRQ-block identifier
  pcibench peek 03:00.0 2 0x100 --width 64 --via vfio")]
pub struct PeekArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    device: Target,
    /// BAR index (0-5).
    bar: u8,
    /// Byte offset in the BAR, decimal or 0x-hex, aligned to the width.
    #[arg(value_parser = parse_num)]
    offset: u64,
    /// Access width in bits: 8, 16, 32 (default) or 64; one single access of that size.
    #[arg(long, value_parser = parse_width, default_value = "32")]
    width: Width,
    /// Access path (default: sysfs when no driver is bound, vfio when bound to vfio-pci).
    #[arg(long, value_enum)]
    via: Option<ViaArg>,
}

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench poke 00:01.0 0 4 0x12345678 --allow-write     edu's liveness register (reads back inverted)
  pcibench poke sim 0 0x100 0xff --width 8")]
pub struct PokeArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    device: Target,
    /// BAR index (0-5).
    bar: u8,
    /// Byte offset in the BAR, decimal or 0x-hex, aligned to the width.
    #[arg(value_parser = parse_num)]
    offset: u64,
    /// Value to write, decimal or 0x-hex; must fit the width.
    #[arg(value_parser = parse_num)]
    value: u64,
    /// Access width in bits: 8, 16, 32 (default) or 64; one single store of that size.
    #[arg(long, value_parser = parse_width, default_value = "32")]
    width: Width,
    /// Access path (default: sysfs when no driver is bound, vfio when bound to vfio-pci).
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
    let region = s.dev.open_bar_read_only(a.bar, Mapping::Uc, IoMode::Mmap)?;
    let v = regs::peek(region.as_ref(), a.offset, a.width)?;
    super::emitln(&format!("{} BAR{}+{:#x} = {:#0w$x}", s.device.name(), a.bar, a.offset, v, w = digits(a.width) + 2));
    Ok(ExitCode::SUCCESS)
}

pub fn poke(host: &Host, a: PokeArgs) -> anyhow::Result<ExitCode> {
    let info = device::describe(host, &a.device)?;
    if !a.allow_write && !info.simulated {
        anyhow::bail!(pcibench::Error::Refused(format!(
            "poke writes to {} BAR{}: add --allow-write to consent to writing this device",
            info.address, a.bar
        )));
    }
    let s = Session::open(host, &a.device, a.via.map(ViaArg::via))?;
    let region = s.dev.open_bar(a.bar, Mapping::Uc, IoMode::Mmap)?;
    regs::poke(region.as_ref(), a.offset, a.width, a.value)?;
    super::emitln(&format!(
        "{} BAR{}+{:#x} <- {:#0w$x}",
        s.device.name(),
        a.bar,
        a.offset,
        a.value,
        w = digits(a.width) + 2
    ));
    Ok(ExitCode::SUCCESS)
}
