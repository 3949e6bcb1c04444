use super::{parse_target, print_json};
use clap::Args;
use pcibench::device::{self, Target};
use pcibench::host::Host;
use pcibench::pci::sysfs::Detail;
use pcibench::pci::IdFilter;
use pcibench::report::info::list_line;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench list                   every device, the simulated cards first
  pcibench list -d 10ee           Xilinx devices only
  pcibench list -s 15:00.0 --json")]
pub struct ListArgs {
    /// Only devices with this vendor (and device) id, in hex: VID or VID:DID.
    #[arg(short = 'd', value_name = "VID[:DID]", value_parser = |s: &str| s.parse::<IdFilter>().map_err(|e| e.to_string()))]
    ids: Option<IdFilter>,
    /// Only the device at this address (DDDD:BB:DD.F, BB:DD.F, or a simulated card).
    #[arg(short = 's', value_name = "ADDR", value_parser = parse_target)]
    slot: Option<Target>,
    /// One JSON document (an array of device objects, as `info --json`) on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(host: &Host, a: ListArgs) -> anyhow::Result<ExitCode> {
    // The text lines need only what lspci -nn reads; JSON carries every field `info` has.
    let detail = if a.json { Detail::Full } else { Detail::Summary };
    let (devices, problems) = device::list(host, a.ids, a.slot.as_ref(), detail)?;
    for p in &problems {
        eprintln!("warning: {p}");
    }
    if a.json {
        print_json(&devices)?;
    } else {
        for d in &devices {
            super::emitln(&list_line(d));
        }
    }
    Ok(ExitCode::SUCCESS)
}
