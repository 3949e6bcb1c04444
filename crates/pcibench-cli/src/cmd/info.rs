use super::{parse_target, print_json};
use clap::Args;
use pcibench::access::{self, IoMode, Mapping};
use pcibench::dma::engines::xdma::{self, XdmaInfo};
use pcibench::host::Host;
use pcibench::pci::{self, DeviceInfo, Target};
use pcibench::report::info::info_text;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Args)]
pub struct InfoArgs {
    /// The device: DDDD:BB:DD.F, BB:DD.F or sim.
    #[arg(value_parser = parse_target)]
    device: Target,
    /// One JSON document on stdout (field names in README "JSON output").
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct InfoOut<'a> {
    #[serde(flatten)]
    info: &'a DeviceInfo,
    /// The XDMA engine, when the device has one pcibench could read.
    xdma: Option<XdmaInfo>,
}

/// XDMA's registers, read-only, where it is safe to look: the sim card, and Xilinx devices that
/// pcibench can open (no kernel driver bound). Anything else is silently not probed.
fn probe_xdma(host: &Host, target: &Target, info: &DeviceInfo) -> Option<XdmaInfo> {
    if !(info.simulated || info.vendor_id == 0x10ee) {
        return None;
    }
    let dev = access::open(host, target, info, None).ok()?;
    let bar = access::dma_register_bars(info, dev.as_ref()).into_iter().next()?;
    let region = dev.open_bar(bar, Mapping::Uc, IoMode::Mmap).ok()?;
    xdma::probe(region.as_ref()).ok()
}

pub fn run(host: &Host, a: InfoArgs) -> anyhow::Result<ExitCode> {
    let info = pci::describe(host, &a.device)?;
    let xdma = probe_xdma(host, &a.device, &info);
    if a.json {
        print_json(&InfoOut { info: &info, xdma })?;
    } else {
        print!("{}", info_text(&info));
        if let Some(x) = xdma {
            println!("  DMA engine:    {}", x.to_string().replace('\n', "\n                 "));
        }
        for w in &info.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
