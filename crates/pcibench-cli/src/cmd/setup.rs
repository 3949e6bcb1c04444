use clap::Args;
use pcibench::host::Host;
use pcibench::pci::PciAddress;
use pcibench::setup::{self, SetupOptions};
use std::process::ExitCode;

fn parse_addr(s: &str) -> Result<PciAddress, String> {
    if pcibench::sim::SimId::from_name(s).is_some() {
        return Err(format!(
            "{s} is a simulated card: it needs no setup (setup binds a real PCI device to an access path)"
        ));
    }
    s.parse::<PciAddress>().map_err(|e| e.to_string())
}

#[derive(Args)]
#[command(after_help = "Examples:
  sudo pcibench setup 03:00.0 --vfio --user alice  bind to vfio-pci (no-IOMMU mode where there is no IOMMU), give alice the group
  sudo pcibench setup 03:00.0 --sysfs-user alice   let alice map the BARs through sysfs
  sudo pcibench setup 03:00.0 --release            give the device back to its previous driver
  sudo pcibench setup --id 10ee --vfio             every Xilinx function (checked with its whole IOMMU group first)
  sudo pcibench setup --id 10ee:9038 --release")]
#[command(group(clap::ArgGroup::new("action").required(true).args(["vfio", "sysfs_user", "release"])))]
#[command(group(clap::ArgGroup::new("which").required(true).args(["device", "id"])))]
pub struct SetupArgs {
    /// The device: DDDD:BB:DD.F or BB:DD.F.
    #[arg(value_parser = parse_addr)]
    device: Option<PciAddress>,
    /// Every function with these ids (hex VID or VID:DID, as lspci -d), with --vfio or --release:
    /// nothing changes unless no member of their IOMMU groups is in use.
    #[arg(long, value_name = "VID[:DID]", conflicts_with = "sysfs_user",
          value_parser = |s: &str| s.parse::<pcibench::pci::IdFilter>().map_err(|e| e.to_string()))]
    id: Option<pcibench::pci::IdFilter>,
    /// Bind to vfio-pci (enabling no-IOMMU mode where there is no IOMMU); the group node stays root's unless --user.
    #[arg(long)]
    vfio: bool,
    /// With --vfio: give NAME (a name, uid or uid:gid) the group node. A no-IOMMU group lets its
    /// opener DMA anywhere in host memory: root-equivalent, said in a warning.
    #[arg(long, value_name = "NAME", requires = "vfio")]
    user: Option<String>,
    /// Give USER the resource files and enable Memory Space, for sysfs access.
    #[arg(long, value_name = "USER")]
    sysfs_user: Option<String>,
    /// Unbind from vfio-pci and restore the original driver.
    #[arg(long)]
    release: bool,
    /// Take the device even when the running system uses it (a mounted filesystem, swap, an
    /// interface that is up, the console, a process holding it open) or processes that could not be
    /// checked might; each overridden use is printed before anything changes.
    #[arg(long)]
    force: bool,
}

pub fn run(host: &Host, a: SetupArgs) -> anyhow::Result<ExitCode> {
    // What --force overrides goes to stderr as it is decided, before anything changes.
    let notify: setup::Notify = std::sync::Arc::new(|m: &str| eprintln!("WARNING: {m}"));
    let user = a.user.as_deref().map(|u| setup::User::resolve(host, u)).transpose()?;
    let opts = SetupOptions { force: a.force, notify: Some(notify), user, ..SetupOptions::from_env() };
    let Some(device) = a.device else {
        let ids = a.id.unwrap_or_default();
        let each =
            if a.vfio { setup::vfio_by_id(host, &ids, &opts)? } else { setup::release_by_id(host, &ids, &opts)? };
        for e in &each {
            super::emit(&pcibench::report::setup::render_changes(&e.device, &e.changes));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let changes = if a.vfio {
        setup::vfio(host, &device, &opts)?
    } else if let Some(u) = &a.sysfs_user {
        setup::sysfs_user(host, &device, u, &opts)?
    } else {
        setup::release(host, &device, &opts)?
    };
    super::emit(&pcibench::report::setup::render_changes(&device.to_string(), &changes));
    Ok(ExitCode::SUCCESS)
}
