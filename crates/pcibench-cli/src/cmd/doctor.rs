use super::{parse_target, print_json};
use clap::Args;
use pcibench::doctor;
use pcibench::host::Host;
use pcibench::target::Target;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench doctor 15:00.0         each check with its evidence and fix, then the one recommended path
  pcibench doctor 15:00.0 --json")]
pub struct DoctorArgs {
    /// The device: DDDD:BB:DD.F, BB:DD.F, or a simulated card.
    #[arg(value_parser = parse_target)]
    device: Target,
    /// One JSON document on stdout (fields: device, checks, recommended, worst).
    #[arg(long)]
    json: bool,
}

/// Exit code: 0 all checks pass, 1 a warning, 2 a failure on the recommended path.
pub fn run(host: &Host, a: DoctorArgs) -> anyhow::Result<ExitCode> {
    let r = doctor::run(host, &a.device)?;
    if a.json {
        print_json(&r)?;
    } else {
        super::emit(&pcibench::report::doctor::render_text(&r));
    }
    Ok(ExitCode::from(r.exit_code()))
}
