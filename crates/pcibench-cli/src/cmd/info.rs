use super::{parse_target, print_json, TraceArgs};
use clap::Args;
use pcibench::device::{Device, Target};
use pcibench::dma::engines::Detected;
use pcibench::host::Host;
use pcibench::outcome::Outcome;
use pcibench::pci::DeviceInfo;
use pcibench::report::info::{engines_text, info_text, served_text};
use pcibench::session::Session;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench info sim
  pcibench info 15:00.0           BARs, link and its limits, the link partner, AER, DMA engines
  pcibench info 15:00.0 --json")]
pub struct InfoArgs {
    #[arg(value_parser = parse_target, help = super::help::device())]
    device: Target,
    /// One JSON document on stdout (field names in docs/json.md).
    #[arg(long)]
    json: bool,
    /// The registers the engine probes read (--trace FILE).
    #[command(flatten)]
    trace: TraceArgs,
}

#[derive(Serialize)]
struct InfoOut<'a> {
    #[serde(flatten)]
    info: &'a DeviceInfo,
    /// The DMA engines pcibench found on the device (where it could read their registers).
    engines: Vec<Detected>,
}

pub fn run(host: &Host, a: InfoArgs) -> anyhow::Result<ExitCode> {
    let tracer = a.trace.open()?;
    let described = Device::describe(host, &a.device);
    let engines = described.as_ref().map(|d| Session::engines_of(host, d, tracer.as_ref())).unwrap_or_default();
    let mut note = None;
    if let Some(t) = &tracer {
        let outcome = described.as_ref().map_or_else(Outcome::of_error, |_| Outcome::Ok);
        note = TraceArgs::end(t, outcome, described.as_ref().err().map(|e| e.to_string()).as_deref());
    }
    let info = described.map_err(|e| super::fold(e, note.clone()))?.info;
    if let Some(n) = note {
        eprintln!("pcibench: {n}");
    }
    if a.json {
        print_json(&InfoOut { info: &info, engines })?;
    } else {
        super::emit(&(info_text(&info) + &served_text(&info) + &engines_text(&engines)));
        for w in &info.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
