use super::print_json;
use clap::Args;
use pcibench::host::Host;
use pcibench::pci::PciAddress;
use pcibench::reset::{self, Method};
use pcibench::setup::{self, SetupOptions};
use std::process::ExitCode;

fn parse_method(s: &str) -> Result<Method, String> {
    s.parse::<Method>().map_err(|e| e.to_string())
}

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench reset 01:00.0 --list                       the reset kinds the kernel offers for it
  sudo pcibench reset 01:00.0 --allow-reset           the first that applies (vfio, kernel, port)
  sudo pcibench reset 01:00.0 --method bus --allow-reset
  sudo pcibench reset 01:00.0 --method port --allow-reset   a secondary bus reset of its port
  sudo pcibench reset 01:00.0 --method bridge --allow-reset the same by pcibench, through the port's Bridge Control")]
pub struct ResetArgs {
    /// The device: DDDD:BB:DD.F or BB:DD.F.
    #[arg(value_parser = |s: &str| super::parse_pci(s, "kernel reset or bus to reset"))]
    device: PciAddress,
    /// How: auto, vfio, kernel, device_specific, acpi, flr, af_flr, pm, bus, cxl_bus, port or bridge
    /// (auto: VFIO_DEVICE_RESET when bound to vfio-pci, else the kernel's sysfs reset, else a bus
    /// reset of its port; bridge: pcibench's own bus reset through the port's Bridge Control).
    #[arg(long, value_parser = parse_method, default_value = "auto")]
    method: Method,
    /// Show the reset kinds the kernel offers for it and what auto takes; changes nothing.
    #[arg(long)]
    list: bool,
    /// Consent to reset this device (and, with --method port, every function below its port).
    #[arg(long)]
    allow_reset: bool,
    /// Reset it even when the running system uses it, or processes that could not be checked
    /// might; each overridden use is printed before anything changes.
    #[arg(long)]
    force: bool,
    /// One JSON document on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(host: &Host, a: ResetArgs) -> anyhow::Result<ExitCode> {
    if a.list {
        let o = reset::offered(host, &a.device)?;
        if a.json {
            print_json(&o)?;
        } else {
            super::emit(&pcibench::report::ops::offered_text(&o));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !a.allow_reset {
        anyhow::bail!(pcibench::Error::Refused(format!(
            "reset clears {}'s registers and stops whatever it was doing: add --allow-reset to consent (pcibench \
             reset {} --list shows how it would be reset)",
            a.device, a.device
        )));
    }
    let notify: setup::Notify = std::sync::Arc::new(|m: &str| eprintln!("WARNING: {m}"));
    let opts = SetupOptions { force: a.force, notify: Some(notify), ..SetupOptions::from_env() };
    let r = reset::reset(host, &a.device, a.method, &opts)?;
    if a.json {
        print_json(&r)?;
    } else {
        super::emit(&pcibench::report::ops::reset_text(&r));
    }
    // A function that does not answer after the reset is a failure of the command.
    Ok(if r.after.iter().all(|f| f.answers) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
