use super::{parse_target, print_json};
use clap::Args;
use pcibench::device::Target;
use pcibench::doctor;
use pcibench::host::Host;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench doctor 15:00.0         each check with its evidence and fix, then the one recommended path
  pcibench doctor 15:00.0 --json
  pcibench doctor 2d:00.0 --size 1G  also check that no-IOMMU DMA buffers can hold 1 GiB transfers")]
pub struct DoctorArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    device: Target,
    /// One JSON document on stdout (fields: device, checks, recommended, worst).
    #[arg(long)]
    json: bool,
    /// The DMA transfer size you plan (e.g. 1G): without an IOMMU, check that hugepages hold a
    /// source and a destination buffer of it (else doctor points at --buffer reserved).
    #[arg(long, value_parser = |s: &str| pcibench::units::parse_size(s).map_err(|e| e.to_string()))]
    size: Option<u64>,
}

/// Exit code: 0 all checks pass, 1 a warning, 2 a failure on the recommended path.
pub fn run(host: &Host, a: DoctorArgs) -> anyhow::Result<ExitCode> {
    let r = doctor::run_for(host, &a.device, a.size)?;
    if a.json {
        print_json(&r)?;
    } else {
        super::emit(&pcibench::report::doctor::render_text(&r));
    }
    Ok(ExitCode::from(r.exit_code()))
}
