use super::{parse_target, print_json};
use clap::Args;
use pcibench::host::Host;
use pcibench::pci::{self, Target};
use pcibench::report::info::info_text;
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

pub fn run(host: &Host, a: InfoArgs) -> anyhow::Result<ExitCode> {
    let info = pci::describe(host, &a.device)?;
    if a.json {
        print_json(&info)?;
    } else {
        print!("{}", info_text(&info));
        for w in &info.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
