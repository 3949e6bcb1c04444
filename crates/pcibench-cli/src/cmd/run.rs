use super::parse_target;
use clap::Args;
use pcibench::host::Host;
use pcibench::pci::{self, Target};
use pcibench::report::info::info_text;
use std::process::ExitCode;

#[derive(Args)]
pub struct RunArgs {
    /// The device (default: the simulated card `sim`).
    #[arg(value_parser = parse_target, default_value = "sim")]
    device: Target,
}

pub fn run(host: &Host, a: RunArgs) -> anyhow::Result<ExitCode> {
    let info = pci::describe(host, &a.device)?;
    print!("{}", info_text(&info));
    for w in &info.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}
