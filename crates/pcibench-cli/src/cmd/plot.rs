use super::emit;
use clap::Args;
use pcibench::file::Output;
use pcibench::report::plot::{self, Input};
use pcibench::results::saved;
use std::path::PathBuf;
use std::process::ExitCode;

/// `-o OUT.svg` (or `-` for stdout): checked before any file is read.
fn parse_output(s: &str) -> Result<Output, String> {
    Output::check("-o", "out.svg", s.as_ref()).map_err(|e| e.to_string())
}

#[derive(Args)]
#[command(after_help = "Examples:
  pcibench pio sim --bar 2 --size 8..1M --save pio.json && pcibench plot pio.json -o pio.svg
  pcibench plot before.json after.json --label 'BIOS 1.2' --label 'BIOS 1.3' -o bios.svg
  pcibench plot run.json -o - > run.svg")]
pub struct PlotArgs {
    /// Saved runs (written by --save FILE.json), drawn over each other.
    #[arg(required = true, value_name = "FILE.json")]
    files: Vec<PathBuf>,
    /// The SVG to write (- for stdout).
    #[arg(short = 'o', long = "output", value_name = "OUT.svg", value_parser = parse_output)]
    output: Output,
    /// A file's name in the legend, one per file in order (default: the file's name without .json).
    #[arg(long = "label", value_name = "LABEL")]
    labels: Vec<String>,
    /// The title line (default: the command and the device).
    #[arg(long)]
    title: Option<String>,
}

pub fn run(a: PlotArgs) -> anyhow::Result<ExitCode> {
    let labels = saved::labels(&a.files, &a.labels)?;
    let runs = a.files.iter().map(|f| saved::read(f)).collect::<Result<Vec<_>, _>>()?;
    let inputs: Vec<Input> = labels.into_iter().zip(&runs).map(|(label, run)| Input { label, run }).collect();
    let svg = plot::svg(&inputs, a.title.as_deref())?;
    match &a.output {
        Output::Stdout => emit(&svg),
        Output::File(dest) => dest.write(svg.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}
