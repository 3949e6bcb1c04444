pub mod info;
pub mod list;
pub mod run;

use pcibench::pci::Target;

/// Parse a DEVICE argument (`DDDD:BB:DD.F`, `BB:DD.F` or `sim`).
pub fn parse_target(s: &str) -> Result<Target, String> {
    s.parse::<Target>().map_err(|e| e.to_string())
}

/// Print a JSON document on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}
